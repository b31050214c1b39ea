"""JSON and checkpoint files written atomically (a reader sees the old file or the new one,
never a mix), and values in the form they read back from JSON (:func:`as_json`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "write_json_atomic",
    "write_text_atomic",
    "atomic_torch_save",
    "read_json",
    "as_json",
    "jsonable",
]


def _atomic_write(path: Path, write: Any) -> None:
    """Write through ``write(file_object)`` to a temp file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | Path, data: dict[str, Any], compact: bool = False) -> None:
    """Write ``data`` as indented JSON (``compact``: on one line, no spaces, for files that are
    mostly long lists of numbers); readers see the old file or the new one, never a mix."""
    layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 1}
    payload = (json.dumps(data, sort_keys=False, default=jsonable, **layout) + "\n").encode()
    _atomic_write(Path(path), lambda fh: fh.write(payload))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) so that a reader polling for the file sees it whole or not at all."""
    payload = text.encode()
    _atomic_write(Path(path), lambda fh: fh.write(payload))


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` through a temp file + rename (a checkpoint is never left truncated)."""
    _atomic_write(Path(path), lambda fh: torch.save(obj, fh))


def read_json(path: str | Path) -> dict[str, Any]:
    """The JSON document at ``path``."""
    with open(path) as fh:
        return json.load(fh)


def as_json(obj: Any) -> Any:
    """``obj`` as it reads back from a JSON file written by :func:`write_json_atomic` (tuples
    become lists, tensors and numpy values plain numbers and lists): the form saved values are
    compared in."""
    return json.loads(json.dumps(obj, default=jsonable))


def jsonable(obj: Any) -> Any:
    """``obj`` in a form :mod:`json` writes (the ``default`` of every record file): paths, devices
    and dtypes as text, tensors and sets and tuples as lists, numpy scalars as numbers."""
    if isinstance(obj, (Path, torch.device, torch.dtype)):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
