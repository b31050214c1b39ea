"""Normalised softmax loss (Zhai & Wu, "Classification is a Strong Baseline for Deep Metric
Learning", BMVC 2019)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dmlnb.losses.base import MetricLoss
from dmlnb.pairs import PairMasks, gram, l2_normalize

__all__ = ["NormalizedSoftmaxLoss"]


class NormalizedSoftmaxLoss(MetricLoss):
    r"""Cross-entropy over temperature-scaled cosine similarities to learnable class weights.

    With class weights :math:`W \in \mathbb{R}^{C \times D}` (a parameter of the loss: pass
    ``loss.parameters()`` to the optimiser) and temperature :math:`T`,

    .. math::

        \mathcal{L} = -\frac{1}{B} \sum_{i=1}^{B}
            \log \frac{\exp(\cos(x_i, w_{y_i}) / T)}{\sum_{c=1}^{C} \exp(\cos(x_i, w_c) / T)} .

    Both embeddings and weights are L2-normalised, so the logits are bounded by :math:`1/T`.
    Equals pytorch-metric-learning's ``NormalizedSoftmaxLoss`` (which stores :math:`W^\top`)
    with the same weights. Weights are initialised from a standard normal (PML's default; the
    scale is irrelevant after normalisation). Labels must be class indices in ``[0, C)``.
    Defined for every batch (a single class or a single sample included): it needs no pairs.

    Args:
        num_classes: :math:`C`, the number of training classes.
        embedding_dim: :math:`D`, the embedding size.
        temperature: :math:`T` (0.05, Zhai & Wu's value and PML's default).

    Shapes: ``embeddings (B, D)``, ``labels (B,)`` -> scalar; ``weight (C, D)``.
    """

    class_parameters = "one weight row per class"
    uses_pair_masks = False

    def __init__(self, num_classes: int, embedding_dim: int, temperature: float = 0.05) -> None:
        super().__init__()
        if num_classes < 1 or embedding_dim < 1:
            raise ValueError(
                f"num_classes and embedding_dim must be >= 1, got {num_classes}, {embedding_dim}"
            )
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.num_classes = num_classes
        self.embedding_dim = embedding_dim
        self.temperature = float(temperature)
        self.weight = nn.Parameter(torch.randn(num_classes, embedding_dim))  # (C, D)

    def compute(self, embeddings: Tensor, labels: Tensor, masks: PairMasks | None) -> Tensor:
        x = l2_normalize(embeddings)  # (B, D)
        w = F.normalize(self.weight, dim=1).to(embeddings.dtype)  # (C, D)
        logits = gram(x, w) / self.temperature  # (B, C)
        return F.cross_entropy(logits, labels)
