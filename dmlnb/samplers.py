"""Class-balanced batch samplers: every batch holds ``C`` distinct classes with a few images each.

Pair and triplet losses need positives in the batch, so DML batches are built class by class
rather than drawn uniformly: ``C`` classes, ``m = B / C`` images of each (Easy Positive's group
size ``n``, PROFS' ``I``, Song et al.'s ratio ``C / B``).

Every sampler here (and PROFS' :class:`~dmlnb.profs.representatives.RepresentativeSampler`) is a
:class:`ClassBatchSampler`, a :class:`torch.utils.data.Sampler` of index lists, for
``DataLoader(dataset, batch_sampler=sampler)``:

* ``len(sampler)`` is the number of batches of one epoch, by default ``N // B`` with ``N`` the
  number of *labelled* samples (label ``-1`` marks an unlabelled sample, never drawn);
* ``set_epoch(e)`` selects the epoch; the batches of epoch ``e`` are a function of ``(seed, e)``
  only, drawn from the sampler's own :class:`torch.Generator` (never the global RNG), so a
  resumed run sees exactly the batches of an uninterrupted one;
* a batch lists its classes' groups contiguously: ``[class 1 x m, class 2 x m, ...]``.

Compared with pytorch-metric-learning's ``MPerClassSampler`` (global NumPy RNG, no notion of an
epoch, classes drawn uniformly), images here are drawn without replacement within a class for as
long as the class has unused images (the rule is spelled out on :class:`MPerClassSampler`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Sampler

from dmlnb.checks import check_labels, check_values

__all__ = [
    "ClassBatchSampler",
    "MPerClassSampler",
    "ClassRatioSampler",
    "ClassIndex",
    "epoch_length",
    "groups_per_batch",
    "stream_generator",
]


def stream_generator(seed: int, *stream: int | str) -> torch.Generator:
    """A CPU generator whose state depends only on ``(seed, *stream)`` (stable across runs).

    ``stream`` names what the randomness is for (e.g. ``("batches", epoch)``), so independent
    draws never share a sequence and one epoch's draws never depend on another's.
    """
    digest = hashlib.blake2b(repr((int(seed),) + stream).encode(), digest_size=8).digest()
    gen = torch.Generator()
    gen.manual_seed(int.from_bytes(digest, "little"))
    return gen


def _as_labels(labels: Tensor | np.ndarray | Sequence[int]) -> Tensor:
    """``labels`` as a CPU long tensor ``(N,)``; ``-1`` (unlabelled) allowed, no other negative
    (checks of :mod:`dmlnb.checks`)."""
    y = torch.as_tensor(np.asarray(labels) if not isinstance(labels, Tensor) else labels)
    check_labels(y, None)
    y = y.detach().to("cpu", torch.long)
    check_values(None, y, allow_unlabelled=True)
    return y


@dataclass(frozen=True)
class ClassIndex:
    """The labelled samples of a dataset grouped by class (shared by the samplers).

    Attributes:
        classes: ``(L,)`` sorted distinct labels; a class's *slot* is its position here.
        order: ``(N_lab,)`` dataset indices of the labelled samples, sorted by class slot
            (class ``l`` occupies ``order[start[l] : start[l] + size[l]]``).
        start: ``(L,)`` first position of each class in ``order``.
        size: ``(L,)`` number of samples of each class.
        slot: ``(N_lab,)`` class slot of each position of ``order``.
    """

    classes: Tensor
    order: Tensor
    start: Tensor
    size: Tensor
    slot: Tensor

    @classmethod
    def from_labels(cls, labels: Tensor | np.ndarray | Sequence[int]) -> ClassIndex:
        y = _as_labels(labels)
        labelled = torch.nonzero(y >= 0).squeeze(1)  # (N_lab,)
        if labelled.numel() == 0:
            raise ValueError("no labelled sample (every label is -1): a class sampler needs labels")
        classes, slot = torch.unique(y[labelled], return_inverse=True)  # (L,), (N_lab,)
        perm = torch.argsort(slot, stable=True)  # (N_lab,)
        size = torch.bincount(slot, minlength=classes.numel())  # (L,)
        return cls(
            classes=classes,
            order=labelled[perm],
            start=torch.cumsum(size, 0) - size,
            size=size,
            slot=slot[perm],
        )

    @property
    def num_classes(self) -> int:
        return self.classes.numel()

    @property
    def num_labelled(self) -> int:
        return self.order.numel()

    def shuffle_within(
        self, values: Tensor, gen: torch.Generator, which: Tensor | None = None
    ) -> Tensor:
        """Copy of ``values`` ``(N_lab,)`` with each class segment randomly permuted.

        Only the segments of the classes where ``which`` ``(L,)`` bool is true are permuted
        (all classes if ``None``); the others are left as they are.
        """
        if which is None:
            pos = torch.arange(self.num_labelled)  # (P,)
        else:
            pos = torch.nonzero(which[self.slot]).squeeze(1)  # (P,) positions of those classes
        # Sorting slot + U[0,1) keys permutes positions inside each (contiguous) class segment.
        keys = self.slot[pos].double() + torch.rand(pos.numel(), dtype=torch.float64, generator=gen)
        out = values.clone()
        out[pos] = values[pos[torch.argsort(keys)]]
        return out

    def slots_of(self, labels: Tensor) -> Tensor:
        """Class slots ``(K,)`` of labels ``(K,)`` (on the labels' device); unknown labels raise."""
        classes = self.classes.to(labels.device)
        slots = torch.searchsorted(classes, labels.contiguous())  # (K,)
        slots.clamp_(max=self.num_classes - 1)
        if not torch.equal(classes[slots], labels):
            raise ValueError("labels contain a class the sampler was not built with")
        return slots


def groups_per_batch(batch_size: int, m: int) -> int:
    """``B / m``: the classes of a batch of ``batch_size`` images in whole groups of ``m`` per
    class (:class:`MPerClassSampler`, PROFS' representative batches).

    Raises:
        ValueError: ``batch_size`` is not a multiple of ``m``.
    """
    if batch_size % m != 0:
        raise ValueError(
            f"batch_size={batch_size} is not a multiple of m={m}: a batch holds batch_size/m "
            "whole groups; pick a batch_size divisible by m"
        )
    return batch_size // m


def epoch_length(num_labelled: int, batch_size: int, num_batches: int | None) -> int:
    """``num_batches`` if given, else ``N_lab // B``: the samplers' documented epoch length."""
    if num_batches is not None:
        if num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {num_batches}")
        return int(num_batches)
    if num_labelled < batch_size:
        raise ValueError(
            f"only {num_labelled} labelled samples, fewer than batch_size={batch_size}: the "
            "default epoch (N // batch_size batches) is empty; lower batch_size or pass num_batches"
        )
    return num_labelled // batch_size


class ClassBatchSampler(Sampler[list[int]]):
    """What every class-balanced batch sampler keeps: batches of ``batch_size`` dataset indices
    from ``classes_per_batch`` distinct classes, ``num_batches`` of them per epoch (default
    ``N_lab // B``, :func:`epoch_length`), the epoch chosen by :meth:`set_epoch`.

    A subclass checks its own arguments, calls this ``__init__`` (which checks
    ``1 <= classes_per_batch <= batch_size`` and that ``labels`` have that many classes) and
    yields the batches of :attr:`epoch` from ``__iter__``, drawn from :func:`stream_generator`
    ``(seed, ...)``.

    Attributes:
        batch_size: ``B``.
        classes_per_batch: ``C``, distinct classes of a batch.
        seed: seed of the sampler's own generators.
        epoch: the epoch whose batches the next ``iter`` yields (0 at first).
        num_batches: batches per epoch, ``len(sampler)``.
        _index: the :class:`ClassIndex` of the labelled samples of ``labels`` ``(N,)``.
    """

    def __init__(
        self,
        labels: Tensor | np.ndarray | Sequence[int],
        batch_size: int,
        classes_per_batch: int,
        seed: int = 0,
        num_batches: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 1 <= classes_per_batch <= batch_size:
            raise ValueError(
                f"classes_per_batch must be in [1, batch_size={batch_size}], "
                f"got {classes_per_batch}"
            )
        self._index = ClassIndex.from_labels(labels)
        if self._index.num_classes < classes_per_batch:
            raise ValueError(
                f"a batch of {classes_per_batch} distinct classes needs at least that many "
                f"labelled classes, got {self._index.num_classes}; lower batch_size or raise the "
                "number of images per class"
            )
        self.batch_size = int(batch_size)
        self.classes_per_batch = int(classes_per_batch)
        self.seed = int(seed)
        self.epoch = 0
        self.num_batches = epoch_length(self._index.num_labelled, self.batch_size, num_batches)

    def __len__(self) -> int:
        return self.num_batches

    def __repr__(self) -> str:
        """``MPerClassSampler(batch_size=128, classes_per_batch=16, seed=0, num_batches=17)``: the
        same for equal samplers, so a run record (its ``components``) names the sampler, not an
        object's address in memory."""
        return (
            f"{type(self).__name__}(batch_size={self.batch_size}, "
            f"classes_per_batch={self.classes_per_batch}, seed={self.seed}, "
            f"num_batches={self.num_batches})"
        )

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next ``iter`` yields."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch = int(epoch)


class _ClassGroupSampler(ClassBatchSampler):
    """Batches of ``classes_per_batch`` distinct classes; class ``i`` of a batch gives ``g_i``
    images, ``g = (q+1, ..., q+1, q, ..., q)`` with ``q = B // C`` and ``B mod C`` groups of
    ``q + 1``. :class:`MPerClassSampler` (``C | B``) and :class:`ClassRatioSampler` set ``C``.
    See :class:`MPerClassSampler` for the epoch rule.
    """

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.epoch_batches(self.epoch).tolist()

    def epoch_batches(self, epoch: int) -> Tensor:
        """All batches of ``epoch`` as a ``(num_batches, B)`` tensor of dataset indices."""
        gen = stream_generator(self.seed, "class-groups", epoch)
        index = self._index
        n = index.size  # (L,)
        order = index.shuffle_within(index.order, gen)  # (N_lab,) this epoch's pass order
        T, C = self.num_batches, self.classes_per_batch
        q, r = divmod(self.batch_size, C)
        g = torch.full(
            (C,), q
        )  # (C,) images per group: q + 1 in the first B mod C, q in the others
        g[:r] += 1

        # Sequential part: which classes, and where each draw starts in its class's pass.
        used = torch.zeros_like(n)  # (L,) images consumed so far this epoch
        passes = torch.ones_like(n)  # (L,) passes opened so far
        chosen = torch.empty(T, C, dtype=torch.long)
        offset = torch.empty(T, C, dtype=torch.long)
        for t in range(T):
            remaining = (passes * n - used).clamp_(min=0)  # (L,) unused images of the open pass
            exhausted = remaining == 0
            if int(exhausted.sum()) > index.num_classes - C:
                passes += exhausted  # too few classes left: exhausted classes open a new pass
                remaining = passes * n - used
            # Weighted sampling without replacement (Efraimidis & Spirakis 2006): the C largest
            # keys log(U) / w <= 0; a class with w = 0 gets -inf and is never drawn. Classes that
            # the batches left after this one could no longer use up get key U >= 0: drawn first.
            u = torch.rand(n.shape, dtype=torch.float64, generator=gen)  # (L,)
            must = remaining > (T - 1 - t) * q  # (L,)
            keys = torch.where(must, u, u.log() / remaining)  # (L,)
            c = torch.topk(keys, C).indices  # (C,)
            chosen[t], offset[t] = c, used[c]
            used[c] += torch.minimum(g, n[c])

        # Vectorised part: positions inside each class's pass order, padding small classes.
        G = int(g.max())
        j = torch.arange(G)  # (G,)
        n_tc = n[chosen][..., None]  # (T, C, 1)
        in_pass = (offset[..., None] + j) % n_tc  # (T, C, G) consecutive, wrapping into next pass
        u = torch.rand(T, C, G, dtype=torch.float64, generator=gen)  # (T, C, G)
        padding = (u * n_tc).long()  # (T, C, G) uniform with replacement
        pos = torch.where(j < n_tc, in_pass, padding)  # (T, C, G)
        indices = order[index.start[chosen][..., None] + pos]  # (T, C, G)
        keep = (j < g[:, None]).expand(T, C, G)  # (T, C, G) drop the unused (q+1)-th slot
        return indices[keep].view(T, self.batch_size)


class MPerClassSampler(_ClassGroupSampler):
    """Batches of ``batch_size / m`` distinct classes x ``m`` images each.

    The batch construction of Easy Positive (Xuan et al. 2020, group size ``n``), PROFS' baseline
    (``I`` images per class) and PML's ``MPerClassSampler``; with ``m = 2``, Sohn's N-pair
    batches (``N = B / 2`` pairs of distinct classes, :class:`dmlnb.losses.NPairLoss`). A batch
    lists its classes' groups
    contiguously, ``[c_1 x m, c_2 x m, ...]``; classes are distinct within a batch.

    **Epoch rule** (epoch ``e``, all randomness from a generator seeded by ``(seed, e)``):

    1. Every class ``c`` (``n_c`` images) starts the epoch with a fresh random permutation of its
       images, its *pass order*; the class's draws walk through it, wrapping round to its start.
    2. Batch ``t`` (of ``T``) draws ``C = B / m`` distinct classes by weighted sampling without
       replacement, class ``c`` weighted by the number ``r_c`` of images it has not yet used in
       its current pass; classes with ``r_c > (T - 1 - t) m``, which the remaining batches could
       no longer use up, are drawn first. If fewer than ``C`` classes have unused images, every
       exhausted class opens a new pass first.
    3. A drawn class gives its next ``m`` images in pass order, so no image of a class repeats
       before all ``n_c`` were used, and an image repeats within a group only if ``n_c < m``: such
       a class gives all its ``n_c`` images plus ``m - n_c`` drawn uniformly *with replacement*
       from them (padding, as the Easy Positive authors' sampler pads every class; the paper's
       text instead fills the batch with further classes).

    Weighting by unused images makes the epoch visit images, not classes, uniformly: when every
    class size is a multiple of ``m`` and ``B`` divides ``N``, each labelled image appears exactly
    once per epoch (the drawn-first rule keeps the last batches feasible); otherwise nearly every
    image does. Uniform class sampling (PML's rule) repeats small classes' images and skips large
    classes' ones.

    Args:
        labels: ``(N,)`` integer class of each dataset sample, ``-1`` for unlabelled (never drawn).
        m: images per class in a batch. ``m = 1`` is allowed but the batch then has no positive
            pair, which pair and triplet losses need.
        batch_size: ``B``, a multiple of ``m``.
        seed: seed of the sampler's own generator.
        num_batches: batches per epoch; default ``N_lab // B`` with ``N_lab`` the number of
            labelled samples.
    """

    def __init__(
        self,
        labels: Tensor | np.ndarray | Sequence[int],
        m: int,
        batch_size: int,
        seed: int = 0,
        num_batches: int | None = None,
    ) -> None:
        if m < 1:
            raise ValueError(f"m (images per class) must be >= 1, got {m}")
        groups = groups_per_batch(batch_size, m)
        super().__init__(labels, batch_size, groups, seed=seed, num_batches=num_batches)
        self.m = int(m)


class ClassRatioSampler(_ClassGroupSampler):
    """Batches with a fixed number ``C`` of distinct classes, for the facility-location loss.

    Song et al. (CVPR 2017, Sec. 5) sample batches of ``B`` images whose number of unique classes
    ``C`` has a fixed ratio ``C / B`` (0.25 for CUB-200-2011 and Cars196, 0.75 for Stanford
    Online Products), so that the clustering is neither one cluster nor all singletons. E.g.
    ``B = 128``, ratio 0.25: 32 classes x 4 images.

    This is :class:`MPerClassSampler`'s construction (same epoch rule, same code) with the group
    size derived from ``C``; when ``C`` does not divide ``B`` the images are spread as evenly as
    possible: ``B mod C`` classes give ``B // C + 1`` images, the others ``B // C`` (ratio 0.75
    at ``B = 128``: 96 classes, 32 of them with 2 images and 64 with 1). With ``C | B`` it yields
    exactly the batches of ``MPerClassSampler(labels, m=B // C, batch_size=B, seed=seed)``.

    Args:
        labels: ``(N,)`` integer labels, ``-1`` for unlabelled (never drawn).
        batch_size: ``B``.
        classes_per_batch: ``C``; if ``None``, ``C = round(ratio * B)``.
        ratio: ``C / B`` when ``classes_per_batch`` is not given.
        seed: seed of the sampler's own generator.
        num_batches: batches per epoch; default ``N_lab // B``.
    """

    def __init__(
        self,
        labels: Tensor | np.ndarray | Sequence[int],
        batch_size: int,
        classes_per_batch: int | None = None,
        ratio: float = 0.25,
        seed: int = 0,
        num_batches: int | None = None,
    ) -> None:
        if classes_per_batch is None:
            if not 0.0 < ratio <= 1.0:
                raise ValueError(f"ratio = C / batch_size must be in (0, 1], got {ratio}")
            classes_per_batch = max(1, round(ratio * batch_size))
        super().__init__(labels, batch_size, classes_per_batch, seed=seed, num_batches=num_batches)
