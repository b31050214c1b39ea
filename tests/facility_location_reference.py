"""Frozen copy of the facility-location loss-augmented inference as of commit 2639b1a (before it
was made free of host synchronisations), the reference the current implementation must reproduce
exactly: same medoids and bit-identical stats. Test helper only; do not edit to follow changes."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _encode(labels: Tensor) -> tuple[Tensor, int]:
    """Labels mapped to ``0..C-1`` (sorted order): codes ``(B,)`` and ``C``."""
    uniq, codes = torch.unique(labels, return_inverse=True)
    return codes, uniq.numel()


def _assign(dist: Tensor, medoids: Tensor) -> Tensor:
    """Unchecked :func:`cluster_assignment` for the inference loops: ``(B,)``."""
    assign = dist[:, medoids].argmin(dim=1)  # (B,) first minimum wins
    assign[medoids] = torch.arange(medoids.numel(), device=dist.device)
    return assign


# Mutual information (nats) at or below this is float64 round-off of an independent table and is
# set to 0 (sklearn returns NMI 0 there); genuine MI of a batch of B <= 1000 points exceeds it.
_MI_ROUND_OFF = 1e-12


def _nmi(
    assign: Tensor, cell: Tensor, codes: Tensor, num_clusters: int, num_cells: int, num_classes: int
) -> Tensor:
    """Batched NMI, Eq. (9): one clustering per row of ``assign`` ``(N, B)`` vs ``codes`` ``(B,)``.

    ``cell`` ``(N, B)`` in ``[0, num_cells)`` names each point's contingency cell: two points of a
    row share an id iff they share cluster and class (``assign * C + codes`` will do; candidate
    scoring passes compact ids so its tables are ``B + C`` wide instead of ``K C``). Entropies are
    read per point, never over the mostly empty table:
    ``H = -sum_cells (n/B) log(n/B) = log B - (1/B) sum_i log n(cell of i)``.
    Returns ``(N,)`` float64.
    """
    n, b = assign.shape
    device = assign.device
    ones = torch.ones_like(cell, dtype=torch.float32)  # (N, B) counts are exact in float32
    joint = torch.zeros(n, num_cells, dtype=torch.float32, device=device)
    joint.scatter_add_(1, cell, ones)  # (N, cells) contingency counts, Eq. (10)
    size = torch.zeros(n, num_clusters, dtype=torch.float32, device=device)
    size.scatter_add_(1, assign, ones)  # (N, K) cluster sizes
    class_size = torch.bincount(codes, minlength=num_classes).float()  # (C,)
    n_joint = joint.gather(1, cell)  # (N, B) size of each point's cell
    n_cluster = size.gather(1, assign)  # (N, B) size of each point's cluster
    n_class = class_size[codes]  # (B,) size of each point's class
    log_b = math.log(b)
    h_joint = log_b - n_joint.double().log().sum(dim=1) / b  # (N,)
    h_cluster = log_b - n_cluster.double().log().sum(dim=1) / b  # (N,)
    h_class = log_b - n_class.double().log().sum() / b  # ()
    mi = h_cluster + h_class - h_joint  # (N,)
    mi = torch.where(mi > _MI_ROUND_OFF, mi, 0.0)  # independent clusterings: exactly 0
    denom = torch.sqrt(h_cluster * h_class)  # (N,)
    nmi = torch.where(denom > 0, mi / denom.clamp_min(1e-300), 0.0).clamp(0.0, 1.0)  # (N,)
    # A one-to-one table (incl. one cluster vs one class) is a perfect match: exactly 1.
    perfect = ((n_joint == n_cluster) & (n_joint == n_class[None, :])).all(dim=1)  # (N,)
    return torch.where(perfect, 1.0, nmi)


def _nmi_codes(assign: Tensor, codes: Tensor, num_clusters: int, num_classes: int) -> Tensor:
    """:func:`_nmi` with cells ``assign * C + codes``: ``(N, B)`` clusterings -> ``(N,)``."""
    cell = assign * num_classes + codes[None, :]  # (N, B)
    return _nmi(assign, cell, codes, num_clusters, num_clusters * num_classes, num_classes)


def _augmented_objective(
    dist: Tensor, codes: Tensor, num_classes: int, medoids: Tensor, gamma: float
) -> Tensor:
    assign = _assign(dist, medoids)  # (B,)
    nmi = _nmi_codes(assign[None], codes, medoids.numel(), num_classes)[0]
    score = dist[:, medoids].min(dim=1).values.sum(dtype=torch.float64)
    return -score + gamma * (1.0 - nmi)


def _candidate_objectives(
    candidate_dist: Tensor,
    candidates: Tensor,
    position: int,
    base_min: Tensor,
    base_assign: Tensor,
    fixed: Tensor,
    codes: Tensor,
    num_clusters: int,
    num_classes: int,
    gamma: float,
) -> tuple[Tensor, Tensor]:
    """``A`` of every candidate set ``S' = (staying medoids) + {j}``, ``j`` at cluster ``position``.

    Args:
        candidate_dist: ``(n, B)``, row ``r``: ``d[i, candidates[r]]`` for every point ``i``.
        candidates: ``(n,)`` candidate indices.
        position: cluster id the candidate takes.
        base_min: ``(B,)`` distance of each point to its nearest staying medoid (inf if none).
        base_assign: ``(B,)`` cluster of each point among the staying medoids.
        fixed: ``(B,)`` bool, the staying medoids (they keep their own cluster).

    Returns:
        ``(objective (n,) float64, assignment (n, B))``; ties follow :func:`cluster_assignment`.
    """
    n, b = candidate_dist.shape
    rows = torch.arange(n, device=candidate_dist.device)  # (n,)
    new_min = torch.minimum(base_min[None, :], candidate_dist)  # (n, B) for F, Eq. (4)
    wins = (candidate_dist < base_min[None, :]) | (
        (candidate_dist == base_min[None, :]) & (position < base_assign)[None, :]
    )  # (n, B) point joins the candidate's cluster; the earlier cluster wins ties
    wins &= ~fixed[None, :]
    wins[rows, candidates] = True
    assign = torch.where(wins, position, base_assign[None, :])  # (n, B)
    # Compact cells: a point that stays keeps its base cell (< B ids), a point that joins the
    # candidate goes to cell B + class.
    _, base_cell = torch.unique(base_assign * num_classes + codes, return_inverse=True)  # (B,)
    cell = torch.where(wins, b + codes[None, :], base_cell[None, :])  # (n, B)
    nmi = _nmi(assign, cell, codes, num_clusters, b + num_classes, num_classes)  # (n,)
    objective = -new_min.sum(dim=1, dtype=torch.float64) + gamma * (1.0 - nmi)  # (n,)
    return objective, assign


def _greedy(dist: Tensor, codes: Tensor, num_classes: int, gamma: float) -> Tensor:
    """Algorithm 1: add, ``C`` times, the point maximising ``A(S + {j})``. Returns ``(C,)``."""
    b = dist.shape[0]
    device = dist.device
    everyone = torch.arange(b, device=device)  # (B,) all points are candidates
    candidate_dist = dist.T  # (B, B) row j: d[i, j] for all points i
    current_min = torch.full((b,), torch.inf, dtype=dist.dtype, device=device)  # (B,)
    current_assign = torch.zeros(b, dtype=torch.long, device=device)  # (B,)
    chosen = torch.zeros(b, dtype=torch.bool, device=device)  # (B,)
    medoids = torch.empty(num_classes, dtype=torch.long, device=device)  # (C,)
    for t in range(num_classes):
        objective, assign = _candidate_objectives(
            candidate_dist,
            everyone,
            t,
            current_min,
            current_assign,
            chosen,
            codes,
            t + 1,
            num_classes,
            gamma,
        )  # (B,), (B, B)
        best = objective.masked_fill(chosen, -torch.inf).argmax()
        medoids[t] = best
        chosen[best] = True
        current_min = torch.minimum(current_min, candidate_dist[best])
        current_assign = assign[best]
    return medoids


def _refine(
    dist: Tensor, codes: Tensor, num_classes: int, gamma: float, medoids: Tensor, passes: int
) -> tuple[Tensor, int]:
    """Algorithm 2: per cluster, swap its medoid for the member that maximises ``A``.

    All members of a cluster are scored at once; the current medoid is always a candidate, so
    ``A`` never decreases (Lemma 1). Assignments are recomputed after every swap. Stops early after
    a pass without a swap. Returns the refined ``(C,)`` medoids and the number of swaps.
    """
    b = dist.shape[0]
    k_all = medoids.numel()
    device = dist.device
    positions = torch.arange(k_all, device=device)  # (K,)
    swaps = 0
    for _ in range(passes):
        swapped = False
        for k in range(k_all):
            to_medoids = dist[:, medoids]  # (B, K)
            assign = to_medoids.argmin(dim=1)  # (B,) as _assign
            assign[medoids] = positions
            keep = positions != k  # (K,)
            to_medoids[:, k] = torch.inf
            base_min, base_assign = to_medoids.min(dim=1)  # (B,), (B,) first minimum wins
            base_assign[medoids[keep]] = positions[keep]  # staying medoids keep their cluster
            fixed = torch.zeros(b, dtype=torch.bool, device=device)  # (B,)
            fixed[medoids[keep]] = True
            is_candidate = (assign == k) & ~fixed  # (B,) members of cluster k
            is_candidate[medoids[k]] = True  # Lemma 1: the current medoid is a candidate
            candidates = is_candidate.nonzero().squeeze(1)  # (n,)
            objective, _ = _candidate_objectives(
                dist[:, candidates].T,
                candidates,
                k,
                base_min,
                base_assign,
                fixed,
                codes,
                k_all,
                num_classes,
                gamma,
            )  # (n,)
            current = objective[candidates == medoids[k]]  # (1,)
            best = objective.argmax()
            if bool(objective[best] > current):
                medoids[k] = candidates[best]
                swaps += 1
                swapped = True
        if not swapped:
            break
    return medoids, swaps


def reference_inference(
    dist: Tensor, labels: Tensor, gamma: float, pam_passes: int = 5
) -> tuple[Tensor, dict[str, float]]:
    """``loss_augmented_inference`` of commit 2639b1a (its input checks left out)."""
    gamma = float(gamma)
    codes, num_classes = _encode(labels)
    with torch.no_grad():
        d = dist.detach()
        greedy = _greedy(d, codes, num_classes, gamma)
        refined, swaps = _refine(d, codes, num_classes, gamma, greedy.clone(), int(pam_passes))
        nmi = _nmi_codes(_assign(d, refined)[None], codes, num_classes, num_classes)
        stats = {
            "greedy_objective": _augmented_objective(d, codes, num_classes, greedy, gamma).item(),
            "refined_objective": _augmented_objective(d, codes, num_classes, refined, gamma).item(),
            "nmi": nmi.item(),
            "pam_swaps": float(swaps),
        }
    return refined, stats
