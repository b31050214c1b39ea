"""Claims made of parts, each judged by the rule: every part (:func:`all_of`), most parts
(:func:`most_of`), no part differing (:func:`no_difference`), every method of a group beating
every method of another (:func:`group_verdict`), a sweep's interior optimum
(:func:`interior_optimum`).
"""

from __future__ import annotations

import math
from typing import Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.reporting.caveats import unless_degenerate
from dmlnb.reporting.rule import compare
from dmlnb.reporting.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED, Verdict, not_tested

__all__ = ["all_of", "most_of", "no_difference", "group_verdict", "interior_optimum"]


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
    weaker = lambda vs: min(vs, key=_lowest_bound)  # noqa: E731
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
