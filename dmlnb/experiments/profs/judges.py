"""The judges of the PROFS chapter's claims that the chapter layer's vocabulary cannot say
(:class:`dmlnb.chapter.Custom`): comparisons that set a side with a collapsed run aside
(:func:`dmlnb.reporting.unless_degenerate`), "for every loss" over the losses trained, the
convergence claim read at the first evaluation, the sweeps' interior optima per loss and the
same-process step times. Each reads the :class:`~dmlnb.chapter.RunSet` when called (so that
:func:`dmlnb.chapter.evaluate_both_ways` sees each protocol's epoch) and returns its verdict,
by the book's one rule, and the evidence in words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import RunSet
from dmlnb.experiments.profs.analyses import first_evaluation, paper_projections, projection_reason
from dmlnb.experiments.profs.losses import TABLE2_LOSSES, VARIANTS
from dmlnb.experiments.profs.profiles import REPORTED_LAMBDA
from dmlnb.experiments.profs.reported import PAPER_PROFS_LOSSES, REPORTED_HNCM_COST
from dmlnb.experiments.profs.runs import component_sides, sweep_points, table_sides
from dmlnb.experiments.profs.tables import (
    COLLAPSED,
    collapsed_sides,
    component_steps,
    metric_verdicts,
    step_verdicts,
    sweep_verdicts,
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
    interior_optimum,
    no_difference,
    not_tested,
    unless_degenerate,
)
from dmlnb.runs import Run

__all__ = ["ClaimContext", "Judged"]

Judged = tuple[Verdict, str]


@dataclass(frozen=True, eq=False)
class ClaimContext:
    """What the claims read besides the runs: the ``metrics`` judged, a Table 1 run's ``steps``
    and ``period`` (``M``), a SoftTriple run's steps (``soft_steps``; a projection each), the
    share of the classes a batch holds (``class_share``), the step times
    (:func:`~dmlnb.experiments.profs.analyses.step_times`), the HNCM ``regime``
    (:func:`~dmlnb.experiments.profs.tables.hncm_regime`), whether the M and lambda sweeps run
    (``m_swept``, ``lam_swept``) and on which loss (``lambda_loss``), and the rows trained."""

    metrics: tuple[str, ...]
    steps: int
    period: int
    soft_steps: int
    class_share: float
    times: pd.DataFrame
    regime: Mapping[str, Any]
    rows: tuple[str, ...]
    component_rows: tuple[str, ...] = ()
    m_swept: bool = False
    lam_swept: bool = False
    lambda_loss: str = "Margin-Hard"
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def reason(self) -> str | None:
        """Why the gains of Tables 1-2 are outside the paper's evidence (too few projections)."""
        return projection_reason(self.steps, self.period)

    @property
    def soft_reason(self) -> str | None:
        """Why SoftTriple's gain is outside the paper's evidence (a projection per step)."""
        per_step = paper_projections().assign(M=1, projections=lambda d: d["steps"].astype(float))
        return projection_reason(self.soft_steps, 1, per_step) if self.soft_steps else None


def sides(runs: RunSet) -> dict[tuple[str, str], list[Run]]:
    """Tables 1 and 2: ``(row, variant)`` -> the runs over seeds."""
    return {**table_sides(runs, 1), **table_sides(runs, 2)}


def components(runs: RunSet) -> dict[str, dict[str, list[Run]]]:
    """The component ablation per loss (Table 1's plain runs first)."""
    return component_steps(table_sides(runs, 1), component_sides(runs))


def losses(ctx: ClaimContext, runs: Mapping[tuple[str, str], Sequence[Run]]) -> list[str]:
    """The losses the "every loss" claims read: the paper's PROFS rows trained, and Table 2's
    (SoftTriple only when its runs make as many projections as the paper's)."""
    return [row for row in PAPER_PROFS_LOSSES if (row, "PROFS") in runs] + [
        r
        for r in TABLE2_LOSSES
        if (r, "PROFS") in runs and (r != "SoftTriple" or ctx.soft_reason is None)
    ]


def r1(rs: Sequence[Run]) -> list[float]:
    return [float(x.metrics["R@1"]) for x in rs]


def first_r1(rs: Sequence[Run]) -> list[float]:
    """R@1 at each run's first evaluation."""
    return [float(first_evaluation(x.record)["metrics"]["R@1"]) for x in rs]


def guarded(
    a: Sequence[float], b: Sequence[float], collapsed: list[str], keep: bool = False
) -> Verdict:
    """``a`` beats ``b`` (points; :func:`~dmlnb.reporting.compare`), not tested with a
    collapsed side."""
    v = compare(a, b, scale=100, unit=" pts")
    return unless_degenerate(v, collapsed, COLLAPSED, keep_effect=keep)


