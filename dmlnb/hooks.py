"""Per-step hooks of the training loop (:func:`dmlnb.training.train`).

A hook sees the loop's :class:`TrainState` at fixed points of every step. Samplers that need the
model's view of the data (PROFS representatives, hard negative class mining) and regularisers
that act on the gradient (the PROFS proximal term) plug in here instead of forking the loop.

Order inside one step::

    on_step_start -> forward -> loss (+ sum of hook.penalty) -> backward
    -> after_backward -> optimiser step -> on_step_end

and after the last step of an epoch ``on_epoch_end``, then ``epoch_summary`` (entries for the
epoch's history row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Hook", "TrainState"]


@dataclass
class TrainState:
    """What a hook can read (and, for the documented fields, change) during training.

    Attributes:
        model: the embedding network being trained.
        loss_fn: the batch loss module.
        optimizer: the optimiser (its param groups include the loss's parameters).
        device: where the batch lives.
        epoch: current epoch, 0-based.
        step: global optimiser step count, 0-based, of the step in progress.
        indices: ``(B,)`` long, dataset indices of the current batch (``None`` outside a step).
        labels: ``(B,)`` long, labels of the current batch.
        embeddings: ``(B, D)`` the batch embeddings after the forward pass (with grad).
        loss: the scalar loss of the step (after ``backward`` it is detached).
        extras: free-form per-run scratch space shared between hooks.
    """

    model: nn.Module
    loss_fn: nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    epoch: int = 0
    step: int = 0
    indices: Tensor | None = None
    labels: Tensor | None = None
    embeddings: Tensor | None = None
    loss: Tensor | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class Hook:
    """Base class: every method is a no-op; override the ones you need."""

    def on_train_start(self, state: TrainState) -> None:
        """Once, before the first step (and again after resuming from a checkpoint)."""

    def on_step_start(self, state: TrainState) -> None:
        """Before the forward pass; ``state.indices``/``labels`` are set."""

    def penalty(self, state: TrainState) -> Tensor | None:
        """An extra scalar added to the loss before ``backward`` (``None`` for nothing)."""
        return None

    def after_backward(self, state: TrainState) -> None:
        """After ``backward`` and before the optimiser step: gradients may be edited here."""

    def on_step_end(self, state: TrainState) -> None:
        """After the optimiser step; ``state.embeddings`` holds the (detached) batch embeddings."""

    def on_epoch_end(self, state: TrainState) -> None:
        """After the last step of an epoch, before evaluation."""

    def epoch_summary(self, state: TrainState) -> dict[str, Any]:
        """Entries added to the epoch's history row in the run record (after ``on_epoch_end``)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """State to checkpoint so a resumed run continues identically."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
