"""The :class:`Verdict` type (a verdict's text and its evidence), its categories and how a
chapter counts them (:func:`verdict_category`, :func:`count_line`).
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = [
    "HOLDS",
    "FAILS",
    "INCONCLUSIVE",
    "NOT_TESTED",
    "QUALIFIED_HOLDS",
    "MIN_RUNS",
    "CONFIDENCE",
    "Verdict",
    "not_tested",
    "qualify",
    "verdict_category",
    "verdict_counts",
    "count_line",
]

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
