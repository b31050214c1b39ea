"""Re-render a chapter from run records made elsewhere, without training.

``python -m dmlnb render NOTEBOOK --runs FOLDER --profile P -o OUT`` executes ``NOTEBOOK`` with
papermill, its ``results_dir`` parameter pointing at ``FOLDER`` (the chapter's results folder,
copied from the machine that trained: it holds ``P/<run>/record.json``, and for chapters that
draw from trained weights ``checkpoint.pt`` / ``best.pt``), ``retrain=False`` where the notebook
has that parameter, and training disabled (:data:`dmlnb.env.NO_TRAINING_ENV`): a run whose
finished record is missing stops the render with an error naming the file, instead of training. A
timing study whose stored table is missing or stale is measured here, on this machine, as in any
execution (its few unstored training steps included: :func:`dmlnb.training.measuring`).

This module holds the ``python -m dmlnb`` command line; its other command, ``train`` (a
chapter's runs trained in several processes), is :mod:`dmlnb.launch`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from dmlnb.env import NO_TRAINING_ENV
from dmlnb.profiles import PROFILE_ENV

__all__ = ["RenderError", "existing_notebook", "notebook_parameters", "render_call", "render", "build_parser", "main"]


class RenderError(ValueError):
    """The render cannot start (a missing notebook, runs folder or parameter)."""


def existing_notebook(notebook: str | Path, error: type[ValueError]) -> Path:
    """``notebook`` resolved; ``error`` (the caller's) names it when no such file exists."""
    path = Path(notebook).resolve()
    if not path.is_file():
        raise error(f"no notebook at {path}; pass a chapter, e.g. notebooks/02_facility_location.ipynb")
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
) -> dict[str, Any]:
    """The keyword arguments of ``papermill.execute_notebook`` that render ``notebook`` from the
    records in ``runs`` (checked: the notebook has a ``results_dir`` parameter and ``runs``
    holds a ``profile`` folder)."""
    notebook, runs, output = existing_notebook(notebook, RenderError), Path(runs).resolve(), Path(output).resolve()
    if output == notebook:
        raise RenderError(f"-o {output} is the notebook itself; write the render elsewhere")
    names = notebook_parameters(notebook)
    if "results_dir" not in names:
        raise RenderError(
            f"{notebook.name} has no `results_dir` parameter (its parameters: {sorted(names)}); "
            "only chapters that reload run records can be rendered from --runs"
        )
    if not runs.is_dir():
        raise RenderError(f"--runs {runs} is not a folder; pass the copied results folder of the chapter")
    if not (runs / profile).is_dir():
        hint = (f"; it looks like the {profile} folder itself: pass its parent {runs.parent}"
                if runs.name == profile else "")
        raise RenderError(
            f"--runs {runs} holds no {profile!r} folder: pass the chapter's results folder, which "
            f"holds one folder per profile (e.g. results/{notebook.stem}, holding {profile}/){hint}"
        )
    parameters: dict[str, Any] = {"profile": profile, "results_dir": str(runs)}
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


def render(notebook: str | Path, runs: str | Path, profile: str, output: str | Path, **options: Any) -> Path:
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


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m dmlnb`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m dmlnb",
        description=("dmlnb command line: re-render a chapter of the book from copied run records, or "
                     "train a chapter's runs in several processes."),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    sub = commands.add_parser(
        "render",
        help="execute a chapter from run records made elsewhere, never training",
        description=(
            "Execute NOTEBOOK with papermill, its results_dir pointing at --runs, retrain=False, "
            f"and training disabled ({NO_TRAINING_ENV}=1): a run whose finished record is missing "
            "stops the render with an error that names the missing file. A timing study whose stored "
            "table is missing or stale is measured on this machine."
        ),
    )
    sub.add_argument("notebook", type=Path, help="the chapter, e.g. notebooks/02_facility_location.ipynb")
    sub.add_argument("--runs", type=Path, required=True,
                     help="the chapter's results folder copied from the machine that trained "
                          "(holds PROFILE/<run>/record.json), e.g. /copied/results/02_facility_location")
    sub.add_argument("--profile", default="default", help="profile the records were made with (default: %(default)s)")
    sub.add_argument("-o", "--output", type=Path, required=True, help="where to write the executed notebook")
    sub.add_argument("--data-root", type=Path, default=None,
                     help="dataset folder (default: the notebook's, i.e. $DMLNB_DATA or ~/.cache/dmlnb)")
    sub.add_argument("--kernel", default="python3", help="Jupyter kernel (default: %(default)s)")
    sub.add_argument("--log-output", action="store_true", help="echo the cells' output while running")
    sub = commands.add_parser(
        "train",
        help="train a chapter's runs in several processes (shards), then discard the executed notebooks",
        description=(
            "Execute NOTEBOOK in --processes processes at once with papermill, process i being shard i of "
            "the run layer (DMLNB_SHARD=i/N): each run is trained by the process that reaches it first and "
            "reloaded by the others, a timing study is measured by shard 0 while the others wait. Each process gets "
            "max(1, OMP_NUM_THREADS // N) threads (the CPU count when OMP_NUM_THREADS is unset). The "
            "executed notebooks are discarded; render the chapter afterwards (papermill in place): "
            "every run is then reloaded. A failed process stops the others."
        ),
    )
    sub.add_argument("notebook", type=Path, help="the chapter, e.g. notebooks/02_facility_location.ipynb")
    sub.add_argument("--processes", type=int, default=2, help="processes (shards) at once (default: %(default)s; "
                                                               "1 executes the notebook once, without shards)")
    sub.add_argument("--profile", default="default", help="the notebook's profile parameter (default: %(default)s)")
    sub.add_argument("--retrain", action="store_true",
                     help="pass retrain=True (to notebooks that have that parameter): train every run again")
    sub.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="another notebook parameter, read as papermill's -p reads it (repeatable)")
    sub.add_argument("--kernel", default="python3", help="Jupyter kernel (default: %(default)s)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dmlnb``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "render":
        import papermill

        try:
            out = render(args.notebook, args.runs, args.profile, args.output, data_root=args.data_root,
                         kernel=args.kernel, log_output=args.log_output)
        except RenderError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except papermill.PapermillExecutionError as err:
            print(f"error: {args.notebook} failed in cell {err.exec_count}: {err.ename}: {err.evalue}\n"
                  f"(the partly executed notebook is in {args.output})", file=sys.stderr)
            return 1
        print(f"rendered {args.notebook} from {args.runs} ({args.profile}) -> {out}")
    elif args.command == "train":
        from dmlnb.launch import LaunchError, WorkerFailed, train_notebook

        try:
            train_notebook(args.notebook, args.processes, args.profile, retrain=args.retrain,
                           parameters=[tuple(p) for p in args.parameter], kernel=args.kernel)
        except LaunchError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except WorkerFailed as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    return 0
