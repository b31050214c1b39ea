"""How a PROFS run trains beyond its loss: the variant's batches, hooks and pair restriction."""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.data import Sampler

from dmlnb.experiments.profs.losses import (
    VARIANTS,
    pair_mode,
)
from dmlnb.hooks import Hook
from dmlnb.profiles import TrainConfig
from dmlnb.profs.proximal import LaggedProximalHook, ProximalHook
from dmlnb.profs.representative_pairs import RepresentativePairs
from dmlnb.profs.representatives import (
    CenterRepresentatives,
    RepresentativeSampler,
)
from dmlnb.profs.timing import TimedSampler
from dmlnb.samplers import MPerClassSampler

__all__ = ["build_components", "loss_config", "profs_loss"]


def profs_loss(
    key: str, variant: str, loss: nn.Module, config: TrainConfig, pairs: str | None = None
) -> nn.Module:
    """``loss`` as the variant trains it: PROFS and PROFS-HNCM wrap it in
    :class:`~dmlnb.profs.representative_pairs.RepresentativePairs` (``m = config.m_per_class``, mode
    :func:`pair_mode` ``(key, variant, pairs)``); ``plain`` runs and SoftTriple use it unchanged."""
    mode = pair_mode(key, variant, pairs)
    if variant == "plain" or key == "softtriple":
        return loss
    return RepresentativePairs(loss, config.m_per_class, mode)


def loss_config(key: str, config: TrainConfig) -> TrainConfig:
    """Per-loss changes to the shared configuration: N-pair trains unnormalised embeddings
    (its L2 penalty keeps their norm in check); SoftTriple's centres learn at ``config.loss_lr``
    when it is set (the paper profile's published 1e-2, :data:`TABLE2_SETUPS`), else 10x faster
    than the network."""
    if key == "npair":
        return config.replace(normalize=False)
    if key == "softtriple":
        return config.replace(loss_lr=config.loss_lr or 10.0 * config.lr)
    return config


def build_components(
    key: str,
    variant: str,
    model: nn.Module,
    loss: nn.Module,
    labels: Tensor,
    config: TrainConfig,
    period: int,
    lam: float,
    proximal_params: str = "all",
    hncm_mode: str = "greedy",
) -> tuple[Sampler, list[Hook]]:
    """The batch sampler and extra hooks of one variant.

    * ``plain``: :class:`~dmlnb.samplers.MPerClassSampler` (``I = m_per_class`` per class), no hook.
    * ``PROFS``: :class:`~dmlnb.profs.representatives.RepresentativeSampler` (``period = M``) and
      :class:`~dmlnb.profs.proximal.ProximalHook` (``lam``, the same ``M``, on all of the network's
      parameters as in Eq. 4.7). SoftTriple: every iteration is a subproblem, so the sampler
      renews the representatives every step and the proximal term is
      :class:`~dmlnb.profs.proximal.LaggedProximalHook` (``period`` is ignored).
    * ``PROFS-HNCM``: the same with hard negative class mining, picking classes by ``hncm_mode``
      (``"greedy"`` or the paper's ``O(L)`` ``"scan"``,
      :data:`~dmlnb.profs.representatives.HNCM_MODES`; the other variants ignore it); for SoftTriple
      the cluster centres are the representatives
      (:class:`~dmlnb.profs.representatives.CenterRepresentatives`).

    The sampler is wrapped in a :class:`TimedSampler` (it measures the bookkeeping time).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {list(VARIANTS)}")
    B, m, steps = config.batch_size, config.m_per_class, config.steps_per_epoch
    if variant == "plain":
        return TimedSampler(
            MPerClassSampler(labels, m=m, batch_size=B, seed=config.seed, num_batches=steps)
        ), []
    hncm = variant == "PROFS-HNCM"
    soft = key == "softtriple"
    sampler = RepresentativeSampler(
        labels,
        B,
        m,
        1 if soft else period,
        hncm=hncm,
        seed=config.seed,
        num_batches=steps,
        hncm_mode=hncm_mode if hncm else "greedy",
    )
    hooks: list[Hook] = []
    if soft:
        hooks.append(LaggedProximalHook(model, lam, params=proximal_params))
        if hncm:
            hooks.append(CenterRepresentatives(sampler, loss))
    else:
        hooks.append(ProximalHook(model, lam, period, params=proximal_params))
    return TimedSampler(sampler), hooks
