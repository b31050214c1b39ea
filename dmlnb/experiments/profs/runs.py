"""The PROFS chapter's runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dmlnb.experiments.profs.losses import (
    LOSSES,
    TABLE2_LOSSES,
    VARIANTS,
    collapse_level,
    loss_method,
    pair_mode,
)
from dmlnb.experiments.profs.procedure import (
    build_components,
    loss_config,
    profs_loss,
)
from dmlnb.experiments.profs.profiles import (
    REPORTED_LAMBDA,
    period_for,
    table2_config,
    table_rows,
)
from dmlnb.methods import from_spec
from dmlnb.models import build_model
from dmlnb.profiles import TrainConfig
from dmlnb.profs.representatives import (
    HNCM_MODES,
)
from dmlnb.profs.timing import TimedSampler
from dmlnb.records import RunRecord
from dmlnb.reporting import (
    collapsed,
)
from dmlnb.runs import train_or_reload
from dmlnb.training import train

__all__ = [
    "COMPONENT_STEPS",
    "ProfsRun",
    "RunIdentity",
    "chapter_runs",
    "component_runs",
    "run_identity",
    "run_name",
    "run_variant",
]


# ----------------------------------------------------------------------------------------------
# Runs
# ----------------------------------------------------------------------------------------------


@dataclass
class ProfsRun:
    """One finished run: loss key, variant, record and extras (``period``,
    ``sampler_seconds``, ``train_seconds``, ``steps``)."""

    key: str
    variant: str
    record: RunRecord
    extras: dict[str, Any] = field(default_factory=dict)
    trained: bool = False

    @property
    def metrics(self) -> dict[str, float]:
        """Test metrics of the best epoch."""
        return self.record.best["metrics"]  # type: ignore[index]

    @property
    def collapsed(self) -> bool:
        """Whether the run is collapsed by the book's criterion (:func:`dmlnb.reporting.collapsed`):
        its training loss stays within 2.5% of its loss's value on a collapsed embedding
        (:func:`collapse_level`) over its last two epochs; never for a loss without such a value."""
        level = collapse_level(self.key, int(self.record.data["config"]["embedding_dim"]))
        return level is not None and collapsed(self.record.training_losses(), level)

    @property
    def bookkeeping_share(self) -> float:
        """Share of the training steps' time spent in the sampler (building batches, HNCM, storing
        representatives)."""
        return self.extras["sampler_seconds"] / max(self.extras["train_seconds"], 1e-12)


def run_name(
    key: str,
    variant: str,
    config: TrainConfig,
    period: int | None,
    lam: float | None,
    proximal_params: str = "all",
    pairs: str | None = None,
    hncm_mode: str = "greedy",
) -> str:
    """Folder name of a run: loss, variant (``-scan`` for PROFS-HNCM with ``hncm_mode="scan"``),
    (M, lambda for PROFS, ``-prox-backbone`` when the proximal term acts on the backbone only),
    ``-rp`` when the variant restricts the loss's pairs to the representatives'
    (:func:`pair_mode` not ``"all"``), batch size, seed."""
    scan = "-scan" if variant == "PROFS-HNCM" and hncm_mode != "greedy" else ""
    profs = (
        ""
        if variant == "plain"
        else f"-M{period}-lam{lam:g}"
        + ("" if proximal_params == "all" else f"-prox-{proximal_params}")
    )
    rp = "" if pair_mode(key, variant, pairs) == "all" else "-rp"
    return f"{key}-{variant}{scan}{profs}{rp}-b{config.batch_size}-seed{config.seed}"


def _spec(
    key: str,
    variant: str,
    period: int | None,
    lam: float | None,
    proximal_params: str = "all",
    pairs: str | None = None,
    hncm_mode: str = "greedy",
) -> dict[str, Any]:
    spec = {
        "loss": key,
        "factory": loss_method(key).spec,
        "variant": variant,
        "period": period,
        "lam": lam,
        "proximal_params": proximal_params if variant != "plain" else "all",
    }
    mode = pair_mode(key, variant, pairs)
    if mode != "all":  # "all" trains the loss unchanged: its records stay valid
        spec["pairs"] = mode
    if variant == "PROFS-HNCM" and hncm_mode != "greedy":  # the greedy chain's records stay valid
        spec["hncm_mode"] = hncm_mode
    return spec


@dataclass(frozen=True)
class RunIdentity:
    """What one run is before it trains: its folder ``name``, the configuration it trains
    (``config``, :func:`loss_config` applied), its method specification ``spec`` (with ``config``
    its fingerprint, :func:`dmlnb.records.run_fingerprint`), ``M`` (``period``, ``None`` for
    plain runs), ``lam`` (``None`` for plain runs), its pair restriction ``pairs``
    and ``hncm_mode``."""

    key: str
    variant: str
    name: str
    config: TrainConfig
    spec: dict[str, Any]
    period: int | None
    lam: float | None
    pairs: str
    proximal_params: str = "all"
    hncm_mode: str = "greedy"


def run_identity(
    key: str,
    variant: str,
    config: TrainConfig,
    num_classes: int,
    *,
    rho: float | None = None,
    period: int | None = None,
    lam: float = REPORTED_LAMBDA,
    proximal_params: str = "all",
    pairs: str | None = None,
    hncm_mode: str = "greedy",
) -> RunIdentity:
    """The :class:`RunIdentity` of one (loss, variant) run with seed ``config.seed`` on
    ``num_classes`` training classes: what :func:`run_variant` trains or reloads, computed without
    data or training.

    ``M`` is ``period`` when given, else :func:`period_for` ``(rho)``, and 1 for SoftTriple (every
    iteration a subproblem); ``plain`` runs ignore ``M``, ``lambda``, ``pairs`` and ``hncm_mode``
    (a PROFS run ignores ``hncm_mode``). ``pairs`` overrides :func:`pair_mode`.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {list(VARIANTS)}")
    if hncm_mode not in HNCM_MODES:
        raise ValueError(f"unknown hncm_mode {hncm_mode!r}; choose one of {list(HNCM_MODES)}")
    cfg = loss_config(key, config)
    if variant == "plain":
        period, lam_used, pairs = None, None, None
    else:
        if key == "softtriple":
            period = 1  # every iteration is a subproblem (Sec. 5.3)
        elif period is None:
            if rho is None:
                raise ValueError("PROFS needs M: pass period= or rho=")
            period = period_for(cfg, num_classes, rho)
        lam_used = float(lam)
    hncm_mode = hncm_mode if variant == "PROFS-HNCM" else "greedy"
    return RunIdentity(
        key=key,
        variant=variant,
        name=run_name(key, variant, cfg, period, lam_used, proximal_params, pairs, hncm_mode),
        config=cfg,
        spec=_spec(key, variant, period, lam_used, proximal_params, pairs, hncm_mode),
        period=period,
        lam=lam_used,
        pairs=pair_mode(key, variant, pairs),
        proximal_params=proximal_params,
        hncm_mode=hncm_mode,
    )


