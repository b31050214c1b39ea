"""How a PROFS run trains beyond its loss: the variant's batches, hooks and pair restriction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.utils.data import Sampler

from dmlnb.chapter import Components, Procedure, RunContext
from dmlnb.experiments.profs.losses import (
    LOSS_METHODS,
    LOSSES,
    TABLE2_LOSSES,
    VARIANTS,
    pair_mode,
)
from dmlnb.experiments.profs.profiles import REPORTED_LAMBDA
from dmlnb.hooks import Hook
from dmlnb.methods import MethodCall
from dmlnb.models import configured_model
from dmlnb.profiles import TrainConfig
from dmlnb.profs.proximal import LaggedProximalHook, ProximalHook
from dmlnb.profs.representative_pairs import RepresentativePairs
from dmlnb.profs.representatives import (
    HNCM_MODES,
    CenterRepresentatives,
    RepresentativeSampler,
)
from dmlnb.profs.timing import TimedSampler
from dmlnb.records import RunRecord
from dmlnb.samplers import MPerClassSampler

__all__ = [
    "build_components",
    "loss_config",
    "profs_loss",
    "ProfsProcedure",
    "loss_key",
    "ROW_KEYS",
]


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


#: A label of the chapter's runs (Table 1's or Table 2's row, or a loss key) -> the loss key.
ROW_KEYS: dict[str, str] = {**LOSSES, **TABLE2_LOSSES}


def loss_key(label: str, call: MethodCall | None = None) -> str:
    """The loss key of a run's ``label``: a row of :data:`LOSSES` / :data:`TABLE2_LOSSES`, or a
    key of :data:`~dmlnb.experiments.profs.losses.LOSS_METHODS` itself; for another label, the
    first key whose method is ``call``'s."""
    if label in ROW_KEYS:
        return ROW_KEYS[label]
    if label in LOSS_METHODS:
        return label
    for key, c in LOSS_METHODS.items():
        if call is not None and c.name == call.name:
            return key
    raise ValueError(f"unknown loss {label!r}; choose a row of {list(ROW_KEYS)}")


