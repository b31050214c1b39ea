"""Angular loss, N-pair form (Wang, Zhou, Wen, Liu & Lin, ICCV 2017)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, gram, l2_normalize

__all__ = ["AngularLoss"]

# A pair's negative sum below this (every term underflowed in float64) cannot be trusted.
_TINY_SUM = math.exp(-650.0)
# Largest tan^2(alpha) for which L2-normalised embeddings are summed in their own precision:
# then every factor e^{c - max c} of the product is >= e^{-8 tan^2(alpha)} >= e^{-40}, so the
# products are normal float32 numbers (> e^{-87}), and f <= 10 tan^2(alpha) + 2 + log(B) keeps
# e^f below float32's overflow (e^{88}).
_BOUNDED_TAN2 = 5.0


class _AngularTerms(torch.autograd.Function):
    r"""The angular loss of the similarities ``sim`` ``(B, B)`` (a scalar), with an analytic
    backward.

    With :math:`c = 4 \tan^2\alpha\, S`, per-row stabilisers :math:`k_p = \max_n c_{pn}` and
    :math:`m_a` (``k_a``, or with ``exact`` the maximum over ``a``'s negatives only),
    :math:`E^u_{an} = [n \in \mathcal{N}(a)]\, e^{c_{an} - m_a}` and
    :math:`E^c_{pn} = e^{c_{pn} - k_p}`, the sum over negatives is one product,
    :math:`T = E^u {E^c}^\top`, and
    :math:`f_{ap} = \log T_{ap} + m_a + k_p - 2 (1 + \tan^2\alpha) S_{ap}
    = \log \sum_n e^{f_{apn}}`; the loss is the mean of :math:`\log(1 + e^{f_{ap}})` over
    the positive pairs. Backward, with :math:`G = \sigma(f) / |\mathcal{P}|` on the positive
    pairs and :math:`H = G / T`:
    :math:`\partial S = 4 \tan^2\alpha\, \big((H E^c) \odot E^u + (H^\top E^u) \odot E^c\big)
    - 2 (1 + \tan^2\alpha)\, G` (the stabilisers cancel).

    ``exact=False`` (L2-normalised embeddings, :math:`\tan^2\alpha \le 5`): computed in the
    similarities' precision (float32 at least), where nothing can underflow or overflow.
    ``exact=True``: in float64, and a positive pair whose every term underflows (``T`` below
    ``_TINY_SUM``, its anchor having negatives) gives NaN, so the finite-loss check fails
    loudly instead of the term being silently dropped.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, sim: Tensor, positive: Tensor, negative: Tensor, tan2: float, exact: bool
    ) -> Tensor:
        dtype = torch.float64 if exact else torch.promote_types(sim.dtype, torch.float32)
        s = sim.to(dtype)  # (B, B), never written
        c = s * (4.0 * tan2)  # (B, B) c_in = 4 tan^2 S_in
        positive_f = positive.view(torch.uint8).to(dtype)  # (B, B) 0 / 1 (from uint8: fast)
        k = c.amax(dim=1, keepdim=True)  # (B, 1)
        e_c = torch.sub(c, k).exp_()  # (B, B) E^c, in (0, 1]
        if exact:  # stabilise over a's negatives: no term underflows unless it must
            u = c.masked_fill(~negative, float("-inf"))  # (B, B) row a: a's negatives only
            m = u.amax(dim=1, keepdim=True).nan_to_num_(neginf=0.0)  # (B, 1) 0: no negatives
            e_u = u.sub_(m).exp_()  # (B, B) E^u, 0 off a's negatives
        else:  # |c| <= 4 tan^2: E^u, E^c >= e^{-8 tan^2}, their products normal float32s
            m = k
            e_u = torch.mul(e_c, negative.view(torch.uint8), out=c)  # (B, B) E^u
        total = e_u @ e_c.T  # (B, B) T[a, p] = sum_n E^u_an E^c_pn; 0 without negatives
        f = total.log().add_(m).add_(k.T).sub_(s, alpha=2.0 * (1.0 + tan2))  # (B, B)
        if exact:
            has_negative = negative.any(dim=1, keepdim=True)  # (B, 1)
            f.masked_fill_((total <= _TINY_SUM) & positive & has_negative, float("nan"))
            terms = F.softplus(f)  # (B, B) log(1 + e^f), 0 where f = -inf
        else:
            terms = f.exp().log1p_()  # (B, B) f <= 10 tan^2 + 2 + log B: no overflow
        count = positive_f.sum()  # |P|
        loss = torch.dot(terms.view(-1), positive_f.view(-1)) / count.clamp_min(1.0)
        total.clamp_min_(torch.finfo(dtype).tiny)  # (B, B) the backward divides by it
        ctx.save_for_backward(e_u, e_c, total, f, terms, positive_f, count)
        ctx.tan2, ctx.dtype = tan2, sim.dtype
        return loss

    @staticmethod
    def backward(  # type: ignore[override]
        ctx, grad: Tensor
    ) -> tuple[Tensor, None, None, None, None]:
        e_u, e_c, total, f, terms, positive_f, count = ctx.saved_tensors
        weight = grad / count.clamp_min(1.0)  # () d loss / d term
        sigmoid = torch.sub(f, terms).exp_().mul_(positive_f)  # (B, B) sigma(f) on P
        h = torch.div(sigmoid, total).mul_(weight * (4.0 * ctx.tan2))  # (B, B) 4 tan^2 H
        d_sim = (h @ e_c).mul_(e_u)  # (B, B) through E^u
        d_sim.add_((h.T @ e_u).mul_(e_c))  # through E^c
        d_sim.sub_(sigmoid.mul_(weight * (2.0 * (1.0 + ctx.tan2))))  # through -2 (1 + tan^2) S
        return d_sim.to(ctx.dtype), None, None, None, None


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
    x_n} = e^{c x_a^\top x_n} e^{c x_p^\top x_n}`) with per-row stabilisers, then
    :math:`\log(1 + e^{\cdot})`, with an analytic backward (:class:`_AngularTerms`); no
    ``(pair, negative)`` tensor and no host read. With ``normalize`` and
    :math:`\tan^2\alpha \le 5` (:math:`\alpha \le 65.9` degrees) no term can underflow and the sums
    are formed in the embeddings' precision (float32 at least); otherwise in float64, where a
    pair whose every term underflows gives NaN (the finite-loss check fails loudly instead of
    the sum being silently 0). The paper assumes L2-normalised
    features; ``normalize=True`` normalises anchors, positives *and* negatives (PML normalises
    only anchors and positives, so it matches only for already-normalised input).
    A batch without a positive pair, or with a single class, gives 0.

    Args:
        alpha_degrees: :math:`\alpha` in degrees, in (0, 90) (paper and PML default 40).
        normalize: L2-normalise the embeddings first (paper and PML: ``True``).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: the allowed positive pairs ``(a, p)``, each with the allowed negatives ``n`` of
    ``a``, ``(a, n)``.
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
        tan2 = math.tan(math.radians(self.alpha_degrees)) ** 2
        exact = not (self.normalize and tan2 <= _BOUNDED_TAN2)
        loss = _AngularTerms.apply(gram(x), masks.positive, masks.negative, tan2, exact)
        return loss.to(embeddings.dtype)
