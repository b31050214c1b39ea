"""``python -m dmlnb replicate``: a chapter trained again on an independent set of seeds, its
verdicts compared claim by claim with the book's (:mod:`dmlnb.chapter.replication`).

:func:`replicate` trains the chapter's runs with every seed shifted by ``seed_offset`` into
another results folder (:func:`dmlnb.launch.train_notebook`, shards included), renders the chapter
from them (:func:`dmlnb.render.render`: its claims land in ``<runs>/<profile>/claims.json``),
compares them with the book's ``claims.json`` and stores the comparison beside them
(``replication.json``). Only a chapter whose notebook takes a ``seed_offset`` parameter (its runs
declared on the chapter layer) can be replicated.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from dmlnb.chapter.replication import compare_claims, replication_summary
from dmlnb.launch import train_notebook
from dmlnb.records import write_json_atomic
from dmlnb.render import existing_notebook, notebook_parameters, render

__all__ = ["ReplicationError", "book_claims_folder", "replicate", "REPLICATION_FILE"]

REPLICATION_FILE = "replication.json"


class ReplicationError(ValueError):
    """The replication cannot start (no such notebook, no ``seed_offset`` parameter, offset 0)."""


def book_claims_folder(notebook: Path, profile: str) -> Path:
    """Where the book keeps ``notebook``'s claims at ``profile``: the default of its
    ``results_dir`` parameter (relative to the notebook's folder) / ``profile``."""
    import papermill

    default = papermill.inspect_notebook(str(notebook))["results_dir"]["default"]
    return (notebook.parent / ast.literal_eval(default) / profile).resolve()


def replicate(
    notebook: str | Path,
    seed_offset: int,
    runs: str | Path,
    *,
    processes: int = 2,
    profile: str = "default",
    book: str | Path | None = None,
    kernel: str = "python3",
    say: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Train and render ``notebook`` with ``seed_offset`` into ``runs`` and compare its claims
    with the book's (``book``: the folder of the book's ``claims.json``; default
    :func:`book_claims_folder`). Returns :func:`dmlnb.chapter.compare_claims`'s frame, also
    written to ``<runs>/<profile>/replication.json`` with its summary.

    Raises:
        ReplicationError: no notebook, no ``seed_offset`` or ``results_dir`` parameter, or an
            offset of 0 (the book's own seeds).
        FileNotFoundError: the book has no ``claims.json`` at ``profile``.
    """
    notebook = existing_notebook(notebook, ReplicationError)
    missing = sorted({"seed_offset", "results_dir"} - notebook_parameters(notebook))
    if missing:
        raise ReplicationError(
            f"{notebook.name} has no {missing} parameter: only a chapter whose runs are declared "
            "on the chapter layer (dmlnb.chapter.train_runs(..., seed_offset=...)) replicates"
        )
    if int(seed_offset) == 0:
        raise ReplicationError("--seed-offset 0 trains the book's own seeds; pass e.g. 100")
    book_folder = Path(book) if book is not None else book_claims_folder(notebook, profile)
    runs = Path(runs).resolve()
    parameters = [("results_dir", str(runs)), ("seed_offset", str(int(seed_offset)))]
    train_notebook(notebook, processes, profile, parameters=parameters, kernel=kernel, say=say)
    render(
        notebook,
        runs,
        profile,
        runs / profile / notebook.name,
        kernel=kernel,
        parameters={"seed_offset": int(seed_offset)},
    )
    frame = compare_claims(book_folder, runs / profile)
    write_json_atomic(
        runs / profile / REPLICATION_FILE,
        {
            "notebook": notebook.name,
            "seed_offset": int(seed_offset),
            "summary": replication_summary(frame),
            "claims": frame.astype(object).where(frame.notna(), None).to_dict("records"),
        },
    )
    return frame
