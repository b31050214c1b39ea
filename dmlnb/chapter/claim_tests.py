"""The tests a claim can declare (:class:`~dmlnb.chapter.claims.ClaimSpec`'s ``test``): a small
vocabulary of shapes, each judged by the book's one rule (:func:`dmlnb.chapter.claims.evaluate`).

* :class:`Beats`: one side beats another on a metric (paired by seed when the sides share their
  seeds by design, :func:`dmlnb.reporting.paired_differences`; else
  :func:`dmlnb.reporting.compare`);
* :class:`BeatsEvery`: one side beats each of several (:func:`dmlnb.reporting.all_of`);
* :class:`AboveThreshold`: a side's metric beats a threshold
  (:func:`dmlnb.reporting.compare_to_threshold`);
* :class:`InteriorOptimum`: a sweep (one side per swept value) peaks inside
  (:func:`dmlnb.reporting.interior_optimum`);
* :class:`NoDifference`: two sides do not differ (:func:`dmlnb.reporting.no_difference`: it can
  be refuted, never shown);
* :class:`Untestable`: this scale cannot test it, with a typed reason (:data:`REASONS`) and the
  scale that would;
* :class:`Custom`: what the vocabulary cannot say (a lemma's trace, a timing slope): a function
  of the runs that returns a :class:`~dmlnb.reporting.Verdict` from the rule, its shape
  (:data:`SHAPES`) and pairing declared.

A comparison (:class:`Beats`, :class:`BeatsEvery`, :class:`NoDifference`) may carry a
:class:`SetAside`: runs that cannot exercise the claim (a collapsed embedding, a metric at its
ceiling) set it aside as "not tested" instead of deciding it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Union

from dmlnb.reporting import Verdict

if TYPE_CHECKING:
    from dmlnb.chapter.runset import RunSet

__all__ = [
    "REASONS",
    "REASON_WORDS",
    "reason_in_words",
    "SHAPES",
    "Side",
    "SetAside",
    "Beats",
    "BeatsEvery",
    "AboveThreshold",
    "InteriorOptimum",
    "NoDifference",
    "Untestable",
    "Custom",
    "Test",
    "shape_of",
    "is_fraction",
]


#: Why a claim is not tested at a scale: it needs the paper's datasets (or backbone), a GPU's
#: budget, or it cannot be tested by any run (a statement about other work, a definition); or,
#: ``"not-run"``, this scale could test it and the chapter has not run it yet: a gap, never an
#: excuse, counted apart on the front page (issue #46 closes them).
REASONS = ("needs-paper-data", "needs-gpu", "structurally-untestable", "not-run")
#: Each typed reason in a reader's words (the reason's key stays in ``claims.json``).
REASON_WORDS: dict[str, str] = {
    "needs-paper-data": "it needs the paper's data or backbone",
    "needs-gpu": "it needs a GPU's budget",
    "structurally-untestable": "no run can test it",
    "not-run": "this profile has not run it yet",
}


def reason_in_words(reason: str, scale: str, words: dict[str, str], tested: str) -> str:
    """Why a claim is not tested (or a deviation not measured) in a reader's words: the reason's
    ``words`` and the ``scale`` that would test it (``"...; would be <tested> at <scale>"``), or,
    for a claim no run can test, why not (``"no run can test it: <why>"``, from a ``scale`` that
    reads ``"none: <why>"``; any other scale of such a claim is one whose runs are built
    otherwise than this profile's)."""
    if reason == "structurally-untestable" and scale.startswith("none"):
        return f"{words[reason]}: {scale.removeprefix('none').lstrip(': ')}".rstrip(": ")
    if reason == "structurally-untestable":  # by the structure of this profile's runs
        return f"no run of this profile can test it; would be {tested} at {scale}"
    return f"{words[reason]}; would be {tested} at {scale}"


#: The shapes of a test, as ``claims.json`` names them (``"test"``): a comparison of two sides,
#: one side against every other, against a threshold or a band, a sweep's interior optimum, a
#: claim of no difference, every (or any) case of several, a traced quantity (a lemma checked
#: update by update), or a claim no run tests.
SHAPES = (
    "comparison",
    "every",
    "any",
    "threshold",
    "band",
    "interior-optimum",
    "no-difference",
    "trace",
    "untestable",
)


@dataclass(frozen=True)
class Side:
    """The runs of method ``label`` in ``group`` (:class:`~dmlnb.chapter.runset.RunSet`);
    ``name``, when given, is how verdicts and their notes show the side to a reader (the
    method's name in the paper rather than the run's key; it takes no part in equality)."""

    group: str
    label: str
    name: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.name:
            return self.name
        return self.label if self.label == self.group else f"{self.label} ({self.group})"


@dataclass(frozen=True)
class SetAside:
    """When a comparison's runs cannot exercise its claim, the claim is "not tested" whatever the
    numbers say (:func:`dmlnb.reporting.unless_degenerate`):

    * a run of one of its sides is degenerate: ``degenerate(run)`` is true (e.g. a collapsed
      embedding, :func:`dmlnb.reporting.collapsed`); the note names ``what`` and the sides with
      their seeds, and ``keep_effect`` keeps the measured effect and interval beside it;
    * or the mean of every side is at or above ``ceiling`` (in the metric's units): the metric
      cannot separate them.
    """

    degenerate: Callable[[Any], bool] | None = None
    what: str = "collapsed runs"
    keep_effect: bool = True
    ceiling: float | None = None

    def __post_init__(self) -> None:
        if self.degenerate is None and self.ceiling is None:
            raise ValueError("SetAside needs degenerate=<run -> bool>, ceiling=<level>, or both")


_Worse = TypeVar("_Worse")


@dataclass(frozen=True)
class _Comparison(Generic[_Worse]):
    """The fields of a comparison of ``better`` against ``worse`` (one side or several)."""

    better: Side
    worse: _Worse
    metric: str = "R@1"
    paired: bool = False
    higher_is_better: bool = True
    set_aside: SetAside | None = None


@dataclass(frozen=True)
class Beats(_Comparison[Side]):
    """``better`` beats ``worse`` on ``metric`` (``paired``: seed by seed, for sides that share
    their seeds by design), unless ``set_aside`` (:class:`SetAside`)."""


@dataclass(frozen=True)
class BeatsEvery(_Comparison[tuple[Side, ...]]):
    """``better`` beats each side of ``worse`` on ``metric``."""


@dataclass(frozen=True)
class AboveThreshold:
    """``side``'s ``metric`` is above ``threshold`` (below it when not ``higher_is_better``),
    in the metric's own units (a retrieval metric's 0.5, shown as 50 points)."""

    side: Side
    threshold: float
    metric: str = "R@1"
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if is_fraction(self.metric) and not 0.0 <= self.threshold <= 1.0:
            raise ValueError(
                f"{self.metric} is a fraction: its threshold {self.threshold!r} must be in "
                f"[0, 1] (e.g. {self.threshold / 100:g} for {self.threshold:g} points)"
            )


@dataclass(frozen=True)
class InteriorOptimum:
    """The sweep ``points`` (swept value -> side) has its optimum inside, on ``metric``."""

    points: Mapping[float, Side]
    metric: str = "R@1"
    higher_is_better: bool = True


@dataclass(frozen=True)
class NoDifference:
    """``a`` and ``b`` do not differ on ``metric`` (:func:`dmlnb.reporting.no_difference`: a
    difference beyond the interval either way refutes it; without an equivalence margin it is at
    best inconclusive), unless ``set_aside``."""

    a: Side
    b: Side
    metric: str = "R@1"
    paired: bool = False
    set_aside: SetAside | None = None


@dataclass(frozen=True)
class Untestable:
    """This scale cannot test the claim: ``reason`` (one of :data:`REASONS`), ``why`` in words and
    the ``scale`` that would test it (e.g. ``"the paper profile on CUB-200-2011"``)."""

    reason: Literal["needs-paper-data", "needs-gpu", "structurally-untestable", "not-run"]
    why: str
    scale: str

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"reason must be one of {REASONS}, got {self.reason!r}")


