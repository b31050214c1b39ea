"""The SSDML chapter's generated prose: the search's part of the baseline comparisons and the
list that reads the judged claims (every number in it computed from the claims and the runs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dmlnb.chapter import JudgedClaim, RunSet
from dmlnb.experiments.ssdml.analyses import over_initial, selection_gain
from dmlnb.experiments.ssdml.judges import fmt, initial_selection_bias, per_seed
from dmlnb.experiments.ssdml.network import build_objective
from dmlnb.experiments.ssdml.settings import NAMES, SEMI_SUPERVISED, Setting
from dmlnb.experiments.ssdml.spec import initial_of
from dmlnb.experiments.ssdml.training import by_method
from dmlnb.reporting import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTED,
    QUALIFIED_HOLDS,
    paired_differences,
    verdict_counts,
)

__all__ = ["comparison_sentence", "claims_summary", "purity_sentence", "conclusion_numbers"]


def _searched(
    setting: Setting, chosen: Mapping[str, Mapping[str, Any]], methods: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Which of ``methods`` took a value chosen on the validation classes (and whether it is their
    value without the search), and the methods the search left as they would be without it."""
    parts, untouched = [], []
    for m in methods:
        if m not in chosen:
            untouched.append(m)
            continue
        default = build_objective(m, setting, setting.metric_dim)
        same = all(float(getattr(default, name)) == float(v) for name, v in chosen[m].items())
        values = ", ".join(f"{name} = {float(v):g}" for name, v in chosen[m].items())
        parts.append(f"{NAMES[m]} {values}" + (" (its value without the search)" if same else ""))
        if same:
            untouched.append(m)
    return parts, untouched


def comparison_sentence(
    runs: RunSet,
    settings: Mapping[str, Setting],
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]],
    metric: str = "R@1",
) -> str:
    """Per setting, ours and each baseline of the two group claims (the deep SSDML baselines,
    the supervised-only ones): ``metric`` mean ± std and the pair's verdict
    (:func:`~dmlnb.reporting.paired_differences` by seed, as the claims judge each pair); where
    the setting ran a search, the values chosen on the validation classes and which pairs that
    do not hold are against a baseline the search left as it was. One line per (setting, group)."""
    out = []
    for key, st in settings.items():
        groups = by_method(runs, key)
        if "ours" not in groups:
            continue
        ours = per_seed(groups["ours"], metric)
        for what, methods in (
            ("deep SSDML baselines", SEMI_SUPERVISED),
            ("supervised-only", ("triplet", "angular")),
        ):
            methods = [m for m in methods if m in groups]
            if not methods:
                continue
            pairs = {m: paired_differences(ours, per_seed(groups[m], metric)) for m in methods}
            line = f"{st.name}, {what} ({metric}): ours {fmt(ours)}; " + ", ".join(
                f"{NAMES[m]} {fmt(per_seed(groups[m], metric))} ({v})" for m, v in pairs.items()
            )
            parts, untouched = _searched(st, hyper.get(key, {}), methods)
            if parts:
                failing = [NAMES[m] for m in untouched if str(pairs[m]).startswith("does not hold")]
                line += (
                    "; searched on the validation classes (1 seed per value; the chosen value's "
                    "first seed is the search's winning run): "
                    + ", ".join(parts)
                    + (
                        "; pairs that do not hold against a baseline the search left as it was: "
                        + ", ".join(failing)
                        if failing
                        else "; every pair that does not hold is against a searched value"
                    )
                )
            out.append(line)
    return "\n".join(out)


def _ev(j: JudgedClaim) -> str:
    e = j.verdict.evidence()
    return f"{e['effect']}, 90% interval {e['90% interval']}" + (
        f"; {j.verdict.note}" if j.verdict.note else ""
    )


def _protocols(runs: RunSet, settings: Mapping[str, Setting]) -> dict[str, str]:
    return {
        key: f"{st.name} ("
        + (
            "validation-selected"
            if runs.run(key, "ours", st.seeds[0]).record.selected_on == "validation"
            else "test-selected"
        )
        + ")"
        for key, st in settings.items()
    }


