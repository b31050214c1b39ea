"""Algorithms 1 and 2 on a batch's constants, every candidate of a step scored at once: the
greedy (Algorithm 1), a pass of the swap refinement in either form (Algorithm 2), and the
static-shape rounds that CUDA runs and captures in graphs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from dmlnb.losses.facility_location.nmi import (
    MI_ROUND_OFF,
    Classes,
    table_terms,
)

__all__ = [
    "Batch",
    "batch_constants",
    "greedy_set",
    "refine_pass",
    "paper_pass",
    "Refinement",
    "refine_round",
]


class Batch(NamedTuple):
    """Per-inference constants of a batch of ``B`` points with ``C`` classes (``K = C`` clusters).

    Contingency ids (see :func:`_nmi`): cluster ``k`` is ``k`` (``< K``), the cell of class ``c``
    in the cluster a candidate opens or takes over is ``K + c``, and a cell of points that keep
    their cluster is ``K + C + (the lowest index of its points)`` (``+ B`` for a cell that a
    refinement round's candidates' clusters leave behind, see :func:`refine_round`).
    """

    columns: Tensor  # (B, B) dist.T (a view), row j: d[i, j] for every point i
    claims: Tensor  # (B, B) columns with -inf on the diagonal: a candidate always takes itself
    steps: Tensor  # (B, 2, B) [j, 0]: columns[j]; [j, 1]: the float below it, NaN at point j
    classes: Classes
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


def batch_constants(dist: Tensor, classes: Classes) -> Batch:
    """The :class:`Batch` of ``dist`` ``(B, B)`` (static shapes, no host read)."""
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
    return Batch(
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


def _margin(batch: Batch, index: Tensor, width: int) -> Tensor:
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
    counts, mi, denom = table_terms(index, width, classes)
    gap = torch.where(
        (mi > MI_ROUND_OFF) & (denom > 0), torch.addcdiv(batch.one, mi, denom, value=-1.0), 1.0
    )  # (n,) 1 - NMI before the clamps
    excess = torch.addmv(batch.class_total, counts, classes.excess_weights)  # (n,) e, exact
    return torch.clamp(gap, min=batch.zero, max=excess)  # (n,)


def _objective(batch: Batch, index: Tensor, width: int, new_min: Tensor, gamma: Tensor) -> Tensor:
    """``A = F + gamma (1 - NMI)`` of ``n`` clusterings, the float64 value of :func:`objectives`
    (bit for bit): ``index`` ``(n, 2, B)`` as in :func:`_margin`, ``new_min`` ``(n, B)`` each
    point's distance to its nearest medoid (``F = -sum``, Eq. 4), ``gamma`` ``()`` float64.
    Returns ``(n,)``."""
    return gamma * _margin(batch, index, width) - new_min.sum(dim=1, dtype=torch.float64)


def greedy_set(batch: Batch, gamma: Tensor) -> Tensor:
    """Algorithm 1: add, ``C`` times, the point maximising ``A(S + {j})``. Returns ``(C,)``.

    Static shapes, no host read: all ``B`` points are scored at every step, the chosen ones
    masked out (the first maximiser wins ties). The state between steps: each point's distance
    to its nearest medoid ``base_min`` and the threshold at or below which a candidate takes it
    (the float below ``base_min``, as ties go to the earlier medoid; NaN, never, at a medoid),
    both updated by a ``minimum`` with the chosen point's row of :attr:`Batch.steps`, and the
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
    batch: Batch, base_min: Tensor, base_assign: Tensor, staying: Tensor, position: int
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
    ids (:class:`Batch`) when it stays.
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


def refine_pass(batch: Batch, gamma: Tensor, medoids: Tensor) -> None:
    """One pass of Algorithm 2 over the ``K`` clusters, in place on ``medoids`` ``(K,)``.

    Per cluster ``k``: its members (its medoid included, so ``A`` never decreases, Lemma 1) are
    scored as medoid of ``k`` with the other medoids staying; the best replaces the medoid if its
    ``A`` is strictly higher (the first maximiser wins ties). Assignments are recomputed after
    every swap (Gauss-Seidel). The members are gathered (a ``nonzero``, a host read on an
    accelerator): the CPU path; :func:`refine_round` is the static-shape one.
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


def paper_pass(batch: Batch, gamma: Tensor, medoids: Tensor) -> None:
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


# A visit no refinement reaches (:func:`refine_round`).
_NEVER = 2**62


class Refinement(NamedTuple):
    """The state of the static-shape refinement (:func:`refine_round`), updated in place."""

    medoids: Tensor  # (K,) S
    visit: Tensor  # () long: the next visit, pass * K + cluster
    limit: Tensor  # () long: the visits end before it (the end of the pass after the last swap)
    last: Tensor  # () long: passes * K, the end of the last pass
    swaps: Tensor  # () long


def refine_round(batch: Batch, gamma: Tensor, state: Refinement) -> Tensor:
    """Algorithm 2 as :func:`refine_pass` runs it, up to and including its next swap.

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
