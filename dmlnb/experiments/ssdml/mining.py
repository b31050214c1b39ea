"""The SSDML chapter: mining."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

import pandas as pd
import torch
from torch import Tensor, nn

from dmlnb.data import DatasetSplits
from dmlnb.data.base import InMemoryDataset
from dmlnb.experiments.ssdml.network import build_network, load_splits, pretrain_softmax
from dmlnb.experiments.ssdml.settings import Setting
from dmlnb.reporting import Verdict, paired_differences
from dmlnb.runs import Table, stored_tables
from dmlnb.ssdml.algorithm import (
    TrainingPool,
    embed,
    partition_indices,
)

__all__ = [
    "FEATURE_SOURCES",
    "MINING_QUESTIONS",
    "MINING_VARIANTS",
    "SOFTMAX_EPOCHS",
    "mining_measurements",
    "mining_question_verdicts",
    "mining_table",
    "mining_verdicts",
    "partition_features",
    "stored_mining",
]

# ------------------------------------------------------------------------- mining on fixed features

#: The fixed features the mining diagnosis builds its graphs on (:func:`partition_features`).
FEATURE_SOURCES = (
    "raw pixels",
    "untrained network",
    "softmax on the labelled images",
    "softmax on every training label (oracle)",
)
#: Epochs of the softmax trainings of the feature sources: the paper's CIFAR-10 pre-training on
#: the labelled images (30 epochs, the setting's optimiser).
SOFTMAX_EPOCHS = 30
#: The minings compared (keyword arguments of :func:`dmlnb.ssdml.diagnosis.mining_quality`).
MINING_VARIANTS: dict[str, dict[str, Any]] = {
    "W (paper), k = 10": {"k": 10},
    "random W (chance), k = 10": {"k": 10, "affinity": "random"},
    "W, k = 20": {"k": 20},
    "random W (chance), k = 20": {"k": 20, "affinity": "random"},
    "W, k = 50": {"k": 50},
    "random W (chance), k = 50": {"k": 50, "affinity": "random"},
    "two-sided W, k = 10": {"k": 10, "propagation": "two-sided"},
    "W, negatives outside the neighbourhood, k = 10": {"k": 10, "negatives": "outside"},
}
#: The diagnosis's questions: (question, measure, variant A, variant B), "A is higher than B". Two
#: sortings of the same k neighbours (W against a random W, the two propagations) move the share of
#: positives of the anchor's class and of negatives of another class by the same points (both
#: halves split the same neighbours), so each such comparison is asked once, on the positives.
MINING_QUESTIONS: list[tuple[str, str, str, str]] = [
    *[
        (
            f"W sorts the neighbourhood better than chance (k = {k}): more positives of the "
            "anchor's class, and as many more negatives of another class",
            "pos_same",
            f"W{' (paper)' if k == 10 else ''}, k = {k}",
            f"random W (chance), k = {k}",
        )
        for k in (10, 20, 50)
    ],
    (
        "k = 50 mines more right triplets than k = 10",
        "triplet_correct",
        "W, k = 50",
        "W (paper), k = 10",
    ),
    (
        "the two-sided propagation sorts better than the paper's: more positives of the anchor's "
        "class, and as many more negatives of another class",
        "pos_same",
        "two-sided W, k = 10",
        "W (paper), k = 10",
    ),
    (
        "negatives from outside the neighbourhood are of another class more often",
        "neg_other",
        "W, negatives outside the neighbourhood, k = 10",
        "W (paper), k = 10",
    ),
    (
        "negatives from outside the neighbourhood give more right triplets",
        "triplet_correct",
        "W, negatives outside the neighbourhood, k = 10",
        "W (paper), k = 10",
    ),
]
_MEASURES = {
    "knn_same": "neighbours of the anchor's class",
    "pos_same": "positives of the anchor's class",
    "neg_other": "negatives of another class",
    "triplet_correct": "triplets with both right",
}


def partition_features(
    source: str,
    setting: Setting,
    profile: str,
    seed: int,
    splits: DatasetSplits,
    part: Tensor,
    overrides: Mapping[str, Any] | None = None,
) -> Tensor:
    """Fixed features ``(N, d)`` of the pool rows ``part`` ``(N,)`` (labelled, then unlabelled, as
    :class:`~dmlnb.ssdml.algorithm.TrainingPool`) from one of :data:`FEATURE_SOURCES`: the raw
    pixels (flattened); the seeded network at initialisation (the one the run of ``seed``
    starts from); the same network after :data:`SOFTMAX_EPOCHS` epochs of softmax on the
    labelled images only (the paper's CIFAR-10 pre-training), or on every training image with
    its hidden class (an oracle no method has: good features, to see whether ``W`` sorts a
    neighbourhood better when the graph is built on them; in-memory datasets only). A network
    embeds in the memory format the training loop evaluates in (:func:`build_network`), as the
    runs' Initial rows do."""
    if source not in FEATURE_SOURCES:
        raise ValueError(f"unknown feature source {source!r}; choose one of {FEATURE_SOURCES}")
    cfg = setting.train_config(profile, seed, overrides)
    pool = TrainingPool(splits.train, splits.unlabelled)
    if source == "raw pixels":
        return embed(nn.Flatten(), None, pool.for_mining(part), cfg.eval_batch_size)[0]
    torch.manual_seed(cfg.seed)
    network, dim = build_network(cfg, splits.input_shape)
    if source == "softmax on the labelled images":
        m = min(
            cfg.m_per_class, setting.labelled_per_class
        )  # batches of the labelled images: m per class
        batch = m * min(splits.num_train_classes, cfg.batch_size // m)
        pretrain_softmax(
            network,
            dim,
            splits.train,
            splits.num_train_classes,
            cfg.replace(m_per_class=m, batch_size=batch),
            SOFTMAX_EPOCHS,
        )
    elif source == "softmax on every training label (oracle)":
        if not isinstance(pool.dataset, InMemoryDataset):
            raise ValueError(
                f"feature source {source!r} needs an in-memory dataset, not "
                f"{type(pool.dataset).__name__}; leave it out of the sources at this profile"
            )
        targets = torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])  # type: ignore[union-attr]
        oracle = InMemoryDataset(pool.dataset.images, targets)
        batch = cfg.m_per_class * min(splits.num_train_classes, cfg.batch_size // cfg.m_per_class)
        pretrain_softmax(
            network,
            dim,
            oracle,
            splits.num_train_classes,
            cfg.replace(batch_size=batch),
            SOFTMAX_EPOCHS,
        )
    return embed(network, None, pool.for_mining(part), cfg.eval_batch_size)[0]


def mining_measurements(
    setting: Setting,
    profile: str,
    *,
    seeds: Sequence[int] | None = None,
    data_root: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    sources: Sequence[str] = FEATURE_SOURCES,
    variants: Mapping[str, Mapping[str, Any]] = MINING_VARIANTS,
) -> pd.DataFrame:
    """The mining quality (:func:`dmlnb.ssdml.diagnosis.mining_quality`, ``γ`` of the setting) of
    every variant on every feature source, on the first partition of each seed (its labelled
    draw and its unlabelled chunk, as the run of that seed sees them): one row per (features,
    variant, seed) with ``knn_same``, ``pos_same``, ``neg_other``, ``triplet_correct``."""
    from dmlnb.ssdml.diagnosis import mining_quality

    rows = []
    for seed in tuple(setting.seeds if seeds is None else seeds):
        splits = load_splits(
            setting, setting.train_config(profile, seed, overrides), seed, data_root
        )
        pool = TrainingPool(splits.train, splits.unlabelled)
        part = partition_indices(pool, setting.schedule, seed, 0)  # (N,)
        targets = torch.cat([splits.train.labels.cpu(), splits.unlabelled_targets.cpu()])[part]  # type: ignore[union-attr]
        for source in sources:
            z = partition_features(
                source, setting, profile, seed, splits, part, overrides
            )  # (N, d)
            for name, kwargs in variants.items():
                quality = mining_quality(
                    z,
                    pool.labels[part],
                    targets,
                    gamma=setting.gamma,
                    generator=torch.Generator().manual_seed(seed),
                    **kwargs,
                )
                rows.append({"features": source, "variant": name, "seed": seed, **quality})
    return pd.DataFrame(rows)


K = TypeVar("K")


def stored_mining(
    settings: Mapping[K, Setting],
    profile: str,
    results_dir: str | Path | None,
    *,
    seeds: Sequence[int] | None = None,
    data_root: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    retrain: bool = False,
) -> dict[K, pd.DataFrame]:
    """:func:`mining_measurements` of each setting, by key (its seeds' rows in seed order), stored
    a table per seed under ``results_dir/profile/<setting name>-mining-quality/seed-<s>``
    (:func:`dmlnb.runs.stored_tables`: reloaded while the setting, seed, sources and variants are
    those it was measured with; not a timing, so under shards each table is made by the process
    that claims it, and a table per seed lets the processes share a setting's work)."""
    tables = {}
    for key, setting in settings.items():
        for seed in tuple(setting.seeds if seeds is None else seeds):
            folder = (
                Path(results_dir) / profile / f"{setting.name}-mining-quality" / f"seed-{seed}"
                if results_dir is not None
                else None
            )
            stored = {
                "config": setting.train_config(profile, seed, overrides).to_dict(),
                "seeds": [seed],
                "labelled_per_class": setting.labelled_per_class,
                "schedule": setting.schedule.to_dict(),
                "gamma": setting.gamma,
                "sources": list(FEATURE_SOURCES),
                "softmax_epochs": SOFTMAX_EPOCHS,
                "variants": MINING_VARIANTS,
            }
            tables[key, seed] = Table(
                folder,
                partial(
                    mining_measurements,
                    setting,
                    profile,
                    seeds=(seed,),
                    data_root=data_root,
                    overrides=overrides,
                ),
                stored,
            )
    frames = stored_tables(tables, retrain=retrain)
    return {
        key: pd.concat([frame for (k, _), frame in frames.items() if k == key], ignore_index=True)
        for key in settings
    }


def mining_table(measured: pd.DataFrame) -> pd.DataFrame:
    """:func:`mining_measurements` as percent, mean over seeds: rows (features, variant), columns
    the four measures (named in words) and the seeds."""
    grouped = measured.groupby(["features", "variant"], sort=False)
    frame = 100 * grouped[list(_MEASURES)].mean()
    frame["seeds"] = grouped["seed"].nunique()
    return frame.rename(columns={k: f"{v} (%)" for k, v in _MEASURES.items()})


def mining_question_verdicts(measured: pd.DataFrame) -> dict[tuple[str, str], Verdict]:
    """``{(question, feature source): Verdict}``: every question of :data:`MINING_QUESTIONS` on
    every feature source, by the book's rule for the same run measured two ways: both variants
    mine the same partition of the same seed on the same features, so the per-seed differences
    are tested (:func:`~dmlnb.reporting.paired_differences`, points)."""
    out: dict[tuple[str, str], Verdict] = {}
    for question, measure, a, b in MINING_QUESTIONS:
        for source, part in measured.groupby("features", sort=False):
            side = {v: part[part["variant"] == v].set_index("seed")[measure] for v in (a, b)}
            seeds = sorted(set(side[a].index) & set(side[b].index))
            out[question, str(source)] = paired_differences(
                [float(side[a][s]) for s in seeds],
                [float(side[b][s]) for s in seeds],
                scale=100.0,
                unit=" pts",
            )
    return out


def mining_verdicts(measured: pd.DataFrame) -> pd.DataFrame:
    """:func:`mining_question_verdicts` in a table: rows the questions (with their measure),
    columns the feature sources, cells ``"<verdict> (<effect>)"``."""
    measure = {q: m for q, m, _, _ in MINING_QUESTIONS}
    out: dict[str, dict[str, str]] = {}
    for (question, source), verdict in mining_question_verdicts(measured).items():
        row = out.setdefault(f"{question} [{_MEASURES[measure[question]]}]", {})
        row[source] = f"{verdict} ({verdict.evidence()['effect']})"
    return pd.DataFrame.from_dict(out, orient="index")