def _initial_lines(
    judged: Sequence[JudgedClaim],
    runs: RunSet,
    settings: Mapping[str, Setting],
    alpha: tuple[Mapping[float, Sequence[Any]], str],
) -> list[str]:
    """The initialisation claims, every method and every angle of the α grid (``alpha``: its runs
    by angle and its setting's key) against its network at initialisation."""
    alpha_runs, alpha_key = alpha
    where = _protocols(runs, settings)
    init = [j for j in judged if j.spec.id.endswith("-over-initial")]
    name = {j.spec.id: where[j.spec.id.removesuffix("-over-initial")] for j in init}
    learned = [name[j.spec.id] for j in init if j.verdict == "holds"]
    worse = [name[j.spec.id] for j in init if str(j.verdict).startswith("does not hold")]
    lines = [
        "At the setting's α, the proposed method improves on its network at initialisation (R@1 "
        f"and NMI) on {', '.join(learned) if learned else 'no setting'} under the rule. "
        + " ".join(f"{name[j.spec.id]}: **{j.verdict}** ({_ev(j)}); {j.evidence}." for j in init)
        + (
            f" On {', '.join(worse)} it is below its initial network in at least one metric."
            if worse
            else ""
        )
    ]
    every = {
        where[k]: over_initial(
            {NAMES[m]: rs for m, rs in by_method(runs, k).items()},
            biased=initial_selection_bias(settings[k]),
        )
        for k in settings
    }
    lines.append(
        "Every method against the same initial network (R@1 of its selected evaluation against "
        "the same runs at initialisation, by the rule): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{m} {v} ({v.evidence()['effect']})" for m, v in vs.items())
            for name, vs in every.items()
        )
        + ". A test-selected run's epoch is its best test evaluation, which favours this "
        "comparison, so there, where the selection moved the value (selected ≠ last "
        "evaluation), the rule lets it be at most inconclusive "
        "(`dmlnb.reporting.biased_toward_claim`)."
    )
    by_alpha = over_initial(
        {f"{a:g}°": rs for a, rs in alpha_runs.items()},
        biased=initial_selection_bias(settings[alpha_key]),
    )
    top = max(by_alpha, key=lambda a: by_alpha[a].effect)
    lines.append(
        f"Ours at each angle of the α grid against its initial network ({where[alpha_key]}, R@1): "
        + ", ".join(
            f"{a} **{v}** ({v.evidence()['effect']}, 90% interval {v.evidence()['90% interval']})"
            for a, v in by_alpha.items()
        )
        + f". The angle with the largest gain, {top}, is picked here after seeing the test "
        "results (there is no validation split), so it is not a tuned setting."
    )
    return lines


def _selection_line(runs: RunSet, settings: Mapping[str, Setting]) -> str:
    where = _protocols(runs, settings)
    gain = selection_gain({k: {"ours": by_method(runs, k)["ours"]} for k in settings}, settings)
    sel, over = gain["selected − mean of evaluations R@1"], gain["selected − initial R@1"]
    key_of = {st.name: k for k, st in settings.items()}
    return (
        "Keeping each run's selected evaluation adds, for ours, "
        + "; ".join(
            f"{where[key_of[n[0]]]}: {s:+.1f} pts R@1 over the mean of its evaluations "
            f"(ours over initialisation: {o:+.1f} pts)"
            for n, s, o in zip(gain.index, sel, over)
        )
        + (
            ": on every setting the selection alone adds at least as much as ours gains over its "
            "initial network."
            if bool((sel >= over).all())
            else "."
        )
    )


#: The families of claims the summary reads, by the id's ending, with their heading.
_FAMILIES = (
    ("-beats-baselines", "Against the deep SSDML baselines (R@1)"),
    ("-beats-baselines-other-metrics", "Against the deep SSDML baselines (NMI, R@2-8)"),
    ("-unlabelled-data-helps", "Against supervised-only training on the labelled part"),
    ("-effective-rank", "Ours, not the paper's: the effective rank of Lᵀz with an orthogonal L"),
    ("-orthogonality-every-metric", "Orthogonality and every retrieval / clustering metric"),
)


