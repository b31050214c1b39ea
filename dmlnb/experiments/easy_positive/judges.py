"""What the chapter's claims read of a run and the one test the vocabulary of
:mod:`dmlnb.chapter.claim_tests` cannot say: every method of one set beats every method of
another, on a metric, a statistic of the kept weights or a change with the group size
(:class:`EveryPair`, a :class:`~dmlnb.chapter.Custom` judge of shape ``"every"``).

The runs a comparison sets aside (:class:`~dmlnb.chapter.SetAside`): a collapsed run
(:func:`collapsed_run`: a single-negative variant whose training loss sits at ln 2, the book's
criterion :func:`dmlnb.reporting.collapsed`), a baseline far below every other method of its
Table 1 cell (:class:`Untuned`) and EPSHN runs whose two semi-hard rules trained alike
(:func:`identical_histories`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import RunSet, SetAside, Side
from dmlnb.experiments.easy_positive.diagnostics import COLLAPSED, is_collapsed
from dmlnb.records import RunRecord
from dmlnb.reporting import (
    Verdict,
    all_of,
    compare,
    paired_differences,
    unless_degenerate,
)
from dmlnb.runs import Run

__all__ = [
    "UNTUNED",
    "SAME_NEGATIVES",
    "collapsed_run",
    "COLLAPSE",
    "COLLAPSED_SIDE",
    "DROP_RULE_CONFOUND",
    "Caveat",
    "COLLAPSE_CAVEAT",
    "caveated",
    "Caveated",
    "Metric",
    "Stat",
    "NNGap",
    "Term",
    "EveryPair",
    "Untuned",
    "Named",
    "pair_frame",
    "untuned_baselines",
    "table1_baselines_effect",
    "identical_histories",
    "distinct_outcomes",
]

#: The caveat of a Table 1 pair with an untuned baseline (:class:`Untuned`): the pair is judged,
#: and "EPSHN beats it" rests on our settings of the baseline as much as on the method.
UNTUNED = (
    "judged against an untuned baseline (settings of ours, the paper gives none; its mean R@1 is "
    "below every other method's by more than their range)"
)
#: The caveat of a comparison with a collapsed side: the collapse is what the side's mining rule
#: did to training (the paper's point about hard positives), so the comparison is judged.
COLLAPSED_SIDE = (
    "judged with a collapsed side (training loss at ln 2), the outcome of its mining rule"
)
#: The confound of a pair of HPHN with EPHN or EPSHN: the authors' drop rule, applied by the
#: latter two only.
DROP_RULE_CONFOUND = (
    "confound: EPHN and EPSHN drop an anchor whose chosen positive or negative has similarity "
    "<= 0 and HPHN does not, so the pair differs in that rule as well as in the positive"
)
#: Why the strict / inclusive comparison is not a test when the two rules trained alike: the
#: rules differ only on a tie, and runs with identical histories never met one that changed a
#: choice.
SAME_NEGATIVES = (
    "the two rules chose the same negatives in every step (identical training histories)"
)


def collapsed_run(run: Run) -> bool:
    """Whether ``run`` collapsed: a single-negative variant (its record's ``spec["method"]``)
    whose training loss stays at ln 2 (:func:`~dmlnb.experiments.easy_positive.diagnostics.
    is_collapsed`)."""
    method = run.record.data.get("spec", {}).get("method", "")
    return is_collapsed(method, run.record.training_losses())


#: A comparison's guard against collapsed runs: not tested whatever the numbers (kept only for a
#: trend within a method whose every run collapsed: two collapsed embeddings carry no signal about
#: what is varied).
COLLAPSE = SetAside(degenerate=collapsed_run, what=COLLAPSED, keep_effect=False)


@dataclass(frozen=True)
class Caveat:
    """Runs a comparison is judged on but must name: ``flag(run)`` marks them, ``what`` says why
    (the verdict keeps its text, effect and interval; the note gains ``what`` and the runs)."""

    flag: Callable[[Run], bool]
    what: str


#: A comparison with a collapsed side, judged with the collapse named.
COLLAPSE_CAVEAT = Caveat(collapsed_run, COLLAPSED_SIDE)


def caveated(verdict: Verdict, notes: Sequence[str], names: Sequence[str] = ()) -> Verdict:
    """``verdict`` with ``notes`` (each a caveat with its runs) appended to its note, and the
    drop-rule confound (:data:`DROP_RULE_CONFOUND`) when ``names`` hold HPHN and EPHN or EPSHN."""
    notes = [n for n in notes if n]
    methods = {n.split(" ")[0] for n in names}
    if notes and "HPHN" in methods and methods & {"EPHN", "EPSHN"}:
        notes.append(DROP_RULE_CONFOUND)
    if not notes:
        return verdict
    note = "; ".join([*([verdict.note] if verdict.note else []), *notes])
    return verdict.relabel(str(verdict), note)


@dataclass(frozen=True)
class Caveated:
    """A comparison ``test`` of ``sides`` (a :class:`~dmlnb.chapter.Beats`) judged by the rule,
    its note naming the runs ``caveat`` marks (a :class:`~dmlnb.chapter.Custom` judge)."""

    test: Any
    sides: tuple[Side, ...]
    caveat: Caveat = COLLAPSE_CAVEAT

    def _judged(self, runs: RunSet) -> Any:
        from dmlnb.chapter import ClaimSpec, evaluate

        (j,) = evaluate([ClaimSpec("part", "", self.test, origin="ours")], runs)
        return j

    def __call__(self, runs: RunSet) -> Verdict:
        flagged = [
            f"{side} seed{'s' if len(hit) > 1 else ''} {', '.join(hit)}"
            for side in self.sides
            for hit in [
                [
                    str(s)
                    for s in runs.seeds(side.group, side.label)
                    if self.caveat.flag(runs.run(side.group, side.label, s))
                ]
            ]
            if hit
        ]
        note = f"{self.caveat.what}: {', '.join(flagged)}" if flagged else ""
        return caveated(self._judged(runs).verdict, [note], [str(s) for s in self.sides])

    def evidence(self, runs: RunSet) -> str:
        return self._judged(runs).evidence


@dataclass(frozen=True)
class Metric:
    """A test metric of a run at its selected epoch (read when called: either protocol)."""

    name: str = "R@1"

    def __call__(self, run: Run) -> float:
        return float(run.metrics[self.name])


@dataclass(frozen=True)
class Stat:
    """A statistic of a run's kept weights (``record.data["analysis"]``, Figures 2, 3 and 5)."""

    name: str

    def __call__(self, run: Run) -> float:
        return float(run.record.data["analysis"][self.name])


@dataclass(frozen=True)
class NNGap:
    """Figure 5's stand-in: nearest-neighbour accuracy on the training set minus the test set."""

    def __call__(self, run: Run) -> float:
        a = run.record.data["analysis"]
        return float(a["train_nn_correct"] - a["test_nn_correct"])


@dataclass(frozen=True)
class Term:
    """One method's per-seed value: ``read`` of its run on ``side``, minus ``read`` of the run of
    the same seed on ``base`` when given (a change, e.g. from n = 2 to n = 16)."""

    name: str
    side: Side
    read: Callable[[Run], float] = Metric()
    base: Side | None = None

    def sides(self) -> tuple[Side, ...]:
        return (self.side,) if self.base is None else (self.side, self.base)

    def seeds(self, runs: RunSet) -> list[int]:
        """The seeds every side of the term has."""
        sets = [set(runs.seeds(s.group, s.label)) for s in self.sides()]
        return sorted(set.intersection(*sets))

    def values(self, runs: RunSet, seeds: Sequence[int]) -> list[float]:
        def one(side: Side, s: int) -> float:
            return self.read(runs.run(side.group, side.label, s))

        return [one(self.side, s) - (one(self.base, s) if self.base else 0.0) for s in seeds]

    def flagged(self, runs: RunSet, seeds: Sequence[int], flag: Callable[[Run], bool]) -> str:
        """``"EPHN (n2) seeds 0, 1"`` for the runs of the term ``flag`` marks, else ``""``."""
        out = []
        for side in self.sides():
            hit = [str(s) for s in seeds if flag(runs.run(side.group, side.label, s))]
            if hit:
                out.append(f"{side} seed{'s' if len(hit) > 1 else ''} {', '.join(hit)}")
        return "; ".join(out)


@dataclass(frozen=True)
class EveryPair:
    """Every term of ``better`` beats every term of ``worse``: each pair by the rule (paired by
    seed, :func:`dmlnb.reporting.paired_differences`, over the seeds both terms have; else
    :func:`dmlnb.reporting.compare`), a pair with a run ``set_aside`` marks not tested, the claim
    by :func:`dmlnb.reporting.all_of` over the pairs."""

    better: tuple[Term, ...]
    worse: tuple[Term, ...]
    higher_is_better: bool = True
    paired: bool = True
    scale: float = 100.0
    unit: str = " pts"
    set_aside: SetAside | None = COLLAPSE
    caveats: tuple[Caveat, ...] = ()

    def pair(self, runs: RunSet, a: Term, b: Term) -> Verdict:
        """The verdict of "``a`` beats ``b``"."""
        if self.paired:
            seeds = sorted(set(a.seeds(runs)) & set(b.seeds(runs)))
            x, y = a.values(runs, seeds), b.values(runs, seeds)
            x, y = (x, y) if self.higher_is_better else (y, x)
            v = paired_differences(x, y, scale=self.scale, unit=self.unit)
        else:
            seeds = sorted(set(a.seeds(runs)) | set(b.seeds(runs)))
            x, y = a.values(runs, a.seeds(runs)), b.values(runs, b.seeds(runs))
            v = compare(x, y, self.higher_is_better, scale=self.scale, unit=self.unit)
        notes = []
        for c in self.caveats:
            hit = "; ".join(x for t in (a, b) if (x := t.flagged(runs, t.seeds(runs), c.flag)))
            notes.append(f"{c.what}: {hit}" if hit else "")
        v = caveated(v, notes, [a.name, b.name])
        guard = self.set_aside
        if guard is None or guard.degenerate is None:
            return v
        bad = [t.flagged(runs, t.seeds(runs), guard.degenerate) for t in (a, b)]
        return unless_degenerate(
            v, [x for x in bad if x], guard.what, keep_effect=guard.keep_effect
        )

    def pairs(self, runs: RunSet) -> dict[str, Verdict]:
        """``{"EP vs HP": verdict}`` for every pair, in order."""
        return {
            f"{a.name} vs {b.name}": self.pair(runs, a, b) for a in self.better for b in self.worse
        }

    def __call__(self, runs: RunSet) -> Verdict:
        parts = self.pairs(runs)
        v = all_of(parts, "pairs", breakdown=True)
        named = [
            f"{c.what} ({', '.join(k for k, p in parts.items() if c.what in p.note)})"
            for c in self.caveats
            if any(c.what in p.note for p in parts.values())
        ]
        if any(DROP_RULE_CONFOUND in p.note for p in parts.values()):
            named.append("the HPHN pairs carry the drop-rule confound (see the pairs)")
        return v.relabel(str(v), "; ".join(x for x in [v.note, *named] if x)) if named else v

    def evidence(self, runs: RunSet) -> str:
        """The mean of every term, in the verdict's units."""
        fmt = "{:.1f}" if self.scale != 1.0 else "{:.3f}"
        means = {
            t.name: fmt.format(self.scale * float(np.mean(t.values(runs, t.seeds(runs)))))
            for t in (*self.worse, *self.better)
        }
        how = "paired by seed" if self.paired else "unpaired"
        return ", ".join(f"{k} {v}" for k, v in means.items()) + f" ({how})"


def untuned_baselines(recall: Mapping[str, Sequence[float]], tuned: str = "EPSHN") -> list[str]:
    """The baselines of one Table 1 cell (``recall``: method -> R@1 per seed) whose mean R@1 is
    below every other method's by more than the spread of the methods above it (their range): an
    untuned setting far below the rest, e.g. ``["Proxy-NCA"]``; ``tuned`` is never listed."""
    means = {m: float(np.mean(v)) for m, v in recall.items()}
    out = []
    for m, v in means.items():
        rest = [x for k, x in means.items() if k != m]
        if m != tuned and len(rest) >= 2 and min(rest) - v > max(rest) - min(rest):
            out.append(m)
    return out


@dataclass(frozen=True, eq=False)
class Untuned:
    """A run of a baseline far below every other method of its Table 1 cell
    (:func:`untuned_baselines` of the cell's ``sides``, read from ``runs`` when called, so under
    either protocol)."""

    runs: RunSet
    sides: tuple[Side, ...]

    def __call__(self, run: Run) -> bool:
        recall = {s.label: self.runs.values(s.group, s.label, "R@1") for s in self.sides}
        low = untuned_baselines(recall)
        return any(
            run is self.runs.run(s.group, s.label, seed)
            for s in self.sides
            if s.label in low
            for seed in self.runs.seeds(s.group, s.label)
        )


@dataclass(frozen=True)
class Named:
    """The runs named ``names`` (e.g. the EPSHN runs whose two semi-hard rules trained alike)."""

    names: frozenset[str]

    def __call__(self, run: Run) -> bool:
        return run.name in self.names


def table1_baselines_effect(table1: Mapping[str, Mapping[str, Sequence[float]]]) -> str:
    """The Table 1 baselines far below the other methods (:func:`untuned_baselines`), in words;
    ``table1``: cell label -> method -> R@1 per seed."""
    parts = []
    for cell, res in table1.items():
        for m in untuned_baselines(res):
            rest = {k: 100 * float(np.mean(v)) for k, v in res.items() if k != m}
            nearest = min(rest, key=rest.get)
            parts.append(
                f"{cell}: {m} R@1 {100 * float(np.mean(res[m])):.1f} ± "
                f"{100 * float(np.std(res[m], ddof=1)):.1f}, "
                f"{rest[nearest] - 100 * float(np.mean(res[m])):.1f} points below the next lowest "
                f"({nearest}, {rest[nearest]:.1f}) and far below every other method: an untuned "
                f"baseline; the pair 'EPSHN beats {m}' is judged, with the caveat that it rests "
                "on our settings of the baseline as much as on the method (as do the pairs "
                "against the other baselines, whose settings are ours too)"
            )
    return "; ".join(parts)


def identical_histories(a: RunRecord, b: RunRecord) -> bool:
    """Whether two runs trained alike: the same configuration and, per epoch, the same training
    loss and test and validation metrics, to the last bit (timings aside; the records' one
    definition, :meth:`~dmlnb.records.RunRecord.outcome`). The two semi-hard rules differ in the
    method specification, not the configuration, so runs of the two that give identical
    histories chose the same negatives in every step that mattered."""
    return a.outcome() == b.outcome()


def distinct_outcomes(records: Sequence[RunRecord]) -> list[RunRecord]:
    """``records`` with each bit-identical training history kept once (the first; the records'
    :meth:`~dmlnb.records.RunRecord.outcome`): EPHN and HPHN at n = 2, or EPSHN's two semi-hard
    rules, can be one run under two names, which an interval over runs must count once."""
    seen: dict[str, RunRecord] = {}
    for r in records:
        seen.setdefault(r.outcome(), r)
    return list(seen.values())


def pair_frame(name: str, parts: Mapping[str, Verdict]) -> pd.DataFrame:
    """One row per pair of a claim about several pairs: its verdict and evidence."""
    rows = []
    for pair, v in parts.items():
        better, worse = pair.split(" vs ")
        rows.append(
            {
                "comparison": name,
                "better": better,
                "worse": worse,
                "verdict": str(v),
                **v.evidence(),
                "note": v.note,
            }
        )
    return pd.DataFrame(rows)
