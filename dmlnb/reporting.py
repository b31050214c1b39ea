"""Tables and verdicts for the book: runs summarised as mean ± std, reported beside reproduced,
and every claim judged by one stated rule.

Reproduced numbers only ever come from run records; the paper's numbers enter only through the
``reported`` argument of :func:`reported_vs_reproduced`, in their own block of columns labelled
with the source and the dataset ("reported (CUB-200-2011, GoogLeNet)"), never in a column of
another dataset's numbers.

**The verdict rule** (:func:`compare`; the protocol chapter states it): a claim "holds" only with
at least 3 runs per side and a one-sided Welch t-test at 95% confidence; it "does not hold" when
the opposite direction passes the same test, or when its own threshold is missed beyond the
interval (:func:`compare_to_threshold`), or, for a universal claim checked case by case, on one
counterexample (:func:`holds_for_every`); anything else is "inconclusive", shown with the effect
and its 90% two-sided interval (whose ends are the two one-sided 95% bounds). One run per side
never holds or fails. A sweep has an interior optimum only when an interior value beats both
ends under the same test (:func:`interior_optimum`).

The same rule, applied to claims of other forms:

* paired runs (the same run measured two ways): :func:`paired_differences`;
* "A and B perform alike" within a margin: :func:`equivalent` (two one-sided tests), and for
  every pair of a sweep, :func:`every_pair_equivalent`;
* "A and B do not differ", without a margin (it can be refuted, never shown): :func:`no_difference`;
* a claim made of parts, each judged by the rule: :func:`all_of` (every part), :func:`most_of`
  (more than half), :func:`group_verdict` (every method of a group beats every method of another);
* a claim of an order of growth ("linear in N", "cubic", "falls as 1/C"), from per-repeat
  log-log slopes: :func:`compare_to_band` on :func:`order_band`, the claimed order ± 0.5 (halfway
  to the neighbouring orders), so a slope too steep fails as surely as one too flat.

Four rules say when runs cannot decide a claim, whatever the numbers:

* **degenerate runs** (:func:`unless_degenerate`; ``degenerate=`` of :func:`group_verdict` and
  :func:`interior_optimum`): a comparison any of whose compared sides is degenerate (a collapsed
  embedding, which cannot exercise the mechanism the claim is about) is "not tested at this
  scale", with what and which sides in the note; a claim made of such comparisons counts them as
  untested parts. Every chapter marks a run collapsed by one criterion, :func:`collapsed`: its
  training loss stays within :data:`COLLAPSE_BAND` (2.5%) of the loss of a collapsed embedding
  over its last two epochs;
* **another algorithm timed** (:func:`implementation_claims`): when the code timed is not what
  the claim describes (another algorithm, or the algorithm used another way), the paper's
  complexity claim is "not tested", and the same order, tested on the code that ran, is a
  separate measurement of ours;
* **selection biased toward the claim** (:func:`biased_toward_claim`): when the runs' epoch (or
  setting) was chosen by a criterion that favours the claim, "holds" becomes "inconclusive"
  (a failure despite the bias stands);
* **a shape unchecked** (:func:`shape_unchecked`; ``sizes=`` of :func:`implementation_claims`): an
  order-of-growth claim with a repeat whose slope rests on fewer than :data:`MIN_FIT_SIZES` sizes
  (a line through two points) is decided neither way: "inconclusive".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from dmlnb.records import GIT_SCOPE, package_changed

if TYPE_CHECKING:
    from dmlnb.profiles import TrainConfig
    from dmlnb.records import RunRecord

__all__ = [
    "summarize_runs",
    "format_mean_std",
    "reported_vs_reproduced",
    "source_dataset",
    "Verdict",
    "compare",
    "compare_to_threshold",
    "holds_for_every",
    "paired_differences",
    "margin_tests",
    "equivalent",
    "all_of",
    "most_of",
    "no_difference",
    "group_verdict",
    "every_pair_equivalent",
    "interior_optimum",
    "not_tested",
    "Claim",
    "claims_table",
    "provenance_frame",
    "provenance_text",
    "provenance_groups",
    "best_minus_last",
    "paper_run_status",
    "HOLDS",
    "FAILS",
    "INCONCLUSIVE",
    "NOT_TESTED",
    "MIN_RUNS",
    "CONFIDENCE",
    "compare_to_band",
    "order_band",
    "ORDER_HALF_WIDTH",
    "unless_degenerate",
    "implementation_claims",
    "biased_toward_claim",
    "qualify",
    "collapsed",
    "COLLAPSE_BAND",
    "verdict_category",
    "verdict_counts",
    "count_line",
    "QUALIFIED_HOLDS",
    "shape_unchecked",
    "MIN_FIT_SIZES",
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


#: A column label of :func:`reported_vs_reproduced`: the source, then the dataset first in brackets.
_SOURCE_LABEL = re.compile(
    r"(?P<kind>reported|reproduced) \((?P<dataset>[^,;()]*[^,;()\s])\s*[,;)]"
)
_SOURCE_WORD = re.compile(r"\b(reported|reproduced)\b", re.IGNORECASE)


def source_dataset(label: str) -> str:
    """The dataset a source label of :func:`reported_vs_reproduced` names: the text between its
    opening bracket and the first comma, semicolon or closing bracket
    (``"reported (CUB-200-2011, GoogLeNet)"`` -> ``"CUB-200-2011"``).

    Raises:
        ValueError: the label is not ``"reported (<dataset>...)"`` or
            ``"reproduced (<dataset>...)"``.
    """
    m = _SOURCE_LABEL.match(label)
    if m is None:
        raise ValueError(
            f"source label {label!r} does not name its source and dataset: write "
            "'reported (<dataset>, <setting>)' or 'reproduced (<dataset>, <setting>)'"
        )
    return m.group("dataset").strip()


def _labels(frame: pd.DataFrame, axis: str) -> list[str]:
    """Every label of ``frame``'s index or columns (each level of a MultiIndex) as text."""
    index = frame.index if axis == "rows" else frame.columns
    return [str(v) for level in range(index.nlevels) for v in index.get_level_values(level)]


