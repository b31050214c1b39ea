"""The chapter's sentences computed from its results: what the claims table says in words
(:func:`reading`) and the paragraphs whose numbers come from the runs (printed as Markdown)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dmlnb.chapter import BeatsEvery, Custom, JudgedClaim
from dmlnb.experiments.facility_location.claims import Lemma1, Lemma1Updates, LinearTime
from dmlnb.experiments.facility_location.diagnostics import scaling_slopes
from dmlnb.experiments.facility_location.lemma1 import normalised
from dmlnb.experiments.facility_location.presets import (
    PAPER_SOP_TEST,
    Study,
    composition,
    make_study,
)
from dmlnb.experiments.facility_location.protocols import PROTOCOLS, category_changes
from dmlnb.experiments.facility_location.spec import READER_NAMES, ROW_NAMES
from dmlnb.experiments.facility_location.toy import MERGE_DEGREES, TOY_GAMMA, toy_points
from dmlnb.reporting import (
    CONFIDENCE,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    ORDER_HALF_WIDTH,
    QUALIFIED_HOLDS,
    Claim,
    count_line,
    format_mean_std,
    summarize_runs,
    verdict_category,
)

__all__ = [
    "constants",
    "synthesis",
    "reading",
    "toy_paragraph",
    "pairs_paragraph",
    "protocol_sentence",
    "versus_sentence",
    "lemma1_sentence",
    "design_sentence",
]


def constants(study: Study, splits: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The numbers the chapter's prose states, for myst-nb ``glue``: the paper's (its margin
    decay, the class ratios of its tables, read from the paper profile, which follows it; SOP's
    test images per class and classes, :data:`~.presets.PAPER_SOP_TEST`), the study's (the
    initial margin multiplier, the first table's batch and, from its loaded ``splits`` (table ->
    splits) or else its configuration, the side of its images), the toy's (its points, its gamma,
    the merge threshold) and the rule's (the one-sided confidence, the interval shown, the
    half-width of an order band)."""
    paper = make_study("paper")
    ratios = {t.table: t.class_ratio for t in paper.tables}
    t1 = study.tables[0]
    if splits and t1.table in splits:
        size = int(splits[t1.table].train[0][0].shape[-1])
    else:
        size = t1.config.dataset_options.get("image_size")
    return {
        "paper_decay": f"{paper.decay_rate:g}",
        "paper_ratio_cub": f"{ratios['Table 1']:g}",
        "paper_ratio_sop": f"{ratios['Table 3']:g}",
        "paper_sop_per_class": f"{round(PAPER_SOP_TEST[0] / PAPER_SOP_TEST[1])}",
        "paper_sop_test_classes": f"{PAPER_SOP_TEST[1]:,}",
        "gamma0": f"{study.gamma:g}",
        "decay": f"{study.decay_rate:g}",
        "batch": str(t1.config.batch_size),
        "image_size": f"{size} × {size}" if size else "full-size",
        "toy_points": str(len(toy_points()[1])),
        "toy_gamma": f"{TOY_GAMMA:g}",
        "merge_degrees": f"{MERGE_DEGREES:g}°",
        "confidence": f"{CONFIDENCE:.0%}",
        "interval": f"{1 - 2 * (1 - CONFIDENCE):.0%}",
        "half_width": f"{ORDER_HALF_WIDTH:g}",
    }


def _and(items: Sequence[str]) -> str:
    items = list(items)
    if not items:
        return "none"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


#: The comparison table's rows (the paper's row names) by the names the prose uses.
_READER = {ROW_NAMES[m]: READER_NAMES[m] for m in ROW_NAMES}


def _tables_said(judged: Sequence[JudgedClaim], pairs: pd.DataFrame) -> str:
    """The tables' claims by category, each named by its table and metric; for those that do
    not hold, the baselines ahead of the clustering loss (from ``pairs``,
    :func:`~dmlnb.experiments.facility_location.tables.comparison_table`, paired as the claims)."""
    by: dict[str, list[str]] = {}
    for j in judged:
        t = j.spec.test
        if not isinstance(t, BeatsEvery):
            continue
        name = f"{t.better.group} {t.metric}"
        if verdict_category(j.verdict) == FAILS and len(pairs):
            ahead = pairs[
                (pairs["table"] == t.better.group)
                & (pairs["metric"] == t.metric)
                & (pairs["verdict"] == FAILS)
            ]
            said = [f"{_READER[r.worse]} ahead, effect {r.effect}" for r in ahead.itertuples()]
            name += f" ({_and(said)})"
        by.setdefault(verdict_category(j.verdict), []).append(name)
    if not by:
        return ""
    held = len(by.get(HOLDS, []))
    return (
        f"Of the {sum(map(len, by.values()))} claims of the tables' analogues (the clustering "
        f"loss above all three baselines, per table and metric, paired by seed), {held} "
        f"{'holds' if held == 1 else 'hold'} as stated; "
        + "; ".join(
            f"{k}: {_and(by[k])}"
            for k in (HOLDS, QUALIFIED_HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED)
            if by.get(k)
        )
        + "."
    )


