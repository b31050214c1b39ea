"""Class-disjoint validation splits: classes held out of the training set for model selection.

Musgrave et al. (2020, "A Metric Learning Reality Check") choose the epoch and the
hyper-parameters on classes drawn from the training classes and evaluate the test classes once;
the papers the book reproduces choose the best epoch on the test classes. :func:`hold_out_classes`
moves a seeded draw of the training classes (a fraction or a count, or one of ``k`` class-disjoint
folds) into :attr:`dmlnb.data.DatasetSplits.validation`; ``load_dataset(name, validation=...)``
applies it to every registered dataset.

The draw depends only on the training classes and ``seed`` (a CPU generator of its own, not the
run's seed), so every method and every run seed of a comparison sees the same validation classes.

>>> splits = hold_out_classes(load_dataset("omniglot-small"), 0.25)       # 34 of 136 classes
>>> folds = [hold_out_classes(sop, 0.25, fold=k) for k in range(4)]        # 4 class-disjoint folds
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from dmlnb.data.base import DatasetSplits, ImageFileDataset, InMemoryDataset, remap_labels
from dmlnb.data.cached_images import CachedImageDataset

__all__ = ["hold_out_classes", "validation_classes"]


def _check_classes(classes: float | int, seed: int, fold: int | None) -> None:
    """The types and ranges of :func:`hold_out_classes`' arguments (before any class is counted)."""
    if isinstance(classes, bool) or not isinstance(classes, (int, float)):
        raise TypeError(
            f"validation={classes!r} ({type(classes).__name__}) must be a fraction of the training "
            "classes in (0, 1), e.g. 0.2, or a class count >= 1, e.g. 20"
        )
    if isinstance(classes, float) and not 0.0 < classes < 1.0:
        raise ValueError(
            f"validation={classes!r} is a fraction outside (0, 1); give a fraction of the training "
            "classes such as 0.2, or an int class count such as 20"
        )
    if isinstance(classes, int) and classes < 1:
        raise ValueError(
            f"validation={classes!r} holds out fewer than 1 class; give a class count >= 1, or a "
            "fraction of the training classes in (0, 1)"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"validation_seed={seed!r} must be an int, e.g. 0")
    if fold is not None and (isinstance(fold, bool) or not isinstance(fold, int)):
        raise TypeError(f"validation_fold={fold!r} must be None or an int fold index, e.g. 0")


def validation_classes(
    num_classes: int, classes: float | int, seed: int = 0, fold: int | None = None
) -> Tensor:
    """Which of ``num_classes`` training classes (labels ``0..C-1``) a validation split holds out.

    Args:
        num_classes: ``C``, the number of training classes.
        classes: a float in ``(0, 1)``: that fraction of the classes (``round(classes * C)``);
            an int ``>= 1``: that many classes.
        seed: seed of the CPU generator that permutes the classes (independent of a run's seed).
        fold: ``None``: the first ``V`` classes of the permutation. ``k``: the permutation is cut
            into ``n = round(1 / f)`` near-equal class-disjoint folds (``f`` the fraction, or
            ``classes / C`` for a count) and fold ``k`` (``0 <= k < n``) is held out; the ``n``
            folds partition the classes.

    Returns:
        ``(C,)`` bool, ``True`` for a held-out class.

    Raises:
        TypeError / ValueError: a fraction outside ``(0, 1)``, a count below 1, a fold out of
            range or fewer than 2 folds, or fewer than 2 classes left on either side; every
            message names the value and what to pass instead.
    """
    _check_classes(classes, seed, fold)
    fraction = classes if isinstance(classes, float) else classes / max(num_classes, 1)
    order = torch.randperm(num_classes, generator=torch.Generator().manual_seed(seed))  # (C,)
    if fold is None:
        held = order[
            : round(classes * num_classes) if isinstance(classes, float) else classes
        ]  # (V,)
    else:
        folds = round(1 / fraction) if fraction > 0 else 0
        if folds < 2:
            raise ValueError(
                f"validation={classes!r} of {num_classes} training classes makes {folds} fold(s) "
                f"(round(1 / {fraction:.3g})); class-disjoint folds need at least 2, i.e. a "
                "fraction of at most 2/3 of the classes (or such a count), e.g. validation=0.25 "
                "for 4 folds"
            )
        if not 0 <= fold < folds:
            raise ValueError(
                f"validation_fold={fold} is out of range: validation={classes!r} of {num_classes} "
                f"training classes makes {folds} folds, numbered 0..{folds - 1}"
            )
        held = torch.tensor_split(order, folds)[fold]  # (V,)
    kept = num_classes - held.numel()
    if held.numel() < 2 or kept < 2:
        raise ValueError(
            f"validation={classes!r}{'' if fold is None else f', validation_fold={fold}'} of "
            f"{num_classes} training classes holds out {held.numel()} and keeps {kept}; both sides "
            "need at least 2 classes: choose a fraction or count in between"
        )
    mask = torch.zeros(num_classes, dtype=torch.bool)
    mask[held] = True
    return mask


