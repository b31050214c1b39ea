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
greedy Algorithm 1 followed by the PAM-like swap refinement Algorithm 2. Both score every candidate
of a step at once: one ``(n_candidates, B)`` tensor of new nearest-medoid distances and one batch
of contingency tables give ``F`` and NMI for all candidates (no call per candidate). Entropies are
read per point from the counts of its cell, so scoring ``n`` candidates costs ``O(n (B + C))``
and a whole inference ``O(C B (B + C))`` time, ``O(B (B + C))`` memory.
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
    codes, num_classes = _encode(labels)
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
    return _assign(dist, medoids)


def _assign(dist: Tensor, medoids: Tensor) -> Tensor:
    """Unchecked :func:`cluster_assignment` for the inference loops: ``(B,)``."""
    assign = dist[:, medoids].argmin(dim=1)  # (B,) first minimum wins
    assign[medoids] = torch.arange(medoids.numel(), device=dist.device)
    return assign


# --------------------------------------------------------------------------- NMI

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
    codes, num_classes = _encode(labels)
    nmi = _nmi_codes(cluster_codes, codes, uniq.numel(), num_classes)  # (N,)
    return nmi.reshape(assignment.shape[:-1])


def augmented_objective(dist: Tensor, labels: Tensor, medoids: Tensor, gamma: float) -> Tensor:
    """Loss-augmented objective ``A(S) = F(X, S) + gamma (1 - NMI(g(S), y))`` (Algorithm 1).

    Returns a float64 scalar without gradient (the quantity inference maximises).
    """
    _check_labels(dist, labels)
    gamma = _check_gamma(gamma)
    _check_medoids(dist, medoids)
    codes, num_classes = _encode(labels)
    with torch.no_grad():
        assign = _assign(dist, medoids)  # (B,)
        nmi = _nmi_codes(assign[None], codes, medoids.numel(), num_classes)[0]
        score = dist[:, medoids].min(dim=1).values.sum(dtype=torch.float64)
        return -score + gamma * (1.0 - nmi)


# --------------------------------------------------------------------------- inference


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
            candidate_dist, everyone, t, current_min, current_assign, chosen,
            codes, t + 1, num_classes, gamma,
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
                dist[:, candidates].T, candidates, k, base_min, base_assign, fixed,
                codes, k_all, num_classes, gamma,
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


