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
    "cosine_similarity",
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
    same_ref = ref_labels is None
    ref = labels if ref_labels is None else ref_labels
    same = labels[:, None] == ref[None, :]  # (B, R)
    positive = same
    if same_ref:
        eye = torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
        positive = same & ~eye
    return PairMasks(positive=positive, negative=~same)


def power_of_two_scale(x: Tensor, dim: int | None = None) -> Tensor:
    """A power of two within a factor 2 of ``max |x|`` (over ``dim``, kept as a size-1 axis; over
    everything when ``dim`` is ``None``), and 1 where that maximum is 0. No gradient.

    Dividing by it is exact (no rounding) and brings the largest entry into ``[1, 2)``, so squares
    and dot products of huge (``1e20``) or tiny (``1e-30``) finite values neither overflow nor
    underflow, while every result that did not overflow before stays bit-identical.
    """
    with torch.no_grad():
        peak = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
        _, exponent = torch.frexp(peak)  # peak = m * 2**exponent, m in [0.5, 1): exact, no log2 rounding
        scale = torch.ldexp(torch.ones_like(peak), exponent - 1)  # 2**(e-1) <= peak < 2**e
        return torch.where(peak > 0, scale, torch.ones_like(scale))


def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    """Rows of ``x`` ``(B, D)`` scaled to unit L2 norm.

    An all-zero row (norm ``<= eps``) stays zero **with a zero gradient**; ``F.normalize`` would
    give it a finite but enormous gradient (order ``1 / eps``) that wrecks the next optimiser
    step. Each row is first divided by :func:`power_of_two_scale` (exact, and treated as a
    constant: the result does not depend on it), so a huge finite row (``1e20 * x``
    in float32, whose squared norm overflows) or a tiny one is normalised like ``x``; for every
    other row the result is bit-identical to ``x / |x|``.
    """
    check_embeddings(x, "x")
    scale = power_of_two_scale(x, dim=1)  # (B, 1)
    y = x / scale  # (B, D) exact; largest |y_ij| in [1, 2)
    y_norm = y.norm(dim=1, keepdim=True)  # (B, 1), >= 1 unless the row is zero
    unit = y / y_norm.clamp_min(0.5)  # (B, D)
    return torch.where(y_norm * scale > eps, unit, torch.zeros_like(unit))


def cosine_similarity(x: Tensor, y: Tensor | None = None, eps: float = 1e-12) -> Tensor:
    """Cosine similarity ``(B, R)`` between rows of ``x`` ``(B, D)`` and ``y`` ``(R, D)``.

    Zero vectors have similarity 0 to everything, with a zero gradient (see :func:`l2_normalize`).
    """
    check_embeddings(x, "x")
    if y is not None:
        check_embeddings(y, "y", x.shape[1])
    xn = l2_normalize(x, eps)  # (B, D)
    yn = xn if y is None else l2_normalize(y, eps)  # (R, D)
    return xn @ yn.T  # (B, R)


class _SafeSqrt(torch.autograd.Function):
    """``sqrt`` with entries ``<= eps`` mapped to exactly 0 and given a zero gradient
    (one pass forward and backward; plain ``sqrt`` has an infinite gradient at 0)."""

    @staticmethod
    def forward(ctx, d2: Tensor, eps: float) -> Tensor:  # type: ignore[override]
        d = d2.sqrt().masked_fill_(d2 <= eps, 0.0)
        ctx.save_for_backward(d)
        return d

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (d,) = ctx.saved_tensors
        return torch.where(d > 0, grad / (2.0 * d), torch.zeros_like(grad)), None


def euclidean_distance(
    x: Tensor, y: Tensor | None = None, squared: bool = False, eps: float = 1e-12
) -> Tensor:
    """Euclidean distance ``(B, R)`` between rows of ``x`` ``(B, D)`` and ``y`` ``(R, D)``.

    Computed as ``|x|^2 + |y|^2 - 2 x.y`` (one ``addmm``, no ``(B, R, D)`` tensor), clamped at 0,
    with an exact 0 on the diagonal when ``y`` is ``None``. Squared distances ``<= eps`` (the
    diagonal, duplicates, round-off) give distance exactly 0 with a zero gradient, so no NaN or
    huge gradient appears.
    """
    check_embeddings(x, "x")
    if y is not None:
        check_embeddings(y, "y", x.shape[1])
    y_ = x if y is None else y
    x2 = (x * x).sum(dim=1, keepdim=True)  # (B, 1)
    y2 = (y_ * y_).sum(dim=1)  # (R,)
    d2 = torch.addmm(x2 + y2, x, y_.T, alpha=-2.0)  # (B, R)
    if y is None:  # exact zeros on the diagonal despite round-off
        d2.diagonal().fill_(0.0)
    d2 = d2.clamp_min(0.0)  # (B, R)
    return d2 if squared else _SafeSqrt.apply(d2, eps)
