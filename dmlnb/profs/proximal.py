"""The PROFS proximal term (Can, Gürbüz & Alatan, Eq. 4.7): ``lambda/2 ||theta - theta_k||^2``
keeps the ``M`` steps of one approximate projection near its starting point ``theta_k``.

* :class:`ProximalHook`: the term's gradient, added after ``backward``, ``theta_k`` renewed every
  ``M`` steps with the representatives
  (:class:`~dmlnb.profs.representatives.RepresentativeSampler`);
* :class:`LaggedProximalHook`: SoftTriple's adaptation (Sec. 5.3), every iteration a subproblem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from dmlnb.hooks import Hook, TrainState

__all__ = ["ParamSelector", "ProximalHook", "LaggedProximalHook"]

#: ``model -> the parameters the proximal term acts on``.
ParamSelector = Callable[[nn.Module], Iterable[nn.Parameter]]


class ProximalHook(Hook):
    """The PROFS proximal term ``lambda/2 ||theta - theta_k||^2`` as a gradient edit.

    Eq. 4.7 / Algorithm 1 minimise ``L(theta; B) + lambda/2 ||theta_k - theta||^2`` during the
    ``M`` steps of projection ``k``; the term's gradient is added after ``backward``:

    .. math::  \\nabla_\\theta \\leftarrow \\nabla_\\theta + \\lambda\\,(\\theta - \\theta_k),

    which equals adding the penalty to the loss, without its forward pass. ``theta_k`` (a detached
    copy of the selected parameters) is taken at the start of every step ``s`` with
    ``s % period == 0``, the steps at which
    :class:`~dmlnb.profs.representatives.RepresentativeSampler` with the same ``M``
    renews its representatives (use ``period = 1`` for SoftTriple-PROFS, where every iteration is
    a subproblem, Sec. 5.3). A parameter with no gradient this step gets ``lambda (theta -
    theta_k)`` as its gradient, as the explicit penalty would give it. ``lam = 0`` is a no-op.

    The paper applies the term to all of ``theta``; the authors' later code to the backbone only,
    the default here. With a ``GradScaler`` the loop must unscale the gradients before
    :meth:`after_backward`.

    Args:
        model: the embedding network.
        lam: ``lambda >= 0`` (the paper: ``1e-3``).
        period: ``M``, steps between refreshes of ``theta_k``.
        params: ``"backbone"`` (the parameters of the feature extractor: ``model.trunk`` as in
            :class:`dmlnb.models.EmbeddingNet`, else ``model.backbone``), ``"all"``, or a callable
            ``model -> iterable of parameters``. Parameters with ``requires_grad=False`` are
            skipped.
    """

    def __init__(
        self,
        model: nn.Module,
        lam: float,
        period: int,
        params: str | ParamSelector = "backbone",
    ) -> None:
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        self.lam, self.period = float(lam), int(period)
        self.params = [p for p in _select(model, params) if p.requires_grad]
        if not self.params:
            raise ValueError("ProximalHook selected no trainable parameter; check `params`")
        self.anchor: list[Tensor] | None = None  # theta_k, one tensor per selected parameter

    def on_step_start(self, state: TrainState) -> None:
        """Take ``theta_k = theta`` at steps ``s % period == 0`` (and when none is held yet)."""
        if self.lam == 0:
            return
        if self.anchor is None or state.step % self.period == 0:
            self.anchor = [p.detach().clone() for p in self.params]

    def after_backward(self, state: TrainState) -> None:
        """``grad += lam * (theta - theta_k)`` for every selected parameter."""
        if self.lam == 0:
            return
        if self.anchor is None:
            raise RuntimeError(
                "ProximalHook.after_backward before any on_step_start: theta_k is unset"
            )
        with torch.no_grad():
            for p, anchor in zip(self.params, self.anchor):
                prox = (p - anchor) * self.lam
                if p.grad is None:
                    p.grad = prox
                else:
                    p.grad.add_(prox)

    def state_dict(self) -> dict[str, Any]:
        return {
            "anchor": None if self.anchor is None else [a.detach().clone() for a in self.anchor]
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        anchor = state["anchor"]
        if anchor is None:
            self.anchor = None
            return
        shapes = [a.shape for a in anchor]
        if shapes != [p.shape for p in self.params]:
            raise ValueError(
                "ProximalHook checkpoint does not match the selected parameters' shapes"
            )
        self.anchor = [a.to(p.device, p.dtype).clone() for a, p in zip(anchor, self.params)]


def _select(model: nn.Module, params: str | ParamSelector) -> list[nn.Parameter]:
    """The parameters ``ProximalHook`` acts on (see its ``params`` argument)."""
    if callable(params):
        return list(params(model))
    if params == "all":
        return list(model.parameters())
    if params == "backbone":
        for name in ("trunk", "backbone"):
            backbone = getattr(model, name, None)
            if isinstance(backbone, nn.Module):
                return list(backbone.parameters())
        raise ValueError(
            "params='backbone' needs model.trunk or model.backbone (an nn.Module), "
            f"{type(model).__name__} has neither; pass params='all' or a callable model -> "
            "parameters"
        )
    raise ValueError(f"params must be 'backbone', 'all' or a callable, got {params!r}")


class LaggedProximalHook(ProximalHook):
    r"""SoftTriple-PROFS's proximal term: every iteration is a subproblem (Sec. 5.3).

    SoftTriple has no pairs to re-use, so the paper treats each iteration as one projection
    (``M = 1``) and keeps only the regulariser "to entangle the updates of the iterations".
    Taken literally, Algorithm 1 with ``M = 1`` makes the term vanish: the anchor
    ``theta_k`` is the point the single gradient step starts from, where the gradient of
    ``lambda/2 ||theta - theta_k||^2`` is 0. Here the anchor lags one iteration, the start of
    the *previous* subproblem, so step ``t`` uses

    .. math::  \nabla_\theta \leftarrow \nabla_\theta + \lambda\,(\theta_t - \theta_{t-1}),

    which damps each update by the previous one (0 at the first step). That is our reading; the
    paper gives no formula for it.

    Args:
        model: the embedding network.
        lam: ``lambda >= 0``.
        params: as :class:`ProximalHook` (``"backbone"``, ``"all"`` or a callable).
    """

    def __init__(
        self, model: nn.Module, lam: float, params: str | ParamSelector = "backbone"
    ) -> None:
        super().__init__(model, lam, period=1, params=params)
        self.previous: list[Tensor] | None = None  # theta at the start of the previous step

    def on_step_start(self, state: TrainState) -> None:
        """``theta_k <- theta_{t-1}`` (``theta_t`` at the first step), then remember ``theta_t``."""
        if self.lam == 0:
            return
        current = [p.detach().clone() for p in self.params]
        self.anchor = self.previous if self.previous is not None else current
        self.previous = current

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out["previous"] = (
            None if self.previous is None else [a.detach().clone() for a in self.previous]
        )
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        previous = state.get("previous")
        if previous is None:
            self.previous = None
            return
        if [a.shape for a in previous] != [p.shape for p in self.params]:
            raise ValueError(
                "LaggedProximalHook checkpoint does not match the selected parameters' shapes"
            )
        self.previous = [a.to(p.device, p.dtype).clone() for a, p in zip(previous, self.params)]
