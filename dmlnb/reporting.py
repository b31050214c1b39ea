"""Tables and verdicts for the book: runs summarised as mean ± std, reported beside reproduced,
and every claim judged by one stated rule.

Reproduced numbers only ever come from run records; the paper's numbers enter only through the
``reported`` argument and are labelled as such in every table.

**The verdict rule** (:func:`compare`; the protocol chapter states it): a claim "holds" only with
at least 3 runs per side and a one-sided Welch t-test at 95% confidence; it "does not hold" when
the opposite direction passes the same test, or when its own threshold is missed beyond the
interval (:func:`compare_to_threshold`), or, for a universal claim checked case by case, on one
counterexample (:func:`holds_for_every`); anything else is "inconclusive", shown with the effect
and its 90% two-sided interval (whose ends are the two one-sided 95% bounds). One run per side
never holds or fails. A sweep has an interior optimum only when an interior value beats both
ends under the same test (:func:`interior_optimum`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

if TYPE_CHECKING:
    from dmlnb.profiles import TrainConfig

__all__ = [
    "summarize_runs", "format_mean_std", "reported_vs_reproduced", "Verdict", "compare",
    "compare_to_threshold", "holds_for_every", "group_verdict", "interior_optimum", "not_tested",
    "Claim", "claims_table", "paper_run_status", "HOLDS", "FAILS", "INCONCLUSIVE", "NOT_TESTED",
    "MIN_RUNS", "CONFIDENCE",
]


def summarize_runs(
    metrics_by_run: Mapping[str, Sequence[Mapping[str, float]]],
    columns: Sequence[str],
) -> pd.DataFrame:
    """Mean, std (ddof=1) and run count per method.

    Args:
        metrics_by_run: method name -> one metrics dict per seed (e.g. ``record.best["metrics"]``).
        columns: metric names to summarise.

    Returns:
        DataFrame indexed by method with a ``(metric, stat)`` column MultiIndex, stats
        ``mean``, ``std`` (NaN for a single run) and ``n``.
    """
    data = {}
    for method, runs in metrics_by_run.items():
        row = {}
        for col in columns:
            vals = np.array([float(r[col]) for r in runs], dtype=np.float64)
            row[(col, "mean")] = vals.mean()
            row[(col, "std")] = vals.std(ddof=1) if len(vals) > 1 else np.nan
            row[(col, "n")] = len(vals)
        data[method] = row
    frame = pd.DataFrame.from_dict(data, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["metric", "stat"])
    return frame


def format_mean_std(summary: pd.DataFrame, scale: float = 100.0, digits: int = 1) -> pd.DataFrame:
    """Render a :func:`summarize_runs` frame as ``"mean ± std"`` strings (scaled, e.g. to %)."""
    out = {}
    for metric in summary.columns.get_level_values("metric").unique():
        mean = summary[(metric, "mean")] * scale
        std = summary[(metric, "std")] * scale
        out[metric] = [
            f"{m:.{digits}f} ± {s:.{digits}f}" if np.isfinite(s) else f"{m:.{digits}f}"
            for m, s in zip(mean, std)
        ]
    return pd.DataFrame(out, index=summary.index)


def reported_vs_reproduced(
    reported: pd.DataFrame,
    reproduced: pd.DataFrame,
    reported_label: str,
    reproduced_label: str,
) -> pd.DataFrame:
    """Side-by-side table with a two-level column header: (metric, source).

    ``reported_label`` names the paper's setting (e.g. "reported (CUB-200, GoogLeNet)") and
    ``reproduced_label`` ours (e.g. "reproduced (omniglot-small, convnet, default, 3 seeds)").
    Methods missing on one side show as "—".
    """
    metrics = list(dict.fromkeys([*reported.columns, *reproduced.columns]))
    methods = list(dict.fromkeys([*reported.index, *reproduced.index]))
    cols = {}
    for m in metrics:
        cols[(m, reported_label)] = reported[m].reindex(methods) if m in reported else pd.Series(index=methods, dtype=object)
        cols[(m, reproduced_label)] = reproduced[m].reindex(methods) if m in reproduced else pd.Series(index=methods, dtype=object)
    table = pd.DataFrame(cols, index=methods)
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["metric", "source"])
    return table.astype(object).where(table.notna(), "—")


HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED = "holds", "does not hold", "inconclusive", "not tested at this scale"
MIN_RUNS = 3  # runs per side below which no claim holds or fails
CONFIDENCE = 0.95  # one-sided confidence of every test


class Verdict(str):
    """A verdict computed by the rule (see :func:`compare`), never typed.

    A ``str`` (``"holds"``, ``"does not hold"``, ``"inconclusive"``, ``"not tested at this
    scale"``, or ``"does not hold: k of m pairs hold"``) that also carries the evidence: the
    ``effect`` (oriented so that a positive effect is the claim's direction), its two-sided
    ``1 - 2 (1 - CONFIDENCE)`` interval ``(low, high)`` (90%: its ends are the one-sided 95% bounds
    the rule tests), the runs per side ``n`` and a ``note`` (why it is inconclusive or untested).
    ``scale`` and ``unit`` only format the effect (e.g. ``100``, ``" pts"`` for Recall@K).
    """

    effect: float
    low: float
    high: float
    n: tuple[int, ...]
    note: str
    scale: float
    unit: str

    def __new__(
        cls, text: str, effect: float = math.nan, low: float = math.nan, high: float = math.nan,
        n: tuple[int, ...] = (), note: str = "", scale: float = 1.0, unit: str = "",
    ) -> "Verdict":
        obj = super().__new__(cls, text)
        obj.effect, obj.low, obj.high, obj.n, obj.note = float(effect), float(low), float(high), tuple(n), note
        obj.scale, obj.unit = scale, unit
        return obj

    def evidence(self) -> dict[str, str]:
        """The columns a claims table shows: effect, interval and runs per side (``"—"`` if none)."""
        fmt = lambda v: f"{v * self.scale:+.3g}" if math.isfinite(v) else "—"  # noqa: E731
        effect = fmt(self.effect) + (self.unit if math.isfinite(self.effect) else "")
        interval = f"[{fmt(self.low)}, {fmt(self.high)}]" if math.isfinite(self.low) else "—"
        runs = " vs ".join(str(k) for k in self.n) if self.n else "—"
        return {"effect": effect, "90% interval": interval, "runs per side": runs, "note": self.note}


def not_tested(reason: str) -> Verdict:
    """The verdict of a claim this scale cannot test; ``reason`` says why (shown in the table)."""
    return Verdict(NOT_TESTED, note=reason)


def _decide(effect: float, se: float, df: float, n: tuple[int, ...], scale: float, unit: str) -> Verdict:
    """Apply the rule to an effect with standard error ``se`` and ``df`` degrees of freedom."""
    from scipy import stats

    if se > 0:
        half = float(stats.t.ppf(CONFIDENCE, df)) * se
    else:  # no spread on either side: the difference is exact
        half = 0.0
    low, high = effect - half, effect + half
    if min(n) < MIN_RUNS:
        return Verdict(INCONCLUSIVE, effect, low, high, n, f"fewer than {MIN_RUNS} runs per side", scale, unit)
    if low > 0:
        return Verdict(HOLDS, effect, low, high, n, "", scale, unit)
    if high < 0:
        return Verdict(FAILS, effect, low, high, n, "", scale, unit)
    return Verdict(INCONCLUSIVE, effect, low, high, n, "the interval contains 0", scale, unit)


def _runs(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.isfinite(x).all():
        raise ValueError(f"per-run values must be finite numbers, got {x.tolist()}")
    return x


def compare(
    a: Sequence[float], b: Sequence[float], higher_is_better: bool = True, *,
    scale: float = 1.0, unit: str = "",
) -> Verdict:
    """The book's one rule for "A beats B", from per-run (per-seed) results.

    The effect is ``mean(A) - mean(B)`` (negated when lower is better). With at least
    ``MIN_RUNS = 3`` runs per side, a one-sided Welch t-test at ``CONFIDENCE = 95%``:

    * ``"holds"`` when the one-sided 95% lower bound of the effect is above 0;
    * ``"does not hold"`` when the opposite claim passes the same test (upper bound below 0);
    * ``"inconclusive"`` otherwise, and always with fewer than 3 runs on a side (one run per
      side never holds or fails). The two bounds are the ends of the 90% two-sided interval.

    Sides with zero spread (deterministic results) have an exact difference: any non-zero
    effect decides, identical results are inconclusive.
    """
    x, y = _runs(a), _runs(b)
    n = (x.size, y.size)
    if min(n) == 0:
        return not_tested("no runs on one side")
    sign = 1.0 if higher_is_better else -1.0
    effect = sign * float(x.mean() - y.mean())
    vx = x.var(ddof=1) / x.size if x.size > 1 else math.nan
    vy = y.var(ddof=1) / y.size if y.size > 1 else math.nan
    if not (math.isfinite(vx) and math.isfinite(vy)):
        return Verdict(INCONCLUSIVE, effect, math.nan, math.nan, n, f"fewer than {MIN_RUNS} runs per side", scale, unit)
    se = math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1)) if se > 0 else math.inf
    if se == 0 and effect == 0:
        return Verdict(INCONCLUSIVE, 0.0, 0.0, 0.0, n, "identical results", scale, unit)
    return _decide(effect, se, df, n, scale, unit)


def compare_to_threshold(
    values: Sequence[float], threshold: float, higher_is_better: bool = True, *,
    scale: float = 1.0, unit: str = "",
) -> Verdict:
    """The rule for a claim with its own threshold ("the overhead is below 1%", "the rank is
    above 20"): a one-sample t-test of ``mean(values) - threshold`` (negated when lower is
    better) with the same ``MIN_RUNS`` and ``CONFIDENCE``. "does not hold" when the threshold is
    missed beyond the interval, "inconclusive" when the interval straddles it."""
    x = _runs(values)
    n = (x.size,)
    if x.size == 0:
        return not_tested("no runs")
    effect = (1.0 if higher_is_better else -1.0) * (float(x.mean()) - threshold)
    if x.size < 2:
        return Verdict(INCONCLUSIVE, effect, math.nan, math.nan, n, f"fewer than {MIN_RUNS} runs", scale, unit)
    se = float(x.std(ddof=1)) / math.sqrt(x.size)
    if se == 0 and effect == 0:
        return Verdict(INCONCLUSIVE, 0.0, 0.0, 0.0, n, "exactly at the threshold", scale, unit)
    return _decide(effect, se, x.size - 1, n, scale, unit)


def holds_for_every(passed: Sequence[bool], cases: str = "cases") -> Verdict:
    """The rule for a universal claim checked case by case (a lemma's inequality on every batch):
    one counterexample refutes it ("does not hold"); it holds when at least ``MIN_RUNS`` cases
    were checked and none failed. ``cases`` names them in the plural (e.g. "batches"). The
    effect is the share of cases that pass."""
    ok = np.asarray(passed, dtype=bool).reshape(-1)
    n = (ok.size,)
    if ok.size == 0:
        return not_tested(f"no {cases} checked")
    share = float(ok.mean())
    if not ok.all():
        return Verdict(FAILS, share, share, share, n, f"{int((~ok).sum())} of {ok.size} {cases} fail")
    if ok.size < MIN_RUNS:
        return Verdict(INCONCLUSIVE, share, share, share, n, f"fewer than {MIN_RUNS} {cases} checked")
    return Verdict(HOLDS, share, share, share, n)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the paper's evidence, ours, and the :class:`Verdict` the rule
    computed from our runs (:func:`compare`, :func:`compare_to_threshold`,
    :func:`holds_for_every`, :func:`group_verdict`, :func:`interior_optimum`, or
    :func:`not_tested` with the reason). A typed string is refused."""

    claim: str
    paper_evidence: str
    our_evidence: str
    verdict: Verdict

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):
            raise TypeError(
                f"claim {self.claim!r}: verdict {self.verdict!r} is a {type(self.verdict).__name__}; "
                "verdicts come from the rule (dmlnb.reporting.compare and friends), never typed"
            )


CLAIM_COLUMNS = ["claim", "paper's evidence", "our evidence", "verdict", "effect", "90% interval", "runs per side", "note"]


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a DataFrame: claim / paper's evidence / our evidence / verdict, and the
    verdict's evidence (effect, 90% interval, runs per side, note)."""
    rows = [
        {"claim": c.claim, "paper's evidence": c.paper_evidence, "our evidence": c.our_evidence,
         "verdict": str(c.verdict), **c.verdict.evidence()}
        for c in claims
    ]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def group_verdict(
    better: Mapping[str, Sequence[float]],
    worse: Mapping[str, Sequence[float]],
    higher_is_better: bool = True,
    *,
    scale: float = 1.0,
    unit: str = "",
) -> tuple[Verdict, pd.DataFrame]:
    """Verdict on "every method of ``better`` beats every method of ``worse``".

    Each pair is judged by :func:`compare`. The claim holds when every pair holds; it does not
    hold when some pair does not (``"does not hold: k of m pairs hold"`` when others do);
    otherwise it is inconclusive. The verdict carries the weakest pair's effect and interval
    (the pair with the lowest lower bound). Returns the verdict and the table of pairs.
    """
    rows, verdicts = [], []
    for a, xa in better.items():
        for b, xb in worse.items():
            v = compare(xa, xb, higher_is_better, scale=scale, unit=unit)
            verdicts.append(v)
            rows.append({"better": a, "worse": b, "verdict": str(v), **v.evidence()})
    table = pd.DataFrame(rows)
    if not verdicts:
        return not_tested("no pairs"), table
    weakest = min(verdicts, key=lambda v: (v.low if math.isfinite(v.low) else -math.inf))
    texts = [str(v) for v in verdicts]
    m = len(texts)
    note = f"weakest of {m} pairs" if m > 1 else weakest.note
    if all(t == HOLDS for t in texts):
        text = HOLDS
    elif FAILS in texts:
        text = FAILS if texts.count(HOLDS) == 0 else f"{FAILS}: {texts.count(HOLDS)} of {m} pairs hold"
        weakest = min((v for v in verdicts if str(v) == FAILS), key=lambda v: v.high)
        note = f"{texts.count(FAILS)} of {m} pairs do not hold" if m > 1 else weakest.note
    else:
        text = INCONCLUSIVE
    return Verdict(text, weakest.effect, weakest.low, weakest.high, weakest.n, note, scale, unit), table


def interior_optimum(
    points: Mapping[float, Sequence[float]], higher_is_better: bool = True, *,
    scale: float = 1.0, unit: str = "",
) -> tuple[Verdict, pd.DataFrame]:
    """Verdict on "a sweep (M, λ, α, group size) has an interior optimum", from per-seed
    results at each swept value (sorted by value; the first and last are the ends).

    Holds when some interior value beats both ends under :func:`compare`; does not hold when one
    end beats every interior value; otherwise inconclusive. The verdict carries the weaker of the
    two end comparisons of the best interior value (the winner when it holds; for "does not
    hold", the end's smallest margin over an interior value, negated). Returns the verdict and a
    table of every interior value against each end.
    """
    keys = sorted(points)
    if len(keys) < 3:
        return not_tested("a sweep needs at least 3 values"), pd.DataFrame()
    ends, interior = (keys[0], keys[-1]), keys[1:-1]
    sign = 1.0 if higher_is_better else -1.0
    judge = lambda x, y: compare(points[x], points[y], higher_is_better, scale=scale, unit=unit)  # noqa: E731
    weaker = lambda vs: min(vs, key=lambda v: v.low if math.isfinite(v.low) else -math.inf)  # noqa: E731
    rows, versus = [], {}
    for k in interior:
        versus[k] = (judge(k, ends[0]), judge(k, ends[1]))
        rows.append({"value": k, f"vs {ends[0]}": str(versus[k][0]), f"vs {ends[1]}": str(versus[k][1]),
                     **weaker(versus[k]).evidence()})
    table = pd.DataFrame(rows)
    winners = [k for k in interior if all(str(v) == HOLDS for v in versus[k])]
    if winners:
        k = max(winners, key=lambda k: sign * float(np.mean(points[k])))
        w = weaker(versus[k])
        return Verdict(HOLDS, w.effect, w.low, w.high, w.n, f"{k} beats both ends", scale, unit), table
    for e in ends:
        over = [judge(e, k) for k in interior]
        if all(str(v) == HOLDS for v in over):
            v = weaker(over)
            return Verdict(FAILS, -v.effect, -v.high, -v.low, v.n, f"the end {e} beats every interior value",
                           scale, unit), table
    w = weaker(versus[max(interior, key=lambda k: sign * float(np.mean(points[k])))])
    return Verdict(INCONCLUSIVE, w.effect, w.low, w.high, w.n, "no interior value beats both ends", scale, unit), table


def paper_run_status(configs: Sequence["TrainConfig"], data_root: str | Path | None = None) -> pd.DataFrame:
    """Whether each run of Table 2 can be reproduced here: a CUDA GPU and the dataset's files.

    Returns one row per config: ``dataset``, ``gpu`` (bool), ``data`` ("found" or the first
    line of the loader's missing-file error) and ``runnable``.
    """
    from dmlnb.data import load_dataset

    gpu = torch.cuda.is_available()
    rows = []
    for cfg in configs:
        try:
            load_dataset(cfg.dataset, root=data_root, **cfg.dataset_options)
            data = "found"
        except FileNotFoundError as err:
            data = str(err).splitlines()[0]
        rows.append({"dataset": cfg.dataset, "gpu": gpu, "data": data, "runnable": gpu and data == "found"})
    return pd.DataFrame(rows, columns=["dataset", "gpu", "data", "runnable"])