def _method_said(j: JudgedClaim) -> str:
    """Lemma 1 per pass, our per-update measurement, or Algorithm 1's timing exponents, from the
    claim's judge."""
    judge = j.spec.test.judge if isinstance(j.spec.test, Custom) else None
    verdict = j.verdict.split(":")[0]
    if isinstance(judge, Lemma1) and len(judge.traced):
        t = normalised(judge.traced)
        return (
            f"Lemma 1 as the paper states it (over the passes, L2-normalised embeddings) {verdict}:"
            f" {int(t['passes ending below their start'].sum())} of {int(t['passes'].sum())} "
            "traced passes end below their start."
        )
    if isinstance(judge, Lemma1Updates) and len(judge.traced):
        t = judge.traced
        low = int(t["updates lowering A"].sum())
        return (
            f"Our stricter reading, that every single update raises A, {verdict}: {low} of the "
            f"{int(t['updates'].sum())} traced updates {'lowers' if low == 1 else 'lower'} A "
            "(on the unnormalised 2-D counterexample of our search; none on the normalised "
            "batches)."
            if low
            else f"Our stricter reading, that every single update raises A, {verdict}."
        )
    if isinstance(judge, LinearTime):
        slopes = scaling_slopes(judge.scaling)
        return (
            f"Algorithm 1 as listed, measured {judge.scaling.attrs.get('made', 'here')} (the "
            f"stored measurement, reloaded), grows with the batch size at exponents "
            f"{min(slopes):.2f}-{max(slopes):.2f} (one per repeat), so 'linear in the batch "
            f"size' {verdict} ({j.verdict.note})."
        )
    return ""


def synthesis(
    judged: Sequence[JudgedClaim], both: pd.DataFrame | None, pairs: pd.DataFrame, shown: str
) -> str:
    """The chapter's outcome as a paragraph, from the judged claims (nothing typed): how many
    claims hold as stated, the tables' claims (``pairs``: the comparisons behind them), Lemma 1's
    passes, Algorithm 1's timing exponents and the verdicts whose category the other two
    protocols change (``both``: :func:`~.protocols.protocol_verdicts`)."""
    cats = [verdict_category(j.verdict) for j in judged]
    n = {k: cats.count(k) for k in (HOLDS, QUALIFIED_HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED)}
    qualified = [
        f"{j.spec.text.split(' (in the toy')[0]} ({j.verdict})"
        for j in judged
        if verdict_category(j.verdict) == QUALIFIED_HOLDS
    ]
    out = [
        f"With every run at its {shown}, {n[HOLDS]} of the {len(judged)} claims "
        f"{'holds' if n[HOLDS] == 1 else 'hold'} as stated and {n[QUALIFIED_HOLDS]} "
        f"{'holds' if n[QUALIFIED_HOLDS] == 1 else 'hold'} only with a qualification"
        + (f" ({'; '.join(qualified)})" if qualified else "")
        + f"; {n[FAILS]} do not hold, {n[INCONCLUSIVE]} are inconclusive and {n[NOT_TESTED]} "
        "are not tested at this scale.",
        _tables_said(judged, pairs),
        *(_method_said(j) for j in judged),
        *_protocols(both, shown),
    ]
    return " ".join(x for x in out if x)


def _verdicts(claims: Sequence[Claim], profile: str) -> list[str]:
    """Every claim with its verdict, the counts, and the claims of each kind of verdict."""
    lines, by_verdict = [], {}
    for c in claims:
        note = f" ({c.verdict.note})" if c.verdict.note else ""
        lines.append(f"- {c.claim}: {c.verdict}{note}.")
        by_verdict.setdefault(verdict_category(c.verdict), []).append(c.claim)
    lines.append(
        f"\n{count_line(c.verdict for c in claims)} (of {len(claims)} claims, profile {profile})."
    )
    for k in (QUALIFIED_HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED):
        if by_verdict.get(k):
            lines.append(f"{k[0].upper() + k[1:]}: " + "; ".join(by_verdict[k]) + ".")
    return lines


