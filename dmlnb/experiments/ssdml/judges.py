"""The SSDML chapter's judges for what the claims vocabulary cannot say
(:class:`dmlnb.chapter.Custom`):
each a frozen dataclass called on the chapter's :class:`~dmlnb.chapter.RunSet`, returning the
rule's verdict (:mod:`dmlnb.reporting`), with ``evidence(runs)``: the numbers it rests on, in
words. Every judge reads the runs' metrics when called (``record.best``), so
:func:`dmlnb.chapter.evaluate_both_ways` judges it under each protocol; the effective rank is
read from the kept weights (``extras``) and is not recomputed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dmlnb.chapter import ClaimSpec, RunSet, evaluate
from dmlnb.chapter.claim_tests import Test
from dmlnb.experiments.ssdml.reported import M5
from dmlnb.experiments.ssdml.settings import Setting
from dmlnb.experiments.ssdml.spec import initial_of
from dmlnb.reporting import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Verdict,
    all_of,
    biased_toward_claim,
    compare_to_threshold,
    not_tested,
    paired_differences,
)
from dmlnb.runs import Run

__all__ = [
    "PTS",
    "per_seed",
    "fmt",
    "shown_protocol",
    "selection_moved",
    "initial_selection_bias",
    "OverInitial",
    "NotShownToLearn",
    "EffectiveRank",
    "EveryMetric",
    "AlphaStable",
    "LossDecreases",
    "TrainingSeconds",
]

#: Effects of retrieval metrics (fractions) shown in points.
PTS = {"scale": 100.0, "unit": " pts"}


def per_seed(rs: Sequence[Run], metric: str) -> list[float]:
    """``metric`` of each run at its selected epoch."""
    return [float(r.metrics[metric]) for r in rs]


def fmt(vals: Sequence[float], scale: float = 100.0) -> str:
    """``"mean ± std"`` (one decimal, ``scale`` applied; the mean alone for one value)."""
    if not len(vals):
        return "—"
    return f"{scale * np.mean(vals):.1f}" + (
        f" ± {scale * np.std(vals, ddof=1):.1f}" if len(vals) > 1 else ""
    )


def shown_protocol(runs: Sequence[Run]) -> str:
    """The epochs ``runs`` show: ``"validation"`` or ``"test"`` while
    :func:`dmlnb.selection.selected_on` shows them so (each record's ``best`` is then its
    selection under that protocol), else each run's own selection (``record.selected_on``)."""
    for basis in ("test", "validation"):
        if runs and all(r.record.data["best"] is r.record.selections.get(basis) for r in runs):
            return basis
    return runs[0].record.selected_on if runs else "test"


def selection_moved(rs: Sequence[Run], metric: str = "R@1") -> bool:
    """Whether the selection moved ``metric`` for some run of ``rs``: its selected evaluation
    differs from its last one (a run without evaluations counts as moved). When every run kept the
    value of its last evaluation, the selection added nothing and cannot bias a comparison."""
    for r in rs:
        evals = r.record.evaluations()
        if not evals or float(evals[-1]["metrics"][metric]) != float(r.metrics[metric]):
            return True
    return False


def initial_selection_bias(setting: Setting, protocol: str | None = None) -> str | None:
    """Why a "beats its network at initialisation" comparison on ``setting`` is selected toward
    the claim (:func:`dmlnb.reporting.biased_toward_claim`), or ``None`` when it is not: each run's
    epoch is its best test evaluation when the setting has no validation split
    (``setting.validation`` ``None``) or when the records are shown at their test-selected epochs
    (``protocol="test"``), while the network at initialisation is evaluated once."""
    if setting.validation is None:
        return (
            "each run's epoch is its best test evaluation (no validation split), against one "
            "evaluation at initialisation"
        )
    if protocol == "test":
        return (
            "each run's epoch is its best test evaluation (the papers' protocol), against one "
            "evaluation at initialisation"
        )
    return None


def _group(runs: RunSet, group: str, label: str) -> list[Run]:
    return [runs.run(group, label, s) for s in runs.seeds(group, label)]


def _paired(runs: RunSet, group: str, label: str, other: str = "ours") -> list[Run]:
    """``label``'s runs of ``group`` in seed order, refused unless ``other`` has the same seeds
    (a paired comparison: a seed fixes the labelled draw, the partitions and the network)."""
    seeds, theirs = runs.seeds(group, label), runs.seeds(group, other)
    if seeds != theirs:
        raise ValueError(f"{label} has seeds {seeds} and {other} {theirs}: they cannot be paired")
    return [runs.run(group, label, s) for s in seeds]


