"""The judges of the PROFS chapter's claims that the chapter layer's vocabulary cannot say
(:class:`dmlnb.chapter.Custom`, each declaring its shape and pairing in
:mod:`~dmlnb.experiments.profs.claims`): "for every loss and metric" over the losses trained,
HNCM's gain on the mean over the losses, R@1 at the first evaluation (the convergence claims),
the same-process step times and the "competitive" claim's premise. Their comparisons are the
vocabulary's (:func:`~dmlnb.experiments.profs.tables.beats`, a
:class:`~dmlnb.chapter.Beats` paired by seed) or guarded as it guards them
(:func:`dmlnb.chapter.unless_set_aside`). Each reads the :class:`~dmlnb.chapter.RunSet` when
called (so that :func:`dmlnb.chapter.evaluate_both_ways` sees each protocol's epoch) and
returns its verdict, by the book's one rule, and the evidence in words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import Beats, Custom, RunSet, Test, unless_set_aside
from dmlnb.experiments.profs.analyses import first_evaluation, paper_projections, projection_reason
from dmlnb.experiments.profs.losses import TABLE2_LOSSES, VARIANTS
from dmlnb.experiments.profs.reported import PAPER_PROFS_LOSSES, REPORTED_HNCM_COST
from dmlnb.experiments.profs.runs import (
    COLLAPSE_DROPPED,
    component_side,
    component_sides,
    table_side,
    table_sides,
)
from dmlnb.experiments.profs.tables import (
    component_steps,
    first_beats,
    metric_verdicts,
    verdict_of,
)
from dmlnb.reporting import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    Verdict,
    all_of,
    compare,
    compare_to_threshold,
    no_difference,
    not_tested,
    paired_differences,
)
from dmlnb.runs import Run

__all__ = [
    "ClaimContext",
    "Judged",
    "first_verdicts",
    "every",
    "every_test",
    "lam_zero_parts",
    "hncm_extra",
]

Judged = tuple[Verdict, str]


@dataclass(frozen=True, eq=False)
class ClaimContext:
    """What the claims read besides the runs: the ``metrics`` judged, a Table 1 run's ``steps``
    and ``period`` (``M``), a SoftTriple run's steps (``soft_steps``; a projection each), the
    share of the classes a batch holds (``class_share``), the step times
    (:func:`~dmlnb.experiments.profs.analyses.step_times`), the HNCM ``regime``
    (:func:`~dmlnb.experiments.profs.tables.hncm_regime`), the rows trained, the values of the M
    and lambda sweeps (``m_grid``, on ``sweep_losses``; ``lambda_grid``, on ``lambda_loss``;
    empty: not swept) and each section's ``seeds`` (``"table1"``, ``"components"``, ...: sides of
    two sections with the same seeds are paired by design: they start from the same initial
    weights), and a Table 1 and a SoftTriple run's ``epochs`` (``soft_epochs``; 0: unknown)."""

    metrics: tuple[str, ...]
    steps: int
    period: int
    soft_steps: int
    class_share: float
    times: pd.DataFrame
    regime: Mapping[str, Any]
    rows: tuple[str, ...]
    component_rows: tuple[str, ...] = ()
    m_grid: tuple[int, ...] = ()
    sweep_losses: tuple[str, ...] = ()
    lambda_grid: tuple[float, ...] = ()
    lambda_loss: str = "Margin-Hard"
    seeds: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    epochs: int = 0
    soft_epochs: int = 0

    @property
    def m_swept(self) -> bool:
        return bool(self.m_grid) and bool(self.sweep_losses)

    @property
    def lam_swept(self) -> bool:
        return bool(self.lambda_grid)

    def paired(self, a: str, b: str) -> bool:
        """Whether sides of sections ``a`` and ``b`` share their seeds by design."""
        return self.seeds.get(a) == self.seeds.get(b)

    @property
    def reason(self) -> str | None:
        """Why the gains of Tables 1-2 are outside the paper's evidence (too few projections)."""
        return projection_reason(self.steps, self.period)

    @property
    def soft_reason(self) -> str | None:
        """Why SoftTriple's gain is outside the paper's evidence (a projection per step)."""
        per_step = paper_projections().assign(M=1, projections=lambda d: d["steps"].astype(float))
        return projection_reason(self.soft_steps, 1, per_step) if self.soft_steps else None

    def losses(self) -> list[str]:
        """The losses the "every loss" claims read: the paper's PROFS rows trained, and Table 2's
        (SoftTriple only when its runs make as many projections as the paper's)."""
        return [r for r in PAPER_PROFS_LOSSES if r in self.rows] + [
            r
            for r in TABLE2_LOSSES
            if r in self.rows and (r != "SoftTriple" or self.soft_reason is None)
        ]


