"""A chapter's claims declared as data and judged by one function.

A claim is a :class:`ClaimSpec`: the paper's words and where they stand (or ``origin="ours"``
for a measurement of the chapter's own), and its *test*, one of the small vocabulary of
:mod:`dmlnb.chapter.claim_tests` (re-exported here).

:func:`evaluate` judges every claim into a :class:`JudgedClaim`, always through the book's one
rule; :func:`write_claims_json` writes them to ``results/<chapter>/<profile>/claims.json``, which
the tests read (and, once the chapters are declared in this layer, the front page).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from dmlnb.chapter import claim_tests
from dmlnb.chapter.claim_tests import *  # noqa: F403  (the vocabulary of tests)
from dmlnb.chapter.claim_tests import (
    REASON_WORDS,
    AboveThreshold,
    Beats,
    BeatsEvery,
    Custom,
    InteriorOptimum,
    NoDifference,
    SetAside,
    Side,
    Test,
    Untestable,
    is_fraction,
    reason_in_words,
    shape_of,
)
from dmlnb.chapter.runset import RunSet
from dmlnb.records import read_json, write_json_atomic
from dmlnb.reporting import (
    Claim,
    Verdict,
    all_of,
    claims_table,
    compare,
    compare_to_threshold,
    interior_optimum,
    no_difference,
    not_tested,
    paired_differences,
    unless_degenerate,
    verdict_category,
)
from dmlnb.selection import both_ways_verdicts

__all__ = [
    *claim_tests.__all__,
    "ClaimSpec",
    "JudgedClaim",
    "evaluate",
    "claims_frame",
    "write_claims_json",
    "CLAIMS_FILE",
    "evaluate_both_ways",
    "unless_set_aside",
]

CLAIMS_FILE = "claims.json"


@dataclass(frozen=True)
class ClaimSpec:
    """One claim: an ``id`` (its anchor in the chapter), the ``text``, where it stands in the
    paper (``where``: section, table or figure; empty for ours), whose it is (``origin``), the
    paper's evidence in words and the ``test``."""

    id: str
    text: str
    test: Test
    where: str = ""
    origin: Literal["paper", "ours"] = "paper"
    paper_evidence: str = "—"

    def __post_init__(self) -> None:
        if self.origin not in ("paper", "ours"):
            raise ValueError(f"origin must be 'paper' or 'ours', got {self.origin!r}")
        if self.origin == "paper" and not self.where:
            raise ValueError(
                f"claim {self.id!r}: say where the paper makes it (where='Sec. 4, Table 1')"
            )


@dataclass(frozen=True)
class JudgedClaim:
    """A claim with the verdict the rule computed and what the verdict rests on (``evidence``)."""

    spec: ClaimSpec
    verdict: Verdict
    evidence: str

    @property
    def reason(self) -> str | None:
        """The typed reason of an untestable claim, else ``None``."""
        return self.spec.test.reason if isinstance(self.spec.test, Untestable) else None


def _pair(runs: RunSet, a: Side, b: Side, metric: str) -> tuple[list[float], list[float]]:
    seeds = runs.seeds(a.group, a.label)
    other = runs.seeds(b.group, b.label)
    if seeds != other:
        raise ValueError(
            f"a paired test needs the same seeds on both sides: {a} has {seeds}, {b} has {other}"
        )
    return runs.values(a.group, a.label, metric, seeds), runs.values(
        b.group, b.label, metric, seeds
    )


def _units(metric: str) -> tuple[float, str]:
    """How a verdict on ``metric`` shows its effect: a fraction in points, anything else as is."""
    return (100.0, " pts") if is_fraction(metric) else (1.0, "")


def _beats(
    runs: RunSet,
    better: Side,
    worse: Side,
    metric: str,
    paired: bool,
    higher: bool,
    set_aside: SetAside | None = None,
) -> Verdict:
    scale, unit = _units(metric)
    if paired:
        a, b = _pair(runs, better, worse, metric)
        a, b = (a, b) if higher else (b, a)
        v = paired_differences(a, b, scale=scale, unit=unit)
    else:
        v = compare(
            runs.values(better.group, better.label, metric),
            runs.values(worse.group, worse.label, metric),
            higher,
            scale=scale,
            unit=unit,
        )
    return unless_set_aside(v, runs, (better, worse), metric, set_aside)