@dataclass(frozen=True)
class Custom:
    """``judge(runs) -> Verdict`` (from the rule's functions), for what the vocabulary cannot
    say; its docstring's first line is the evidence shown, or ``evidence(runs)`` when given (the
    numbers the verdict rests on, in words). ``shape`` (one of :data:`SHAPES`) and ``paired``
    declare the test the judge makes, as ``claims.json`` reports it."""

    judge: Callable[[RunSet], Verdict]
    evidence: Callable[[RunSet], str] | None = None
    shape: str = "comparison"
    paired: bool = False

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {self.shape!r}")


Test = Union[Beats, BeatsEvery, AboveThreshold, InteriorOptimum, NoDifference, Untestable, Custom]


def shape_of(test: Test) -> str:
    """The shape of ``test`` (one of :data:`SHAPES`), as ``claims.json`` names it."""
    if isinstance(test, Custom):
        return test.shape
    return {
        Beats: "comparison",
        BeatsEvery: "every",
        AboveThreshold: "threshold",
        InteriorOptimum: "interior-optimum",
        NoDifference: "no-difference",
        Untestable: "untestable",
    }[type(test)]


def is_fraction(metric: str) -> bool:
    """Whether ``metric`` is one of the evaluation's fractions (Recall@K, NMI, F1, MAP@R)."""
    return metric.startswith("R@") or metric in ("NMI", "F1", "MAP@R")
