"""NMI of clusterings against the classes, batched (Eq. 8-10), and the loss-augmented objective
``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))`` that inference maximises.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from dmlnb.losses.facility_location.inputs import (
    check_dist_labels,
    check_gamma,
    check_medoids,
    encode_labels,
)

__all__ = [
    "MI_ROUND_OFF",
    "Classes",
    "classes_of",
    "table_terms",
    "nmi_from_assignment",
    "objectives",
    "augmented_objective",
]


# Mutual information (nats) at or below this is float64 round-off of an independent table and is
# set to 0 (sklearn returns NMI 0 there); genuine MI of a batch of B <= 1000 points exceeds it.
MI_ROUND_OFF = 1e-12


class Classes(NamedTuple):
    """The class side of NMI, computed once per batch of ``B`` points with ``C`` classes."""

    codes: Tensor  # (B,) class of each point in 0..C-1
    num_classes: int
    entropy: Tensor  # () float64 H(y) = log B - (1/B) sum_i log n(y_i)
    matched: Tensor  # () float64 -sum_i n(y_i) (n(c): size of class c), the excess of a 1-1 table
    ones: Tensor  # (2B,) float64, the unit counts scattered into contingency tables
    excess_weights: Tensor  # (2B,) float64, -2 on a point's cell count, 1 on its cluster size


def classes_of(codes: Tensor, num_classes: int) -> Classes:
    """:class:`Classes` of the class codes ``(B,)`` in ``0..C-1`` (static shapes, no host read)."""
    b = codes.numel()
    ones = torch.ones(2 * b, dtype=torch.float64, device=codes.device)  # (2B,)
    class_size = torch.zeros(num_classes, dtype=torch.float32, device=codes.device)
    class_size.scatter_add_(0, codes, ones[:b].float())  # (C,) counts are exact in float32
    n_class = class_size[codes].double()  # (B,) size of each point's class
    entropy = math.log(b) - n_class.log().sum() / b  # ()
    excess_weights = torch.cat([ones[:b] * -2.0, ones[b:]])  # (2B,)
    return Classes(codes, num_classes, entropy, -n_class.sum(), ones, excess_weights)


def table_terms(index: Tensor, width: int, classes: Classes) -> tuple[Tensor, Tensor, Tensor]:
    """The pieces of NMI (Eq. 9) shared by :func:`_nmi` and :func:`_margin`, for ``index``
    ``(N, 2, B)`` as in :func:`_nmi`: ``counts`` ``(N, 2B)`` (the ``n_joint`` of each point, then
    its ``n_cluster``, Eq. 10), ``mi = H(g) + H(y) - H(g, y)`` ``(N,)`` and ``denom =
    sqrt(H(g) H(y))`` ``(N,)``, float64.
    """
    n, _, b = index.shape
    flat = index.view(n, 2 * b)  # (N, 2B)
    table = torch.zeros(n, width, dtype=torch.float64, device=index.device)  # (N, width)
    table.scatter_add_(1, flat, classes.ones.expand(n, 2 * b))  # contingency counts, Eq. (10)
    counts = table.gather(1, flat)  # (N, 2B): n_joint of each point, then n_cluster
    h = math.log(b) - counts.log().view(n, 2, b).sum(dim=2) / b  # (N, 2): H(g, y), H(g)
    h_joint, h_cluster = h.unbind(1)  # (N,), (N,)
    mi = h_cluster + classes.entropy - h_joint  # (N,)
    denom = torch.sqrt(h_cluster * classes.entropy)  # (N,)
    return counts, mi, denom


def _nmi(index: Tensor, width: int, classes: Classes) -> Tensor:
    """Batched NMI, Eq. (9): one clustering of the ``B`` points per row of ``index`` vs the classes.

    ``index`` ``(N, 2, B)``: ``index[r, 0, i]`` names the contingency cell of point ``i`` in
    clustering ``r`` (two points share it iff they share cluster and class) and ``index[r, 1, i]``
    its cluster; cell and cluster ids are disjoint and lie in ``[0, width)``. One scatter counts
    both (Eq. 10), one gather reads each point's cell count ``n_joint`` and cluster size
    ``n_cluster``, and the entropies are read per point, never over the mostly empty table:
    ``H = -sum_cells (n/B) log(n/B) = log B - (1/B) sum_i log n(cell of i)``. A table is a
    one-to-one match (NMI exactly 1, incl. one cluster vs one class) iff ``n_joint = n_cluster =
    n_class`` at every point; as ``n_joint`` is at most either, iff the exact integer
    ``sum_i n_cluster + n_class - 2 n_joint`` is 0. Returns ``(N,)`` float64.
    """
    counts, mi, denom = table_terms(index, width, classes)
    # MI at round-off level: an independent table, exactly 0.
    # (denom > 0 is at least sqrt of the smallest double, so mi / denom needs no guard.)
    nmi = torch.where((mi > MI_ROUND_OFF) & (denom > 0), mi / denom, 0.0).clamp_max(1.0)  # (N,)
    perfect = counts @ classes.excess_weights == classes.matched  # (N,)
    return torch.where(perfect, 1.0, nmi)


def _nmi_codes(assign: Tensor, classes: Classes, num_clusters: int) -> Tensor:
    """:func:`_nmi` of clusterings ``assign`` ``(N, B)`` in ``0..K-1``: cells ``assign * C + y``."""
    c = classes.num_classes
    cells = torch.add(classes.codes, assign, alpha=c)  # (N, B)
    index = torch.stack([cells, assign + num_clusters * c], dim=1)  # (N, 2, B)
    return _nmi(index, num_clusters * (c + 1), classes)


def nmi_from_assignment(assignment: Tensor, labels: Tensor) -> Tensor:
    """Normalised mutual information, Eq. (9)-(10), of one or many clusterings against ``labels``.

    ``NMI = MI(a, y) / sqrt(H(a) H(y))`` (geometric mean, as in the paper; sklearn's
    ``normalized_mutual_info_score(..., average_method="geometric")``). Limit cases follow sklearn:
    1 when both labelings are a single group, 0 when only one of them is.

    Args:
        assignment: ``(B,)`` or ``(N, B)`` integer cluster ids (any values); each row is scored.
        labels: ``(B,)`` integer class labels (any values).

    Returns:
        Float64 NMI of shape ``()`` or ``(N,)``; no gradient.
    """
    if (
        labels.dim() != 1
        or assignment.dim() not in (1, 2)
        or assignment.shape[-1] != labels.shape[0]
    ):
        raise ValueError(
            f"assignment must be (B,) or (N, B) and labels (B,); got {tuple(assignment.shape)} "
            f"and {tuple(labels.shape)}"
        )
    if assignment.is_floating_point() or labels.is_floating_point():
        raise TypeError("assignment and labels must be integer tensors; use .long()")
    rows = assignment.reshape(-1, assignment.shape[-1])  # (N, B)
    uniq, cluster_codes = torch.unique(rows, return_inverse=True)  # ids shared by all rows
    nmi = _nmi_codes(cluster_codes, classes_of(*encode_labels(labels)), uniq.numel())  # (N,)
    return nmi.reshape(assignment.shape[:-1])


def objectives(
    columns: Tensor, sets: Tensor, classes: Classes, gamma: float | Tensor
) -> tuple[Tensor, Tensor]:
    """``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))`` of each row of ``sets`` ``(N, K)``.

    ``columns`` ``(B, B)``: row ``j`` holds ``d[i, j]`` for every point ``i`` (``dist.T``).
    Returns ``(A (N,), NMI (N,))``, both float64.
    """
    min_dist, assign = columns[sets].min(dim=1)  # (N, K, B) -> (N, B), (N, B) first minimum wins
    positions = torch.arange(sets.shape[1], device=sets.device)  # (K,)
    assign.scatter_(1, sets, positions.expand_as(sets))  # medoids own their clusters
    nmi = _nmi_codes(assign, classes, sets.shape[1])  # (N,)
    return gamma * (1.0 - nmi) - min_dist.sum(dim=1, dtype=torch.float64), nmi


def augmented_objective(dist: Tensor, labels: Tensor, medoids: Tensor, gamma: float) -> Tensor:
    """Loss-augmented objective ``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))`` (Algorithm 1).

    Returns a float64 scalar without gradient (the quantity inference maximises).
    """
    check_dist_labels(dist, labels)
    gamma = check_gamma(gamma)
    check_medoids(dist, medoids)
    with torch.no_grad():
        return objectives(
            dist.detach().T, medoids[None], classes_of(*encode_labels(labels)), gamma
        )[0][0]