def _degenerate_sides(runs: RunSet, sides: Sequence[Side], flag: Callable[[Any], bool]) -> list:
    """``sides`` holding a run ``flag`` marks, in words with their seeds (``"HPHN seed 2"``)."""
    out = []
    for side in sides:
        seeds = [
            str(s)
            for s in runs.seeds(side.group, side.label)
            if flag(runs.run(side.group, side.label, s))
        ]
        if seeds:
            out.append(f"{side} seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}")
    return out


def _at_ceiling(
    runs: RunSet, sides: Sequence[Side], metric: str, set_aside: SetAside | None
) -> Verdict | None:
    """ "Not tested" when ``set_aside`` has a ceiling every side's mean reaches, else ``None``."""
    if set_aside is None or set_aside.ceiling is None:
        return None
    means = [float(np.mean(runs.values(s.group, s.label, metric))) for s in sides]
    if min(means) < set_aside.ceiling:
        return None
    scale, unit = _units(metric)
    return not_tested(
        f"{metric} is at its ceiling here: every side's mean is at least "
        f"{set_aside.ceiling * scale:g}{unit}, the metric cannot separate them"
    )


def unless_set_aside(
    verdict: Verdict,
    runs: RunSet,
    sides: Sequence[Side],
    metric: str,
    set_aside: SetAside | None,
) -> Verdict:
    """``verdict``, or "not tested" when ``set_aside`` applies to ``sides`` (:class:`SetAside`):
    the guard a :class:`Custom` judge applies to the sides it compares, as :class:`Beats` does."""
    ceiling = _at_ceiling(runs, sides, metric, set_aside)
    if ceiling is not None:
        return ceiling
    if set_aside is None or set_aside.degenerate is None:
        return verdict
    bad = _degenerate_sides(runs, sides, set_aside.degenerate)
    return unless_degenerate(verdict, bad, set_aside.what, keep_effect=set_aside.keep_effect)


def _judge(test: Test, runs: RunSet) -> tuple[Verdict, str]:
    """The verdict of one test and the evidence it rests on, in words."""
    if isinstance(test, Untestable):
        return (
            not_tested(reason_in_words(test.reason, test.scale, REASON_WORDS, "tested")),
            test.why,
        )
    if isinstance(test, Beats):
        how = "paired by seed" if test.paired else "unpaired"
        v = _beats(
            runs,
            test.better,
            test.worse,
            test.metric,
            test.paired,
            test.higher_is_better,
            test.set_aside,
        )
        return v, f"{test.metric}: {test.better} vs {test.worse}, {how}"
    if isinstance(test, NoDifference):
        how = "paired by seed" if test.paired else "unpaired"
        v = _beats(runs, test.a, test.b, test.metric, test.paired, True, test.set_aside)
        return no_difference({f"{test.a} vs {test.b}": v}), (
            f"{test.metric}: {test.a} vs {test.b}, {how}"
        )
    if isinstance(test, BeatsEvery):
        said = f"{test.metric}: {test.better} vs each of {', '.join(map(str, test.worse))}"
        ceiling = _at_ceiling(runs, (test.better, *test.worse), test.metric, test.set_aside)
        if ceiling is not None:
            return ceiling, said
        parts = {
            str(w): _beats(
                runs,
                test.better,
                w,
                test.metric,
                test.paired,
                test.higher_is_better,
                test.set_aside,
            )
            for w in test.worse
        }
        return all_of(parts, "comparisons"), said
    if isinstance(test, AboveThreshold):
        scale, unit = _units(test.metric)
        v = compare_to_threshold(
            runs.values(test.side.group, test.side.label, test.metric),
            test.threshold,
            test.higher_is_better,
            scale=scale,
            unit=unit,
        )
        return v, f"{test.metric} of {test.side} against {test.threshold * scale:.3g}{unit}"
    if isinstance(test, InteriorOptimum):
        points = {k: runs.values(s.group, s.label, test.metric) for k, s in test.points.items()}
        scale, unit = _units(test.metric)
        v, _ = interior_optimum(points, test.higher_is_better, scale=scale, unit=unit)
        return v, f"{test.metric} over {len(points)} swept values"
    if isinstance(test, Custom):
        v = test.judge(runs)
        if not isinstance(v, Verdict):
            raise TypeError(
                f"{test.judge!r} returned a {type(v).__name__}; return a Verdict from the rule"
            )
        if test.evidence is not None:
            return v, test.evidence(runs)
        doc = (getattr(test.judge, "__doc__", None) or "").strip()
        return v, doc.splitlines()[0] if doc else getattr(test.judge, "__name__", repr(test.judge))
    raise TypeError(f"unknown test {test!r}")


