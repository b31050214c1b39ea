"""Lifted structured loss (Song, Xiang, Jegelka & Savarese, CVPR 2016)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = ["LiftedStructureLoss"]


class LiftedStructureLoss(MetricLoss):
    r"""Smooth lifted structured loss (Song et al. 2016, Eq. 4).

    With :math:`D_{ij}` the Euclidean distance, :math:`\mathcal{N}(i)` the negatives of ``i``
    and :math:`\mathcal{P}` the positive pairs of the batch,

    .. math::

        J_{ij} = \log\Big(\sum_{k \in \mathcal{N}(i)} e^{m_- - D_{ik}}
                 + \sum_{l \in \mathcal{N}(j)} e^{m_- - D_{jl}}\Big) + D_{ij} - m_+, \qquad
        \mathcal{L} = \frac{1}{2|\mathcal{P}|} \sum_{(i,j) \in \mathcal{P}} [J_{ij}]_+^2 .

    :math:`\mathcal{P}` counts each unordered pair once (:math:`J` is symmetric), which is
    pytorch-metric-learning's ``LiftedStructureLoss``: the mean over ordered pairs of
    :math:`[J_{ij}]_+^2 / 2`. The paper has :math:`m_+ = 0` and calls :math:`m_-` the margin
    :math:`\alpha`. Both log-sum-exps are one per-sample ``logsumexp`` over its negatives,
    combined with ``logaddexp`` (numerically stable, :math:`O(B^2)`).
    A batch without a positive pair, or with a single class, gives 0.

    Args:
        neg_margin: :math:`m_-` (paper's :math:`\alpha = 1`; PML default 1).
        pos_margin: :math:`m_+` (paper: 0; PML default 0).
        normalize: L2-normalise the embeddings first (PML default ``True``; the paper's
            equation is written for the network's output as it is).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: :math:`\mathcal{P}` is the allowed positive pairs and :math:`\mathcal{N}(i)` the
    allowed negatives of row ``i``."""

    supports_pair_filter = True

    def __init__(
        self, neg_margin: float = 1.0, pos_margin: float = 0.0, normalize: bool = True
    ) -> None:
        super().__init__()
        self.neg_margin = float(neg_margin)
        self.pos_margin = float(pos_margin)
        self.normalize = normalize

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        d = euclidean_distance(x)  # (B, B)
        neg_logits = (self.neg_margin - d).masked_fill(~masks.negative, float("-inf"))  # (B, B)
        neg_lse = torch.logsumexp(neg_logits, dim=1)  # (B,) -inf for a sample without negatives
        # -inf -> a finite stand-in that contributes exactly 0 (so logaddexp's gradient is no NaN)
        neg_lse = torch.where(masks.has_negative, neg_lse, torch.finfo(d.dtype).min / 4)  # (B,)
        j = torch.logaddexp(neg_lse[:, None], neg_lse[None, :]) + d - self.pos_margin  # (B, B)
        terms = (F.relu(j) ** 2).masked_fill(~masks.positive, 0.0)  # (B, B)
        return terms.sum() / masks.positive.sum().clamp_min(1) / 2.0
