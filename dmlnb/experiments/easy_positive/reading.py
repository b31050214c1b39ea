"""The numbers the chapter's closing text ("Reading the results") states, computed from its runs
and verdicts, for the notebook to glue (``myst_nb.glue``) into the Markdown: none is typed."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import JudgedClaim, RunSet
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.runs import semihard_runs, table1_runs
from dmlnb.experiments.easy_positive.spec import MINING_METHODS
from dmlnb.experiments.easy_positive.table_verdicts import pair_tables
from dmlnb.experiments.easy_positive.verdicts import EASY, TIGHT, ClaimInputs
from dmlnb.reporting import verdict_category
from dmlnb.selection import selected_metrics, selection_gain_text

__all__ = ["reading_numbers"]


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


def _pairs(inputs: ClaimInputs) -> dict[str, int]:
    """Per figure's claim about several pairs, how many pairs hold, fail, are inconclusive."""
    table = pair_tables(inputs).reset_index()
    out = {}
    for fig, prefix in (("fig2", "Fig. 2"), ("fig3", "Fig. 3"), ("fig5", "Fig. 5")):
        rows = table[table["comparison"].str.startswith(prefix)]
        kinds = Counter(verdict_category(v) for v in rows["verdict"])
        out[f"{fig}_pairs"] = len(rows)
        out[f"{fig}_holds"] = kinds["holds"]
        out[f"{fig}_fails"] = kinds["does not hold"]
        out[f"{fig}_inconclusive"] = kinds["inconclusive"]
    return out


def _embedding(inputs: ClaimInputs) -> dict[str, float]:
    """The median same-class training similarity's range over the easy and the tight methods,
    and each method's drop in nearest-neighbour accuracy from training to test, in points."""
    median = {
        m: float(np.mean([a["train_same_class_median"] for a in v]))
        for m, v in inputs.analysis.items()
    }
    out = {
        "median_easy_lo": min(median[m] for m in EASY),
        "median_easy_hi": max(median[m] for m in EASY),
        "median_tight_lo": min(median[m] for m in TIGHT),
        "median_tight_hi": max(median[m] for m in TIGHT),
    }
    for m, v in inputs.analysis.items():
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
    inputs: ClaimInputs,
    fig4: pd.DataFrame,
) -> dict[str, Any]:
    """Every number of the closing text: verdict counts, Figure 4's Recall@1 (%) per method at
    each group size (``r1_<method>_<n>``), the pairs of Figures 2, 3 and 5,
    the embeddings' statistics, Table 1's means under both protocols (``t1_<method>`` and
    ``t1_<method>_test``), EPSHN's semi-hard runs and the model-selection sentence."""
    lo, key = min(study.group_sizes), study.key_group_size
    out: dict[str, Any] = {
        "lo": lo,
        "key": key,
        "seeds": len(study.seeds),
        "runs": len(runs.records()),
    }
    out |= _counts(judged, both_ways) | _pairs(inputs) | _embedding(inputs) | _fall(curves)
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
    out["selection"] = selection_gain_text(runs.records())
    return out
