"""The rule for "A and B perform alike" within a margin (two one-sided tests), for one pair
(:func:`equivalent`) and for every pair of a sweep (:func:`every_pair_equivalent`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.reporting.rule import compare
from dmlnb.reporting.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_RUNS,
    NOT_TESTED,
    Verdict,
    not_tested,
)

__all__ = ["margin_tests", "equivalent", "every_pair_equivalent"]


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
