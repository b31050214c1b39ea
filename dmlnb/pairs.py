"""The shared pair mechanism every batch loss is built on.

A batch of ``B`` embeddings ``x`` (shape ``(B, D)``) with integer labels ``y`` (shape ``(B,)``)
is turned once into

* a similarity or distance matrix ``(B, B)`` (cosine similarity, Euclidean or squared Euclidean
  distance), and
* boolean masks ``(B, B)`` of positive pairs (same label, ``i != j``) and negative pairs
  (different label).

Each loss in :mod:`dmlnb.losses` is then a few tensor lines over these matrices, in the spirit of
pytorch-metric-learning's distance + mask design, without its mixin plumbing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from dmlnb.checks import check_embeddings

__all__ = [
    "PairMasks",
    "pair_masks",
    "l2_normalize",
    "power_of_two_scale",
    "gram",
    "cosine_similarity",
    "indexed_cosine_similarity",
    "euclidean_distance",
]


@dataclass(frozen=True)
class PairMasks:
    """Positive and negative pair masks of a labelled batch.

    Attributes:
        positive: ``(B, B)`` bool, ``True`` where ``y_i == y_j`` and ``i != j``.
        negative: ``(B, B)`` bool, ``True`` where ``y_i != y_j``.
    """

    positive: Tensor
    negative: Tensor

    @property
    def has_positive(self) -> Tensor:
        """``(B,)`` bool: anchors with at least one positive."""
        return self.positive.any(dim=1)

    @property
    def has_negative(self) -> Tensor:
        """``(B,)`` bool: anchors with at least one negative."""
        return self.negative.any(dim=1)


def pair_masks(labels: Tensor, ref_labels: Tensor | None = None) -> PairMasks:
    """Positive / negative masks between ``labels`` ``(B,)`` and ``ref_labels`` ``(R,)``.

    With ``ref_labels=None`` the reference set is the batch itself and the diagonal is never a
    positive. Returns masks of shape ``(B, R)``.
    """
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D (B,), got shape {tuple(labels.shape)}")
    same = labels[:, None] == (labels if ref_labels is None else ref_labels)  # (B, R)
    negative = ~same  # (B, R)
    if ref_labels is None:
        same.fill_diagonal_(False)  # same is ours: no copy for the positives
    return PairMasks(positive=same, negative=negative)


def power_of_two_scale(x: Tensor, dim: int | None = None) -> Tensor:
    """A power of two within a factor 2 of ``max |x|`` (over ``dim``, kept as a size-1 axis; over
    everything when ``dim`` is ``None``), and 1 where that maximum is 0. No gradient.

    Dividing by it is exact (no rounding) and brings the largest entry into ``[1, 2)``, so squares
    and dot products of huge (``1e20``) or tiny (``1e-30``) finite values neither overflow nor
    underflow, while every result that did not overflow before stays bit-identical.
    """
    with torch.no_grad():
        peak = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
        _, exponent = torch.frexp(
            peak
        )  # peak = m * 2**exponent, m in [0.5, 1): exact, no log2 rounding
        scale = torch.ldexp(torch.ones_like(peak), exponent - 1)  # 2**(e-1) <= peak < 2**e
        return torch.where(peak > 0, scale, torch.ones_like(scale))


def _row_scales(x: Tensor) -> Tensor:
    """``(B, 1)``: for each row of ``x`` ``(B, D)`` the power of two ``2**(e-1)`` with
    ``2**(e-1) <= max_j |x_ij| < 2**e`` (0.5 for a zero row). Dividing by it is exact; no
    gradient. ``abs`` + ``amax`` (``vector_norm(x, inf)`` is many times slower on a CPU), then
    ``frexp`` and ``ldexp``: exact, and finite for a row holding the dtype's largest value."""
    peak = x.abs().amax(dim=1, keepdim=True)  # (B, 1) max |x_ij|
    _, exponent = torch.frexp(peak)  # (B, 1) peak = m * 2**exponent, m in [0.5, 1)
    return torch.ldexp(torch.full_like(peak, 0.5), exponent)  # (B, 1) 2**(e-1)