@dataclass(frozen=True)
class OverInitial:
    """Ours against its own network at initialisation, paired by run, in each metric."""

    group: str
    setting: Setting
    metrics: tuple[str, ...] = ("R@1", "NMI")

    def __call__(self, runs: RunSet) -> Verdict:
        ours = _group(runs, self.group, "ours")
        if any(initial_of(r) is None for r in ours):
            return not_tested("a run has no evaluation at initialisation")
        parts = {
            m: paired_differences(per_seed(ours, m), [initial_of(r)[m] for r in ours], **PTS)
            for m in self.metrics
        }  # paired by run: each run starts from its seed's network
        verdict = all_of(parts, "metrics", shown="first")
        bias = initial_selection_bias(self.setting, shown_protocol(ours))
        moved = any(selection_moved(ours, m) for m in self.metrics)
        return biased_toward_claim(verdict, bias) if bias and moved else verdict

    def evidence(self, runs: RunSet) -> str:
        ours = _group(runs, self.group, "ours")
        if any(initial_of(r) is None for r in ours):
            return "—"
        init = {m: [float(initial_of(r)[m]) for r in ours] for m in self.metrics}
        return "; ".join(
            f"{m} ours {fmt(per_seed(ours, m))} vs initial {fmt(init[m])} "
            f"({paired_differences(per_seed(ours, m), init[m], **PTS)})"
            for m in self.metrics
        )


@dataclass(frozen=True)
class NotShownToLearn:
    """``tests`` judged by the rule (:func:`dmlnb.chapter.evaluate`; several: every one must hold,
    :func:`~dmlnb.reporting.all_of`), the note carrying, from the runs, ours against its own
    network at initialisation (``over``) when that does not hold: a comparison with a method not
    shown to learn here says nothing of it at the paper's scale."""

    tests: tuple[Test, ...]
    over: OverInitial

    def _judged(self, runs: RunSet) -> list:
        return evaluate(
            [ClaimSpec(f"t{i}", "it", t, origin="ours") for i, t in enumerate(self.tests)], runs
        )

    def __call__(self, runs: RunSet) -> Verdict:
        judged = self._judged(runs)
        v = (
            judged[0].verdict
            if len(judged) == 1
            else all_of({t.metric: j.verdict for t, j in zip(self.tests, judged)}, "metrics")
        )
        o = self.over(runs)
        if str(o) == HOLDS:
            return v
        caveat = (
            f"ours vs its network at initialisation: {o} ({o.evidence()['effect']} "
            f"{self.over.metrics[0]}), so this compares a method not shown to learn here and says "
            "nothing at the paper's scale"
        )
        return v.relabel(note=f"{v.note}; {caveat}" if v.note else caveat)

    def evidence(self, runs: RunSet) -> str:
        judged = self._judged(runs)
        if len(judged) == 1:
            return judged[0].evidence
        return "; ".join(f"{t.metric}: {j.verdict}" for t, j in zip(self.tests, judged)) + (
            f" ({judged[0].evidence.split(': ', 1)[1]}, paired by seed)"
        )


@dataclass(frozen=True)
class EffectiveRank:
    """The effective rank of the test embedding ``Lᵀz``, with against without orthogonality,
    paired by seed (our measurement, not the paper's: an orthogonal ``L`` scales no direction of
    its image, so a higher rank partly follows from the constraint)."""

    group: str
    setting: Setting
    tiny: float = 1e-4

    def ranks(self, runs: RunSet) -> dict[str, list[float]]:
        """The effective ranks of each variant's runs, by seed (the seeds both share)."""
        return {
            m: [float(r.extras["spectrum"]["effective_rank"]) for r in _paired(runs, self.group, m)]
            for m in ("ours", "ours-noorth")
        }

    def __call__(self, runs: RunSet) -> Verdict:
        er = self.ranks(runs)
        return paired_differences(er["ours"], er["ours-noorth"])

    def evidence(self, runs: RunSet) -> str:
        er = self.ranks(runs)
        small = {}
        for m in ("ours", "ours-noorth"):
            sv = [
                np.asarray(r.extras["spectrum"]["singular_values"])
                for r in _paired(runs, self.group, m)
            ]
            small[m] = ", ".join(f"{v.min() / v.sum():.1e}" for v in sv)
        return (
            f"effective rank of Lᵀz (of l = {self.setting.metric_dim}) w/ orth "
            f"{fmt(er['ours'], 1.0)} vs w/o {fmt(er['ours-noorth'], 1.0)}; the smallest "
            "singular value's share of their sum, by seed: "
            f"w/ {small['ours']}, w/o {small['ours-noorth']}"
        )


