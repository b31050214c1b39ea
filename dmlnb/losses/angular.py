"""Angular loss, N-pair form (Wang, Zhou, Wen, Liu & Lin, ICCV 2017)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss, zero_loss
from dmlnb.pairs import PairMasks, l2_normalize

__all__ = ["AngularLoss"]

# Pairs are processed in chunks of at most this many (pair, negative) logits, so memory stays
# bounded even for a batch of very few, very large classes (where #pairs * B approaches B^3).
_CHUNK_ELEMENTS = 1 << 22


class AngularLoss(MetricLoss):
    r"""Angular loss in its N-pair form (Wang et al. 2017).

    For a positive pair :math:`(x_a, x_p)` and a negative :math:`x_n` (label different from
    the anchor's), with :math:`\alpha` the angle bound at the negative,

    .. math::

        f_{a,p,n} = 4 \tan^2\alpha \, (x_a + x_p)^\top x_n
                    - 2 (1 + \tan^2\alpha) \, x_a^\top x_p, \qquad
        \mathcal{L} = \frac{1}{|\mathcal{P}|} \sum_{(a,p) \in \mathcal{P}}
            \log\Big(1 + \sum_{n} \exp(f_{a,p,n})\Big),

    over all ordered positive pairs :math:`\mathcal{P}` of the batch (as pytorch-metric-learning's
    ``AngularLoss``; the paper's N-pair batches hold exactly one positive per anchor), computed
    as a stable ``logsumexp`` with a zero logit for the 1. The paper assumes L2-normalised
    features; ``normalize=True`` normalises anchors, positives *and* negatives (PML normalises
    only anchors and positives, so it matches only for already-normalised input).
    A batch without a positive pair, or with a single class, gives 0.

    Args:
        alpha_degrees: :math:`\alpha` in degrees, in (0, 90) (paper and PML default 40).
        normalize: L2-normalise the embeddings first (paper and PML: ``True``).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: the allowed positive pairs ``(a, p)``, each with the allowed negatives ``n`` of ``a``, ``(a, n)``.
    """

    supports_pair_filter = True

    def __init__(self, alpha_degrees: float = 40.0, normalize: bool = True) -> None:
        super().__init__()
        if not 0.0 < alpha_degrees < 90.0:
            raise ValueError(f"alpha_degrees must be in (0, 90), got {alpha_degrees}")
        self.alpha_degrees = float(alpha_degrees)
        self.normalize = normalize

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        if not bool(masks.positive.any() and masks.negative.any()):
            return zero_loss(embeddings)
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        sim = x @ x.T  # (B, B)
        tan2 = math.tan(math.radians(self.alpha_degrees)) ** 2
        pairs = masks.positive.nonzero()  # (P, 2) rows (a, p)
        chunk = max(1, _CHUNK_ELEMENTS // sim.shape[0])
        losses = []
        for part in pairs.split(chunk):
            a, p = part[:, 0], part[:, 1]  # (c,), (c,)
            ap = sim[a, p][:, None]  # (c, 1)
            logits = 4.0 * tan2 * (sim[a] + sim[p]) - 2.0 * (1.0 + tan2) * ap  # (c, B)
            logits = logits.masked_fill(~masks.negative[a], float("-inf"))  # (c, B)
            losses.append(torch.logsumexp(F.pad(logits, (0, 1)), dim=1))  # (c,) log(1 + sum)
        return torch.cat(losses).mean()