class _L2Normalize(torch.autograd.Function):
    r"""Rows scaled to unit norm, with an exact power-of-two pre-scaling and a one-pass backward.

    Forward: ``u = y / |y|`` with ``y = x / s`` (``s`` the row's power of two, exact), and ``u = 0``
    for a row with ``|x| = |y| s <= eps``. Backward, the Jacobian of :math:`x / |x|` applied to the
    incoming gradient ``g``: :math:`\partial x = (g - u\,(g^\top u)) / |x|`, 0 on a dropped row
    (and on a row whose norm overflows, where it is below ``1 / |x|``, under float32's normals).
    Each pass writes one ``(B, D)`` tensor at most, in place where it can (the allocations, not
    the arithmetic, dominate on a CPU).
    """

    @staticmethod
    def forward(ctx, x: Tensor, eps: float) -> Tensor:  # type: ignore[override]
        scale = _row_scales(x)  # (B, 1) powers of two
        y = x / scale  # (B, D) exact; largest |y_ij| in [1, 2) (0 for a zero row)
        y_norm = torch.linalg.vector_norm(y, dim=1, keepdim=True)  # (B, 1) >= 1 unless a zero row
        y_norm.masked_fill_(y_norm * scale <= eps, float("inf"))  # (B, 1) |x| <= eps: a zero row
        ctx.save_for_backward(y.div_(y_norm), y_norm * scale)  # (B, D) u, (B, 1) |x|
        return y

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        unit, norm = ctx.saved_tensors  # (B, D), (B, 1) |x|, inf on a dropped row
        out = grad * unit  # (B, D), reused for every later pass
        dot = out.sum(dim=1, keepdim=True)  # (B, 1) g^T u
        torch.sub(grad, torch.mul(unit, dot, out=out), out=out)  # g - u (g^T u)
        return out.div_(norm), None  # (B, D)


def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    r"""Rows of ``x`` ``(B, D)`` scaled to unit L2 norm, :math:`x_i / \lVert x_i \rVert`.

    A row of norm ``<= eps`` (an all-zero row) gives zeros **with a zero gradient**;
    ``F.normalize`` would give it a finite but enormous gradient (order ``1 / eps``) that wrecks
    the next optimiser step. Each row is first divided by the power of two of
    :func:`power_of_two_scale` (exact, and treated as a constant: the result does not depend on
    it), so a huge finite row (``1e20 * x`` in float32, whose squared norm overflows) or a tiny
    one is normalised like ``x``; for every other row the result is bit-identical to
    ``x / |x|``. The backward is one pass, :math:`(g - u\,(g^\top u)) / \lVert x \rVert` with
    ``u`` the output.
    """
    check_embeddings(x, "x")
    return _L2Normalize.apply(x, eps)


