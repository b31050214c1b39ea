"""The PROFS paper's claims and our measurements, declared as data
(:class:`dmlnb.chapter.ClaimSpec`) and judged by :func:`dmlnb.chapter.evaluate`.

:func:`claims` declares them for one :class:`~dmlnb.experiments.profs.judges.ClaimContext` (what
the profile trains, how many projections a run makes, the step times): a paper's claim outside
the range of its evidence at this scale is :class:`~dmlnb.chapter.Untestable` with its typed
reason and the scale that would test it, and, where the runs measure it anyway, our measurement
follows as a claim of ours (``origin="ours"``). The tests the vocabulary cannot say (a side with
a collapsed run set aside, "for every loss", the first evaluation, the step times) are
:class:`~dmlnb.chapter.Custom` judges of :mod:`dmlnb.experiments.profs.judges`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import pandas as pd

from dmlnb.chapter import Beats, ClaimSpec, Custom, InteriorOptimum, Side, Test, Untestable
from dmlnb.experiments.profs import judges as J
from dmlnb.experiments.profs.analyses import paper_projections
from dmlnb.experiments.profs.claims_more import more_claims
from dmlnb.experiments.profs.judges import ClaimContext
from dmlnb.experiments.profs.profiles import (
    PAPER_BATCH,
    PAPER_I,
    PAPER_TRAIN_SETS,
    REPORTED_LAMBDA,
    REPORTED_LAMBDA_FLAT,
    period_for,
    table2_config,
    table_rows,
)
from dmlnb.experiments.profs.reported import (
    REPORTED_HNCM_COST,
    REPORTED_TABLE1,
    REPORTED_TABLE2,
    describe_reported,
    reported_differences,
    reported_gains,
)
from dmlnb.experiments.profs.runs import (
    COLLAPSE_DROPPED,
    COMPONENT_STEPS,
    component_side,
    table_side,
)
from dmlnb.experiments.profs.tables import NOT_SWEPT
from dmlnb.profiles import TrainConfig

__all__ = ["chapter_claims", "claim_context", "ClaimContext", "PAPER_SCALE"]

#: Where the claims this profile cannot test would be tested.
PAPER_SCALE = "the paper profile (GoogLeNet V1 on CUB-200-2011, a GPU)"
_DATASETS = ("SOP", "CARS196", "CUB-200-2011")
#: Each section's seeds in the profile's settings: sides of sections with equal seeds pair.
_SEEDS = {
    "table1": "seeds",
    "table2": "table2_seeds",
    "components": "component_seeds",
    "sweeps": "sweep_seeds",
    "regime": "regime_seeds",
}
_STEP_REASON = (
    "a cost's share of a step depends on the step's own cost: the paper's is a GoogLeNet step "
    "on 128 images of 224 px (on hardware the paper does not name), ours a 4-block CNN on 28 "
    "px images, so neither the sign of a small overhead nor its share carries over (measured "
    "below); timing the paper's step is a measurement this chapter chose not to make, not a "
    "limit of the hardware"
)


def _custom(fn, ctx: ClaimContext, *args: str, shape: str, paired: bool) -> Custom:
    """A :class:`Custom` test of ``fn(*args, ctx, runs) -> (verdict, evidence in words)``, of
    the declared ``shape`` and pairing."""
    judged = partial(fn, *args, ctx)
    return Custom(
        lambda runs: judged(runs)[0],
        evidence=lambda runs: judged(runs)[1],
        shape=shape,
        paired=paired,
    )


def _reported_hncm_gains() -> dict[str, float]:
    """Per dataset of Table 1: HNCM's R@1 gain over PROFS, the mean over the losses (reported)."""
    return {
        ds: (reported_gains(ds)["PROFS-HNCM gain"] - reported_gains(ds)["PROFS gain"]).mean()
        for ds in _DATASETS
    }


def _longer(steps: int, epochs: int, period: int, paper: pd.DataFrame, what: str) -> str:
    """The scale that would test a gain this profile's runs of ``steps`` steps (``epochs``
    epochs, ``M = period``) make too few projections for: ``what`` trained long enough for the
    paper's fewest projections per run (``paper``: its runs' projections), on this machine."""
    fewest = float(paper["projections"].min())
    need = (
        f"{math.ceil(fewest * period / (steps / epochs))} epochs"
        if epochs and steps
        else "more epochs"
    )
    return (
        f"{what} trained {need} ({fewest:.0f} projections per run, the paper's fewest): a run of "
        "this profile's network and data, which a CPU can train"
    )