def hold_out_classes(
    splits: DatasetSplits, classes: float | int, seed: int = 0, fold: int | None = None
) -> DatasetSplits:
    """``splits`` with a seeded draw of its training classes moved into ``validation``.

    Args:
        splits: class-disjoint splits without a validation split or an unlabelled part.
        classes, seed, fold: which classes (:func:`validation_classes`).

    Returns:
        New splits: ``train`` keeps the other ``C' = C - V`` classes' images, labels remapped to
        ``0..C'-1`` in the order of the original labels (storage form and augmentation kept);
        ``validation`` holds the held-out classes' images, labels ``0..V-1``, with the
        evaluation preprocessing (:meth:`~dmlnb.data.InMemoryDataset.for_evaluation`);
        ``class_names`` (when the source has names) gets ``"train"`` and ``"validation"``
        entries to match. Test, query and gallery are unchanged.

    Raises:
        ValueError: ``splits`` already hold a validation split; train and test share class
            names (a same-class split, e.g. MNIST's official one or ``digits`` with
            ``split="samples"``: holding out classes there would validate on classes unlike
            the test ones); ``splits`` hold an unlabelled part (hold out first, then call
            :func:`dmlnb.data.semi_supervised`); and the errors of :func:`validation_classes`.
        TypeError: a training set that cannot be subset.
    """
    _check_classes(classes, seed, fold)
    if splits.validation is not None:
        raise ValueError(
            f"{splits.name}: the splits already hold a validation split ({len(splits.validation)} "
            "images); hold out classes once, from the splits load_dataset returns without "
            "validation="
        )
    names = splits.class_names or {}
    shared = sorted(set(names.get("train", ())) & set(names.get("test", ())))
    if shared:
        raise ValueError(
            f"{splits.name}: train and test share {len(shared)} classes (e.g. {shared[:3]}): a "
            "class-disjoint validation split is only defined for class-disjoint splits; load a "
            "class-disjoint split (e.g. digits with split='classes'), or select on the test "
            "classes (select_on='test')"
        )
    if splits.unlabelled is not None:
        raise ValueError(
            f"{splits.name}: the splits hold an unlabelled part (labelled_per_class was set), so "
            "the held-out classes' unlabelled images would stay in training; load without "
            "labelled_per_class, hold out the validation classes, then call "
            "dmlnb.data.semi_supervised(splits, labelled_per_class, seed)"
        )
    train = splits.train
    if not isinstance(train, (InMemoryDataset, ImageFileDataset, CachedImageDataset)):
        raise TypeError(
            "a validation split needs an InMemoryDataset, ImageFileDataset or CachedImageDataset "
            f"training set, got {type(train).__name__}"
        )
    labels = train.labels.cpu()  # (N,) the training labels, 0..C-1
    dense, present = remap_labels(labels)  # (N,) in 0..C-1 even if a training label is unused, (C,)
    held = validation_classes(present.numel(), classes, seed, fold)  # (C,) bool
    to_validation = held[dense]  # (N,)
    parts = {}
    for part, items in (("train", ~to_validation), ("validation", to_validation)):
        index = torch.nonzero(items).squeeze(1)  # (M,)
        relabelled, originals = remap_labels(
            labels[index]
        )  # (M,) in 0..C_part-1, (C_part,) training labels
        parts[part] = (train.subset(index).relabel(relabelled), originals.tolist())
    class_names = splits.class_names
    if "train" in names:  # the names of each side's labels, in order
        class_names = {
            **names,
            **{part: [names["train"][c] for c in kept] for part, (_, kept) in parts.items()},
        }
    return replace(
        splits,
        train=parts["train"][0],
        validation=parts["validation"][0].for_evaluation(),
        class_names=class_names,
    )
