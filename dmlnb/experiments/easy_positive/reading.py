"""The numbers the chapter's text states, computed from its runs, verdicts and settings, for the
notebook to glue (``myst_nb.glue``) into the Markdown: none is typed. :func:`text_constants`: the
settings it names (the methods' arguments, the rule's confidence, the collapse band);
:func:`collapse_numbers`: the collapse section's (the drop-rule rerun, the protocol chapter's
raw-pixel floor); :func:`reading_numbers`: the closing text's."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import JudgedClaim, RunSet
from dmlnb.data import load_dataset
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.diagnostics import (
    TOY_ANGLES,
    TOY_LABELS,
    TOY_PAIRS,
    collapsed_groups,
)
from dmlnb.experiments.easy_positive.figures import AXIS_PERCENTILE
from dmlnb.experiments.easy_positive.runs import (
    figure_runs,
    group_size_points,
    semihard_runs,
    table1_runs,
)
from dmlnb.experiments.easy_positive.setting_rows import selection_gain_distinct
from dmlnb.experiments.easy_positive.spec import EASY, MINING_METHODS, TIGHT, figure4_side
from dmlnb.experiments.easy_positive.stored import FIGURE_SETTINGS
from dmlnb.experiments.easy_positive.tables import group_size_optima
from dmlnb.methods import MethodCall
from dmlnb.reporting import COLLAPSE_BAND, CONFIDENCE, compare_to_threshold, verdict_category
from dmlnb.selection import COLUMN_LABELS, protocol_column, selected_metrics

__all__ = ["text_constants", "protocol_floor", "collapse_numbers", "reading_numbers"]


def text_constants(
    calls: Mapping[str, MethodCall], study: Study, paper: Study | None = None
) -> dict[str, str]:
    """The settings the chapter's text names, as the text shows them: the methods' arguments as
    run (``calls``), the rule's one-sided confidence and its interval, the collapse band, the
    stored quantiles of Figure 2 and the axes of Figure 5, the worked example's angles
    (:data:`~dmlnb.experiments.easy_positive.diagnostics.TOY_ANGLES`: ``toy_<i>``, and
    ``toy_pair_other``, the other class's two points of its two-per-class batch), the study's
    first seed, group sizes above the smallest and largest group size; with ``paper`` (the paper
    profile's study, the package's record of the paper's settings, Sec. 5.1-6.3) its batch,
    epochs, Table 1's embedding size, its optimal group size (the key comparison's) and its
    seeds per dataset of Tables 2 and 3."""
    q = FIGURE_SETTINGS["train_same_class_quantiles"]
    sizes = sorted(study.group_sizes)
    rest = [str(n) for n in sizes[1:]]  # "4, 8 and 16"
    out = {
        "duplicate_threshold": f"{calls['N-pair'].args['duplicate_threshold']:g}",
        "temperature": f"{calls['N-pair'].args['temperature']:g}",
        "triplet_margin": f"{calls['triplet'].args['margin']:g}",
        "proxy_scale": f"{calls['Proxy-NCA'].args['scale']:g}",
        "proxy_lr_factor": f"{study.proxy_lr_factor:g}",
        "confidence": f"{CONFIDENCE:.0%}",
        "interval": f"{1 - 2 * (1 - CONFIDENCE):.0%}",
        "collapse_band": f"{COLLAPSE_BAND:.1%}",
        "quantiles": f"{q}",
        "quantile_share": f"{1 / (q - 1):.1%}",
        "axis_percentile": f"{AXIS_PERCENTILE:g}%",
        "first_seed": str(study.seeds[0]),
        "above_lo": " and ".join([", ".join(rest[:-1]), rest[-1]] if len(rest) > 1 else rest),
        "n_max": str(sizes[-1]),
        "toy_pair_other": " and ".join(
            f"{TOY_ANGLES[i]:g}°" for i in TOY_PAIRS if TOY_LABELS[i] != TOY_LABELS[TOY_PAIRS[0]]
        ),
    }
    out |= {f"toy_{i}": f"{a:g}°" for i, a in enumerate(TOY_ANGLES)}
    if paper is not None:
        out |= {
            "paper_batch": str(paper.config.batch_size),
            "paper_epochs": str(paper.config.epochs),
            "paper_t1_dim": str(paper.table1[0].embedding_dim),
            "paper_optimum": str(paper.key_group_size),
            "paper_seeds": str(len(paper.paper_seeds)),
        }
    return out


def protocol_floor(
    profile: str, results_dir: str | Path, data_root: str | Path | None = None
) -> float:
    """The protocol chapter's raw-pixel Recall@1 on its test classes at ``profile``
    (:func:`dmlnb.experiments.protocol.floors`, reloaded from that chapter's results beside
    ``results_dir`` when they are there, else computed: no training)."""
    from dmlnb.experiments.protocol import chapter_config, floors

    config = chapter_config(profile, {}, True)
    folder = Path(results_dir).parent / "00_protocol" / profile / "floors"
    splits = load_dataset(config.dataset, root=data_root, **config.dataset_options)
    rows = floors(config, splits, folder=folder if folder.exists() else None)
    return float(rows["raw pixels"]["R@1"])


def collapse_numbers(
    drop: pd.DataFrame, floor: float, runs: RunSet | None = None, study: Study | None = None
) -> dict[str, Any]:
    """The collapse section's numbers: the protocol's raw-pixel floor (Recall@1 in %), the
    lowest similarity of any batch from the second epoch on in the drop-rule rerun
    (:func:`~dmlnb.experiments.easy_positive.diagnostics.drop_rule_diagnosis`), rounded down to
    a tenth (the text says "above" it), and, with ``runs`` and ``study``, whether HPHN's Recall@1
    is below that floor at each group size above the smallest, by the book's rule
    (``hphn_floor``, in words)."""
    later = drop.loc[drop.index >= 2, "min similarity in a batch"]
    out: dict[str, Any] = {
        "raw_floor": 100 * floor,
        "min_similarity": f"{np.floor(10 * later.min()) / 10:.1f}",
    }
    if runs is not None and study is not None:
        parts = []
        for n in sorted(study.group_sizes)[1:]:
            group, label = figure4_side("HPHN", n)
            v = compare_to_threshold(
                runs.values(group, label, "R@1"), floor, False, scale=100, unit=" pts"
            )
            e = v.evidence()
            parts.append(f"at n = {n} {v} ({e['effect']} {e['90% interval']})")
        out["hphn_floor"] = "; ".join(parts)
    return out


def _verdicts(judged: Sequence[JudgedClaim], pairs: pd.DataFrame) -> dict[str, str]:
    """Each claim's verdict (``v_<id>``) and effect with its interval (``e_<id>``), and each
    pair's behind the claims about several pairs (``v_<id>_<better>_<worse>``, ``e_...``; any run
    of characters other than letters and digits as ``_``): the text states the rule's verdicts."""

    def key(*parts: str) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_")

    def effect(e: Mapping[str, Any]) -> str:
        return f"{e['effect']}, 90% interval {e['90% interval']}" if e["effect"] != "—" else "—"

    out = {}
    for j in judged:
        out[f"v_{key(j.spec.id)}"] = str(j.verdict)
        out[f"e_{key(j.spec.id)}"] = effect(j.verdict.evidence())
    for (claim, better, worse), row in pairs.iterrows():
        out[f"v_{key(claim, better, worse)}"] = str(row["verdict"])
        out[f"e_{key(claim, better, worse)}"] = effect(row)
    return out


