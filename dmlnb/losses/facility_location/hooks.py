"""Training hooks of the facility-location loss: the exponential decay of its margin multiplier
(:class:`MarginDecayHook`) and the log of what happens inside it, step by step
(:class:`InsideLossHook`).
"""

from __future__ import annotations

import math
import time

import torch

from dmlnb.hooks import Hook, TrainState
from dmlnb.losses.facility_location.loss import FacilityLocationLoss

__all__ = ["MarginDecayHook", "InsideLossHook"]


class MarginDecayHook(Hook):
    """Exponential decay of the margin multiplier, as Song et al. (2017, Sec. 5) train:
    ``gamma_t = gamma_0 * rate ** (t / decay_steps)`` at global step ``t`` (TensorFlow's
    ``exponential_decay``; ``staircase=True`` floors the exponent).

    Args:
        loss: the :class:`FacilityLocationLoss` whose ``margin_multiplier`` is decayed.
        rate: decay rate (the paper uses 0.94).
        decay_steps: steps per factor ``rate`` (the paper does not state it; e.g. one epoch).
        staircase: decay in whole steps of ``decay_steps``.
    """

    def __init__(
        self,
        loss: FacilityLocationLoss,
        rate: float = 0.94,
        decay_steps: int = 1000,
        staircase: bool = False,
    ) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"rate must be in (0, 1], got {rate}")
        if decay_steps < 1:
            raise ValueError(f"decay_steps must be >= 1, got {decay_steps}")
        self.loss, self.rate, self.decay_steps, self.staircase = loss, rate, decay_steps, staircase
        self.initial = loss.margin_multiplier

    def on_step_start(self, state: TrainState) -> None:
        exponent = state.step / self.decay_steps
        if self.staircase:
            exponent = math.floor(exponent)
        self.loss.margin_multiplier = self.initial * self.rate**exponent

    def state_dict(self) -> dict:
        return {"initial": float(self.initial)}  # a plain float: checkpoints hold no numpy scalars

    def load_state_dict(self, state: dict) -> None:
        self.initial = state["initial"]

    def __repr__(self) -> str:
        return (
            f"MarginDecayHook(rate={self.rate}, decay_steps={self.decay_steps}, "
            f"staircase={self.staircase})"
        )


# FacilityLocationLoss.last_stats key -> InsideLossHook log column.
_INSIDE_COLUMNS = {
    "margin_multiplier": "gamma",
    "oracle_score": "oracle",
    "predicted_score": "predicted",
    "augmented_score": "augmented",
    "nmi": "nmi",
    "greedy_objective": "greedy",
    "refined_objective": "refined",
    "pam_swaps": "swaps",
    "inference_seconds": "inference_s",
}


class InsideLossHook(Hook):
    """Logs every ``every``-th training step: its wall time and, for the clustering loss, what
    happened inside the loss.

    Columns (one list per column in :attr:`log`): ``step``, ``loss``, ``step_s`` (seconds from
    the start of the step to the end of the optimiser step: forward, loss, backward, update; the
    batch's loading is outside) and, when the loss is a :class:`FacilityLocationLoss`, ``gamma``,
    ``oracle`` (``F~``, Eq. 5), ``predicted`` (``F(X, S_PAM)``, Eq. 4), ``augmented``
    (``F + gamma (1 - NMI)``, the (*) of Eq. 6), ``nmi`` (of the inferred clustering
    ``g(S_PAM)`` against the labels), ``greedy`` / ``refined`` (the objective ``A`` of
    Algorithm 1's set and after Algorithm 2), ``swaps`` (PAM swaps) and ``inference_s`` (seconds
    of the loss-augmented inference). The log is checkpointed with the run.
    """

    def __init__(self, every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every = int(every)
        self.log: dict[str, list[float]] = {}
        self._t0: float | None = None

    def __repr__(self) -> str:
        return f"InsideLossHook(every={self.every})"

    def on_step_start(self, state: TrainState) -> None:
        if state.step % self.every == 0:
            if state.device.type == "cuda":
                torch.cuda.synchronize(state.device)
            self._t0 = time.perf_counter()

    def on_step_end(self, state: TrainState) -> None:
        if self._t0 is None:
            return
        if state.device.type == "cuda":
            torch.cuda.synchronize(state.device)
        row: dict[str, float] = {
            "step": float(state.step),
            "loss": float(state.loss) if state.loss is not None else math.nan,
            "step_s": time.perf_counter() - self._t0,
        }
        self._t0 = None
        loss_fn = state.loss_fn
        if isinstance(loss_fn, FacilityLocationLoss) and loss_fn.last_stats:
            row.update(
                {col: float(loss_fn.last_stats[key]) for key, col in _INSIDE_COLUMNS.items()}
            )
        for key, value in row.items():
            self.log.setdefault(key, []).append(value)

    def state_dict(self) -> dict[str, dict[str, list[float]]]:
        return {"log": {str(k): [float(x) for x in v] for k, v in self.log.items()}}

    def load_state_dict(self, state: dict[str, dict[str, list[float]]]) -> None:
        self.log = {k: list(v) for k, v in state.get("log", {}).items()}
