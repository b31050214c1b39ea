"""``digits``: scikit-learn's bundled 8x8 hand-written digits (1,797 images), needing no files.

The smallest real dataset of the book, for tests and the quick profile. Pixel values 0..16 are
scaled to [0, 1]; images are ``(N, 1, 8, 8)``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from dmlnb.data.base import DatasetSplits, InMemoryDataset, remap_labels
from dmlnb.data.registry import register_dataset
from dmlnb.data.semisup import semi_supervised

__all__ = ["load_digits_splits"]


@register_dataset("digits")
def load_digits_splits(
    root: Path,
    *,
    split: str = "classes",
    test_size: float = 0.3,
    labelled_per_class: int | None = None,
    seed: int = 0,
) -> DatasetSplits:
    """Digits with a class-disjoint or a same-class split.

    Args:
        root: unused (the data ship with scikit-learn); kept for the registry signature.
        split: ``"classes"``: train on digits 0-4, test on 5-9 (the metric-learning protocol;
            test labels remapped to 0-4). ``"samples"``: all ten digits on both sides, a
            stratified held-out fraction ``test_size`` (seeded).
        test_size: held-out fraction for ``split="samples"``.
        labelled_per_class: if set, keep that many labelled training images per class and move
            the rest to ``unlabelled`` (see :func:`dmlnb.data.semisup.semi_supervised`).
        seed: seed of the ``"samples"`` split and of the labelled draw.
    """
    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (N, 1, 8, 8)
    labels = torch.as_tensor(bunch.target, dtype=torch.long)  # (N,)
    if split == "classes":
        train_idx = torch.nonzero(labels < 5).squeeze(1)
        test_idx = torch.nonzero(labels >= 5).squeeze(1)
    elif split == "samples":
        train_np, test_np = train_test_split(
            range(len(labels)), test_size=test_size, random_state=seed, stratify=bunch.target
        )
        train_idx, test_idx = torch.as_tensor(train_np), torch.as_tensor(test_np)
    else:
        raise ValueError(f"split must be 'classes' or 'samples', got {split!r}")
    train_y, train_orig = remap_labels(labels[train_idx])
    test_y, test_orig = remap_labels(labels[test_idx])
    splits = DatasetSplits(
        name="digits",
        train=InMemoryDataset(images[train_idx], train_y),
        test=InMemoryDataset(images[test_idx], test_y),
        class_names={
            "train": [str(c) for c in train_orig.tolist()],
            "test": [str(c) for c in test_orig.tolist()],
        },
    )
    if labelled_per_class is not None:
        splits = semi_supervised(splits, labelled_per_class, seed)
    return splits
