"""The SSDML chapter: initial."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import torch
from torch import Tensor

from dmlnb.data import DatasetSplits, load_dataset
from dmlnb.evaluation import evaluate
from dmlnb.experiments.ssdml.network import build_network, load_splits
from dmlnb.experiments.ssdml.reported import M5
from dmlnb.experiments.ssdml.settings import Setting
from dmlnb.experiments.ssdml.training import results_frame
from dmlnb.profiles import TrainConfig, make_config
from dmlnb.reporting import (
    compare,
    compare_to_threshold,
)
from dmlnb.runs import EVALUATION_THREADS, Table, stored_tables
from dmlnb.runs import Run as MethodRun
from dmlnb.ssdml.algorithm import (
    embed,
)

__all__ = [
    "below_floor_sentence",
    "floor_rows",
    "floor_verdicts",
    "initial_coordinates",
    "initial_embedding",
    "initial_metrics",
    "protocol_floors",
]


def initial_embedding(
    setting: Setting,
    profile: str,
    seed: int,
    splits: DatasetSplits,
    overrides: Mapping[str, Any] | None = None,
) -> Tensor:
    """Test embedding ``(N_test, d)`` of the seeded network at initialisation (Figure 2, left
    column), in the memory format the training loop evaluates its Initial row in
    (:func:`build_network`)."""
    cfg = setting.train_config(profile, seed, overrides)
    torch.manual_seed(cfg.seed)
    network, _ = build_network(cfg, splits.input_shape)
    return embed(network, None, splits.test, cfg.eval_batch_size)[0]


def initial_metrics(
    setting: Setting,
    profile: str,
    seed: int,
    splits: DatasetSplits,
    overrides: Mapping[str, Any] | None = None,
    coordinates: Mapping[str, int | None] | None = None,
) -> dict[str, dict[str, float]]:
    """The run's evaluation (``eval_ks``, ``eval_metrics``, Euclidean, k-means seeded with the run's
    seed) of the seeded network at initialisation on the test set, once per entry of
    ``coordinates`` (``{name: c}``): on the first ``c`` coordinates of its output ``z``, or on all
    ``d`` of them (``c = None``). The default names the two this chapter compares: the first
    ``l`` coordinates, which is what the "Initial" row measures (``L`` starts at the identity on
    the first ``l`` coordinates), and all of ``z``. ``{name: metrics}``."""
    if coordinates is None:
        coordinates = {
            f"first l = {setting.metric_dim} of z (the Initial row)": setting.metric_dim,
            "all d of z": None,
        }
    cfg = setting.train_config(profile, seed, overrides)
    z = initial_embedding(setting, profile, seed, splits, overrides)  # (N_test, d)
    labels = splits.test.labels.cpu()
    return {
        name: evaluate(
            z if c is None else z[:, :c],
            labels,
            ks=cfg.eval_ks,
            metrics=cfg.eval_metrics,
            seed=cfg.seed,
            metric="euclidean",
        )
        for name, c in coordinates.items()
    }


def initial_coordinates(
    settings: Mapping[str, Setting],
    profile: str,
    data_root: str | Path | None = None,
    seeds: Sequence[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
    results_dir: str | Path | None = None,
    retrain: bool = False,
) -> dict[str, dict[str, list[dict[str, float]]]]:
    """Per setting, the networks at initialisation of every seed evaluated on the first ``l`` and on
    all ``d`` coordinates of ``z`` (:func:`initial_metrics`, no training):
    ``{setting key: {row name: [metrics per seed]}}``.

    Each seed's evaluation is a table made with :data:`~dmlnb.runs.EVALUATION_THREADS` threads,
    as the runs' evaluations are, and with ``results_dir`` stored under
    ``results_dir/profile/<setting name>-initial/seed-<s>`` (:func:`dmlnb.runs.stored_tables`:
    reloaded while the run configuration and ``l`` are those it was made with; under shards each
    is made by the process that claims it)."""
    tables = {}
    for key, st in settings.items():
        for seed in tuple(st.seeds if seeds is None else seeds):
            cfg = st.train_config(profile, seed, overrides)
            folder = (
                Path(results_dir) / profile / f"{st.name}-initial" / f"seed-{seed}"
                if results_dir is not None
                else None
            )

            def make(st: Setting = st, seed: int = seed, cfg: TrainConfig = cfg) -> pd.DataFrame:
                splits = load_splits(st, cfg, seed, data_root)
                return pd.DataFrame(
                    [
                        {"row": name, **metrics}
                        for name, metrics in initial_metrics(
                            st, profile, seed, splits, overrides
                        ).items()
                    ]
                )

            tables[key, seed] = Table(
                folder,
                make,
                {"config": cfg.to_dict(), "metric_dim": st.metric_dim},
                threads=EVALUATION_THREADS,
            )
    out: dict[str, dict[str, list[dict[str, float]]]] = {key: {} for key in settings}
    for (key, _), frame in stored_tables(tables, retrain=retrain).items():
        for row in frame.to_dict("records"):
            out[key].setdefault(row.pop("row"), []).append(row)
    return out


def protocol_floors(
    settings: Mapping[str, Setting],
    profile: str,
    data_root: str | Path | None = None,
    results_dir: str | Path | None = None,
    retrain: bool = False,
) -> tuple[str | None, dict[str, dict[str, float]]]:
    """The setting of ``settings`` evaluated on the protocol chapter's test split at ``profile``
    (same dataset and dataset options) and that chapter's two rows that need no training on it,
    raw pixels and its untrained network (:func:`dmlnb.experiments.protocol.floors` with the
    profile's configuration, as ``notebooks/00_protocol.ipynb`` renders it; with ``results_dir``
    stored under ``results_dir/profile/protocol-floors``); ``(None, {})`` when no setting shares
    its split."""
    from dmlnb.experiments.protocol import floors

    config = make_config(profile)
    for key, st in settings.items():
        cfg = st.train_config(profile, st.seeds[0])
        options = {
            k: v for k, v in cfg.dataset_options.items() if not k.startswith("validation")
        }  # same test split
        if cfg.dataset == config.dataset and options == dict(config.dataset_options):
            folder = (
                Path(results_dir) / profile / "protocol-floors" if results_dir is not None else None
            )
            return key, floors(
                config,
                load_dataset(config.dataset, root=data_root, **config.dataset_options),
                folder=folder,
                retrain=retrain,
            )
    return None, {}


def floor_rows(
    runs: Mapping[str, Sequence[MethodRun]],
    floors: Mapping[str, Mapping[str, float]],
    extra: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
) -> dict[str, list[dict[str, float]]]:
    """``{row: [metrics per run]}`` for :func:`dmlnb.reporting.summarize_runs`: the ``floors`` (one
    value each, named "... (chapter 00)"), the ``extra`` rows, then the Initial row and every
    method of ``runs`` (:func:`results_frame`)."""
    out = {f"{name} (chapter 00)": [dict(m)] for name, m in floors.items()}
    out.update({name: [dict(m) for m in ms] for name, ms in (extra or {}).items()})
    out.update(results_frame(runs))
    return out


_SIDE = {"holds": "above", "does not hold": "below"}


#: The floor values with no seed behind them: raw pixels' retrieval metrics, a deterministic
#: function of the test images. The untrained network (one seeded network) and every clustering
#: metric (one seeded k-means) are a single run of something that varies with its seed.
_SEEDLESS_FLOORS = {"raw pixels": ("R@1", "R@2", "R@4", "R@8", "MAP@R")}


def floor_verdicts(
    rows: Mapping[str, Sequence[Mapping[str, float]]],
    floors: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str] = M5,
) -> pd.DataFrame:
    """For every row (its per-seed values) and every floor, per metric, the rule's verdict on "the
    row is above the floor", written ``above`` (holds), ``below`` (does not hold) or
    ``inconclusive``. A floor with no seed behind it (:data:`_SEEDLESS_FLOORS`: raw pixels'
    Recall@K and MAP@R) is a fixed threshold (:func:`~dmlnb.reporting.compare_to_threshold`);
    a seeded one (the untrained network, any NMI or F1) is one run, compared as runs are
    (:func:`~dmlnb.reporting.compare`), so it never decides: one run per side is inconclusive
    whatever the difference. Rows: ``rows``; columns: ``(floor, metric)``."""

    def verdict(values: list[float], name: str, metric: str, floor: float) -> str:
        seedless = metric in _SEEDLESS_FLOORS.get(name, ())
        return str(compare_to_threshold(values, floor) if seedless else compare(values, [floor]))

    out = {}
    for row, values in rows.items():
        out[row] = {
            (f"vs {name}", m): _SIDE.get(
                verdict([float(v[m]) for v in values], name, m, float(floor[m])), "inconclusive"
            )
            for name, floor in floors.items()
            for m in metrics
            if m in floor
        }
    frame = pd.DataFrame.from_dict(out, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


def below_floor_sentence(verdicts: pd.DataFrame, metrics: Sequence[str] = ("R@1", "NMI")) -> str:
    """Which rows of :func:`floor_verdicts` are below each floor, per metric."""
    parts = []
    for floor in verdicts.columns.get_level_values(0).unique():
        for m in metrics:
            if (floor, m) not in verdicts.columns:
                continue
            col = verdicts[(floor, m)]
            below = list(col.index[col == "below"])
            open_ = int((col == "inconclusive").sum())
            parts.append(
                f"{m} below {floor.removeprefix('vs ')} (chapter 00): {len(below)} of {len(col)} "
                "rows"
                + (f" ({', '.join(below)})" if below else "")
                + (
                    f", {open_} inconclusive"
                    + (" (single runs: not tested)" if open_ == len(col) else "")
                    if open_
                    else ""
                )
            )
    return "; ".join(parts) + "."