def _at_scale(
    spec: ClaimSpec, reason: str | None, projections: float, scale: str
) -> list[ClaimSpec]:
    """The paper's claim ``spec`` as judged here: itself when runs make as many projections as
    the paper's (``reason`` is ``None``); else not run at the ``scale`` that would test it (more
    epochs of this profile: a schedule this chapter chose, not a limit of the hardware), and the
    measurement as a claim of ours."""
    if reason is None:
        return [spec]
    untested = Untestable("not-run", reason, scale)
    ours = ClaimSpec(
        f"{spec.id}-measured",
        f"{spec.text} [measured at {projections:.1f} projections per run]",
        spec.test,
        origin="ours",
    )
    return [ClaimSpec(spec.id, spec.text, untested, spec.where, "paper", spec.paper_evidence), ours]


def _gains(ctx: ClaimContext) -> list[ClaimSpec]:
    """Sec. 5.5's gains: PROFS over every loss, HNCM further (on the mean over the losses)."""
    proj = ctx.steps / ctx.period
    table2 = reported_differences("PROFS", "plain")[lambda d: d["table"] == "Table 2"]
    improves = ClaimSpec(
        "profs-improves-every-loss",
        "PROFS consistently improves the performance of the integrated loss functions (every "
        "loss, clustering and retrieval)",
        _custom(J.profs_improves, ctx, shape="every", paired=True),
        where="Abstract; Sec. 5.5, Tables 1-2",
        paper_evidence=describe_reported(reported_differences("PROFS", "plain", table2=False))
        + "; Table 2 against the cited papers' published numbers: "
        + describe_reported(table2),
    )
    hncm = _reported_hncm_gains()
    boosts = ClaimSpec(
        "hncm-boosts-profs",
        "PROFS with HNCM boosts the performance further (R@1, averaged over the integrated losses)",
        _custom(J.hncm_boosts, ctx, shape="comparison", paired=True),
        where="Abstract; Sec. 5.5, Tables 1-2",
        paper_evidence=describe_reported(reported_differences("PROFS-HNCM", "PROFS"))
        + "; mean R@1 gain over the losses of Table 1: "
        + ", ".join(f"{ds} {g:+.2f}" for ds, g in hncm.items()),
    )
    longer = _longer(ctx.steps, ctx.epochs, ctx.period, paper_projections(), "Tables 1-2's runs")
    return _at_scale(improves, ctx.reason, proj, longer) + _at_scale(
        boosts, ctx.reason, proj, longer
    )


def _competitive(ctx: ClaimContext) -> ClaimSpec:
    need = ("Margin-Hard", "Contrastive-Hard", "Triplet-Hard")
    compared = (
        ("Margin-Hard", "plain"),
        ("Contrastive-Hard", "plain"),
        ("Contrastive-Hard", "PROFS"),
        ("Triplet-Hard", "PROFS"),
    )
    missing = [f"{r} {v}" for r, v in compared if r not in ctx.rows]
    test = (
        Untestable(
            "not-run",
            "the runs it compares are not trained at this profile: " + ", ".join(missing),
            PAPER_SCALE,
        )
        if any(r not in ctx.rows for r in need)
        else _custom(J.competitive, ctx, shape="comparison", paired=True)
    )
    t = REPORTED_TABLE1
    return ClaimSpec(
        "competitive-with-margin",
        "PROFS with the contrastive and triplet losses is competitive with the superior Margin "
        "loss",
        test,
        where="Sec. 5.5, Table 1",
        paper_evidence="Table 1 R@1, C-PROFS / T-PROFS vs Margin: "
        + ", ".join(
            f"{ds} {t.loc['C-PROFS', (ds, 'R@1')]:.1f} / {t.loc['T-PROFS', (ds, 'R@1')]:.1f} vs "
            f"{t.loc['Margin-Hard', (ds, 'R@1')]:.1f}"
            for ds in _DATASETS
        ),
    )


