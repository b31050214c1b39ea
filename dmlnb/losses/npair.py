"""Multi-class N-pair loss (Sohn, NeurIPS 2016)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.pairs import PairMasks, gram, l2_normalize, pair_masks
from dmlnb.losses.base import MetricLoss

__all__ = ["NPairLoss", "first_pair_per_class", "class_pair_slots"]


def first_pair_per_class(labels: Tensor, positive: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """One positive pair per class: the first ``True`` entry of ``positive`` ``(B, B)`` in
    row-major order among the pairs whose anchor (row) has that class.

    ``positive`` defaults to ``pair_masks(labels).positive``: then the pair is the first two batch
    items of each class with >= 2 items, deterministic in batch order as in
    pytorch-metric-learning's ``NPairsLoss``. Returns ``anchors (N,)`` and ``positives (N,)``,
    ordered by label; a class without an allowed positive pair is left out. (Compacting to ``N``
    reads the batch back to the host; the loss uses :func:`class_pair_slots`, which does not.)
    """
    anchors, positives, valid = class_pair_slots(labels, positive)  # (B,) x 3
    order = torch.sort(labels.masked_fill(~valid, labels.max() + 1), stable=True).indices  # (B,)
    order = order[: int(valid.sum())]  # (N,) the valid slots, by label
    return anchors[order], positives[order]


def class_pair_slots(labels: Tensor, positive: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`first_pair_per_class` in static shapes: slot ``i`` holds the pair of ``i``'s class
    when ``i`` is its class's first batch item and the class has an allowed pair.

    Returns ``anchors (B,)``, ``positives (B,)`` and ``valid (B,)`` (bool; invalid slots hold an
    arbitrary in-range pair). No host read.
    """
    if positive is None:
        positive = pair_masks(labels).positive  # (B, B)
    # max over a bool row: (any, index of the first True), the first one on every device
    has_pair, first_positive = positive.max(dim=1)  # (B,) x 2: row i's first allowed pair (i, j_i)
    same = labels[:, None] == labels  # (B, B)
    class_has_pair, first_row = (same & has_pair).max(dim=1)  # (B,) x 2: first row of i's class with a pair
    leader = same.max(dim=1).indices == torch.arange(labels.shape[0], device=labels.device)  # (B,) first of its class
    return first_row, first_positive[first_row], leader & class_has_pair


class NPairLoss(MetricLoss):
    r"""Multi-class N-pair loss, N-pair-mc (Sohn 2016), with its L2 embedding penalty.

    From the batch, ``N`` pairs :math:`(x_i, x_i^+)` of distinct classes are taken
    (:func:`first_pair_per_class` on the allowed positive pairs); each anchor is contrasted with the positives of the other
    pairs through dot products :math:`f^\top f'`:

    .. math::

        \mathcal{L} = \frac{1}{N} \sum_{i=1}^{N}
            \log\Big(1 + \sum_{j \ne i} \exp(f_i^\top f_j^+ - f_i^\top f_i^+)\Big)
            + \lambda \frac{1}{B} \sum_{b=1}^{B} \lVert f_b \rVert_2^2 ,

    i.e. softmax cross-entropy over the ``(N, N)`` logits :math:`f_i^\top f_j^+` with target
    ``i``. Sohn regularises the squared L2 norm of the (unnormalised) embeddings and states no
    normalisation constant; here it is the mean over the ``B`` batch embeddings (``B = 2N`` in
    Sohn's batches). With ``l2_reg=0, normalize=True`` this is pytorch-metric-learning's
    ``NPairsLoss`` (cosine logits). A batch without a positive pair gives 0.

    Args:
        l2_reg: :math:`\lambda` (0.02, the value used by common PyTorch ports of the paper).
        normalize: L2-normalise the embeddings before the dot products (PML default ``True``;
            the paper uses ``False`` and relies on the penalty). The penalty always acts on
            the raw embeddings.

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar.

    Pair filter: per class the first allowed positive pair ``(a, p)`` in row-major order; anchor ``a_i`` is contrasted with ``p_j`` only if ``(a_i, p_j)`` is an allowed negative pair.
    """

    supports_pair_filter = True

    def __init__(self, l2_reg: float = 0.02, normalize: bool = False) -> None:
        super().__init__()
        if l2_reg < 0:
            raise ValueError(f"l2_reg must be >= 0, got {l2_reg}")
        self.l2_reg = float(l2_reg)
        self.normalize = normalize

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks) -> Tensor:
        anchors, positives, valid = class_pair_slots(labels, masks.positive)  # (B,) x 3, N valid slots
        x = l2_normalize(embeddings) if self.normalize else embeddings  # (B, D)
        rows = anchors[:, None]  # (B, 1)
        logits = gram(x)[rows, positives]  # (B, B) slot i's anchor vs slot j's positive
        usable = masks.negative[rows, positives] & valid  # (B, B) allowed (a_i, p_j), j != i, slot j valid
        usable.fill_diagonal_(True)  # (B, B) and the target p_i
        logits = logits.masked_fill(~usable, float("-inf"))  # (B, B)
        slots = torch.arange(labels.shape[0], device=embeddings.device)  # (B,)
        per_slot = F.cross_entropy(logits, slots, reduction="none").masked_fill(~valid, 0.0)  # (B,)
        loss = per_slot.sum() / valid.sum().clamp_min(1)  # mean over the N valid slots; 0 if none
        if self.l2_reg == 0.0:  # no 0 * inf = NaN from a huge (finite) raw norm
            return loss
        penalty = self.l2_reg * embeddings.pow(2).sum(dim=1).mean()
        return torch.where(valid.any(), loss + penalty, loss)  # no pair: 0, no penalty
