"""Angular loss, N-pair form (Wang, Zhou, Wen, Liu & Lin, ICCV 2017)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, gram, l2_normalize

__all__ = ["AngularLoss"]

# A pair's negative sum below this (every term underflowed in float64) cannot be trusted.
_TINY_SUM = math.exp(-650.0)


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
    as one ``(B, B)`` matrix product (the sum over negatives factorises, :math:`e^{c(x_a + x_p)^\top
    x_n} = e^{c x_a^\top x_n} e^{c x_p^\top x_n}`) in float64 with per-row stabilisers, then
    :math:`\log(1 + e^{\cdot})` exactly; no ``(pair, negative)`` tensor and no host read. The paper assumes L2-normalised
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
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        sim = gram(x)  # (B, B)
        tan2 = math.tan(math.radians(self.alpha_degrees)) ** 2
        # sum_n exp(4 tan^2 (x_a + x_p)^T x_n) = sum_n e^{c_an} e^{c_pn}: one (B, B) @ (B, B)
        # product over the negatives n of a, no (pair, negative) tensor and no pair list.
        c = (4.0 * tan2 * sim).double()  # (B, B) c_in = 4 tan^2 x_i^T x_n
        u = c.masked_fill(~masks.negative, float("-inf"))  # (B, B) row a: a's negatives only
        has_negative = masks.negative.any(dim=1, keepdim=True)  # (B, 1)
        with torch.no_grad():  # stabilisers: they cancel
            m_a = u.amax(dim=1, keepdim=True).nan_to_num_(neginf=0.0)  # (B, 1) 0 for an anchor without negatives
            k_p = c.amax(dim=1, keepdim=True)  # (B, 1)
        s = torch.exp(u - m_a) @ torch.exp(c - k_p).T  # (B, B) [a, p]
        # Each term is kept to float64 rounding unless every term of a pair underflows (s tiny,
        # impossible for L2-normalised x, where |c| < 2.9): such a pair gives NaN, so the
        # finite-loss check fails loudly instead of the sum being silently 0.
        dropped = ~(s > _TINY_SUM)  # (B, B)
        lse = (s.clamp_min(_TINY_SUM).log() + m_a + k_p.T).masked_fill(dropped, float("-inf"))  # (B, B)
        lse = lse.masked_fill(has_negative & dropped, float("nan"))  # (B, B)
        f = lse - 2.0 * (1.0 + tan2) * sim.double()  # (B, B) log sum_n e^{f_apn}
        terms = torch.logaddexp(f, torch.zeros_like(f)).masked_fill(~masks.positive, 0.0)  # (B, B)
        return (terms.sum() / masks.positive.sum().clamp_min(1)).to(embeddings.dtype)
