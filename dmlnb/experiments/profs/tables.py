"""The PROFS chapter's tables of gains and verdicts (the book's one rule)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import Beats, ClaimSpec, RunSet, SetAside, Test, evaluate, unless_set_aside
from dmlnb.experiments.profs.analyses import MIN_PROJECTIONS, first_evaluation
from dmlnb.experiments.profs.losses import VARIANTS
from dmlnb.experiments.profs.profiles import period_for
from dmlnb.experiments.profs.runs import (
    COLLAPSE,
    COLLAPSE_DROPPED,
    runset_of,
    section_runs,
    side_of,
)
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Verdict,
    compare,
    paired_differences,
    provenance_frame,
    provenance_groups,
)
from dmlnb.runs import Run
from dmlnb.selection import both_ways_verdicts, choose_on_validation

__all__ = [
    "verdict_of",
    "beats",
    "first_beats",
    "step_verdicts",
    "hncm_regime",
    "NOT_SWEPT",
    "COMPARISONS",
    "comparisons_both_ways",
    "comparisons_table",
    "component_frame",
    "component_steps",
    "gain_frame",
    "metric_verdicts",
    "provenance",
    "sweep_frame",
    "sweep_pairs",
]


# Tables and verdicts
# ----------------------------------------------------------------------------------------------


def verdict_of(test: Test, runs: RunSet) -> Verdict:
    """The verdict of one test of the chapter layer's vocabulary on ``runs``
    (:func:`dmlnb.chapter.evaluate`, the book's one rule)."""
    return evaluate([ClaimSpec("part", "part", test, origin="ours")], runs)[0].verdict


def beats(
    runs: Mapping[Any, Sequence[Run]],
    better: Any,
    worse: Any,
    metric: str = "R@1",
    set_aside: SetAside = COLLAPSE,
) -> Verdict:
    """``runs[better]`` beats ``runs[worse]`` on ``metric``: the chapter layer's
    :class:`~dmlnb.chapter.Beats`, paired by seed when both sides hold the same seeds (the
    chapter trains the sides of a comparison on one seed list by design), a side holding a
    collapsed run set aside (``set_aside``, :data:`~dmlnb.experiments.profs.runs.COLLAPSE`)."""
    rs = runset_of({better: runs[better], worse: runs[worse]})
    a, b = side_of(better), side_of(worse)
    paired = rs.seeds(a.group, a.label) == rs.seeds(b.group, b.label)
    return verdict_of(Beats(a, b, metric, paired=paired, set_aside=set_aside), rs)


def first_beats(
    runs: Mapping[Any, Sequence[Run]], better: Any, worse: Any, set_aside: SetAside = COLLAPSE
) -> Verdict:
    """As :func:`beats`, on R@1 at each run's first evaluation (the same early steps) instead of
    the kept epoch's."""
    rs = runset_of({better: runs[better], worse: runs[worse]})
    a, b = side_of(better), side_of(worse)
    seeds = [rs.seeds(s.group, s.label) for s in (a, b)]
    x, y = (
        [float(first_evaluation(rs.run(s.group, s.label, k).record)["metrics"]["R@1"]) for k in ks]
        for s, ks in zip((a, b), seeds)
    )
    pts = dict(scale=100, unit=" pts")
    v = paired_differences(x, y, **pts) if seeds[0] == seeds[1] else compare(x, y, **pts)
    return unless_set_aside(v, rs, (a, b), "R@1", set_aside)


#: The comparisons of variants made for every loss: ``(better, worse)`` -> the gain column's name.
COMPARISONS: dict[tuple[str, str], str] = {
    ("PROFS", "plain"): "PROFS gain",
    ("PROFS-HNCM", "plain"): "PROFS-HNCM gain",
    ("PROFS-HNCM", "PROFS"): "HNCM gain over PROFS",
}


def gain_frame(runs: Mapping[tuple[str, str], Sequence[Run]], metric: str = "R@1") -> pd.DataFrame:
    """Per loss: the mean of ``metric`` (%) of each variant, for each of :data:`COMPARISONS` the
    gain (points) and its verdict (:func:`beats`: column ``"A > B"``, a
    :class:`~dmlnb.reporting.Verdict` in points, paired by seed; not tested with a collapsed side,
    its measured effect kept), the best variant and the seeds.
    The best variant is the one with the highest mean test ``metric``, or, when every run has a
    validation split, the one chosen on the validation classes
    (:func:`~dmlnb.selection.choose_on_validation`: the highest mean validation ``metric``).

    ``runs`` maps ``(paper row name, variant)`` to the runs over seeds.
    """
    rows = []
    for row in dict.fromkeys(r for r, _ in runs):
        vals = {
            v: [float(r.metrics[metric]) for r in runs[row, v]]
            for v in VARIANTS
            if (row, v) in runs
        }
        means = {v: 100 * float(np.mean(x)) for v, x in vals.items()}
        out: dict[str, Any] = {f"{v} {metric}": means[v] for v in vals}
        for (a, b), gain in COMPARISONS.items():
            if a in vals and b in vals:
                out[gain] = means[a] - means[b]
                out[f"{a} > {b}"] = beats(runs, (row, a), (row, b), metric)
        records = {v: [getattr(r, "record", None) for r in runs[row, v]] for v in vals}
        validated = all(r is not None and r.selections for rs in records.values() for r in rs)
        out["best variant"] = (
            choose_on_validation(records, metric) if validated else max(means, key=means.get)
        )
        out["seeds"] = min(len(x) for x in vals.values())
        rows.append(pd.Series(out, name=row, dtype=object))
    # object columns: pandas 3 with pyarrow would turn the Verdicts into plain str
    frame = pd.DataFrame(rows, dtype=object)
    numbers = [c for c in frame if not any(isinstance(v, str) for v in frame[c])]
    return frame.astype({c: int if c == "seeds" else float for c in numbers})


def comparisons_table(gains: pd.DataFrame) -> pd.DataFrame:
    """The verdicts of a :func:`gain_frame`, one row per loss and comparison, with each verdict's
    effect, 90% interval, runs per side and note."""
    rows = [
        {
            "loss": loss,
            "comparison": f"{a} > {b}",
            "verdict": str(gains.loc[loss, f"{a} > {b}"]),
            **gains.loc[loss, f"{a} > {b}"].evidence(),
        }
        for loss in gains.index
        for a, b in COMPARISONS
        if f"{a} > {b}" in gains
    ]
    return pd.DataFrame(rows)


def sweep_frame(points: Mapping[str, Mapping[float, Sequence[float]]], name: str) -> pd.DataFrame:
    """A sweep (loss -> swept value -> per-seed results, fractions) as rows ``loss``, ``name``,
    ``mean`` and ``std`` (%, std NaN for one seed) and ``seeds``, for
    :func:`dmlnb.plots.plot_sweep`."""
    return pd.DataFrame(
        [
            {
                "loss": loss,
                name: value,
                "mean": 100 * float(np.mean(x)),
                "std": 100 * float(np.std(x, ddof=1)) if len(x) > 1 else math.nan,
                "seeds": len(x),
            }
            for loss, pts in points.items()
            for value, x in pts.items()
        ]
    )


def metric_verdicts(
    runs: Mapping[tuple[str, str], Sequence[Run]],
    better: str,
    worse: str,
    metrics: Sequence[str],
    losses: Sequence[str] | None = None,
) -> tuple[dict[str, Verdict], pd.DataFrame]:
    """``better > worse`` for every loss (``losses``, default all of ``runs``) and every metric,
    each by :func:`beats` (paired by seed; not tested with a collapsed side, its effect kept):
    ``{"loss metric": verdict}`` and a table (loss x metric of the effect in points with ``+``
    holds, ``-`` does not hold, ``=`` inconclusive, ``x`` not tested)."""
    out, table = {}, {}
    for row in losses if losses is not None else dict.fromkeys(r for r, _ in runs):
        if (row, better) not in runs or (row, worse) not in runs:
            continue
        for m in metrics:
            v = beats(runs, (row, better), (row, worse), m)
            out[f"{row} {m}"] = v
            sign = {INCONCLUSIVE: "=", HOLDS: "+", FAILS: "-"}.get(str(v), "x")
            table.setdefault(row, {})[m] = f"{v.effect * 100:+.1f} ({sign})"
    return out, pd.DataFrame(table).T


def sweep_pairs(points: Mapping[str, Mapping[float, Sequence[float]]], name: str) -> pd.DataFrame:
    """Every interior value of a sweep against each end, each comparison with its own verdict,
    effect and interval (points)."""
    rows = []
    for loss, pts in points.items():
        keys = sorted(pts)
        for k in keys[1:-1]:
            for e in (keys[0], keys[-1]):
                v = compare(pts[k], pts[e], scale=100, unit=" pts")
                rows.append({"loss": loss, name: k, "versus": e, "verdict": str(v), **v.evidence()})
    return pd.DataFrame(rows).drop(columns="note")


def provenance(runs: Mapping[Any, Sequence[Run]]) -> pd.DataFrame:
    """Which code made the runs (:func:`~dmlnb.reporting.provenance_groups`): per (commit, package
    changed, threads), the runs and when they finished; a run that several sections share
    counts once."""
    unique = {r.record.data["name"]: r.record for rs in runs.values() for r in rs}
    return provenance_groups(provenance_frame(unique.values()))


def comparisons_both_ways(
    runs: Mapping[tuple[str, str], Sequence[Run]], metric: str = "R@1"
) -> pd.DataFrame:
    """:func:`gain_frame`'s verdicts (every loss and comparison of :data:`COMPARISONS`) under both
    protocols (:func:`dmlnb.selection.both_ways_verdicts`): every run at the epoch its validation
    classes select and at the epoch its test classes select, with the verdicts that change flagged.

    Raises:
        ValueError: a run has no validation split.
    """

    def judge() -> dict[str, Verdict]:
        gains = gain_frame(runs, metric)
        return {
            f"{row}: {a} > {b} ({metric})": gains.loc[row, f"{a} > {b}"]
            for row in gains.index
            for a, b in COMPARISONS
            if f"{a} > {b}" in gains
        }

    return both_ways_verdicts([r.record for rs in runs.values() for r in rs], judge)


NOT_SWEPT = (
    "the {what} sweep is not run at this profile: every PROFS run makes at least "
    f"{MIN_PROJECTIONS} projections, and a sweep's points would each need as many long runs again "
    "(the paper profile runs it)"
)


def component_steps(
    table1: Mapping[tuple[str, str], Sequence[Run]],
    ablation: Mapping[tuple[str, str], Sequence[Run]],
) -> dict[str, dict[str, list[Run]]]:
    """The component ablation per loss, in order: Table 1's ``plain`` runs (no ingredient), then
    each step of :data:`COMPONENT_STEPS` (``ablation``: ``(loss, step)`` -> its runs over seeds;
    the last step is Table 1's PROFS run, reloaded)."""
    out: dict[str, dict[str, list[Run]]] = {}
    for row, step in ablation:
        out.setdefault(row, {"plain": list(table1[row, "plain"])})[step] = list(ablation[row, step])
    return out


def step_verdicts(steps: Mapping[str, Sequence[Run]], metric: str = "R@1") -> dict[str, Verdict]:
    """Each step of one loss's component ablation (but the first) -> the verdict of "it improves
    ``metric`` on the step before" (:func:`beats`, paired by seed; not tested with a collapsed
    side)."""
    names = list(steps)
    return {
        after: beats(steps, after, before, metric, COLLAPSE_DROPPED)
        for before, after in zip(names, names[1:])
    }


def component_frame(
    components: Mapping[str, Mapping[str, Sequence[Run]]], metric: str = "R@1"
) -> pd.DataFrame:
    """One row per loss and step of the component ablation: the step's ``metric`` (%, mean and std
    over seeds) and the verdict of "this step improves on the one before" by the book's rule
    (:func:`step_verdicts`), with its effect, 90% interval and runs per side."""
    rows = []
    for row, steps in components.items():
        verdicts = step_verdicts(steps, metric)
        for step, rs in steps.items():
            vals = [float(r.metrics[metric]) for r in rs]
            out: dict[str, Any] = {
                "loss": row,
                "step": step,
                f"{metric} mean": 100 * float(np.mean(vals)),
                f"{metric} std": 100 * float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan,
            }
            if step in verdicts:
                v = verdicts[step]
                out.update(
                    {
                        "improves on the step before": str(v),
                        **{k: x for k, x in v.evidence().items() if k != "note"},
                    }
                )
            rows.append(out)
    return pd.DataFrame(rows)


def hncm_regime(
    runs: RunSet,
    table1: Mapping[tuple[str, str], Sequence[Run]],
    config: TrainConfig,
    settings: Mapping[str, Any],
    num_classes: int,
    steps: int,
    profile: str,
) -> tuple[dict[str, Any], pd.DataFrame | str]:
    """The HNCM regime (a smaller batch, so that a batch holds a smaller share of the classes):
    what the claims read (``loss``, ``L``; when run, ``small_runs``: variant -> runs, the per-seed
    HNCM gains ``small`` and ``large`` (Table 1's batch), ``classes`` per batch, ``steps``,
    ``period``) and its table, or why it is not run."""
    loss, L = settings["regime_loss"], num_classes
    regime: dict[str, Any] = {"loss": loss, "L": L}
    small_runs = section_runs(runs, "regime")
    if not small_runs:
        return regime, f"The HNCM regime (a smaller batch) is not run at profile {profile}."
    small, big = settings["regime_batch"], config.batch_size
    M = period_for(config, L, settings["rho"])
    gain = lambda a, b: [100 * (x.metrics["R@1"] - y.metrics["R@1"]) for x, y in zip(a, b)]  # noqa: E731
    regime.update(small_runs=small_runs, small=gain(small_runs["PROFS-HNCM"], small_runs["PROFS"]))
    regime["large"] = gain(table1[loss, "PROFS-HNCM"], table1[loss, "PROFS"])
    regime["classes"] = (small // config.m_per_class, big // config.m_per_class)
    regime["steps"] = small_runs["PROFS"][0].extras["batches"]  # the batches the run drew
    regime["period"] = small_runs["PROFS"][0].extras["period"]
    r1 = lambda rs: 100 * np.mean([r.metrics["R@1"] for r in rs])  # noqa: E731
    spread = lambda x: f"{np.mean(x):+.2f} ± {np.std(x, ddof=1) if len(x) > 1 else 0:.2f}"  # noqa: E731
    table = pd.DataFrame(
        {
            "classes per batch": regime["classes"],
            "share of the classes": [c / L for c in regime["classes"]],
            "M": [regime["period"], M],
            "projections per run": [regime["steps"] / regime["period"], steps / M],
            "PROFS R@1": [r1(small_runs["PROFS"]), r1(table1[loss, "PROFS"])],
            "HNCM gain (points)": [spread(regime["small"]), spread(regime["large"])],
        },
        index=[f"batch {small}", f"batch {big}"],
    )
    return regime, table
