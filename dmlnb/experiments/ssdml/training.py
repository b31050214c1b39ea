"""The SSDML chapter's runs trained or reloaded by Algorithm 1 into one
:class:`dmlnb.chapter.RunSet` (the runs declared in :mod:`dmlnb.experiments.ssdml.spec`).

Every run goes through :func:`dmlnb.runs.train_or_reload` (shards, training disabled and the
reload checks work as for every chapter). Runs declared alike (one fingerprint), in one group or
several, or already made (``made``, e.g. the baselines' search), are one run: trained once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dmlnb.chapter import RunSet
from dmlnb.checkpoints import load_checkpoint
from dmlnb.data import DatasetSplits
from dmlnb.evaluation import knn
from dmlnb.experiments.ssdml.network import (
    build_network,
    embedding_spectrum,
    load_splits,
    pretrain_softmax,
    triplet_purity,
)
from dmlnb.experiments.ssdml.settings import NAMES
from dmlnb.experiments.ssdml.spec import SSDMLGroup, SSDMLRun, alpha_group_name, initial_of
from dmlnb.methods import from_spec
from dmlnb.plots import tsne
from dmlnb.profiles import TrainConfig
from dmlnb.records import RunRecord, run_fingerprint
from dmlnb.runs import Run, train_or_reload
from dmlnb.ssdml.algorithm import embed, train_ssdml

__all__ = ["train_groups", "train_run", "by_method", "alpha_runs", "results_frame", "query_rows"]


def query_rows(n: int, count: int, seed: int = 0) -> list[int]:
    """``count`` fixed test rows of ``n`` (Figure 3's queries), drawn with ``seed``."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:count].tolist()


def train_groups(
    groups: Mapping[str, SSDMLGroup],
    profile: str,
    results_dir: str | Path | None,
    *,
    overrides: Mapping[str, Any] | None = None,
    data_root: str | Path | None = None,
    retrain: bool = False,
    progress: bool = False,
    made: RunSet | None = None,
    load: Callable[[SSDMLRun, TrainConfig], DatasetSplits] | None = None,
) -> RunSet:
    """Train or reload every run of ``groups`` (``results_dir/profile/<run name>``; ``None``: in
    memory): ``RunSet.runs[group][(method, seed)]``. A run whose fingerprint is one of ``made``'s
    or an earlier declaration's is that run (not trained, nor reloaded, again). Each seed's
    labelled draw is loaded once per setting, and only when a run trains (``load(run, config)``;
    default :func:`~dmlnb.experiments.ssdml.network.load_splits`).

    Raises:
        ValueError: two declared runs share a folder but not a fingerprint.
    """
    known: dict[str, Run] = {
        r.record.data["fingerprint"]: r
        for g in (made.runs.values() if made is not None else ())
        for r in g.values()
    }
    folders: dict[str, str] = {}
    splits: dict[tuple[str, int], DatasetSplits] = {}
    out: dict[str, dict[tuple[str, int], Run]] = {}
    for group, declared in groups.items():
        out[group] = {}
        for run in declared.runs():
            cfg = run.config(profile, overrides)
            fingerprint = run_fingerprint(cfg, run.spec)
            if folders.setdefault(run.name, fingerprint) != fingerprint:
                raise ValueError(f"run {run.name!r} is declared twice with different methods")
            if fingerprint not in known:

                def data(run: SSDMLRun = run, cfg: TrainConfig = cfg) -> DatasetSplits:
                    key = (run.setting.name, run.seed)
                    if key not in splits:
                        splits[key] = (
                            load(run, cfg)
                            if load is not None
                            else load_splits(run.setting, cfg, run.seed, data_root)
                        )
                    return splits[key]

                folder = Path(results_dir) / profile / run.name if results_dir else None
                known[fingerprint] = train_run(run, cfg, data, folder, retrain, progress)
            out[group][(run.method, run.seed)] = known[fingerprint]
    return RunSet(out)


def train_run(
    run: SSDMLRun,
    cfg: TrainConfig,
    data: Callable[[], DatasetSplits],
    folder: Path | None,
    retrain: bool = False,
    progress: bool = False,
) -> Run:
    """Train ``run`` by Algorithm 1 or reload its finished record (:func:`train_or_reload`).

    The supervised baselines see the labelled part only. After training, the best checkpoint's
    test embedding ``Lᵀ z`` gives the record's ``extras`` (:func:`_extras`)."""
    spec, parts = run.spec, {}

    def train(resume: bool) -> tuple[RunRecord, nn.Module]:
        splits = data()
        torch.manual_seed(cfg.seed)
        network, dim = build_network(cfg, splits.input_shape)
        objective = from_spec(spec["factory"]).build(embedding_dim=dim)
        if run.setting.pretrain_epochs:
            pretrain_softmax(
                network,
                dim,
                splits.train,
                splits.num_train_classes,
                cfg,
                run.setting.pretrain_epochs,
            )
        supervised = run.method in ("triplet", "angular")
        targets = torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])  # type: ignore[union-attr]
        record = train_ssdml(
            network,
            objective,
            splits.train,
            None if supervised else splits.unlabelled,
            splits.test,
            cfg,
            run.setting.schedule,
            spec=spec,
            run_dir=folder,
            resume=resume,
            progress=progress,
            name=f"{run.setting.name}-{run.method}-seed{run.seed}",
            diagnose=triplet_purity(targets),
            val_set=splits.validation,
        )
        parts.update(network=network, objective=objective)
        return record, network

    def finish(record: RunRecord, model: nn.Module | None) -> dict[str, Any]:
        return _extras(run, cfg, data(), folder, parts["network"], parts["objective"])

    return train_or_reload(run.name, folder, cfg, spec, train, finish=finish, retrain=retrain)


