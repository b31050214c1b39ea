"""Which code made the runs (commit, uncommitted changes, threads, times), what selecting each
run's best epoch adds, and whether a paper-scale run can be reproduced here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pandas as pd
import torch

from dmlnb.records import GIT_SCOPE, package_changed

if TYPE_CHECKING:
    from dmlnb.profiles import TrainConfig
    from dmlnb.records import RunRecord

__all__ = [
    "provenance_frame",
    "provenance_text",
    "provenance_groups",
    "best_minus_last",
    "paper_run_status",
]


def provenance_frame(records: Iterable["RunRecord"]) -> pd.DataFrame:
    """Which code made each run, one row per record: ``run`` (its name), ``commit`` (git, ``""``
    when unknown), ``dirty`` (whether the package's files differed from that commit,
    :func:`~dmlnb.records.package_changed`; ``None`` when unknown), ``threads``, ``started`` /
    ``finished`` (ISO times, ``""`` when missing) and ``train seconds`` (NaN when missing).
    :func:`provenance_text` and :func:`provenance_groups` summarise it for the chapters."""
    rows = []
    for record in records:
        env = record.data.get("environment", {})
        git = env.get("git") or {}
        rows.append(
            {
                "run": record.data["name"],
                "commit": str(git.get("commit") or ""),
                "dirty": package_changed(git),
                "threads": env.get("threads"),
                "started": str(record.data.get("started") or ""),
                "finished": str(record.data.get("finished") or ""),
                "train seconds": float(record.data.get("total_train_seconds", math.nan)),
            }
        )
    return pd.DataFrame(
        rows, columns=["run", "commit", "dirty", "threads", "started", "finished", "train seconds"]
    )


def provenance_text(frame: pd.DataFrame) -> str:
    """One sentence on which code made the runs of a :func:`provenance_frame`: how many records,
    the commits they name (first 10 characters, in order of appearance), and for how many the
    package (``dmlnb/``) had uncommitted changes, had none, or is unknown (records made before the
    flag was scoped to the package: theirs also counted the tree's run records and notebooks)."""
    n = len(frame)
    commits = [c for c in dict.fromkeys(frame["commit"]) if c]
    named = (
        f"{len(commits)} commit{'s' * (len(commits) != 1)} ({', '.join(c[:10] for c in commits)})"
        if commits
        else "no commit"
    )
    dirty = frame["dirty"]
    changed, clean = int((dirty == True).sum()), int((dirty == False).sum())  # noqa: E712 (None: unknown)
    unknown = n - changed - clean
    parts = [
        f"{changed} with uncommitted changes to {GIT_SCOPE}/" if changed else "",
        f"{clean} without" + ("" if changed else f" uncommitted changes to {GIT_SCOPE}/")
        if clean
        else "",
        f"{unknown} unknown (made before records scoped their git 'dirty' flag to {GIT_SCOPE}/; "
        "theirs also counted the run records and notebooks the book's runs rewrite)"
        if unknown
        else "",
    ]
    return (
        f"{n} run record{'s' * (n != 1)} from {named}: " + ", ".join(p for p in parts if p)
        if n
        else "no run records"
    )


def provenance_groups(frame: pd.DataFrame, sets: Sequence[str] | None = None) -> pd.DataFrame:
    """A :func:`provenance_frame` grouped by (commit, package changed, threads): the runs and when
    the first and the last of them finished (UTC, to the minute); with ``sets`` (one name per row,
    e.g. the run without its seed) also ``run sets``, each set's runs in the group
    (``"a x3, b x1"``). ``package changed`` is ``True``, ``False`` or ``"unknown"``."""
    df = pd.DataFrame(
        {
            "commit": frame["commit"].replace("", "?").str[:10].to_numpy(),
            "package changed": [
                "unknown" if d is None or d != d else bool(d) for d in frame["dirty"]
            ],
            "threads": ["?" if t is None or t != t else int(t) for t in frame["threads"]],
            "finished": frame["finished"].str[:16].str.replace("T", " ").to_numpy(),
            "set": list(sets) if sets is not None else [""] * len(frame),
        }
    )
    aggregates: dict[str, Any] = dict(
        runs=("finished", "size"), first=("finished", "min"), last=("finished", "max")
    )
    if sets is not None:
        aggregates["run sets"] = (
            "set",
            lambda v: ", ".join(f"{k} x{n}" for k, n in sorted(v.value_counts().items())),
        )
    return (
        df.groupby(["commit", "package changed", "threads"], sort=False)
        .agg(**aggregates)
        .reset_index()
    )


def best_minus_last(records: Iterable["RunRecord"], metric: str = "R@1") -> list[float]:
    """What choosing each run's best evaluation adds: per record with evaluations
    (:meth:`~dmlnb.records.RunRecord.evaluations`), ``metric`` at the best epoch minus at the
    last evaluation (0 when the best is the last; the best epoch is the one ``config.select_on``
    chose: on the test classes, the papers' protocol, unless the run selected on validation)."""
    out = []
    for record in records:
        evaluated = record.evaluations()
        if evaluated:
            out.append(float(record.best["metrics"][metric] - evaluated[-1]["metrics"][metric]))
    return out


def paper_run_status(
    configs: Sequence["TrainConfig"], data_root: str | Path | None = None
) -> pd.DataFrame:
    """Whether each run of Table 2 can be reproduced here: a CUDA GPU and the dataset's files.

    Returns one row per config: ``dataset``, ``gpu`` (bool), ``data`` ("found" or the first
    line of the loader's missing-file error) and ``runnable``.
    """
    from dmlnb.data import load_dataset

    gpu = torch.cuda.is_available()
    rows = []
    for cfg in configs:
        try:
            load_dataset(cfg.dataset, root=data_root, **cfg.dataset_options)
            data = "found"
        except FileNotFoundError as err:
            data = str(err).splitlines()[0]
        rows.append(
            {"dataset": cfg.dataset, "gpu": gpu, "data": data, "runnable": gpu and data == "found"}
        )
    return pd.DataFrame(rows, columns=["dataset", "gpu", "data", "runnable"])