def evaluate(claims: Sequence[ClaimSpec], runs: RunSet) -> list[JudgedClaim]:
    """Every claim judged by the book's rule on ``runs``, in order.

    Raises:
        ValueError: two claims share an ``id``.
    """
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"claim ids must be unique, got {sorted(i for i in ids if ids.count(i) > 1)} twice"
        )
    return [JudgedClaim(c, *_judge(c.test, runs)) for c in claims]


def claims_frame(judged: Sequence[JudgedClaim]) -> pd.DataFrame:
    """The claims table every chapter shows (:func:`dmlnb.reporting.claims_table`), with where
    each claim stands in the paper."""
    frame = claims_table(
        [Claim(j.spec.text, j.spec.paper_evidence, j.evidence, j.verdict) for j in judged]
    )
    frame.insert(1, "where", [j.spec.where or "ours" for j in judged])
    return frame


def _number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def write_claims_json(
    folder: str | Path, judged: Sequence[JudgedClaim], *, chapter: str, profile: str
) -> Path:
    """Write ``folder/claims.json`` atomically: per claim its id (the anchor), text, origin,
    where, verdict and its category, effect and interval in the metric's own units (``scale``
    and ``unit`` say how the book shows them: ``effect * scale`` in ``unit``), runs per side
    (one count for a paired test: the pairs), whether it is paired and the typed reason of an
    untestable claim. A file that already holds these claims is left as it is. Returns the
    file's path."""
    rows: list[dict[str, Any]] = []
    for j in judged:
        v = j.verdict
        rows.append(
            {
                "id": j.spec.id,
                "claim": j.spec.text,
                "origin": j.spec.origin,
                "where": j.spec.where,
                "verdict": str(v),
                "category": verdict_category(v),
                "effect": _number(v.effect),
                "interval": [_number(v.low), _number(v.high)],
                "scale": v.scale,
                "unit": v.unit.strip(),
                "runs_per_side": list(v.n),
                "test": shape_of(j.spec.test),
                "paired": bool(getattr(j.spec.test, "paired", False)),
                "note": v.note,
                "reason": j.reason,
                "evidence": j.evidence,
            }
        )
    path = Path(folder) / CLAIMS_FILE
    payload = {"chapter": chapter, "profile": profile, "claims": rows}
    if path.exists() and read_json(path) == json.loads(json.dumps(payload)):
        return path  # unchanged: a render from the records writes nothing under results/
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, payload)
    return path


def evaluate_both_ways(
    claims: Sequence[ClaimSpec],
    runs: RunSet,
    *,
    strict: bool = False,
    kept_weights: Callable[[str], bool] | None = None,
) -> pd.DataFrame | None:
    """Every claim judged under both selection protocols
    (:func:`dmlnb.selection.both_ways_verdicts`: each run at the epoch its validation classes
    select, then at the epoch its test classes select), the verdicts that change flagged.

    ``None`` when no run has a validation split (one protocol only). ``strict=False`` lets runs
    without a validation split keep their test selection under both. A :class:`Custom` test
    must read the runs' metrics when called (from ``record.best``), never from weights kept at
    one epoch; name the claims that do (claim text -> bool) with ``kept_weights``: they are not
    recomputed (:func:`dmlnb.selection.both_ways_verdicts`)."""
    records = runs.records()
    if not any("validation" in r.selections for r in records):
        return None
    frame = both_ways_verdicts(
        records,
        lambda: {c.text: _judge(c.test, runs)[0] for c in claims},
        strict=strict,
        kept_weights=kept_weights,
    )
    frame.insert(0, "id", [c.id for c in claims])
    return frame
