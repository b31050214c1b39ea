"""Triplet mining from propagated affinities (Dutta, Harandi and Sekhar 2021, Sec. "Triplet Mining
using Affinity Propagation", Fig. 1b).

For an anchor ``z_a`` with kNN neighbourhood ``N_k(z_a)``, sort the neighbours by their propagated
affinity ``W(z_a, ·)`` in descending order,
``N_W(z_a) = {z⁺_1, ..., z⁺_{k/2}, z⁻_{k/2+1}, ..., z⁻_k}``, and pair the i-th most affine with the
i-th of the second half:

    (z_a, z⁺_1, z⁻_{k/2+1}), (z_a, z⁺_2, z⁻_{k/2+2}), ..., (z_a, z⁺_{k/2}, z⁻_k).

Every point of the partition is an anchor, so a partition of ``N`` points gives ``N ⌊k/2⌋``
triplets (the paper's 146,600 for CUB's 5,864 training images with k = 50, and 201,350 for
Cars' 8,054, are exactly ``N · 25``).

``negatives="outside"`` (not the paper's: an option the chapter's diagnosis measures) keeps the
positives and draws each anchor's ``⌊k/2⌋`` negatives uniformly, without replacement, from the
partition's points outside its neighbourhood ``N_k(z_a) ∪ {z_a}``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["NEGATIVES", "neighbourhood_triplets"]

#: Where the negatives come from: the paper's second half of the sorted neighbourhood, or
#: uniformly from outside the neighbourhood.
NEGATIVES = ("neighbourhood", "outside")


def neighbourhood_triplets(
    W: Tensor,
    neighbours: Tensor,
    negatives: str = "neighbourhood",
    generator: torch.Generator | None = None,
) -> Tensor:
    """Triplets ``(N ⌊k/2⌋, 3)`` long ``(anchor, positive, negative)`` indices.

    Args:
        W: ``(N, N)`` symmetric propagated affinities.
        neighbours: ``(N, k)`` long, the kNN neighbourhood of each anchor (``k >= 2``; for odd
            ``k`` the middle neighbour is in neither half).
        negatives: ``"neighbourhood"`` (the paper) or ``"outside"`` (:data:`NEGATIVES`).
        generator: the draw of ``"outside"`` negatives (``None``: torch's global generator).

    Rows are ordered by anchor, then by rank ``i``. Ties in ``W`` keep the neighbours' kNN order
    (stable sort), so the closer neighbour is the positive.
    """
    if W.dim() != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be (N, N), got shape {tuple(W.shape)}")
    if neighbours.dim() != 2 or neighbours.shape[0] != W.shape[0]:
        raise ValueError(
            f"neighbours must be (N, k) with N = {W.shape[0]} rows, got shape "
            f"{tuple(neighbours.shape)}"
        )
    if negatives not in NEGATIVES:
        raise ValueError(f"negatives must be one of {NEGATIVES}, got {negatives!r}")
    n, k = neighbours.shape
    if k < 2:
        raise ValueError(f"mining needs k >= 2 neighbours (one positive, one negative), got k={k}")
    half = k // 2
    if negatives == "outside" and n - k - 1 < half:
        raise ValueError(
            f"negatives='outside' needs N - k - 1 >= k // 2 points outside each neighbourhood; "
            f"N = {n}, k = {k}: use a smaller k or a larger partition"
        )
    affinity = W.gather(1, neighbours)  # (N, k) W(z_a, neighbour)
    order = torch.sort(affinity, dim=1, descending=True, stable=True).indices  # (N, k)
    ranked = neighbours.gather(1, order)  # (N, k) N_W(z_a)
    positives = ranked[:, :half]  # (N, k/2)
    if negatives == "outside":
        scores = torch.rand(n, n, generator=generator).to(W.device)  # (N, N) uniform draw order
        inside = torch.zeros(n, n, dtype=torch.bool, device=W.device).scatter_(1, neighbours, True)
        inside.diagonal().fill_(True)
        negative_idx = (
            scores.masked_fill(inside, -1.0).topk(half, dim=1).indices
        )  # (N, k/2) outside N_k ∪ {a}
    else:
        negative_idx = ranked[:, k - half :]  # (N, k/2)
    anchors = torch.arange(n, device=W.device)[:, None].expand(n, half)  # (N, k/2)
    return torch.stack([anchors, positives, negative_idx], dim=2).reshape(n * half, 3)  # (N k/2, 3)
