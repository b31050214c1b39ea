"""What the chapter shows beside each verdict: the evidence of every claim in words, computed from
the runs, the toy, the timing and Lemma 1's trace (:func:`claims_shown`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import BeatsEvery, Custom, JudgedClaim, NoDifference, RunSet
from dmlnb.experiments.facility_location.claims import LinearTime
from dmlnb.experiments.facility_location.diagnostics import (
    inside_loss_frame,
    inside_loss_summary,
    pam_by_table,
    scaling_slopes,
)
from dmlnb.experiments.facility_location.lemma1 import normalised
from dmlnb.experiments.facility_location.runs import KeptRun
from dmlnb.experiments.facility_location.spec import ROW_NAMES
from dmlnb.experiments.facility_location.toy import (
    LOCAL_TOY_LOSSES,
    PAPER_LOCAL_TOY_LOSSES,
    TOY_GAMMA,
)
from dmlnb.reporting import Claim

__all__ = [
    "claims_shown",
    "table_evidence",
    "timing_evidence",
    "lemma1_evidence",
    "passes_evidence",
    "toy_evidence",
]


def table_evidence(test: BeatsEvery, runs: RunSet) -> str:
    """Every method's mean of the test's metric (%), and the seeds."""
    metric, group = test.metric, test.better.group
    means = {
        s.label: float(np.mean(runs.values(group, s.label, metric)))
        for s in (*test.worse, test.better)
    }
    means = {m: means[m] for m in ("triplet", "lifted", "npair", "clustering")}
    seeds = len(runs.seeds(group, "clustering"))
    return (
        f"{metric} (%, mean over seeds): "
        + ", ".join(f"{ROW_NAMES[m]} {100 * v:.1f}" for m, v in means.items())
        + f" ({seeds} seed{'s' if seeds > 1 else ''}"
        + (", paired by seed)" if test.paired else ")")
    )


def ratio_evidence(test: NoDifference, runs: RunSet) -> str:
    """The clustering loss's means at the two class ratios (the sides named ``"C/m <ratio>"``)."""
    (ra, rb), m = (str(s).removeprefix("C/m ") for s in (test.a, test.b)), test.metric
    a = np.mean(runs.values(test.a.group, test.a.label, m))
    b = np.mean(runs.values(test.b.group, test.b.label, m))
    return (
        f"clustering loss, same data and test set: {m} at C/m = {ra} {100 * a:.1f}, at {rb} "
        f"{100 * b:.1f} (%, mean over seeds); effect = C/m {ra} minus {rb}, paired by seed"
    )


def timing_evidence(scaling: pd.DataFrame) -> str:
    """The in-cell timing of Algorithm 1: medians per batch size and the exponents per repeat."""
    slopes = scaling_slopes(scaling)
    med = scaling.groupby("batch")["seconds"].median()
    return (
        "dmlnb's greedy inference, Algorithm 1 as listed (every candidate scored over the whole "
        "batch, O(|Y| |V|^2) per pass, as the authors' cluster_loss computes it), measured "
        f"{scaling.attrs.get('made', 'here')} in one process (reloaded from the stored "
        f"measurement), |Y| = {int(scaling['clusters'].iloc[0])}, 64-d: median "
        + ", ".join(f"|V| = {v}: {t:.3f} s" for v, t in med.items())
        + f"; exponent (least-squares slope of log time on log |V|, {len(med)} sizes) per repeat "
        + ", ".join(f"{x:.2f}" for x in slopes)
    )


def overhead_evidence(all_runs: Sequence[KeptRun]) -> str:
    """The logged inference share of every clustering run's steps."""
    shares: dict[str, list[float]] = {}
    for r in all_runs:
        if r.method == "clustering":
            s = inside_loss_summary(inside_loss_frame([r]))
            if len(s) and "inference_share" in s:
                shares.setdefault(f"{r.table}, gamma {r.spec['gamma']:g}", []).append(
                    float(s["inference_share"].iloc[0])
                )
    if not shares:
        return "—"
    return "logged inference share of a clustering step, per run: " + "; ".join(
        f"{k}: " + ", ".join(f"{v:.0%}" for v in vs) for k, vs in shares.items()
    )


