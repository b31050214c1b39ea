"""Base class of every batch loss in :mod:`dmlnb.losses`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from dmlnb.checks import check_batch, check_finite_loss
from dmlnb.pairs import PairMasks, pair_masks

__all__ = [
    "MetricLoss",
    "zero_loss",
    "check_pair_filter",
    "check_choices",
    "DISTANCES",
    "REDUCTIONS",
]

#: The distances of the losses on pairwise distances (contrastive, triplet): Euclidean, or its
#: square.
DISTANCES = ("euclidean", "squared")
#: Their reductions: the mean over the terms > 0 (PML's ``AvgNonZeroReducer``) or over all.
REDUCTIONS = ("nonzero", "mean")


def zero_loss(embeddings: Tensor) -> Tensor:
    """A scalar 0 that stays attached to the graph (``backward`` works, gradients are 0).

    Multiplies before summing, so a batch whose sum overflows (huge finite rows) still gives 0,
    not ``inf * 0 = nan``.
    """
    return (embeddings * 0.0).sum()


def check_choices(**choices: tuple[object, tuple[object, ...]]) -> None:
    """Raise ``ValueError`` ("<name> must be one of <allowed>, got <value>") for the first
    ``name=(value, allowed)`` whose ``value`` is not one of ``allowed``; a loss's string options."""
    for name, (value, allowed) in choices.items():
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def check_pair_filter(pair_filter: Tensor, embeddings: Tensor) -> None:
    """Raise a clear error unless ``pair_filter`` is a ``(B, B)`` bool tensor on the device of
    ``embeddings`` ``(B, D)``."""
    if not isinstance(pair_filter, Tensor):
        raise TypeError(
            f"pair_filter must be a torch.Tensor (B, B) of bool, got {type(pair_filter).__name__}"
        )
    B = embeddings.shape[0]
    if pair_filter.dtype != torch.bool:
        raise TypeError(
            f"pair_filter must have dtype torch.bool, got {pair_filter.dtype}; pass a boolean "
            "mask (e.g. `mask > 0` or `mask.bool()`)"
        )
    if tuple(pair_filter.shape) != (B, B):
        raise ValueError(
            f"pair_filter must have shape (B, B) = ({B}, {B}) for a batch of {B}, got "
            f"{tuple(pair_filter.shape)}"
        )
    if pair_filter.device != embeddings.device:
        raise ValueError(
            f"pair_filter is on {pair_filter.device} but the embeddings on {embeddings.device}; "
            "move it with .to(embeddings.device)"
        )


