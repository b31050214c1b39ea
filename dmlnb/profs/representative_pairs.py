"""PROFS's losses on the pairs of the class representatives (Can, Gürbüz & Alatan, Sec. 5.3):
a pair-based loss restricted, through its ``pair_filter``, to the pairs of a
:class:`~dmlnb.profs.representatives.RepresentativeSampler` batch that involve a representative."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks
from dmlnb.samplers import groups_per_batch

__all__ = ["PAIR_MODES", "representative_pair_filter", "RepresentativePairs"]

#: How :class:`RepresentativePairs` restricts a loss's pairs (Sec. 5.3).
PAIR_MODES: tuple[str, ...] = ("anchored", "any", "all")


def representative_pair_filter(
    batch_size: int, samples_per_class: int, mode: str, device: torch.device | str | None = None
) -> Tensor | None:
    """The ``(B, B)`` bool pair filter of a
    :class:`~dmlnb.profs.representatives.RepresentativeSampler` batch.

    In the sampler's layout (contiguous groups of ``m = samples_per_class`` same-class rows, the
    class representative first) row ``i`` is a representative iff ``i % m == 0``. The allowed
    ordered pairs ``(i, j)`` (row ``i`` the anchor / first element) are

    * ``"anchored"``: ``i`` is a representative (pairs anchored at the representatives);
    * ``"any"``: ``i`` or ``j`` is a representative (no term between two non-representatives);
    * ``"all"``: every pair; returns ``None`` (no filter).
    """
    if mode not in PAIR_MODES:
        raise ValueError(f"mode must be one of {PAIR_MODES}, got {mode!r}")
    if samples_per_class < 1:
        raise ValueError(f"samples_per_class must be >= 1, got {samples_per_class}")
    groups_per_batch(batch_size, samples_per_class)  # a RepresentativeSampler batch: whole groups
    if mode == "all":
        return None
    rep = torch.arange(batch_size, device=device) % samples_per_class == 0  # (B,)
    if mode == "anchored":
        return rep[:, None].expand(batch_size, batch_size).clone()  # (B, B)
    return rep[:, None] | rep[None, :]  # (B, B)


class RepresentativePairs(MetricLoss):
    """A pair-based loss on the pairs PROFS builds its batch from (Sec. 5.3).

    PROFS's exemplar batch is made of pairs ``(i_r, j_n)`` of a class representative and an
    example, so the losses are restricted to pairs involving representatives (Can, Gürbüz &
    Alatan, Sec. 5.3):

    * ``"anchored"`` (contrastive, triplet, Margin): "each class representative should have the
      same number of its corresponding positive pairs and hard negative pairs": only pairs
      anchored at a representative (row ``i`` a representative);
    * ``"any"`` (lifted structured, MS): "the loss is slightly modified by ignoring the pairwise
      terms between the non-representative samples": pairs with a representative at either end;
    * ``"all"`` (N-pair, angular): "No adaptation is performed": the inner loss unchanged.

    The batch must be in :class:`~dmlnb.profs.representatives.RepresentativeSampler`'s layout: ``B``
    a multiple of ``m = samples_per_class``, contiguous groups of ``m`` same-class rows, the
    representative first (row ``i`` is a representative iff ``i % m == 0``); the labels are checked.
    The filter (:func:`representative_pair_filter`) goes to
    ``inner(embeddings, labels, pair_filter=...)``.

    Args:
        inner: the loss; for ``"anchored"`` / ``"any"`` one that supports ``pair_filter``.
        samples_per_class: ``m`` (``I`` in the paper), the representative included.
        mode: ``"anchored"``, ``"any"`` or ``"all"``.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.
    """

    def __init__(
        self, inner: MetricLoss, samples_per_class: int, mode: Literal["anchored", "any", "all"]
    ) -> None:
        super().__init__()
        if not isinstance(inner, MetricLoss):
            raise TypeError(f"inner must be a MetricLoss, got {type(inner).__name__}")
        if mode not in PAIR_MODES:
            raise ValueError(f"mode must be one of {PAIR_MODES}, got {mode!r}")
        if samples_per_class < 1:
            raise ValueError(f"samples_per_class must be >= 1, got {samples_per_class}")
        if mode != "all" and not inner.supports_pair_filter:
            raise ValueError(
                f"{type(inner).__name__} does not support pair_filter; use mode='all' for it"
            )
        self.inner = inner
        self.samples_per_class = int(samples_per_class)
        self.mode = mode

    def extra_repr(self) -> str:
        return f"samples_per_class={self.samples_per_class}, mode={self.mode!r}"

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        B, m = labels.shape[0], self.samples_per_class
        pair_filter = representative_pair_filter(
            B, m, self.mode, embeddings.device
        )  # (B, B) | None
        groups = labels.view(B // m, m)  # (B/m, m)
        if not bool((groups == groups[:, :1]).all()):
            raise ValueError(
                f"batch is not in RepresentativeSampler's layout (contiguous groups of m={m} "
                "same-class samples, representative first); build the batches with "
                "RepresentativeSampler(..., m=samples_per_class)"
            )
        return self.inner(embeddings, labels, pair_filter=pair_filter)