def _extras(
    run: SSDMLRun,
    cfg: TrainConfig,
    splits: DatasetSplits,
    folder: Path | None,
    network: nn.Module,
    objective: nn.Module,
) -> dict[str, Any]:
    """What a run stores after training, from its best checkpoint's test embedding ``Lᵀ z``:
    ``spectrum`` (:func:`embedding_spectrum`), ``queries`` and their top-5 Euclidean
    ``neighbours`` (Figure 3) and, with ``run.tsne``, the 2-D t-SNE coordinates (Figure 2)."""
    if folder is not None and (folder / "best.pt").exists():
        state = load_checkpoint(folder / "best.pt")
        network.load_state_dict(state["model"])
        objective.load_state_dict(
            {k.removeprefix("objective."): v for k, v in state["loss"].items()}
        )
    emb, lab = embed(network, objective.metric, splits.test, cfg.eval_batch_size)  # type: ignore[arg-type]
    queries = query_rows(len(lab), run.retrieval_queries)
    neighbours = knn(emb, None, k=5, metric="euclidean")[1][queries]  # (Q, 5), self excluded
    extras: dict[str, Any] = {
        "spectrum": embedding_spectrum(emb),
        "queries": queries,
        "neighbours": neighbours.tolist(),
    }
    if run.tsne:
        extras["tsne"] = np.round(tsne(emb, seed=0), 3).tolist()
    return extras


def by_method(runs: RunSet, group: str) -> dict[str, list[Run]]:
    """``{method: [runs, by seed]}`` of ``group``, in declaration order."""
    out: dict[str, list[Run]] = {}
    for (method, seed), run in sorted(runs.runs[group].items(), key=lambda kv: kv[0][1]):
        out.setdefault(method, []).append(run)
    order = list(dict.fromkeys(m for m, _ in runs.runs[group]))
    return {m: out[m] for m in order}


def results_frame(
    runs: Mapping[str, Sequence[Run]],
    metrics: Sequence[str] = ("NMI", "R@1", "R@2", "R@4", "R@8"),
    initial: bool = True,
) -> dict[str, list[dict[str, float]]]:
    """``{row name: [best metrics per seed]}`` for :func:`dmlnb.reporting.summarize_runs`, with an
    ``"Initial"`` row (the networks at initialisation, the first method's seeds)."""
    out: dict[str, list[dict[str, float]]] = {}
    first = next(iter(runs.values()), [])
    if initial and first and initial_of(first[0]) is not None:
        out["Initial"] = [initial_of(r) for r in first]  # type: ignore[misc]
    for method, rs in runs.items():
        out[NAMES[method]] = [{m: r.metrics[m] for m in metrics if m in r.metrics} for r in rs]
    return out


def alpha_runs(runs: RunSet, key: str, setting: Any) -> dict[float, list[Run]]:
    """``{α: [runs, by seed]}``: the proposed method at each angle of ``setting``'s α grid and at
    its own α (:func:`~dmlnb.experiments.ssdml.spec.alpha_group_name` groups of ``key``)."""
    angles = sorted({*setting.alpha_grid, setting.alpha})
    return {a: by_method(runs, alpha_group_name(key, a))["ours"] for a in angles}
