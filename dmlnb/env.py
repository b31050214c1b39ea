"""The environment variables that switch training and progress bars off, and what they need.

A leaf module (it imports nothing from :mod:`dmlnb`), so that the data layer, the training loop,
the run layer and the command line (:mod:`dmlnb.cli`, :mod:`dmlnb.render`, :mod:`dmlnb.launch`)
can all read them without importing each other:

* ``DMLNB_NO_TRAINING=1`` (:data:`NO_TRAINING_ENV`, set by ``python -m dmlnb render``): a run that
  is not finished in its folder raises :class:`TrainingDisabledError` instead of training
  (:func:`dmlnb.training.check_training_allowed`).
* ``DMLNB_PROGRESS=0`` (:data:`PROGRESS_ENV`): no progress bars by default (:func:`show_progress`).
"""

from __future__ import annotations

import os

__all__ = ["NO_TRAINING_ENV", "TrainingDisabledError", "PROGRESS_ENV", "show_progress"]

NO_TRAINING_ENV = "DMLNB_NO_TRAINING"
"""Environment variable: ``"1"`` makes every run that is not finished in its folder raise."""
PROGRESS_ENV = "DMLNB_PROGRESS"
"""Set to ``0`` to hide the training progress bars by default (``make notebooks`` does, so that
executed notebooks store no progress-bar fragments)."""


def show_progress(progress: bool | None) -> bool:
    """``progress`` when given, else ``True`` unless the environment sets ``DMLNB_PROGRESS=0``."""
    return progress if progress is not None else os.environ.get(PROGRESS_ENV, "1") != "0"


class TrainingDisabledError(RuntimeError):
    """A run would train while training is disabled (``DMLNB_NO_TRAINING=1``)."""
