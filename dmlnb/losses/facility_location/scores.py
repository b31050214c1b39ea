"""The clustering scores of Song et al. (2017): the facility location (Eq. 4), the oracle score
of the ground-truth clustering with its per-class medoids (Eq. 5), the cluster assignment (Eq. 7).
"""

from __future__ import annotations

import torch
from torch import Tensor

from dmlnb.checks import check_square
from dmlnb.losses.facility_location.inputs import (
    check_dist_labels,
    check_medoids,
    encode_labels,
)

__all__ = [
    "facility_score",
    "facility_unchecked",
    "oracle_score",
    "oracle_of_codes",
    "cluster_assignment",
]


def facility_score(dist: Tensor, medoids: Tensor) -> Tensor:
    """Facility location function, Eq. (4): ``F(X, S) = - sum_i min_{j in S} d[i, j]``.

    Args:
        dist: ``(B, B)`` distances, ``dist[i, j] = ||f(x_i) - f(x_j)||``.
        medoids: ``(K,)`` distinct indices ``S`` into the batch.

    Returns:
        A scalar in ``dist``'s dtype. Its gradient is the subgradient of Eq. (12): ``-1`` on
        ``dist[i, j*(i)]`` for each point's nearest medoid ``j*(i)``, 0 elsewhere.
    """
    check_square(dist, "dist")
    check_medoids(dist, medoids)
    return facility_unchecked(dist, medoids)


def facility_unchecked(dist: Tensor, medoids: Tensor) -> Tensor:
    """Unchecked :func:`facility_score` (no host read): ``()``."""
    return -dist[:, medoids].min(dim=1).values.sum()  # (B, K) -> (B,) -> ()


def oracle_score(dist: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Ground-truth clustering score, Eq. (5), and its per-class medoids.

    ``F~(X, y) = sum_c max_{j: y_j = c} F(X_c, {j})`` with ``F(X_c, {j}) = -sum_{i in c} d[i, j]``:
    each class is scored with its medoid (the member with the smallest within-class distance sum;
    ties go to the lowest index).

    Args:
        dist: ``(B, B)`` distances.
        labels: ``(B,)`` integer labels.

    Returns:
        ``(score, medoids)``: the scalar score (differentiable w.r.t. ``dist``, gradient ``-1`` on
        ``dist[i, medoid(y_i)]``, Eq. 13) and ``(C,)`` medoid indices, one per distinct label in
        sorted label order.
    """
    check_dist_labels(dist, labels)
    return oracle_of_codes(dist, *encode_labels(labels))


def oracle_of_codes(dist: Tensor, codes: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """:func:`oracle_score` of the class codes ``(B,)`` in ``0..C-1`` (no host read)."""
    with torch.no_grad():
        same = codes[:, None] == codes[None, :]  # (B, B)
        within_sum = (dist * same).sum(dim=0)  # (B,) sum_{i in class(j)} d[i, j]
        masked = torch.where(same, within_sum[None, :], torch.inf)  # (B, B) row i: its class only
        medoid_of_point = masked.argmin(dim=1)  # (B,) medoid of y_i's class
        medoids = torch.empty(num_classes, dtype=torch.long, device=dist.device)
        medoids.scatter_(0, codes, medoid_of_point)  # (C,)
    score = -dist.gather(1, medoid_of_point[:, None]).sum()  # (B, 1) -> ()
    return score, medoids


def cluster_assignment(dist: Tensor, medoids: Tensor) -> Tensor:
    """Nearest-medoid assignment ``g(S)``, Eq. (7): ``(B,)`` cluster ids in ``0..K-1``.

    Point ``i`` goes to ``argmin_k dist[i, S[k]]`` (ties: the earliest ``k``); medoid ``S[k]``
    always belongs to cluster ``k``.
    """
    check_square(dist, "dist")
    check_medoids(dist, medoids)
    assign = dist[:, medoids].argmin(dim=1)  # (B,) first minimum wins
    assign[medoids] = torch.arange(medoids.numel(), device=dist.device)
    return assign
