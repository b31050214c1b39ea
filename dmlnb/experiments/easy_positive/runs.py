"""The chapter's runs trained or reloaded by the chapter layer (:func:`train_chapter`, one
:class:`~dmlnb.chapter.RunSet`), and what its figures and tables read of them: Figure 4's per-seed
values (:func:`group_size_points`, :func:`group_size_frame`), the key comparison, Table 1's
cells, EPSHN's two semi-hard rules, the runs of the embedding analyses (:func:`analysis_runs`)
and Tables 2 and 3 (:func:`paper_table_runs`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import RunSet, train_runs
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.spec import (
    FIGURE_METHODS,
    MINING_METHODS,
    TABLE1_METHODS,
    TSNE_METHODS,
    Batch,
    canonical_method,
    figure4_side,
    table1_side,
)
from dmlnb.experiments.easy_positive.stored import StoredAnalyses
from dmlnb.losses.easy_positive import SEMIHARD_RULES
from dmlnb.runs import Run

__all__ = [
    "train_chapter",
    "figure4_names",
    "group_size_points",
    "group_size_frame",
    "key_runs",
    "table1_runs",
    "semihard_runs",
    "figure_runs",
    "analysis_runs",
    "paper_table_runs",
    "recall_table",
    "table1_recall",
    "mean_metrics",
]


def train_chapter(
    batches: Sequence[Batch],
    folder: str | Path,
    *,
    retrain: bool = False,
    data_root: str | Path | None = None,
) -> RunSet:
    """Every run of ``batches`` trained, resumed or reloaded in ``folder``
    (:func:`dmlnb.chapter.train_runs`, one call per batch), as one :class:`RunSet`."""
    merged: dict = {}
    for b in batches:
        done = train_runs(b.groups, b.config, folder, retrain=retrain, data_root=data_root)
        clash = set(merged) & set(done.runs)
        if clash:
            raise ValueError(f"groups {sorted(clash)} are declared in two batches")
        merged.update(done.runs)
    return RunSet(merged)


def figure4_names(runs: RunSet, study: Study) -> list[str]:
    """The distinct runs of Figure 4's grid (at n = 2, EP, HP and BA are one N-pair run)."""
    return sorted(
        {
            runs.run(*figure4_side(m, n), s).name
            for n in study.group_sizes
            for m in MINING_METHODS
            for s in study.seeds_for(canonical_method(m, n), n)
        }
    )


def group_size_points(
    runs: RunSet, study: Study, metric: str = "R@1"
) -> dict[str, dict[int, list[float]]]:
    """Figure 4's per-seed values: ``{method: {n: [metric of each seed's best epoch]}}`` for the
    mining methods over the study's group sizes (at n = 2, EP, HP and BA share the N-pair runs)."""
    return {
        m: {
            n: runs.values(*figure4_side(m, n), metric, study.seeds_for(canonical_method(m, n), n))
            for n in study.group_sizes
        }
        for m in MINING_METHODS
    }


def group_size_frame(runs: RunSet, study: Study, metric: str = "R@1") -> pd.DataFrame:
    """Figure 4's data: one row per (method, n) with ``mean``, ``std`` (NaN for one seed) and
    ``seeds`` of ``metric`` at the best epoch. At n = 2, EP, HP and BA show the shared N-pair
    runs."""
    rows = [
        {
            "method": method,
            "n": n,
            "mean": float(np.mean(vals)),
            "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan,
            "seeds": len(vals),
            "run": canonical_method(method, n),
        }
        for method, by_n in group_size_points(runs, study, metric).items()
        for n, vals in by_n.items()
    ]
    return pd.DataFrame(rows)


def key_runs(runs: RunSet, study: Study) -> dict[str, list[Run]]:
    """The key comparison: every mining method at the key group size and N-pair (n = 2), every
    seed of the key comparison."""
    out = {
        m: [runs.run(*figure4_side(m, study.key_group_size), s) for s in study.seeds]
        for m in MINING_METHODS
    }
    out["N-pair (n = 2)"] = [runs.run("N-pair", "N-pair", s) for s in study.seeds]
    return out


