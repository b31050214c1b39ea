"""Triplet margin loss with batch-all, batch-hard and semi-hard triplet selection."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import DISTANCES, REDUCTIONS, MetricLoss, check_choices
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["TripletLoss"]

_MININGS = ("all", "hard", "semihard")


class TripletLoss(MetricLoss):
    r"""Triplet margin loss (Weinberger & Saul 2009; Schroff et al., FaceNet, CVPR 2015).

    For an anchor ``a``, a positive ``p`` (same label, ``p != a``) and a negative ``n``
    (other label), with :math:`d` the Euclidean (``distance="euclidean"``) or squared Euclidean
    (``"squared"``) distance, on L2-normalised embeddings when ``normalize``:

    .. math::  \ell_{apn} = [\, d_{ap} - d_{an} + m \,]_+ .

    Triplet selection (``mining``):

    * ``"all"`` (batch-all): every valid triplet of the batch. Never builds a ``(B, B, B)``
      tensor: per anchor the negative distances are sorted once, and for each positive
      :math:`\sum_n [d_{ap} + m - d_{an}]_+ = c\,(d_{ap} + m) - \sum_{k < c} d^{\uparrow}_{a,k}`
      with :math:`c = \#\{n : d_{an} < d_{ap} + m\}` (a ``searchsorted`` and a prefix sum),
      so time is :math:`O(B^2 \log B)` and memory :math:`O(B^2)`.
    * ``"hard"`` (batch-hard, Hermans, Beyer & Leibe 2017, "In Defense of the Triplet Loss"):
      one triplet per anchor, its farthest positive and its closest negative.
    * ``"semihard"`` (FaceNet's semi-hard negatives as TensorFlow's ``triplet_semihard_loss``
      defines them; Song et al. 2017, Sec. 2.1): one triplet per positive pair ``(a, p)``, the
      negative being
      :math:`k^* = \arg\min_{n} d_{an}` s.t. :math:`d_{an} > d_{ap}`, or
      :math:`\arg\max_n d_{an}` when no negative is farther than the positive.

    Reduction over the selected triplets: ``"nonzero"`` averages over the triplets with a
    positive loss (PML's ``AvgNonZeroReducer``); ``"mean"`` averages over all of them
    (Hermans et al.; TensorFlow's semi-hard loss, which also uses ``distance="squared"``).
    A batch without any valid triplet (no positive pair, or a single class) gives 0.

    Args:
        margin: :math:`m` (0.2 as in FaceNet; PML's ``TripletMarginLoss`` default is 0.05).
        mining: ``"all"``, ``"hard"`` or ``"semihard"``.
        distance: ``"euclidean"`` (PML's default ``LpDistance``) or ``"squared"`` (FaceNet).
        normalize: L2-normalise the embeddings first (FaceNet and PML do).
        reduction: ``"nonzero"`` (PML default) or ``"mean"``.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: a triplet ``(a, p, n)`` is used iff ``(a, p)`` and ``(a, n)`` are allowed.
    """

    supports_pair_filter = True

    def __init__(
        self,
        margin: float = 0.2,
        mining: Literal["all", "hard", "semihard"] = "all",
        distance: Literal["euclidean", "squared"] = "euclidean",
        normalize: bool = True,
        reduction: Literal["nonzero", "mean"] = "nonzero",
    ) -> None:
        super().__init__()
        check_choices(
            mining=(mining, _MININGS),
            distance=(distance, DISTANCES),
            reduction=(reduction, REDUCTIONS),
        )
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.mining = mining
        self.distance = distance
        self.normalize = normalize
        self.reduction = reduction

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        d = euclidean_distance(x, squared=self.distance == "squared")  # (B, B)
        nonzero = self.reduction == "nonzero"
        if self.mining == "all":
            total, count = _batch_all(d, masks, self.margin, nonzero)
        else:
            if self.mining == "hard":
                losses, valid = _batch_hard(d, masks, self.margin)
            else:
                valid = (
                    masks.positive & masks.has_negative[:, None]
                )  # (B, B) (a, p) with a negative
                losses = _semi_hard(d, masks.negative, valid, self.margin)
            total, count = losses.sum(), ((losses > 0).sum() if nonzero else valid.sum())
        return total / count.clamp_min(1)


def _batch_all(d: Tensor, masks: PairMasks, margin: float, nonzero: bool) -> tuple[Tensor, Tensor]:
    """Sum of :math:`[d_{ap} - d_{an} + m]_+` over all triplets and their count: the non-zero
    terms (``nonzero``) or all of them, from per-anchor sorted negatives and prefix sums. A pair
    whose anchor has no negative has no violating negative, so it adds nothing to either."""
    sorted_neg = _sorted_negatives(d, masks.negative)  # (B, B)
    threshold = d + margin  # (B, B) a negative violates (a, p) iff d_an < threshold
    n_violating = torch.searchsorted(
        sorted_neg, threshold.contiguous()
    )  # (B, B) <= the anchor's negatives
    # the +inf padding lies past every threshold: the gathered prefix sums hold negatives only
    prefix = F.pad(sorted_neg.cumsum(dim=1), (1, 0))  # (B, B + 1), prefix[:, k] = sum_{<k}
    violating_sum = prefix.gather(1, n_violating)  # (B, B)
    per_pair = n_violating * threshold - violating_sum  # (B, B) sum over n of the hinge
    total = per_pair.masked_fill(~masks.positive, 0.0).sum()
    if nonzero:
        return total, (n_violating * masks.positive).sum()
    return total, (masks.positive.sum(dim=1) * masks.negative.sum(dim=1)).sum()


def _sorted_negatives(d: Tensor, negative: Tensor) -> Tensor:
    """Each anchor's negative distances in ascending order, padded with ``+inf``: ``(B, B)``,
    row ``a`` holds its negatives' distances, then ``inf``."""
    return d.masked_fill(~negative, float("inf")).sort(dim=1).values  # (B, B)


def _batch_hard(d: Tensor, masks: PairMasks, margin: float) -> tuple[Tensor, Tensor]:
    """Hinge ``(B,)`` of each anchor with a positive and a negative (farthest positive, closest
    negative; Hermans et al. 2017), 0 for the other anchors, and the mask of those anchors
    ``(B,)``."""
    anchors = masks.has_positive & masks.has_negative  # (B,)
    d_ap = d.masked_fill(~masks.positive, float("-inf")).max(dim=1).values  # (B,)
    d_an = d.masked_fill(~masks.negative, float("inf")).min(dim=1).values  # (B,)
    return F.relu(d_ap - d_an + margin).masked_fill(~anchors, 0.0), anchors  # (B,), (B,)


def _semi_hard(d: Tensor, negative: Tensor, valid_pairs: Tensor, margin: float) -> Tensor:
    """Hinge ``(B, B)`` of each valid positive pair ``(a, p)`` with its semi-hard negative (the
    closest negative strictly farther than ``p``, else the farthest negative; FaceNet / TF), 0
    for the other pairs."""
    sorted_neg, n_neg = _sorted_negatives(d, negative), negative.sum(dim=1)  # (B, B), (B,)
    first_farther = torch.searchsorted(sorted_neg, d.contiguous(), right=True)  # (B, B)
    farthest = (n_neg - 1).clamp_min(0)[:, None].expand_as(first_farther)  # (B, B)
    pick = torch.where(first_farther < n_neg[:, None], first_farther, farthest)  # (B, B)
    d_an = sorted_neg.gather(1, pick)  # (B, B)
    return F.relu(d - d_an + margin).masked_fill(~valid_pairs, 0.0)  # (B, B)