def _changed(both_ways: pd.DataFrame | None, judged: Sequence[JudgedClaim]) -> str:
    """The recomputed verdicts that change under the papers' protocol, in words."""
    if both_ways is None:
        return "no verdict is recomputed (one protocol only)"
    rows = both_ways[both_ways["verdict changes"].map(lambda v: v is True)]
    if rows.empty:
        return "no recomputed verdict changes with it"
    text = {j.spec.id: j.spec.text for j in judged}
    cols = [protocol_column("verdict", b) for b in COLUMN_LABELS]
    parts = [
        f"'{text[r['id']]}' ({r[cols[0]]} here, {r[cols[1]]} under the papers' protocol)"
        for _, r in rows.iterrows()
    ]
    return "the verdict of " + "; of ".join(parts) + (" changes" if len(parts) == 1 else " change")


def _counts(judged: Sequence[JudgedClaim], both_ways: pd.DataFrame | None) -> dict[str, Any]:
    """How many claims of each origin and verdict, and how many recomputed verdicts change."""
    kinds = Counter(verdict_category(j.verdict) for j in judged)
    out: dict[str, Any] = {
        "n_paper": sum(j.spec.origin == "paper" for j in judged),
        "n_ours": sum(j.spec.origin == "ours" for j in judged),
        "n_holds": kinds["holds"],
        "n_fails": kinds["does not hold"],
        "n_inconclusive": kinds["inconclusive"],
        "n_untested": kinds["not tested at this scale"],
    }
    if both_ways is not None:
        changes = both_ways["verdict changes"]
        recomputed = changes.map(lambda c: isinstance(c, bool))
        out["n_recomputed"] = int(recomputed.sum())
        out["n_kept"] = int((~recomputed).sum())
        out["n_changed"] = int(changes[recomputed].astype(bool).sum())
    return out