@dataclass(frozen=True)
class EveryMetric:
    """With against without orthogonality, in every metric the runs hold, paired by seed."""

    group: str

    def parts(self, runs: RunSet) -> dict[str, Verdict]:
        w, wo = _paired(runs, self.group, "ours"), _paired(runs, self.group, "ours-noorth")
        shown = [m for m in M5 if all(m in r.metrics for r in w + wo)]
        return {m: paired_differences(per_seed(w, m), per_seed(wo, m), **PTS) for m in shown}

    def __call__(self, runs: RunSet) -> Verdict:
        return all_of(self.parts(runs), "metrics", shown="first")

    def evidence(self, runs: RunSet) -> str:
        w, wo = _paired(runs, self.group, "ours"), _paired(runs, self.group, "ours-noorth")
        return "; ".join(
            f"{m} w/ {fmt(per_seed(w, m))} vs w/o {fmt(per_seed(wo, m))} ({v})"
            for m, v in self.parts(runs).items()
        )


def _within(d: Sequence[float], margin: float) -> str:
    """Paired equivalence of the per-seed differences ``d`` within ``±margin``: the rule's two
    one-sided tests (:func:`~dmlnb.reporting.compare_to_threshold`) both hold, or one fails."""
    above = compare_to_threshold(d, -margin)
    below = compare_to_threshold(d, margin, higher_is_better=False)
    both = (str(above), str(below))
    return HOLDS if both == (HOLDS, HOLDS) else FAILS if FAILS in both else INCONCLUSIVE


@dataclass(frozen=True)
class AlphaStable:
    """Every pair of angles of the sweep equivalent within ``margin``, paired by seed (the angles
    share their seeds: a seed fixes the labelled draw, the partitions and the network): each
    pair's per-seed differences by the rule's two one-sided tests against ``∓margin``."""

    groups: tuple[tuple[float, str], ...]  # (α, group)
    margin: float
    setting_name: str
    metric: str = "R@1"

    def pairs(self, runs: RunSet) -> dict[str, tuple[Verdict, str]]:
        seeds = {tuple(runs.seeds(g, "ours")) for _, g in self.groups}
        if len(seeds) != 1:
            raise ValueError(f"the angles do not share their seeds: {sorted(seeds)}")
        vals = {a: per_seed(_group(runs, g, "ours"), self.metric) for a, g in self.groups}
        out = {}
        for i, (a, _) in enumerate(self.groups):
            for b, _ in self.groups[i + 1 :]:
                d = [y - x for x, y in zip(vals[a], vals[b])]
                out[f"{b:g}° − {a:g}°"] = (
                    paired_differences(vals[b], vals[a], **PTS),
                    _within(d, self.margin),
                )
        return out

    def __call__(self, runs: RunSet) -> Verdict:
        pairs = self.pairs(runs)
        differ = [k for k, (_, s) in pairs.items() if s == FAILS]
        shown = max(differ or pairs, key=lambda k: abs(pairs[k][0].effect))
        v = pairs[shown][0]
        text = (
            FAILS
            if differ
            else HOLDS
            if all(s == HOLDS for _, s in pairs.values())
            else INCONCLUSIVE
        )
        half = [(p.high - p.low) / 2 for p, _ in pairs.values()]
        note = (
            f"effect: {shown}; {len(differ)} of {len(pairs)} pairs differ beyond "
            f"±{100 * self.margin:.1f} pts"
        )
        if min(half) >= self.margin:
            note += (
                f"; the 90% half-widths ({100 * min(half):.2f}-{100 * max(half):.2f} pts) exceed "
                'the margin, so "holds" is unreachable at this scale'
            )
        return v.relabel(text, note)

    def table(self, runs: RunSet) -> pd.DataFrame:
        """Each pair's paired difference (points), its 90% interval and half-width, the pairs
        (seeds) and its status within the margin."""
        rows = []
        for name, (v, status) in self.pairs(runs).items():
            ev = v.evidence()
            rows.append(
                {
                    "pair": name,
                    "difference (paired)": ev["effect"],
                    "90% interval": ev["90% interval"],
                    "half-width": f"{100 * (v.high - v.low) / 2:.3g} pts",
                    "seeds (pairs)": ev["runs per side"],
                    f"within ±{100 * self.margin:.1f} pts": status,
                }
            )
        return pd.DataFrame(rows).set_index("pair")

    def evidence(self, runs: RunSet) -> str:
        by_alpha = {a: per_seed(_group(runs, g, "ours"), self.metric) for a, g in self.groups}
        n = sorted({len(v) for v in by_alpha.values()})
        return (
            f"{self.setting_name}, {'/'.join(map(str, n))} seed{'s' * (max(n) > 1)} per angle, "
            "paired by seed: " + ", ".join(f"{a:g}° {fmt(v)}" for a, v in by_alpha.items())
        )


