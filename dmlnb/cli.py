"""The ``python -m dmlnb`` command line: :func:`main` and its argument parser.

Three commands: ``render`` (a chapter re-executed from copied run records, never training:
:mod:`dmlnb.render`), ``train`` (a chapter's runs trained in several processes:
:mod:`dmlnb.launch`) and ``replicate`` (a chapter trained again on other seeds, its verdicts
compared with the book's: :mod:`dmlnb.replicate`). ``python -m dmlnb`` (:mod:`dmlnb.__main__`)
calls :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from dmlnb.env import NO_TRAINING_ENV
from dmlnb.launch import LaunchError, WorkerFailed, train_notebook
from dmlnb.render import RenderError, render

__all__ = ["build_parser", "main"]


_NOTEBOOK_HELP = "the chapter, e.g. notebooks/02_facility_location.ipynb"


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m dmlnb`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m dmlnb",
        description=(
            "dmlnb command line: re-render a chapter of the book from copied run "
            "records, or train a chapter's runs in several processes."
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    _add_render(commands)
    _add_train(commands)
    _add_replicate(commands)
    return parser


def _command(commands: Any, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """The parser of the command ``name``, with the chapter's notebook as its first argument."""
    sub = commands.add_parser(name, help=help, description=description)
    sub.add_argument("notebook", type=Path, help=_NOTEBOOK_HELP)
    return sub


def _fail(err: Exception, status: int) -> int:
    """Print ``err`` as the command's error and return the exit ``status``."""
    print(f"error: {err}", file=sys.stderr)
    return status


def _add_render(commands: Any) -> None:
    """The ``render`` command's arguments."""
    sub = _command(
        commands,
        "render",
        help="execute a chapter from run records made elsewhere, never training",
        description=(
            "Execute NOTEBOOK with papermill, its results_dir pointing at --runs, retrain=False, "
            f"and training disabled ({NO_TRAINING_ENV}=1): a run whose finished record is missing "
            "stops the render with an error that names the missing file. A timing study whose "
            "stored table is missing or stale is measured on this machine."
        ),
    )
    sub.add_argument(
        "--runs",
        type=Path,
        required=True,
        help="the chapter's results folder copied from the machine that trained "
        "(holds PROFILE/<run>/record.json), e.g. "
        "/copied/results/02_facility_location",
    )
    sub.add_argument(
        "--profile",
        default="default",
        help="profile the records were made with (default: %(default)s)",
    )
    sub.add_argument(
        "-o", "--output", type=Path, required=True, help="where to write the executed notebook"
    )
    sub.add_argument(
        "--data-root",
        type=Path,
        default=None,
        help="dataset folder (default: the notebook's, i.e. $DMLNB_DATA or ~/.cache/dmlnb)",
    )
    sub.add_argument("--kernel", default="python3", help="Jupyter kernel (default: %(default)s)")
    sub.add_argument(
        "--log-output", action="store_true", help="echo the cells' output while running"
    )


def _add_train(commands: Any) -> None:
    """The ``train`` command's arguments."""
    sub = _command(
        commands,
        "train",
        help="train a chapter's runs in several processes (shards), then discard the executed "
        "notebooks",
        description=(
            "Execute NOTEBOOK in --processes processes at once with papermill, process i being "
            "shard i of the run layer (DMLNB_SHARD=i/N): each run is trained by the process that "
            "reaches it first and reloaded by the others, a timing study is measured by shard 0 "
            "while the others wait. Each process gets max(1, OMP_NUM_THREADS // N) threads (the "
            "CPU count when OMP_NUM_THREADS is unset). The executed notebooks are discarded; "
            "render the chapter afterwards (papermill in place): every run is then reloaded. A "
            "failed process stops the others."
        ),
    )
    sub.add_argument(
        "--processes",
        type=int,
        default=2,
        help="processes (shards) at once (default: %(default)s; 1 executes the "
        "notebook once, without shards)",
    )
    sub.add_argument(
        "--profile",
        default="default",
        help="the notebook's profile parameter (default: %(default)s)",
    )
    sub.add_argument(
        "--retrain",
        action="store_true",
        help="pass retrain=True (to notebooks that have that parameter): train every run again",
    )
    sub.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="another notebook parameter, read as papermill's -p reads it (repeatable)",
    )
    sub.add_argument("--kernel", default="python3", help="Jupyter kernel (default: %(default)s)")