def _softtriple(ctx: ClaimContext) -> list[ClaimSpec]:
    if "SoftTriple" not in ctx.rows:
        return []
    t = REPORTED_TABLE2
    gain = {
        ds: t.loc[("SoftTriple", "PROFS"), (ds, "R@1")]
        - t.loc[("SoftTriple", "plain"), (ds, "R@1")]
        for ds in _DATASETS
    }
    spec = ClaimSpec(
        "softtriple-regularisation",
        "PROFS improves SoftTriple, a gain that comes from the regularisation alone",
        Beats(
            table_side("SoftTriple", "PROFS"),
            table_side("SoftTriple", "plain"),
            paired=True,  # the sides share their seeds (their initial weights), by design
            set_aside=COLLAPSE_DROPPED,
        ),
        where="Sec. 5.5, Table 2",
        paper_evidence="Table 2 R@1, SoftTriple-PROFS minus SoftTriple [30]'s published numbers: "
        + ", ".join(f"{ds} {g:+.1f}" for ds, g in gain.items()),
    )
    per_step = paper_projections().assign(projections=lambda d: d["steps"].astype(float))
    longer = _longer(ctx.soft_steps, ctx.soft_epochs, 1, per_step, "SoftTriple's runs")
    return _at_scale(spec, ctx.soft_reason, float(ctx.soft_steps), longer)


def _hncm_sop(ctx: ClaimContext) -> list[ClaimSpec]:
    hncm = _reported_hncm_gains()
    sop = PAPER_BATCH / PAPER_I / PAPER_TRAIN_SETS["SOP"][1]
    reg = ctx.regime
    small = reg["classes"][0] / reg["L"] if reg.get("small_runs") else ctx.class_share
    why = (
        "no dataset here has many classes: the smallest class share a batch holds here "
        f"({small:.3f}) is {small / sop:.0f}x SOP's ({sop:.4f})"
    )
    out = [
        ClaimSpec(
            "hncm-most-useful-on-sop",
            "Utilizing HNCM is more efficient on SOP, since it has almost 100 times more classes "
            "than CARS196 and CUB-200-2011",
            Untestable("needs-paper-data", why, "the paper profile on SOP"),
            where="Sec. 5.5, Table 1",
            paper_evidence="Table 1, HNCM - PROFS R@1 (mean over losses): "
            + ", ".join(f"{ds} {g:+.2f}" for ds, g in hncm.items()),
        )
    ]
    if reg.get("small_runs"):
        out.append(
            ClaimSpec(
                "hncm-small-batch",
                "HNCM improves PROFS when a batch holds a smaller share of the classes "
                f"({reg['loss']}, batch of {reg['classes'][0]} classes)",
                Beats(
                    Side("regime/PROFS-HNCM", reg["loss"], name=f"{reg['loss']} PROFS-HNCM"),
                    Side("regime/PROFS", reg["loss"], name=f"{reg['loss']} PROFS"),
                    paired=True,
                    set_aside=COLLAPSE_DROPPED,
                ),
                origin="ours",
            )
        )
    return out