class MetricLoss(nn.Module):
    """A loss on a labelled batch:
    ``loss(embeddings (B, D), labels (B,), pair_filter=None) -> scalar``.

    Subclasses implement :meth:`compute` ``(embeddings, labels, masks)``. :meth:`forward`
    validates the batch first (:func:`dmlnb.checks.check_batch`: embeddings ``(B, D)`` floating
    point with ``B, D >= 1`` and ``D == embedding_dim`` for a loss that fixes it; integer labels
    ``(B,)`` on the same device; then, in one host synchronisation, finite embeddings and labels
    ``>= 0`` -- ``-1``, "unlabelled", is rejected: filter unlabelled samples out first -- and
    ``< num_classes`` for a loss with per-class parameters), builds the batch's
    :class:`~dmlnb.pairs.PairMasks` when the loss reads them (:attr:`uses_pair_masks`; the others
    get ``masks=None``, so a proxy or centroid loss does no ``(B, B)`` work) and checks the result
    is finite, so a diverging run fails loudly at the step it diverges. The value checks and the
    finite-loss check each cost one host read; inside :func:`dmlnb.checks.deferred_checks` (the
    training loop on a GPU) they cost none and are read back with the loss every ``k`` steps.
    An empty batch is a ``ValueError``. A batch for which the loss has no term (e.g. no positive
    pair) returns a graph-attached 0 and never NaN. Losses with learnable state (proxies, centres,
    a margin boundary) are ``nn.Module`` parameters: pass ``loss.parameters()`` to the optimiser
    (the training loop does).

    **Pair filter** (explicit, per call; the module keeps no state about it).
    ``pair_filter`` is an optional ``(B, B)`` bool mask of the ordered pairs ``(i, j)`` the loss
    may use (row ``i``: the anchor / first element, column ``j``: the second element). The masks
    passed to :meth:`compute` are ``pair_masks(labels)`` intersected with it:
    ``positive & pair_filter`` and ``negative & pair_filter``. With ``pair_filter=None`` they are
    ``pair_masks(labels)`` and the loss is exactly the unfiltered one.

    * **Pair-based losses** (``supports_pair_filter = True``: contrastive, triplet, lifted,
      margin, multi-similarity, angular, N-pair, easy positive) take *every* pair they use from
      ``masks`` and never call :func:`~dmlnb.pairs.pair_masks` themselves, so a filtered pair
      contributes no term (and, where the loss is a sum over pairs, no gradient). Each loss's
      docstring says how a filtered pair enters its formula.
    * **Other losses** (proxy / centre / classifier based: ProxyNCA, SoftTriple, softmax,
      discriminative, facility location; ``supports_pair_filter = False``,
      ``uses_pair_masks = False``) receive ``masks=None``; a ``pair_filter`` given to them raises
      ``ValueError`` ("<Loss> does not support pair_filter").
    """

    #: Whether :meth:`compute` takes its pairs from ``masks`` (and so honours a pair filter).
    supports_pair_filter: bool = False
    #: Whether :meth:`compute` reads ``masks`` at all; ``False``: :meth:`forward` does not build the
    #: ``(B, B)`` masks and passes ``None`` (a loss that supports a pair filter must read them).
    uses_pair_masks: bool = True
    #: Embedding width a loss with per-class vectors (proxies, centres) requires; ``None``: any.
    embedding_dim: int | None = None
    #: Number of classes of a loss with per-class parameters (labels in ``[0, C)``); ``None``:
    #: any label ``>= 0``.
    num_classes: int | None = None
    #: What the per-class parameters are, for the label-range error message.
    class_parameters: str = "one parameter row per class"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.supports_pair_filter and not cls.uses_pair_masks:
            raise TypeError(
                f"{cls.__name__}: a loss that supports pair_filter must use the pair masks"
            )

    def forward(
        self, embeddings: Tensor, labels: Tensor, pair_filter: Tensor | None = None
    ) -> Tensor:
        check_batch(
            embeddings,
            labels,
            self.embedding_dim,
            self.num_classes,
            type(self).__name__,
            self.class_parameters,
        )
        if self.num_classes is not None:
            # A no-op for checked labels; when the check is deferred (a GPU step), a bad label is
            # reported at the next read and must not index a parameter row out of range first.
            labels = labels.clamp(0, self.num_classes - 1)  # (B,)
        masks = pair_masks(labels) if self.uses_pair_masks else None  # (B, B) x 2
        if pair_filter is not None:
            if not self.supports_pair_filter:
                raise ValueError(
                    f"{type(self).__name__} does not support pair_filter: it is not built on the "
                    "batch's pairs; call it without pair_filter"
                )
            check_pair_filter(pair_filter, embeddings)
            assert masks is not None  # supports_pair_filter implies uses_pair_masks
            masks = PairMasks(
                positive=masks.positive & pair_filter, negative=masks.negative & pair_filter
            )
        loss = self.compute(embeddings, labels, masks)
        check_finite_loss(loss, type(self).__name__)
        return loss

    def compute(
        self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None
    ) -> Tensor:  # pragma: no cover
        """The loss of ``embeddings (B, D)`` with ``labels (B,)`` on the pairs of ``masks``
        (``None`` when :attr:`uses_pair_masks` is ``False``)."""
        raise NotImplementedError