def profs_improves(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS > plain for every loss and metric."""
    runs = sides(runset)
    rows = losses(ctx, runs)
    v, _ = metric_verdicts(runs, "PROFS", "plain", ctx.metrics, rows)
    seeds = ", ".join(sorted({f"{len(runs[r, 'PROFS'])} vs {len(runs[r, 'plain'])}" for r in rows}))
    untested = sum(x == NOT_TESTED for x in v.values())
    gain = {r: 100 * (np.mean(r1(runs[r, "PROFS"])) - np.mean(r1(runs[r, "plain"]))) for r in rows}
    said = (
        f"{len(v)} (loss, metric) comparisons ({len(rows)} losses x {', '.join(ctx.metrics)}; "
        f"seeds {seeds}): {sum(x == HOLDS for x in v.values())} higher, "
        f"{sum(x == FAILS for x in v.values())} lower beyond the interval"
        + (f", {untested} not tested (collapsed runs)" if untested else "")
        + "; R@1 gain per loss: "
        + ", ".join(f"{r} {g:+.1f}" for r, g in gain.items())
    )
    return all_of(v, "(loss, metric) comparisons"), said


def hncm_boosts(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS-HNCM > PROFS on the mean R@1 over the losses, seed by seed."""
    runs = sides(runset)
    rows = losses(ctx, runs)

    def loss_mean(variant: str) -> list[float]:
        n = min(len(runs[r, variant]) for r in rows)
        return [float(np.mean([r1(runs[r, variant])[s] for r in rows])) for s in range(n)]

    both = [(r, v) for r in rows for v in ("PROFS-HNCM", "PROFS")]
    v = guarded(loss_mean("PROFS-HNCM"), loss_mean("PROFS"), collapsed_sides(runs, *both))
    per = {
        r: 100 * (np.mean(r1(runs[r, "PROFS-HNCM"])) - np.mean(r1(runs[r, "PROFS"]))) for r in rows
    }
    said = "per seed, the mean R@1 over the losses, PROFS-HNCM vs PROFS; per loss: " + ", ".join(
        f"{r} {g:+.1f}" for r, g in per.items()
    )
    return v, said


def convergence(ctx: ClaimContext, runset: RunSet) -> Judged:
    """R@1 after the same early steps (the first evaluation), PROFS against plain, per loss."""
    runs = sides(runset)
    rows = losses(ctx, runs)
    first_epoch = {r: first_evaluation(runs[r, "plain"][0].record)["epoch"] for r in rows}
    vr = {
        r: guarded(
            first_r1(runs[r, "PROFS"]),
            first_r1(runs[r, "plain"]),
            collapsed_sides(runs, (r, "PROFS"), (r, "plain")),
            keep=True,
        )
        for r in rows
    }
    said = (
        "R@1 at each run's first evaluation (the same early steps: "
        + ", ".join(f"{r} epoch {first_epoch[r]}" for r in rows)
        + "), PROFS vs plain per loss (a lower R@1 after equal steps is slower progress): "
        + ", ".join(f"{r} {x.effect * 100:+.1f}" for r, x in vr.items())
    )
    return no_difference(vr, "losses"), said


def softtriple(ctx: ClaimContext, runset: RunSet) -> Judged:
    """SoftTriple with PROFS (the proximal term only) > plain SoftTriple."""
    runs = sides(runset)
    a, b = ("SoftTriple", "PROFS"), ("SoftTriple", "plain")
    v = guarded(r1(runs[a]), r1(runs[b]), collapsed_sides(runs, a, b))
    return v, f"SoftTriple R@1, PROFS (proximal term only, M = 1) vs plain ({len(runs[a])} seeds)"


def regime_gain(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS-HNCM > PROFS with the small batch."""
    small, reg = ctx.regime["small_runs"], ctx.regime
    v = guarded(
        r1(small["PROFS-HNCM"]),
        r1(small["PROFS"]),
        collapsed_sides(small, "PROFS-HNCM", "PROFS"),
    )
    said = (
        f"PROFS-HNCM vs PROFS R@1 with the small batch ({reg['steps']} steps, M = "
        f"{reg['period']}); with Table 1's batch the same loss: {np.mean(reg['large']):+.2f} points"
    )
    return v, said


def m_optimum(ctx: ClaimContext, runset: RunSet) -> Judged:
    """An interior M beats both ends, for every loss of the sweep."""
    points = sweep_points(runset, "M")
    verdict, per_loss, _ = sweep_verdicts(points)
    grid = sorted({m for pts in points.values() for m in pts})
    said = (
        "; ".join(f"{loss}: {v}" for loss, v in per_loss.items())
        + "; projections per run: "
        + ", ".join(f"M = {m:g}: {ctx.steps / m:.1f}" for m in grid)
        + (
            " (the largest M makes fewer than 2, so the drop from over-fitting a subproblem is "
            "barely probed)"
            if ctx.steps / max(grid) < 2
            else ""
        )
    )
    return verdict, said


def lam_points(ctx: ClaimContext, runset: RunSet) -> dict[float, list[float]]:
    return sweep_points(runset, "lambda").get(ctx.lambda_loss, {})


def lam_optimum(ctx: ClaimContext, runset: RunSet) -> Judged:
    """An interior lambda beats both ends."""
    points = lam_points(ctx, runset)
    mean = {lam: 100 * float(np.mean(x)) for lam, x in sorted(points.items())}
    verdict, _ = interior_optimum(points, scale=100, unit=" pts")
    said = "interior optimum over lambda = " + ", ".join(
        f"{k:g} ({m:.1f})" for k, m in mean.items()
    )
    return verdict, said


def lam_zero_sweep(ctx: ClaimContext, runset: RunSet) -> Judged:
    """The paper's lambda beats lambda = 0, in the sweep."""
    points = lam_points(ctx, runset)
    mean = {lam: 100 * float(np.mean(x)) for lam, x in sorted(points.items())}
    zero = min(points)
    if REPORTED_LAMBDA in points:
        v = compare(points[REPORTED_LAMBDA], points[zero], scale=100, unit=" pts")
    else:
        v = not_tested("not run")
    said = (
        f"R@1 at lambda = {REPORTED_LAMBDA:g}: {mean.get(REPORTED_LAMBDA, np.nan):.1f}, at 0: "
        f"{mean[zero]:.1f} (best mean at lambda = {max(mean, key=mean.get):g})"
    )
    return v, said


def lam_zero_components(ctx: ClaimContext, runset: RunSet) -> Judged:
    """The proximal term (lambda > 0) beats lambda = 0 in the component ablation."""
    steps_of = {
        row: st
        for row, st in components(runset).items()
        if "+ pair restriction" in st and "+ proximal term" in st
    }
    with_term = {row: st["+ proximal term"] for row, st in steps_of.items()}
    vz = {
        row: compare(r1(with_term[row]), r1(st["+ pair restriction"]), scale=100, unit=" pts")
        for row, st in steps_of.items()
    }
    lam = with_term[next(iter(with_term))][0].record.data["spec"]["lam"]
    said = (
        f"the component ablation, R@1 with the proximal term (lambda = {lam:g}) vs without "
        "(lambda = 0), same batches and pairs: "
        + ", ".join(f"{row} {v.evidence()['effect']}" for row, v in vz.items())
    )
    return all_of(vz, "losses"), said


def component_step(row: str, step: str, ctx: ClaimContext, runset: RunSet) -> Judged:
    """A step of the component ablation improves R@1 on the step before."""
    steps = components(runset)[row]
    names = list(steps)
    before = names[names.index(step) - 1]
    v = step_verdicts(steps)[step]
    return v, f"{len(steps[step])} vs {len(steps[before])} seeds, equal steps"


def reused_samples(row: str, ctx: ClaimContext, runset: RunSet) -> Judged:
    """Representative batches alone leave R@1 after the same early steps unchanged."""
    st = components(runset)[row]
    vc = guarded(
        first_r1(st["representatives"]),
        first_r1(st["plain"]),
        collapsed_sides(st, "representatives", "plain"),
    )
    said = (
        f"R@1 at the first evaluation (epoch {first_evaluation(st['plain'][0].record)['epoch']}), "
        f"representative batches vs plain, {len(st['representatives'])} vs {len(st['plain'])} "
        "seeds"
    )
    return no_difference({row: vc}, "losses"), said


def _times(ctx: ClaimContext) -> dict[str, np.ndarray]:
    t = ctx.times
    return {
        v: t[t["variant"] == v].sort_values("repeat")["ms per step"].to_numpy() for v in VARIANTS
    }


def profs_step_cost(ctx: ClaimContext, runset: RunSet) -> Judged:
    """PROFS is not slower per step than plain (same process, variants interleaved)."""
    t = _times(ctx)
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


def hncm_step_cost(ctx: ClaimContext, runset: RunSet) -> Judged:
    """Our HNCM adds at most the paper's largest share to a step."""
    t = _times(ctx)
    extra = 100 * (t["PROFS-HNCM"] - t["PROFS"]) / t["PROFS"]
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
    premise = compare(
        r1(runs["Margin-Hard", "plain"]),
        r1(runs["Contrastive-Hard", "plain"]),
        scale=100,
        unit=" pts",
    )
    said = (
        f"R@1 C-PROFS {mean('Contrastive-Hard', 'PROFS'):.1f}, T-PROFS "
        f"{mean('Triplet-Hard', 'PROFS'):.1f}, Margin-Hard plain {mean('Margin-Hard', 'plain'):.1f}"
        f"; Margin-Hard > Contrastive-Hard (plain): {premise} ({premise.evidence()['effect']})"
    )
    shown = "does not hold" if premise == FAILS else "is not shown"
    why = "the paper sets no threshold for 'competitive'" + (
        ""
        if premise == HOLDS
        else f", and its premise, Margin superior to contrastive, {shown} here"
    )
    return not_tested(why), said
