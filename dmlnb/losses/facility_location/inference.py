"""The loss-augmented inference (:func:`loss_augmented_inference`): Algorithms 1 and 2 in three
stages, replayed as CUDA graphs on CUDA; and the exact maximisation on tiny batches
(:func:`exhaustive_inference`).
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict

import torch
from torch import Tensor

from dmlnb.losses.facility_location.algorithms import (
    Refinement,
    batch_constants,
    greedy_set,
    paper_pass,
    refine_pass,
    refine_round,
)
from dmlnb.losses.facility_location.inputs import (
    check_dist_labels,
    check_gamma,
    check_passes,
    check_refinement,
    encode_labels,
)
from dmlnb.losses.facility_location.nmi import (
    classes_of,
    objectives,
)

__all__ = ["infer_medoids", "loss_augmented_inference", "exhaustive_inference"]


class _Inference:
    """Algorithms 1 and 2 on one batch, in three stages whose tensors live on the instance.

    :meth:`greedy` (Algorithm 1), :meth:`refine_pass` (a stage of Algorithm 2; returns ``()``,
    nonzero while the refinement goes on) and :meth:`finish` (``values`` ``(3,)`` float64: ``A``
    of the greedy and the refined sets and the refined NMI). None reads back to the host;
    :meth:`run` reads the result of :meth:`refine_pass` once per call to stop. ``compact`` (the
    CPU path): a stage is one pass of :func:`refine_pass` (its count of swaps); else one round
    of :func:`refine_round` (whether it swapped), static shapes. ``refinement="paper"``: a stage
    is one pass of :func:`paper_pass` (the medoids it changed), compact on any device.
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
        self.refine = paper_pass if refinement == "paper" else refine_pass
        # passes * K, the end of the refinement's visits (:class:`Refinement`); set by run.
        self.last = torch.full((), 5 * num_classes, dtype=torch.long, device=dist.device)

    def greedy(self) -> None:
        self.batch = batch_constants(self.dist, classes_of(self.codes, self.num_classes))
        self.greedy_medoids = greedy_set(self.batch, self.gamma)  # (C,)
        self.refined = self.greedy_medoids.clone()  # (C,)
        zero = torch.zeros((), dtype=torch.long, device=self.dist.device)
        limit = self.last.clamp_max(self.num_classes)  # the end of the first pass
        self.state = Refinement(self.refined, zero, limit, self.last, zero.clone())
        self.swaps = self.state.swaps  # ()

    def refine_pass(self) -> Tensor:
        if not self.compact:
            self.swapped = refine_round(self.batch, self.gamma, self.state)  # ()
            return self.swapped
        before = self.refined.clone()  # (C,)
        self.refine(self.batch, self.gamma, self.refined)
        # A pass visits each cluster once: its swaps are the medoids it changed.
        torch.sum(self.refined != before, dim=0, out=self.swaps)
        return self.swaps

    def finish(self) -> None:
        sets = torch.stack([self.greedy_medoids, self.refined])  # (2, C)
        objective, nmi = objectives(self.batch.columns, sets, self.batch.classes, self.gamma)
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


def infer_medoids(
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
    in rounds of static shapes (:func:`refine_round`) instead of steps over a cluster's members;
    on CUDA (``graphs``) the static stages replay CUDA graphs captured on the first call with the
    same device, dtype, ``B`` and ``C``. ``refinement="paper"`` runs :func:`paper_pass`
    eagerly, members gathered, on any device. (The public default is ``"paper"``
    (:func:`loss_augmented_inference`); this engine's is ``"full"``, its static path's.)
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
      (:func:`paper_pass`): ``y_PAM = g(S)`` once per pass; for ``k = 0..C-1``,
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
    check_dist_labels(dist, labels)
    gamma = check_gamma(gamma)
    passes = check_passes(pam_passes)
    refinement = check_refinement(refinement)
    medoids, values, swaps = infer_medoids(
        dist.detach(),
        *encode_labels(labels),
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
    check_dist_labels(dist, labels)
    gamma = check_gamma(gamma)
    codes, num_classes = encode_labels(labels)
    b = dist.shape[0]
    total = math.comb(b, num_classes)
    if total > max_subsets:
        raise ValueError(
            f"exhaustive_inference would score binom({b}, {num_classes}) = {total} subsets "
            f"(> max_subsets={max_subsets}); use a smaller batch or loss_augmented_inference"
        )
    device = dist.device
    classes = classes_of(codes, num_classes)
    chunk = max(1, 2**20 // (num_classes * b))
    subsets_iter = itertools.combinations(range(b), num_classes)
    best_value, best_subset = -math.inf, None
    with torch.no_grad():
        columns = dist.detach().T  # (B, B) row j: d[i, j]
        while batch := list(itertools.islice(subsets_iter, chunk)):
            subsets = torch.tensor(batch, dtype=torch.long, device=device)  # (n, C)
            objective, _ = objectives(columns, subsets, classes, gamma)  # (n,)
            top = int(objective.argmax())
            if objective[top].item() > best_value:
                best_value, best_subset = objective[top].item(), subsets[top]
    return best_subset, best_value
