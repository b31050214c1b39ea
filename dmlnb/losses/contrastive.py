"""Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006), with optional batch-hard pair mining."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import DISTANCES, REDUCTIONS, MetricLoss, check_choices
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["ContrastiveLoss"]

_MININGS = ("all", "hard")


def _reduce(terms: Tensor, valid: Tensor, reduction: str) -> Tensor:
    """Mean of ``terms`` over the entries of the ``valid`` mask (``"mean"``) or over the non-zero
    ones (``"nonzero"``, PML's ``AvgNonZeroReducer``); 0 (graph-attached) when there is none.
    Invalid entries of ``terms`` must be 0."""
    if reduction == "nonzero":
        count = (terms > 0).sum()
    else:
        count = valid.sum()
    return terms.sum() / count.clamp_min(1)


class _AllPairTerms(torch.autograd.Function):
    r"""``reduce(positive terms) + reduce(negative terms)`` over every allowed pair of the
    distances ``d`` ``(B, B)``, with a one-pass backward.

    Forward: :math:`h^+ = [d - m_+]_+` on the positive pairs, :math:`h^- = [m_- - d]_+` on the
    negative ones (0 elsewhere, by 0 / 1 float masks: a multiplication is much cheaper than a
    boolean ``masked_fill`` on a CPU), terms :math:`t = h^p`, and each part's sum divided by its
    count (non-zero terms, or pairs). Backward, the counts being constants:
    :math:`\partial d = w_+ \partial t^+ / \partial h^+ - w_- \partial t^- / \partial h^-`
    with :math:`w = g / \text{count}` and :math:`\partial t / \partial h = [h > 0]` (``p = 1``)
    or :math:`2 h` (``p = 2``).
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        d: Tensor,
        positive: Tensor,
        negative: Tensor,
        pos_margin: float,
        neg_margin: float,
        squared_hinge: bool,
        nonzero: bool,
    ) -> Tensor:
        pos = positive.view(torch.uint8).to(d.dtype)  # (B, B) 0 / 1 (from uint8: fast)
        neg = negative.view(torch.uint8).to(d.dtype)  # (B, B)
        h_pos = torch.sub(d, pos_margin).relu_().mul_(pos)  # (B, B) [d - m+]_+ on positives
        h_neg = torch.rsub(d, neg_margin).relu_().mul_(neg)  # (B, B) [m- - d]_+ on negatives
        t_pos, t_neg = (h_pos * h_pos, h_neg * h_neg) if squared_hinge else (h_pos, h_neg)
        total_pos, total_neg = t_pos.sum(), t_neg.sum()
        if nonzero:  # the terms > 0 (the sign of a term >= 0 is its indicator)
            count_pos, count_neg = t_pos.sign().sum(), t_neg.sign().sum()
        else:
            count_pos, count_neg = pos.sum(), neg.sum()
        count_pos, count_neg = count_pos.clamp_min(1.0), count_neg.clamp_min(1.0)  # no term: 0 / 1
        if squared_hinge:  # d t / d h = 2 h
            ctx.save_for_backward(h_pos, h_neg, count_pos, count_neg)
        else:  # d t / d h = [h > 0], in place: h is not needed any more
            ctx.save_for_backward(h_pos.sign_(), h_neg.sign_(), count_pos, count_neg)
        ctx.squared_hinge = squared_hinge
        return total_pos / count_pos + total_neg / count_neg

    @staticmethod
    def backward(  # type: ignore[override]
        ctx, grad: Tensor
    ) -> tuple[Tensor, None, None, None, None, None, None]:
        slope_pos, slope_neg, count_pos, count_neg = ctx.saved_tensors
        w_pos, w_neg = grad / count_pos, grad / count_neg  # () d loss / d term
        if ctx.squared_hinge:
            w_pos, w_neg = 2.0 * w_pos, 2.0 * w_neg
        d_d = torch.mul(slope_pos, w_pos).addcmul_(slope_neg, -w_neg)  # (B, B)
        return d_d, None, None, None, None, None, None


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

    Pair filter: ``"all"`` uses the allowed pairs; ``"hard"`` the hardest allowed positive and
    negative of each anchor (row) with both.
    """

    supports_pair_filter = True

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
        check_choices(
            distance=(distance, DISTANCES),
            mining=(mining, _MININGS),
            reduction=(reduction, REDUCTIONS),
        )
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

    def _hinge(self, t: Tensor) -> Tensor:
        """``[t]_+``, squared with ``squared_hinge``."""
        h = F.relu(t)
        return h * h if self.squared_hinge else h

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        d = euclidean_distance(x, squared=self.distance == "squared")  # (B, B)
        if self.mining == "all":  # masked (B, B) terms: no boolean gather over B^2 entries
            return _AllPairTerms.apply(
                d,
                masks.positive,
                masks.negative,
                self.pos_margin,
                self.neg_margin,
                self.squared_hinge,
                self.reduction == "nonzero",
            )
        anchors = masks.has_positive & masks.has_negative  # (B,)
        hardest_pos = d.masked_fill(~masks.positive, float("-inf")).max(dim=1).values  # (B,)
        hardest_neg = d.masked_fill(~masks.negative, float("inf")).min(dim=1).values  # (B,)
        pos_terms = self._hinge(hardest_pos - self.pos_margin).masked_fill(~anchors, 0.0)  # (B,)
        neg_terms = self._hinge(self.neg_margin - hardest_neg).masked_fill(~anchors, 0.0)  # (B,)
        pos_loss = _reduce(pos_terms, anchors, self.reduction)
        neg_loss = _reduce(neg_terms, anchors, self.reduction)
        return pos_loss + neg_loss
