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

from dmlnb.chapter import RunSet
from dmlnb.experiments.ssdml.reported import M5
from dmlnb.experiments.ssdml.settings import Setting
from dmlnb.experiments.ssdml.spec import initial_of
from dmlnb.reporting import (
    HOLDS,
    Verdict,
    all_of,
    biased_toward_claim,
    every_pair_equivalent,
    not_tested,
    paired_differences,
    qualify,
)
from dmlnb.runs import Run

__all__ = [
    "EFFECTIVE_RANK_PROXY",
    "PTS",
    "per_seed",
    "fmt",
    "shown_protocol",
    "initial_selection_bias",
    "OverInitial",
    "EffectiveRank",
    "EveryMetric",
    "AlphaStable",
]

#: Effects of retrieval metrics (fractions) shown in points.
PTS = {"scale": 100.0, "unit": " pts"}
#: What the effective-rank claim tests (:func:`dmlnb.reporting.qualify` of a "holds"): a proxy
#: measured after ``L``, which an orthogonal ``L`` cannot shrink by construction.
EFFECTIVE_RANK_PROXY = (
    "on Lᵀz, which an orthogonal L cannot shrink by construction; the network's z is not measured"
)


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
        return biased_toward_claim(verdict, bias) if bias else verdict

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
class EffectiveRank:
    """The effective rank of the test embedding, with against without orthogonality, paired by
    seed."""

    group: str
    setting: Setting

    def ranks(self, runs: RunSet) -> dict[str, list[float]]:
        """The effective ranks of each variant's runs, by seed (the seeds both share)."""
        return {
            m: [float(r.extras["spectrum"]["effective_rank"]) for r in _paired(runs, self.group, m)]
            for m in ("ours", "ours-noorth")
        }

    def __call__(self, runs: RunSet) -> Verdict:
        er = self.ranks(runs)
        v = paired_differences(er["ours"], er["ours-noorth"])
        return qualify(v, EFFECTIVE_RANK_PROXY) if str(v) == HOLDS else v

    def evidence(self, runs: RunSet) -> str:
        er = self.ranks(runs)
        return (
            f"effective rank (of l = {self.setting.metric_dim}) w/ orth {fmt(er['ours'], 1.0)} "
            f"vs w/o {fmt(er['ours-noorth'], 1.0)}"
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


@dataclass(frozen=True)
class AlphaStable:
    """Every pair of angles of the sweep equivalent within ``margin``
    (:func:`~dmlnb.reporting.every_pair_equivalent`)."""

    groups: tuple[tuple[float, str], ...]  # (α, group)
    margin: float
    setting_name: str
    metric: str = "R@1"

    def values(self, runs: RunSet) -> dict[float, list[float]]:
        return {a: per_seed(_group(runs, g, "ours"), self.metric) for a, g in self.groups}

    def __call__(self, runs: RunSet) -> Verdict:
        return every_pair_equivalent(self.values(runs), self.margin, value_unit="°", **PTS)[0]

    def evidence(self, runs: RunSet) -> str:
        by_alpha = self.values(runs)
        n = sorted({len(v) for v in by_alpha.values()})
        return (
            f"{self.setting_name}, {'/'.join(map(str, n))} seed{'s' * (max(n) > 1)} per angle: "
            + (", ".join(f"{a:g}° {fmt(v)}" for a, v in by_alpha.items()))
        )
