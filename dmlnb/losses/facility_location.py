"""Structured facility-location clustering loss.

Song, Jegelka, Rathod, Murphy, "Deep Metric Learning via Facility Location", CVPR 2017.

A batch of ``B`` embeddings with ``C`` distinct labels is scored as a clustering. With the
distance matrix ``d`` ``(B, B)`` (``d[i, j] = ||f(x_i) - f(x_j)||``) and a set ``S`` of ``C``
medoid indices:

* facility location (Eq. 4): ``F(X, S) = - sum_i min_{j in S} d[i, j]``;
* cluster assignment (Eq. 7): ``g(S)[i] = argmin_k d[i, S[k]]``;
* oracle score (Eq. 5): ``F~(X, y) = sum_c max_{j: y_j = c} - sum_{i: y_i = c} d[i, j]``
  (the ground-truth clustering scored with its per-class medoids);
* structured margin (Eq. 8-10): ``Delta = 1 - NMI(g(S), y)`` with
  ``NMI = MI / sqrt(H(g(S)) H(y))``;
* loss (Eq. 6): ``[max_{|S| = C} {F(X, S) + gamma Delta(g(S), y)} - F~(X, y)]_+``.

The inner maximisation ("loss-augmented inference") is NP-hard; it is solved approximately by the
greedy Algorithm 1 followed by the PAM-like swap refinement Algorithm 2, in one of two forms
(``refinement=``, see :func:`loss_augmented_inference`):

* ``"paper"`` (the default): Algorithm 2 as the paper lists it, and TF's ``cluster_loss`` runs
  it. Each pass assigns ``y_PAM = g(S)`` once; then for each cluster ``k``, ``S[k]`` becomes the
  member ``j`` of cluster ``k`` of ``y_PAM`` maximising ``F(X_k, {j}) + gamma Delta(g(S minus
  S[k] plus j), y)`` (line 4, ``X_k`` the cluster's members). An update can lower the objective
  ``A(S) = F(X, S) + gamma Delta(g(S), y)``; a pass cannot take ``A`` below its value at the
  pass's start (for a metric ``d``, :func:`_paper_pass`), so ``A`` ends at or above the greedy's.
* ``"full"`` (the variant): a swap is scored with the full objective ``A`` (the quantity of
  Lemma 1's proof), clusters are re-assigned after every swap, and a medoid is swapped only when
  ``A`` strictly rises, so Lemma 1 holds at every swap. The facility-location and
  discriminative-loss chapters trained their committed runs with it (their experiment modules
  pass it explicitly) until they are retrained.

Both forms, and the greedy, score every candidate of a step at once: one ``(n_candidates, B)``
tensor of new nearest-medoid distances and one batch of contingency tables give ``F`` and NMI
for all candidates (no call per candidate). Entropies are read per point from the counts of its
cell, so scoring ``n`` candidates costs ``O(n (B + C))`` time. The greedy scores all ``B``
points at each of its ``C`` steps. A refinement step scores the cluster's members, ``C`` steps
per pass (gathering them is a ``nonzero``: free on the CPU, a host read on an accelerator;
``"paper"`` runs so on every device). On CUDA ``"full"`` runs in rounds of static shapes, one
per swap plus one (:func:`_refine_round`): a round scores every point as medoid of its own
cluster against the current medoids, all clusters' visits at once, and makes
the first swap that the sequential passes would make, with the same result. Nothing reads back
to the host inside the greedy, a round or the final scores, each of which replays one CUDA graph;
each round reads back whether it swapped. The kernels launched, a few microseconds each, set
the time on a GPU: about ``33 C`` for the greedy and ``71`` per round. A whole inference costs
``O(T C B (B + C))`` time for ``T`` passes, ``O(B (B + C))`` memory.
:func:`exhaustive_inference` solves the maximisation exactly on tiny batches.

Conventions (those of TensorFlow's ``contrib.losses.metric_learning.cluster_loss``, the authors'
reference): non-squared Euclidean distance on L2-normalised embeddings, ``C`` = number of distinct
labels in the batch, 5 refinement passes, the margin term carries no gradient, and the loss is a
sum over the batch (not a mean). Ties in the assignment go to the earliest medoid in ``S`` and
every medoid is assigned to its own cluster (as in TF, so duplicates cannot empty a cluster).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import OrderedDict
from typing import NamedTuple

import torch
from torch import Tensor

from dmlnb.checks import check_labels, check_square
from dmlnb.hooks import Hook, TrainState
from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, euclidean_distance, l2_normalize

__all__ = [
    "facility_score",
    "oracle_score",
    "cluster_assignment",
    "nmi_from_assignment",
    "augmented_objective",
    "loss_augmented_inference",
    "exhaustive_inference",
    "FacilityLocationLoss",
    "MarginDecayHook",
    "InsideLossHook",
    "REFINEMENTS",
]


# --------------------------------------------------------------------------- input checks


def _check_labels(dist: Tensor, labels: Tensor) -> None:
    """``dist (B, B)`` and integer ``labels (B,)`` (any values: they are only compared)."""
    check_square(dist, "dist")
    check_labels(labels, dist.shape[0], "labels", of="dist row")


def _check_medoids(dist: Tensor, medoids: Tensor) -> None:
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


def _check_gamma(gamma: float) -> float:
    gamma = float(gamma)
    if not math.isfinite(gamma) or gamma < 0:
        raise ValueError(f"the margin multiplier gamma must be finite and >= 0, got {gamma}")
    return gamma


def _check_passes(pam_passes: int) -> int:
    if int(pam_passes) != pam_passes or pam_passes < 0:
        raise ValueError(f"pam_passes must be an integer >= 0, got {pam_passes}")
    return int(pam_passes)


#: Forms of Algorithm 2 (see :func:`loss_augmented_inference`): the paper's listing (the
#: default) and the variant that scores swaps with the full objective.
REFINEMENTS = ("paper", "full")


def _check_refinement(refinement: str) -> str:
    if refinement not in REFINEMENTS:
        raise ValueError(f"refinement must be one of {REFINEMENTS}, got {refinement!r}")
    return refinement


def _encode(labels: Tensor) -> tuple[Tensor, int]:
    """Labels mapped to ``0..C-1`` (sorted order): codes ``(B,)`` and ``C``."""
    uniq, codes = torch.unique(labels, return_inverse=True)
    return codes, uniq.numel()


# --------------------------------------------------------------------------- scores


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
    _check_medoids(dist, medoids)
    return _facility(dist, medoids)


def _facility(dist: Tensor, medoids: Tensor) -> Tensor:
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
    _check_labels(dist, labels)
    return _oracle(dist, *_encode(labels))


def _oracle(dist: Tensor, codes: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
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
    _check_medoids(dist, medoids)
    assign = dist[:, medoids].argmin(dim=1)  # (B,) first minimum wins
    assign[medoids] = torch.arange(medoids.numel(), device=dist.device)
    return assign


# --------------------------------------------------------------------------- NMI

# Mutual information (nats) at or below this is float64 round-off of an independent table and is
# set to 0 (sklearn returns NMI 0 there); genuine MI of a batch of B <= 1000 points exceeds it.
_MI_ROUND_OFF = 1e-12


class _Classes(NamedTuple):
    """The class side of NMI, computed once per batch of ``B`` points with ``C`` classes."""

    codes: Tensor  # (B,) class of each point in 0..C-1
    num_classes: int
    entropy: Tensor  # () float64 H(y) = log B - (1/B) sum_i log n(y_i)
    matched: Tensor  # () float64 -sum_i n(y_i) (n(c): size of class c), the excess of a 1-1 table
    ones: Tensor  # (2B,) float64, the unit counts scattered into contingency tables
    excess_weights: Tensor  # (2B,) float64, -2 on a point's cell count, 1 on its cluster size


def _classes(codes: Tensor, num_classes: int) -> _Classes:
    """:class:`_Classes` of the class codes ``(B,)`` in ``0..C-1`` (static shapes, no host read)."""
    b = codes.numel()
    ones = torch.ones(2 * b, dtype=torch.float64, device=codes.device)  # (2B,)
    class_size = torch.zeros(num_classes, dtype=torch.float32, device=codes.device)
    class_size.scatter_add_(0, codes, ones[:b].float())  # (C,) counts are exact in float32
    n_class = class_size[codes].double()  # (B,) size of each point's class
    entropy = math.log(b) - n_class.log().sum() / b  # ()
    excess_weights = torch.cat([ones[:b] * -2.0, ones[b:]])  # (2B,)
    return _Classes(codes, num_classes, entropy, -n_class.sum(), ones, excess_weights)


def _table_terms(index: Tensor, width: int, classes: _Classes) -> tuple[Tensor, Tensor, Tensor]:
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


def _nmi(index: Tensor, width: int, classes: _Classes) -> Tensor:
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
    counts, mi, denom = _table_terms(index, width, classes)
    # MI at round-off level: an independent table, exactly 0.
    # (denom > 0 is at least sqrt of the smallest double, so mi / denom needs no guard.)
    nmi = torch.where((mi > _MI_ROUND_OFF) & (denom > 0), mi / denom, 0.0).clamp_max(1.0)  # (N,)
    perfect = counts @ classes.excess_weights == classes.matched  # (N,)
    return torch.where(perfect, 1.0, nmi)


def _nmi_codes(assign: Tensor, classes: _Classes, num_clusters: int) -> Tensor:
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
    nmi = _nmi_codes(cluster_codes, _classes(*_encode(labels)), uniq.numel())  # (N,)
    return nmi.reshape(assignment.shape[:-1])


def _objectives(
    columns: Tensor, sets: Tensor, classes: _Classes, gamma: float | Tensor
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
    _check_labels(dist, labels)
    gamma = _check_gamma(gamma)
    _check_medoids(dist, medoids)
    with torch.no_grad():
        return _objectives(dist.detach().T, medoids[None], _classes(*_encode(labels)), gamma)[0][0]


# --------------------------------------------------------------------------- inference


class _Batch(NamedTuple):
    """Per-inference constants of a batch of ``B`` points with ``C`` classes (``K = C`` clusters).

    Contingency ids (see :func:`_nmi`): cluster ``k`` is ``k`` (``< K``), the cell of class ``c``
    in the cluster a candidate opens or takes over is ``K + c``, and a cell of points that keep
    their cluster is ``K + C + (the lowest index of its points)`` (``+ B`` for a cell that a
    refinement round's candidates' clusters leave behind, see :func:`_refine_round`).
    """

    columns: Tensor  # (B, B) dist.T (a view), row j: d[i, j] for every point i
    claims: Tensor  # (B, B) columns with -inf on the diagonal: a candidate always takes itself
    steps: Tensor  # (B, 2, B) [j, 0]: columns[j]; [j, 1]: the float below it, NaN at point j
    classes: _Classes
    class_total: Tensor  # () float64 sum_i n(y_i) (see :func:`_margin`)
    everyone: Tensor  # (B,) 0..B-1
    positions: Tensor  # (K,) 0..K-1
    others: Tensor  # (K, K-1) row k: the positions other than k
    staying: Tensor  # (K + 1, K) bool [o, k]: the medoid of cluster o < K stays when k is swapped
    joined: Tensor  # (K, 2, B) [k, :, i]: cell and cluster ids of point i joining cluster k
    firsts: Tensor  # (2B,) K + C + 0..2B-1, the ids of cells named after their lowest point
    below: Tensor  # () -inf in dist's dtype, towards which a threshold steps down
    zero: Tensor  # () float64
    one: Tensor  # () float64


def _batch(dist: Tensor, classes: _Classes) -> _Batch:
    """The :class:`_Batch` of ``dist`` ``(B, B)`` (static shapes, no host read)."""
    b, k = dist.shape[0], classes.num_classes
    device = dist.device
    columns = dist.T  # (B, B)
    below = torch.full((), -torch.inf, dtype=dist.dtype, device=device)  # ()
    claims = columns.contiguous()  # (B, B) a copy, row-major as the candidates' tensors
    claims.diagonal().fill_(-torch.inf)
    steps = torch.stack([columns, columns.nextafter(below)], dim=1)  # (B, 2, B)
    steps[:, 1].diagonal().fill_(torch.nan)
    positions = torch.arange(k, device=device)  # (K,)
    rest = torch.arange(k - 1, device=device)  # (K-1,)
    others = rest + (rest >= positions[:, None])  # (K, K-1) row k: 0..k-1, k+1..K-1
    owner = torch.arange(k + 1, device=device)  # (K+1,) K: no cluster
    staying = (owner[:, None] < k) & (owner[:, None] != positions)  # (K+1, K)
    joined = torch.stack(
        [(classes.codes + k).expand(k, b), positions[:, None].expand(k, b)], dim=1
    )  # (K, 2, B)
    firsts = torch.arange(k + classes.num_classes, k + classes.num_classes + 2 * b, device=device)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    return _Batch(
        columns,
        claims,
        steps,
        classes,
        -classes.matched,
        torch.arange(b, device=device),
        positions,
        others,
        staying,
        joined,
        firsts,
        below,
        zero,
        zero + 1.0,
    )


def _margin(batch: _Batch, index: Tensor, width: int) -> Tensor:
    """``1 - NMI`` (Eq. 8) of ``n`` clusterings, the same float64 value as ``1 - nmi`` of
    :func:`_nmi` (bit for bit) in fewer operations.

    ``index`` ``(n, 2, B)``: the contingency cell and cluster ids of each point (see
    :func:`_nmi`), in ``[0, width)``. ``1 - MI / sqrt(H(g) H(y))`` comes from one ``addcdiv``, 1
    for an independent table, clamped to ``[0, e]`` where the exact integer
    ``e = sum_i n_cluster + n_class - 2 n_joint`` is 0 for a one-to-one table (see :func:`_nmi`)
    and otherwise at least 1: as ``1 - min(r, 1) = max(1 - r, 0)`` in floating point, every step
    rounds as in :func:`_nmi` followed by ``1 - nmi``. Returns ``(n,)`` float64.
    """
    classes = batch.classes
    counts, mi, denom = _table_terms(index, width, classes)
    gap = torch.where(
        (mi > _MI_ROUND_OFF) & (denom > 0), torch.addcdiv(batch.one, mi, denom, value=-1.0), 1.0
    )  # (n,) 1 - NMI before the clamps
    excess = torch.addmv(batch.class_total, counts, classes.excess_weights)  # (n,) e, exact
    return torch.clamp(gap, min=batch.zero, max=excess)  # (n,)


def _objective(batch: _Batch, index: Tensor, width: int, new_min: Tensor, gamma: Tensor) -> Tensor:
    """``A = F + gamma (1 - NMI)`` of ``n`` clusterings, the float64 value of :func:`_objectives`
    (bit for bit): ``index`` ``(n, 2, B)`` as in :func:`_margin`, ``new_min`` ``(n, B)`` each
    point's distance to its nearest medoid (``F = -sum``, Eq. 4), ``gamma`` ``()`` float64.
    Returns ``(n,)``."""
    return gamma * _margin(batch, index, width) - new_min.sum(dim=1, dtype=torch.float64)


def _greedy(batch: _Batch, gamma: Tensor) -> Tensor:
    """Algorithm 1: add, ``C`` times, the point maximising ``A(S + {j})``. Returns ``(C,)``.

    Static shapes, no host read: all ``B`` points are scored at every step, the chosen ones
    masked out (the first maximiser wins ties). The state between steps: each point's distance
    to its nearest medoid ``base_min`` and the threshold at or below which a candidate takes it
    (the float below ``base_min``, as ties go to the earlier medoid; NaN, never, at a medoid),
    both updated by a ``minimum`` with the chosen point's row of :attr:`_Batch.steps`, and the
    contingency ids of the points if they stay, from the chosen candidate's row of the step's
    ids (the cells renamed after their lowest point at the next step).
    """
    b, k_all = batch.columns.shape[0], batch.classes.num_classes
    device, dtype = batch.columns.device, batch.columns.dtype
    bounds = torch.empty(2, b, dtype=dtype, device=device)  # (2, B): base_min, threshold
    bounds[0].fill_(torch.inf)
    bounds[1].fill_(torch.finfo(dtype).max)  # the float below inf
    stay = torch.zeros(2, b, dtype=torch.long, device=device)  # (2, B): cell, cluster ids
    medoids = torch.empty(k_all, dtype=torch.long, device=device)  # (C,)
    codes, c = batch.classes.codes, batch.classes.num_classes
    width = k_all + c + b
    for t in range(k_all):
        cell = torch.add(codes, stay[1], alpha=c)  # (B,) cluster * C + class
        first = cell.new_empty(k_all * c).scatter_reduce_(
            0, cell, batch.firsts[:b], "amin", include_self=False
        )  # (K * C,) each occupied cell's id
        torch.index_select(first, 0, cell, out=stay[0])
        wins = torch.le(batch.claims, bounds[1])  # (B, B) point i joins candidate j (Eq. 7)
        new_min = torch.minimum(bounds[0], batch.columns)  # (B, B) nearest-medoid distances
        index = torch.where(wins[:, None, :], batch.joined[t], stay)  # (B, 2, B)
        objective = _objective(batch, index, width, new_min, gamma)  # (B,)
        objective.index_fill_(0, medoids[:t], -torch.inf)
        best = torch.argmax(objective, dim=0, keepdim=True, out=medoids[t : t + 1])  # (1,)
        bounds = torch.minimum(bounds, batch.steps.index_select(0, best)[0])  # (2, B)
        stay = index.index_select(0, best)[0]  # (2, B) cell ids overwritten next step
    return medoids


def _base(
    batch: _Batch, base_min: Tensor, base_assign: Tensor, staying: Tensor, position: int
) -> tuple[Tensor, Tensor]:
    """What the staying medoids leave to a candidate that takes cluster ``position``.

    ``base_min`` ``(B,)``: each point's distance to its nearest staying medoid (inf if none);
    ``base_assign`` ``(B,)``: that medoid's cluster; ``staying`` ``(K',)``: the staying medoids.
    A candidate ``j`` takes point ``i`` (Eq. 7, ties to the earlier cluster) iff
    ``d[i, j] < base_min[i]``, or ``d[i, j] = base_min[i]`` and ``position < base_assign[i]``:
    iff ``d[i, j] <= threshold[i]``, with ``threshold = base_min`` where ``position <
    base_assign`` and the next float below ``base_min`` elsewhere (exact for any distance but
    -inf), NaN (never) at the staying medoids.

    Returns ``(threshold (B,), stay (2, B))``: ``stay[:, i]`` holds point ``i``'s cell and cluster
    ids (:class:`_Batch`) when it stays.
    """
    b, c = base_min.shape[0], batch.classes.num_classes
    threshold = torch.where(base_assign > position, base_min, base_min.nextafter(batch.below))
    threshold.index_fill_(0, staying, math.nan)  # (B,)
    cell = torch.add(batch.classes.codes, base_assign, alpha=c)  # (B,) cluster * C + class
    first = cell.new_empty(batch.positions.numel() * c).scatter_reduce_(
        0, cell, batch.firsts[:b], "amin", include_self=False
    )  # (K * C,) each occupied cell's id
    stay = torch.stack([first.index_select(0, cell), base_assign])  # (2, B)
    return threshold, stay


def _refine_pass(batch: _Batch, gamma: Tensor, medoids: Tensor) -> None:
    """One pass of Algorithm 2 over the ``K`` clusters, in place on ``medoids`` ``(K,)``.

    Per cluster ``k``: its members (its medoid included, so ``A`` never decreases, Lemma 1) are
    scored as medoid of ``k`` with the other medoids staying; the best replaces the medoid if its
    ``A`` is strictly higher (the first maximiser wins ties). Assignments are recomputed after
    every swap (Gauss-Seidel). The members are gathered (a ``nonzero``, a host read on an
    accelerator): the CPU path; :func:`_refine_round` is the static-shape one.
    """
    b, c = batch.columns.shape[0], batch.classes.num_classes
    width = medoids.numel() + c + b
    for k in range(medoids.numel()):
        to_medoids = batch.columns.index_select(0, medoids)  # (K, B) row l: d[i, S[l]]
        assign = to_medoids.argmin(dim=0).index_put_((medoids,), batch.positions)  # (B,) Eq. (7)
        members = assign == k  # (B,)
        to_medoids[k].fill_(torch.inf)
        base_min, base_assign = to_medoids.min(dim=0)  # (B,), (B,) nearest staying medoid
        staying = medoids.index_select(0, batch.others[k])  # (K-1,)
        base_assign.index_put_((staying,), batch.others[k])  # staying medoids keep their cluster
        threshold, stay = _base(batch, base_min, base_assign, staying, k)
        candidates = members.nonzero().squeeze(1)  # (n,)
        # A transposed view: its layout sets the order of the float64 sum of F, kept as it was.
        rows = batch.columns.T[:, candidates].T  # (n, B) row r: d[i, candidates[r]]
        new_min = torch.minimum(base_min[None, :], rows)  # (n, B) nearest-medoid distances
        wins = torch.le(rows, threshold, out=rows.new_empty(rows.shape, dtype=torch.bool))
        wins.scatter_(1, candidates[:, None], True)  # a candidate is in its own cluster
        index = torch.where(wins[:, None, :], batch.joined[k], stay)  # (n, 2, B)
        objective = _objective(batch, index, width, new_min, gamma)  # (n,)
        best_value, best = objective.max(dim=0, keepdim=True)  # (1,), (1,)
        current = torch.searchsorted(candidates, medoids[k : k + 1])  # (1,) row of S[k]
        better = best_value > objective.index_select(0, current)  # (1,)
        torch.where(
            better, candidates.index_select(0, best), medoids[k : k + 1], out=medoids[k : k + 1]
        )


def _paper_pass(batch: _Batch, gamma: Tensor, medoids: Tensor) -> None:
    """One pass of Algorithm 2 as the paper lists it (and TF's ``cluster_loss`` runs it), in
    place on ``medoids`` ``(K,)``.

    The assignment ``y_PAM = g(S)`` is computed once, at the start of the pass. Per cluster
    ``k``, ``S[k]`` becomes the member ``j`` of cluster ``k`` of ``y_PAM`` maximising
    ``F(X_k, {j}) + gamma Delta(g(S minus S[k] plus j), y)``, with ``X_k`` the members and
    ``F(X_k, {j}) = -sum_{i in X_k} d[i, j]`` (line 4), the later clusters seeing the new ``S``;
    the first maximiser wins ties, the current medoid has no precedence. Gathers the members (a
    ``nonzero``, a host read on an accelerator).

    That score is not ``A``, and an update can lower ``A`` (Lemma 1 per swap fails; the tests show
    a batch). Per pass it holds for a metric ``d`` (``d[i, i] = 0 <= d[i, j]``): with ``X_l`` the
    clusters of ``y_PAM``, ``U(S) = -sum_l sum_{i in X_l} d[i, S[l]] + gamma Delta(g(S), y)``
    equals ``A`` at the pass's start, never falls (an update maximises ``U`` over ``S[k]``, and
    ``S[k]`` itself is a candidate) and never exceeds ``A`` (a point's nearest medoid is at most as
    far as its ``y_PAM`` medoid), so ``A`` never falls below its value at the pass's start.
    """
    b, k_all = batch.columns.shape[0], medoids.numel()
    width = k_all + batch.classes.num_classes + b
    to_medoids = batch.columns.index_select(0, medoids)  # (K, B) row l: d[i, S[l]]
    y_pam = to_medoids.argmin(dim=0).index_put_((medoids,), batch.positions)  # (B,) Eq. (7)
    for k in range(k_all):
        members = (y_pam == k).nonzero().squeeze(1)  # (n,) S[k] among them
        rows = batch.columns.index_select(0, members)  # (n, B) row r: d[i, members[r]]
        within = rows[:, members].sum(dim=1, dtype=torch.float64)  # (n,) -F(X_k, {j})
        to_medoids = batch.columns.index_select(0, medoids)  # (K, B) the current S
        to_medoids[k].fill_(torch.inf)
        base_min, base_assign = to_medoids.min(dim=0)  # (B,), (B,) nearest staying medoid
        staying = medoids.index_select(0, batch.others[k])  # (K-1,)
        base_assign.index_put_((staying,), batch.others[k])  # staying medoids keep their cluster
        threshold, stay = _base(batch, base_min, base_assign, staying, k)
        wins = torch.le(rows, threshold)  # (n, B) point i joins candidate j (Eq. 7)
        wins.scatter_(1, members[:, None], True)  # a candidate is in its own cluster
        index = torch.where(wins[:, None, :], batch.joined[k], stay)  # (n, 2, B)
        score = gamma * _margin(batch, index, width) - within  # (n,)
        medoids[k : k + 1] = members.index_select(0, score.argmax(dim=0, keepdim=True))


# A visit no refinement reaches (:func:`_refine_round`).
_NEVER = 2**62


class _Refinement(NamedTuple):
    """The state of the static-shape refinement (:func:`_refine_round`), updated in place."""

    medoids: Tensor  # (K,) S
    visit: Tensor  # () long: the next visit, pass * K + cluster
    limit: Tensor  # () long: the visits end before it (the end of the pass after the last swap)
    last: Tensor  # () long: passes * K, the end of the last pass
    swaps: Tensor  # () long


def _refine_round(batch: _Batch, gamma: Tensor, state: _Refinement) -> Tensor:
    """Algorithm 2 as :func:`_refine_pass` runs it, up to and including its next swap.

    Algorithm 2 visits clusters ``0..K-1`` in each of up to ``T`` passes, stopping after a pass
    without a swap; a visit only depends on the current medoids ``S`` and its cluster. So one
    round scores, against the current ``S``, every point as medoid of its own cluster (the
    candidates of all ``K`` visits at once, ``B`` rows), finds the first upcoming visit whose
    best member beats its medoid (the first maximiser of ``A`` among the members), and makes that
    swap: every visit before it would have found no swap, with the same ``S``. The refinement
    takes ``swaps + 1`` rounds instead of ``K`` steps per pass, with the same result; after a
    round without a swap (the refinement is over) every later round finds none and changes no
    medoid. Static shapes, no host read; returns ``()`` bool: whether the round swapped.

    Per cluster ``k`` and point ``i``, the medoids without ``S[k]`` leave ``i`` at its nearest
    one (``v1, r1``) unless that is ``S[k]`` (then the second nearest ``v2, r2``); a medoid other
    than ``S[k]`` keeps its own cluster and is never taken (threshold NaN, see :func:`_base`).
    The points outside a candidate's cluster that it does not take keep their cell; those of its
    cluster that it does not take move to the cell of their class in the cluster of their nearest
    staying medoid: the id of that cell's points if it has some, else an id of their own, their
    lowest point plus ``B``.
    """
    b, k_all = batch.columns.shape[0], batch.positions.numel()
    c = batch.classes.num_classes
    medoids, positions = state.medoids, batch.positions
    to_medoids = batch.columns.index_select(0, medoids)  # (K, B) row l: d[i, S[l]]
    ids = torch.empty(
        2, 2, b, dtype=torch.long, device=medoids.device
    )  # [cell/cluster, kept/moved]
    nearest = ids[1, 0]  # (B,) r1, then the cluster of each point (with its medoid's fix)
    v1 = torch.min(to_medoids, dim=0, out=(to_medoids.new_empty(b), nearest))[0]  # (B,)
    to_medoids.scatter_(0, nearest[None], torch.inf)
    v2, r2 = to_medoids.min(dim=0)  # (B,), (B,) second nearest
    owner = torch.full_like(nearest, k_all).index_put_((medoids,), positions)  # (B,) K: none
    lost = nearest[None, :] == positions[:, None]  # (K, B): S[k] is point i's nearest medoid
    bounds = to_medoids.new_empty(k_all, 2, b)  # (K, 2, B): base_min, threshold per cluster
    base_min = torch.where(lost, v2, v1, out=bounds[:, 0])  # (K, B)
    base_assign = torch.where(lost, r2, nearest)  # (K, B)
    staying = batch.staying.index_select(0, owner).T  # (K, B)
    base_assign = torch.where(staying, owner, base_assign)  # (K, B) staying medoids keep theirs
    threshold = torch.where(
        positions[:, None] < base_assign,
        base_min,
        base_min.nextafter(batch.below),
        out=bounds[:, 1],
    )  # (K, B)
    threshold.masked_fill_(staying, torch.nan)
    cluster = nearest.index_put_((medoids,), positions)  # (B,) Eq. (7), in place of r1
    torch.gather(base_assign, 0, cluster[None], out=ids[1, 1][None])  # (B,) where it moves
    keys = torch.add(batch.classes.codes, ids[1], alpha=c).view(2 * b)  # (2B,) cluster * C + class
    first = keys.new_empty(k_all * c).scatter_reduce_(
        0, keys, batch.firsts, "amin", include_self=False
    )  # (K * C,) occupied cells take their lowest point, cells only moved to that plus B
    torch.index_select(first, 0, keys, out=ids[0].view(2 * b))
    same = cluster[:, None] == cluster[None, :]  # (B, B) row j: the members of j's cluster
    stay = torch.where(same[:, None, :], ids[:, 1], ids[:, 0])  # (B, 2, B)
    rows = bounds.index_select(0, cluster)  # (B, 2, B) row j: the base of j's cluster
    wins = torch.le(batch.claims, rows[:, 1])  # (B, B) point i joins candidate j (Eq. 7)
    new_min = torch.minimum(rows[:, 0], batch.columns)  # (B, B) nearest-medoid distances
    index = torch.where(wins[:, None, :], batch.joined.index_select(0, cluster), stay)
    objective = _objective(batch, index, k_all + c + 2 * b, new_min, gamma)  # (B,)
    best_value = objective.new_empty(k_all).scatter_reduce_(
        0, cluster, objective, "amax", include_self=False
    )  # (K,) every cluster has a member, its medoid
    hit = torch.where(objective == best_value.index_select(0, cluster), batch.everyone, b)  # (B,)
    best = hit.new_empty(k_all).scatter_reduce_(0, cluster, hit, "amin", include_self=False)
    better = best_value > objective.index_select(0, medoids)  # (K,)
    # The upcoming visits: cluster k next at visit[k]; the first that swaps (none: _NEVER).
    visit = torch.remainder(positions - state.visit, k_all).add_(state.visit)  # (K,)
    due = torch.where(better & (visit < state.limit), visit, _NEVER).amin()  # ()
    swapped = due < _NEVER  # ()
    torch.where(visit == due, best, medoids, out=medoids)
    state.swaps.add_(swapped)
    # Without a swap the next visit is past every limit: every later round finds nothing.
    torch.add(due, 1, out=state.visit)
    torch.minimum(
        due.div(k_all, rounding_mode="floor").add_(2).mul_(k_all), state.last, out=state.limit
    )
    return swapped


class _Inference:
    """Algorithms 1 and 2 on one batch, in three stages whose tensors live on the instance.

    :meth:`greedy` (Algorithm 1), :meth:`refine_pass` (a stage of Algorithm 2; returns ``()``,
    nonzero while the refinement goes on) and :meth:`finish` (``values`` ``(3,)`` float64: ``A``
    of the greedy and the refined sets and the refined NMI). None reads back to the host;
    :meth:`run` reads the result of :meth:`refine_pass` once per call to stop. ``compact`` (the
    CPU path): a stage is one pass of :func:`_refine_pass` (its count of swaps); else one round
    of :func:`_refine_round` (whether it swapped), static shapes. ``refinement="paper"``: a stage
    is one pass of :func:`_paper_pass` (the medoids it changed), compact on any device.
    """

    def __init__(
        self,
        dist: Tensor,
        codes: Tensor,
        num_classes: int,
        gamma: Tensor,
        compact: bool,
        refinement: str = "full",
    ) -> None:
        self.dist, self.codes, self.num_classes, self.gamma = dist, codes, num_classes, gamma
        self.compact = compact or refinement == "paper"
        self.refine = _paper_pass if refinement == "paper" else _refine_pass
        # passes * K, the end of the refinement's visits (:class:`_Refinement`); set by run.
        self.last = torch.full((), 5 * num_classes, dtype=torch.long, device=dist.device)

    def greedy(self) -> None:
        self.batch = _batch(self.dist, _classes(self.codes, self.num_classes))
        self.greedy_medoids = _greedy(self.batch, self.gamma)  # (C,)
        self.refined = self.greedy_medoids.clone()  # (C,)
        zero = torch.zeros((), dtype=torch.long, device=self.dist.device)
        limit = self.last.clamp_max(self.num_classes)  # the end of the first pass
        self.state = _Refinement(self.refined, zero, limit, self.last, zero.clone())
        self.swaps = self.state.swaps  # ()

    def refine_pass(self) -> Tensor:
        if not self.compact:
            self.swapped = _refine_round(self.batch, self.gamma, self.state)  # ()
            return self.swapped
        before = self.refined.clone()  # (C,)
        self.refine(self.batch, self.gamma, self.refined)
        # A pass visits each cluster once: its swaps are the medoids it changed.
        torch.sum(self.refined != before, dim=0, out=self.swaps)
        return self.swaps

    def finish(self) -> None:
        sets = torch.stack([self.greedy_medoids, self.refined])  # (2, C)
        objective, nmi = _objectives(self.batch.columns, sets, self.batch.classes, self.gamma)
        self.values = torch.cat([objective, nmi[1:]])  # (3,)

    def run(self, passes: int) -> tuple[Tensor, Tensor, int]:
        """``(refined medoids (C,), values (3,), swaps)`` after up to ``passes`` passes."""
        self.last.fill_(passes * self.num_classes)
        self.greedy()
        swaps = 0
        if self.compact:
            for _ in range(passes):
                swapped = int(self.refine_pass())  # the pass's one host read
                swaps += swapped
                if not swapped:
                    break
        elif passes:
            # Each round but the last swaps, and a pass swaps at most K times.
            for _ in range(passes * self.num_classes + 1):
                if not bool(self.refine_pass()):  # the round's one host read
                    break
                swaps += 1
        self.finish()
        return self.refined, self.values, swaps


class _GraphedInference(_Inference):
    """:class:`_Inference` on CUDA with each stage captured once in a CUDA graph and replayed.

    Built for one device, dtype, ``B`` and ``C``: the inputs are copied into static buffers and
    the stages replay the kernels the eager stages launched at capture, so the results are those
    of the eager static-shape path on the same device.
    """

    def __init__(self, dist: Tensor, codes: Tensor, num_classes: int) -> None:
        gamma = torch.zeros((), dtype=torch.float64, device=dist.device)
        super().__init__(dist.clone(), codes.clone(), num_classes, gamma, compact=False)
        stages = (super().greedy, super().refine_pass, super().finish)
        side = torch.cuda.Stream(dist.device)  # warm-up off the default stream, as capture needs
        side.wait_stream(torch.cuda.current_stream(dist.device))
        with torch.cuda.stream(side):
            for stage in stages:
                stage()
        torch.cuda.current_stream(dist.device).wait_stream(side)
        self.graphs = []
        for stage in stages:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                stage()
            self.graphs.append(graph)

    def load(self, dist: Tensor, codes: Tensor, gamma: float) -> _GraphedInference:
        self.dist.copy_(dist)
        self.codes.copy_(codes)
        self.gamma.fill_(gamma)
        return self

    def greedy(self) -> None:
        self.graphs[0].replay()

    def refine_pass(self) -> Tensor:
        self.graphs[1].replay()
        return self.swapped

    def finish(self) -> None:
        self.graphs[2].replay()

    def run(self, passes: int) -> tuple[Tensor, Tensor, int]:
        refined, values, swaps = super().run(passes)
        return refined.clone(), values.clone(), swaps  # the buffers are overwritten next call


# Captured inferences by (device, dtype, B, C), the most recently used last.
_GRAPHED: OrderedDict[tuple[torch.device, torch.dtype, int, int], _GraphedInference] = OrderedDict()
_GRAPHED_MAX = 4


def _inference(
    dist: Tensor,
    codes: Tensor,
    num_classes: int,
    gamma: float,
    passes: int,
    graphs: bool = True,
    static_shapes: bool | None = None,
    refinement: str = "full",
) -> tuple[Tensor, Tensor, int]:
    """Algorithms 1 and 2 on ``dist`` ``(B, B)`` (no gradient) with the class codes ``(B,)``.

    Returns ``(refined medoids (C,), values (3,) float64, swaps)``, ``values``: ``A`` of the
    greedy and refined sets and the refined NMI. ``static_shapes`` (default: on CUDA only) refines
    in rounds of static shapes (:func:`_refine_round`) instead of steps over a cluster's members;
    on CUDA (``graphs``) the static stages replay CUDA graphs captured on the first call with the
    same device, dtype, ``B`` and ``C``. ``refinement="paper"`` runs :func:`_paper_pass`
    eagerly, members gathered, on any device. (The public default is ``"paper"``
    (:func:`loss_augmented_inference`); this private engine's is ``"full"``, its static path's.)
    """
    static = dist.is_cuda if static_shapes is None else static_shapes
    with torch.no_grad():
        if not (graphs and dist.is_cuda and static) or refinement != "full":
            gamma_t = torch.full((), gamma, dtype=torch.float64, device=dist.device)
            inference = _Inference(dist, codes, num_classes, gamma_t, not static, refinement)
            return inference.run(passes)
        key = (dist.device, dist.dtype, dist.shape[0], num_classes)
        if key not in _GRAPHED:
            with torch.cuda.device(dist.device):
                _GRAPHED[key] = _GraphedInference(dist, codes, num_classes)
            if len(_GRAPHED) > _GRAPHED_MAX:
                _GRAPHED.popitem(last=False)
        _GRAPHED.move_to_end(key)
        return _GRAPHED[key].load(dist, codes, gamma).run(passes)


def loss_augmented_inference(
    dist: Tensor,
    labels: Tensor,
    gamma: float,
    pam_passes: int = 5,
    static_shapes: bool | None = None,
    refinement: str = "paper",
) -> tuple[Tensor, dict[str, float]]:
    """Approximate ``argmax_{|S| = C} A(S)``, ``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))``
    (the (*) of Eq. 6).

    Greedy Algorithm 1 (``C`` = number of distinct labels, each step scores all ``B`` candidates in
    one batch), then ``pam_passes`` passes of the swap refinement Algorithm 2 (each cluster's
    members scored in one batch), stopped after a pass that changes no medoid. Runs without
    gradient. Two forms of Algorithm 2:

    * ``refinement="paper"`` (default): the paper's listing, as TF's ``cluster_loss`` runs it
      (:func:`_paper_pass`): ``y_PAM = g(S)`` once per pass; for ``k = 0..C-1``,
      ``S[k] = argmax_{j: y_PAM[j] = k} F(X_k, {j}) + gamma Delta(g(S minus S[k] plus j), y)``
      with ``F(X_k, {j}) = -sum_{i: y_PAM[i] = k} d[i, j]`` (the later clusters see the new
      ``S``; the first maximiser wins ties). An update can lower ``A``; a pass never ends below
      ``A`` at its start when ``d`` is a metric.
    * ``refinement="full"`` (variant): made so that Lemma 1 holds at every swap. A swap is
      scored with ``A`` itself (the proof of Lemma 1 uses ``A``; line 4 of the listing uses the
      within-cluster ``F`` plus the margin), clusters are re-assigned after every swap (the
      listing assigns once per pass), and a medoid changes only when ``A`` strictly rises.

    Host reads: the labels' encoding, one per refinement pass (the early stop; ``"full"`` with
    static shapes: one per round, i.e. per swap plus one; ``"paper"``: also a ``nonzero`` per
    cluster) and one for the stats; on CUDA ``"full"`` replays one CUDA graph for the greedy, a
    round and the stats each, captured on the first call with the same device, dtype, ``B`` and
    ``C``.

    Args:
        dist: ``(B, B)`` distances.
        labels: ``(B,)`` integer labels.
        gamma: margin multiplier (>= 0).
        pam_passes: refinement passes ``T`` (paper: 5); 0 returns the greedy solution.
        static_shapes: ``"full"`` only: refine in rounds that score every point as medoid of its
            own cluster, one round per swap (no host read inside a round: what CUDA runs and
            captures in graphs), instead of one step per cluster and pass over the cluster's
            members (a ``nonzero``, free on the CPU). ``None``: on CUDA only. For float32
            distances both give the same medoids and stats; in float64 an exact tie between two
            candidates may break the other way (the distance sums run in another order).
        refinement: ``"paper"`` (default) or ``"full"``, above. ``"paper"`` runs eagerly with the
            members gathered on any device (``static_shapes`` is ignored). Both stop after a
            pass that changes no medoid (the listing runs ``T`` passes; the passes after such a
            pass change nothing). ``pam_swaps`` counts the medoids changed.

    Returns:
        ``(medoids (C,), stats)`` with stats ``greedy_objective``, ``refined_objective`` (``A`` of
        the greedy and refined sets; refined >= greedy for ``"full"``, and for ``"paper"`` when
        ``dist`` is a metric), ``nmi`` (of the refined clustering) and ``pam_swaps``.
    """
    _check_labels(dist, labels)
    gamma = _check_gamma(gamma)
    passes = _check_passes(pam_passes)
    refinement = _check_refinement(refinement)
    medoids, values, swaps = _inference(
        dist.detach(),
        *_encode(labels),
        gamma,
        passes,
        static_shapes=static_shapes,
        refinement=refinement,
    )
    greedy, refined, nmi = values.tolist()  # the one host read of the stats
    stats = {"greedy_objective": greedy, "refined_objective": refined, "nmi": nmi}
    return medoids, stats | {"pam_swaps": float(swaps)}


def exhaustive_inference(
    dist: Tensor, labels: Tensor, gamma: float, max_subsets: int = 1_000_000
) -> tuple[Tensor, float]:
    """Exact ``argmax_{|S| = C} A(S)`` by enumerating all ``binom(B, C)`` subsets.

    EXPONENTIAL in the batch size: for tiny batches only (tests, and measuring how often
    :func:`loss_augmented_inference` finds the optimum). Subsets are scored in chunks; ties go to
    the lexicographically first subset.

    Returns:
        ``(medoids (C,), objective)``: the optimal sorted subset and its float64 objective.
    """
    _check_labels(dist, labels)
    gamma = _check_gamma(gamma)
    codes, num_classes = _encode(labels)
    b = dist.shape[0]
    total = math.comb(b, num_classes)
    if total > max_subsets:
        raise ValueError(
            f"exhaustive_inference would score binom({b}, {num_classes}) = {total} subsets "
            f"(> max_subsets={max_subsets}); use a smaller batch or loss_augmented_inference"
        )
    device = dist.device
    classes = _classes(codes, num_classes)
    chunk = max(1, 2**20 // (num_classes * b))
    subsets_iter = itertools.combinations(range(b), num_classes)
    best_value, best_subset = -math.inf, None
    with torch.no_grad():
        columns = dist.detach().T  # (B, B) row j: d[i, j]
        while batch := list(itertools.islice(subsets_iter, chunk)):
            subsets = torch.tensor(batch, dtype=torch.long, device=device)  # (n, C)
            objective, _ = _objectives(columns, subsets, classes, gamma)  # (n,)
            top = int(objective.argmax())
            if objective[top].item() > best_value:
                best_value, best_subset = objective[top].item(), subsets[top]
    return best_subset, best_value


# --------------------------------------------------------------------------- the loss


class FacilityLocationLoss(MetricLoss):
    """Structured facility-location clustering loss, Eq. (6) (Song et al., CVPR 2017).

    ``loss = [F(X, S_pred) + gamma (1 - NMI(g(S_pred), y)) - F~(X, y)]_+`` where ``S_pred`` comes
    from :func:`loss_augmented_inference` (greedy + PAM, no gradient) and ``F~`` is the oracle
    score with per-class medoids. The gradient (Eq. 11-13) flows through the distances
    ``d[i, j*(i)]`` to the chosen medoids and ``d[i, medoid(y_i)]``; the NMI margin is a constant.
    The loss is a sum over the batch, as in the paper and the TF reference.

    Args:
        margin_multiplier: ``gamma`` (>= 0). The paper decays it exponentially (rate 0.94); set
            ``loss.margin_multiplier`` from a training hook.
        pam_passes: refinement passes ``T`` of Algorithm 2 (paper: 5).
        normalize: L2-normalise embeddings before the (non-squared) Euclidean distance (paper:
            yes). Zero-norm embeddings stay at the origin (no NaN).
        refinement: the form of Algorithm 2, ``"paper"`` (the paper's listing, default) or
            ``"full"`` (swaps scored with the full objective, Lemma 1 at every swap; the form of
            the committed runs of the facility-location and discriminative-loss chapters); see
            :func:`loss_augmented_inference`.

    After each call, :attr:`last_stats` holds floats ``loss``, ``oracle_score`` (``F~``),
    ``predicted_score`` (``F(X, S_pred)``), ``augmented_score`` (``F + gamma (1 - NMI)``),
    ``nmi``, ``greedy_objective``, ``refined_objective``, ``pam_swaps``, ``inference_seconds``
    (on CUDA measured with CUDA events, so that a step reads its stats back once, in one
    ``tolist``), ``margin_multiplier``; :attr:`last_medoids` holds ``S_pred`` ``(C,)``.
    """

    uses_pair_masks = False

    def __init__(
        self,
        margin_multiplier: float = 1.0,
        pam_passes: int = 5,
        normalize: bool = True,
        refinement: str = "paper",
    ) -> None:
        super().__init__()
        self.margin_multiplier = margin_multiplier
        self.pam_passes = _check_passes(pam_passes)
        self.normalize = normalize
        self.refinement = _check_refinement(refinement)
        self.last_stats: dict[str, float] = {}
        self.last_medoids: Tensor | None = None

    @property
    def margin_multiplier(self) -> float:
        """``gamma``, the weight of the NMI margin; settable (e.g. decayed during training)."""
        return self._margin_multiplier

    @margin_multiplier.setter
    def margin_multiplier(self, value: float) -> None:
        self._margin_multiplier = _check_gamma(value)

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        dist = euclidean_distance(x)  # (B, B)
        gamma = self.margin_multiplier
        if dist.is_cuda:  # events time the inference without a synchronisation of their own
            start_event, end_event = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start_event.record()
        start = time.perf_counter()
        codes, num_classes = _encode(labels)
        medoids, values, swaps = _inference(
            dist.detach(), codes, num_classes, gamma, self.pam_passes, refinement=self.refinement
        )  # (C,), (3,): A(greedy), A(refined), NMI
        seconds = time.perf_counter() - start
        if dist.is_cuda:
            end_event.record()
        predicted = _facility(dist, medoids)
        oracle, _ = _oracle(dist, codes, num_classes)
        augmented = predicted + (gamma * (1.0 - values[2])).to(predicted.dtype)
        loss = torch.relu(augmented - oracle)
        scores = torch.stack([loss, oracle, predicted, augmented]).detach().double()  # (4,)
        read = torch.cat([scores, values]).tolist()  # the step's one host read of the stats
        if dist.is_cuda:  # the read has passed both events
            seconds = start_event.elapsed_time(end_event) / 1e3
        self.last_medoids = medoids
        self.last_stats = {
            **dict(zip(("loss", "oracle_score", "predicted_score", "augmented_score"), read[:4])),
            **dict(zip(("greedy_objective", "refined_objective", "nmi"), read[4:])),
            "pam_swaps": float(swaps),
            "inference_seconds": seconds,
            "margin_multiplier": gamma,
        }
        return loss

    def extra_repr(self) -> str:
        # Run records keep this repr (not in their fingerprints); it always names the refinement.
        return (
            f"margin_multiplier={self.margin_multiplier}, pam_passes={self.pam_passes}, "
            f"normalize={self.normalize}, refinement={self.refinement!r}"
        )


class MarginDecayHook(Hook):
    """Exponential decay of the margin multiplier, as Song et al. (2017, Sec. 5) train:
    ``gamma_t = gamma_0 * rate ** (t / decay_steps)`` at global step ``t`` (TensorFlow's
    ``exponential_decay``; ``staircase=True`` floors the exponent).

    Args:
        loss: the :class:`FacilityLocationLoss` whose ``margin_multiplier`` is decayed.
        rate: decay rate (the paper uses 0.94).
        decay_steps: steps per factor ``rate`` (the paper does not state it; e.g. one epoch).
        staircase: decay in whole steps of ``decay_steps``.
    """

    def __init__(
        self,
        loss: FacilityLocationLoss,
        rate: float = 0.94,
        decay_steps: int = 1000,
        staircase: bool = False,
    ) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        if decay_steps < 1:
            raise ValueError(f"decay_steps must be >= 1, got {decay_steps}")
        self.loss, self.rate, self.decay_steps, self.staircase = loss, rate, decay_steps, staircase
        self.initial = loss.margin_multiplier

    def on_step_start(self, state: TrainState) -> None:
        exponent = state.step / self.decay_steps
        if self.staircase:
            exponent = math.floor(exponent)
        self.loss.margin_multiplier = self.initial * self.rate**exponent

    def state_dict(self) -> dict:
        return {"initial": float(self.initial)}  # a plain float: checkpoints hold no numpy scalars

    def load_state_dict(self, state: dict) -> None:
        self.initial = state["initial"]

    def __repr__(self) -> str:
        return (
            f"MarginDecayHook(rate={self.rate}, decay_steps={self.decay_steps}, "
            f"staircase={self.staircase})"
        )


# --------------------------------------------------------------------------- diagnostics

# FacilityLocationLoss.last_stats key -> InsideLossHook log column.
_INSIDE_COLUMNS = {
    "margin_multiplier": "gamma",
    "oracle_score": "oracle",
    "predicted_score": "predicted",
    "augmented_score": "augmented",
    "nmi": "nmi",
    "greedy_objective": "greedy",
    "refined_objective": "refined",
    "pam_swaps": "swaps",
    "inference_seconds": "inference_s",
}


class InsideLossHook(Hook):
    """Logs every ``every``-th training step: its wall time and, for the clustering loss, what
    happened inside the loss.

    Columns (one list per column in :attr:`log`): ``step``, ``loss``, ``step_s`` (seconds from
    the start of the step to the end of the optimiser step: forward, loss, backward, update; the
    batch's loading is outside) and, when the loss is a :class:`FacilityLocationLoss`, ``gamma``,
    ``oracle`` (``F~``, Eq. 5), ``predicted`` (``F(X, S_PAM)``, Eq. 4), ``augmented``
    (``F + gamma (1 - NMI)``, the (*) of Eq. 6), ``nmi`` (of the inferred clustering
    ``g(S_PAM)`` against the labels), ``greedy`` / ``refined`` (the objective ``A`` of
    Algorithm 1's set and after Algorithm 2), ``swaps`` (PAM swaps) and ``inference_s`` (seconds
    of the loss-augmented inference). The log is checkpointed with the run.
    """

    def __init__(self, every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = int(every)
        self.log: dict[str, list[float]] = {}
        self._t0: float | None = None

    def __repr__(self) -> str:
        return f"InsideLossHook(every={self.every})"

    def on_step_start(self, state: TrainState) -> None:
        if state.step % self.every == 0:
            if state.device.type == "cuda":
                torch.cuda.synchronize(state.device)
            self._t0 = time.perf_counter()

    def on_step_end(self, state: TrainState) -> None:
        if self._t0 is None:
            return
        if state.device.type == "cuda":
            torch.cuda.synchronize(state.device)
        row: dict[str, float] = {
            "step": float(state.step),
            "loss": float(state.loss) if state.loss is not None else math.nan,
            "step_s": time.perf_counter() - self._t0,
        }
        self._t0 = None
        loss_fn = state.loss_fn
        if isinstance(loss_fn, FacilityLocationLoss) and loss_fn.last_stats:
            row.update(
                {col: float(loss_fn.last_stats[key]) for key, col in _INSIDE_COLUMNS.items()}
            )
        for key, value in row.items():
            self.log.setdefault(key, []).append(value)

    def state_dict(self) -> dict[str, dict[str, list[float]]]:
        return {"log": {str(k): [float(x) for x in v] for k, v in self.log.items()}}

    def load_state_dict(self, state: dict[str, dict[str, list[float]]]) -> None:
        self.log = {k: list(v) for k, v in state.get("log", {}).items()}
