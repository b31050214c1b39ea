"""The book's one verdict rule (:func:`compare`: a one-sided Welch t-test at 95% with at least
three runs per side) and its one-sample forms: a threshold, a band (an order of growth), a
universal claim checked case by case, paired runs.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from dmlnb.reporting.verdicts import (
    CONFIDENCE,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_RUNS,
    Verdict,
    not_tested,
)

__all__ = [
    "compare",
    "compare_to_threshold",
    "ORDER_HALF_WIDTH",
    "order_band",
    "compare_to_band",
    "holds_for_every",
    "paired_differences",
]


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