def _protocols(both: pd.DataFrame | None, shown: str) -> list[str]:
    """The claims whose category changes with the test-selected epoch (the optimistic protocol
    of other papers) and with the last epoch (this paper's protocol)."""
    if both is None:
        return []
    said = []
    for basis, what in (
        ("last", "at the last epoch (this paper's protocol: a fixed number of iterations)"),
        ("test", "at the best epoch on the test classes (the optimistic protocol of other papers)"),
    ):
        changed = category_changes(both, basis)
        listed = "; ".join(
            f"{r['claim']}: {r[PROTOCOLS['validation']]} -> {r[PROTOCOLS[basis]]}"
            for r in changed.to_dict("records")
        )
        n = len(changed)
        said.append(
            f"{what}, {n} verdict{'' if n == 1 else 's'} change{'s' if n == 1 else ''} category"
            + (f" ({listed})" if n else "")
        )
    return [f"Claims judged with every run at its {shown}; " + "; ".join(said) + "."]


def reading(
    claims: Sequence[Claim],
    both: pd.DataFrame | None,
    pairs: pd.DataFrame,
    pam: pd.DataFrame,
    toy: pd.DataFrame,
    shown: str,
    profile: str,
) -> str:
    """The outcome in words: every verdict, the baselines ahead of the clustering loss, the
    verdicts that change with the protocol, what Algorithm 2 added, Figures 2 and 3 in the toy."""
    lines = _verdicts(claims, profile)
    ahead = pairs[pairs["verdict"] == FAILS]
    if len(ahead):
        lines.append(
            "Baselines ahead of the clustering loss by the rule: "
            + "; ".join(f"{r.table} {r.metric}: {r.worse} ({r.effect})" for r in ahead.itertuples())
            + "."
        )
    lines += _protocols(both, shown)
    if len(pam):
        lines.append(
            "Algorithm 2 ended strictly above the greedy set at "
            + "; ".join(
                f"{r['table']} (gamma {r['gamma']:g}, refinement '{r['refinement']}'): "
                f"{r['PAM above greedy']:.0%} of {r['steps']} logged steps, below it at "
                f"{r['ended below greedy']}"
                for r in pam.to_dict("records")
            )
            + "."
        )
    fig2: dict[str, list[str]] = {}
    for c in claims:
        if c.claim.startswith("Figure 2"):
            name = c.claim.split("-- ")[1].split(" (")[0]
            fig2.setdefault(verdict_category(c.verdict), []).append(name)
    if fig2:
        lines.append(
            "Figure 2 (in its layout a local loss cannot merge a split class), per paper local "
            "loss on the toy: " + "; ".join(f"{k}: {_and(v)}" for k, v in fig2.items()) + "."
        )
    merged = (
        toy[toy["loss"] != "before"].groupby("loss", sort=False)["merged"].agg(["sum", "count"])
    )
    lines.append(
        "In the 2-D toy the split class was merged by: "
        + ", ".join(
            f"{n} ({int(r['sum'])} of {int(r['count'])} seeds)" for n, r in merged.iterrows()
        )
        + "."
    )
    return "\n".join(lines)


def toy_paragraph(frame: pd.DataFrame) -> str:
    """What each loss did to the toy's split class (mean ± std of the angle over the seeds)."""
    per = {n: f.to_dict("records") for n, f in frame.groupby("loss", sort=False) if n != "before"}
    gaps = format_mean_std(summarize_runs(per, ["gap_degrees"]), scale=1.0, digits=2)
    merged = [
        n for n, f in frame.groupby("loss", sort=False) if n != "before" and f["merged"].all()
    ]
    apart = [n for n in per if n not in merged]
    seeds = frame["seed"].nunique()
    out = []
    if merged:
        out.append(
            f"In the toy, {_and(merged)} merge the split class at all {seeds} seeds (the class-0 "
            f"groups end {_and([gaps.loc[n, 'gap_degrees'] + '°' for n in merged])} apart)"
        )
    for n in apart:
        zero = bool((frame[frame["loss"] == n]["max_loss"] == 0).all())
        out.append(
            f"{n} leaves it {gaps.loc[n, 'gap_degrees']}° apart"
            + (", where it started, because its loss is 0 at every step" if zero else "")
        )
    return "; ".join(out) + "."


