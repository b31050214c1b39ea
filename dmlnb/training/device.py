"""The device a run trains on and its arithmetic: the device's resolution, mixed precision and
cuDNN autotuning."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from dmlnb.profiles import TrainConfig

__all__ = ["resolve_device", "mixed_precision", "precision_description", "cudnn_autotune"]


def resolve_device(name: str = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; otherwise ``torch.device(name)``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device {name!r} requested but CUDA is not available; use 'auto' or 'cpu'"
        )
    return device


def mixed_precision(
    device: torch.device, enabled: bool
) -> tuple[contextlib.AbstractContextManager, torch.amp.GradScaler | None]:
    """``(autocast context, grad scaler or None)``: bf16 autocast on CUDA where supported, fp16
    with a scaler otherwise; no-ops on CPU or when ``enabled`` is false."""
    if not (enabled and device.type == "cuda"):
        return contextlib.nullcontext(), None
    if torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16), None
    return torch.autocast("cuda", dtype=torch.float16), torch.amp.GradScaler("cuda")


def precision_description(config: TrainConfig) -> str:
    """In words, the arithmetic a run of ``config`` trains in (:func:`mixed_precision`), for the
    chapters' deviations tables: none of the five papers states its precision."""
    if not config.amp:
        return "float32 on every device (amp off)"
    return (
        "bf16 autocast on a CUDA GPU (fp16 with a gradient scaler where bf16 is unsupported), "
        "float32 on a CPU (amp on; the loss and the evaluation in float32)"
    )


@contextlib.contextmanager
def cudnn_autotune(device: torch.device) -> Iterator[None]:
    """cuDNN autotuning (``torch.backends.cudnn.benchmark``) while training on CUDA, unless
    deterministic algorithms are requested (``torch.use_deterministic_algorithms(True)``: then the
    run stays bit-reproducible and a resumed run ends where an uninterrupted one does)."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = before or (
        device.type == "cuda" and not torch.are_deterministic_algorithms_enabled()
    )
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before