class _Gram(torch.autograd.Function):
    r""":math:`x y^\top` with one product per input in the backward: :math:`\partial x = g y`,
    :math:`\partial y = g^\top x`, and :math:`(g + g^\top) x` when ``y`` is ``x`` (``None``)."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor | None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, y)
        return x @ (x if y is None else y).T  # (B, R)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:  # type: ignore[override]
        x, y = ctx.saved_tensors
        if y is None:
            return (grad + grad.T) @ x, None  # (B, D)
        gx = grad @ y if ctx.needs_input_grad[0] else None  # (B, D)
        gy = grad.T @ x if ctx.needs_input_grad[1] else None  # (R, D)
        return gx, gy


def gram(x: Tensor, y: Tensor | None = None) -> Tensor:
    r"""Dot products ``(B, R)`` of the rows of ``x`` ``(B, D)`` with those of ``y`` ``(R, D)``
    (``x`` itself when ``None``), :math:`x y^\top`. Its backward is one product per input,
    :math:`g y` and :math:`g^\top x` (:math:`(g + g^\top) x` for ``y = None``), where autograd
    adds transposes and, for ``y = None``, a second product."""
    return _Gram.apply(x, y)


def cosine_similarity(x: Tensor, y: Tensor | None = None, eps: float = 1e-12) -> Tensor:
    """Cosine similarity ``(B, R)`` between rows of ``x`` ``(B, D)`` and ``y`` ``(R, D)``.

    Zero vectors have similarity 0 to everything, with a zero gradient (see :func:`l2_normalize`).
    """
    check_embeddings(x, "x")
    if y is not None:
        check_embeddings(y, "y", x.shape[1])
    return gram(l2_normalize(x, eps), None if y is None else l2_normalize(y, eps))  # (B, R)


class _IndexedCosine(torch.autograd.Function):
    r"""Cosine similarities ``(R, C)`` of rows ``rows`` and ``cols`` of ``x``, with a backward
    whose row-wise dot products are ``(R, C)`` sums instead of ``(R + C, D)`` ones.

    Forward: the gathered rows ``z = x[rows ; cols]`` divided by their largest entry,
    ``y = z / s`` (so no norm overflows or underflows), unit rows :math:`u = y\, \nu` with
    :math:`\nu = 1 / |y|` (0 on a row with ``|z| <= eps``), and :math:`c = u_r u_c^\top`.
    Backward, with ``G`` the incoming ``(R, C)`` gradient: :math:`\partial u_r = G u_c`, and
    the Jacobian of :math:`y / |y|` needs :math:`u_{r,i}^\top \partial u_{r,i} = \sum_j G_{ij}
    c_{ij}`: :math:`\partial z_i = (\partial u_i - (\sum_j G_{ij} c_{ij})\, u_i)\, \nu_i / s_i`
    (and likewise for the columns with :math:`G^\top`), added into one ``(B, D)``.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, x: Tensor, rows: Tensor, cols: Tensor, eps: float
    ) -> Tensor:
        index = torch.cat([rows, cols])  # (R + C,)
        z = x.index_select(0, index)  # (R + C, D)
        # (R + C, 1) max |z_ij|, a normal number (a zero row: the smallest one)
        scale = z.abs().amax(dim=1, keepdim=True).clamp_min_(torch.finfo(z.dtype).tiny)
        y = z.div_(scale)  # (R + C, D) entries in [-1, 1]: |y| cannot overflow
        y_norm = torch.linalg.vector_norm(y, dim=1, keepdim=True)  # (R + C, 1)
        inv = y_norm.reciprocal().masked_fill_(y_norm * scale <= eps, 0.0)  # (R + C, 1)
        unit = y.mul_(inv)  # (R + C, D) unit rows, 0 for a dropped row
        r = rows.shape[0]
        cos = unit[:r] @ unit[r:].T  # (R, C)
        ctx.save_for_backward(index, unit, inv.div_(scale), cos)  # (R + C, 1) nu / s
        ctx.batch = x.shape[0]
        return cos

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        index, unit, inv_scaled, cos = ctx.saved_tensors
        r = cos.shape[0]
        weighted = grad * cos  # (R, C) G_ij c_ij
        dots = torch.cat([weighted.sum(dim=1), weighted.sum(dim=0)])[:, None]  # (R + C, 1)
        gz = torch.empty_like(unit)  # (R + C, D)
        torch.mm(grad, unit[r:], out=gz[:r])  # d u_r
        torch.mm(grad.T, unit[:r], out=gz[r:])  # d u_c
        gz.addcmul_(unit, dots, value=-1.0).mul_(inv_scaled)  # (R + C, D) d z
        gx = gz.new_zeros(ctx.batch, gz.shape[1]).index_add_(0, index, gz)  # (B, D)
        return gx, None, None, None


def indexed_cosine_similarity(x: Tensor, rows: Tensor, cols: Tensor, eps: float = 1e-12) -> Tensor:
    r"""Cosine similarity ``(R, C)`` of the rows ``x[rows]`` with the rows ``x[cols]``
    (``x`` ``(B, D)``, ``rows`` ``(R,)``, ``cols`` ``(C,)`` indices into it),
    :math:`c_{ij} = x_{r_i}^\top x_{c_j} / (\lVert x_{r_i} \rVert \lVert x_{c_j} \rVert)`.

    The same function as ``cosine_similarity(x[rows], x[cols])`` (zero rows give 0 with a zero
    gradient, huge or tiny rows are scaled first), rounded differently (each row is divided by
    its largest entry, then multiplied by ``1 / |y|``): one gather, one ``index_add`` in the
    backward, whose row-wise dot products are ``(R, C)`` sums (:class:`_IndexedCosine`).
    """
    check_embeddings(x, "x")
    return _IndexedCosine.apply(x, rows, cols, eps)


