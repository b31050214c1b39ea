"""Checkpoint files of a run folder: saved atomically, loaded safely, portable across devices.

A checkpoint holds only tensors and plain containers (``dict``, ``list``, ``tuple``, ``int``,
``float``, ``str``, ``bool``, ``None``, ...), so :func:`load_checkpoint` reads it with
``torch.load(weights_only=True)``: a file that would need anything else (a pickled object whose
unpickling could run code) is refused, and nothing in it is run. :func:`save_checkpoint` checks
the same rule before writing, so a run never leaves a checkpoint it could not load back.

Everything is loaded onto the CPU; model and optimiser states move to the run's device through
``load_state_dict`` (the optimiser casts its state to its parameters' device), the CPU RNG state
stays a CPU ``ByteTensor`` and the CUDA RNG state is restored only when resuming on CUDA
(:func:`restore_rng_state`).
"""

from __future__ import annotations

import pickle
import re
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any, Iterable

import torch
from torch.torch_version import TorchVersion

from dmlnb.records import atomic_torch_save

__all__ = [
    "CheckpointError",
    "RUN_FILES",
    "load_checkpoint",
    "save_checkpoint",
    "check_plain",
    "rng_state",
    "restore_rng_state",
    "remove_stray_temp_files",
    "prepare_run_dir",
]

RUN_FILES = ("record.json", "analysis.json", "checkpoint.pt", "best.pt")
"""The files a run folder holds (``analysis.json``: :mod:`dmlnb.run_analysis`); their temporary
files are ``.<name>.<random>.tmp``."""

_SCALARS = (
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    torch.dtype,
    torch.device,
    torch.Size,
)


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded (unsafe content, truncated or not a checkpoint)."""


def check_plain(obj: Any, where: str) -> None:
    """Raise :class:`CheckpointError` unless ``obj`` is made of tensors and plain containers only.

    ``where`` names the object in the message (e.g. ``"hooks[1] (MyHook).state_dict()"``); the
    path of the offending value inside it is appended, e.g. ``where['rows'][0]``.
    """
    stack: list[tuple[Any, str]] = [(obj, where)]
    while stack:
        value, at = stack.pop()
        kind = type(value)
        if kind in _SCALARS or kind in (torch.Tensor, torch.nn.Parameter):
            continue  # exact types: numpy.float64 subclasses float but is not plain
        if kind in (dict, OrderedDict, Counter):
            for key, item in value.items():
                if type(key) not in (int, str, float, bool, type(None)):
                    raise CheckpointError(
                        f"{at} has a key of type {type(key).__name__}; use str or int keys"
                    )
                stack.append((item, f"{at}[{key!r}]"))
            continue
        if kind in (list, tuple):
            stack.extend((item, f"{at}[{i}]") for i, item in enumerate(value))
            continue
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        raise CheckpointError(
            f"{at} is a {kind}: a checkpoint holds only tensors and plain containers (dict, list, "
            "tuple, int, float, str, bool, None); convert it (numpy arrays: torch.from_numpy, "
            "numpy scalars: .item(), torch.Generator: .get_state())"
        )


def save_checkpoint(obj: dict[str, Any], path: str | Path) -> None:
    """Check ``obj`` with :func:`check_plain`, then write it atomically (never half-written)."""
    check_plain(obj, Path(path).name)
    atomic_torch_save(obj, path)


_UNSAFE = re.compile(r"Unsupported global: GLOBAL (\S+)")
_LEGACY_SAFE = [TorchVersion]
"""Allowed besides plain types: checkpoints written before record schema 1 stored
``torch.__version__`` (a ``str`` subclass of torch's own) in their record."""


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path``, loaded with ``weights_only=True`` onto the CPU.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: the file needs more than tensors and plain containers (it is not
            unpickled past the first offending object, so nothing in it runs), or it is truncated
            or not a checkpoint at all.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with torch.serialization.safe_globals(_LEGACY_SAFE):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        unsafe = _UNSAFE.search(str(err))
        if unsafe is None:
            raise _damaged(path, err) from None
        raise CheckpointError(
            f"refused to load {path}: it holds more than tensors and plain containers (it needs "
            f"{unsafe.group(1)}). Nothing in it was run. A dmlnb checkpoint never needs that: if "
            "you made this file yourself with an older dmlnb or a custom hook, delete it (the run "
            "restarts) or re-save its plain parts; never load a file you do not trust with "
            "weights_only=False"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise _damaged(path, err) from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(
            f"{path} holds a {type(ckpt).__name__}, not a checkpoint dict; delete it"
        )
    return ckpt


def _damaged(path: Path, err: BaseException) -> CheckpointError:
    first = str(err).splitlines()[0] if str(err) else ""
    return CheckpointError(
        f"cannot read {path} as a checkpoint ({type(err).__name__}: {first}); it is truncated or "
        "not a torch checkpoint: delete it and the run restarts from scratch"
    )


def rng_state(device: torch.device) -> dict[str, Any]:
    """``{"rng_cpu": ByteTensor, "rng_cuda": ByteTensor | None}`` of this process,
    for a checkpoint."""
    return {
        "rng_cpu": torch.get_rng_state(),
        "rng_cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }


def restore_rng_state(
    ckpt: dict[str, Any], device: torch.device, path: str | Path = "checkpoint"
) -> None:
    """Restore the RNG states :func:`rng_state` saved: the CPU one always (as a CPU
    ``ByteTensor``), the CUDA one only when resuming on CUDA from a CUDA-made checkpoint."""
    cpu = ckpt.get("rng_cpu")
    if not isinstance(cpu, torch.Tensor):
        raise CheckpointError(
            f"{path} has no 'rng_cpu' tensor; it was not written by dmlnb's training loop"
        )
    torch.set_rng_state(cpu.detach().to("cpu", torch.uint8))
    cuda = ckpt.get("rng_cuda")
    if device.type == "cuda" and isinstance(cuda, torch.Tensor):
        torch.cuda.set_rng_state(cuda.detach().to("cpu", torch.uint8), device)


def remove_stray_temp_files(run_dir: str | Path, names: Iterable[str] = RUN_FILES) -> list[Path]:
    """Delete the temporary files (``.<name>.*.tmp``) that a killed write of one of ``names``
    left in ``run_dir``; returns what was removed. Other files are never touched."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    removed = []
    for name in names:
        for tmp in run_dir.glob(f".{name}.*.tmp"):
            if tmp.is_file():
                tmp.unlink()
                removed.append(tmp)
    return removed


def prepare_run_dir(run_dir: str | Path) -> Path:
    """``run_dir`` as a ``Path`` ready for a run: refused if it is a file, and cleared of the
    temporary files a killed write left (:func:`remove_stray_temp_files`). A missing folder is
    created by the first write, not here."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise NotADirectoryError(
            f"run_dir {run_dir} is a file, not a folder: pass the folder that should hold "
            "record.json and checkpoint.pt (or move that file away)"
        )
    remove_stray_temp_files(run_dir)
    return run_dir