def sides(runs: RunSet) -> dict[tuple[str, str], list[Run]]:
    """Tables 1 and 2: ``(row, variant)`` -> the runs over seeds."""
    return {**table_sides(runs, 1), **table_sides(runs, 2)}


def r1(rs: Sequence[Run]) -> list[float]:
    return [float(x.metrics["R@1"]) for x in rs]


def every(parts: Mapping[str, Test], what: str, runs: RunSet) -> tuple[Verdict, dict[str, Verdict]]:
    """Each test of ``parts`` judged on ``runs`` (:func:`~.tables.verdict_of`) and "every one
    holds" (:func:`dmlnb.reporting.all_of` over ``what``)."""
    verdicts = {name: verdict_of(test, runs) for name, test in parts.items()}
    return all_of(verdicts, what), verdicts


def every_test(parts: Mapping[str, Test], what: str, shape: str, paired: bool, said: str) -> Test:
    """The one test of ``parts`` (loss -> test), or every one holds (:func:`every`)."""
    if len(parts) == 1:
        return next(iter(parts.values()))

    def evidence(runs) -> str:
        verdicts = every(parts, what, runs)[1]
        return (
            said
            + ": "
            + "; ".join(f"{k}: {v} ({v.evidence()['effect']})" for k, v in verdicts.items())
        )

    return Custom(lambda runs: every(parts, what, runs)[0], evidence, shape=shape, paired=paired)


