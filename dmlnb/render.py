"""Re-render a chapter from run records made elsewhere, without training.

``python -m dmlnb render NOTEBOOK --runs FOLDER --profile P -o OUT`` executes ``NOTEBOOK`` with
papermill, its ``results_dir`` parameter pointing at ``FOLDER`` (the chapter's results folder,
copied from the machine that trained: it holds ``P/<run>/record.json``, and for chapters that
draw from trained weights ``checkpoint.pt`` / ``best.pt``), ``retrain=False`` where the notebook
has that parameter, and training disabled (:data:`dmlnb.env.NO_TRAINING_ENV`): a run whose
finished record is missing stops the render with an error naming the file, instead of training. A
timing study whose stored table is missing or stale is measured here, on this machine, as in any
execution (its few unstored training steps included: :func:`dmlnb.training.measuring`).

The ``python -m dmlnb`` command line is :mod:`dmlnb.cli`; its other command, ``train`` (a
chapter's runs trained in several processes), is :mod:`dmlnb.launch`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dmlnb.env import NO_TRAINING_ENV
from dmlnb.profiles import PROFILE_ENV

__all__ = ["RenderError", "existing_notebook", "notebook_parameters", "render_call", "render"]


class RenderError(ValueError):
    """The render cannot start (a missing notebook, runs folder or parameter)."""


def existing_notebook(notebook: str | Path, error: type[ValueError]) -> Path:
    """``notebook`` resolved; ``error`` (the caller's) names it when no such file exists."""
    path = Path(notebook).resolve()
    if not path.is_file():
        raise error(
            f"no notebook at {path}; pass a chapter, e.g. notebooks/02_facility_location.ipynb"
        )
    return path


def notebook_parameters(notebook: Path) -> set[str]:
    """The names of ``notebook``'s papermill parameters."""
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def render_call(
    notebook: str | Path,
    runs: str | Path,
    profile: str,
    output: str | Path,
    *,
    data_root: str | Path | None = None,
    kernel: str = "python3",
    log_output: bool = False,
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``papermill.execute_notebook`` that render ``notebook`` from the
    records in ``runs`` (checked: the notebook has a ``results_dir`` parameter and ``runs``
    holds a ``profile`` folder), with further notebook ``parameters`` (each one the notebook
    has, e.g. ``{"seed_offset": 100}``)."""
    notebook, runs, output = (
        existing_notebook(notebook, RenderError),
        Path(runs).resolve(),
        Path(output).resolve(),
    )
    if output == notebook:
        raise RenderError(f"-o {output} is the notebook itself; write the render elsewhere")
    names = notebook_parameters(notebook)
    if "results_dir" not in names:
        raise RenderError(
            f"{notebook.name} has no `results_dir` parameter (its parameters: {sorted(names)}); "
            "only chapters that reload run records can be rendered from --runs"
        )
    if not runs.is_dir():
        raise RenderError(
            f"--runs {runs} is not a folder; pass the copied results folder of the chapter"
        )
    if not (runs / profile).is_dir():
        hint = (
            f"; it looks like the {profile} folder itself: pass its parent {runs.parent}"
            if runs.name == profile
            else ""
        )
        raise RenderError(
            f"--runs {runs} holds no {profile!r} folder: pass the chapter's results folder, which "
            f"holds one folder per profile (e.g. results/{notebook.stem}, holding {profile}/){hint}"
        )
    unknown = sorted(set(parameters or {}) - names)
    if unknown:
        raise RenderError(
            f"{notebook.name} has no parameter {unknown} (its parameters: {sorted(names)})"
        )
    parameters = {**(parameters or {}), "profile": profile, "results_dir": str(runs)}
    if "retrain" in names:
        parameters["retrain"] = False
    if data_root is not None:
        parameters["data_root"] = str(Path(data_root).resolve())
    return {
        "input_path": str(notebook),
        "output_path": str(output),
        "parameters": parameters,
        "kernel_name": kernel,
        "cwd": str(notebook.parent),
        "log_output": log_output,
        "progress_bar": False,
    }


def render(
    notebook: str | Path, runs: str | Path, profile: str, output: str | Path, **options: Any
) -> Path:
    """Render ``notebook`` from ``runs`` into ``output`` (see :func:`render_call`) with training
    disabled; returns ``output``.

    Raises:
        RenderError: the render cannot start.
        papermill.PapermillExecutionError: a cell failed, e.g. a record is missing (the error
            names it).
    """
    import papermill

    call = render_call(notebook, runs, profile, output, **options)
    Path(call["output_path"]).parent.mkdir(parents=True, exist_ok=True)
    # inherited by the kernel papermill starts: no training, and the profile asked for (a
    # DMLNB_PROFILE left in the shell would otherwise override the notebook's parameter)
    kernel_env = {NO_TRAINING_ENV: "1", PROFILE_ENV: profile}
    before = {k: os.environ.get(k) for k in kernel_env}
    os.environ.update(kernel_env)
    try:
        papermill.execute_notebook(**call)
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return Path(call["output_path"])