def loss_augmented_inference(
    dist: Tensor, labels: Tensor, gamma: float, pam_passes: int = 5
) -> tuple[Tensor, dict[str, float]]:
    """Approximate ``argmax_{|S| = C} F(X, S) + gamma (1 - NMI(g(S), y))`` (the (*) of Eq. 6).

    Greedy Algorithm 1 (``C`` = number of distinct labels, each step scores all ``B`` candidates in
    one batch), then ``pam_passes`` passes of the swap refinement Algorithm 2 (each cluster's
    members scored in one batch). Runs without gradient.

    Differences from the paper's listing / the TF reference, both to make Lemma 1 hold exactly:
    a swap is scored with the full objective ``A`` (the paper's Algorithm 2 line 4 and TF use the
    within-cluster facility score plus the margin; the proof of Lemma 1 uses ``A``), and clusters
    are re-assigned after every swap (TF re-assigns once per pass).

    Args:
        dist: ``(B, B)`` distances.
        labels: ``(B,)`` integer labels.
        gamma: margin multiplier (>= 0).
        pam_passes: refinement passes ``T`` (paper: 5); 0 returns the greedy solution.

    Returns:
        ``(medoids (C,), stats)`` with stats ``greedy_objective``, ``refined_objective`` (``A`` of
        the greedy and refined sets, refined >= greedy), ``nmi`` (of the refined clustering) and
        ``pam_swaps``.
    """
    _check_labels(dist, labels)
    gamma = _check_gamma(gamma)
    if int(pam_passes) != pam_passes or pam_passes < 0:
        raise ValueError(f"pam_passes must be an integer >= 0, got {pam_passes}")
    codes, num_classes = _encode(labels)
    with torch.no_grad():
        d = dist.detach()
        greedy = _greedy(d, codes, num_classes, gamma)
        refined, swaps = _refine(d, codes, num_classes, gamma, greedy.clone(), int(pam_passes))
        nmi = _nmi_codes(_assign(d, refined)[None], codes, num_classes, num_classes)
        stats = {
            "greedy_objective": augmented_objective(d, labels, greedy, gamma).item(),
            "refined_objective": augmented_objective(d, labels, refined, gamma).item(),
            "nmi": nmi.item(),
            "pam_swaps": float(swaps),
        }
    return refined, stats


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
    positions = torch.arange(num_classes, device=device)  # (C,)
    chunk = max(1, 2**20 // (num_classes * b))
    subsets_iter = itertools.combinations(range(b), num_classes)
    best_value, best_subset = -math.inf, None
    with torch.no_grad():
        columns = dist.detach().T  # (B, B) row j: d[i, j]
        while batch := list(itertools.islice(subsets_iter, chunk)):
            subsets = torch.tensor(batch, dtype=torch.long, device=device)  # (n, C)
            min_dist, assign = columns[subsets].min(dim=1)  # (n, C, B) -> (n, B), (n, B)
            assign.scatter_(1, subsets, positions.expand_as(subsets))  # medoids own clusters
            nmi = _nmi_codes(assign, codes, num_classes, num_classes)  # (n,)
            objective = -min_dist.sum(dim=1, dtype=torch.float64) + gamma * (1.0 - nmi)  # (n,)
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

    After each call, :attr:`last_stats` holds floats ``loss``, ``oracle_score`` (``F~``),
    ``predicted_score`` (``F(X, S_pred)``), ``augmented_score`` (``F + gamma (1 - NMI)``),
    ``nmi``, ``greedy_objective``, ``refined_objective``, ``pam_swaps``, ``inference_seconds``,
    ``margin_multiplier``; :attr:`last_medoids` holds ``S_pred`` ``(C,)``.
    """

    uses_pair_masks = False

    def __init__(
        self, margin_multiplier: float = 1.0, pam_passes: int = 5, normalize: bool = True
    ) -> None:
        super().__init__()
        self.margin_multiplier = margin_multiplier
        if int(pam_passes) != pam_passes or pam_passes < 0:
            raise ValueError(f"pam_passes must be an integer >= 0, got {pam_passes}")
        self.pam_passes = int(pam_passes)
        self.normalize = normalize
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
        start = time.perf_counter()
        medoids, stats = loss_augmented_inference(dist.detach(), labels, gamma, self.pam_passes)
        seconds = time.perf_counter() - start
        predicted = facility_score(dist, medoids)
        oracle, _ = oracle_score(dist, labels)
        augmented = predicted + gamma * (1.0 - stats["nmi"])
        loss = torch.relu(augmented - oracle)
        self.last_medoids = medoids
        self.last_stats = {
            "loss": loss.item(),
            "oracle_score": oracle.item(),
            "predicted_score": predicted.item(),
            "augmented_score": augmented.item(),
            **stats,
            "inference_seconds": seconds,
            "margin_multiplier": gamma,
        }
        return loss

    def extra_repr(self) -> str:
        return (
            f"margin_multiplier={self.margin_multiplier}, pam_passes={self.pam_passes}, "
            f"normalize={self.normalize}"
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

    def __init__(self, loss: FacilityLocationLoss, rate: float = 0.94, decay_steps: int = 1000, staircase: bool = False) -> None:
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
        return f"MarginDecayHook(rate={self.rate}, decay_steps={self.decay_steps}, staircase={self.staircase})"


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
            row.update({col: float(loss_fn.last_stats[key]) for key, col in _INSIDE_COLUMNS.items()})
        for key, value in row.items():
            self.log.setdefault(key, []).append(value)

    def state_dict(self) -> dict[str, dict[str, list[float]]]:
        return {"log": {str(k): [float(x) for x in v] for k, v in self.log.items()}}

    def load_state_dict(self, state: dict[str, dict[str, list[float]]]) -> None:
        self.log = {k: list(v) for k, v in state.get("log", {}).items()}