def lemma1_evidence(traced: pd.DataFrame, all_runs: Sequence[KeptRun]) -> str:
    """The trace's updates and passes that lower A, and what the runs' logs show (no test)."""
    pam = pam_by_table(all_runs).groupby("refinement")[["runs", "steps", "ended below greedy"]]
    pam = pam.sum()
    lowered = traced[traced["updates lowering A"] > 0]
    falls = "; ".join(
        f"{r['batch']}: {int(r['updates lowering A'])} update(s), by up to "
        f"{r['largest fall of A']:.3g}"
        for r in lowered.to_dict("records")
    )
    logs = "; ".join(
        f"refinement {a!r}: {int(p['ended below greedy'])} of {int(p['steps'])} steps "
        f"below the greedy start ({int(p['runs'])} runs)"
        for a, p in pam.iterrows()
    )
    return (
        f"every update of the listing traced on {len(traced)} batches (the 2-D counterexample "
        f"of our search and {len(traced) - 1} random L2-normalised batches of 16 to 64 "
        f"points): A falls at {int(traced['updates lowering A'].sum())} of "
        f"{int(traced['updates'].sum())} updates"
        + (f" ({falls})" if len(lowered) else "")
        + f", {int(traced['passes ending below their start'].sum())} of "
        f"{int(traced['passes'].sum())} passes end below their start. The runs' logs (refined "
        "minus greedy A, once per step, after all passes): "
        + (logs if len(pam) else "—")
        + "; not a test: for metric distances no pass of the listing ends below its start (a "
        "proof, dmlnb.losses.facility_location), and the variant 'full' swaps only when A "
        "rises"
    )


def passes_evidence(traced: pd.DataFrame) -> str:
    """The passes of the listing on the traced L2-normalised batches: how many end below their
    start, how many passes each batch ran, and how many batches a sixth pass would change."""
    f = normalised(traced)
    if not len(f):
        return "—"
    return (
        f"Algorithm 2 as listed traced on {len(f)} random L2-normalised batches of "
        f"{f['points'].min()} to {f['points'].max()} points (64-d, as the runs' embeddings), "
        f"from the greedy set: {int(f['passes ending below their start'].sum())} of "
        f"{int(f['passes'].sum())} passes end below their start; passes until one changes "
        f"nothing: {f['passes'].min()} to {f['passes'].max()}; a sixth pass would change the set "
        f"of {int((~f['converged within T'].astype(bool)).sum())} batches"
    )


def toy_evidence(toy: pd.DataFrame, name: str) -> str:
    """The angles between the split class's groups after ``name`` (a paper local loss or the
    clustering loss, with the other local losses beside it)."""
    f = toy[toy["loss"] == name]
    nn = f"nearest neighbour of the same class {f['nn_accuracy'].mean():.2f} (mean)"
    if name != "clustering":
        return (
            f"{name}: angle between the class-0 groups after training per seed "
            + ", ".join(f"{v:.0f}°" for v in f["gap_degrees"])
            + f"; {nn}; largest loss over the steps "
            + ", ".join(f"{v:.3g}" for v in f["max_loss"])
        )
    others = toy[toy["loss"].isin([n for n in LOCAL_TOY_LOSSES if n not in PAPER_LOCAL_TOY_LOSSES])]
    return (
        "angle between the class-0 groups after training, per seed: "
        + ", ".join(f"{v:.0f}°" for v in f["gap_degrees"])
        + f"; {nn}; gamma = {TOY_GAMMA:g}, no decay"
        + "".join(
            f"; {n} (not a loss of the paper) ends at "
            + ", ".join(f"{v:.0f}°" for v in g["gap_degrees"])
            for n, g in others.groupby("loss", sort=False)
        )
    )


def _evidence(j: JudgedClaim, runs: RunSet, all_runs: Sequence[KeptRun], toy: pd.DataFrame) -> str:
    test = j.spec.test
    judge = test.judge if isinstance(test, Custom) else None
    if isinstance(test, BeatsEvery):
        return table_evidence(test, runs)
    if isinstance(test, NoDifference):
        return ratio_evidence(test, runs)
    if isinstance(judge, LinearTime):
        return timing_evidence(judge.scaling)
    if j.spec.id == "inference-overhead":
        return overhead_evidence(all_runs)
    if j.spec.id == "lemma1-per-update":
        return lemma1_evidence(judge.traced, all_runs)  # type: ignore[union-attr]
    if j.spec.id in ("lemma1", "converges-quickly"):
        return passes_evidence(judge.traced)  # type: ignore[union-attr]
    if j.spec.id.startswith("figure2-"):
        return toy_evidence(toy, judge.loss)  # type: ignore[union-attr]
    if j.spec.id == "figure3":
        return toy_evidence(toy, "clustering")
    return j.evidence


def claims_shown(
    judged: Sequence[JudgedClaim], runs: RunSet, all_runs: Sequence[KeptRun], toy: pd.DataFrame
) -> list[Claim]:
    """The judged claims as the chapter's claims table shows them
    (:func:`dmlnb.reporting.claims_table`): the claim, the paper's evidence, ours in words
    (computed from ``runs``, every run in ``all_runs`` and the ``toy``) and the verdict."""
    return [
        Claim(j.spec.text, j.spec.paper_evidence, _evidence(j, runs, all_runs, toy), j.verdict)
        for j in judged
    ]
