"""``mnist``, ``fashion-mnist``, ``cifar10``: the torchvision sets of the semi-supervised (SSDML)
experiments, with their official train/test split (the same classes on both sides).

The whole set is held in memory as ``(N, C, H, W)`` float32, standardised per channel with the
mean and standard deviation of the training images (computed, not hard-coded). With
``labelled_per_class`` (e.g. 10 or 100) only that many training images per class keep a label;
the rest form ``DatasetSplits.unlabelled``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor
from torchvision.datasets import CIFAR10, MNIST, FashionMNIST, VisionDataset

from dmlnb.data.base import DatasetSplits, InMemoryDataset
from dmlnb.data.registry import missing_files_error, register_dataset
from dmlnb.data.semisup import semi_supervised

__all__ = ["to_float_images", "standardise"]


class _Source(NamedTuple):
    cls: type[VisionDataset]
    folder: str  # where torchvision keeps the files, relative to the data root
    url: str


_SOURCES = {
    "mnist": _Source(
        MNIST,
        "MNIST/raw",
        "http://yann.lecun.com/exdb/mnist/ (torchvision mirror "
        "https://ossci-datasets.s3.amazonaws.com/mnist/)",
    ),
    "fashion-mnist": _Source(
        FashionMNIST, "FashionMNIST/raw", "https://github.com/zalandoresearch/fashion-mnist"
    ),
    "cifar10": _Source(
        CIFAR10, "cifar-10-batches-py", "https://www.cs.toronto.edu/~kriz/cifar.html"
    ),
}


def to_float_images(data: Tensor | np.ndarray) -> Tensor:
    """uint8 images ``(N, H, W)`` or ``(N, H, W, C)`` -> float32 ``(N, C, H, W)`` in [0, 1]."""
    x = torch.as_tensor(data)
    if x.dtype != torch.uint8 or x.dim() not in (3, 4):
        raise ValueError(
            f"expected uint8 (N, H, W) or (N, H, W, C), got {x.dtype} {tuple(x.shape)}"
        )
    x = x.unsqueeze(1) if x.dim() == 3 else x.permute(0, 3, 1, 2)  # (N, C, H, W)
    return x.float().div_(255.0).contiguous()


def standardise(train: Tensor, test: Tensor) -> tuple[Tensor, Tensor]:
    """Subtract the per-channel mean of ``train`` ``(N, C, H, W)`` and divide by its standard
    deviation; the same affine map is applied to ``test`` ``(M, C, H, W)``."""
    mean = train.mean(dim=(0, 2, 3), keepdim=True, dtype=torch.float64)  # (1, C, 1, 1)
    std = train.double().std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-12)  # (1, C, 1, 1)
    mean, std = mean.float(), std.float()
    return (train - mean) / std, (test - mean) / std


def _load(
    name: str, root: Path, labelled_per_class: int | None, seed: int, download: bool
) -> DatasetSplits:
    source = _SOURCES[name]
    expected = root / source.folder
    if not download and not expected.is_dir():
        raise missing_files_error(name, expected, source.url, downloadable=True)
    train_set = source.cls(str(root), train=True, download=download)
    test_set = source.cls(str(root), train=False, download=download)
    train_x, test_x = standardise(to_float_images(train_set.data), to_float_images(test_set.data))
    splits = DatasetSplits(
        name,
        train=InMemoryDataset(train_x, torch.as_tensor(train_set.targets)),
        test=InMemoryDataset(test_x, torch.as_tensor(test_set.targets)),
        class_names={"train": list(train_set.classes), "test": list(test_set.classes)},
    )
    if labelled_per_class is not None:
        splits = semi_supervised(splits, labelled_per_class, seed)
    return splits


@register_dataset("mnist")
def load_mnist(
    root: Path, *, labelled_per_class: int | None = None, seed: int = 0, download: bool = False
) -> DatasetSplits:
    """MNIST, 60,000 / 10,000 images ``(1, 28, 28)``; files in ``<root>/MNIST/raw``."""
    return _load("mnist", root, labelled_per_class, seed, download)


@register_dataset("fashion-mnist")
def load_fashion_mnist(
    root: Path, *, labelled_per_class: int | None = None, seed: int = 0, download: bool = False
) -> DatasetSplits:
    """Fashion-MNIST, 60,000 / 10,000 images ``(1, 28, 28)``; files in
    ``<root>/FashionMNIST/raw``."""
    return _load("fashion-mnist", root, labelled_per_class, seed, download)


@register_dataset("cifar10")
def load_cifar10(
    root: Path, *, labelled_per_class: int | None = None, seed: int = 0, download: bool = False
) -> DatasetSplits:
    """CIFAR-10, 50,000 / 10,000 images ``(3, 32, 32)``; files in ``<root>/cifar-10-batches-py``."""
    return _load("cifar10", root, labelled_per_class, seed, download)
