"""The dataset registry: names -> loader functions, the data root and the missing-file error.

A loader is a function ``loader(root: Path, *, option=default, ...) -> DatasetSplits``
registered under a name with :func:`register_dataset`. :func:`load_dataset` resolves the data
root, checks the options against the loader's keyword arguments and calls it; the options of
:data:`SPLIT_OPTIONS` (a class-disjoint validation split,
:func:`dmlnb.data.validation.hold_out_classes`) it applies itself, to every dataset.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dmlnb.data.base import DatasetSplits
from dmlnb.data.validation import hold_out_classes

__all__ = [
    "register_dataset",
    "register_loader",
    "available_datasets",
    "load_dataset",
    "data_root",
    "missing_files_error",
    "SPLIT_OPTIONS",
]

Loader = Callable[..., DatasetSplits]

_REGISTRY: dict[str, Loader] = {}

#: Options :func:`load_dataset` takes for every dataset (name -> default): a validation split of
#: ``validation`` training classes (a fraction or a count), drawn with ``validation_seed``, or
#: class-disjoint fold ``validation_fold`` (see :func:`dmlnb.data.validation.hold_out_classes`).
SPLIT_OPTIONS: dict[str, Any] = {"validation": None, "validation_seed": 0, "validation_fold": None}


def register_dataset(name: str) -> Callable[[Loader], Loader]:
    """Decorator: register ``loader(root: Path, **options) -> DatasetSplits`` under ``name``
    (its options may not reuse the names of :data:`SPLIT_OPTIONS`)."""

    def decorator(loader: Loader) -> Loader:
        if name in _REGISTRY:
            raise ValueError(f"dataset {name!r} is already registered (by {_REGISTRY[name]!r})")
        taken = sorted(set(_options(loader)) & set(SPLIT_OPTIONS))
        if taken:
            raise ValueError(
                f"loader {loader.__name__} of dataset {name!r} takes option(s) {taken}, which "
                f"load_dataset applies to every dataset; rename them"
            )
        _REGISTRY[name] = loader
        return loader

    return decorator


def register_loader(name: str, loader: Loader, reader: Callable[..., Any]) -> Loader:
    """Register ``loader`` under ``name`` (:func:`register_dataset`) with the name, docstring and
    module of ``reader``, the function it wraps: a loader decorator's (the loader takes the
    options, the reader documents the dataset)."""
    loader.__name__ = loader.__qualname__ = reader.__name__
    loader.__doc__, loader.__module__ = reader.__doc__, reader.__module__
    return register_dataset(name)(loader)


def available_datasets() -> list[str]:
    """Sorted names accepted by :func:`load_dataset`."""
    return sorted(_REGISTRY)


def data_root(root: str | Path | None = None) -> Path:
    """The folder holding the datasets: ``root`` if given, else ``$DMLNB_DATA``, else
    ``~/.cache/dmlnb``; returned as an absolute path.
    """
    if root is None:
        root = os.environ.get("DMLNB_DATA") or Path.home() / ".cache" / "dmlnb"
    return Path(root).expanduser().resolve()


def _options(loader: Loader) -> dict[str, Any]:
    params = list(inspect.signature(loader).parameters.values())[1:]  # after `root`
    return {p.name: p.default for p in params}


def load_dataset(
    name: str,
    root: str | Path | None = None,
    *,
    validation: float | int | None = None,
    validation_seed: int = 0,
    validation_fold: int | None = None,
    **options: Any,
) -> DatasetSplits:
    """Load the registered dataset ``name`` from ``root`` (see :func:`data_root`).

    Args:
        name, root: the dataset and the data root.
        validation: ``None``: no validation split. A float in ``(0, 1)`` (a fraction) or an int
            ``>= 1`` (a count) of the training classes held out as ``splits.validation``
            (:func:`dmlnb.data.validation.hold_out_classes`); for a run, pass it in
            ``TrainConfig.dataset_options`` so that it enters the run's fingerprint and record.
        validation_seed: seed of the class draw (not the run's seed: every run of a comparison
            shares the validation classes).
        validation_fold: ``k``: hold out class-disjoint fold ``k`` of ``round(1 / fraction)``
            (Musgrave et al.'s folds) instead of the first classes of the draw.
        options: the loader's own options.

    Raises:
        ValueError: unknown ``name`` (the message lists the valid names); a bad validation
            split (:func:`dmlnb.data.validation.hold_out_classes`), or ``validation_seed`` /
            ``validation_fold`` set without ``validation``.
        TypeError: an option the loader does not take (the message lists its options and the
            validation options).
        FileNotFoundError: the files are absent (the message names the expected path and the
            official source).
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(available_datasets())}")
    loader = _REGISTRY[name]
    valid = _options(loader)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        listed = ", ".join(f"{k}={v!r}" for k, v in {**valid, **SPLIT_OPTIONS}.items())
        raise TypeError(
            f"dataset {name!r} got unknown option(s) {unknown}; valid options: {listed}"
        )
    if validation is None and (validation_seed != 0 or validation_fold is not None):
        raise ValueError(
            f"dataset {name!r}: validation_seed={validation_seed!r} / "
            f"validation_fold={validation_fold!r} choose a validation split but validation is "
            "None; pass validation=<fraction or class count>, e.g. validation=0.2"
        )
    splits = loader(data_root(root), **options)
    if validation is None:
        return splits
    return hold_out_classes(splits, validation, validation_seed, validation_fold)


def missing_files_error(
    dataset: str, expected: Path, source: str, *, downloadable: bool, layout: str = ""
) -> FileNotFoundError:
    """The error a loader raises when ``expected`` does not exist.

    The message names the expected path, the official ``source``, how to point the package at
    another data root, and ``download=True`` where the loader can fetch the files itself.
    """
    lines = [
        f"{dataset}: expected {expected}, which does not exist.",
        f"The files come from {source}.",
    ]
    if layout:
        lines.append(f"Expected layout: {layout}")
    lines.append(
        "Place them there, or point the package at the folder that holds them with the "
        "environment variable DMLNB_DATA=/path/to/data or load_dataset(..., root=...)."
    )
    if downloadable:
        lines.append(
            f"Or pass download=True to fetch them: load_dataset({dataset!r}, download=True)."
        )
    return FileNotFoundError("\n".join(lines))
