"""The one training loop every notebook uses.

``train(model, loss_fn, train_set, eval_set, config)`` runs ``config.epochs`` epochs of batches
from a batch sampler (default: :class:`dmlnb.samplers.MPerClassSampler`), evaluates every
``config.eval_every`` epochs with :func:`dmlnb.evaluation.evaluate`, keeps the best epoch (the
papers report the best epoch), and returns a run record (:class:`dmlnb.records.RunRecord`).

Where the best epoch is chosen is ``config.select_on``: ``"test"`` (the papers' protocol: the
best epoch on the test classes, an optimistic estimate) or ``"validation"`` (on classes held out
of training, ``val_set``, Musgrave et al. 2020; the test classes are then reported at that
epoch). With a ``val_set`` every evaluation measures both, and the record keeps the epoch each
protocol selects (``selections``), whichever one chose ``best``.

* CPU or CUDA picked automatically; channels_last on both (on two CPU threads it trains the
  book's convnet faster than NCHW: ``benchmarks/book.py --measure``, whose numbers for one
  machine are in ``benchmarks/results/book_cpu.txt``); on
  CUDA, mixed precision (bf16 autocast, or fp16 with a grad scaler where bf16 is unsupported),
  fused optimiser steps, cuDNN autotuning
  (unless deterministic algorithms are requested) and, with ``config.compile``, a
  ``torch.compile``-d model; losses always see float32 embeddings. A step on the GPU makes no
  host read: the loss and the losses' value checks are read back every 50 steps
  (:class:`LossMeter`).
* Seeded: on CPU two runs with the same config give identical weights.
* With ``run_dir`` set, a checkpoint and then the record (JSON) are written atomically after every
  epoch; a run that is interrupted resumes from its last finished epoch and, on the same device,
  ends exactly where an uninterrupted run would (batches of epoch e depend only on (seed, e); RNG
  states are saved). Resumed on another device (a CUDA-made checkpoint on a CPU machine or the
  reverse) it continues, and the record says so (``device_changed``, ``device_notes``,
  ``segments``). Re-running a folder after a crash at any point repairs ``record.json`` from the
  checkpoint and removes the temporary files a killed write left.
* Checkpoints hold only tensors and plain containers and are loaded with ``weights_only=True``
  (:mod:`dmlnb.checkpoints`).
* With the environment variable ``DMLNB_NO_TRAINING=1`` (set by ``python -m dmlnb render``) a
  run that is not already finished in its ``run_dir`` raises :class:`TrainingDisabledError`
  naming the folder instead of training; inside :func:`measuring` (a timing study's few steps,
  which store nothing but the study's table) a run without ``run_dir`` trains all the same.
* Per-step :class:`dmlnb.hooks.Hook` objects add samplers that need embeddings, gradient edits
  (proximal terms) and penalties without forking the loop.
"""

from __future__ import annotations

from dmlnb.env import NO_TRAINING_ENV, TrainingDisabledError, show_progress
from dmlnb.training.allowed import check_training_allowed, measuring
from dmlnb.training.device import mixed_precision, precision_description, resolve_device
from dmlnb.training.evaluating import evaluate_model
from dmlnb.training.fitting import evaluation_sets, fit
from dmlnb.training.inputs import check_dataset_labels
from dmlnb.training.loop import train
from dmlnb.training.meters import LossMeter, PhaseClock
from dmlnb.training.optimizer import build_optimizer

__all__ = [
    "train",
    "fit",
    "evaluation_sets",
    "resolve_device",
    "build_optimizer",
    "evaluate_model",
    "mixed_precision",
    "precision_description",
    "NO_TRAINING_ENV",
    "TrainingDisabledError",
    "check_training_allowed",
    "measuring",
    "check_dataset_labels",
    "LossMeter",
    "PhaseClock",
    "show_progress",
]
