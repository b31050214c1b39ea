"""The inputs of the facility-location loss checked (distances, labels, medoids, the margin
multiplier, the refinement's passes and form) and the labels encoded as class codes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from dmlnb.checks import check_labels, check_square

__all__ = [
    "check_dist_labels",
    "check_medoids",
    "check_gamma",
    "check_passes",
    "REFINEMENTS",
    "check_refinement",
    "encode_labels",
]


def check_dist_labels(dist: Tensor, labels: Tensor) -> None:
    """``dist (B, B)`` and integer ``labels (B,)`` (any values: they are only compared)."""
    check_square(dist, "dist")
    check_labels(labels, dist.shape[0], "labels", of="dist row")


def check_medoids(dist: Tensor, medoids: Tensor) -> None:
    """``medoids``: a non-empty ``(K,)`` integer tensor of distinct indices into ``dist``'s rows."""
    if medoids.dim() != 1 or medoids.numel() == 0:
        raise ValueError(
            f"medoids must be a non-empty (K,) index tensor, got shape {tuple(medoids.shape)}"
        )
    if medoids.is_floating_point():
        raise TypeError(f"medoids must be an integer index tensor, got {medoids.dtype}")
    b = dist.shape[0]
    if int(medoids.min()) < 0 or int(medoids.max()) >= b:
        raise IndexError(f"medoid indices must lie in [0, {b}); got {medoids.tolist()}")
    if torch.unique(medoids).numel() != medoids.numel():
        raise ValueError(f"medoids must be distinct indices, got {medoids.tolist()}")


def check_gamma(gamma: float) -> float:
    """The margin multiplier ``gamma`` as a float, finite and ``>= 0``."""
    gamma = float(gamma)
    if not math.isfinite(gamma) or gamma < 0:
        raise ValueError(f"the margin multiplier gamma must be finite and >= 0, got {gamma}")
    return gamma


def check_passes(pam_passes: int) -> int:
    """The refinement passes ``pam_passes`` as an int, ``>= 0``."""
    if int(pam_passes) != pam_passes or pam_passes < 0:
        raise ValueError(f"pam_passes must be an integer >= 0, got {pam_passes}")
    return int(pam_passes)


#: Forms of Algorithm 2 (see :func:`loss_augmented_inference`): the paper's listing (the
#: default) and the variant that scores swaps with the full objective.
REFINEMENTS = ("paper", "full")


def check_refinement(refinement: str) -> str:
    """``refinement``, one of :data:`REFINEMENTS`."""
    if refinement not in REFINEMENTS:
        raise ValueError(f"refinement must be one of {REFINEMENTS}, got {refinement!r}")
    return refinement


def encode_labels(labels: Tensor) -> tuple[Tensor, int]:
    """Labels mapped to ``0..C-1`` (sorted order): codes ``(B,)`` and ``C``."""
    uniq, codes = torch.unique(labels, return_inverse=True)
    return codes, uniq.numel()
