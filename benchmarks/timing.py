"""Wall-clock timing shared by the benchmark scripts beside this one
(``from timing import ...``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def sync(device: torch.device) -> None:
    """Wait for the work queued on a CUDA ``device`` (nothing to wait for elsewhere)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds of one call of ``fn``, synchronised on CUDA so queued kernels are counted."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def median_ms(
    fn: Callable[[], object], device: torch.device, repeats: int, slow_seconds: float = 2.0
) -> float:
    """Median milliseconds of ``fn`` over ``repeats`` runs after 3 warm-ups; a call slower than
    ``slow_seconds`` is timed once (its cost dwarfs warm-up effects)."""
    if seconds(fn, device) > slow_seconds:
        return 1e3 * seconds(fn, device)
    for _ in range(2):
        fn()
    return 1e3 * statistics.median(seconds(fn, device) for _ in range(repeats))
