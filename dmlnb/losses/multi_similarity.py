"""Multi-Similarity loss and pair mining (Wang et al., CVPR 2019)."""

from __future__ import annotations

import torch
from torch import Tensor

from dmlnb.checks import check_square
from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, cosine_similarity

__all__ = ["MultiSimilarityLoss", "MultiSimilarityMiner"]


class MultiSimilarityMiner:
    r"""Multi-Similarity pair mining (Wang et al., "Multi-Similarity Loss with General Pair
    Weighting for Deep Metric Learning", CVPR 2019, pair mining step).

    With cosine similarities :math:`S_{ij}`, anchor ``i`` keeps

    .. math::

        \text{negatives } j:\ S_{ij} + \epsilon > \min_{y_k = y_i} S_{ik}, \qquad
        \text{positives } j:\ S_{ij} - \epsilon < \max_{y_k \ne y_i} S_{ik}.

    An anchor without a positive keeps no negative, one without a negative keeps no positive
    (the min / max over an empty set are :math:`+\infty` / :math:`-\infty`), as in PML's
    ``MultiSimilarityMiner``.

    Args:
        epsilon: the mining margin :math:`\epsilon` (paper and PML 0.1).
    """

    def __init__(self, epsilon: float = 0.1) -> None:
        self.epsilon = float(epsilon)

    def __repr__(self) -> str:
        return f"MultiSimilarityMiner(epsilon={self.epsilon})"

    def __call__(self, similarity: Tensor, masks: PairMasks) -> PairMasks:
        """Mined masks ``(B, B)`` from the similarity matrix ``(B, B)`` and the batch's masks."""
        check_square(similarity, "similarity", (masks.positive, masks.negative))
        with torch.no_grad():
            hardest_pos = similarity.masked_fill(~masks.positive, float("inf")).amin(
                dim=1, keepdim=True
            )  # (B, 1) least similar positive
            hardest_neg = similarity.masked_fill(~masks.negative, float("-inf")).amax(
                dim=1, keepdim=True
            )  # (B, 1) most similar negative
            negative = masks.negative & (similarity + self.epsilon > hardest_pos)  # (B, B)
            positive = masks.positive & (similarity - self.epsilon < hardest_neg)  # (B, B)
        return PairMasks(positive=positive, negative=negative)


def _log1p_sum_exp(x: Tensor, mask: Tensor) -> Tensor:
    """``log(1 + sum_{j: mask_ij} exp(x_ij))`` per row, ``(B,)``, as a logsumexp over the
    masked row plus an explicit 0 logit (stable; an empty row gives exactly 0)."""
    masked = x.masked_fill(~mask, float("-inf"))  # (B, B)
    zero = torch.zeros_like(x[:, :1])  # (B, 1)
    return torch.logsumexp(torch.cat([masked, zero], dim=1), dim=1)  # (B,)


class MultiSimilarityLoss(MetricLoss):
    r"""Multi-Similarity loss (Wang, Han, Huang, Dong & Scott, CVPR 2019).

    With cosine similarities :math:`S_{ij}` of the batch and, per anchor ``i``, its (mined)
    positives :math:`\mathcal{P}_i` and negatives :math:`\mathcal{N}_i`:

    .. math::

        \mathcal{L} = \frac{1}{m}\sum_{i=1}^{m} \Big\{
            \frac{1}{\alpha}\log\Big[1 + \sum_{k\in\mathcal{P}_i}
                e^{-\alpha (S_{ik} - \lambda)}\Big]
          + \frac{1}{\beta}\log\Big[1 + \sum_{k\in\mathcal{N}_i} e^{\beta (S_{ik} - \lambda)}\Big]
        \Big\},

    averaged over all ``m = B`` anchors (an anchor with no kept pair contributes 0 and still
    counts in the mean, as in the paper and PML). Each log is a logsumexp with an explicit 0
    logit, so large :math:`\beta` cannot overflow.

    ``miner=True`` keeps only the pairs selected by :class:`MultiSimilarityMiner` (paper; equals
    PML's ``MultiSimilarityLoss`` fed by ``MultiSimilarityMiner``); ``miner=False`` uses every
    pair (PML's ``MultiSimilarityLoss`` alone). Unlike the authors' released code, an anchor with
    mined positives but no mined negative (or the reverse) keeps its one-sided term, as the
    formula and PML do.

    Args:
        alpha: positive scale :math:`\alpha` (paper and PML 2).
        beta: negative scale :math:`\beta` (paper and PML 50).
        base: similarity margin :math:`\lambda` (PML and the authors' code 0.5).
        miner: apply Multi-Similarity mining before the loss (paper: ``True``).
        epsilon: the miner's :math:`\epsilon` (paper and PML 0.1); unused when ``miner=False``.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: the miner and the loss see only the allowed pairs (anchor = row).
    """

    supports_pair_filter = True

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 50.0,
        base: float = 0.5,
        miner: bool = True,
        epsilon: float = 0.1,
    ) -> None:
        super().__init__()
        if alpha <= 0 or beta <= 0:
            raise ValueError(f"alpha and beta must be > 0, got alpha={alpha}, beta={beta}")
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.base = float(base)
        self.miner = MultiSimilarityMiner(epsilon) if miner else None

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}, beta={self.beta}, base={self.base}, miner={self.miner}"

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        s = cosine_similarity(embeddings)  # (B, B)
        if self.miner is not None:
            masks = self.miner(s, masks)
        pos = _log1p_sum_exp(-self.alpha * (s - self.base), masks.positive) / self.alpha  # (B,)
        neg = _log1p_sum_exp(self.beta * (s - self.base), masks.negative) / self.beta  # (B,)
        return (pos + neg).mean()
