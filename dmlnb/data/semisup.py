"""Semi-supervised splits: keep ``n`` labelled images per training class, hide the rest.

The SSDML protocol trains on a few labelled images per class plus the remaining training images
without labels, and evaluates on the official test split. :func:`split_labelled_per_class`
draws the labelled indices; :func:`semi_supervised` applies it to a :class:`DatasetSplits`.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from dmlnb.data.base import DatasetSplits, ImageFileDataset, InMemoryDataset
from dmlnb.data.cached_images import CachedImageDataset

__all__ = ["split_labelled_per_class", "semi_supervised"]


def split_labelled_per_class(labels: Tensor, n: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Pick exactly ``n`` items of every class, uniformly at random (seeded).

    Args:
        labels: ``(N,)`` integer labels.
        n: labelled items per class, ``1 <= n <= `` the size of the smallest class.
        seed: seed of the CPU generator that draws the random order (reproducible everywhere).

    Returns:
        ``(labelled (C*n,), unlabelled (N-C*n,))``, sorted long indices that partition ``0..N-1``.
    """
    if labels.dim() != 1:
        raise ValueError(f"labels must be (N,), got shape {tuple(labels.shape)}")
    if n < 1:
        raise ValueError(f"labelled_per_class must be >= 1, got {n}")
    labels = labels.cpu().long()
    classes, counts = torch.unique(labels, return_counts=True)  # (C,), (C,)
    if (counts < n).any():
        small = classes[counts < n][:5].tolist()
        raise ValueError(
            f"labelled_per_class={n} exceeds the size of class(es) {small} "
            f"(smallest class has {int(counts.min())} items); choose n <= {int(counts.min())}"
        )
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(labels.numel(), generator=generator)  # (N,) random order
    order = perm[torch.sort(labels[perm], stable=True).indices]  # (N,) by class, random within
    sorted_labels = labels[order]  # (N,)
    starts = torch.cumsum(counts, 0) - counts  # (C,) first position of each class in `order`
    class_pos = torch.searchsorted(classes, sorted_labels)  # (N,) class index of each position
    rank = torch.arange(labels.numel()) - starts[class_pos]  # (N,) rank within its class
    keep = rank < n  # (N,)
    return order[keep].sort().values, order[~keep].sort().values


def semi_supervised(splits: DatasetSplits, labelled_per_class: int, seed: int = 0) -> DatasetSplits:
    """Keep ``labelled_per_class`` labelled training images per class; the rest of the training
    set becomes ``unlabelled`` (labels ``-1``) with its true labels in ``unlabelled_targets``.

    Works for in-memory sets (MNIST, CIFAR-10, Omniglot) and file-backed ones (CUB-200-2011,
    Cars196, decoded-cache or PIL): the unlabelled part keeps the training set's storage form.
    """
    train = splits.train
    if not isinstance(train, (InMemoryDataset, ImageFileDataset, CachedImageDataset)):
        raise TypeError(
            "semi-supervised splits need an InMemoryDataset, ImageFileDataset or "
            f"CachedImageDataset training set, got {type(train).__name__}"
        )
    labelled, unlabelled = split_labelled_per_class(train.labels, labelled_per_class, seed)
    hidden = train.subset(unlabelled)
    targets = hidden.labels.clone()  # (U,)
    return replace(
        splits,
        train=train.subset(labelled),
        unlabelled=hidden.relabel(torch.full_like(targets, -1)),
        unlabelled_targets=targets,
    )