def run_variant(
    key: str,
    variant: str,
    config: TrainConfig,
    splits: Any,
    runs_dir: str | Path | None,
    *,
    rho: float | None = None,
    period: int | None = None,
    lam: float = REPORTED_LAMBDA,
    retrain: bool = False,
    progress: bool = False,
    proximal_params: str = "all",
    pairs: str | None = None,
    hncm_mode: str = "greedy",
) -> ProfsRun:
    """Train one (loss, variant) run with seed ``config.seed``, or reload its finished record.

    The run is :func:`run_identity` ``(key, variant, config, ...)`` (``M``, ``lambda``, the pair
    restriction ``pairs``, ``hncm_mode``); it lives in ``runs_dir / name``; a finished record of the
    same configuration and PROFS settings (:func:`dmlnb.runs.train_or_reload`) is reloaded unless
    ``retrain``. With a validation split (``splits.validation``) every evaluation measures it too
    and the best epoch is the one ``config.select_on`` names.
    """
    ident = run_identity(
        key,
        variant,
        config,
        splits.num_train_classes,
        rho=rho,
        period=period,
        lam=lam,
        proximal_params=proximal_params,
        pairs=pairs,
        hncm_mode=hncm_mode,
    )
    cfg, name = ident.config, ident.name
    labels = torch.as_tensor(splits.train.labels)
    num_classes = splits.num_train_classes
    run_dir = Path(runs_dir) / name if runs_dir is not None else None
    timed: list[TimedSampler] = []

    def train_run(resume: bool) -> tuple[RunRecord, nn.Module]:
        torch.manual_seed(cfg.seed)
        model = build_model(
            cfg.model,
            splits.input_shape,
            cfg.embedding_dim,
            normalize=cfg.normalize,
            pretrained=cfg.pretrained,
            width=cfg.width,
        )
        base = from_spec(ident.spec["factory"]).build(
            num_classes=num_classes, embedding_dim=cfg.embedding_dim
        )
        loss = profs_loss(key, variant, base, cfg, ident.pairs)
        sampler, hooks = build_components(
            key,
            variant,
            model,
            loss,
            labels,
            cfg,
            ident.period or 1,
            ident.lam or 0.0,
            proximal_params,
            ident.hncm_mode,
        )
        timed.append(sampler)
        eval_set = splits.query if splits.query is not None else splits.test
        record = train(
            model,
            loss,
            splits.train,
            eval_set,
            cfg,
            sampler=sampler,
            hooks=hooks,
            gallery_set=splits.gallery,
            run_dir=run_dir,
            resume=resume,
            progress=progress,
            name=name,
            spec=ident.spec,
            val_set=splits.validation,
        )
        return record, model

    def finish(record: RunRecord, model: nn.Module | None) -> dict[str, Any]:
        return {
            "period": ident.period,
            "sampler_seconds": timed[-1].seconds,
            "batches": timed[-1].calls,
            "train_seconds": float(
                record.data.get("total_train_seconds")
                or sum(h["train_seconds"] for h in record.data["history"])
            ),
        }

    done = train_or_reload(
        name, run_dir, cfg, ident.spec, train_run, finish=finish, retrain=retrain
    )
    return ProfsRun(key, variant, done.record, done.extras, trained=done.trained)


