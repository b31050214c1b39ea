"""Whether a run may train: ``DMLNB_NO_TRAINING=1`` refuses a run that would have to, except
the unstored steps of a timing study (:func:`measuring`)."""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

from dmlnb.env import NO_TRAINING_ENV, TrainingDisabledError

__all__ = ["measuring", "check_training_allowed"]

_MEASURING: ContextVar[bool] = ContextVar("dmlnb_measuring", default=False)


@contextlib.contextmanager
def measuring() -> Iterator[None]:
    """Inside, a run without a ``run_dir`` trains even with ``DMLNB_NO_TRAINING=1``.

    A timing study times a few training steps of runs that are never stored (``run_dir=None``):
    :func:`dmlnb.runs.stored_measurement` makes its table inside this context, so a render
    measures a missing or stale timing study as it measures one that needs no training. A run
    with a ``run_dir`` is checked as everywhere else."""
    token = _MEASURING.set(True)
    try:
        yield
    finally:
        _MEASURING.reset(token)


def check_training_allowed(run_dir: Path | None, what: str) -> None:
    """Raise :class:`TrainingDisabledError` when ``DMLNB_NO_TRAINING=1``: ``what`` (e.g. "epochs
    3-10") of the run in ``run_dir`` would have to be trained; the message says which record is
    missing and how to get it. A run without ``run_dir`` inside :func:`measuring` may train."""
    if os.environ.get(NO_TRAINING_ENV, "") in ("", "0"):
        return
    if run_dir is None:
        if _MEASURING.get():
            return
        raise TrainingDisabledError(
            f"training is disabled ({NO_TRAINING_ENV}=1, set by `python -m dmlnb render`) but "
            f"{what} would be trained by a run without run_dir, which has no record to reload: "
            "give the run a run_dir holding its finished record, or unset DMLNB_NO_TRAINING to "
            "train it here"
        )
    record, ckpt = run_dir / "record.json", run_dir / "checkpoint.pt"
    if not record.exists() and not ckpt.exists():
        where = f"{record} is missing"
    elif not ckpt.exists():
        where = f"{record} is there but {ckpt} (the trained weights this step needs) is not"
    else:
        where = f"{ckpt} holds an unfinished run"
    raise TrainingDisabledError(
        f"training is disabled ({NO_TRAINING_ENV}=1, set by `python -m dmlnb render`) but {what} "
        f"would be trained: {where}. Copy that run folder (record.json, analysis.json, "
        "checkpoint.pt, best.pt) from the machine that trained it into --runs, or render without "
        "--runs to train here"
    )