def _pairs(pairs: pd.DataFrame) -> dict[str, int]:
    """Per figure's claim about several pairs (``pairs``:
    :func:`~dmlnb.experiments.easy_positive.claims.pair_tables`), how many pairs hold, fail, are
    inconclusive."""
    table = pairs.reset_index()
    out = {}
    for fig in ("fig2", "fig3", "fig5"):
        rows = table[table["comparison"] == f"{fig}-embedding"]
        kinds = Counter(verdict_category(v) for v in rows["verdict"])
        out[f"{fig}_pairs"] = len(rows)
        out[f"{fig}_holds"] = kinds["holds"]
        out[f"{fig}_fails"] = kinds["does not hold"]
        out[f"{fig}_inconclusive"] = kinds["inconclusive"]
        failing = rows[rows["verdict"].map(verdict_category) == "does not hold"]
        out[f"{fig}_failing"] = ", ".join(
            f"{b} vs {w}" for b, w in zip(failing["better"], failing["worse"])
        )
    return out


def _embedding(runs: RunSet, study: Study) -> dict[str, float]:
    """The median same-class training similarity's range over the easy and the tight methods,
    and each method's drop in nearest-neighbour accuracy from training to test, in points (from
    each run's stored statistics)."""
    analysis = {
        m: [r.record.data["analysis"] for r in rs] for m, rs in figure_runs(runs, study).items()
    }
    median = {
        m: float(np.mean([a["train_same_class_median"] for a in v])) for m, v in analysis.items()
    }
    out = {
        "median_easy_lo": min(median[m] for m in EASY),
        "median_easy_hi": max(median[m] for m in EASY),
        "median_tight_lo": min(median[m] for m in TIGHT),
        "median_tight_hi": max(median[m] for m in TIGHT),
    }
    for m, v in analysis.items():
        gap = [a["train_nn_correct"] - a["test_nn_correct"] for a in v]
        out[f"gap_{m.replace('-', '')}"] = 100 * float(np.mean(gap))
    return out


def _fall(curves: pd.DataFrame) -> dict[str, float]:
    """The median fall of the non-collapsed runs' training loss over the last epoch, in %."""
    cols = [c for c in curves.columns if c.startswith("epoch ")]
    live = curves[~curves["collapsed"].astype(bool)]
    fall = 100 * (live[cols[-2]] - live[cols[-1]]) / live[cols[-2]]
    return {
        "fall_median": float(fall.median()),
        "epoch_last": len(cols),
        "epoch_prev": len(cols) - 1,
    }


def reading_numbers(
    runs: RunSet,
    study: Study,
    judged: Sequence[JudgedClaim],
    both_ways: pd.DataFrame | None,
    curves: pd.DataFrame,
    pairs: pd.DataFrame,
    fig4: pd.DataFrame,
) -> dict[str, Any]:
    """Every number of the closing text: verdict counts, Figure 4's Recall@1 (%) per method at
    each group size (``r1_<method>_<n>``), the pairs of Figures 2, 3 and 5,
    the embeddings' statistics, Table 1's means under both protocols (``t1_<method>`` and
    ``t1_<method>_test``), EPSHN's semi-hard runs and the model-selection sentence; ``pairs``:
    every pair behind the claims about several pairs
    (:func:`~dmlnb.experiments.easy_positive.claims.pair_tables`)."""
    lo, key = min(study.group_sizes), study.key_group_size
    out: dict[str, Any] = {
        "lo": lo,
        "key": key,
        "seeds": len(study.seeds),
        "runs": len(runs.records()),
    }
    out |= _counts(judged, both_ways) | _pairs(pairs) | _embedding(runs, study) | _fall(curves)
    means = fig4.set_index(["method", "n"])["mean"]
    for m in MINING_METHODS:
        for n in study.group_sizes:
            out[f"r1_{m}_{n}"] = 100 * float(means[(m, n)])
    for res in table1_runs(runs, study).values():
        for m, rs in res.items():
            name = m.replace("-", "")
            out[f"t1_{name}"] = 100 * float(np.mean([r.metrics["R@1"] for r in rs]))
            test = [selected_metrics(r.record, "test")["R@1"] for r in rs]
            out[f"t1_{name}_test"] = 100 * float(np.mean(test))
    strict = semihard_runs(runs, study)["strict"]
    for metric in ("R@1", "MAP@R"):
        v = [100 * r.metrics[metric] for r in strict if metric in r.metrics]
        if v:
            name = metric.replace("@", "").lower()
            out[f"semihard_{name}"] = f"{np.mean(v):.1f} ± {np.std(v, ddof=1):.1f}"
    out["selection"] = selection_gain_distinct(runs.records())
    out["changed"] = _changed(both_ways, judged)
    optima = group_size_optima(group_size_points(runs, study, "R@1"), collapsed_groups(curves))
    for m, row in optima.iterrows():
        out[f"opt_{str(m).replace('-', '')}"] = str(row["interior optimum"])
    return out | _verdicts(judged, pairs)