def _sweeps(ctx: ClaimContext) -> list[ClaimSpec]:
    """Figs. 2-3: M's and lambda's interior optima, and lambda = 0 over-fitting."""
    swept_here = "this profile with the sweep's runs (each as long as Table 1's, CPU runs)"
    not_swept = lambda what: Untestable("not-run", NOT_SWEPT.format(what=what), swept_here)  # noqa: E731
    optima = {
        loss: InteriorOptimum({m: Side(f"M/{m}", loss, name=f"{loss} M = {m}") for m in ctx.m_grid})
        for loss in ctx.sweep_losses
    }
    grid = ", ".join(f"M = {m:g}: {ctx.steps / m:.1f}" for m in ctx.m_grid)
    m = ClaimSpec(
        "m-interior-optimum",
        "M has an interior optimum: performance improves as M increases up to certain values, "
        "then drops (over-fitting to the subproblems)",
        J.every_test(optima, "losses", "interior-optimum", False, f"projections per run: {grid}")
        if ctx.m_swept
        else not_swept("M"),
        where="Sec. 5.4.1, Fig. 2",
        paper_evidence="Fig. 2 (contrastive, triplet, N-pair, margin; SOP, CARS196, "
        "CUB-200-2011), curves not transcribed",
    )
    lam_side = lambda lam: Side(  # noqa: E731
        f"lambda/{lam:g}", ctx.lambda_loss, name=f"{ctx.lambda_loss} lambda = {lam:g}"
    )
    lam = ClaimSpec(
        "lambda-flat-range",
        "lambda: large values drop performance (over-regularisation), lambda = 0 over-fits the "
        f"subproblems; similar within [{REPORTED_LAMBDA_FLAT[0]:g}, {REPORTED_LAMBDA_FLAT[1]:g}]",
        InteriorOptimum({x: lam_side(x) for x in ctx.lambda_grid})
        if ctx.lam_swept
        else not_swept("lambda"),
        where="Sec. 5.4.2, Fig. 3",
        paper_evidence="Fig. 3 (Margin, GoogLeNet V1), curves not transcribed",
    )
    zero: Test
    if ctx.lam_swept and REPORTED_LAMBDA in ctx.lambda_grid:
        zero = Beats(lam_side(REPORTED_LAMBDA), lam_side(min(ctx.lambda_grid)), paired=True)
        evidence = "Sec. 5.4.2, Fig. 3"
    elif _lam_zero_from_components(ctx):
        said = "the component ablation, the proximal term's step against lambda = 0, paired"
        zero = J.every_test(J.lam_zero_parts(ctx), "losses", "every", True, said)
        evidence = "Sec. 5.4.2, Fig. 3 (Margin)"
    else:
        why = f"neither a lambda sweep holding {REPORTED_LAMBDA:g} nor the component ablation ran"
        zero, evidence = Untestable("not-run", why, PAPER_SCALE), "Sec. 5.4.2, Fig. 3"
    text = f"lambda = 0 (no regularisation) over-fits: the paper's lambda = {REPORTED_LAMBDA:g} "
    return [m, lam, ClaimSpec("lambda-zero-overfits", text + "beats it", zero,
                              where="Sec. 5.4.2, Fig. 3", paper_evidence=evidence)]  # fmt: skip


def _lam_zero_from_components(ctx: ClaimContext) -> bool:
    """Whether the paper's lambda = 0 claim is judged on the component ablation's proximal step
    (no lambda sweep holding the paper's lambda ran)."""
    return bool(ctx.component_rows) and not (ctx.lam_swept and REPORTED_LAMBDA in ctx.lambda_grid)


def _section(step: str) -> str:
    return "table1" if step == "plain" else "components"


def _components(ctx: ClaimContext) -> list[ClaimSpec]:
    """Ours: each step of the component ablation against the one before (paired by seed where
    the steps share their seeds), and re-used samples alone after the same early steps."""
    names = ["plain", *COMPONENT_STEPS]
    out = [
        ClaimSpec(
            f"components-{row}-{after.removeprefix('+ ').replace(' ', '-')}",
            f"{row}: '{after}' improves R@1 over '{before}' [component ablation]",
            Beats(
                component_side(row, after),
                component_side(row, before),
                paired=ctx.paired(_section(after), _section(before)),
                set_aside=COLLAPSE_DROPPED,
            ),
            origin="ours",
        )
        for row in ctx.component_rows
        for before, after in zip(names, names[1:])
        # the proximal term's step is the paper's lambda = 0 claim here (judged once, there)
        if not (after == "+ proximal term" and _lam_zero_from_components(ctx))
    ]
    paired = ctx.paired("components", "table1")
    return out + [
        ClaimSpec(
            f"reused-samples-{row}",
            f"{row}: re-used class samples alone ('representatives') leave R@1 after the same "
            "early steps unchanged [component ablation]",
            _custom(J.reused_samples, ctx, row, shape="no-difference", paired=paired),
            origin="ours",
        )
        for row in ctx.component_rows
    ]