def claims_summary(
    judged: Sequence[JudgedClaim],
    runs: RunSet,
    settings: Mapping[str, Setting],
    alpha_runs: Mapping[float, Sequence[Any]],
    alpha_key: str,
) -> str:
    """The Markdown list that reads the judged claims: the initialisation claims with every
    method and every angle against its initial network, what the selection adds, then each
    family of claims per setting and the untested claims."""
    where = _protocols(runs, settings)
    lines = _initial_lines(judged, runs, settings, (alpha_runs, alpha_key))
    lines.append(_selection_line(runs, settings))
    tested = [j for j in judged if str(j.verdict) != NOT_TESTED]
    for end, what in _FAMILIES:
        fam = [j for j in tested if j.spec.id.endswith(end)]
        if fam:
            lines.append(
                f"{what}: "
                + "; ".join(
                    f"{where[j.spec.id.removesuffix(end)]} **{j.verdict}** ({_ev(j)})" for j in fam
                )
                + "."
            )
    alpha = [j for j in tested if j.spec.id == "alpha-stable"]
    if alpha:
        lines.append(
            f"α over the paper's range ({settings[alpha_key].name}): "
            + "; ".join(f"**{j.verdict}** ({_ev(j)})" for j in alpha)
            + "."
        )
    stored = [j for j in tested if j.spec.id in ("objective-decreases", "cheaper-than-baselines")]
    if stored:
        lines.append(
            "On what every run stores: "
            + "; ".join(f"{j.spec.text}: **{j.verdict}** ({_ev(j)})" for j in stored)
            + "."
        )
    untested = [j for j in judged if str(j.verdict) == NOT_TESTED]
    lines.append(
        f"{len(untested)} claims are not tested at this scale: "
        + "; ".join(f"{j.spec.text} ({j.verdict.note})" for j in untested)
        + "."
    )
    return "\n".join(f"- {line}" for line in lines)


def purity_sentence(diagnosed: pd.DataFrame) -> str:
    """The share of ours' mined positives and negatives of the anchor's class during training, per
    setting, against the chance levels (:func:`~dmlnb.experiments.ssdml.analyses.diagnosis`)."""
    pos, neg = (
        "mined positives of the anchor's class (%)",
        "mined negatives of the anchor's class (%)",
    )
    rates = ", ".join(
        f"{row[pos]:.1f}% and {row[neg]:.1f}% on {name}" for name, row in diagnosed.iterrows()
    )
    chance = " and ".join(f"{c:.1f}%" for c in diagnosed["chance level (%)"])
    return (
        "During training, ours' mined positives and negatives are of the anchor's class at similar "
        f"rates (not tested): {rates}, against chance levels of {chance}."
    )


def conclusion_numbers(
    judged: Sequence[JudgedClaim],
    runs: RunSet,
    settings: Mapping[str, Setting],
    alpha_runs: Mapping[float, Sequence[Any]],
) -> dict[str, str]:
    """The numbers the chapter's conclusions quote, by the name the Markdown glues them under
    (``{glue:md}`name```): per setting ``<key>_r1_ours``, ``<key>_r1_init``, ``<key>_nmi_ours``,
    ``<key>_nmi_init`` (mean ± std), ``<key>_<method>_over_init`` (R@1 against the same runs at
    initialisation, paired), ``<key>_<method>_r1`` (mean ± std) and ``<key>_selection_gain``; the α
    grid's ``alpha_top`` and ``alpha_top_gain``; the claims' ``n_claims`` and ``n_<category>``."""
    out: dict[str, str] = {}
    tag = {"ours": "ours", "ours-noorth": "noorth", "ours-outside": "outside", "triplet": "triplet"}
    for key, st in settings.items():
        groups = by_method(runs, key)
        ours = groups["ours"]
        for m, short in (("R@1", "r1"), ("NMI", "nmi")):
            out[f"{key}_{short}_ours"] = fmt(per_seed(ours, m))
            if all(initial_of(r) is not None for r in ours):
                out[f"{key}_{short}_init"] = fmt([float(initial_of(r)[m]) for r in ours])
        every = over_initial(
            {m: rs for m, rs in groups.items() if m in tag},
            biased=initial_selection_bias(st),
        )
        for m, v in every.items():
            out[f"{key}_{tag[m]}_over_init"] = v.evidence()["effect"]
            out[f"{key}_{tag[m]}_r1"] = fmt(per_seed(groups[m], "R@1"))
    gain = selection_gain({k: {"ours": by_method(runs, k)["ours"]} for k in settings}, settings)
    key_of = {st.name: k for k, st in settings.items()}
    for (name, _), s in gain["selected − mean of evaluations R@1"].items():
        out[f"{key_of[name]}_selection_gain"] = f"{s:+.1f}"
    by_alpha = over_initial({f"{a:g}°": rs for a, rs in alpha_runs.items()})
    top = max(by_alpha, key=lambda a: by_alpha[a].effect)
    out.update(alpha_top=top, alpha_top_gain=by_alpha[top].evidence()["effect"])
    counts = verdict_counts(j.verdict for j in judged)
    out["n_claims"] = str(len(judged))
    for category in (HOLDS, QUALIFIED_HOLDS, FAILS, INCONCLUSIVE, NOT_TESTED):  # 0 included
        name = category.replace(" ", "_").replace("(", "").replace(")", "")
        out[f"n_{name}"] = str(counts.get(category, 0))
    return out