#: The component ablation's steps (issue #17): PROFS's ingredients added one at a time, each the
#: :func:`run_variant` arguments of a ``PROFS`` run (``lam=None``: the profile's ``lambda``).
#:
#: * ``"representatives"``: PROFS's batches (one representative per class kept ``M`` steps, as the
#:   first of its group) with every pair of the loss and no proximal term;
#: * ``"+ pair restriction"``: the pairs restricted to those anchored at a
#:   representative (Sec. 5.3);
#: * ``"+ proximal term"``: ``lambda/2 ||theta - theta_k||^2`` added: Table 1's PROFS run.
COMPONENT_STEPS: dict[str, dict[str, Any]] = {
    "representatives": {"pairs": "all", "lam": 0.0},
    "+ pair restriction": {"pairs": None, "lam": 0.0},
    "+ proximal term": {"pairs": None, "lam": None},
}


def component_runs(settings: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The component ablation: ``(Table 1 row, step of COMPONENT_STEPS, run_variant arguments)``
    for every loss of ``settings["component_losses"]``; train each ``PROFS`` with every seed of
    ``settings["component_seeds"]`` (Table 1's plain runs are the reference without any
    ingredient). Empty while ``settings["component_ablation"]`` is off, so the chapter runs
    nothing more.

    With the pair restriction and the proximal term both off, a run differs from a plain run only
    by its batches; the last step is Table 1's PROFS run, and at the paper profile the
    ``"+ pair restriction"`` run of Margin-Hard is the lambda sweep's ``lambda = 0`` run (same
    fingerprint), so both are reloaded, not trained again.
    """
    if not settings.get("component_ablation"):
        return []
    return [
        (
            row,
            step,
            {"pairs": kw["pairs"], "lam": settings["lam"] if kw["lam"] is None else kw["lam"]},
        )
        for row in settings["component_losses"]
        for step, kw in COMPONENT_STEPS.items()
    ]


def chapter_runs(
    config: TrainConfig, settings: Mapping[str, Any], num_classes: int
) -> list[RunIdentity]:
    """Every training run of the chapter, as ``notebooks/04_profs.ipynb`` asks for them, without
    data or training: Tables 1 and 2, the M ablation, the lambda sweep, the HNCM regime (the small
    batch), the proximal term on the backbone only and, when switched on, the component ablation
    (:func:`component_runs`); each once (a run several sections share is listed once).

    Args:
        config: the chapter's :func:`experiment_config`; ``settings``: its
            :func:`experiment_settings`.
        num_classes: the training classes ``L`` of ``config.dataset`` (``M`` depends on it).
    """
    rho, lam, mode = settings["rho"], settings["lam"], settings.get("hncm_mode", "greedy")
    out: dict[str, RunIdentity] = {}

    def add(
        row: str,
        variant: str,
        seed: int,
        table: Mapping[str, str] = LOSSES,
        base: TrainConfig | None = None,
        **kw: Any,
    ) -> None:
        cfg = (base if base is not None else table2_config(config, row, settings)).replace(
            seed=seed
        )
        kw = {"rho": rho, "lam": lam, **kw}
        ident = run_identity(table[row], variant, cfg, num_classes, hncm_mode=mode, **kw)
        out.setdefault(ident.name, ident)

    for row in table_rows(settings, 1):
        for variant in VARIANTS:
            for seed in settings["seeds"]:
                add(row, variant, seed)
    for row in table_rows(settings, 2):
        for variant in VARIANTS:
            for seed in settings["table2_seeds"]:
                add(row, variant, seed, table=TABLE2_LOSSES)
    period = period_for(config, num_classes, rho)
    for row in settings["ablation_losses"]:
        for m in sorted(set(settings["m_grid"]) | {period}):
            for seed in settings["sweep_seeds"]:
                add(row, "PROFS", seed, period=m)
    for value in settings["lambda_grid"]:
        for seed in settings["sweep_seeds"]:
            add(settings["lambda_loss"], "PROFS", seed, lam=value)
    if settings["regime_batch"]:
        small = config.replace(batch_size=settings["regime_batch"])
        for variant in ("PROFS", "PROFS-HNCM"):
            for seed in settings["regime_seeds"]:
                add(settings["regime_loss"], variant, seed, base=small)
    for seed in settings["backbone_seeds"]:
        add("Contrastive-Hard", "PROFS", seed, proximal_params="backbone")
    for row, _, kw in component_runs(settings):
        for seed in settings["component_seeds"]:
            add(row, "PROFS", seed, **kw)
    return list(out.values())
