"""The closing section of the PROFS chapter, "What this chapter finds", written from the runs,
the judged claims and the measurements: every number in it is computed, none typed. Each
paragraph is a function of what it reads; a paragraph whose runs a profile does not make is
left out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import JudgedClaim
from dmlnb.experiments.profs.analyses import first_evaluation, loss_plateau, paper_projections
from dmlnb.experiments.profs.deviations import is_augmented
from dmlnb.experiments.profs.judges import first_verdicts, hncm_extra, r1
from dmlnb.experiments.profs.losses import collapse_level
from dmlnb.experiments.profs.procedure import loss_config
from dmlnb.experiments.profs.profiles import PAPER_EPOCHS, table2_config, table_rows
from dmlnb.experiments.profs.runs import DEGENERATE_RULE
from dmlnb.experiments.profs.tables import beats, metric_verdicts
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import (
    COLLAPSE_BAND,
    FAILS,
    HOLDS,
    NOT_TESTED,
    Verdict,
    count_line,
)
from dmlnb.runs import Run
from dmlnb.selection import protocol_column

__all__ = ["findings_markdown", "plateau_markdown"]

_WORDS = dict(enumerate("one two three four five six seven eight nine".split(), 1))


def _n(k: int) -> str:
    return _WORDS.get(k, str(k))


def _pts(x: float, digits: int = 2) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def _ev(v: Any) -> str:
    """A verdict's effect and interval in words."""
    e = v.evidence()
    return f"{e['effect']}, interval {e['90% interval']}".replace("-", "−")


def _set_aside(v: Verdict) -> str:
    """A verdict in words; one not tested because its runs were set aside says so, with its note
    (what was set aside: the sides, with their seeds)."""
    return f"{v}, set aside for {v.note}" if str(v) == NOT_TESTED and v.note else str(v)


def _at_test_epoch(f: Mapping, claim_id: str) -> str:
    """When claim ``claim_id``'s verdict changes between the protocols: its verdict at the
    test-selected epoch, in words; else nothing."""
    both = f["both_ways"]
    if both is None:
        return ""
    row = both[both["id"] == claim_id]
    if row.empty or not bool(row["verdict changes"].iloc[0]):
        return ""
    return f"; at the test-selected epoch: {row[protocol_column('verdict', 'test')].iloc[0]}"


def _opening(cfg: TrainConfig, settings: Mapping[str, Any], profile: str, f: Mapping) -> str:
    rows1, rows2 = table_rows(settings, 1), table_rows(settings, 2)
    paper = [j.verdict for j in f["judged"] if j.spec.origin == "paper"]
    ours = [j.verdict for j in f["judged"] if j.spec.origin == "ours"]
    holds = sum(str(v).startswith(HOLDS) for v in paper)
    head = (
        "none of the paper's claims holds"
        if not holds
        else f"{_n(holds)} of the paper's claims hold{'s' * (holds == 1)}"
    )
    soft = ""
    if "SoftTriple" in rows2:
        st = table2_config(cfg, "SoftTriple", settings)
        soft = f", Table 2 on SoftTriple with {st.epochs} epochs and {f['soft_steps']} projections"
    text = (
        f"At the {profile} profile ({cfg.dataset}, a width-{cfg.width} {cfg.model} "
        f"{'pretrained' if cfg.pretrained else 'from scratch'}, {cfg.epochs} epochs evaluated "
        f"every {cfg.eval_every} with the kept epoch chosen on the {cfg.select_on} classes, "
        f"$M = {f['M']}$, {f['steps'] / f['M']:.1f} projections per PROFS run, "
        f"{len(settings['seeds'])} seeds per variant; Table 1 on {' and '.join(rows1)}{soft}), "
        f"**{head}**: {count_line(paper)}. Of our own measurements: {count_line(ours)}."
    )
    both = f["both_ways"]
    if both is not None:
        changed = int(both["verdict changes"].sum())
        text += (
            f" {changed} of {len(both)} verdicts change between the validation- and the "
            "test-selected epoch."
        )
    return text + (
        f" Our absolute numbers ({cfg.dataset}) are not comparable with the paper's CUB-200-2011 "
        "numbers beside them; only the gains are compared."
    )


