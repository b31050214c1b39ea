"""The dataset registry: names -> loader functions, the data root and the missing-file error.

A loader is a function ``loader(root: Path, *, option=default, ...) -> DatasetSplits``
registered under a name with :func:`register_dataset`. :func:`load_dataset` resolves the data
root, checks the options against the loader's keyword arguments and calls it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dmlnb.data.base import DatasetSplits

__all__ = [
    "register_dataset",
    "available_datasets",
    "load_dataset",
    "data_root",
    "missing_files_error",
]

Loader = Callable[..., DatasetSplits]

_REGISTRY: dict[str, Loader] = {}


def register_dataset(name: str) -> Callable[[Loader], Loader]:
    """Decorator: register ``loader(root: Path, **options) -> DatasetSplits`` under ``name``."""

    def decorator(loader: Loader) -> Loader:
        if name in _REGISTRY:
            raise ValueError(f"dataset {name!r} is already registered (by {_REGISTRY[name]!r})")
        _REGISTRY[name] = loader
        return loader

    return decorator


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


def load_dataset(name: str, root: str | Path | None = None, **options: Any) -> DatasetSplits:
    """Load the registered dataset ``name`` from ``root`` (see :func:`data_root`).

    Raises:
        ValueError: unknown ``name`` (the message lists the valid names).
        TypeError: an option the loader does not take (the message lists its options).
        FileNotFoundError: the files are absent (the message names the expected path and the
            official source).
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(available_datasets())}")
    loader = _REGISTRY[name]
    valid = _options(loader)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        listed = ", ".join(f"{k}={v!r}" for k, v in valid.items())
        raise TypeError(
            f"dataset {name!r} got unknown option(s) {unknown}; valid options: {listed}"
        )
    return loader(data_root(root), **options)


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