def _cost(ctx: ClaimContext) -> list[ClaimSpec]:
    """Sec. 5.4's costs (not tested: another step, another HNCM) and our step times."""
    reported = ", ".join(f"+{x:g}% ({k})" for k, x in REPORTED_HNCM_COST.items())
    scale = (
        "this chapter's same-process timing of the paper's step (a GoogLeNet V1 forward and "
        "backward on 128 images of 224 px, which a CPU can run, slowly) with a tolerance for "
        "'no cost' stated"
    )
    paper = [
        ClaimSpec(
            "profs-no-step-cost",
            "PROFS (without HNCM) brings no additional computational cost",
            Untestable("not-run", _STEP_REASON, scale),
            where="Abstract, Sec. 5.4",
            paper_evidence="Abstract, Sec. 5.4, stated without numbers",
        ),
        ClaimSpec(
            "hncm-scan-cost",
            "HNCM only adds a scan of the class representatives: +0.008% (CUB & CARS) and +0.9% "
            "(SOP) of the overall computation time",
            Untestable(
                "not-run",
                _STEP_REASON
                + "; and this profile's HNCM is a greedy O(C L D) chain, not the paper's O(L) "
                "scan",
                scale + " (the paper-like single scan, hncm_mode='scan')",
            ),
            where="Sec. 5.4",
            paper_evidence=f"Sec. 5.4: {reported}",
        ),
    ]
    if not len(ctx.times):
        return paper
    most = max(REPORTED_HNCM_COST.values())
    return paper + [
        ClaimSpec(
            "profs-step-time",
            "PROFS adds no time to a step [measured: same process, variants interleaved]",
            _custom(J.profs_step_cost, ctx, shape="comparison", paired=False),
            origin="ours",
        ),
        ClaimSpec(
            "hncm-step-share",
            f"Our greedy HNCM adds at most {most:g}% to a step (the paper's largest figure, SOP) "
            "[measured: same process]",
            _custom(J.hncm_step_cost, ctx, shape="threshold", paired=True),
            origin="ours",
        ),
    ]


def chapter_claims(ctx: ClaimContext) -> list[ClaimSpec]:
    """Every claim of the chapter at ``ctx``: the paper's, in the order the chapter discusses
    them, then ours."""
    convergence = ClaimSpec(
        "convergence-unchanged",
        "No significant increase or decrease in the convergence rate owing to re-utilization of "
        "the class samples",
        _custom(J.convergence, ctx, shape="no-difference", paired=True),
        where="Sec. 5.4",
        paper_evidence="Sec. 5.4, stated without numbers",
    )
    out = [
        *_gains(ctx),
        convergence,
        _competitive(ctx),
        *_softtriple(ctx),
        *_hncm_sop(ctx),
        *_sweeps(ctx),
        *_components(ctx),
        *_cost(ctx),
        *more_claims(ctx),
    ]
    return [c for c in out if c.origin == "paper"] + [c for c in out if c.origin == "ours"]


def claim_context(
    config: TrainConfig,
    settings: Mapping[str, Any],
    num_train: int,
    num_classes: int,
    times: pd.DataFrame,
    regime: Mapping[str, Any],
) -> ClaimContext:
    """The :class:`ClaimContext` of the chapter's ``config`` and ``settings`` on a training set
    of ``num_train`` images of ``num_classes`` classes, with the step ``times`` and the HNCM
    ``regime`` measured."""
    per_epoch = lambda c: c.steps_per_epoch or num_train // c.batch_size  # noqa: E731
    period = period_for(config, num_classes, settings["rho"])
    rows = (*table_rows(settings, 1), *table_rows(settings, 2))
    soft = table2_config(config, "SoftTriple", settings)
    return ClaimContext(
        metrics=("NMI", "F1", *(f"R@{k}" for k in config.eval_ks)),
        steps=config.epochs * per_epoch(config),
        period=period,
        soft_steps=soft.epochs * per_epoch(soft) if "SoftTriple" in rows else 0,
        class_share=config.batch_size / config.m_per_class / num_classes,
        times=times,
        regime=regime,
        rows=rows,
        component_rows=tuple(
            settings["component_losses"] if settings["component_ablation"] else ()
        ),
        m_grid=tuple(sorted(set(settings["m_grid"]) | {period})) if settings["m_grid"] else (),
        sweep_losses=tuple(settings["ablation_losses"]),
        lambda_grid=tuple(settings["lambda_grid"]),
        lambda_loss=settings["lambda_loss"],
        seeds={section: tuple(settings[key]) for section, key in _SEEDS.items()},
        epochs=config.epochs,
        soft_epochs=soft.epochs if "SoftTriple" in rows else 0,
    )
