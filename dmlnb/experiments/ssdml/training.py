"""The SSDML chapter: training."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from dmlnb.checkpoints import load_checkpoint
from dmlnb.data import DatasetSplits
from dmlnb.evaluation import knn
from dmlnb.experiments.ssdml.network import (
    build_network,
    embedding_spectrum,
    load_splits,
    objective_method,
    pretrain_softmax,
    triplet_purity,
)
from dmlnb.experiments.ssdml.profile_settings import settings_for
from dmlnb.experiments.ssdml.settings import (
    NAMES,
    SEMI_SUPERVISED,
    Setting,
    with_hyper,
)
from dmlnb.methods import from_spec
from dmlnb.plots import tsne
from dmlnb.records import RunRecord, run_fingerprint
from dmlnb.runs import train_or_reload
from dmlnb.ssdml.algorithm import (
    embed,
    run_spec,
    train_ssdml,
)

# --------------------------------------------------------------------------- runs


@dataclass
class MethodRun:
    """One finished run: its record, and the trained network / objective when trained now."""

    method: str
    seed: int
    record: RunRecord
    trained: bool

    @property
    def best(self) -> dict[str, float]:
        return self.record.best["metrics"]  # type: ignore[index]

    @property
    def initial(self) -> dict[str, float] | None:
        first = self.record.data["history"][0]
        return first["metrics"] if first["epoch"] == 0 else None

    @property
    def extras(self) -> dict[str, Any]:
        return self.record.data.get("extras", {})


def _spec(method: str, setting: Setting, alpha: float) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "method": method,
        "setting": setting.name,
        "labelled_per_class": setting.labelled_per_class,
        "metric_dim": setting.metric_dim,
        "pretrain_epochs": setting.pretrain_epochs,
    }
    if method in ("ours", "ours-noorth", "ours-outside", "angular"):
        spec["alpha"] = alpha
    if method in ("ours", "ours-noorth", "ours-outside"):
        spec.update(k=setting.k, gamma=setting.gamma)
        # named only when not the paper's, so the records made before the options still reload
        spec.update(
            {
                key: getattr(setting, key)
                for key, paper in _PAPER_MINING.items()
                if getattr(setting, key) != paper
            }
        )
    if method in SEMI_SUPERVISED or setting.baseline_hyper.get(method):
        spec["hyper"] = setting.baseline_hyper.get(method, {})
    return spec


# The proposed method's mining as the paper states it (Setting.propagation, Setting.negatives).
_PAPER_MINING = {"propagation": "one-sided", "negatives": "neighbourhood"}


def _query_rows(n: int, count: int, seed: int = 0) -> list[int]:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:count].tolist()


def run_method(
    method: str,
    setting: Setting,
    profile: str,
    seed: int,
    splits: DatasetSplits,
    results_dir: str | Path | None,
    *,
    alpha: float | None = None,
    overrides: Mapping[str, Any] | None = None,
    retrain: bool = False,
    progress: bool = False,
    tsne_points: bool | None = None,
    retrieval_queries: int = 6,
    tag: str = "",
    made: Sequence[MethodRun] = (),
) -> MethodRun:
    """Train ``method`` by Algorithm 1 (seed ``seed``) or reload its finished record.

    The supervised baselines see the labelled part only (``unlabelled=None``). After training,
    the best checkpoint's test embedding ``Lᵀ z`` gives the record's ``extras``: ``spectrum``
    (:func:`embedding_spectrum`), ``neighbours`` (top-5 Euclidean neighbours of
    ``retrieval_queries`` fixed test queries, Figure 3) and, with ``tsne_points`` (default: the
    proposed method, with or without orthogonality, at the setting's first seed and own ``α``),
    its 2-D t-SNE coordinates (Figure 2, right). Through the run layer
    (:func:`dmlnb.runs.train_or_reload`): the specification holds the schedule, the method's
    settings and what is stored after training. ``tag`` is added to the run's name (its folder),
    e.g. a hyper-parameter value of a search. ``made``: runs already made under other names (a
    search's); the one whose fingerprint (:func:`dmlnb.records.run_fingerprint`) is this run's is
    returned (``trained=False``) instead of this run being trained, or reloaded, a second time.
    """
    alpha = setting.alpha if alpha is None else alpha
    if tsne_points is None:
        tsne_points = (
            seed == setting.seeds[0]
            and method in ("ours", "ours-noorth")
            and alpha == setting.alpha
        )
    cfg = setting.train_config(profile, seed, overrides)
    method_spec = _spec(method, setting, alpha)
    spec = {
        **run_spec(setting.schedule, method_spec),
        "tsne": bool(tsne_points),
        "retrieval_queries": retrieval_queries,
        "factory": objective_method(method, setting, alpha).spec,
    }
    fingerprint = run_fingerprint(cfg, spec)
    same = [r for r in made if r.record.data["fingerprint"] == fingerprint]
    if same:
        return replace(same[0], trained=False)
    tag = (f"-alpha{alpha:g}" if alpha != setting.alpha else "") + tag
    name = f"{setting.name}-{method}{tag}-seed{seed}"
    run_dir = Path(results_dir) / profile / name if results_dir is not None else None
    parts: dict[str, nn.Module] = {}

    def train_run(resume: bool) -> tuple[RunRecord, nn.Module]:
        torch.manual_seed(cfg.seed)
        network, dim = build_network(cfg, splits.input_shape)
        objective = from_spec(spec["factory"]).build(embedding_dim=dim)
        if setting.pretrain_epochs:
            pretrain_softmax(
                network, dim, splits.train, splits.num_train_classes, cfg, setting.pretrain_epochs
            )
        supervised = method in ("triplet", "angular")
        targets = torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])  # type: ignore[union-attr]
        record = train_ssdml(
            network,
            objective,
            splits.train,
            None if supervised else splits.unlabelled,
            splits.test,
            cfg,
            setting.schedule,
            spec=spec,
            run_dir=run_dir,
            resume=resume,
            progress=progress,
            name=f"{setting.name}-{method}-seed{seed}",
            diagnose=triplet_purity(targets),
            val_set=splits.validation,
        )
        parts.update(network=network, objective=objective)
        return record, network

    def finish(record: RunRecord, model: nn.Module | None) -> dict[str, Any]:
        network, objective = parts["network"], parts["objective"]
        if run_dir is not None and (run_dir / "best.pt").exists():
            state = load_checkpoint(run_dir / "best.pt")
            network.load_state_dict(state["model"])
            objective.load_state_dict(
                {k.removeprefix("objective."): v for k, v in state["loss"].items()}
            )
        emb, lab = embed(network, objective.metric, splits.test, cfg.eval_batch_size)  # type: ignore[arg-type]
        queries = _query_rows(len(lab), retrieval_queries)
        neighbours = knn(emb, None, k=5, metric="euclidean")[1][
            queries
        ]  # (Q, 5), the query itself excluded
        extras: dict[str, Any] = {
            "spectrum": embedding_spectrum(emb),
            "queries": queries,
            "neighbours": neighbours.tolist(),
        }
        if tsne_points:
            extras["tsne"] = np.round(tsne(emb, seed=0), 3).tolist()
        return extras

    done = train_or_reload(name, run_dir, cfg, spec, train_run, finish=finish, retrain=retrain)
    return MethodRun(method, seed, done.record, trained=done.trained)


def run_setting(
    key: str,
    profile: str,
    results_dir: str | Path | None,
    *,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    retrain: bool = False,
    data_root: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = False,
    validation: bool | float | int | None = None,
    hyper: Mapping[str, Mapping[str, Any]] | None = None,
    searched: Mapping[str, Mapping[float, Sequence[MethodRun]]] | None = None,
) -> dict[str, list[MethodRun]]:
    """Every method of setting ``key`` with every seed (train or reload); ``{method: [runs]}``.

    The setting's first seed of the proposed method (with and without orthogonality) also stores
    its t-SNE coordinates (Figure 2, :func:`run_method`). The labelled draw uses the run's seed.
    ``validation``: where the runs choose their best epoch (:func:`settings_for`). ``hyper``
    (``{method: {name: value}}``, e.g. :func:`chosen_hyper` of a :func:`run_baseline_search`)
    replaces those baseline hyper-parameters of the setting. ``searched``: that search itself; a
    baseline run it already made (the chosen value at the search's seed) is taken from it, not
    made again under the baseline's name (``made`` of :func:`run_method`).
    """
    setting = with_hyper(settings_for(profile, validation)[key], hyper or {})
    made = [r for by_value in (searched or {}).values() for rs in by_value.values() for r in rs]
    seeds = tuple(setting.seeds if seeds is None else seeds)
    methods = tuple(setting.methods if methods is None else methods)
    out: dict[str, list[MethodRun]] = {m: [] for m in methods}
    for seed in seeds:
        splits = load_splits(
            setting, setting.train_config(profile, seed, overrides), seed, data_root
        )
        for method in methods:
            if method in setting.single_seed_methods and seed != seeds[0]:
                continue
            out[method].append(
                run_method(
                    method,
                    setting,
                    profile,
                    seed,
                    splits,
                    results_dir,
                    overrides=overrides,
                    retrain=retrain,
                    progress=progress,
                    made=made,
                )
            )
    return out


def run_alpha_grid(
    key: str,
    profile: str,
    results_dir: str | Path | None,
    *,
    seeds: Sequence[int] | None = None,
    retrain: bool = False,
    data_root: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: bool = False,
    validation: bool | float | int | None = None,
) -> dict[float, list[MethodRun]]:
    """The proposed method at each angle of ``alpha_grid`` and the setting's own ``α`` with every
    seed (``seeds``, default the setting's; Figure 2, middle): ``{α: [runs per seed]}``. The runs
    at the setting's own ``α`` are those of the main comparison (reloaded, not retrained).
    ``validation``: where the runs choose their best epoch (:func:`settings_for`)."""
    setting = settings_for(profile, validation)[key]
    alphas = sorted({*setting.alpha_grid, setting.alpha})
    out: dict[float, list[MethodRun]] = {a: [] for a in alphas}
    for seed in tuple(setting.seeds if seeds is None else seeds):
        splits = load_splits(
            setting, setting.train_config(profile, seed, overrides), seed, data_root
        )
        for a in alphas:
            out[a].append(
                run_method(
                    "ours",
                    setting,
                    profile,
                    seed,
                    splits,
                    results_dir,
                    alpha=a,
                    overrides=overrides,
                    retrain=retrain,
                    progress=progress,
                )
            )
    return out


def results_frame(
    runs: Mapping[str, Sequence[MethodRun]],
    metrics: Sequence[str] = ("NMI", "R@1", "R@2", "R@4", "R@8"),
    initial: bool = True,
) -> dict[str, list[dict[str, float]]]:
    """``{row name: [best metrics per seed]}`` for :func:`dmlnb.reporting.summarize_runs`, with an
    ``"Initial"`` row (the networks at initialisation, the first method's seeds)."""
    out: dict[str, list[dict[str, float]]] = {}
    first = next(iter(runs.values()), [])
    if initial and first and first[0].initial is not None:
        out["Initial"] = [r.initial for r in first]  # type: ignore[misc]
    for method, rs in runs.items():
        out[NAMES[method]] = [{m: r.best[m] for m in metrics if m in r.best} for r in rs]
    return out
