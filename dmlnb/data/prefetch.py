"""Batches prepared ahead: a background thread builds the next batches (reads pixels into pinned
memory, copies them to the GPU, crops them there) while the caller's model works on the current
one.

On CUDA the thread works on a stream of its own; the caller's stream waits on an event recorded
after each batch, and the batch's tensors are marked as used there (``record_stream``), so the
caching allocator does not hand their memory out again too early. Results come in order and do
not depend on the timing: the thread only moves work earlier.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch
from torch import Tensor

__all__ = ["prefetch", "to_device"]

T = TypeVar("T")
_DONE = object()


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """``tensor`` (on the CPU) on ``device``. On CUDA it is copied from pinned memory without
    blocking the host (the copy is ordered on the current stream); elsewhere
    ``tensor.to(device)``."""
    if device.type != "cuda":
        return tensor.to(device)
    pinned = tensor if tensor.is_pinned() else tensor.pin_memory()
    return pinned.to(device, non_blocking=True)


def _cuda_tensors(result: Any) -> list[Tensor]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [t for t in items if isinstance(t, Tensor) and t.is_cuda]


def prefetch(
    load: Callable[[int, Any], T], batches: Iterable[Any], device: torch.device, ahead: int = 1
) -> Iterator[T]:
    """Yield ``load(i, batch)`` for the ``i``-th element of ``batches``, in order.

    Args:
        load: builds one result (a tensor or a tuple holding tensors) from a batch description.
        batches: iterated in the background thread (so a sampler must not need the caller's
            previous step to draw its next batch: pass ``ahead=0`` then).
        device: where ``load`` puts its tensors; CUDA gets a side stream.
        ahead: results built ahead (at most ``ahead`` wait in the queue); ``0``: no thread,
            ``load`` runs in the caller's thread when the caller asks.

    An exception raised by ``load`` or by ``batches`` is raised in the caller at the batch it
    concerns; closing the iterator early stops the thread.
    """
    if ahead < 1:
        for i, batch in enumerate(batches):
            yield load(i, batch)
        return
    results: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                results.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                for i, batch in enumerate(batches):
                    if stop.is_set():
                        return
                    result = load(i, batch)
                    event = None
                    if stream is not None:
                        event = torch.cuda.Event()
                        event.record(stream)
                    if not put((result, event, None)):
                        return
        except BaseException as err:  # handed to the caller, raised there
            put((None, None, err))
            return
        put(_DONE)

    thread = threading.Thread(target=work, name="dmlnb-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = results.get()
            if item is _DONE:
                return
            result, event, err = item
            if err is not None:
                raise err
            if event is not None:
                current = torch.cuda.current_stream(device)
                current.wait_event(event)
                for tensor in _cuda_tensors(result):
                    tensor.record_stream(current)
            yield result
    finally:
        stop.set()
        thread.join()