class _PairwiseDistance(torch.autograd.Function):
    r"""Euclidean or squared Euclidean distances ``(B, R)`` with a one-pass backward.

    Forward: :math:`d^2_{ij} = |x_i|^2 + |y_j|^2 - 2 x_i^\top y_j` (one ``addmm``), an exact 0 on
    the diagonal when ``y`` is ``x`` (``y=None``), then ``max(d^2, 0)`` (``squared``) or
    :math:`d = \sqrt{d^2}` with ``d = 0`` wherever ``d^2 <= eps``.

    Backward, with :math:`G = \partial L / \partial d^2` (:math:`g / (2d)` on the distances, 0 where
    ``d = 0``; ``g`` on the squared distances, 0 where they were clamped and on the diagonal):
    :math:`\partial x_i = 2 (\sum_j G_{ij}) x_i - 2 (G y)_i` and
    :math:`\partial y_j = 2 (\sum_i G_{ij}) y_j - 2 (G^\top x)_j`; for ``y = x`` the two add up to
    :math:`2 \operatorname{rowsum}(S) x - 2 S x` with :math:`S = G + G^\top`.
    """

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor | None, squared: bool, eps: float) -> Tensor:  # type: ignore[override]
        y_ = x if y is None else y  # (R, D)
        x2 = (x * x).sum(dim=1, keepdim=True)  # (B, 1)
        y2 = x2.T if y is None else (y * y).sum(dim=1)  # (1, B) or (R,)
        d2 = torch.addmm(x2 + y2, x, y_.T, alpha=-2.0)  # (B, R)
        if y is None:  # exact zeros on the diagonal despite round-off
            d2.fill_diagonal_(0.0)
        ctx.self_distance, ctx.squared = y is None, squared
        if squared:
            clamped = d2 < 0.0  # (B, R) no gradient where clamped
            if y is None:
                clamped.fill_diagonal_(True)  # nor on the diagonal
            ctx.save_for_backward(x, y, clamped)
            return d2.clamp_min(0.0)  # (B, R)
        d = torch.threshold(d2, eps, 0.0).sqrt_()  # (B, R) 0 (no NaN) where d2 <= eps (or < 0)
        ctx.save_for_backward(x, y, d)
        return d

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:  # type: ignore[override]
        x, y, saved = ctx.saved_tensors
        # h = G and two = 2 (squared), or h = 2 G and two = 1: the gradients are two * (...) below
        if ctx.squared:  # G = g, 0 where clamped
            h, two = grad.masked_fill(saved, 0.0), 2.0  # (B, R)
        else:  # 2 G = g / d, 0 where d = 0 (the diagonal, duplicates, round-off): there g / d is
            # +-inf or NaN, and nowhere else (d >= sqrt(eps) > 0 elsewhere, g finite, not huge)
            h, two = torch.div(grad, saved).nan_to_num_(0.0, 0.0, 0.0), 1.0  # (B, R)
        if ctx.self_distance:
            s = h + h.T  # (B, B)
            gx = torch.addmm(s.sum(dim=1, keepdim=True) * x, s, x, beta=two, alpha=-two)  # (B, D)
            return gx, None, None, None
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = torch.addmm(h.sum(dim=1, keepdim=True) * x, h, y, beta=two, alpha=-two)  # (B, D)
        if ctx.needs_input_grad[1]:
            gy = torch.addmm(h.sum(dim=0)[:, None] * y, h.T, x, beta=two, alpha=-two)  # (R, D)
        return gx, gy, None, None


def euclidean_distance(
    x: Tensor, y: Tensor | None = None, squared: bool = False, eps: float = 1e-12
) -> Tensor:
    r"""Euclidean distance ``(B, R)`` between rows of ``x`` ``(B, D)`` and ``y`` ``(R, D)``.

    Computed as :math:`|x|^2 + |y|^2 - 2 x^\top y` (one ``addmm``, no ``(B, R, D)`` tensor),
    clamped at 0, with an exact 0 on the diagonal when ``y`` is ``None``. Squared distances
    ``<= eps`` (the diagonal, duplicates, round-off) give distance exactly 0 with a zero gradient,
    so no NaN or huge gradient appears. The backward is one pass (see :class:`_PairwiseDistance`).
    """
    check_embeddings(x, "x")
    if y is not None:
        check_embeddings(y, "y", x.shape[1])
    return _PairwiseDistance.apply(x, y, squared, eps)