def stall_counts(frame: pd.DataFrame) -> str:
    """Per variant of a :func:`~dmlnb.experiments.profs.analyses.loss_plateau` ``frame``, how many
    of its runs end with the loss pinned at the margin, most first (``"PROFS-HNCM on 3 of 3
    seeds, PROFS on 1 of 3, plain on 0 of 3"``)."""
    per = frame.groupby("variant", sort=False)["loss pinned"].agg(["sum", "count"])
    per = per.sort_values("sum", ascending=False, kind="stable")
    return ", ".join(
        f"{v} on {int(r['sum'])} of {int(r['count'])}" + " seeds" * (k == 0)
        for k, (v, r) in enumerate(per.iterrows())
    )


def _plateau(cfg: TrainConfig, table1: Mapping[tuple[str, str], Sequence[Run]]) -> str | None:
    """The batch-hard triplet loss's stalls: which variants' runs stay on the loss plateau, and
    the comparisons, judged unless a run is degenerate (:data:`DEGENERATE_RULE`)."""
    sides = {v: table1[r, v] for r, v in table1 if r == "Triplet-Hard"}
    level = collapse_level("triplet-hard", cfg.embedding_dim)
    if not sides or level is None:
        return None
    frame = loss_plateau(sides, level=level)
    stuck = frame[frame["loss pinned"]]
    if stuck.empty:
        return None
    lowest = set(frame.nsmallest(len(stuck), "R@1 (kept epoch)").index) == set(stuck.index)
    lo, hi = stuck["R@1 (kept epoch)"].min(), stuck["R@1 (kept epoch)"].max()
    key = lambda v: ("Triplet-Hard", v)  # noqa: E731
    judged = [
        f"{a} > {b}: {_set_aside(v)} ({_ev(v)})"
        for a, b in (("PROFS", "plain"), ("PROFS-HNCM", "plain"), ("PROFS-HNCM", "PROFS"))
        if key(a) in table1 and key(b) in table1
        for v in [beats(table1, key(a), key(b))]
    ]
    aside = int(frame["set aside"].sum())
    return (
        f"* **Triplet-Hard stalls with PROFS: the loss stays on its plateau (the margin, within "
        f"{COLLAPSE_BAND:.1%}) to the last epoch for {stall_counts(frame)}.**"
        + (
            f" These runs have the {_n(len(stuck))} lowest R@1 of the {_n(len(frame))}"
            if lowest
            else " These runs reach"
        )  # fmt: skip
        + f" ({lo:.1f} to {hi:.1f}), yet their R@1 rose from "
        f"{_range(stuck['R@1 (first evaluation)'].tolist(), '{:.1f}', '–')} at the first "
        "evaluation: a pinned batch-hard loss means each anchor's hardest positive and negative "
        "are about equally far, not a collapsed embedding, so "
        + (
            "no run is set aside and the comparisons are judged: "
            if not aside
            else f"{_n(aside)} degenerate run{'s' * (aside > 1)} set aside and the others judged: "
        )
        + "; ".join(judged)
        + ". A stall of PROFS (and more of PROFS-HNCM) with the batch-hard triplet loss is a "
        "negative result for the paper at this scale; why it stalls was not investigated."
    )


def _still_on_plateau(f: Mapping) -> str:
    """When every Triplet-Hard run, plain too, is still on its loss plateau at the first
    evaluation: that, in a sentence (the convergence test reads R@1 there); else nothing."""
    runs = [r for (row, _), rs in f["sides"].items() if row == "Triplet-Hard" for r in rs]
    level = collapse_level("triplet-hard", f["config"].embedding_dim)
    if not runs or level is None:
        return ""
    first = [int(first_evaluation(r.record)["epoch"]) for r in runs]
    edge = level - COLLAPSE_BAND * abs(level)
    if not all(r.record.training_losses()[e - 1] >= edge for r, e in zip(runs, first)):
        return ""
    return (
        f" At the first evaluation (epoch {_range(first)}) every Triplet-Hard run, plain too, "
        "is still on its loss plateau, so Triplet-Hard's R@1 there says little about a rate."
    )


