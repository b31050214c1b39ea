"""Multi-class N-pair loss (Sohn, NeurIPS 2016), and the all-pairs form of Song et al. (2017).

Two ways of taking the pairs of a batch (``pairs=``), both with dot products
:math:`S_{ij} = f_i^\top f_j`, and two forms of the L2 penalty on the embeddings (``penalty=``):
Sohn's on the squared norms (``"squared"``, the default) or Song et al.'s Eq. 3 on the norms
themselves (``"norm"``):

* ``"first"`` (the default): Sohn's N-pair-mc loss (Sohn 2016, Sec. 3.2), defined on batches of
  ``N`` pairs :math:`(x_i, x_i^+)` of ``N`` distinct classes: each anchor :math:`x_i` is
  contrasted with the positives :math:`x_j^+` of the other pairs. Here the pair of a class is
  its first allowed positive pair (:func:`first_pair_per_class`). On Sohn's *paired batches*
  (two images per class: :class:`dmlnb.samplers.MPerClassSampler` with ``m=2``, or
  :class:`~dmlnb.samplers.ClassRatioSampler` with ``C / B = 0.5``) that is every image of the
  batch, and the loss is the paper's. With ``m > 2`` images per class only the first two of each
  class enter the loss, the others only the penalty (pytorch-metric-learning's convention).
* ``"all"`` (the option): every ordered positive pair of the batch is a term, its negatives
  every image of another class: the N-pairs loss as the facility-location paper writes it for
  its baseline (Song et al., CVPR 2017, Eq. 3), on batches with more than two images per class
  (``C / m = 0.25``: four per class). It is also the Easy Positive paper's NCA form (Sec. 2.2)
  without temperature or normalisation. Even on paired batches it is not ``"first"``: it has
  ``2N`` terms (both orders of every pair) with ``2N - 2`` negatives each, where Sohn's has
  ``N`` terms with ``N - 1``.

Which of the book's chapters trains which is listed in :class:`NPairLoss`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.losses.base import MetricLoss, check_choices
from dmlnb.pairs import PairMasks, gram, indexed_cosine_similarity, l2_normalize, pair_masks

__all__ = ["NPairLoss", "first_pair_per_class", "class_pair_slots", "PAIRINGS", "PENALTIES"]

#: How :class:`NPairLoss` takes the pairs of a batch: Sohn's one pair per class (default), or
#: every positive pair (Song et al. 2017, Eq. 3).
PAIRINGS = ("first", "all")
#: What :class:`NPairLoss`'s L2 penalty averages over the batch: Sohn's squared norm
#: ``||f||_2^2`` (default), or the norm ``||f||_2`` of Song et al. (2017), Eq. 3.
PENALTIES = ("squared", "norm")


def first_pair_per_class(labels: Tensor, positive: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One positive pair per class: the first ``True`` entry of ``positive`` ``(B, B)`` in
    row-major order among the pairs whose anchor (row) has that class.

    ``positive`` defaults to ``pair_masks(labels).positive``: then the pair is the first two batch
    items of each class with >= 2 items, deterministic in batch order as in
    pytorch-metric-learning's ``NPairsLoss``. Returns ``anchors (N,)`` and ``positives (N,)``,
    ordered by label; a class without an allowed positive pair is left out. (Compacting to ``N``
    reads the batch back to the host; the loss uses :func:`class_pair_slots`, which does not.)
    """
    anchors, positives, valid = class_pair_slots(labels, positive)  # (K,) x 3, valid slots first
    anchors, positives = anchors[valid], positives[valid]  # (N,) x 2
    by_label = torch.sort(labels[anchors], stable=True).indices  # (N,)
    return anchors[by_label], positives[by_label]