def pairs_paragraph(pairs: pd.DataFrame, shown: str) -> str:
    """The pairs behind the tables' claims in words: where the clustering loss is ahead, where a
    baseline is ahead (effect and interval), the rest inconclusive."""
    ahead = pairs[pairs["verdict"] == HOLDS]
    behind = pairs[pairs["verdict"] == FAILS]
    parts = []
    for worse, f in ahead.groupby("worse", sort=False):
        on = [
            f"{_and(g['metric'].tolist())} of {table}"
            for table, g in f.groupby("table", sort=False)
        ]
        parts.append(f"the clustering loss is ahead of {worse} on " + " and on ".join(on))
    for worse, f in behind.groupby("worse", sort=False):
        on = [
            f"{r['table']}'s {r['metric']} ({r['effect']} {r['90% interval']})"
            for r in f.to_dict("records")
        ]
        parts.append(f"{worse} is ahead of the clustering loss on {_and(on)}")
    rest = "every other pair is inconclusive" if len(ahead) + len(behind) < len(pairs) else ""
    return (
        f"Per pair, with every run at its {shown}: "
        + "; ".join([*parts, rest] if rest else parts)
        + "."
    )


def protocol_sentence(frames: Sequence[pd.DataFrame]) -> str:
    """How many verdicts of the both-protocol tables change."""
    changed = sum(int((f["category changes"] == "yes").sum()) for f in frames)
    return (
        f"In the {len(frames)} tables above no verdict changes category between the two "
        "protocols (these comparisons are unpaired; the claims below are paired by seed and "
        "judged at the last epoch too)."
        if not changed
        else f"In the {len(frames)} tables above {changed} verdict(s) change category between "
        "the two protocols (these comparisons are unpaired; the claims below are paired by seed)."
    )


def versus_sentence(frame: pd.DataFrame, subject: str) -> str:
    """A :func:`~dmlnb.experiments.facility_location.tables.variant_comparison` frame in words:
    ``"<subject> is inconclusive on NMI (+1.2 pts [-0.3, +2.7]) and on R@1 (...)"``."""
    parts = [
        f"{r['verdict']} on {r['metric']} ({r['effect']} {r['90% interval']})"
        for r in frame.to_dict("records")
    ]
    runs = frame["runs per side"].iloc[0] if len(frame) else "—"
    return f"{subject[:1].upper() + subject[1:]}: {_and(parts)}; runs per side {runs}."


def lemma1_sentence(table: pd.DataFrame, pam: pd.DataFrame) -> str:
    """The logged steps below the greedy start per form, and Lemma 1's trace by kind of batch
    (:func:`~dmlnb.experiments.facility_location.lemma1.lemma1_table`)."""
    steps = "; ".join(
        f"refinement '{r['refinement']}': {r['ended below greedy']} of {r['steps']} logged steps "
        "ended below the greedy start"
        for r in pam.to_dict("records")
    )
    traced = "; ".join(
        f"{r['batches']} ({r['count']} batch(es) of {r['points']} points): "
        f"{r['updates lowering A']} of {r['updates']} updates lower A"
        + (f", by up to {r['largest fall of A']:.3g}" if r["updates lowering A"] else "")
        + f", {r['passes ending below their start']} of {r['passes']} passes end below their start"
        for r in table.to_dict("records")
    )
    return (steps + ". " if steps else "") + "Lemma 1 traced: " + traced + "."


def design_sentence(study: Study, splits: Mapping[str, Any]) -> str:
    """The default-profile design in numbers, from the configuration and the data: the batch of
    the first table, the held-out validation classes, and what the Table 3 analogue copies."""
    if not study.tables or study.tables[0].table not in splits:
        return "The datasets are loaded per table below."
    t1, s = study.tables[0], splits[study.tables[0].table]
    per_class = t1.config.batch_size // t1.classes_per_batch
    out = [
        f"Table 1's analogue trains on batches of {t1.config.batch_size} with C/m = "
        f"{t1.class_ratio:g} ({t1.classes_per_batch} classes × {per_class} images)"
    ]
    if s.validation is not None:
        total = s.validation.num_classes + s.train.num_classes
        out.append(f"{s.validation.num_classes} of its {total} training classes are held out as "
                   "validation classes")  # fmt: skip
    test, n = s.test, len(s.test)
    same = n // test.num_classes - 1
    for t in study.tables[1:]:
        if t.config.dataset == t1.config.dataset:
            out.append(
                f"{t.table}'s analogue has the same test set ({test.num_classes} classes × "
                f"{n // test.num_classes} images) with C/m = {t.class_ratio:g} "
                f"({composition(t)} per batch) and Recall@{'/'.join(map(str, t.config.eval_ks))}; "
                f"with {same} same-class items per query among {n - 1}, "
                f"Recall@{max(t.config.eval_ks)} can reach its ceiling"
            )
    return "; ".join(out) + "."