def _gains(f: Mapping) -> list[str]:
    """PROFS over every loss, HNCM further, and the convergence claim."""
    j, runs, rows = f["claims"], f["sides"], f["rows"]
    _, table = metric_verdicts(runs, "PROFS", "plain", f["metrics"], rows)
    per = []
    for row in rows:
        marks = [x[-2] for x in table.loc[row]]
        gain = 100 * (np.mean(r1(runs[row, "PROFS"])) - np.mean(r1(runs[row, "plain"])))
        per.append(
            f"{row}: {marks.count('+')} higher, {marks.count('-')} lower, {marks.count('=')} "
            f"inconclusive, {marks.count('x')} not tested of its {len(marks)} (loss, metric) "
            f"comparisons (R@1 {_pts(gain)} points)"
        )
    out = [
        f"* **PROFS improves every loss: {j['profs-improves-every-loss'].verdict}.** "
        + "; ".join(per)
        + "."
    ]
    hncm = [
        f"{row} {_pts(f['gains'].loc[row, 'HNCM gain over PROFS'], 1)} points "
        f"({f['gains'].loc[row, 'PROFS-HNCM > PROFS']})"
        for row in f["gains"].index
    ]
    out.append(
        f"* **HNCM boosts PROFS further: {_set_aside(j['hncm-boosts-profs'].verdict)}.** HNCM "
        "over PROFS, "
        "R@1 per loss of Tables 1-2: " + "; ".join(hncm) + "."
    )
    first = first_verdicts(runs, rows)
    conv = j["convergence-unchanged"].verdict
    out.append(
        f"* **Convergence rate unchanged: {conv}.** After the same steps (the first "
        "evaluation) PROFS against plain: "
        + "; ".join(f"{row} {_pts(100 * v.effect, 1)} points ({v})" for row, v in first.items())
        + "."
        + _still_on_plateau(f)
        + " The test compares one R@1 level after the same early steps, not a rate, and PROFS "
        "differs from plain there in its batches, its pair restriction and its proximal term at "
        "once."
        + "".join(
            f" Representative batches alone ({c.spec.text.split(':')[0]}, our measurement): "
            f"{_ev(c.verdict)}, {c.verdict}."
            for key, c in j.items()
            if key.startswith("reused-samples-")
        )
        + " The paper states the claim without numbers."
    )
    return out


