"""The rules for runs that cannot decide a claim whatever the numbers: degenerate (collapsed)
runs, a selection biased toward the claim, an order-of-growth shape left unchecked.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from dmlnb.reporting.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTED, Verdict, not_tested

__all__ = [
    "MIN_FIT_SIZES",
    "shape_unchecked",
    "unless_degenerate",
    "COLLAPSE_BAND",
    "collapsed",
    "biased_toward_claim",
]

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
