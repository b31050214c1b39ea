"""What PROFS's batch construction costs (Can, Gürbüz & Alatan, Sec. 5.4: HNCM's share of the
computation time): :class:`TimedSampler` times a batch sampler and its hook calls."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from torch.utils.data import Sampler

from dmlnb.hooks import Hook, TrainState

__all__ = ["TimedSampler"]


class TimedSampler(Sampler[list[int]], Hook):
    """A batch sampler (and its hook calls) with a stopwatch.

    Yields ``sampler``'s batches unchanged and forwards ``set_epoch``, ``len`` and, when the
    sampler is a :class:`~dmlnb.hooks.Hook`, every hook call. :attr:`seconds` accumulates the
    time spent producing batches (the class choice, HNCM's scan, drawing examples) and in the
    sampler's hook calls (storing the representatives' embeddings): the bookkeeping PROFS adds
    to a step. :attr:`calls` counts the batches produced. Both are checkpointed.
    """

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.seconds = 0.0
        self.calls = 0

    def __repr__(self) -> str:
        return f"TimedSampler({self.sampler!r})"

    def __len__(self) -> int:
        return len(self.sampler)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[list[int]]:
        t0 = time.perf_counter()
        it = iter(self.sampler)
        self.seconds += time.perf_counter() - t0
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                self.seconds += time.perf_counter() - t0
                return
            self.seconds += time.perf_counter() - t0
            self.calls += 1
            yield batch

    def _timed(self, name: str, state: TrainState) -> None:
        if isinstance(self.sampler, Hook):
            t0 = time.perf_counter()
            getattr(self.sampler, name)(state)
            self.seconds += time.perf_counter() - t0

    def on_train_start(self, state: TrainState) -> None:
        self._timed("on_train_start", state)

    def on_step_start(self, state: TrainState) -> None:
        self._timed("on_step_start", state)

    def after_backward(self, state: TrainState) -> None:
        self._timed("after_backward", state)

    def on_step_end(self, state: TrainState) -> None:
        self._timed("on_step_end", state)

    def on_epoch_end(self, state: TrainState) -> None:
        self._timed("on_epoch_end", state)

    def state_dict(self) -> dict[str, Any]:
        inner = self.sampler.state_dict() if isinstance(self.sampler, Hook) else {}
        return {"inner": inner, "seconds": float(self.seconds), "calls": int(self.calls)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(self.sampler, Hook):
            self.sampler.load_state_dict(state["inner"])
        self.seconds, self.calls = float(state["seconds"]), int(state["calls"])
