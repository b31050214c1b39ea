"""What an epoch measures as it trains: seconds per phase of the steps (:class:`PhaseClock`) and
the mean loss, read back from the device only every few steps (:class:`LossMeter`)."""

from __future__ import annotations

import contextlib
import time

import torch
from torch import Tensor

from dmlnb.checks import DeferredChecks, deferred_checks

__all__ = ["PhaseClock", "LossMeter"]


class PhaseClock:
    """Seconds a training epoch spends in each phase of its steps, on the CPU.

    ``lap(phase)`` charges the time since the previous lap to ``phase``. The loop's phases:
    ``data`` (the sampler and the batch gather), ``hooks`` (hooks before the forward pass, their
    penalties and their per-step bookkeeping), ``forward`` (the model), ``loss``, ``backward``
    (through the loss and the model), ``optimizer`` (zeroing, clipping, the step) and
    ``bookkeeping`` (the loss meter, the progress bar). Only the CPU is timed: on a GPU the
    kernels run asynchronously and timing them per phase would need a host synchronisation per
    step, so ``totals()`` is ``None`` there.
    """

    PHASES = ("data", "hooks", "forward", "loss", "backward", "optimizer", "bookkeeping")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.seconds = dict.fromkeys(self.PHASES, 0.0)
        self.last = time.perf_counter()

    def lap(self, phase: str) -> None:
        if self.enabled:
            now = time.perf_counter()
            self.seconds[phase] += now - self.last
            self.last = now

    def totals(self) -> dict[str, float] | None:
        """``{phase: seconds}`` of the epoch so far (``None`` when not timed)."""
        return dict(self.seconds) if self.enabled else None


class LossMeter:
    """An epoch's per-image mean loss, summed on the device and read back only every ``every``
    steps (default: each step on the CPU, where a read is free; every 50 steps on a GPU, so a
    step never waits for the host) and at the end of the epoch.

    A non-finite loss is caught at the next read, which names the first step that produced it
    (on a GPU up to ``every - 1`` further steps may have run with it; the run stops either way).
    The sum is kept in float64 (float32 on MPS), as the per-step Python sum was. When it reads
    every ``k > 1`` steps, the losses' value checks (finite embeddings, label ranges, finite loss)
    are deferred to the same reads (:meth:`deferring`), so a step makes no host read at all.
    """

    def __init__(self, device: torch.device, every: int | None = None) -> None:
        dtype = torch.float32 if device.type == "mps" else torch.float64
        self.every = every if every is not None else (1 if device.type == "cpu" else 50)
        self.total = torch.zeros((), dtype=dtype, device=device)  # sum of loss x batch size
        self.first_bad = torch.full(
            (), -1, dtype=torch.long, device=device
        )  # first non-finite step
        self.last = torch.zeros((), dtype=dtype, device=device)
        self.images, self.pending = 0, 0
        #: Value checks of the losses, deferred to this meter's reads when it
        #: reads every k > 1 steps.
        self.checks = DeferredChecks(device) if self.every > 1 else None

    def deferring(self) -> contextlib.AbstractContextManager:
        """Context in which the losses' value checks report to this meter instead of reading the
        device (:func:`dmlnb.checks.deferred_checks`); a no-op when the meter reads every step."""
        return deferred_checks(self.checks) if self.checks is not None else contextlib.nullcontext()

    def add(self, loss: Tensor, batch_size: int, step: int) -> None:
        """Add one step's mean loss (a 0-d tensor on the device) of ``batch_size`` images; call
        :meth:`start_step` before the step's forward pass."""
        self.last = loss.to(self.total.dtype)
        self.total += self.last * batch_size
        self.first_bad = torch.where(
            (self.first_bad < 0) & ~torch.isfinite(loss), step, self.first_bad
        )
        self.images += batch_size
        self.pending += 1

    def due(self) -> bool:
        """Whether ``every`` steps have passed since the last read."""
        return self.pending >= self.every

    def read(self, epoch: int) -> float:
        """The last step's loss (one host read); raises ``FloatingPointError`` on
        a non-finite one."""
        return self._read(epoch, self.last)

    def epoch_mean(self, epoch: int) -> float:
        """The epoch's mean loss per image (one host read; checks finiteness first)."""
        return self._read(epoch, self.total) / max(self.images, 1)

    def start_step(self, step: int) -> None:
        """The step whose value checks follow (named by a deferred check's error)."""
        if self.checks is not None:
            self.checks.step = step

    def _read(self, epoch: int, value: Tensor) -> float:
        parts = [self.first_bad.to(value.dtype), value]
        if self.checks is not None:
            parts.append(self.checks.failed_step().to(value.dtype))
        read = torch.stack(parts).tolist()  # the one read
        first_bad, out = read[0], read[1]
        self.pending = 0
        if self.checks is not None:
            self.checks.raise_for(int(read[2]))  # a bad batch's own error comes first
        if first_bad >= 0:
            raise FloatingPointError(
                f"non-finite loss at epoch {epoch + 1}, step {int(first_bad)}: lower the learning "
                "rate (config key 'lr') or set grad_clip"
            )
        return out