def _measured(f: Mapping) -> list[str]:
    """SoftTriple, the component ablation and the costs."""
    j, out = f["claims"], []
    soft = j.get("softtriple-regularisation-measured") or j.get("softtriple-regularisation")
    if soft is not None:
        paper_steps = int(paper_projections()["steps"].min())
        out.append(
            f"* **SoftTriple with PROFS: {soft.verdict}** ({_ev(soft.verdict)}): its PROFS runs "
            "change the sampler as well as adding the proximal term, so they do not isolate the "
            "regularisation the paper credits. The paper's SoftTriple claim is "
            f"{j['softtriple-regularisation'].verdict}: {f['soft_steps']} projections per run "
            f"against the {paper_steps} of the paper's shortest SoftTriple run."
        )
    steps = [c for key, c in j.items() if key.startswith("components-")]
    if steps:
        lam = j["lambda-zero-overfits"]
        decided = [c for c in [*steps, lam] if str(c.verdict) in (HOLDS, FAILS)]
        out.append(
            (
                "* **The component ablation, each step against the one before:** "
                if decided
                else "* **No ingredient of PROFS is separated:** every step of the component "
                "ablation against the one before is inconclusive: "
            )
            + "; ".join(
                f"{c.spec.text.split(' [')[0]}: {c.verdict} ({_ev(c.verdict)}"
                f"{_at_test_epoch(f, c.spec.id)})"
                for c in steps
            )
            + f". The proximal term's step, judged as the paper's claim that lambda = 0 "
            f"over-fits: {lam.verdict} ({_ev(lam.verdict)}"
            + f"{_at_test_epoch(f, 'lambda-zero-overfits')})."
        )
    if "profs-step-time" in j:
        t = f["times"].groupby("variant", sort=False)["ms per step"].mean()
        share, pick = j["hncm-step-share"].verdict, f["pick_cost"]
        first, last = pick.iloc[0], pick.iloc[-1]
        extra = hncm_extra(f["times"])
        out.append(
            f"* **Cost, measured in one process:** plain {t['plain']:.1f} ms per step, PROFS "
            f'{t["PROFS"]:.1f}, PROFS-HNCM {t["PROFS-HNCM"]:.1f}. "PROFS adds no time to a step" '
            f'is {j["profs-step-time"].verdict} ({_ev(j["profs-step-time"].verdict)}); "our HNCM '
            f"adds at most the paper's share\": {share} ({_ev(share)}): it added "
            f"{_range(extra, '{:.1f}%')} of a step over the {_n(len(extra))} repeats. Our greedy "
            "HNCM pick of "
            f"{int(first['classes per batch'])} classes takes {first['HNCM ms']:.1f} ms against "
            f"{first['uniform ms']:.2f} ms for a uniform draw at L = {int(first['L'])}, and "
            f"{last['HNCM ms']:.1f} ms against {last['uniform ms']:.2f} ms at "
            f"L = {int(last['L'])}. "
            "The paper's own cost claims are not run here: a share of a step depends on the "
            "step's cost, this chapter times its own step rather than the paper's, and our HNCM "
            "is not the paper's O(L) scan."
        )
    return out


def _limits(cfg: TrainConfig, settings: Mapping[str, Any], f: Mapping) -> str:
    untested = [
        c.spec.text
        for c in f["judged"]
        if c.spec.origin == "paper" and str(c.verdict) == NOT_TESTED
    ]
    soft = loss_config("softtriple", table2_config(cfg, "SoftTriple", settings))
    size = cfg.dataset_options.get("image_size", "?")
    runs = [r for (row, _), rs in f["sides"].items() if row in f["rows"] for r in rs]
    last = [r for r in runs if r.record.best["epoch"] == r.record.evaluations()[-1]["epoch"]]
    still = (
        f" {_n(len(last)).capitalize()} of the {_n(len(runs))} runs of Table 1 keep their last "
        f"evaluation (epoch {_range([r.record.best['epoch'] for r in last])}): still improving "
        "when training stopped, so longer training could move their numbers."
        if last
        else ""
    )
    return (
        f"* **Not tested at this profile ({len(untested)}):** " + "; ".join(untested) + ".\n"
        f"* **What limits all of this:** another dataset ({size}-px {cfg.dataset}"
        f"{'' if is_augmented(cfg) else ', no augmentation'}), a "
        f"{cfg.model} {'pretrained' if cfg.pretrained else 'from scratch'}, "
        f"{cfg.embedding_dim}-d embeddings, a learning rate of {cfg.lr:g} (SoftTriple's centres "
        f"{soft.loss_lr:g}), {cfg.epochs} epochs instead of {PAPER_EPOCHS}, batch-hard mining "
        f"and $I = {cfg.m_per_class}$ for every loss (the deviations table)." + still
    )