def reported_vs_reproduced(
    reported: Mapping[str, pd.DataFrame],
    reproduced: Mapping[str, pd.DataFrame] | None = None,
    rows: Sequence[Any] | None = None,
) -> pd.DataFrame:
    """The paper's tables and ours side by side, one block of columns per source and dataset.

    Every key is the block's column label and names its source and dataset first:
    ``"reported (CUB-200-2011, GoogLeNet)"``, ``"reproduced (omniglot-small, convnet, default,
    3 seeds)"`` (:func:`source_dataset`). Each block holds its own frame's columns (metrics) and
    nothing else, so a column never holds numbers of two sources or of two datasets: a reproduced
    analogue stands beside a reported number of another dataset, never under it. The header has
    two levels, ``(source, metric)``, reported blocks first, in the order given; rows are ``rows``
    (default: every frame's rows, in order of first appearance); a block without a row shows "—".
    ``reproduced`` may be empty (the paper's numbers alone, labelled with their dataset).

    Raises:
        ValueError: a label that does not name its source (``reported`` for the ``reported``
            frames, ``reproduced`` for the others) and its dataset; a frame with more than one
            column level (a frame per dataset: a dataset level would put two datasets under one
            label); a row or column label that names a source ("reported", "reproduced") or the
            dataset of any block (rows of another source or dataset in this block's columns).
    """
    blocks = {
        **{k: ("reported", f) for k, f in reported.items()},
        **{k: ("reproduced", f) for k, f in (reproduced or {}).items()},
    }
    if not blocks:
        raise ValueError("reported_vs_reproduced needs at least one frame")
    if len(blocks) < len(reported) + len(reproduced or {}):
        raise ValueError("a label is used for a reported and a reproduced frame")
    datasets = {label: source_dataset(label) for label in blocks}
    for label, (kind, frame) in blocks.items():
        if not label.startswith(kind):
            raise ValueError(f"{label!r} is given as {kind}, but its label says otherwise")
        if frame.columns.nlevels != 1:
            raise ValueError(
                f"{label!r}: the frame has {frame.columns.nlevels} column levels; give one frame "
                "(one block) per dataset, with the metrics as its columns"
            )
        for axis in ("rows", "columns"):
            for name in _labels(frame, axis):
                if _SOURCE_WORD.search(name):
                    raise ValueError(
                        f"{label!r}: the {axis[:-1]} {name!r} names a source; it would share this "
                        "block's columns with numbers of another source"
                    )
                if name in datasets.values():
                    raise ValueError(
                        f"{label!r}: the {axis[:-1]} {name!r} names a dataset; give one block per "
                        "dataset, labelled with it"
                    )
    order = (
        list(rows)
        if rows is not None
        else list(dict.fromkeys(r for _, f in blocks.values() for r in f.index))
    )
    cols = {
        (label, m): frame[m].reindex(order)
        for label, (_, frame) in blocks.items()
        for m in frame.columns
    }
    table = pd.DataFrame(cols, index=pd.Index(order, name=None))
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["source", "metric"])
    return table.astype(object).where(table.notna(), "—")


HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED = (
    "holds",
    "does not hold",
    "inconclusive",
    "not tested at this scale",
)
#: The category of a :func:`qualify`-ed "holds": what was tested is narrower than the claim, so a
#: count of verdicts keeps it apart from the plain holds.
QUALIFIED_HOLDS = "holds (qualified)"
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
        cls,
        text: str,
        effect: float = math.nan,
        low: float = math.nan,
        high: float = math.nan,
        n: tuple[int, ...] = (),
        note: str = "",
        scale: float = 1.0,
        unit: str = "",
    ) -> "Verdict":
        obj = super().__new__(cls, text)
        obj.effect, obj.low, obj.high, obj.n, obj.note = (
            float(effect),
            float(low),
            float(high),
            tuple(n),
            note,
        )
        obj.scale, obj.unit = scale, unit
        return obj

    def relabel(self, text: str | None = None, note: str | None = None) -> "Verdict":
        """This verdict's evidence (effect, interval, runs, format) under another ``text`` or
        ``note`` (``None``: keep this one's)."""
        return Verdict(
            str(self) if text is None else text,
            self.effect,
            self.low,
            self.high,
            self.n,
            self.note if note is None else note,
            self.scale,
            self.unit,
        )

    def evidence(self) -> dict[str, str]:
        """The columns a claims table shows: effect, interval and runs per side
        (``"—"`` if none)."""
        fmt = lambda v: f"{v * self.scale:+.3g}" if math.isfinite(v) else "—"  # noqa: E731
        effect = fmt(self.effect) + (self.unit if math.isfinite(self.effect) else "")
        interval = f"[{fmt(self.low)}, {fmt(self.high)}]" if math.isfinite(self.low) else "—"
        runs = " vs ".join(str(k) for k in self.n) if self.n else "—"
        return {
            "effect": effect,
            "90% interval": interval,
            "runs per side": runs,
            "note": self.note,
        }


def not_tested(reason: str) -> Verdict:
    """The verdict of a claim this scale cannot test; ``reason`` says why (shown in the table)."""
    return Verdict(NOT_TESTED, note=reason)


def _decide(
    effect: float, se: float, df: float, n: tuple[int, ...], scale: float, unit: str
) -> Verdict:
    """Apply the rule to an effect with standard error ``se`` and ``df`` degrees of freedom."""
    from scipy import stats

    if se > 0:
        half = float(stats.t.ppf(CONFIDENCE, df)) * se
    else:  # no spread on either side: the difference is exact
        half = 0.0
    low, high = effect - half, effect + half
    if min(n) < MIN_RUNS:
        return Verdict(
            INCONCLUSIVE, effect, low, high, n, f"fewer than {MIN_RUNS} runs per side", scale, unit
        )
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
    a: Sequence[float],
    b: Sequence[float],
    higher_is_better: bool = True,
    *,
    scale: float = 1.0,
    unit: str = "",
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
        return Verdict(
            INCONCLUSIVE,
            effect,
            math.nan,
            math.nan,
            n,
            f"fewer than {MIN_RUNS} runs per side",
            scale,
            unit,
        )
    se = math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1)) if se > 0 else math.inf
    if se == 0 and effect == 0:
        return Verdict(INCONCLUSIVE, 0.0, 0.0, 0.0, n, "identical results", scale, unit)
    return _decide(effect, se, df, n, scale, unit)