@dataclass(frozen=True)
class ProfsProcedure(Procedure):
    """How a group's runs train (:class:`dmlnb.chapter.Procedure`): the ``variant`` (``plain``,
    ``PROFS``, ``PROFS-HNCM``), ``M`` (``period``; SoftTriple makes a projection per step, so 1
    whatever it says), ``lam`` (the proximal term's weight), ``pairs`` (the pair restriction;
    ``None``: Sec. 5.3's for the loss, :func:`pair_mode`), ``proximal_params`` (``"all"``: Eq. 4.7,
    ``"backbone"``) and ``hncm_mode`` (how PROFS-HNCM picks classes). A plain run has no ``M``,
    ``lambda`` or restriction: the fields it would ignore are refused, so every field enters the
    runs' specifications (:meth:`spec_entries`) and a changed field trains them again.

    The specification and folder name are the chapter's from before the chapter layer (the
    committed records reload): ``{"loss", "variant", "period", "lam", "proximal_params"}``, plus
    ``"pairs"`` when the loss is restricted and ``"hncm_mode"`` when PROFS-HNCM does not use the
    greedy chain; the folder ``<key>-<variant>[-scan][-M<M>-lam<lambda>[-prox-<params>]][-rp]
    -b<batch>-seed<seed>`` (the batch from the group's changes, which always name it)."""

    variant: str = "PROFS"
    period: int | None = 1
    lam: float | None = REPORTED_LAMBDA
    pairs: str | None = None
    proximal_params: str = "all"
    hncm_mode: str = "greedy"

    #: the values of the fields that take one of a few names
    FIELD_CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {
        "variant": VARIANTS,
        "pairs": ("all", "any", "anchored", None),  # None: Sec. 5.3's mode for the loss
        "proximal_params": ("all", "backbone"),
        "hncm_mode": HNCM_MODES,
    }

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; choose one of {list(VARIANTS)}")
        if self.hncm_mode not in HNCM_MODES:
            raise ValueError(f"unknown hncm_mode {self.hncm_mode!r}; choose one of {HNCM_MODES}")
        plain = self.variant == "plain"
        if plain and self.hncm_mode != "greedy":
            raise ValueError(
                f"hncm_mode={self.hncm_mode!r} is PROFS-HNCM's; plain picks no classes"
            )
        ignored = (self.period, self.lam, self.pairs, None if self.proximal_params == "all" else 1)
        if plain and any(x is not None for x in ignored):
            raise ValueError("a plain run has no M, lambda, pair restriction or proximal term")
        if not plain and (self.period is None or self.lam is None):
            raise ValueError(f"{self.variant} needs M and lambda: period=..., lam=...")

    def m(self, key: str) -> int | None:
        """The ``M`` a run of loss ``key`` trains with (1 for SoftTriple; ``None`` for plain)."""
        if self.variant == "plain":
            return None
        return 1 if key == "softtriple" else int(self.period)  # type: ignore[arg-type]

    def spec_entries(self, label: str, call: MethodCall) -> dict[str, Any]:
        key = loss_key(label, call)
        spec: dict[str, Any] = {
            "loss": key,
            "variant": self.variant,
            "period": self.m(key),
            "lam": None if self.lam is None else float(self.lam),
            "proximal_params": self.proximal_params,
        }
        mode = pair_mode(key, self.variant, self.pairs)
        if mode != "all":  # "all" trains the loss unchanged: its records stay valid
            spec["pairs"] = mode
        if self.hncm_mode != "greedy":  # the greedy chain's records stay valid (PROFS ignores it)
            spec["hncm_mode"] = self.hncm_mode
        return spec

    def run_name(self, label: str, seed: int, changes: tuple[tuple[str, Any], ...]) -> str:
        key, batch = loss_key(label), dict(changes).get("batch_size")
        if batch is None:
            raise ValueError("a PROFS group's changes name its batch_size (the folder holds it)")
        scan = f"-{self.hncm_mode}" if self.hncm_mode != "greedy" else ""
        profs = ""
        if self.variant != "plain":
            prox = "" if self.proximal_params == "all" else f"-prox-{self.proximal_params}"
            profs = f"-M{self.m(key)}-lam{self.lam:g}{prox}"
        rp = "" if pair_mode(key, self.variant, self.pairs) == "all" else "-rp"
        return f"{key}-{self.variant}{scan}{profs}{rp}-b{batch}-seed{seed}"

    def configure(self, config: TrainConfig, label: str, call: MethodCall) -> TrainConfig:
        return loss_config(loss_key(label, call), config)

    def build(
        self, call: MethodCall, config: TrainConfig, splits: Any
    ) -> tuple[nn.Module, nn.Module]:
        # the network, then the loss, from one seed (the order the committed records were made in)
        model = configured_model(config, splits.input_shape)
        loss = call.build(num_classes=splits.num_train_classes, embedding_dim=config.embedding_dim)
        return model, loss

    def components(self, run: RunContext) -> Components:
        key = loss_key(run.label, run.call)
        loss = profs_loss(key, self.variant, run.loss, run.config, self.pairs)
        labels = torch.as_tensor(run.splits.train.labels)
        m, lam = self.m(key) or 1, self.lam or 0.0
        sampler, hooks = build_components(
            key, self.variant, run.model, loss, labels, run.config, m, lam,
            self.proximal_params, self.hncm_mode,
        )  # fmt: skip
        run.state["timed"] = sampler
        return Components(loss, sampler, hooks)

    def finish(self, run: RunContext, record: RunRecord) -> dict[str, Any]:
        timed = run.state["timed"]
        seconds = record.data.get("total_train_seconds") or sum(
            h["train_seconds"] for h in record.data["history"]
        )
        return {
            "period": self.m(loss_key(run.label, run.call)),
            "sampler_seconds": timed.seconds,
            "batches": timed.calls,
            "train_seconds": float(seconds),
        }