def findings_markdown(
    config: TrainConfig,
    settings: Mapping[str, Any],
    profile: str,
    judged: Sequence[JudgedClaim],
    both_ways: pd.DataFrame | None,
    gains: pd.DataFrame,
    sides: Mapping[tuple[str, str], Sequence[Run]],
    ctx: Any,
    pick_cost: pd.DataFrame,
) -> str:
    """The chapter's findings in Markdown, from the judged claims (``judged``), the protocols'
    table (``both_ways``), the gains of Tables 1-2 (``gains``), their runs (``sides``), the
    claims' context (``ctx``: projections, step times) and HNCM's pick cost."""
    claims = {j.spec.id: j for j in judged}
    rows = [r for r in table_rows(settings, 1) if (r, "PROFS") in sides]
    f = dict(judged=judged, claims=claims, both_ways=both_ways, gains=gains, sides=sides,
             rows=rows, metrics=ctx.metrics, M=ctx.period, steps=ctx.steps,
             soft_steps=ctx.soft_steps, times=ctx.times, pick_cost=pick_cost,
             config=config)  # fmt: skip
    table1 = {k: v for k, v in sides.items() if k[0] in table_rows(settings, 1)}
    parts = [_opening(config, settings, profile, f), ""]
    plateau = _plateau(config, table1)
    parts += ([plateau] if plateau else []) + _gains(f) + _measured(f)
    parts.append(_limits(config, settings, f))
    return "\n".join(parts)


def _range(values: Sequence[float], fmt: str = "{:.0f}", sep: str = " to ") -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}{sep}{fmt.format(hi)}"


def plateau_markdown(frame: pd.DataFrame, level: float) -> str:
    """What the Triplet-Hard runs' plateau table (``frame``,
    :func:`~dmlnb.experiments.profs.analyses.loss_plateau` at the margin ``level``) shows, in
    Markdown: which runs left the plateau and when, which stayed, how their R@1 moved and which
    (degenerate by :data:`DEGENERATE_RULE`) are set aside."""
    stuck, left = frame[frame["loss pinned"]], frame[~frame["loss pinned"]]
    out = []
    for v, group in left.groupby("variant", sort=False):
        k = len(group)
        who = f"every {v} run" if k == (frame["variant"] == v).sum() else f"{_n(k)} {v} run"
        out.append(
            f"{who}{'s' * (k > 1 and not who.startswith('every'))} left the plateau after "
            f"{_range(group['last epoch on it'].tolist())} epochs"
        )
    text = "; ".join(out) + "."
    text = text[0].upper() + text[1:]
    rule = f"\n\nThe chapter's criterion: {DEGENERATE_RULE}."
    if stuck.empty:
        return text + " No run ends with its loss pinned at the margin." + rule
    lowest = set(frame.nsmallest(len(stuck), "R@1 (kept epoch)").index) == set(stuck.index)
    r1 = stuck["R@1 (kept epoch)"].tolist()
    first = stuck["R@1 (first evaluation)"].tolist()
    kept = sorted(set(stuck["kept epoch"]))
    at_end = all(stuck["kept epoch"] == stuck["epochs"])
    aside = stuck[stuck["set aside"]]
    text += (
        f" {_n(len(stuck)).capitalize()} run{'s' * (len(stuck) > 1)} ("
        + ", ".join(f"{r.variant} seed {r.seed}" for r in stuck.itertuples())
        + f") stayed on it for all {int(stuck['epochs'].max())} epochs"
        + (f" and have the {_n(len(stuck))} lowest R@1 of the {_n(len(frame))}" if lowest else "")
        + f" ({_range(r1, '{:.1f}')}): the loss stalls on {stall_counts(frame)}. Why was not "
        "investigated."
        + rule
        + f"\n\nThese runs' R@1 rose from {_range(first, '{:.1f}', '–')} at the first evaluation "
        f"to {_range(r1, '{:.1f}', '–')} at the kept epoch (epoch {_range(kept)}"
        + (", the last evaluated: still rising when training stopped" if at_end else "")
        + "): the embedding learns while the batch-hard loss sits at the margin (each anchor's "
        "hardest positive and hardest negative about equally far). "
        + (
            "No run is degenerate, so every Triplet-Hard comparison is judged (the comparisons "
            "table above): the stall is a finding about PROFS with this loss, not a reason to "
            "set its comparisons aside."
            if aside.empty
            else "Degenerate, so set aside (their comparisons *not tested at this scale*, the "
            "effect kept beside the verdict): "
            + ", ".join(f"{r.variant} seed {r.seed}" for r in aside.itertuples())
            + "; the others are judged."
        )
    )
    return text
