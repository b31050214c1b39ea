"""Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006), with optional batch-hard pair mining."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss, zero_loss
from dmlnb.pairs import euclidean_distance, l2_normalize, pair_masks

__all__ = ["ContrastiveLoss"]

_DISTANCES = ("euclidean", "squared")
_MININGS = ("all", "hard")
_REDUCTIONS = ("nonzero", "mean")


def _reduce(terms: Tensor, reduction: str) -> Tensor:
    """Mean of ``terms`` ``(N,)`` over all of them (``"mean"``) or over the non-zero ones
    (``"nonzero"``, PML's ``AvgNonZeroReducer``); 0 (graph-attached) when there is none."""
    if reduction == "nonzero":
        return terms.sum() / (terms > 0).sum().clamp_min(1)
    return terms.sum() / max(terms.numel(), 1)


class ContrastiveLoss(MetricLoss):
    r"""Contrastive loss on the positive and negative pairs of a batch.

    With :math:`d_{ij}` the distance between embeddings ``i`` and ``j`` (Euclidean, or squared
    Euclidean with ``distance="squared"``; on L2-normalised embeddings when ``normalize``), each
    pair contributes

    .. math::

        \ell^+_{ij} = [d_{ij} - m_+]_+^{\,p} \quad (y_i = y_j), \qquad
        \ell^-_{ij} = [m_- - d_{ij}]_+^{\,p} \quad (y_i \ne y_j),

    and ``loss = reduce(positive terms) + reduce(negative terms)``.

    * ``squared_hinge=False`` (``p = 1``) is pytorch-metric-learning's ``ContrastiveLoss``.
    * ``squared_hinge=True`` (``p = 2``, ``m_+ = 0``) is the original form,
      :math:`y\,d^2 + (1 - y)[m - d]_+^2` (Hadsell et al. 2006, without its factor 1/2;
      PROFS, Can et al., Eq. 3.2).

    Pairs (``mining``):

    * ``"all"``: every ordered pair ``i != j`` of the batch.
    * ``"hard"``: per anchor with at least one positive and one negative, its hardest (farthest)
      positive and its hardest (closest) negative: the "Contrastive-Hard" baseline of PROFS,
      equal to PML's ``BatchHardMiner`` pairs.

    ``reduction="nonzero"`` averages the positive terms over those > 0 and the negative terms over
    those > 0 (PML's default ``AvgNonZeroReducer``, applied per part and summed);
    ``reduction="mean"`` averages each part over all its pairs (PML's ``MeanReducer``).
    A batch without any pair of a kind contributes 0 for that part.

    Args:
        pos_margin: :math:`m_+`, positive pairs closer than this cost nothing (PML default 0).
        neg_margin: :math:`m_-`, negative pairs farther than this cost nothing (PML default 1).
        distance: ``"euclidean"`` (PML's default ``LpDistance``) or ``"squared"``.
        normalize: L2-normalise the embeddings first (PML default ``True``).
        squared_hinge: square each hinge term (Hadsell et al. form); PML uses ``False``.
        mining: ``"all"`` pairs or batch-``"hard"`` pairs.
        reduction: ``"nonzero"`` (PML default) or ``"mean"``.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.
    """

    def __init__(
        self,
        pos_margin: float = 0.0,
        neg_margin: float = 1.0,
        distance: Literal["euclidean", "squared"] = "euclidean",
        normalize: bool = True,
        squared_hinge: bool = False,
        mining: Literal["all", "hard"] = "all",
        reduction: Literal["nonzero", "mean"] = "nonzero",
    ) -> None:
        super().__init__()
        for name, value, allowed in (
            ("distance", distance, _DISTANCES),
            ("mining", mining, _MININGS),
            ("reduction", reduction, _REDUCTIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if pos_margin > neg_margin:
            raise ValueError(
                f"pos_margin ({pos_margin}) must not exceed neg_margin ({neg_margin}): no "
                "distance could then satisfy both the positive and the negative constraint"
            )
        self.pos_margin = float(pos_margin)
        self.neg_margin = float(neg_margin)
        self.distance = distance
        self.normalize = normalize
        self.squared_hinge = squared_hinge
        self.mining = mining
        self.reduction = reduction

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        d = euclidean_distance(x, squared=self.distance == "squared")  # (B, B)
        masks = pair_masks(labels)
        if self.mining == "all":
            d_pos = d[masks.positive]  # (P,)
            d_neg = d[masks.negative]  # (N,)
        else:
            anchors = masks.has_positive & masks.has_negative  # (B,)
            hardest_pos = d.masked_fill(~masks.positive, float("-inf")).max(dim=1).values  # (B,)
            hardest_neg = d.masked_fill(~masks.negative, float("inf")).min(dim=1).values  # (B,)
            d_pos, d_neg = hardest_pos[anchors], hardest_neg[anchors]  # (A,), (A,)
        if d_pos.numel() == 0 and d_neg.numel() == 0:
            return zero_loss(embeddings)
        power = 2 if self.squared_hinge else 1
        pos_terms = F.relu(d_pos - self.pos_margin) ** power  # (P,)
        neg_terms = F.relu(self.neg_margin - d_neg) ** power  # (N,)
        pos_loss = _reduce(pos_terms, self.reduction)
        neg_loss = _reduce(neg_terms, self.reduction)
        return pos_loss + neg_loss
