"""The chapter's findings in words ("What this chapter finds"), generated from the judged claims,
the evidence they rest on, the measurements and the runs (:func:`findings_md`): every number the
section states is computed here, none typed."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import JudgedClaim
from dmlnb.experiments.discriminative.bound import affine_text
from dmlnb.experiments.discriminative.evidence import (
    TRIVIAL_GAP_PER_TRIPLET,
    ClaimEvidence,
    alike_margin,
    alike_margins,
    first_last,
    layer_pairs,
    rises,
    slope_values,
    triplet_family_text,
    triplet_family_verdicts,
)
from dmlnb.experiments.discriminative.groups import ClusteringSearch
from dmlnb.experiments.discriminative.provenance import code_version_text
from dmlnb.experiments.discriminative.spec import (
    REPORTED,
    TRIPLET_FAMILY_ADDED,
    experiment_config,
    variant_unfit,
)
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import (
    CONFIDENCE,
    MIN_RUNS,
    ORDER_HALF_WIDTH,
    Verdict,
    compare,
    count_line,
    most_of,
    paired_differences,
    provenance_frame,
)
from dmlnb.runs import Run
from dmlnb.selection import selection_gain_text

__all__ = ["Findings", "findings_md", "later_step_ratios", "glued_texts", "REJUDGED"]

#: The claims that read the runs' scores at the selected epoch: the only ones the papers'
#: protocol can change (the others read the per-epoch tracking, the kept weights or timings).
REJUDGED = (
    "table3-centroids-alike",
    *(f"beats-{m}" for m in ("softmax", "most-triplet-based", "semihard", "npair")),
    "table8-vgg16",
    "larger-k-larger-improvement-vs-proxy",
)
#: Where the later measurements of the same-process step timing are recorded.
BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "book_retrain_cpu.txt"


@dataclass
class Findings:
    """What :func:`findings_md` reads: the judged claims (``claims``, ``ours``), both protocols'
    verdicts (``both_ways``; ``None`` without validation classes), the claims' ``evidence``, the
    Lemma 3.1 rows (``lemma_all``), the main comparisons (``comparisons``, of
    :func:`~dmlnb.experiments.discriminative.display.main_comparisons`), the clustering
    ``search``, the one-hot ``disc_runs``, ``variants`` (name -> runs), ``every_run`` (the
    comparison's runs and the K-means ones), the K-means ``draws`` at C = D = 100, the loss-pass
    ``timing`` and the step summary ``st``, ``whole_set`` (N, ratios), ``config``, ``profile``
    and the training classes ``num_classes`` (``validation_classes`` held out); ``records``: every
    record of the chapter (the model selection's gain is measured over them all)."""

    claims: Sequence[JudgedClaim]
    ours: Sequence[JudgedClaim]
    both_ways: pd.DataFrame | None
    evidence: ClaimEvidence
    lemma_all: pd.DataFrame
    comparisons: Mapping[str, tuple[pd.DataFrame, str]]
    search: ClusteringSearch
    disc_runs: Sequence[Run]
    variants: Mapping[str, Sequence[Run]]
    every_run: Sequence[Run]
    draws: Mapping[int, Mapping[str, float]]
    timing: pd.DataFrame
    st: pd.DataFrame
    whole_set: tuple[int, Mapping[str, float]]
    config: TrainConfig
    profile: str
    num_classes: int
    validation_classes: int
    records: Sequence[Any] = ()
    steps_made: str = ""

    def verdict(self, cid: str) -> Verdict:
        """The verdict of claim ``cid`` (the paper's or ours)."""
        return next(j.verdict for j in [*self.claims, *self.ours] if j.spec.id == cid)


def glued_texts(
    config: TrainConfig,
    settings: Mapping[str, Any],
    train: Any | None = None,
    tracked: Any | None = None,
) -> dict[str, str]:
    """What the chapter's Markdown states, glued from code: the rule's runs per side, one-sided
    confidence and
    its two-sided interval (in percent), this execution's epochs and the clustering baseline's
    margin multipliers searched (``settings``), the timing study's sizes between the powers of two
    and its largest ``C`` (``settings["timing"]``), and the paper's embedding size and epochs (its
    profile, :func:`~dmlnb.experiments.discriminative.spec.experiment_config`); with the training
    split ``train`` and its class-balanced subset ``tracked`` (Lemma 3.1's), what that subset is."""
    paper = experiment_config("paper")
    timing = settings["timing"]
    between = [str(n) for n in timing["n_values"] if n & (n - 1)]  # not a power of two
    out = {
        "min_runs": str(MIN_RUNS),
        "confidence": f"{CONFIDENCE:.0%}",
        "interval_level": f"{1 - 2 * (1 - CONFIDENCE):.0%}",
        "epochs": str(config.epochs),
        "gammas": " and ".join(f"{g:g}" for g in settings["clustering_gammas"]),
        "paper_d": str(paper.embedding_dim),
        "paper_epochs": str(paper.epochs),
        "timing_between": " and ".join(between) if between else "no size",
        "timing_c_max": str(max(timing["c_values"])),
    }
    if train is not None and tracked is not None:
        out["balanced_subset"] = _balanced_text(train, tracked)
    return out


def _balanced_text(train: Any, tracked: Any) -> str:
    """Lemma 3.1's class-balanced subset of ``train`` in words."""
    import torch

    counts = torch.unique(torch.as_tensor(train.labels), return_counts=True)[1]
    lo, hi = int(counts.min()), int(counts.max())
    if len(tracked) == len(train):
        return f"every training class has {lo} images, so this is the whole training set"
    return (
        f"the training classes have {lo} to {hi} images, so the subset keeps {lo} of each: "
        f"{len(tracked)} of the {len(train)} training images"
    )


def _ev(v: Verdict) -> str:
    """``"+7.19 pts [+2.79, +11.6]"``: a verdict's effect and 90% interval."""
    e = v.evidence()
    return f"{e['effect']} {e['90% interval']}"


def _said(v: Verdict) -> str:
    """``"holds; +7.19 pts [+2.79, +11.6]"``, or the verdict alone without an effect."""
    return f"{v}; {_ev(v)}" if np.isfinite(v.effect) else str(v)


def _pct(values: Sequence[float]) -> str:
    return f"{100 * float(np.mean(values)):.1f}%"


def later_step_ratios(path: Path = BENCHMARK) -> list[str]:
    """The semi-hard / discriminative step ratios of the later measurements recorded in the
    benchmark notes (``"0.99"``, ...), in their order; ``[]`` without the file."""
    if not path.exists():
        return []
    return re.findall(
        r"03 step timing: semi-hard / discriminative step ([\d.]+)x", path.read_text()
    )


def _intro(f: Findings) -> str:
    n = len(f.claims)
    text = (
        f"In words, at the `{f.profile}` profile ({f.config.dataset}, {f.config.epochs} epochs), "
        f"the paper's claims: {count_line(j.verdict for j in f.claims)}; our measurements: "
        f"{count_line(j.verdict for j in f.ours)}. "
    )
    if f.both_ways is None:
        return text + "Every run is at its best epoch on the test classes (the papers' protocol)."
    changed = f.both_ways[f.both_ways["verdict changes"]]
    tested = [j for j in f.claims if j.spec.id in REJUDGED and j.verdict.n]
    moved = [j for j in f.claims if j.spec.id in set(changed["id"])]
    text += (
        f"Every run is at the epoch its validation classes select ({f.validation_classes} of "
        f"the {f.num_classes + f.validation_classes} training classes, held out of training). "
        f"Judged again at the epochs the test classes select (the papers' protocol), "
        f"{len(changed)} of the {n} claims {'changes' if len(changed) == 1 else 'change'} verdict"
        + (f" ({'; '.join(_name(j) for j in moved)})" if moved else "")
        + f"; only {len(tested)} of the {n} read the scores at the selected epoch "
        f"({'; '.join(_name(j) for j in tested)}), the other {n - len(tested)} read the "
        "per-epoch tracking, the kept weights or timings, or are not tested, and cannot change. "
        "The main comparison tables under Tables 4-5 are unpaired, for display; every verdict "
        "stated here comes from the claims, whose comparisons of methods are paired by seed."
    )
    return text


def _name(j: JudgedClaim) -> str:
    """A claim as a reader knows it: where the paper makes it and its words, shortened."""
    text = j.spec.text.split(" (")[0].removeprefix("... ").replace("'e.g., ", "over '")
    return f"{j.spec.where}, {text}" if j.spec.where else text


def _weakest(v: Verdict) -> str:
    """``_said(v)`` with the measure its effect is shown at (an all-of verdict's weakest)."""
    shown = next((p[8:].split(" (")[0] for p in v.note.split("; ") if p.startswith("effect: ")), "")
    return _said(v) + (f" (the weakest part, {shown})" if shown else "")


def _lemma(f: Findings) -> str:
    lemma = f.lemma_all
    b0, b1 = first_last(lemma, "bound/H")
    g0, g1 = first_last(lemma, "gap/H")
    up, runs = rises(lemma, "bound/H")
    e_up = lemma.sort_values("epoch").groupby(["centroids", "seed"])["eps"]
    eps_up = int(e_up.apply(lambda v: bool((v.diff() > 0).any())).sum())
    km = lemma[lemma["centroids"] == "K-means"].sort_values("epoch").groupby("seed")["gap/H"]
    km_up = [(s, v.iloc[0], v.iloc[-1]) for s, v in km if v.iloc[-1] > v.iloc[0]]
    lowest = float(lemma["bound/H"].min())
    holds = f.verdict("lemma-holds-in-our-code")
    why = affine_text(f.num_classes, f.config.embedding_dim)
    tight = (
        f"The paper's 'the bound tightens' and 'the gap tends to zero' are not tested: {why}."
        if why
        else f"'The bound tightens': {f.verdict('bound-tightens')}; 'the gap shrinks': "
        f"{f.verdict('gap-shrinks')}."
    )
    return (
        f"- **The lemma and the bound.** Lemma 3.1 at every tracked point of our implementation "
        f"({holds.n[0]} points): {holds}, which tests the code rather than the theorem. {tight} "
        f"What is measured (ours, one-hot runs, first against last, paired run by run): the "
        f"bound per triplet moves {np.mean(b0):.2f} -> {np.mean(b1):.2f} "
        f"({_said(f.verdict('bound-falls'))}), rising between two consecutive tracked points in "
        f"{up} of the {runs} one-hot runs; its lowest value is {lowest:.3f}, "
        + (
            f"above the trivial {TRIVIAL_GAP_PER_TRIPLET:.0f} that the unit sphere gives every "
            "triplet, so at this scale it carries no information about the triplet loss"
            if lowest > TRIVIAL_GAP_PER_TRIPLET
            else f"below the trivial {TRIVIAL_GAP_PER_TRIPLET:.0f} at some point"
        )
        + f". The gap $L_d - L_t$ per triplet moves {np.mean(g0):.2f} -> {np.mean(g1):.2f}: "
        f"{100 * np.mean(g1 / g0):.1f}% of its start remains ({_said(f.verdict('gap-falls'))})"
        + (
            "; it rises in "
            + ", ".join(f"the K-means run of seed {s} ({a:.3f} -> {z:.3f})" for s, a, z in km_up)
            if km_up
            else ""
        )
        + f". $\\epsilon$ rises between two consecutive tracked points in {eps_up} of the "
        f"{lemma.groupby(['centroids', 'seed']).ngroups} tracked runs; from first to last "
        f"(one-hot) 'eps will decrease': {_said(f.verdict('eps-decreases'))}. 'A minimization "
        "of the upper bound is also a minimization of the triplet loss' (both fall): "
        f"{_weakest(f.verdict('minimising-bound-minimises-triplet'))}. 'The smaller "
        "kappa_max - kappa_min, the tighter the bound' (K-means minus one-hot bound per "
        f"triplet at the last epoch): {_said(f.verdict('smaller-spread-tighter-bound'))}."
    )


def _layers(f: Findings) -> str:
    ev = f.evidence
    t2 = f.verdict("table2-second-to-last-layer")
    pooled = f.verdict("table2-layers-pooled")
    onehot = [r for r in f.disc_runs if r.extras.get("last_layer")]
    pairs = layer_pairs(onehot)
    one_r1 = paired_differences(*pairs["R@1"], scale=100, unit=" pts")
    t3 = f.verdict("table3-centroids-alike")
    margins = alike_margins()
    return (
        "- **Layers and centroids.** Table 2's claim is judged on the paper's setting, the "
        f"{t2.n[0] if t2.n else 0} one-hot runs, each run's second-to-last layer against its "
        f"last (paired): R@1 {_ev(one_r1)}, at every K {_weakest(t2)}. With the K-means runs "
        f"pooled in (ours; {pooled.n[0] if pooled.n else 0} runs, two per seed sharing their "
        f"batches): R@1 {_pct(ev.layers['R@1'][0])} vs {_pct(ev.layers['R@1'][1])}, at every K "
        f"{_weakest(pooled)}. "
        + (
            "Each run's epoch was picked by the second-to-last layer, so by the rule for a "
            "biased selection the claim cannot hold on these runs. "
            if ev.layer_selection_chose
            else "Every one of them kept its last epoch, so the selection by the second-to-last "
            "layer chose nothing and the rule for a biased selection does not apply. "
        )
        + f"One-hot and K-means centroids, R@1 {_pct(ev.metrics['Discriminative']['R@1'])} vs "
        f"{_pct(ev.kmeans_r1)}, differ by {_ev(t3)} "
        f"({'paired by seed, ' if ev.kmeans_paired else ''}within a margin of "
        f"{alike_margin():.2f} pts, the worst case the paper calls not significant, read from "
        "its Table 3's differences: "
        + ", ".join(f"{d} {v:.2f}" for d, v in margins.items())
        + f"): {t3}. "
        + _kmeans_spread(f)
    )


def _kmeans_spread(f: Findings) -> str:
    rep = REPORTED["table3"].set_index(["dataset", "centroids"]).loc[("CUB-200-2011", "K-means")]
    paper = float(rep["max"] - rep["min"])
    spreads = {s: float(st["max"] - st["min"]) for s, st in f.draws.items()}
    first, *others = spreads
    trained = [
        r.extras["centroid_stats"]
        for r in f.every_run
        if r.record.data.get("spec", {}).get("centroids") == "kmeans"
        and r.extras.get("centroid_stats")
    ]
    text = (
        f"At the paper's $C = D = 100$, $\\kappa_{{\\max}} - \\kappa_{{\\min}}$ of the draw shown "
        f"(seed {first}) is {spreads[first]:.3f} against the paper's {paper:.2f}; other draws "
        f"give {', '.join(f'{spreads[s]:.3f}' for s in others)} (seeds {others[0]}-{others[-1]}), "
        "so one draw does not show how our generator compares with the paper's"
    )
    if trained:
        t = pd.DataFrame(trained).mean()
        text += f"; in the trained networks ($C = {f.num_classes}$) it is {t['max'] - t['min']:.3f}"
    return text + "."


def _accuracy(f: Findings) -> str:
    ev = f.evidence
    ranking = ", ".join(
        f"{row} {100 * np.mean(v):.1f}%"
        for row, v in sorted(ev.r1.items(), key=lambda kv: -float(np.mean(kv[1])))
    )
    family = f.verdict("beats-most-triplet-based")
    named = most_of(
        {r: v for r, v in triplet_family_verdicts(ev).items() if r not in TRIPLET_FAMILY_ADDED},
        "methods",
    )
    return (
        f"- **Accuracy.** Recall@1 here: {ranking}. Every comparison with a baseline is paired by "
        "seed (every method trains with the same seeds and batches). The discriminative loss "
        "beats this chapter's cosine softmax at every measure: "
        f"{_weakest(f.verdict('beats-softmax'))}, on one dataset (the "
        "paper's 'large margin' and second dataset are "
        f"not tested). Against Semi-hard, at every K: {_weakest(f.verdict('beats-semihard'))}; "
        f"against N-pair: {_weakest(f.verdict('beats-npair'))}. Against Triplet+proxy, 'larger "
        "improvements at larger K' (the improvement at the largest K minus that at R@1, paired): "
        f"{_said(f.verdict('larger-k-larger-improvement-vs-proxy'))}. 'Improves over "
        f"most of methods that are based on triplet': {family} ({family.note}); counting "
        f"{' and '.join(TRIPLET_FAMILY_ADDED)} is this chapter's choice, and without them: "
        f"{named} ({named.note}). K by K: {triplet_family_text(ev)}."
    )


def _complexity(f: Findings) -> str:
    s = f.evidence.slopes

    def slopes(loss: str, axis: str) -> str:
        return ", ".join(f"{x:.2f}" for x in slope_values(s, loss, f"slope in {axis}"))

    parts = [
        ("table1-linear-in-n", "discriminative", "N"),
        ("table1-linear-in-c", "discriminative", "C"),
        ("table1-naive-cubic-in-n", "triplet all (enumerated)", "N"),
        ("table1-naive-inverse-in-c", "triplet all (enumerated)", "C"),
        ("table1-proxy-linear-in-n", "triplet+proxy", "N"),
    ]
    said = "; ".join(
        f"{loss} in {axis} (slopes {slopes(loss, axis)}): {f.verdict(cid)}, {_ev(f.verdict(cid))}"
        for cid, loss, axis in parts
    )
    ours = f.verdict("our-clustering-loss-linear-in-n")
    return (
        "- **Complexity.** Each order of growth is judged on the per-repeat log-log slopes in a "
        f"band of ours around the claimed order (the order $\\pm$ {ORDER_HALF_WIDTH:g}, on both "
        "sides), a claim with a repeat whose slope rests on two sizes only being inconclusive: "
        f"{said}. {_c_sweep(f.timing)}The clustering claim is not tested, since the timed code is "
        "our facility-location loss over the whole set as one batch; its slope in $N$ "
        f"({slopes('clustering', 'N')}) is among our measurements, 'linear in $N$': {ours}, "
        f"{_ev(ours)}. A slope fitted over a short stretch of $N$ checks an order of growth there "
        "only; the timing table gives every repeat's slope and sizes."
    )


def _c_sweep(timing: pd.DataFrame) -> str:
    """The enumerated sum's own C sweep at its N: how far from a straight line it falls."""
    part = timing[(timing["sweep"] == "C") & (timing["loss"] == "triplet all (enumerated)")]
    if part.empty:
        return ""
    n = int(part["N"].min())
    ms = part[part["N"] == n].groupby("C")["seconds"].median().sort_index() * 1e3
    c = list(ms.index)
    return (
        f"The enumerated sum's falling cost in $C$ (at $N = {n}$, medians "
        f"{', '.join(f'{v:.0f}' for v in ms)} ms at $C$ = {', '.join(map(str, c))}) is not a "
        f"straight line: it falls {ms.iloc[0] / ms.iloc[1]:.1f}-fold from {c[0]} to {c[1]} "
        f"classes and {ms.iloc[-2] / ms.iloc[-1]:.2f}-fold from {c[-2]} to {c[-1]}, so the band "
        "judges only the average fall. "
    )


def _training_time(f: Findings) -> str:
    share = f.st["loss share of a step"]
    ratio = f.st.loc["Semi-hard", "per step / discriminative"]
    n, loss_ratio = f.whole_set
    later = later_step_ratios()
    enumerated = loss_ratio.get("triplet all (enumerated)", float("nan"))
    return (
        "- **Training time.** The paper's Table 7 (whole trainings, each method in its own "
        "configuration) is not tested here. In the stored step timing (the same trunk and "
        f"batches in one process, measured {f.steps_made or 'earlier'}), the "
        f"loss is a small part of a step ({share['Discriminative']:.1%} of a discriminative "
        f"step, {share['Semi-hard']:.1%} of a semi-hard one; the largest, {share.idxmax()}'s, "
        f"{share.max():.1%}), and a semi-hard step takes {ratio:.2f}x a discriminative one "
        f"('faster', paired by repeat: {_said(f.verdict('step-faster-than-semihard'))}; "
        f"'10x': {f.verdict('step-10x-faster')})."
        + (
            f" Later measurements of the same steps found {' and '.join(f'{r}x' for r in later)} "
            "(`benchmarks/results/book_retrain_cpu.txt`): the ratio is not reproduced from one "
            "measurement to the next."
            if later
            else ""
        )
        + f" Over a whole set of $N = {n}$ as one batch, semi-hard mining costs "
        f"{loss_ratio['triplet semi-hard']:.0f}x a discriminative pass"
        + (
            f" and the enumerated all-triplet sum {enumerated:.0f}x (forward only)"
            if np.isfinite(enumerated)
            else ""
        )
        + ": the cost of running each loss over the whole set at once, not of mini-batch "
        "training."
    )


def _variant(f: Findings, name: str) -> str:
    runs = f.variants.get(name) or []
    if not runs:
        unfit = variant_unfit(name, f.config, f.num_classes)
        return unfit or "not trained at this profile"
    base = [r.metrics["R@1"] for r in f.disc_runs]
    v = compare([r.metrics["R@1"] for r in runs], base, scale=100, unit=" pts")
    return f"R@1 {_pct(base)} -> {_pct([r.metrics['R@1'] for r in runs])}, {_said(v)}"


def _deviations(f: Findings) -> str:
    records = list(f.records) or [r.record for r in f.every_run]
    gain = selection_gain_text(records)
    last = f.evidence.last_epoch_share
    chosen = f.search.effect_text()
    return (
        f"- **Deviations** (the deviations table gives each). The paper's embedding size, "
        f"$D = 256$: {_variant(f, 'D=256')}; the baselines were not trained at 256, and the "
        "paper's own Semi-hard, Lifted structure, N-pair and Clustering rows are at $d = 64$. "
        f"The paper's weight decay (with Adam here): {_variant(f, 'weight decay 5e-4')}. Batches "
        f"of one image per class: {_variant(f, '1 image per class')}. Model selection, over "
        f"the {len(records)} runs: {gain.lstrip('; ')}. The clustering baseline: "
        f"{f.search.text()}" + (f"; {chosen}" if chosen else "") + ". With "
        f"{f.config.epochs} epochs, {100 * last:.0f}% of the runs peak at the last one, so "
        "longer training may reorder the methods. The code: "
        f"{code_version_text(provenance_frame(records))}."
    )


def findings_md(f: Findings) -> str:
    """The section "What this chapter finds" in Markdown: the verdicts restated with the numbers
    they rest on, bullet by bullet (the lemma, layers and centroids, accuracy, complexity,
    training time, deviations)."""
    return "\n".join(
        [
            _intro(f),
            "",
            _lemma(f),
            _layers(f),
            _accuracy(f),
            _complexity(f),
            _training_time(f),
            _deviations(f),
        ]
    )
