"""Base class of every batch loss in :mod:`dmlnb.losses`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from dmlnb.pairs import check_batch

__all__ = ["MetricLoss", "zero_loss"]


def zero_loss(embeddings: Tensor) -> Tensor:
    """A scalar 0 that stays attached to the graph (``backward`` works, gradients are 0)."""
    return embeddings.sum() * 0.0


class MetricLoss(nn.Module):
    """A loss on a labelled batch: ``loss(embeddings (B, D), labels (B,)) -> scalar``.

    Subclasses implement :meth:`compute`. :meth:`forward` validates the batch first (shape, NaN)
    and checks the result is finite, so a diverging run fails loudly at the step it diverges.
    A batch for which the loss has no term (e.g. no positive pair) returns a graph-attached 0
    and never NaN. Losses with learnable state (proxies, centres, a margin boundary) are
    ``nn.Module`` parameters: pass ``loss.parameters()`` to the optimiser (the training loop does).
    """

    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        check_batch(embeddings, labels)
        loss = self.compute(embeddings, labels)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"{type(self).__name__} produced a non-finite loss ({loss.item()}); "
                "check the learning rate and the loss's scale/temperature settings"
            )
        return loss

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError
