"""Seeded float64 test batches shared by the loss tests (import as ``from batches import ...``)."""

import torch


def random_batch(seed: int, batch: int, dim: int, classes: int, requires_grad: bool = True):
    """``(x (batch, dim) float64 standard normal, y (batch,) uniform in 0..classes-1)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dim, generator=g, dtype=torch.float64, requires_grad=requires_grad)
    y = torch.randint(0, classes, (batch,), generator=g)
    return x, y


def clustered_batch(seed: int, n_classes: int, per_class: int, dim: int, noise: float):
    """``per_class`` points around each of ``n_classes`` random centres, labels grouped by class."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes, dim, generator=g, dtype=torch.float64)
    y = torch.arange(n_classes).repeat_interleave(per_class)
    x = centers[y] + noise * torch.randn(len(y), dim, generator=g, dtype=torch.float64)
    return x, y