def _losses(run: Run) -> list[float]:
    return [float(h["loss"]) for h in run.record.data["history"] if h.get("loss") is not None]


@dataclass(frozen=True)
class LossDecreases:
    """The training loss of ours falls from its first epoch to its last, paired by run, on every
    setting of ``groups`` (:func:`~dmlnb.reporting.all_of`); each epoch's loss is the mean over
    its mini-batches of triplets mined for that partition."""

    groups: tuple[tuple[str, str], ...]  # (group, setting name)

    def parts(self, runs: RunSet) -> dict[str, Verdict]:
        out = {}
        for g, name in self.groups:
            curves = [_losses(r) for r in _group(runs, g, "ours")]
            out[name] = paired_differences([c[0] for c in curves], [c[-1] for c in curves])
        return out

    def __call__(self, runs: RunSet) -> Verdict:
        if any(len(_losses(r)) < 2 for g, _ in self.groups for r in _group(runs, g, "ours")):
            return not_tested("a run has no loss curve of two epochs or more")
        return all_of(self.parts(runs), "settings", shown="first")

    def evidence(self, runs: RunSet) -> str:
        if str(self(runs)).startswith("not tested"):
            return "—"
        lines = []
        for g, name in self.groups:
            curves = [_losses(r) for r in _group(runs, g, "ours")]
            rises = sum(b > a for c in curves for a, b in zip(c, c[1:]))
            steps = sum(len(c) - 1 for c in curves)
            first, last = [c[0] for c in curves], [c[-1] for c in curves]
            lines.append(
                f"{name}: first-epoch loss {np.mean(first):.3f} ± {np.std(first, ddof=1):.3f} vs "
                f"last {np.mean(last):.3f} ± {np.std(last, ddof=1):.3f} ({len(curves[0])} epochs); "
                "the loss rises "
                f"on {rises} of {steps} epoch-to-epoch steps (new triplets at each partition)"
            )
        return "; ".join(lines)


@dataclass(frozen=True)
class TrainingSeconds:
    """Ours trains in fewer recorded seconds than each of ``others`` (the records'
    ``total_train_seconds``), paired by seed, on every setting of ``groups``."""

    groups: tuple[tuple[str, str], ...]  # (group, setting name)
    others: tuple[tuple[str, str], ...]  # (method, its name)

    def _seconds(self, runs: RunSet, g: str, m: str) -> list[float]:
        return [float(r.record.data["total_train_seconds"]) for r in _paired(runs, g, m)]

    def parts(self, runs: RunSet) -> dict[str, Verdict]:
        return {
            f"{name}: {who}": paired_differences(
                self._seconds(runs, g, m), self._seconds(runs, g, "ours"), unit=" s"
            )
            for g, name in self.groups
            for m, who in self.others
        }

    def __call__(self, runs: RunSet) -> Verdict:
        methods = ("ours", *(m for m, _ in self.others))
        every = [r for g, _ in self.groups for m in methods for r in _group(runs, g, m)]
        if any(r.record.data.get("total_train_seconds") is None for r in every):
            return not_tested("a run has no recorded training time")
        return all_of(self.parts(runs), "comparisons", shown="first")

    def evidence(self, runs: RunSet) -> str:
        if str(self(runs)).startswith("not tested"):
            return "—"
        return (
            "; ".join(
                f"{name}: ours {fmt(self._seconds(runs, g, 'ours'), 1.0)} s vs "
                + ", ".join(
                    f"{who} {fmt(self._seconds(runs, g, m), 1.0)} s" for m, who in self.others
                )
                for g, name in self.groups
            )
            + " (training seconds per run as recorded, shared CPU)"
        )
