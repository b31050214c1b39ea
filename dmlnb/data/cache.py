"""A file cache for decoded datasets, so that a set of PNGs is decoded once per machine.

Entries are ``.pt`` files under :func:`cache_dir`, named by the dataset and a hash of everything
the decoded tensors depend on (source file sizes and modification times, image size, format
version). Writes are atomic (temporary file + ``os.replace``), so concurrent processes never see
half a file; a cache directory that cannot be written only costs the speed-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = ["cache_dir", "cached", "file_fingerprint"]


def cache_dir() -> Path:
    """``$DMLNB_CACHE`` if set, else ``~/.cache/dmlnb/cache``."""
    return Path(os.environ.get("DMLNB_CACHE") or Path.home() / ".cache" / "dmlnb" / "cache")


def file_fingerprint(path: Path) -> list[Any]:
    """``[name, size, mtime_ns]``: changes whenever the file is replaced."""
    stat = path.stat()
    return [path.name, stat.st_size, stat.st_mtime_ns]


def cached(name: str, key: dict[str, Any], build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Return ``build()``, read from ``<cache_dir>/<name>-<hash(key)>.pt`` when present.

    ``build`` must return a dict of tensors, strings, numbers and lists of those (what
    ``torch.load(weights_only=True)`` accepts).
    """
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.pt"
    if path.is_file():
        try:
            return torch.load(path, weights_only=True)
        except (OSError, RuntimeError, EOFError) as err:  # truncated or foreign file: rebuild
            warnings.warn(f"ignoring unreadable cache file {path}: {err}", stacklevel=2)
    data = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(data, f)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as err:
        warnings.warn(
            f"could not write the cache file {path} ({err}); set DMLNB_CACHE to a writable folder",
            stacklevel=2,
        )
    return data