def table1_runs(runs: RunSet, study: Study) -> dict[tuple[str, str], dict[str, list[Run]]]:
    """Table 1's runs per (dataset, backbone) cell: method -> runs, seed by seed."""
    cells = len(study.table1)
    return {
        (cell.dataset, cell.model): {
            m: [runs.run(*table1_side(m, i, cells), s) for s in study.table1_seeds]
            for m in TABLE1_METHODS
        }
        for i, cell in enumerate(study.table1)
    }


def semihard_runs(runs: RunSet, study: Study) -> dict[str, list[Run]]:
    """EPSHN at the key group size under each semi-hard rule, ``{rule: runs}``: the paper's
    ``"strict"`` (Figure 4's runs) and the authors' ``"inclusive"``."""
    return {rule: [runs.run("semihard", rule, s) for s in study.seeds] for rule in SEMIHARD_RULES}


def figure_runs(runs: RunSet, study: Study) -> dict[str, list[Run]]:
    """The runs of Figures 2, 3, 5 and 6: :data:`FIGURE_METHODS` at the key group size (N-pair
    at n = 2) with every seed of the key comparison."""
    return {
        m: [runs.run(*figure4_side(m, study.key_group_size), s) for s in study.seeds]
        for m in FIGURE_METHODS
    }


def analysis_runs(
    runs: RunSet, study: Study, stored: StoredAnalyses, tsne_classes: int
) -> dict[str, list[Run]]:
    """:func:`figure_runs`, each with its statistics summary in its record
    (:meth:`StoredAnalyses.summary`), and the first seed's figures' data (and for
    :data:`TSNE_METHODS` its t-SNE maps with ``tsne_classes``) read or computed.

    Call it before any table reads a record: a run whose analysis is not stored and whose
    weights are missing is trained again here and its record replaced in the run set, so no two
    cells show two trainings of one run. Under shards a process analyses the runs it trained
    before waiting for those its siblings analyse (``sorted`` is stable: without shards the
    order is the notebook's)."""
    out = figure_runs(runs, study)
    every = [r for rs in out.values() for r in rs]
    for r in sorted(every, key=stored.sibling):
        stored.summary(r)
    for m in sorted(out, key=lambda m: stored.sibling(out[m][0])):
        stored.figures(out[m][0])
        if m in TSNE_METHODS:
            stored.tsne(out[m][0], tsne_classes)
    return out


def paper_table_runs(runs: RunSet) -> tuple[dict[str, list[Run]], list[Run]]:
    """The runs of Tables 2 and 3 (:func:`~dmlnb.experiments.easy_positive.spec.paper_batches`)
    in ``runs``: ``({Table 2 column: runs}, Table 3 runs)``; empty when none was declared."""

    def seeded(group: str) -> list[Run]:
        return [runs.run(group, "EPSHN", s) for s in runs.seeds(group, "EPSHN")]

    table2 = {g.split(" ", 1)[1]: seeded(g) for g in runs.runs if g.startswith("table2 ")}
    return table2, (seeded("table3") if "table3" in runs.runs else [])


def recall_table(
    results: Mapping[str, Sequence[Run]], ks: Sequence[int]
) -> dict[str, list[dict[str, float]]]:
    """``{method: [best-epoch metrics per seed]}`` restricted to ``R@K`` for ``ks`` (for
    :func:`dmlnb.reporting.summarize_runs`)."""
    keys = [f"R@{k}" for k in ks]
    return {m: [{k: r.metrics[k] for k in keys} for r in rs] for m, rs in results.items()}


def mean_metrics(runs: Sequence[Run]) -> dict[str, float]:
    """The mean of each test metric of ``runs`` (at each run's selected epoch)."""
    return {k: float(np.mean([r.metrics[k] for r in runs])) for k in runs[0].metrics}


def table1_recall(runs: RunSet, study: Study) -> dict[str, dict[str, list[float]]]:
    """Table 1's Recall@1 per seed: ``{cell label: {method: [R@1 per seed]}}``, the cell labelled
    ``"<dataset>, <backbone>, <dim>-d"``."""
    out = {}
    for cell, (key, res) in zip(study.table1, table1_runs(runs, study).items()):
        label = f"{key[0]}, {key[1]}, {cell.embedding_dim}-d"
        out[label] = {m: [r.metrics["R@1"] for r in rs] for m, rs in res.items()}
    return out
