"""The checks of what :func:`dmlnb.training.train` is given: the sets' labels, empty sets, the
selection protocol against the sets and the loss against its specification."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from dmlnb.methods import check_built
from dmlnb.profiles import TrainConfig

__all__ = ["check_dataset_labels", "check_not_empty", "check_train_inputs"]


def check_dataset_labels(dataset: Dataset, name: str, allow_unlabelled: bool = False) -> Tensor:
    """``dataset.labels`` as a ``(N,)`` long tensor, or an error naming ``name`` and the fix:
    the set must be non-empty, hold one integer label ``>= 0`` per example (``-1`` marks
    unlabelled examples, which a supervised train set must not contain; with
    ``allow_unlabelled`` it may)."""
    check_not_empty(dataset, name, "check the dataset's split and filters")
    if not hasattr(dataset, "labels"):
        raise TypeError(
            f"{name} ({type(dataset).__name__}) has no `labels` attribute; wrap it in a "
            "dmlnb.data.LabelledDataset (or give it a (N,) integer `labels` tensor)"
        )
    labels = torch.as_tensor(dataset.labels)  # type: ignore[attr-defined]
    if labels.dim() != 1 or len(labels) != len(dataset):  # type: ignore[arg-type]
        raise ValueError(
            f"{name}.labels has shape {tuple(labels.shape)} but {name} holds {len(dataset)} "
            "examples; "  # type: ignore[arg-type]
            "give one class id per example"
        )
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"{name}.labels are {labels.dtype}; labels must be integer class ids: convert them "
            "with labels.long() (after checking they hold whole numbers)"
        )
    negative = int((labels < (-1 if allow_unlabelled else 0)).sum())
    if negative and allow_unlabelled:
        raise ValueError(
            f"{name}.labels holds {negative} labels below -1 (min {int(labels.min())}); "
            "use class ids >= 0, and -1 for unlabelled examples"
        )
    if negative:
        raise ValueError(
            f"{name}.labels holds {negative} negative labels (min {int(labels.min())}); -1 marks "
            f"unlabelled examples, which supervised training cannot use: filter them out of {name} "
            "first (e.g. dataset.subset((dataset.labels >= 0).nonzero().flatten()))"
        )
    return labels.long()


def check_not_empty(dataset: Dataset | None, name: str, hint: str) -> None:
    if dataset is not None and len(dataset) == 0:  # type: ignore[arg-type]
        raise ValueError(f"{name} is empty (0 examples); {hint}")


def check_train_inputs(
    loss_fn: nn.Module,
    train_set: Dataset,
    eval_set: Dataset | None,
    config: TrainConfig,
    *,
    gallery_set: Dataset | None,
    val_set: Dataset | None,
    spec: dict[str, Any] | None,
    allow_unlabelled: bool,
) -> Tensor:
    """The train set's labels ``(N,)`` (:func:`check_dataset_labels`) once every input of
    :func:`dmlnb.training.train` is checked; raises the errors its docstring lists."""
    labels = check_dataset_labels(train_set, "train_set", allow_unlabelled)
    check_built(loss_fn, spec)
    check_not_empty(eval_set, "eval_set", "pass None for no evaluation")
    check_not_empty(gallery_set, "gallery_set", "pass None for no evaluation")
    check_not_empty(val_set, "val_set", "pass None for no validation split")
    if config.select_on == "validation" and val_set is None and eval_set is not None:
        raise ValueError(
            "config.select_on is 'validation' but no validation split was given: pass "
            "dataset_options={'validation': 0.2} (a fraction or count of the training classes) to "
            "fit, val_set=splits.validation to train, or select_on='test' (the papers' protocol)"
        )
    if val_set is not None and eval_set is None:
        raise ValueError(
            "val_set is given without an eval_set: a run selected on the validation classes "
            "reports the test classes at that epoch; pass the test set as eval_set"
        )
    return labels
