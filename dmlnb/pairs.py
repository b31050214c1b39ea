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

__all__ = [
    "PairMasks",
    "pair_masks",
    "l2_normalize",
    "cosine_similarity",
    "euclidean_distance",
    "check_batch",
    "check_class_labels",
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


def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    """Rows of ``x`` ``(B, D)`` scaled to unit L2 norm.

    An all-zero row stays zero **with a zero gradient**; ``F.normalize`` would give it a finite
    but enormous gradient (order ``1 / eps``) that wrecks the next optimiser step.
    """
    norm = x.norm(dim=1, keepdim=True)  # (B, 1)
    unit = x / norm.clamp_min(eps)  # (B, D)
    return torch.where(norm > eps, unit, torch.zeros_like(unit))


def cosine_similarity(x: Tensor, y: Tensor | None = None, eps: float = 1e-12) -> Tensor:
    """Cosine similarity ``(B, R)`` between rows of ``x`` ``(B, D)`` and ``y`` ``(R, D)``.

    Zero vectors have similarity 0 to everything, with a zero gradient (see :func:`l2_normalize`).
    """
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
    y_ = x if y is None else y
    x2 = (x * x).sum(dim=1, keepdim=True)  # (B, 1)
    y2 = (y_ * y_).sum(dim=1)  # (R,)
    d2 = torch.addmm(x2 + y2, x, y_.T, alpha=-2.0)  # (B, R)
    if y is None:  # exact zeros on the diagonal despite round-off
        d2.diagonal().fill_(0.0)
    d2 = d2.clamp_min(0.0)  # (B, R)
    return d2 if squared else _SafeSqrt.apply(d2, eps)


def check_batch(embeddings: Tensor, labels: Tensor) -> None:
    """Raise a clear error for a malformed batch (shape mismatch, non-finite values)."""
    if embeddings.dim() != 2:
        raise ValueError(
            f"embeddings must be (B, D), got shape {tuple(embeddings.shape)}; flatten the "
            "network output first"
        )
    if labels.dim() != 1 or labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"labels must be (B,) with B = {embeddings.shape[0]}, got shape {tuple(labels.shape)}"
        )
    if not torch.isfinite(embeddings).all():
        raise FloatingPointError(
            "embeddings contain NaN or Inf: the network diverged (lower the learning rate, "
            "enable gradient clipping, or check the input normalisation)"
        )


def check_class_labels(labels: Tensor, num_classes: int, what: str = "one parameter row per class") -> None:
    """Raise a clear error unless every label lies in ``[0, num_classes)`` (losses with per-class
    parameters: proxies, centres, centroids, class weights, per-class margins)."""
    if labels.numel() == 0:
        return
    lo, hi = int(labels.min()), int(labels.max())
    if lo < 0 or hi >= num_classes:
        raise ValueError(
            f"labels must lie in [0, num_classes={num_classes}) ({what}), got range [{lo}, {hi}]; "
            "remap the labels to 0..C-1 (dmlnb.data does per split) or raise num_classes"
        )