def _add_replicate(commands: Any) -> None:
    """The ``replicate`` command's arguments."""
    sub = _command(
        commands,
        "replicate",
        help="train a chapter again on other seeds and compare its verdicts with the book's",
        description=(
            "Train NOTEBOOK's runs with every seed shifted by --seed-offset into --runs (as the "
            "train command does, in --processes shards), render the chapter from them (its "
            "claims.json lands in RUNS/PROFILE/) and compare its verdicts with the book's, claim "
            "by claim: a claim agrees when both verdicts fall in one category. The comparison is "
            "printed and stored in RUNS/PROFILE/replication.json."
        ),
    )
    sub.add_argument("--seed-offset", type=int, required=True, help="added to every seed, e.g. 100")
    sub.add_argument(
        "--runs",
        type=Path,
        required=True,
        help="the replica's results folder, named like the book's, e.g. "
        "results-replica/00_protocol (chapter 00 reads the runs of every chapter beside it)",
    )
    sub.add_argument("--processes", type=int, default=2, help="shards (default: %(default)s)")
    sub.add_argument("--profile", default="default", help="the profile (default: %(default)s)")
    sub.add_argument(
        "--book",
        type=Path,
        default=None,
        help="the folder of the book's claims.json (default: the notebook's results_dir/PROFILE)",
    )
    sub.add_argument("--kernel", default="python3", help="Jupyter kernel (default: %(default)s)")


def _replicate(args: argparse.Namespace) -> int:
    """Run the ``replicate`` command; its exit status."""
    import pandas as pd

    from dmlnb.chapter import replication_summary
    from dmlnb.replicate import ReplicationError, replicate

    try:
        frame = replicate(
            args.notebook,
            args.seed_offset,
            args.runs,
            processes=args.processes,
            profile=args.profile,
            book=args.book,
            kernel=args.kernel,
        )
    except (ReplicationError, LaunchError, RenderError, FileNotFoundError) as err:
        return _fail(err, 2)
    except WorkerFailed as err:
        return _fail(err, 1)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(frame.drop(columns=["claim"]).to_string(index=False))
    s = replication_summary(frame)
    print(
        f"{s['agreeing']} of {s['tested']} tested claims agree, {s['disagreeing']} disagree "
        f"({s['claims'] - s['tested']} not tested on either side)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dmlnb``; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "render":
        import papermill

        try:
            out = render(
                args.notebook,
                args.runs,
                args.profile,
                args.output,
                data_root=args.data_root,
                kernel=args.kernel,
                log_output=args.log_output,
            )
        except RenderError as err:
            return _fail(err, 2)
        except papermill.PapermillExecutionError as err:
            print(
                f"error: {args.notebook} failed in cell {err.exec_count}: {err.ename}: "
                f"{err.evalue}\n(the partly executed notebook is in {args.output})",
                file=sys.stderr,
            )
            return 1
        print(f"rendered {args.notebook} from {args.runs} ({args.profile}) -> {out}")
    elif args.command == "train":
        try:
            train_notebook(
                args.notebook,
                args.processes,
                args.profile,
                retrain=args.retrain,
                parameters=[tuple(p) for p in args.parameter],
                kernel=args.kernel,
            )
        except LaunchError as err:
            return _fail(err, 2)
        except WorkerFailed as err:
            return _fail(err, 1)
    elif args.command == "replicate":
        return _replicate(args)
    return 0