def profs_improves(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS > plain for every loss and metric, each paired by seed."""
    runs = sides(runset)
    rows = [r for r in ctx.losses() if (r, "PROFS") in runs]
    v, _ = metric_verdicts(runs, "PROFS", "plain", ctx.metrics, rows)
    seeds = ", ".join(sorted({f"{len(runs[r, 'PROFS'])} vs {len(runs[r, 'plain'])}" for r in rows}))
    untested = sum(x == NOT_TESTED for x in v.values())
    gain = {r: 100 * (np.mean(r1(runs[r, "PROFS"])) - np.mean(r1(runs[r, "plain"]))) for r in rows}
    said = (
        f"{len(v)} (loss, metric) comparisons ({len(rows)} losses x {', '.join(ctx.metrics)}; "
        f"seeds {seeds}, paired): {sum(x == HOLDS for x in v.values())} higher, "
        f"{sum(x == FAILS for x in v.values())} lower beyond the interval"
        + (f", {untested} not tested (degenerate runs)" if untested else "")
        + "; R@1 gain per loss: "
        + ", ".join(f"{r} {g:+.1f}" for r, g in gain.items())
    )
    return all_of(v, "(loss, metric) comparisons"), said


def hncm_boosts(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS-HNCM > PROFS on the mean R@1 over the losses, seed by seed; not tested when a side
    of a loss holds a collapsed run (:data:`~dmlnb.experiments.profs.runs.COLLAPSE_DROPPED`)."""
    rows = [r for r in ctx.losses() if (r, "PROFS-HNCM") in sides(runset)]
    both = {v: [table_side(r, v) for r in rows] for v in ("PROFS-HNCM", "PROFS")}
    every_side = [*both["PROFS-HNCM"], *both["PROFS"]]
    seeds = sorted(set.intersection(*(set(runset.seeds(s.group, s.label)) for s in every_side)))

    def loss_mean(variant: str) -> list[float]:
        per_loss = [runset.values(s.group, s.label, "R@1", seeds) for s in both[variant]]
        return [float(x) for x in np.mean(per_loss, axis=0)]

    v = paired_differences(loss_mean("PROFS-HNCM"), loss_mean("PROFS"), scale=100, unit=" pts")
    v = unless_set_aside(v, runset, every_side, "R@1", COLLAPSE_DROPPED)
    runs = sides(runset)
    per = {
        r: 100 * (np.mean(r1(runs[r, "PROFS-HNCM"])) - np.mean(r1(runs[r, "PROFS"]))) for r in rows
    }
    said = (
        f"per seed ({len(seeds)}, paired), the mean R@1 over the losses, PROFS-HNCM vs PROFS; per "
        "loss: " + ", ".join(f"{r} {g:+.1f}" for r, g in per.items())
    )
    return v, said


def first_verdicts(runs: Mapping[tuple[str, str], Sequence[Run]], rows: Sequence[str]) -> dict:
    """Per loss of ``rows``: PROFS against plain on R@1 at the first evaluation (the same early
    steps; :func:`~dmlnb.experiments.profs.tables.first_beats`, paired by seed, a collapsed side
    set aside with its effect kept)."""
    return {r: first_beats(runs, (r, "PROFS"), (r, "plain")) for r in rows}


def convergence(ctx: ClaimContext, runset: RunSet) -> Judged:
    """R@1 after the same early steps (the first evaluation), PROFS against plain, per loss."""
    runs = sides(runset)
    rows = [r for r in ctx.losses() if (r, "PROFS") in runs]
    first_epoch = {r: first_evaluation(runs[r, "plain"][0].record)["epoch"] for r in rows}
    vr = first_verdicts(runs, rows)
    said = (
        "R@1 at each run's first evaluation (the same early steps: "
        + ", ".join(f"{r} epoch {first_epoch[r]}" for r in rows)
        + "), PROFS vs plain per loss, paired by seed (a lower R@1 after equal steps is slower "
        "progress): " + ", ".join(f"{r} {x.effect * 100:+.1f}" for r, x in vr.items())
    )
    return no_difference(vr, "losses"), said


def lam_zero_parts(ctx: ClaimContext) -> dict[str, Beats]:
    """Per loss of the component ablation: its proximal term's step beats the step before
    (lambda = 0), paired by seed."""
    return {
        row: Beats(
            component_side(row, "+ proximal term"),
            component_side(row, "+ pair restriction"),
            paired=True,
            set_aside=COLLAPSE_DROPPED,
        )
        for row in ctx.component_rows
    }


def reused_samples(row: str, ctx: ClaimContext, runset: RunSet) -> Judged:
    """Representative batches alone leave R@1 after the same early steps unchanged."""
    st = component_steps(table_sides(runset, 1), component_sides(runset))[row]
    vc = first_beats(st, "representatives", "plain")
    said = (
        f"R@1 at the first evaluation (epoch {first_evaluation(st['plain'][0].record)['epoch']}), "
        f"representative batches vs plain, {len(st['representatives'])} vs {len(st['plain'])} "
        "seeds" + (", paired" if len(vc.n) == 1 else "")
    )
    return no_difference({row: vc}, "losses"), said


def _times(t: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        v: t[t["variant"] == v].sort_values("repeat")["ms per step"].to_numpy() for v in VARIANTS
    }


def profs_step_cost(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS is not slower per step than plain (same process, variants interleaved)."""
    t = _times(ctx.times)
    vp = compare(t["PROFS"], t["plain"], higher_is_better=False, scale=1, unit=" ms")
    if vp != FAILS:
        note = (
            "PROFS is not slower beyond the interval; the paper gives no tolerance, so 'no cost' "
            "can be refuted, not shown"
        )
        vp = Verdict(INCONCLUSIVE, vp.effect, vp.low, vp.high, vp.n, note, vp.scale, vp.unit)
    said = (
        f"ms per step over {len(t['plain'])} repeats of {int(ctx.times['steps'].iloc[0])} steps: "
        f"plain {t['plain'].mean():.1f}, PROFS {t['PROFS'].mean():.1f} (sampler, proximal hook "
        "and all); the effect is plain minus PROFS"
    )
    return vp, said


def hncm_extra(times: pd.DataFrame) -> np.ndarray:
    """Per repeat of the step times: what HNCM adds to a PROFS step, in % of it."""
    t = _times(times)
    return 100 * (t["PROFS-HNCM"] - t["PROFS"]) / t["PROFS"]


def hncm_step_cost(ctx: ClaimContext, runset: RunSet) -> Judged:
    """Our HNCM adds at most the paper's largest share to a step (repeat by repeat)."""
    t, extra = _times(ctx.times), hncm_extra(ctx.times)
    most = max(REPORTED_HNCM_COST.values())
    said = (
        f"HNCM over PROFS per repeat: {', '.join(f'{x:+.1f}%' for x in extra)} (PROFS-HNCM "
        f"{t['PROFS-HNCM'].mean():.1f} ms per step); the effect is the margin below {most:g}%"
    )
    v = compare_to_threshold(extra, most, higher_is_better=False, unit=" % of a step")
    return v, said


def competitive(ctx: ClaimContext, runset: RunSet) -> Judged:
    """C-PROFS and T-PROFS against plain Margin-Hard; the paper sets no threshold."""
    runs = sides(runset)
    mean = lambda r, v: 100 * float(np.mean(r1(runs[r, v])))  # noqa: E731
    premise = verdict_of(
        Beats(
            table_side("Margin-Hard", "plain"), table_side("Contrastive-Hard", "plain"), paired=True
        ),
        runset,
    )
    said = (
        f"R@1 C-PROFS {mean('Contrastive-Hard', 'PROFS'):.1f}, T-PROFS "
        f"{mean('Triplet-Hard', 'PROFS'):.1f}, Margin-Hard plain {mean('Margin-Hard', 'plain'):.1f}"
        f"; Margin-Hard > Contrastive-Hard (plain, paired by seed): {premise} "
        f"({premise.evidence()['effect']})"
    )
    shown = "does not hold" if premise == FAILS else "is not shown"
    why = "the paper sets no threshold for 'competitive'" + (
        ""
        if premise == HOLDS
        else f", and its premise, Margin superior to contrastive, {shown} here"
    )
    return not_tested(why), said