def compare_to_threshold(
    values: Sequence[float],
    threshold: float,
    higher_is_better: bool = True,
    *,
    scale: float = 1.0,
    unit: str = "",
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
        return Verdict(
            INCONCLUSIVE, effect, math.nan, math.nan, n, f"fewer than {MIN_RUNS} runs", scale, unit
        )
    se = float(x.std(ddof=1)) / math.sqrt(x.size)
    if se == 0 and effect == 0:
        return Verdict(INCONCLUSIVE, 0.0, 0.0, 0.0, n, "exactly at the threshold", scale, unit)
    return _decide(effect, se, x.size - 1, n, scale, unit)


#: Half the width of the band :func:`order_band` puts around a claimed order of growth: halfway
#: to the neighbouring orders (a slope of 1.4 is nearer linear than quadratic).
ORDER_HALF_WIDTH = 0.5


def order_band(order: float, half_width: float = ORDER_HALF_WIDTH) -> tuple[float, float]:
    """The band of log-log slopes that counts as order ``order`` (1: linear, 3: cubic, -1: falls
    as 1/C): ``(order - half_width, order + half_width)``."""
    return float(order) - half_width, float(order) + half_width


def compare_to_band(
    values: Sequence[float],
    low: float,
    high: float,
    *,
    scale: float = 1.0,
    unit: str = "",
) -> Verdict:
    """The rule for a claim that a quantity lies within a band ``(low, high)`` (a measured order of
    growth within :func:`order_band` of the claimed one): the two one-sided tests of
    :func:`compare_to_threshold`, "above ``low``" and "below ``high``". Holds when both hold (the
    90% interval of the mean lies inside the band); does not hold when either does not (the
    interval lies wholly beyond an edge); otherwise inconclusive (and always with fewer than
    ``MIN_RUNS`` values). The effect shown is the mean itself, with its 90% interval; the note
    names the band and, when it fails or is open, the edge that decides."""
    if not low < high:
        raise ValueError(f"the band needs low < high, got ({low}, {high})")
    x = _runs(values)
    n = (x.size,)
    if x.size == 0:
        return not_tested("no runs")
    above = compare_to_threshold(x, low, higher_is_better=True)
    below = compare_to_threshold(x, high, higher_is_better=False)
    mean = float(x.mean())
    lo_i, hi_i = (
        (above.low + low, above.high + low) if math.isfinite(above.low) else (math.nan, math.nan)
    )
    band = f"band ({low * scale:g}, {high * scale:g}){unit}"
    texts = (str(above), str(below))
    if texts == (HOLDS, HOLDS):
        return Verdict(HOLDS, mean, lo_i, hi_i, n, f"within the {band}", scale, unit)
    if FAILS in texts:
        edge = f"below {low * scale:g}" if str(above) == FAILS else f"above {high * scale:g}"
        return Verdict(FAILS, mean, lo_i, hi_i, n, f"{edge}{unit}: outside the {band}", scale, unit)
    if x.size < MIN_RUNS:
        return Verdict(
            INCONCLUSIVE, mean, lo_i, hi_i, n, f"fewer than {MIN_RUNS} runs; {band}", scale, unit
        )
    edges = " and ".join(
        f"{e * scale:g}{unit}" for e, t in ((low, above), (high, below)) if str(t) != HOLDS
    )
    return Verdict(
        INCONCLUSIVE, mean, lo_i, hi_i, n, f"the interval crosses {edges} (the {band})", scale, unit
    )


#: Fewest sizes a repeat's log-log slope must rest on for a band claim to be decided
#: (:func:`shape_unchecked`): a line through two points says nothing of the curve's shape.
MIN_FIT_SIZES = 3


def shape_unchecked(verdict: Verdict, sizes: Sequence[int]) -> Verdict:
    """A band claim (:func:`compare_to_band`) on per-repeat slopes, ``sizes`` the
    number of sizes each repeat's slope was fitted on: when a repeat rests on fewer than
    :data:`MIN_FIT_SIZES` (a line through two points, which cannot check the curve's shape between
    or beyond them), the claim is decided neither way: "holds" and "does not hold" become
    "inconclusive", with the reason first in the note (the effect and interval kept). Otherwise, or
    without sizes (unknown), ``verdict`` unchanged."""
    short = [k for k in sizes if k < MIN_FIT_SIZES]
    if not short:
        return verdict
    m = len(list(sizes))
    why = (
        f"{'every' if len(short) == m else f'{len(short)} of {m}'} repeat "
        f"slope{'s' if len(short) > 1 else ''} through two sizes only: a line through two points "
        "cannot check the curve's shape, so the band decides neither way"
    )
    text = INCONCLUSIVE if str(verdict).split(":")[0] in (HOLDS, FAILS) else str(verdict)
    note = why + (f"; {verdict.note}" if verdict.note else "")
    return verdict.relabel(text, note)


def unless_degenerate(
    verdict: Verdict,
    degenerate: Iterable[str],
    what: str = "collapsed runs",
    *,
    keep_effect: bool = False,
) -> Verdict:
    """The rule for runs that cannot exercise a claim's mechanism: ``verdict`` unchanged when no
    compared side is ``degenerate``, else "not tested at this scale" with ``what`` and the
    degenerate sides in the note (``"collapsed runs: HPHN n = 2"``), whatever the numbers say.
    ``keep_effect``: the untested verdict still carries the measured effect and interval, so that
    a table shows what was measured beside why it is no test."""
    sides = list(dict.fromkeys(degenerate))
    if not sides:
        return verdict
    note = f"{what}: {', '.join(sides)}"
    if keep_effect:
        return verdict.relabel(NOT_TESTED, note)
    return not_tested(note)


#: :func:`collapsed`'s band: the share of the collapsed embedding's loss within which a run's
#: training loss counts as pinned there.
COLLAPSE_BAND = 0.025


def collapsed(
    losses: Sequence[float], level: float, band: float = COLLAPSE_BAND, last: int = 2
) -> bool:
    """The book's criterion for a collapsed run, whose sides :func:`unless_degenerate` sets aside:
    its training ``losses`` (one per epoch, in order) stay within ``band * |level|`` of ``level``
    over the ``last`` epochs, ``level`` being the loss of a collapsed embedding (every embedding
    equal, so every distance and similarity equal: ``ln 2`` for a single-negative softplus term, the
    margin for a triplet loss on squared distances). A loss held there carries the collapsed
    embedding's value, whatever the runs' metrics; a run with fewer than ``last`` epochs is never
    collapsed. Where ``level`` is 0 the band is empty: only a loss of exactly 0, which is also a
    perfect fit, would count, so such a loss needs another measure of collapse.

    Raises:
        ValueError: ``band`` is negative or ``last`` is below 1.
    """
    if band < 0 or last < 1:
        raise ValueError(
            f"collapsed needs band >= 0 and last >= 1, got band={band!r}, last={last!r}"
        )
    tail = np.asarray(list(losses)[-last:], dtype=np.float64)  # (last,)
    return len(tail) == last and bool(np.all(np.abs(tail - level) <= band * abs(level)))


def biased_toward_claim(verdict: Verdict, why: str) -> Verdict:
    """The rule for a claim whose runs were selected (an epoch, a setting) by a criterion that
    favours the claim: it cannot hold on them, so "holds" becomes "inconclusive" with ``why`` in the
    note (the effect and interval kept); any other verdict is kept (a failure despite the bias
    stands), with ``why`` appended to its note."""
    note = f"selection biased toward the claim: {why}" + (
        f"; {verdict.note}" if verdict.note else ""
    )
    text = INCONCLUSIVE if str(verdict) == HOLDS else str(verdict)
    return verdict.relabel(text, note)


def qualify(verdict: Verdict, what: str) -> Verdict:
    """``verdict`` with its text qualified by what was tested: ``"holds: the bound falls, but stays
    vacuous"``; the evidence is the verdict's, and so is the category (the text before ``":"``),
    except that a count keeps a qualified hold apart (:func:`verdict_category`)."""
    return verdict.relabel(f"{verdict}: {what}")


def verdict_category(verdict: Verdict | str) -> str:
    """The category a verdict is counted in: the text before ``":"`` (``"does not hold: 1 of 3
    pairs hold"`` is ``"does not hold"``), except that a qualified hold (:func:`qualify`,
    ``"holds: the bound falls, but stays vacuous"``) is :data:`QUALIFIED_HOLDS`,
    not a plain hold."""
    head, qualified, _ = str(verdict).partition(":")
    return QUALIFIED_HOLDS if head == HOLDS and qualified else head


def verdict_counts(verdicts: Iterable[Verdict]) -> dict[str, int]:
    """How many verdicts fall in each category (:func:`verdict_category`), in the order holds,
    holds (qualified), does not hold, inconclusive, not tested; categories without a verdict are
    left out."""
    cats = [verdict_category(v) for v in verdicts]
    return {
        c: cats.count(c)
        for c in (HOLDS, QUALIFIED_HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED)
        if c in cats
    }


def count_line(verdicts: Iterable[Verdict]) -> str:
    """The verdicts counted by category (:func:`verdict_counts`) as the one line every chapter
    prints under its claims, e.g. ``"6 holds, 2 holds (qualified), 1 does not hold, 4
    inconclusive"``; ``"no verdicts"`` when there are none."""
    return (
        ", ".join(f"{n} {category}" for category, n in verdict_counts(verdicts).items())
        or "no verdicts"
    )


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
        return Verdict(
            FAILS, share, share, share, n, f"{int((~ok).sum())} of {ok.size} {cases} fail"
        )
    if ok.size < MIN_RUNS:
        return Verdict(
            INCONCLUSIVE, share, share, share, n, f"fewer than {MIN_RUNS} {cases} checked"
        )
    return Verdict(HOLDS, share, share, share, n)


def paired_differences(
    a: Sequence[float], b: Sequence[float], *, scale: float = 1.0, unit: str = ""
) -> Verdict:
    """ "A beats B" on paired per-run values (the same run measured two ways, ``a[i]`` with
    ``b[i]``): the rule's one-sample test of the per-run differences ``a - b`` against 0
    (:func:`compare_to_threshold`)."""
    return compare_to_threshold([x - y for x, y in zip(a, b)], 0.0, scale=scale, unit=unit)


def margin_tests(
    a: Sequence[float],
    b: Sequence[float],
    margin: float,
    *,
    scale: float = 1.0,
    unit: str = "",
) -> tuple[Verdict, Verdict]:
    """The two one-sided tests of "``d = mean(A) - mean(B)`` lies within ``±margin``", each by
    :func:`compare` on values shifted by the margin: ``d > -margin`` (``compare(A + margin, B)``)
    and ``d < margin`` (``compare(B, A - margin)``). Returns ``(above -margin, below +margin)``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return compare(x + margin, y, scale=scale, unit=unit), compare(
        y, x - margin, scale=scale, unit=unit
    )


def _within_margin(above: Verdict, below: Verdict) -> str:
    """Equivalence from :func:`margin_tests`: holds when both hold, does not hold when one does not
    (the difference lies beyond the margin), else inconclusive."""
    both = (str(above), str(below))
    return HOLDS if both == (HOLDS, HOLDS) else FAILS if FAILS in both else INCONCLUSIVE


def equivalent(
    a: Sequence[float], b: Sequence[float], margin: float, *, scale: float = 1.0, unit: str = ""
) -> Verdict:
    """The rule for "A and B perform alike" within ``±margin`` (two one-sided tests,
    :func:`margin_tests`): it holds when the 90% interval of ``mean(A) - mean(B)`` lies inside
    ``(-margin, margin)``, does not hold when it lies wholly outside, and is otherwise (or with
    fewer than ``MIN_RUNS`` runs per side) inconclusive. The effect shown is the difference itself
    (:func:`compare`), with its interval."""
    d = compare(a, b, scale=scale, unit=unit)
    if str(d) == NOT_TESTED:
        return d
    text = _within_margin(*margin_tests(a, b, margin, scale=scale, unit=unit))
    note = f"equivalence margin ±{margin * scale:.3g}{unit}"
    if min(d.n) < MIN_RUNS:
        note += f"; {d.note}"
    elif text == INCONCLUSIVE:
        note += "; the interval crosses the margin"
    return Verdict(text, d.effect, d.low, d.high, d.n, note, scale, unit)


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
                f"claim {self.claim!r}: verdict {self.verdict!r} is a "
                f"{type(self.verdict).__name__}; verdicts come from the rule "
                "(dmlnb.reporting.compare and friends), never typed"
            )


CLAIM_COLUMNS = [
    "claim",
    "paper's evidence",
    "our evidence",
    "verdict",
    "effect",
    "90% interval",
    "runs per side",
    "note",
]


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a DataFrame: claim / paper's evidence / our evidence / verdict, and the
    verdict's evidence (effect, 90% interval, runs per side, note)."""
    rows = [
        {
            "claim": c.claim,
            "paper's evidence": c.paper_evidence,
            "our evidence": c.our_evidence,
            "verdict": str(c.verdict),
            **c.verdict.evidence(),
        }
        for c in claims
    ]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def implementation_claims(
    paper_claim: str,
    paper_evidence: str,
    our_claim: str,
    our_evidence: str,
    slopes: Sequence[float],
    order: float,
    why: str,
    sizes: Sequence[int] = (),
) -> tuple[Claim, Claim]:
    """The rule for a paper's complexity claim timed on code that is not what the claim describes
    (another algorithm, or the algorithm used another way; ``why`` says how it differs): the paper's
    claim is not tested (``why`` is the reason), and the same order, tested on the code that ran, is
    a separate measurement of ours: the per-repeat log-log ``slopes`` within :func:`order_band` of
    ``order`` (:func:`compare_to_band`), undecided when a repeat's slope rests on too few of
    ``sizes`` (the sizes each repeat was fitted on, :func:`shape_unchecked`). Returns
    ``(the paper's claim, our measurement)``; ``our_evidence`` states the slopes and sizes."""
    low, high = order_band(order)
    paper = Claim(
        paper_claim,
        paper_evidence,
        f"timed on dmlnb's implementation only: see '{our_claim}'",
        not_tested(f"the timed code is not what the claim describes: {why}"),
    )
    ours = Claim(
        our_claim,
        "— (the paper times no implementation)",
        our_evidence,
        shape_unchecked(compare_to_band(slopes, low, high), sizes),
    )
    return paper, ours


def _lowest_bound(v: Verdict) -> float:
    return v.low if math.isfinite(v.low) else -math.inf


def _breakdown(
    held: list[str], open_: list[str], untested: list[str], failing: list[str], m: int, what: str
) -> str:
    """:func:`all_of`'s tally naming every category: ``"fails on 1 of 9 pairs (EP vs HP); of the
    other 8: 8 inconclusive"``."""
    rest = [
        f"{len(held)} hold{'s' if len(held) == 1 else ''}" if held else "",
        f"{len(open_)} inconclusive" if open_ else "",
        f"{len(untested)} not tested" if untested else "",
    ]
    rest = ", ".join(r for r in rest if r)
    others = m - len(failing)
    if not failing:
        return f"of {m} {what}: {rest}"
    head = f"fails on {len(failing)} of {m} {what} ({', '.join(failing)})"
    if not rest:
        return head
    return head + (
        f"; of the other {others}: {rest}" if others > 1 else f"; the other {rest.split(' ', 1)[1]}"
    )


def all_of(
    parts: Mapping[str, Verdict],
    what: str = "parts",
    *,
    shown: Literal["weakest", "first"] = "weakest",
    breakdown: bool = False,
) -> Verdict:
    """Verdict on a claim that is the conjunction of named parts, each judged by the rule (e.g.
    "better at every Recall@K": one :func:`compare` per K).

    Holds when every part holds; does not hold when some part does not (``"does not hold: k of m
    <what> hold"`` when others do); otherwise inconclusive (an untested part counts as not
    holding, and the note counts the untested parts); no parts, or no part tested: not tested. The
    verdict carries the effect and interval of one tested part, named in its note (with one part,
    the note is that part's):

    * ``shown="weakest"``: the part nearest to failing, the one with the lowest lower bound; when
      the claim does not hold, the failing part with the lowest upper bound;
    * ``shown="first"``: the first part, in the order of ``parts``, that decides: the first that
      does not hold, else the first that is not "holds", else the first (parts listed by
      importance, e.g. Recall@1 first).

    ``breakdown``: the note's tally names every category instead: ``"fails on 1 of 9 pairs (EP vs
    HP); of the other 8: 8 inconclusive"``.
    """
    if not parts:
        return not_tested(f"no {what}")
    texts = {k: str(v) for k, v in parts.items()}
    m = len(parts)
    untested = [k for k, t in texts.items() if t == NOT_TESTED]
    if len(untested) == m:
        if m == 1:
            return next(iter(parts.values()))
        notes = list(dict.fromkeys(parts[k].note for k in untested if parts[k].note))
        return not_tested(
            f"none of the {m} {what} tested" + (f": {'; '.join(notes)}" if notes else "")
        )
    tested = {k: v for k, v in parts.items() if texts[k] != NOT_TESTED}
    held = [k for k, t in texts.items() if t == HOLDS]
    failing = [k for k, t in texts.items() if t == FAILS]
    open_ = [k for k, t in texts.items() if t not in (HOLDS, FAILS, NOT_TESTED)]
    weakest = min(tested, key=lambda k: _lowest_bound(tested[k]))
    skipped = f", {len(untested)} not tested" if untested else ""
    if failing:
        text = FAILS if not held else f"{FAILS}: {len(held)} of {m} {what} hold"
        name = failing[0] if shown == "first" else min(failing, key=lambda k: parts[k].high)
        tally = (
            f"{len(failing)} of {m} {what} do not hold"
            + (f": {', '.join(failing)}" if len(failing) > 1 else "")
            + skipped
        )
    elif len(held) == m:
        text, name, tally = (
            HOLDS,
            next(iter(parts)) if shown == "first" else weakest,
            f"all {m} {what} hold",
        )
    else:
        text = INCONCLUSIVE
        name = (
            next(k for k, t in texts.items() if t != HOLDS and t != NOT_TESTED)
            if shown == "first" and open_
            else (next(iter(tested)) if shown == "first" else weakest)
        )
        tally = f"{len(held)} of {m} {what} hold, none fails" + skipped
    if breakdown:
        tally = _breakdown(held, open_, untested, failing, m, what)
    v = parts[name]
    note = (
        v.note if m == 1 else f"effect: {name}" + (f" ({v.note})" if v.note else "") + f"; {tally}"
    )
    return v.relabel(text, note)


def most_of(parts: Mapping[str, Verdict], what: str = "parts") -> Verdict:
    """Verdict on "better than most of them", from one verdict per part: holds when more than half
    of the tested parts hold; does not hold when, even if every inconclusive part held, half or
    fewer would; else inconclusive (untested parts do not count; none tested: not tested). A share
    of parts is not a statistic, so the verdict carries no effect or interval: the note counts the
    tested parts per category and names those that hold (``"1 of 5 methods hold (Lifted
    structure), 1 fails, 3 inconclusive"``)."""
    texts = [str(v) for v in parts.values() if str(v) != NOT_TESTED]
    if not texts:
        return not_tested(f"no {what} tested")
    m, k, open_ = len(texts), texts.count(HOLDS), texts.count(INCONCLUSIVE)
    fails = m - k - open_
    text = HOLDS if k > m / 2 else FAILS if k + open_ <= m / 2 else INCONCLUSIVE
    held = ", ".join(name for name, v in parts.items() if str(v) == HOLDS) or "none"
    note = (
        f"{k} of {m} {what} hold ({held})"
        + (f", {fails} fail{'s' if fails == 1 else ''}" if fails else "")
        + (f", {open_} inconclusive" if open_ else "")
    )
    return Verdict(text, n=(m,), note=note)


#: Why a claim of no change is at best inconclusive.
_NO_MARGIN = "without an equivalence margin 'no change' can be refuted, not shown"


def no_difference(parts: Mapping[str, Verdict], what: str = "cases") -> Verdict:
    """Verdict on a claim of *no* significant change (e.g. "we have not observed any significant
    increase or decrease"), from one :func:`compare` verdict per case: "does not hold" when some
    case differs beyond its interval in either direction (the verdict shows the case farthest from
    0); otherwise "inconclusive" (it shows the case with the lowest lower bound), since without an
    equivalence margin the claim can be refuted, never shown (:func:`equivalent` tests one with a
    margin). A case that is not tested (e.g. :func:`unless_degenerate`) is left out and counted in
    the note; no cases, or none tested: not tested."""
    if not parts:
        return not_tested(f"no {what}")
    untested = [k for k, v in parts.items() if str(v) == NOT_TESTED]
    if len(untested) == len(parts):
        return all_of(parts, what)
    skipped = f"; {len(untested)} not tested: {', '.join(untested)}" if untested else ""
    parts = {k: v for k, v in parts.items() if k not in untested}
    m = len(parts)
    differ = [k for k, v in parts.items() if str(v) in (HOLDS, FAILS)]
    if differ:
        v = parts[max(differ, key=lambda k: min(abs(parts[k].low), abs(parts[k].high)))]
        note = (
            "the interval of the difference excludes 0"
            if m == 1
            else f"{len(differ)} of {m} {what} differ beyond the interval: {', '.join(differ)}"
        )
        return v.relabel(FAILS, note + skipped)
    v = parts[min(parts, key=lambda k: _lowest_bound(parts[k]))]
    head = v.note if m == 1 else f"none of {m} {what} differs beyond the interval"
    note = f"{head}; {_NO_MARGIN}" if head else _NO_MARGIN
    return v.relabel(INCONCLUSIVE, note + skipped)


def group_verdict(
    better: Mapping[str, Sequence[float]],
    worse: Mapping[str, Sequence[float]],
    higher_is_better: bool = True,
    *,
    scale: float = 1.0,
    unit: str = "",
    degenerate: Iterable[str] = (),
    degenerate_what: str = "collapsed runs",
    breakdown: bool = False,
) -> tuple[Verdict, pd.DataFrame]:
    """Verdict on "every method of ``better`` beats every method of ``worse``", from per-run
    results: each pair by :func:`compare`, the claim by :func:`all_of` over the pairs (named
    ``"A vs B"``; the weakest pair shown; ``breakdown``: its note counts every category). A pair
    with a side in ``degenerate`` is not tested (:func:`unless_degenerate`, with
    ``degenerate_what``). Returns the verdict and the table of pairs (``better``, ``worse``,
    ``verdict`` and the comparison's evidence; an untested pair keeps its measured effect, and its
    note says why it is not a test)."""
    bad = set(degenerate)
    rows, pairs = [], {}
    for a, xa in better.items():
        for b, xb in worse.items():
            raw = compare(xa, xb, higher_is_better, scale=scale, unit=unit)
            v = unless_degenerate(raw, [s for s in (a, b) if s in bad], degenerate_what)
            pairs[f"{a} vs {b}"] = v
            rows.append(
                {"better": a, "worse": b, "verdict": str(v), **raw.evidence(), "note": v.note}
            )
    table = pd.DataFrame(rows)
    if not pairs:
        return not_tested("no pairs"), table
    return all_of(pairs, "pairs", breakdown=breakdown), table


def every_pair_equivalent(
    points: Mapping[float, Sequence[float]],
    margin: float,
    *,
    scale: float = 1.0,
    unit: str = "",
    value_unit: str = "",
) -> tuple[Verdict, pd.DataFrame]:
    """Verdict on "the result does not depend on the swept value within the swept range": every
    *pair* of swept values ``a < b`` is equivalent within ``±margin``, each by the two one-sided
    tests of :func:`equivalent` on ``d = mean(x_b) - mean(x_a)``.

    Holds when every pair is equivalent; does not hold when some pair differs beyond the margin;
    inconclusive otherwise (fewer than two values: not tested). Since both one-sided tests must
    hold, a pair can only be equivalent when its 90% interval's half-width is below the margin;
    the note says when no pair can ("holds" is then unreachable with these runs).

    The verdict carries the plain difference ``d`` of one pair, with its 90% interval, as the
    table shows it: the differing pair with the largest ``|d|`` when the claim does not hold,
    else the pair with the largest ``|d|``; the note names the pair.

    Args:
        points: ``{swept value: per-run results}``.
        margin: the equivalence margin, in the units of the results.
        value_unit: appended to the swept values in the pair names (e.g. ``"°"``).

    Returns:
        The verdict and a table per pair: the difference (effect, 90% interval and its half-width,
        runs per side), the two one-sided tests (:func:`margin_tests`) and the pair's status.
    """
    values = sorted(points)
    if len(values) < 2:
        return not_tested("the sweep has fewer than two values"), pd.DataFrame()
    rows, pairs = [], []
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            diff = compare(points[b], points[a], scale=scale, unit=unit)
            above, below = margin_tests(points[b], points[a], margin, scale=scale, unit=unit)
            status = _within_margin(above, below)
            half = (diff.high - diff.low) / 2
            name = f"{b:g}{value_unit} − {a:g}{value_unit}"
            pairs.append((name, diff, status, half))
            ev = diff.evidence()
            rows.append(
                {
                    "pair": name,
                    "difference": ev["effect"],
                    "90% interval": ev["90% interval"],
                    "half-width": f"{half * scale:.3g}{unit}" if np.isfinite(half) else "—",
                    "runs per side": ev["runs per side"],
                    f"above −{margin * scale:.3g}{unit}": str(above),
                    f"below +{margin * scale:.3g}{unit}": str(below),
                    "equivalent": status,
                }
            )
    statuses = [p[2] for p in pairs]
    halves = [p[3] for p in pairs if np.isfinite(p[3])]
    bound = f"margin ±{margin * scale:.3g}{unit}"
    if FAILS in statuses:
        name, d, _, _ = max((p for p in pairs if p[2] == FAILS), key=lambda p: abs(p[1].effect))
        text, head = (
            FAILS,
            f"{statuses.count(FAILS)} of {len(pairs)} pairs differ beyond the {bound}",
        )
    else:
        name, d, _, _ = max(pairs, key=lambda p: abs(p[1].effect))
        text = HOLDS if all(t == HOLDS for t in statuses) else INCONCLUSIVE
        head = f"{statuses.count(HOLDS)} of {len(pairs)} pairs within the {bound}"
    note = f"effect: {name}; {head}"
    if halves and min(halves) >= margin:
        note += (
            f"; the 90% half-widths ({min(halves) * scale:.3g}-{max(halves) * scale:.3g}{unit} "
            "with "
            f'{min(min(p[1].n) for p in pairs)} runs per value) exceed the margin, so "holds" is '
            "unreachable "
            "at this scale"
        )
    elif d.note:
        note += f" ({d.note})"
    return Verdict(text, d.effect, d.low, d.high, d.n, note, scale, unit), pd.DataFrame(rows)


def interior_optimum(
    points: Mapping[float, Sequence[float]],
    higher_is_better: bool = True,
    *,
    scale: float = 1.0,
    unit: str = "",
    degenerate: Iterable[float] = (),
    degenerate_what: str = "collapsed runs",
) -> tuple[Verdict, pd.DataFrame]:
    """Verdict on "a sweep (M, λ, α, group size) has an interior optimum", from per-seed
    results at each swept value (sorted by value; the first and last are the ends).

    Holds when some interior value beats both ends under :func:`compare`; does not hold when one
    end beats every interior value; otherwise inconclusive. The verdict carries the weaker of the
    two end comparisons of the best interior value (the winner when it holds; for "does not
    hold", the end's smallest margin over an interior value, negated). Every swept value enters a
    comparison, so a sweep with a value in ``degenerate`` is not tested (:func:`unless_degenerate`,
    with ``degenerate_what``). Returns the verdict and a table of every interior value against each
    end.
    """
    keys = sorted(points)
    if len(keys) < 3:
        return not_tested("a sweep needs at least 3 values"), pd.DataFrame()
    degenerate = set(degenerate)  # once: an iterator would be used up by the first key
    bad = [k for k in keys if k in degenerate]
    judged = lambda v: unless_degenerate(v, [f"{k:g}" for k in bad], degenerate_what)  # noqa: E731
    ends, interior = (keys[0], keys[-1]), keys[1:-1]
    sign = 1.0 if higher_is_better else -1.0
    judge = lambda x, y: compare(points[x], points[y], higher_is_better, scale=scale, unit=unit)  # noqa: E731
    weaker = lambda vs: min(vs, key=lambda v: v.low if math.isfinite(v.low) else -math.inf)  # noqa: E731
    rows, versus = [], {}
    for k in interior:
        versus[k] = (judge(k, ends[0]), judge(k, ends[1]))
        rows.append(
            {
                "value": k,
                f"vs {ends[0]}": str(versus[k][0]),
                f"vs {ends[1]}": str(versus[k][1]),
                **weaker(versus[k]).evidence(),
            }
        )
    table = pd.DataFrame(rows)
    winners = [k for k in interior if all(str(v) == HOLDS for v in versus[k])]
    if winners:
        k = max(winners, key=lambda k: sign * float(np.mean(points[k])))
        w = weaker(versus[k])
        return judged(
            Verdict(HOLDS, w.effect, w.low, w.high, w.n, f"{k} beats both ends", scale, unit)
        ), table
    for e in ends:
        over = [judge(e, k) for k in interior]
        if all(str(v) == HOLDS for v in over):
            v = weaker(over)
            return judged(
                Verdict(
                    FAILS,
                    -v.effect,
                    -v.high,
                    -v.low,
                    v.n,
                    f"the end {e} beats every interior value",
                    scale,
                    unit,
                )
            ), table
    w = weaker(versus[max(interior, key=lambda k: sign * float(np.mean(points[k])))])
    return judged(
        Verdict(
            INCONCLUSIVE,
            w.effect,
            w.low,
            w.high,
            w.n,
            "no interior value is shown to beat both ends",
            scale,
            unit,
        )
    ), table


def provenance_frame(records: Iterable["RunRecord"]) -> pd.DataFrame:
    """Which code made each run, one row per record: ``run`` (its name), ``commit`` (git, ``""``
    when unknown), ``dirty`` (whether the package's files differed from that commit,
    :func:`~dmlnb.records.package_changed`; ``None`` when unknown), ``threads``, ``started`` /
    ``finished`` (ISO times, ``""`` when missing) and ``train seconds`` (NaN when missing).
    :func:`provenance_text` and :func:`provenance_groups` summarise it for the chapters."""
    rows = []
    for record in records:
        env = record.data.get("environment", {})
        git = env.get("git") or {}
        rows.append(
            {
                "run": record.data["name"],
                "commit": str(git.get("commit") or ""),
                "dirty": package_changed(git),
                "threads": env.get("threads"),
                "started": str(record.data.get("started") or ""),
                "finished": str(record.data.get("finished") or ""),
                "train seconds": float(record.data.get("total_train_seconds", math.nan)),
            }
        )
    return pd.DataFrame(
        rows, columns=["run", "commit", "dirty", "threads", "started", "finished", "train seconds"]
    )


def provenance_text(frame: pd.DataFrame) -> str:
    """One sentence on which code made the runs of a :func:`provenance_frame`: how many records,
    the commits they name (first 10 characters, in order of appearance), and for how many the
    package (``dmlnb/``) had uncommitted changes, had none, or is unknown (records made before the
    flag was scoped to the package: theirs also counted the tree's run records and notebooks)."""
    n = len(frame)
    commits = [c for c in dict.fromkeys(frame["commit"]) if c]
    named = (
        f"{len(commits)} commit{'s' * (len(commits) != 1)} ({', '.join(c[:10] for c in commits)})"
        if commits
        else "no commit"
    )
    dirty = frame["dirty"]
    changed, clean = int((dirty == True).sum()), int((dirty == False).sum())  # noqa: E712 (None: unknown)
    unknown = n - changed - clean
    parts = [
        f"{changed} with uncommitted changes to {GIT_SCOPE}/" if changed else "",
        f"{clean} without" + ("" if changed else f" uncommitted changes to {GIT_SCOPE}/")
        if clean
        else "",
        f"{unknown} unknown (made before records scoped their git 'dirty' flag to {GIT_SCOPE}/; "
        "theirs also counted the run records and notebooks the book's runs rewrite)"
        if unknown
        else "",
    ]
    return (
        f"{n} run record{'s' * (n != 1)} from {named}: " + ", ".join(p for p in parts if p)
        if n
        else "no run records"
    )


def provenance_groups(frame: pd.DataFrame, sets: Sequence[str] | None = None) -> pd.DataFrame:
    """A :func:`provenance_frame` grouped by (commit, package changed, threads): the runs and when
    the first and the last of them finished (UTC, to the minute); with ``sets`` (one name per row,
    e.g. the run without its seed) also ``run sets``, each set's runs in the group
    (``"a x3, b x1"``). ``package changed`` is ``True``, ``False`` or ``"unknown"``."""
    df = pd.DataFrame(
        {
            "commit": frame["commit"].replace("", "?").str[:10].to_numpy(),
            "package changed": [
                "unknown" if d is None or d != d else bool(d) for d in frame["dirty"]
            ],
            "threads": ["?" if t is None or t != t else int(t) for t in frame["threads"]],
            "finished": frame["finished"].str[:16].str.replace("T", " ").to_numpy(),
            "set": list(sets) if sets is not None else [""] * len(frame),
        }
    )
    aggregates: dict[str, Any] = dict(
        runs=("finished", "size"), first=("finished", "min"), last=("finished", "max")
    )
    if sets is not None:
        aggregates["run sets"] = (
            "set",
            lambda v: ", ".join(f"{k} x{n}" for k, n in sorted(v.value_counts().items())),
        )
    return (
        df.groupby(["commit", "package changed", "threads"], sort=False)
        .agg(**aggregates)
        .reset_index()
    )


def best_minus_last(records: Iterable["RunRecord"], metric: str = "R@1") -> list[float]:
    """What choosing each run's best evaluation adds: per record with evaluations
    (:meth:`~dmlnb.records.RunRecord.evaluations`), ``metric`` at the best epoch minus at the
    last evaluation (0 when the best is the last; the best epoch is the one ``config.select_on``
    chose: on the test classes, the papers' protocol, unless the run selected on validation)."""
    out = []
    for record in records:
        evaluated = record.evaluations()
        if evaluated:
            out.append(float(record.best["metrics"][metric] - evaluated[-1]["metrics"][metric]))
    return out


def paper_run_status(
    configs: Sequence["TrainConfig"], data_root: str | Path | None = None
) -> pd.DataFrame:
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
        rows.append(
            {"dataset": cfg.dataset, "gpu": gpu, "data": data, "runnable": gpu and data == "found"}
        )
    return pd.DataFrame(rows, columns=["dataset", "gpu", "data", "runnable"])
