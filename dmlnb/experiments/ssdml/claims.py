"""The SSDML chapter: claims."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.experiments.ssdml.network import build_objective
from dmlnb.experiments.ssdml.reported import (
    M5,
    REPORTED,
    REPORTED_CONVERGENCE_EPOCHS,
    alpha_margin,
    reported_best,
    reported_leader_sentence,
    reported_orthogonality_drops,
    reported_over_initial,
)
from dmlnb.experiments.ssdml.settings import NAMES, SEMI_SUPERVISED, Setting
from dmlnb.experiments.ssdml.spec import initial_of
from dmlnb.reporting import (
    HOLDS,
    Claim,
    Verdict,
    all_of,
    biased_toward_claim,
    compare,
    every_pair_equivalent,
    group_verdict,
    not_tested,
    paired_differences,
    qualify,
)
from dmlnb.runs import Run as MethodRun
from dmlnb.selection import COLUMN_LABELS, both_ways_verdicts

# --------------------------------------------------------------------------- claims


def per_seed(rs: Sequence[Any], metric: str) -> list[float]:
    return [float(r.metrics[metric]) for r in rs]


def _fmt(vals: Sequence[float], scale: float = 100.0) -> str:
    if not len(vals):
        return "—"
    return f"{scale * np.mean(vals):.1f}" + (
        f" ± {scale * np.std(vals, ddof=1):.1f}" if len(vals) > 1 else ""
    )


def _untested(settings: Mapping[str, Setting]) -> list[Claim]:
    """The claims this chapter cannot test, with the reason computed from the settings."""
    runs_here = "; ".join(
        f"{st.name}: {st.config['epochs']} epochs in "
        f"{-(-st.config['epochs'] // st.epochs_per_partition)} partitions"
        for st in settings.values()
    )
    t3 = REPORTED["table3"]
    return [
        Claim(
            "The objective decreases steadily during training (Fig. 2 left)",
            f"Fig. 2 (left, Cars-196): the loss over the first {REPORTED_CONVERGENCE_EPOCHS} "
            "epochs, whole training set",
            "loss per epoch plotted (Figure 2, left, reproduced)",
            not_tested(
                f"{runs_here}, triplets re-mined per partition, against "
                f"{REPORTED_CONVERGENCE_EPOCHS} epochs on one set in the paper"
            ),
        ),
        Claim(
            "Ours beats the unsupervised methods (Table 3)",
            reported_leader_sentence("table3"),
            "—",
            not_tested(
                f"none of the {len(t3.index.drop('Ours'))} unsupervised methods is reimplemented "
                "here"
            ),
        ),
    ]


#: What the effective-rank claim tests (:func:`dmlnb.reporting.qualify` of a "holds"): a proxy
#: measured after ``L``, which an orthogonal ``L`` cannot shrink by construction.
EFFECTIVE_RANK_PROXY = (
    "on Lᵀz, which an orthogonal L cannot shrink by construction; the network's z is not measured"
)
#: The first words of the effective-rank claim (read from the kept weights: no
#: protocol recomputes it).
_EFFECTIVE_RANK_CLAIM = "Orthogonality keeps a higher effective rank"


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


def _searched(
    key: str,
    setting: Setting,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None,
    methods: Sequence[str],
) -> tuple[str, list[str]]:
    """The search's part of a comparison's evidence: which of ``methods`` took a value chosen on the
    validation classes (``hyper[key]``, :func:`chosen_hyper`) and whether it is the value they
    have without the search; and the methods whose runs the search left as they would be without
    it (no search, or the search chose that value)."""
    chosen = (hyper or {}).get(key, {})
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
    if not parts:
        return "", untouched
    return (
        "; searched on the validation classes (1 seed per value; the chosen value's first seed is "
        "the search's winning run): " + ", ".join(parts)
    ), untouched


def claims(
    runs: Mapping[str, Mapping[str, Sequence[Any]]],
    settings: Mapping[str, Setting],
    alpha_runs: Mapping[float, Sequence[Any]] | None = None,
    alpha_key: str | None = None,
    metric: str = "R@1",
    *,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    protocol: str | None = None,
) -> list[Claim]:
    """The chapter's claims table, every verdict from the rule of :mod:`dmlnb.reporting`.

    Args:
        runs: ``{setting key: {method key: [runs per seed]}}`` (:func:`run_setting`); a run is
            anything with ``best`` (metrics, fractions) and
            ``extras["spectrum"]["effective_rank"]``.
        settings: the settings of ``runs`` (names, ``l``, ``α``, epochs), as before any search.
        alpha_runs: ``{α: [runs per seed]}`` of :func:`run_alpha_grid` on setting ``alpha_key``;
            ``None``: the α claim is not tested.
        metric: the retrieval metric of the claims.
        hyper: ``{setting key: {method: {keyword: value}}}``, the baselines' values chosen on the
            validation classes (:func:`chosen_hyper`); the comparisons with the baselines name them
            and the pairs that fail with a baseline the search left as it was.
        protocol: the epochs the records show (``"validation"`` or ``"test"``, as
            :func:`claims_both_ways` shows them); ``None``: each run's own selection.

    Rules beyond :func:`~dmlnb.reporting.compare`: "ours improves on its network at initialisation"
    compares each run with its own network at initialisation
    (:func:`~dmlnb.reporting.paired_differences`), and is selected toward the claim where each run's
    epoch is its best test evaluation (:func:`initial_selection_bias`,
    :func:`~dmlnb.reporting.biased_toward_claim`: a "holds" becomes inconclusive, a failure stands);
    a "holds" of the effective-rank claim is qualified by what it measures
    (:data:`EFFECTIVE_RANK_PROXY`, :func:`~dmlnb.reporting.qualify`).

    Per setting: ours beats the five deep SSDML baselines (:func:`~dmlnb.reporting.group_verdict`
    over the baselines that ran; the claim names how many ran, the note the pair whose effect is
    shown); ours improves on the network at initialisation in Recall@1 and NMI
    (:func:`~dmlnb.reporting.all_of` over one :func:`~dmlnb.reporting.paired_differences` per
    metric, the first deciding metric shown; runs need ``initial`` metrics); orthogonality keeps a
    higher effective rank (``compare``; with ``Lᵀ L = I`` no direction of ``z`` is shrunk, so this
    partly follows from the constraint itself) and every metric (``all_of``); ours beats the
    supervised triplet / angular baselines (``group_verdict``). Then α is stable over the swept
    range (:func:`~dmlnb.reporting.every_pair_equivalent`, every pair of angles within
    :func:`alpha_margin`), and the claims this scale cannot test
    (:func:`~dmlnb.reporting.not_tested`, the reason computed from the settings).
    """
    pts: dict[str, Any] = {"scale": 100.0, "unit": " pts"}
    t4, t5, t_alpha = reported_orthogonality_drops(), REPORTED["table5"], REPORTED["alpha"]
    out = []
    for key, by_method in runs.items():
        st = settings[key]
        ours = per_seed(by_method.get("ours", []), metric)
        base = [m for m in SEMI_SUPERVISED if by_method.get(m)]
        verdict, pairs = group_verdict(
            {"Ours": ours}, {NAMES[m]: per_seed(by_method[m], metric) for m in base}, **pts
        )
        missing = [NAMES[m] for m in SEMI_SUPERVISED if m not in base]
        scope = (
            f"the {len(base)} of {len(SEMI_SUPERVISED)} deep SSDML baselines run here"
            if missing
            else "the deep SSDML baselines"
        )
        evidence = f"ours {_fmt(ours)}; " + ", ".join(
            f"{NAMES[m]} {_fmt(per_seed(by_method[m], metric))} ({v})"
            for m, v in zip(base, pairs.get("verdict", []))
        )
        if missing:
            evidence += f"; not run here: {', '.join(missing)}"
        evidence += _search_evidence(key, st, hyper, base, pairs)
        out.append(
            Claim(
                f"Ours beats {scope} ({st.name}, {metric})",
                reported_best(metric),
                evidence,
                verdict,
            )
        )
        init_metrics = [m for m in ("R@1", "NMI")]
        initial = [initial_of(r) for r in by_method.get("ours", [])]
        if ours and all(i is not None for i in initial):
            parts = {
                m: paired_differences(
                    per_seed(by_method["ours"], m), [float(i[m]) for i in initial], **pts
                )
                for m in init_metrics
            }  # paired by run: each run starts from its seed's network
            verdict = all_of(parts, "metrics", shown="first")
            bias = initial_selection_bias(st, protocol)
            out.append(
                Claim(
                    f"Ours improves on the network at initialisation ({st.name}, "
                    f"{', '.join(init_metrics)})",
                    reported_over_initial(init_metrics),
                    "; ".join(
                        f"{m} ours {_fmt(per_seed(by_method['ours'], m))} vs initial "
                        f"{_fmt([float(i[m]) for i in initial])} ({parts[m]})"
                        for m in init_metrics
                    ),
                    biased_toward_claim(verdict, bias) if bias else verdict,
                )
            )
        if by_method.get("ours") and by_method.get("ours-noorth"):
            er = {
                m: [float(r.extras["spectrum"]["effective_rank"]) for r in by_method[m]]
                for m in ("ours", "ours-noorth")
            }
            t4_sets = ", ".join(t4.index)
            out.append(
                Claim(
                    "Orthogonality keeps a higher effective rank of the test embedding "
                    f"({st.name})",
                    f"Table 4 ({t4_sets}): w/ orth higher in {int((t4 > 0).sum().sum())} of "
                    f"{t4.size} cells; Fig. 2 (right, t-SNE, MNIST and CIFAR-10); the paper "
                    "argues that orthogonality avoids a collapse, which it does not measure",
                    f"effective rank (of l = {st.metric_dim}) w/ orth {_fmt(er['ours'], 1.0)} vs "
                    f"w/o {_fmt(er['ours-noorth'], 1.0)}",
                    _proxy(compare(er["ours"], er["ours-noorth"]), EFFECTIVE_RANK_PROXY),
                )
            )
            shown = [
                m
                for m in M5
                if all(m in r.metrics for r in by_method["ours"] + by_method["ours-noorth"])
            ]
            parts = {
                m: compare(
                    per_seed(by_method["ours"], m), per_seed(by_method["ours-noorth"], m), **pts
                )
                for m in shown
            }
            every = bool((t4 > 0).all().all())
            out.append(
                Claim(
                    f"Orthogonality improves every metric ({st.name}, {', '.join(shown)})",
                    f"Table 4: {'every' if every else 'not every'} metric lower without "
                    f"orthogonality on {', '.join(t4.index.get_level_values(0).unique())}; "
                    f"{metric} w/ minus w/o: "
                    + ", ".join(f"{d} {v:+.1f}" for d, v in t4[metric].items()),
                    "; ".join(
                        f"{m} w/ {_fmt(per_seed(by_method['ours'], m))} vs w/o "
                        f"{_fmt(per_seed(by_method['ours-noorth'], m))} ({parts[m]})"
                        for m in shown
                    ),
                    all_of(parts, "metrics", shown="first"),
                )
            )
        sup = [m for m in ("triplet", "angular") if by_method.get(m)]
        sup_verdict, sup_pairs = group_verdict(
            {"Ours": ours}, {NAMES[m]: per_seed(by_method[m], metric) for m in sup}, **pts
        )
        out.append(
            Claim(
                "Unlabelled data helps over supervised-only training with the same labels "
                f"({st.name}, {metric})",
                f"Table 5 (CUB-200): ours {t5.at['Ours', metric]:.1f} vs triplet "
                f"{t5.at['Triplet', metric]:.1f} / angular {t5.at['Angular', metric]:.1f}",
                f"ours {_fmt(ours)}; "
                + ", ".join(
                    f"{NAMES[m]} {_fmt(per_seed(by_method[m], metric))} ({v})"
                    for m, v in zip(sup, sup_pairs.get("verdict", []))
                )
                + _search_evidence(key, st, hyper, sup, sup_pairs),
                sup_verdict,
            )
        )
    margin = alpha_margin(metric)
    lo, hi = t_alpha.index.min(), t_alpha.index.max()
    paper_alpha = (
        f'Fig. 2 (middle, Cars-196): "fairly stable in the range {lo:g}°-{hi:g}°"; {metric} '
        f"{t_alpha[metric].min():.1f}-{t_alpha[metric].max():.1f}, a spread of {100 * margin:.1f} "
        "pts (the margin)"
    )
    claim = (
        f"α is insensitive in {lo:g}°-{hi:g}° (every pair of angles within "
        f"±{100 * margin:.1f} pts {metric})"
    )
    if not alpha_runs or alpha_key is None:
        out.append(
            Claim(claim, paper_alpha, "no α sweep run", not_tested("no α sweep at this profile"))
        )
    else:
        st = settings[alpha_key]
        by_alpha = {a: per_seed(rs, metric) for a, rs in sorted(alpha_runs.items())}
        n = sorted({len(v) for v in by_alpha.values()})
        out.append(
            Claim(
                claim,
                paper_alpha,
                f"{st.name}, {'/'.join(map(str, n))} seed{'s' * (max(n) > 1)} per angle: "
                + ", ".join(f"{a:g}° {_fmt(v)}" for a, v in by_alpha.items()),
                every_pair_equivalent(by_alpha, margin, value_unit="°", **pts)[0],
            )
        )
    return out + _untested(settings)


def _proxy(verdict: Verdict, what: str) -> Verdict:
    """A "holds" qualified by what it measured (:func:`~dmlnb.reporting.qualify`); any
    other verdict as is."""
    return qualify(verdict, what) if str(verdict) == HOLDS else verdict


def _search_evidence(
    key: str,
    setting: Setting,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None,
    methods: Sequence[str],
    pairs: pd.DataFrame,
) -> str:
    """The search's words for a comparison of ours with ``methods`` (:func:`_searched`): the values
    chosen on the validation classes, and which failing pairs set a baseline the search left as it
    would be without it (a failure that does not rest on the search)."""
    text, untouched = _searched(key, setting, hyper, methods)
    if not text:
        return ""
    verdicts = dict(zip(methods, pairs.get("verdict", [])))
    failing = [NAMES[m] for m in untouched if str(verdicts.get(m, "")).startswith("does not hold")]
    return text + (
        "; pairs that do not hold against a baseline the search left as it was: "
        + ", ".join(failing)
        if failing
        else "; every pair that does not hold is against a searched value"
    )


def claims_both_ways(
    runs: Mapping[str, Mapping[str, Sequence[MethodRun]]],
    settings: Mapping[str, Setting],
    alpha_runs: Mapping[float, Sequence[MethodRun]] | None = None,
    alpha_key: str | None = None,
    hyper: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> pd.DataFrame:
    """:func:`claims` under both protocols (:func:`dmlnb.selection.both_ways_verdicts` over every
    record of ``runs`` and ``alpha_runs``; a run without a validation split keeps its test-selected
    epoch under both, so its claims never change). :func:`claims` is told which protocol it is
    judged under, so that its selection rule (:func:`initial_selection_bias`) follows the epochs
    shown. The effective-rank claims read the kept weights (``extras``), which no protocol
    recomputes: they are marked :data:`dmlnb.selection.NOT_RECOMPUTED`."""
    records = [r.record for by_method in runs.values() for rs in by_method.values() for r in rs]
    records += [r.record for rs in (alpha_runs or {}).values() for r in rs]
    order = iter(COLUMN_LABELS)  # both_ways_verdicts judges once per protocol, in this order
    return both_ways_verdicts(
        records,
        lambda: claims(runs, settings, alpha_runs, alpha_key, hyper=hyper, protocol=next(order)),
        strict=False,
        kept_weights=lambda claim: claim.startswith(_EFFECTIVE_RANK_CLAIM),
    )