def class_pair_slots(
    labels: Tensor, positive: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`first_pair_per_class` in static shapes: ``K = max(B // 2, 1)`` slots, the ``N``
    classes with an allowed pair first (by anchor), then invalid slots.

    A class with a pair has two items, so ``N <= B // 2`` and the ``K`` slots hold every pair.
    Returns ``anchors (K,)``, ``positives (K,)`` and ``valid (K,)`` (bool; invalid slots hold an
    arbitrary in-range pair). ``O(B log B)`` work on ``(B,)`` vectors after one pass over
    ``positive``; no host read.
    """
    if positive is None:
        positive = pair_masks(labels).positive  # (B, B)
    B = labels.shape[0]
    flags = positive.view(torch.uint8)  # (B, B) 0 / 1: reductions over uint8 are fast
    has_pair = flags.amax(dim=1)  # (B,) 1 where row i has an allowed pair
    sorted_labels, order = torch.sort(labels, stable=True)  # (B,) x 2: batch order within a class
    start = torch.searchsorted(sorted_labels, sorted_labels)  # (B,) where k's class starts
    row = order.masked_fill(has_pair[order] == 0, B)  # (B,) the row at k if it has a pair, else B
    # (B,) at each class's start its first row with a pair; B: none, or no class starts there
    first_row = torch.full_like(start, B).scatter_reduce_(0, start, row, "amin")
    anchors = torch.sort(first_row).values[: max(B // 2, 1)]  # (K,) the N anchors, then B
    valid = anchors < B  # (K,)
    anchors = anchors.clamp_max(B - 1)  # (K,)
    # argmax: the index of the first maximum, i.e. each anchor's first allowed pair (a, p)
    return anchors, flags.index_select(0, anchors).argmax(dim=1), valid


class NPairLoss(MetricLoss):
    r"""N-pair loss with Sohn's L2 embedding penalty: Sohn's N-pair-mc (``pairs="first"``,
    default) or every positive pair (``pairs="all"``, Song et al. 2017, Eq. 3).

    ``pairs="first"``: from the batch, ``N`` pairs :math:`(x_i, x_i^+)` of distinct classes
    (:func:`first_pair_per_class` on the allowed positive pairs); each anchor is contrasted with
    the positives of the other pairs (Sohn 2016, N-pair-mc):

    .. math::

        \mathcal{L} = \frac{1}{N} \sum_{i=1}^{N}
            \log\Big(1 + \sum_{j \ne i} \exp(f_i^\top f_j^+ - f_i^\top f_i^+)\Big)
            + \lambda \frac{1}{B} \sum_{b=1}^{B} \lVert f_b \rVert_2^2 ,

    i.e. softmax cross-entropy over the ``(N, N)`` logits :math:`f_i^\top f_j^+` with target
    ``i``. On paired batches (two images per class, ``B = 2N``) every image is in a pair: the
    paper's loss. With ``l2_reg=0, normalize=True`` this is pytorch-metric-learning's
    ``NPairsLoss`` (cosine logits).

    ``pairs="all"``: every ordered positive pair :math:`(i, j) \in P` (``i != j``, same class)
    is a term whose negatives are all images :math:`k` of other classes (Song et al. 2017, Eq. 3):

    .. math::

        \mathcal{L} = \frac{1}{|P|} \sum_{(i, j) \in P}
            \log\Big(1 + \sum_{k:\, y_k \ne y_i} \exp(f_i^\top f_k - f_i^\top f_j)\Big)
            + \lambda \frac{1}{B} \sum_{b=1}^{B} \lVert f_b \rVert_2^2 .

    Every image of a class with two or more images enters. An anchor without negatives
    contributes :math:`\log 1 = 0` per positive.

    The penalty: ``penalty="squared"`` (default) is Sohn's, on the squared L2 norm of the
    (unnormalised) embeddings, :math:`\lambda \frac{1}{B} \sum_b \lVert f_b \rVert_2^2` as
    above (Sohn states no normalisation constant; here it is the mean over the ``B`` batch
    embeddings); ``penalty="norm"`` is Song et al.'s Eq. 3, on the unsquared norm,
    :math:`\frac{\lambda}{m} \sum_{i=1}^{m} \lVert f_i \rVert_2` with ``m = B`` (its subgradient at
    ``f = 0`` is taken as 0). Eq. 3 as written is ``pairs="all", penalty="norm"``. A batch
    without a positive pair gives 0 (and no penalty).

    The book's chapters build it through :func:`dmlnb.experiments.baseline_losses.npair`:
    PROFS trains ``"first"`` on paired batches (two images per class: Sohn's loss) and the
    discriminative-loss chapter ``"first"`` on eight per class, where two images of each class
    enter the loss; the facility-location chapter trains its paper's Eq. 3, ``pairs="all",
    penalty="norm"``, on its ``C / m = 0.25`` batches (four per class) and on paired batches.
    (The Easy Positive chapter's "N-pair" is its own NCA loss at group size 2, not this class.)

    Args:
        l2_reg: :math:`\lambda` (0.02, the value used by common PyTorch ports of the paper).
        normalize: L2-normalise the embeddings before the dot products (PML default ``True``;
            the paper uses ``False`` and relies on the penalty). The penalty always acts on
            the raw embeddings.
        pairs: ``"first"`` (default) or ``"all"``, above.
        penalty: ``"squared"`` (default, Sohn's) or ``"norm"`` (Eq. 3 of Song et al.), above.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: ``"first"``: per class the first allowed positive pair ``(a, p)`` in row-major
    order; anchor ``a_i`` is contrasted with ``p_j`` only if ``(a_i, p_j)`` is an allowed
    negative pair. ``"all"``: the allowed positive pairs are the terms, each anchor's allowed
    negative pairs its negatives.
    """

    supports_pair_filter = True

    def __init__(
        self,
        l2_reg: float = 0.02,
        normalize: bool = False,
        pairs: str = "first",
        penalty: str = "squared",
    ) -> None:
        super().__init__()
        if l2_reg < 0:
            raise ValueError(f"l2_reg must be >= 0, got {l2_reg}")
        check_choices(pairs=(pairs, PAIRINGS), penalty=(penalty, PENALTIES))
        self.l2_reg = float(l2_reg)
        self.normalize = normalize
        self.pairs = pairs
        self.penalty = penalty

    def extra_repr(self) -> str:
        return (
            f"l2_reg={self.l2_reg}, normalize={self.normalize}, pairs={self.pairs!r}, "
            f"penalty={self.penalty!r}"
        )

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        if self.pairs == "all":
            x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
            loss, terms = self._all_pairs(x, masks)
        else:
            loss, terms = self._first_pairs(embeddings, labels, masks, self.normalize)
        if self.l2_reg == 0.0:  # no 0 * inf = NaN from a huge (finite) raw norm
            return loss
        norms = (
            embeddings.norm(dim=1) if self.penalty == "norm" else embeddings.pow(2).sum(dim=1)
        )  # (B,)
        penalty = self.l2_reg * norms.mean()
        return torch.where(terms > 0, loss + penalty, loss)  # no pair: 0, no penalty

    @staticmethod
    def _first_pairs(
        x: Tensor, labels: Tensor, masks: PairMasks, normalize: bool
    ) -> tuple[Tensor, Tensor]:
        r"""Sohn's N-pair-mc term (mean over the ``N`` class pairs) and ``N``, as a cross-entropy
        over the ``(K, K)`` slot logits :math:`f_{a_i}^\top f_{p_j}` (cosines with
        ``normalize``) with target ``i``, for the valid slots ``i``."""
        anchors, positives, valid = class_pair_slots(labels, masks.positive)  # (K,) x 3, N valid
        if normalize:
            logits = indexed_cosine_similarity(x, anchors, positives)  # (K, K)
        else:
            logits = gram(x.index_select(0, anchors), x.index_select(0, positives))  # (K, K)
        # usable: allowed (a_i, p_j) with slot j valid, and the target p_i
        rows = masks.negative.index_select(0, anchors)  # (K, B); a row gather, then a column one
        usable = rows.gather(1, positives.expand(len(positives), -1)) & valid  # (K, K)
        usable.fill_diagonal_(True)
        logits = logits.masked_fill(~usable, float("-inf"))  # (K, K)
        slots = torch.arange(len(anchors), device=x.device)  # (K,)
        target = slots.masked_fill(~valid, -100)  # (K,) an invalid slot is ignored
        total = F.cross_entropy(logits, target, ignore_index=-100, reduction="sum")
        count = valid.sum()  # N
        return total / count.clamp_min(1), count  # mean over the N slots; 0 if none

    @staticmethod
    def _all_pairs(x: Tensor, masks: PairMasks) -> tuple[Tensor, Tensor]:
        """Eq. 3 of Song et al.: the mean over the ``|P|`` positive pairs of
        ``softplus(logsumexp_{k in N(i)} S_ik - S_ij)``, and ``|P|``."""
        s = gram(x)  # (B, B)
        has_neg = masks.negative.any(dim=1, keepdim=True)  # (B, 1)
        neg_logits = s.masked_fill(~masks.negative, float("-inf"))  # (B, B)
        neg_logits = neg_logits.masked_fill(~has_neg, 0.0)  # no all -inf row (NaN gradient)
        lse = torch.logsumexp(neg_logits, dim=1, keepdim=True)  # (B, 1)
        per_pair = F.softplus(lse - s)  # (B, B) [i, j]: log(1 + sum_k exp(S_ik - S_ij))
        keep = masks.positive & has_neg  # (B, B); a term without negatives is log 1 = 0
        total = per_pair.masked_fill(~keep, 0.0).sum()  # every entry finite: NaN-free gradient
        count = masks.positive.sum()  # |P|
        return total / count.clamp_min(1), count
