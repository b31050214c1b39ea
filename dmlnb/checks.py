"""Input checks shared by every tensor entry point (losses, miners, evaluation, samplers, pairs).

Two kinds of check, kept apart so that the checks of one call cost at most **one** host
synchronisation (a loss's own work, e.g. its finite-loss check, may add others):

* **metadata** checks (:func:`check_embeddings`, :func:`check_labels`, :func:`check_square`)
  read only ``shape``, ``dtype`` and ``device``: free, run them anywhere;
* **value** checks (:func:`check_values`) need to read the data: non-finite embeddings, negative
  labels, labels outside a per-class loss's range. All of them are reduced, in a few operators,
  to one number that is 0 iff they pass, read once; which check failed is worked out only on
  the error path.

**Deferred value checks.** Inside :func:`deferred_checks` (the training loop enters it on a GPU)
a value check does not read its flag: it folds it into a device-side "first failing step" and
keeps the checked tensors; :meth:`DeferredChecks.raise_if_failed` reads that one number (the loop
reads it with the loss, every ``k`` steps) and, when a step failed, replays that step's checks so
the error is the same one an immediate check raises. So a training step on a GPU never waits for
the host, and a bad batch still stops the run with the named error, at most ``k - 1`` steps late.

Every error names the argument, the offending value and the fix. A bad dtype or shape is a
``ValueError``; NaN / Inf embeddings raise :class:`NonFiniteError`, which is both a
``FloatingPointError`` (what a diverging training step raises) and a ``ValueError``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import torch
from torch import Tensor

__all__ = [
    "NonFiniteError",
    "check_embeddings",
    "check_labels",
    "check_values",
    "check_batch",
    "check_class_labels",
    "check_square",
    "DeferredChecks",
    "deferred_checks",
    "check_finite_loss",
]

UNLABELLED_HINT = (
    "-1 marks an unlabelled sample (dmlnb's semi-supervised splits) and is not a class: filter "
    "unlabelled samples out first (keep = labels >= 0)"
)


class NonFiniteError(FloatingPointError, ValueError):
    """Embeddings contain NaN or Inf (a ``FloatingPointError`` and a ``ValueError``)."""


def _shape(x: object) -> object:
    return tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__


def check_embeddings(
    x: Tensor, name: str = "embeddings", dim: int | None = None, owner: str | None = None
) -> None:
    """Metadata checks of an embedding matrix ``(N, D)``: a floating-point 2-D tensor with
    ``N >= 1`` rows and ``D >= 1`` columns (``D == dim`` when ``dim`` is given; ``owner`` names
    the object that fixed ``dim``, e.g. a proxy loss). No host synchronisation."""
    if not isinstance(x, Tensor) or x.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D tensor (N, D), got {_shape(x)}; flatten or pool the model "
            "output to one row per sample"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor, got dtype {x.dtype}; convert with .float()"
        )
    n, d = x.shape
    if n == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(x.shape)}, 0 rows): pass at least one sample (skip "
            "empty batches, check the split is not empty)"
        )
    if d == 0:
        raise ValueError(
            f"{name} have width 0 (shape {tuple(x.shape)}): an embedding needs D >= 1 "
            "dimensions; check the model's output layer"
        )
    if dim is not None and d != dim:
        if owner is None:
            raise ValueError(
                f"{name} have width {d} (shape {tuple(x.shape)}) but the other operand has "
                f"width {dim}; embed both with the same model"
            )
        raise ValueError(
            f"{name} have width {d} (shape {tuple(x.shape)}) but {owner} has embedding_dim={dim}; "
            f"build {owner} for width {d} (the model's output size: its embedding_dim, or "
            f"centroids with {d} columns) or project the features to {dim} dimensions"
        )


def check_labels(
    labels: Tensor,
    n: int | None,
    name: str = "labels",
    device: torch.device | None = None,
    of: str = "embedding",
) -> None:
    """Metadata checks of integer labels ``(N,)``: one per row of ``n`` ``of`` (any length when
    ``n`` is ``None``), on ``device`` when given. No host synchronisation."""
    if not isinstance(labels, Tensor) or labels.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor (N,), got {_shape(labels)}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(
            f"{name} must be integers (class ids), got dtype {labels.dtype}; convert with "
            ".long() (bool masks are not labels)"
        )
    if n is not None and labels.shape[0] != n:
        raise ValueError(
            f"{name} has {labels.shape[0]} entries for {n} {of}s; pass exactly one label per {of}"
        )
    if device is not None and labels.device != device:
        raise ValueError(
            f"{name} are on {labels.device} but the embeddings on {device}; move them with "
            ".to(embeddings.device)"
        )


def check_square(matrix: Tensor, name: str, masks: tuple[Tensor, ...] = ()) -> None:
    """Metadata checks of a non-empty ``(B, B)`` pair matrix and of masks of the same shape."""
    if not isinstance(matrix, Tensor) or matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be a square (B, B) matrix, got {_shape(matrix)}")
    if matrix.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape (0, 0)): the batch has no sample")
    for mask in masks:
        if tuple(mask.shape) != tuple(matrix.shape):
            raise ValueError(
                f"pair masks of shape {tuple(mask.shape)} do not match {name} of shape "
                f"{tuple(matrix.shape)}; build them from the same batch (dmlnb.pairs.pair_masks)"
            )


def check_values(
    embeddings: Tensor | None,
    labels: Tensor | None = None,
    *,
    num_classes: int | None = None,
    allow_unlabelled: bool = False,
    name: str = "embeddings",
    label_name: str = "labels",
    what: str = "one parameter row per class",
) -> None:
    """Value checks, one host synchronisation in all: ``embeddings`` finite; ``labels``
    ``>= 0`` (``>= -1`` with ``allow_unlabelled``) and, with ``num_classes``, ``< num_classes``.

    Run the metadata checks first (they guarantee shapes, dtypes and a shared device).
    """
    kept = embeddings.detach() if embeddings is not None else None  # no graph kept alive
    # Every check folded into one 0-d value: 0 * x sums to 0, or to NaN iff an embedding is NaN
    # or Inf; "lowest label - floor" and "num_classes - 1 - highest label" are < 0 iff a label is
    # out of range. Their minimum (NaN propagates) is 0 iff all pass.
    parts: list[Tensor] = []
    if kept is not None:
        parts.append((kept * 0).sum())  # () 0, NaN iff not finite
    if labels is not None and labels.numel() > 0:
        if num_classes is None:
            lo = labels.min()  # ()
        else:
            lo, hi = labels.aminmax()  # () x 2
            parts.append((num_classes - 1) - hi)  # () < 0 iff a label >= num_classes
        parts.append(lo + 1 if allow_unlabelled else lo)  # () < 0 iff a label is below the floor
    if not parts:
        return
    worst = parts[0]
    for part in parts[1:]:
        worst = torch.minimum(worst, part)  # ()
    if kept is None:
        worst = worst.clamp_max(0)  # () what the embeddings' 0 does otherwise
    deferred = _DEFERRED.get()  # worst: 0 iff every check passes (non-zero or NaN otherwise)
    if deferred is not None:
        deferred.add(
            worst,
            lambda: check_values(
                kept,
                labels,
                num_classes=num_classes,
                allow_unlabelled=allow_unlabelled,
                name=name,
                label_name=label_name,
                what=what,
            ),
        )
        return
    if not bool(worst != 0):  # the one read; NaN != 0
        return
    if embeddings is not None and not bool(torch.isfinite(embeddings).all()):
        bad = int((~torch.isfinite(embeddings)).any(dim=1).sum())
        raise NonFiniteError(
            f"{name} contain NaN or Inf in {bad} of {embeddings.shape[0]} rows: the network "
            "diverged or its input had NaN; lower the learning rate, clip gradients, or check "
            "the input normalisation"
        )
    assert labels is not None
    lo, hi = int(labels.min()), int(labels.max())
    if num_classes is not None:
        check_class_labels(labels, num_classes, what)
    if allow_unlabelled:
        raise ValueError(
            f"{label_name} must be >= 0, or -1 for an unlabelled sample; got {lo}: remap the "
            "class ids to 0..L-1"
        )
    n_neg = int((labels < 0).sum())
    raise ValueError(
        f"{label_name} contain negative values ({n_neg} of {labels.numel()}, min {lo}, max "
        f"{hi}); class ids must be >= 0. {UNLABELLED_HINT}, and remap the classes to 0..C-1"
    )


def check_class_labels(
    labels: Tensor, num_classes: int, what: str = "one parameter row per class"
) -> None:
    """Raise a clear error unless every label lies in ``[0, num_classes)`` (losses with per-class
    parameters: proxies, centres, centroids, class weights, per-class margins)."""
    if labels.numel() == 0:
        return
    lo, hi = int(labels.min()), int(labels.max())
    if lo < 0 or hi >= num_classes:
        hint = f"; {UNLABELLED_HINT}" if lo < 0 else ""
        raise ValueError(
            f"labels must lie in [0, num_classes={num_classes}) ({what}), got range [{lo}, {hi}]; "
            f"remap the labels to 0..C-1 (dmlnb.data does per split) or raise num_classes{hint}"
        )


def check_batch(
    embeddings: Tensor,
    labels: Tensor,
    dim: int | None = None,
    num_classes: int | None = None,
    owner: str | None = None,
    what: str = "one parameter row per class",
) -> None:
    """Every check of a loss's batch: embeddings ``(B, D)`` (``D == dim`` if given), labels
    ``(B,)`` integer on the same device, then (one host sync) finite embeddings and labels in
    ``[0, num_classes)`` (``>= 0`` when ``num_classes`` is ``None``: ``-1``, "unlabelled", is
    rejected)."""
    check_embeddings(embeddings, "embeddings", dim, owner)
    check_labels(labels, embeddings.shape[0], "labels", embeddings.device)
    check_values(embeddings, labels, num_classes=num_classes, what=what)


def check_finite_loss(loss: Tensor, owner: str) -> None:
    """Raise ``FloatingPointError`` naming ``owner`` unless the 0-d ``loss`` is finite (one host
    read; deferred inside :func:`deferred_checks`)."""
    deferred = _DEFERRED.get()
    if deferred is not None:
        kept = loss.detach()
        deferred.add(kept * 0, lambda: check_finite_loss(kept, owner))  # 0, or NaN iff not finite
        return
    if not bool(torch.isfinite(loss)):
        raise FloatingPointError(
            f"{owner} produced a non-finite loss ({loss.item()}); check the learning rate and "
            "the loss's scale/temperature settings"
        )


class DeferredChecks:
    """Value checks collected on the device and read back in one go (see the module docstring).

    ``step`` is set by the caller before each step's work; :meth:`add` keeps a failed-flag and
    the immediate check that explains it (no device work at all); :meth:`failed_step` folds the
    flags kept since the last read into one number, which the caller reads (:meth:`raise_for`)
    or :meth:`raise_if_failed` reads.
    """

    def __init__(self, device: torch.device) -> None:
        self.step = 0
        self.device = torch.device(device)
        self._kept: list[tuple[Tensor, int, Callable[[], None]]] = []  # (flag, step, replay)

    def add(self, failed: Tensor, replay: Callable[[], None]) -> None:
        """Keep a 0-d ``failed`` flag of the current step and the check that raises on it. The
        flag is a bool, or any number that is non-zero or NaN iff the check failed (so a check
        spends no operator on turning its value into a bool: :meth:`failed_step` does that for
        all of them at the read). The replay keeps the checked tensors alive until the next read
        (detach them first when they carry a graph)."""
        self._kept.append((failed, self.step, replay))

    def failed_step(self) -> Tensor:
        """The first failing step since the last read, ``-1`` if none: a 0-d long tensor on the
        device, so a caller can read it together with other values (:meth:`raise_for`)."""
        if not self._kept:
            return torch.full((), -1, dtype=torch.long, device=self.device)
        flags = (
            torch.stack([f.to(self.device) for f, _, _ in self._kept]) != 0
        )  # (K,) bool; NaN != 0
        steps = torch.tensor([s for _, s, _ in self._kept]).to(
            self.device, non_blocking=True
        )  # (K,)
        return torch.where(flags.any(), steps[flags.to(torch.uint8).argmax()], -1)  # first failing

    def raise_for(self, first_bad: int) -> None:
        """Given the value of :meth:`failed_step` read by the caller: forget the kept checks and,
        when a step failed, raise its check's error (the immediate check's message)."""
        kept, self._kept = self._kept, []
        if first_bad < 0:
            return
        token = _DEFERRED.set(None)  # replay as immediate checks
        try:
            for _, step, replay in kept:
                if step == first_bad:
                    replay()  # raises the named error
        finally:
            _DEFERRED.reset(token)
        raise FloatingPointError(f"a value check failed at step {first_bad}")  # pragma: no cover

    def raise_if_failed(self) -> None:
        """Read the first failing step (one host read) and raise its error, if any."""
        self.raise_for(int(self.failed_step()))


_DEFERRED: ContextVar[DeferredChecks | None] = ContextVar("dmlnb_deferred_checks", default=None)


@contextlib.contextmanager
def deferred_checks(checks: DeferredChecks) -> Iterator[DeferredChecks]:
    """Defer every value check (:func:`check_values`, :func:`check_finite_loss`) made inside the
    block to ``checks``; the caller must read ``checks`` (:meth:`DeferredChecks.raise_if_failed`)
    before the block's results are trusted."""
    token = _DEFERRED.set(checks)
    try:
        yield checks
    finally:
        _DEFERRED.reset(token)
