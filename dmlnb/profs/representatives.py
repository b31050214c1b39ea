"""PROFS's class representatives (Can, Gürbüz & Alatan, Algorithm 1, Eq. 4.2, Sec. 4.2).

* :func:`projection_period`: ``M = ceil(rho / p(y))`` (Sec. 5.4.1), the steps one representative
  set is kept;
* :class:`RepresentativeSampler`: the batches built around the representatives, with optional hard
  negative class mining (a batch sampler and a :class:`~dmlnb.hooks.Hook` that stores the
  representatives' embeddings);
* :class:`CenterRepresentatives`: SoftTriple's adaptation (Sec. 5.3), the loss's cluster centres
  as HNCM's representatives.

The sampler renews the representatives at global steps ``s`` with ``s % M == 0``; the proximal
hook (:mod:`dmlnb.profs.proximal`) refreshes ``theta_k`` at the start of the same steps, so one
``M``-step projection uses one representative set and one anchor, as in Algorithm 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from dmlnb.hooks import Hook, TrainState
from dmlnb.samplers import ClassBatchSampler, groups_per_batch, stream_generator

__all__ = ["HNCM_MODES", "projection_period", "RepresentativeSampler", "CenterRepresentatives"]

#: How hard negative class mining chooses a batch's classes (:class:`RepresentativeSampler`):
#: ``"greedy"``, each next class the nearest to all picked so far (``C - 1`` scans of the ``L``
#: representatives, ``O(C L D)`` per batch), or ``"scan"``, the nearest classes to one uniformly
#: drawn class (one scan, ``O(L D)``: the paper's ``O(L)``, Sec. 4.2).
HNCM_MODES: tuple[str, ...] = ("greedy", "scan")


def projection_period(rho: float, batch_size: int, samples_per_class: int, num_classes: int) -> int:
    """Number of iterations ``M`` of one approximate projection, PROFS Sec. 5.4.1.

    .. math::

        M = \\left\\lceil \\frac{\\rho}{p(y_i)} \\right\\rceil, \\qquad
        p(y_i) = \\frac{B}{I\\,L},

    where ``p(y_i)`` is the probability of observing class ``i`` in a mini-batch of ``B`` samples
    holding ``I`` samples of each of its ``B / I`` classes, drawn among ``L`` classes, and ``rho``
    is how many times a representative is to be used while it is kept (the paper uses
    ``rho = 6``). E.g. Stanford Online Products (``L = 11318``, ``B = 128``, ``I = 2``):
    ``M = ceil(6 * 2 * 11318 / 128) = 1062``.

    ``rho`` is read as the decimal it prints as (``0.1`` is 1/10), so the ceiling is exact.

    Args:
        rho: uses of a representative per renewal, ``> 0``.
        batch_size: ``B``.
        samples_per_class: ``I``, samples of each class in a batch (a divisor of ``B``).
        num_classes: ``L``, number of training classes (at least ``B / I``).
    """
    if rho <= 0:
        raise ValueError(f"rho must be > 0, got {rho}")
    if samples_per_class < 1 or batch_size % samples_per_class != 0:
        raise ValueError(
            f"samples_per_class={samples_per_class} must be >= 1 and divide batch_size={batch_size}"
        )
    if num_classes < batch_size // samples_per_class:
        raise ValueError(
            f"a batch of {batch_size // samples_per_class} classes needs num_classes >= that, got "
            f"{num_classes}; p(y) = B / (I L) would exceed 1"
        )
    p = Fraction(batch_size, samples_per_class * num_classes)
    return math.ceil(Fraction(str(rho)) / p)


class RepresentativeSampler(ClassBatchSampler, Hook):
    """PROFS batch construction: class representatives kept for ``M`` steps, optional HNCM.

    **Representatives** (Algorithm 1, Eq. 4.2). Every class ``l`` has one representative
    ``k_l``; all ``L`` are renewed together at global steps ``s`` with ``s % period == 0``
    (``period = M``, see :func:`projection_period`), so cycle ``k = s // M`` uses one fixed set.
    Successive sets are disjoint as far as the class sizes allow (Sec. 4: distinct ``{k_l}`` for
    distinct ``k``): class ``l`` walks through a random permutation of its ``n_l`` images, one per
    cycle, and draws a fresh permutation after ``n_l`` cycles (never starting with the image it
    just used). The sets are a function of ``(seed, k)`` only.

    **Batches** (Algorithm 1, "construct exemplar batch from R' and E"; Sec. 5.4.1 ``I``
    samples per class). A batch holds ``C = B / m`` distinct classes, as ``C`` contiguous groups
    of ``m``: the class's current representative first, then ``m - 1`` other images of the class
    drawn uniformly without replacement (a class with fewer than ``m - 1`` other images gives all
    of them plus draws with replacement; a single-image class repeats its representative). The
    representatives thus appear in every batch that holds their class, as the relaxed constraints
    of Eq. 4.2 are distances *to the representatives*. ``len`` is ``num_batches`` (default
    ``N_lab // B``); batch ``t`` of epoch ``e`` is global step ``s = e * len + t``.

    **Class choice**. Without HNCM: ``C`` classes uniformly without replacement, so a class is in
    a batch with probability ``p(y) = B / (m L)`` as :func:`projection_period` assumes. With
    hard negative class mining (Sec. 4.2 "Hard negative class mining": the representatives'
    embeddings are stored, "approximate global mining can be efficiently performed", "online
    HNCM with O(L) complexity") the first class ``c_0`` is uniform and the others follow
    ``hncm_mode`` (:data:`HNCM_MODES`), ``e_c`` being class ``c``'s stored embedding:

    * ``"greedy"``: each next class is the unpicked class nearest (Euclidean) to the classes
      picked so far, ``argmin_{c not in S} min_{s in S} ||e_c - e_s||``. Keeping the running
      minimum ``(L,)`` makes each pick one matrix-vector product with the ``(L, D)`` memory:
      ``C - 1`` scans of the ``L`` representatives, ``O(C L D)`` per batch.
    * ``"scan"``: the ``C - 1`` classes nearest to ``c_0``, in order of distance,
      ``S = {c_0} + argsmallest_{C-1, c != c_0} ||e_c - e_{c_0}||``: one product with the
      memory (``L`` distances, ``O(L D)``) and one selection of the ``C - 1`` smallest
      (``topk``). Counted in representatives scanned, as the paper counts, that is ``O(L)``
      per batch (``D`` fixed), against the greedy rule's ``O(C L)``. Every unpicked class with
      a stored embedding is at least as far from ``c_0`` as every picked one.

    Neither forms an ``L x L`` matrix. Classes whose representative was never embedded have no
    stored embedding; they are picked (uniformly) only once no embedded class is left (and
    all of them are, uniformly, when ``c_0`` has none).

    **Hook**. :meth:`on_step_end` stores the embeddings of the representatives of the batch (the
    first row of each group) in the ``(L, D)`` memory; a class keeps the embedding of its
    previous representative until its new one has been in a batch (Sec. 4.2: "update those
    representations as we sample the corresponding representatives"). Reading positions instead
    of looking indices up keeps this right when a ``DataLoader`` pre-fetches batches. Without HNCM
    the sampler is stateless and the batches of epoch ``e`` depend only on ``(seed, e)``; with
    HNCM they also depend on the memory, which :meth:`state_dict` carries for resuming.

    Args:
        labels: ``(N,)`` integer labels, ``-1`` for unlabelled (never drawn).
        batch_size: ``B``, a multiple of ``m``.
        m: samples per class in a batch (``I`` in the paper), the representative included;
            ``>= 2`` (the paper uses 2).
        period: ``M``, steps a representative set is kept.
        hncm: hard negative class mining.
        hncm_mode: how HNCM picks the classes, ``"greedy"`` or ``"scan"`` (:data:`HNCM_MODES`);
            only with ``hncm=True``.
        seed: seed of the sampler's own generators.
        num_batches: batches per epoch; default ``N_lab // B``.
    """

    def __init__(
        self,
        labels: Tensor | np.ndarray | Sequence[int],
        batch_size: int,
        m: int,
        period: int,
        hncm: bool = False,
        seed: int = 0,
        num_batches: int | None = None,
        hncm_mode: str = "greedy",
    ) -> None:
        if hncm_mode not in HNCM_MODES:
            raise ValueError(f"unknown hncm_mode {hncm_mode!r}; choose one of {list(HNCM_MODES)}")
        if hncm_mode != "greedy" and not hncm:
            raise ValueError(
                f"hncm_mode={hncm_mode!r} chooses how HNCM picks classes; pass hncm=True with it"
            )
        if m < 2:
            raise ValueError(
                f"m={m}: a PROFS group is the representative plus m - 1 samples of its class; "
                "use m >= 2"
            )
        if period < 1:
            raise ValueError(f"period (M) must be >= 1, got {period}")
        groups = groups_per_batch(batch_size, m)
        super().__init__(labels, batch_size, groups, seed=seed, num_batches=num_batches)
        self.m, self.period = int(m), int(period)
        self.hncm, self.hncm_mode = bool(hncm), hncm_mode
        self._cycle = 0
        self._rep_order = self._initial_rep_order()  # (N_lab,) positions into index.order
        self._reps: Tensor | None = None  # (L,) representatives of self._cycle (cache)
        self.memory: Tensor | None = None  # (L, D) stored representative embeddings
        self.known = torch.zeros(self._index.num_classes, dtype=torch.bool)  # (L,)

    # ------------------------------------------------------------------ sampler protocol
    @property
    def classes(self) -> Tensor:
        """``(L,)`` sorted class labels: slot ``l`` of any ``(L, ...)`` tensor is ``classes[l]``."""
        return self._index.classes

    def representatives(self, cycle: int) -> Tensor:
        """``(L,)`` dataset indices of the representatives of cycle ``k`` (steps ``kM..kM+M-1``)."""
        index = self._index
        return index.order[self._rep_positions(cycle)]

    def __iter__(self) -> Iterator[list[int]]:
        index = self._index
        gen = stream_generator(self.seed, "batches", self.epoch)
        for t in range(self.num_batches):
            step = self.epoch * self.num_batches + t
            reps = self._rep_positions(step // self.period)  # (L,) positions into index.order
            keys = torch.rand(index.num_classes, generator=gen)  # (L,)
            chosen = self._pick_classes(keys)  # (C,) class slots, in batch order
            start = index.start[chosen]  # (C,)
            examples = self._draw_examples(chosen, reps[chosen] - start, gen)  # (C, m-1)
            groups = torch.cat([reps[chosen][:, None], start[:, None] + examples], dim=1)  # (C, m)
            yield index.order[groups].flatten().tolist()

    # ------------------------------------------------------------------ hook protocol
    def on_step_end(self, state: TrainState) -> None:
        """Store the embeddings of the batch's representatives (row ``0, m, 2m, ...``)."""
        if not self.hncm:
            return
        emb, labels = state.embeddings, state.labels
        if emb is None or labels is None:
            raise RuntimeError(
                "RepresentativeSampler.on_step_end needs state.embeddings and state.labels"
            )
        if emb.shape[0] != self.batch_size:
            raise RuntimeError(
                f"RepresentativeSampler got a batch of {emb.shape[0]} embeddings, expected "
                f"{self.batch_size}: the loop must train on the batches this sampler yields, "
                "unchanged"
            )
        groups = labels.view(self.classes_per_batch, self.m)  # (C, m)
        if not bool((groups == groups[:, :1]).all()):
            raise RuntimeError(
                "batch is not in the sampler's layout (contiguous groups of m same-class samples, "
                "representative first): do not shuffle or reorder the sampler's batches"
            )
        reps = emb.detach()[:: self.m].float()  # (C, D)
        slots = self._index.slots_of(groups[:, 0])  # (C,)
        if self.memory is None:
            self.memory = torch.zeros(self._index.num_classes, reps.shape[1], device=reps.device)
        self.memory = self.memory.to(reps.device)
        self.known = self.known.to(reps.device)
        self.memory[slots] = reps
        self.known[slots] = True

    def set_memory(self, memory: Tensor) -> None:
        """Replace the HNCM memory by ``(L, D)`` class vectors (row ``l`` is class
        ``classes[l]``), all marked as known; e.g. SoftTriple's centres
        (:class:`CenterRepresentatives`)."""
        if memory.dim() != 2 or memory.shape[0] != self._index.num_classes:
            raise ValueError(
                f"memory must be (L, D) with L = {self._index.num_classes} classes, got shape "
                f"{tuple(memory.shape)}"
            )
        self.memory = memory.detach().float().clone()
        self.known = torch.ones(self._index.num_classes, dtype=torch.bool, device=memory.device)

    def state_dict(self) -> dict[str, Any]:
        """The HNCM memory (the representative schedule is a function of ``(seed, step)``)."""
        return {
            "num_classes": int(self._index.num_classes),
            "memory": None if self.memory is None else self.memory.detach().cpu().clone(),
            "known": self.known.cpu().clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_classes"] != self._index.num_classes:
            raise ValueError(
                f"checkpoint has {state['num_classes']} classes, this sampler "
                f"{self._index.num_classes}: it was built from different labels"
            )
        self.memory = None if state["memory"] is None else state["memory"].clone()
        self.known = state["known"].clone()

    # ------------------------------------------------------------------ internals
    def _initial_rep_order(self) -> Tensor:
        """Cycle 0: a random permutation of each class's positions, ``(N_lab,)``."""
        positions = torch.arange(self._index.num_labelled)
        return self._index.shuffle_within(
            positions, stream_generator(self.seed, "representatives", 0)
        )

    def _rep_positions(self, cycle: int) -> Tensor:
        """``(L,)`` positions (into ``index.order``) of the representatives of ``cycle``.

        Class ``l`` uses entry ``cycle % n_l`` of its permutation; at a cycle that is a multiple
        of ``n_l`` it first draws a new permutation (generator ``(seed, cycle)``), swapping its
        first two entries if it would begin with the representative of the previous cycle.
        Replays from cycle 0 when asked for an earlier cycle, so the result depends only on
        ``(seed, cycle)``.
        """
        if cycle == self._cycle and self._reps is not None:
            return self._reps
        index = self._index
        n, start = index.size, index.start  # (L,), (L,)
        if cycle < self._cycle:
            self._cycle, self._rep_order = 0, self._initial_rep_order()
        for k in range(self._cycle + 1, cycle + 1):
            wrapped = (k % n == 0) & (n > 1)  # (L,) classes starting a new pass at cycle k
            if not bool(wrapped.any()):
                continue
            previous = self._rep_order[start + n - 1]  # (L,) rep of cycle k-1 (last of the pass)
            gen = stream_generator(self.seed, "representatives", k)
            order = index.shuffle_within(self._rep_order, gen, wrapped)
            repeat = torch.nonzero(wrapped & (order[start] == previous)).squeeze(1)
            first, second = start[repeat], start[repeat] + 1
            order[first], order[second] = order[second], order[first]
            self._rep_order = order
        self._cycle, self._reps = cycle, self._rep_order[start + cycle % n]
        return self._reps

    def _pick_classes(self, keys: Tensor) -> Tensor:
        """``C`` distinct class slots ``(C,)``: uniform (smallest keys) or by HNCM."""
        C = self.classes_per_batch
        if not self.hncm or self.memory is None:
            return torch.topk(keys, C, largest=False).indices
        if self.hncm_mode == "scan":
            return self._scan_classes(keys)
        memory, known = self.memory, self.known  # (L, D), (L,)
        keys = keys.to(memory.device)
        sq_norm = (memory * memory).sum(dim=1)  # (L,)
        picked = torch.zeros_like(known)  # (L,)
        nearest = torch.full_like(sq_norm, math.inf)  # (L,) min squared distance to picked classes
        new = keys.argmin()  # uniform first class
        out = [new]
        for _ in range(C - 1):
            d2 = sq_norm - 2.0 * (memory @ memory[new]) + sq_norm[new]  # (L,) to the newest pick
            d2 = torch.where(known & known[new], d2.clamp_(min=0.0), math.inf)  # (L,)
            nearest = torch.minimum(nearest, d2)
            picked[new] = True
            candidates = nearest.masked_fill(picked, math.inf)  # (L,)
            closest = candidates.argmin()
            fallback = keys.masked_fill(picked, math.inf).argmin()  # uniform among the unpicked
            new = torch.where(torch.isfinite(candidates[closest]), closest, fallback)
            out.append(new)
        return torch.stack(out).cpu()

    def _scan_classes(self, keys: Tensor) -> Tensor:
        """HNCM by one scan (``hncm_mode="scan"``): ``c_0`` = the smallest key, then the ``C - 1``
        classes whose stored embeddings are nearest to ``c_0``'s, nearest first; classes without a
        comparable embedding after them, by their keys. ``keys`` ``(L,)`` uniform;
        returns ``(C,)``."""
        memory, known = self.memory, self.known  # (L, D), (L,)
        keys = keys.to(memory.device)
        first = keys.argmin()  # uniform first class
        sq_norm = (memory * memory).sum(dim=1)  # (L,)
        d2 = (sq_norm - 2.0 * (memory @ memory[first]) + sq_norm[first]).clamp_(
            min=0.0
        )  # (L,) to c_0
        comparable = known & known[first]  # (L,)
        d2 = torch.where(comparable, d2, math.inf)
        d2[first] = -1.0  # c_0 first
        # one ranking: the finite distances, then the others above them in the order of their keys
        # (offset by a multiple of the largest distance, so the keys keep their float resolution)
        finite = torch.isfinite(d2)  # (L,)
        top = d2.masked_fill(~finite, -1.0).max()  # the largest finite distance (-1: only c_0)
        offset = top.abs() + 1.0
        rank = torch.where(finite, d2, top + offset * (1.0 + keys))  # (L,)
        return torch.topk(rank, self.classes_per_batch, largest=False).indices.cpu()

    def _draw_examples(self, chosen: Tensor, rep: Tensor, gen: torch.Generator) -> Tensor:
        """``(C, m-1)`` in-class positions of the non-representative samples of each group.

        ``chosen`` ``(C,)`` class slots, ``rep`` ``(C,)`` in-class position of each representative.
        """
        k = self.m - 1
        n = self._index.size[chosen]  # (C,)
        width = max(int(self._index.size.max()), k)
        j = torch.arange(width)  # (W,)
        keys = torch.rand(len(chosen), width, generator=gen)  # (C, W)
        invalid = (j >= n[:, None]) | (j == rep[:, None])  # (C, W) outside the class, or the rep
        keys.masked_fill_(invalid, 2.0)
        values, pos = torch.topk(keys, k, dim=1, largest=False)  # (C, k) without replacement
        u = torch.rand(len(chosen), k, dtype=torch.float64, generator=gen)  # (C, k)
        pad = (u * (n - 1).clamp(min=1)[:, None]).long()  # (C, k) uniform over the n-1 others
        pad += pad >= rep[:, None]  # skip the representative
        pad = torch.where((n > 1)[:, None], pad, rep[:, None])  # single-image class: the rep itself
        return torch.where(values < 2.0, pos, pad)


class CenterRepresentatives(Hook):
    r"""SoftTriple-PROFS-HNCM: the loss's cluster centres are the class representatives (Sec. 5.3).

    Before training and after every step it sets the HNCM memory of ``sampler`` to one unit
    vector per class, the direction of the mean of the class's ``K`` L2-normalised centres,

    .. math::  r_c = \frac{\bar w_c}{\lVert \bar w_c \rVert}, \qquad
               \bar w_c = \frac{1}{K} \sum_k \frac{w_c^k}{\lVert w_c^k \rVert},

    so hard negative class mining picks classes whose centres are close, with the same
    ``O(L D)`` scan per pick (a minimum over the ``K^2`` centre pairs would cost ``K^2`` times
    more). ``K = 1`` uses the centre itself. Add it to the hooks *after* the sampler (the
    training loop puts a sampler that is a hook first), so it overwrites the embeddings the
    sampler stores itself.

    Args:
        sampler: a :class:`RepresentativeSampler` built with ``hncm=True``.
        loss: the SoftTriple loss (anything with ``centers() -> (C, K, D)`` and
            ``num_classes``); the sampler's class labels must lie in ``[0, C)``.
    """

    def __init__(self, sampler: RepresentativeSampler, loss: nn.Module) -> None:
        if not sampler.hncm:
            raise ValueError("CenterRepresentatives feeds HNCM; build the sampler with hncm=True")
        if not callable(getattr(loss, "centers", None)):
            raise ValueError(
                f"{type(loss).__name__} has no centers() -> (C, K, D); use SoftTripleLoss"
            )
        classes = sampler.classes
        if int(classes.min()) < 0 or int(classes.max()) >= int(loss.num_classes):
            raise ValueError(
                f"the sampler's labels span [{int(classes.min())}, {int(classes.max())}], the "
                f"loss has centres for classes [0, {int(loss.num_classes)}); build both from one "
                "label set"
            )
        self.sampler, self.loss = sampler, loss

    def __repr__(self) -> str:
        return f"CenterRepresentatives(classes={len(self.sampler.classes)})"

    def class_vectors(self) -> Tensor:
        """``(L, D)`` unit representative of each of the sampler's classes, in its slot order."""
        with torch.no_grad():
            centers = self.loss.centers()  # (C, K, D) unit rows
            mean = F.normalize(centers.mean(dim=1), dim=1)  # (C, D)
            return mean[self.sampler.classes.to(mean.device)]  # (L, D)

    def on_train_start(self, state: TrainState) -> None:
        self.sampler.set_memory(self.class_vectors())

    def on_step_end(self, state: TrainState) -> None:
        self.sampler.set_memory(self.class_vectors())
