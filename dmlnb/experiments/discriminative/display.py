"""The notebook's display plumbing: the lines it prints and the tables and figures it shows, each
from the runs, the measurements and the configuration (no number typed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dmlnb.chapter import JudgedClaim
from dmlnb.experiments.discriminative.evidence import (
    MAX_EPS,
    TRIVIAL_GAP_PER_TRIPLET,
    ClaimEvidence,
    triplet_family_text,
)
from dmlnb.experiments.discriminative.figures import tidy_axes
from dmlnb.experiments.discriminative.groups import ClusteringSearch
from dmlnb.experiments.discriminative.spec import METHODS, REPORTED, reported_blocks
from dmlnb.profiles import TrainConfig
from dmlnb.reporting import count_line, reported_vs_reproduced
from dmlnb.runs import Run
from dmlnb.selection import main_comparison
from dmlnb.training import resolve_device

__all__ = [
    "measurement_made",
    "setup_text",
    "runs_text",
    "lemma_summary",
    "ranking_text",
    "main_comparisons",
    "table7_frame",
    "timing_figure",
    "reading_text",
    "splits_frame",
    "layer_differences",
    "history_figure",
    "kmeans_draws_md",
    "alike_text",
    "step_text",
    "whole_set_text",
]


def setup_text(profile: str, config: TrainConfig, settings: Mapping[str, Any]) -> str:
    """The execution's setting in one line."""
    return (
        f"profile={profile}  dataset={config.dataset}  backbone={config.model}  embedding "
        f"D={config.embedding_dim}  epochs={config.epochs}  optimiser={config.optimizer} "
        f"lr={config.lr}  batch={config.batch_size} ({config.m_per_class} per class)  best epoch "
        f"on the {config.select_on} classes  seeds={list(settings['seeds'])}  K-means "
        f"seeds={list(settings['kmeans_seeds'])}  timing repeats={list(settings['timing_seeds'])}"
    )


def runs_text(
    runs: Mapping[tuple[str, int], Run], kmeans_runs: Mapping[int, Run], search: ClusteringSearch
) -> str:
    """Each run's Recall@1 at its kept epoch, whether it was reloaded, and the clustering
    baseline's gamma."""

    def line(label: str, run: Run) -> str:
        return (
            f"{label}: R@1 {100 * run.metrics['R@1']:.1f}% at the kept epoch "
            f"{run.record.best['epoch']}" + ("" if run.model is not None else " (reloaded)")
        )

    lines = [line(f"{row:17s} seed {seed}", run) for (row, seed), run in runs.items()]
    lines += [
        line(f"Discriminative, K-means centroids, seed {seed}", run)
        for seed, run in kmeans_runs.items()
    ]
    return "\n".join([*lines, f"clustering baseline: {search.text()}"])


#: The Lemma 3.1 quantities as the chapter's tables name them.
LEMMA_WORDS = {
    "L_t/H": "triplet loss per triplet",
    "L_d/H": "discriminative loss per triplet",
    "gap/H": "gap L_d - L_t per triplet",
    "bound/H": "bound per triplet",
    "eps": "eps (twice the largest distance to a centroid)",
    "eps_mean": "twice the mean distance to a centroid",
}


def lemma_summary(
    lemma_onehot: pd.DataFrame, lemma_kmeans: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Every tracked point of both centroid sets (``lemma_all``), each run's first and last
    tracked values, and what the lemma and the bound show, in words."""
    lemma_all = pd.concat(
        [lemma_onehot.assign(centroids="one-hot"), lemma_kmeans.assign(centroids="K-means")],
        ignore_index=True,
    )
    ok = (lemma_all["gap"] >= -1e-9 * lemma_all["H"]) & (lemma_all["gap"] <= lemma_all["bound"])
    by_run = lemma_all.sort_values("epoch").groupby(["centroids", "seed"])
    columns = ("L_t/H", "L_d/H", "gap/H", "bound/H", "eps", "eps_mean")
    first_last = by_run.agg(**{f"{c} {w}": (c, w) for c in columns for w in ("first", "last")})
    first_last.columns = [
        f"{LEMMA_WORDS[c]}, {'before training' if w == 'first' else 'last tracked epoch'}"
        for c in columns
        for w in ("first", "last")
    ]
    eps_rises = by_run["eps"].apply(lambda e: bool((e.diff() > 0).any()))
    vacuous = bool((lemma_all["bound/H"] > TRIVIAL_GAP_PER_TRIPLET).all())
    risen = ", ".join(f"{c} seed {s}" for (c, s), up in eps_rises.items() if up) or "none"
    text = (
        f"0 <= L_d - L_t <= bound at all {len(lemma_all)} tracked points: {bool(ok.all())}\n"
        f"bound per triplet above the trivial {TRIVIAL_GAP_PER_TRIPLET:.0f} at every tracked "
        f"point (the bound is vacuous): {vacuous}; lowest {lemma_all['bound/H'].min():.3f}\n"
        f"eps (at most {MAX_EPS:.0f}) rises between two consecutive tracked points in "
        f"{int(eps_rises.sum())} of {len(eps_rises)} runs: {risen}"
    )
    return lemma_all, first_last, text


def ranking_text(means: pd.Series) -> str:
    """The Recall@1 ranking here (``means``: row -> mean R@1) and in the paper's Tables 4-5."""
    lines = [
        "Recall@1 ranking here: "
        + " > ".join(
            f"{row} ({100 * v:.1f}%)" for row, v in means.sort_values(ascending=False).items()
        )
    ]
    for t, dataset in (("table4", "CUB-200-2011"), ("table5", "CAR196")):
        rep = REPORTED[t].loc[list(METHODS), "R@1"].sort_values(ascending=False)
        lines.append(
            f"Recall@1 ranking in the paper's {t.replace('table', 'Table ')}, {dataset} "
            "(implemented rows): " + " > ".join(f"{row} ({v:.2f})" for row, v in rep.items())
        )
    return "\n".join(lines)


def main_comparisons(
    runs: Mapping[tuple[str, int], Run], seeds: Sequence[int]
) -> dict[str, tuple[pd.DataFrame, str]]:
    """Per metric (R@1, NMI), the main comparison under both protocols
    (:func:`dmlnb.selection.main_comparison`) and which methods' verdicts change, in words."""
    records = {row: [runs[row, s].record for s in seeds] for row in METHODS}
    out = {}
    for metric in ("R@1", "NMI"):
        frame = main_comparison(records, "Discriminative", metric)
        changed = [m for m, c in frame["verdict changes"].items() if c is True]
        out[metric] = (
            frame,
            f"{metric} (unpaired, for display): 'Discriminative beats it' changes between the "
            "protocols for: "
            f"{', '.join(changed) or 'no method'}",
        )
    return out


def measurement_made(folder: Any) -> str:
    """When the measurement stored in ``folder`` (:func:`dmlnb.runs.stored_measurement`) was made,
    from its own record (``"2026-11-23 17:17 UTC"``); ``""`` when none is stored."""
    from pathlib import Path

    from dmlnb.records import read_json

    file = Path(folder) / "measurement.json"
    made = read_json(file).get("made", "") if file.exists() else ""
    return made.replace("T", " ")[:16] + " UTC" if made else ""


def table7_frame(st: pd.DataFrame, config: TrainConfig, made: str = "") -> pd.DataFrame:
    """Table 7 as reported beside the step timing's summary (:func:`step_summary`), measured at
    ``made`` (:func:`measurement_made`)."""
    formats = {
        "ms per step": "{:.1f}",
        "per step / discriminative": "{:.2f}",
        "ms of the loss alone": "{:.2f}",
        "loss share of a step": "{:.3f}",
    }
    table7 = pd.DataFrame({column: st[column].map(f.format) for column, f in formats.items()})
    reported7 = {
        k: f.assign(**{"/ discriminative": f["minutes"] / f.loc["Discriminative", "minutes"]}).map(
            lambda v: f"{v:.1f}"
        )
        for k, f in reported_blocks("table7", value="minutes").items()
    }
    label = (
        f"reproduced ({config.dataset}, {config.model}, batch {config.batch_size}, "
        f"{resolve_device(config.device)}; steps timed in one process"
        + (f", measured {made}, stored and reloaded)" if made else ")")
    )
    return reported_vs_reproduced(
        reported7,
        {label: table7},
        rows=list(dict.fromkeys([*METHODS, *REPORTED["table7"].columns])),
    )


def timing_figure(
    timing: pd.DataFrame,
    slopes_all: pd.DataFrame,
    settings: Mapping[str, Any],
    profile: str,
    device: Any,
) -> Any:
    """The first timing repeat's passes as N and as C grow, log-log, with each loss's slope."""
    import matplotlib.pyplot as plt

    from dmlnb.plots import plot_loglog_timing

    seed, t = settings["timing_seeds"][0], settings["timing"]
    first = timing[timing["seed"] == seed]
    slopes = slopes_all[slopes_all["seed"] == seed].set_index("loss")
    fig, ax = plt.subplots(2, 1, figsize=(9, 7.5))
    plot_loglog_timing(
        first[first["sweep"] == "N"],
        x="N",
        slopes=slopes["slope in N"].to_dict(),
        ax=ax[0],
        title=f"N grows, C = {t['c_fixed']}, D = {t['dim']} (timing seed {seed})",
    )
    plot_loglog_timing(
        first[(first["sweep"] == "C") & (first["N"] == t["n_fixed"])],
        x="C",
        slopes=slopes["slope in C"].to_dict(),
        ax=ax[1],
        title=f"C grows, N = {t['n_fixed']}, D = {t['dim']} (timing seed {seed})",
    )
    for a in ax:
        a.set_ylabel("seconds per pass\n(fwd + bwd; enumerated sum: fwd only)")
    tidy_axes(fig)
    fig.suptitle(f"One pass of each loss over a training set (profile {profile}, {device})")
    fig.tight_layout()
    return fig


def reading_text(
    claims: Sequence[JudgedClaim],
    ours: Sequence[JudgedClaim],
    evidence: ClaimEvidence,
    lemma_all: pd.DataFrame,
    config: TrainConfig,
    profile: str,
    seeds: int,
    step: tuple[float, pd.DataFrame],
    whole_set: tuple[int, Mapping[str, float]],
) -> str:
    """What the runs show, in words, from the judged claims and the evidence; ``step``: the
    semi-hard / discriminative step ratio and the step summary; ``whole_set``: the largest N both
    were timed at and the losses' ratios there."""
    find = _finder([*claims, *ours])
    b = (
        lemma_all[lemma_all["centroids"] == "one-hot"]
        .sort_values("epoch")
        .groupby("seed")[["bound/H", "gap/H", "eps"]]
        .agg(["first", "last"])
        .mean()
    )
    vacuous = bool((lemma_all["bound/H"] > TRIVIAL_GAP_PER_TRIPLET).all())
    r1 = evidence.r1
    family, semihard = find("beats-most-triplet-based"), find("beats-semihard")
    (ratio, st), (n_common, loss_ratio) = step, whole_set
    lines = [
        f"On {config.dataset} ({profile} profile, {config.model}, {config.epochs} epochs, "
        f"{seeds} seeds):",
        *(
            f"- {name}: {count_line(c.verdict for c in cs)}"
            for name, cs in (("the paper's claims", claims), ("our measurements", ours))
        ),
        f"- Lemma 3.1 at every tracked point: {find('lemma-holds-in-our-code')}; the bound "
        f"per triplet moved {b['bound/H', 'first']:.2f} -> {b['bound/H', 'last']:.2f} "
        f"('tightens': {find('bound-tightens')}), "
        f"{'and stayed above' if vacuous else 'and fell below'} the trivial "
        f"{TRIVIAL_GAP_PER_TRIPLET:.0f} at {'every' if vacuous else 'some'} tracked point, with "
        f"eps {b['eps', 'first']:.2f} -> {b['eps', 'last']:.2f} of at most {MAX_EPS:.0f}; the "
        f"gap per triplet moved {b['gap/H', 'first']:.2f} -> {b['gap/H', 'last']:.2f} ('the gap "
        f"shrinks': {find('gap-shrinks')}).",
        f"- {100 * evidence.last_epoch_share:.0f}% of the runs reached their best Recall@1 at the "
        f"last of the {config.epochs} epochs: the schedule is short and the networks were still "
        "improving, so longer training may reorder the methods.",
        f"- Recall@1: discriminative {100 * np.mean(r1['Discriminative']):.1f}%, softmax "
        f"{100 * np.mean(r1['SoftMax']):.1f}%, semi-hard {100 * np.mean(r1['Semi-hard']):.1f}%; "
        f"'improves over most of methods that are based on triplet': {family} ({family.note}); "
        f"over semi-hard: {semihard}.",
        "- The discriminative loss against each triplet-based method, Recall@K by Recall@K: "
        f"{triplet_family_text(evidence)}.",
        f"- Same-process step timing: a semi-hard step takes {ratio:.2f}x a discriminative step "
        f"('faster': {find('step-faster-than-semihard')}; '10x': {find('step-10x-faster')}); "
        f"the loss is {st.loc['Discriminative', 'loss share of a step']:.1%} of a discriminative "
        f"step ({find('loss-share-discriminative')}).",
        f"- One pass over N = {n_common} samples as a single batch: semi-hard mining "
        f"{loss_ratio['triplet semi-hard']:.0f}x the discriminative loss (not mini-batch "
        "training).",
    ]
    return "\n".join(lines)


def _finder(judged: Sequence[JudgedClaim]) -> Any:
    """``find(id)``: the verdict of the claim ``id``."""
    verdict_of = {c.spec.id: c.verdict for c in judged}
    return lambda cid: verdict_of[cid]


def step_text(st: pd.DataFrame) -> str:
    """The same-process step timing in one line (``st``: :func:`step_summary`)."""
    ratio, share = st.loc["Semi-hard", "per step / discriminative"], st["loss share of a step"]
    return (
        f"same trunk, batches and process: a semi-hard step takes {ratio:.2f}x a discriminative "
        f"step; the loss alone is {share['Discriminative']:.1%} of a discriminative step and "
        f"{share['Semi-hard']:.1%} of a semi-hard step; the largest loss share is "
        f"{share.idxmax()}'s ({share.max():.1%}) (medians over the repeats of ratios taken within "
        "each repeat; the '10x' claim tests these ratios, 'faster' the seconds per step, paired "
        "by repeat)"
    )


def whole_set_text(
    n_common: int, loss_ratio: Mapping[str, float], c_fixed: int, repeats: int
) -> str:
    """Each loss over a whole set of ``n_common`` samples as one batch against the discriminative
    loss (:func:`whole_set_ratios`), in one line."""
    enumerated = loss_ratio.get("triplet all (enumerated)", float("nan"))
    return (
        f"at N = {n_common} (C = {c_fixed}), semi-hard mining run over the whole set as one batch "
        f"costs {loss_ratio['triplet semi-hard']:.0f}x a discriminative pass"
        + (
            f", the enumerated all-triplet sum (forward only) {enumerated:.0f}x"
            if np.isfinite(enumerated)
            else ""
        )
        + f" (medians of the {repeats} repeats; mini-batch semi-hard training costs far less per "
        "epoch, O(N^3 / (M^2 C)) by the paper's Table 1)"
    )


def splits_frame(splits: Any, tracked: Any, dataset: str) -> pd.DataFrame:
    """Images, classes and images per class of each split (and the Lemma 3.1 subset)."""
    import torch

    parts = {
        "train": splits.train,
        "validation (held out of training)": splits.validation,
        "test (unseen classes)": splits.test,
        "balanced subset for Lemma 3.1": tracked,
    }
    parts = {k: v for k, v in parts.items() if v is not None}  # no validation row without one
    counts = {
        k: torch.unique(torch.as_tensor(v.labels), return_counts=True)[1] for k, v in parts.items()
    }
    return pd.DataFrame(
        {
            "images": [len(v) for v in parts.values()],
            "classes": [len(c) for c in counts.values()],
            "images per class": [f"{c.min().item()}-{c.max().item()}" for c in counts.values()],
        },
        index=list(parts),
    ).rename_axis(dataset)


def layer_differences(
    layer_runs: Sequence[Run], onehot: int, ks: Sequence[str]
) -> tuple[pd.DataFrame, str]:
    """Table 2 run by run: second-to-last minus last layer (points) at each K (the first
    ``onehot`` runs one-hot, the rest K-means), and the verdicts in words (:func:`layer_verdict`):
    the claim's, on the one-hot runs, and ours, on every run pooled."""
    from dmlnb.experiments.discriminative.evidence import (
        layer_pairs,
        layer_verdict,
        selection_chose,
    )
    from dmlnb.experiments.discriminative.groups import run_seed

    pair = layer_pairs(layer_runs)  # (second-to-last, last) per metric, at the kept epoch
    diff = pd.DataFrame(
        {k: 100 * (np.array(pair[k][0]) - np.array(pair[k][1])) for k in ks},
        index=[
            f"{'one-hot' if i < onehot else 'K-means'} seed {run_seed(r)}"
            for i, r in enumerate(layer_runs)
        ],
    )
    chose = selection_chose(layer_runs)

    def said(runs: Sequence[Run]) -> str:
        verdict = layer_verdict(layer_pairs(runs), chose)  # paired at every K, then the bias rule
        ev = verdict.evidence()
        return (
            f"{verdict} (weakest K: effect {ev['effect']}, 90% interval {ev['90% interval']}, "
            f"{ev['runs per side']} runs; {verdict.note})"
        )

    text = (
        "second-to-last minus last layer, per run: the second-to-last is ahead in "
        f"{int((diff > 0).all(axis=1).sum())} of {len(diff)} runs at every K; 'second-to-last is "
        "better at every K' (paired, "
        + (
            "then the rule for a selection biased toward the claim)"
            if chose
            else "every run at its last epoch: the selection chose nothing)"
        )
        + f", the claim on the {onehot} one-hot runs: {said(layer_runs[:onehot])}\n"
        f"ours, the {len(layer_runs)} one-hot and K-means runs pooled: {said(layer_runs)}"
    )
    return diff, text


def history_figure(
    runs: Mapping[tuple[str, int], Run], seed: int, config: TrainConfig, profile: str
) -> Any:
    """Recall@1 and NMI on the unseen classes per epoch, every method, one seed."""
    import matplotlib.pyplot as plt

    from dmlnb.plots import plot_history

    fig, ax = plt.subplots(1, 2, figsize=(12, 3.8))
    records = {row: runs[row, seed].record for row in METHODS}
    plot_history(
        records, metric="R@1", ax=ax[0], title=f"Recall@1 on the unseen classes (seed {seed})"
    )
    plot_history(records, metric="NMI", ax=ax[1], title=f"NMI on the unseen classes (seed {seed})")
    ax[0].get_legend().remove()
    ax[1].legend(
        fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0
    )
    tidy_axes(fig, integer_x=True)
    fig.suptitle(f"{config.dataset}, {config.model}, profile {profile}")
    fig.tight_layout()
    return fig


def kmeans_draws_md(draws: Mapping[int, Mapping[str, float]]) -> str:
    """How the K-means draws at C = D = 100 (:func:`kmeans_draws`) compare with the paper's
    Table 3 centroids, in Markdown (glued into the Table 3 section)."""
    rep = REPORTED["table3"].set_index(["dataset", "centroids"]).loc[("CUB-200-2011", "K-means")]
    paper = float(rep["max"] - rep["min"])
    spreads = {seed: float(st["max"] - st["min"]) for seed, st in draws.items()}
    first, *others = spreads
    shown = draws[first]
    below = [s for s in others if spreads[s] < paper]
    return (
        f"At $C = D = 100$ the one draw shown (seed {first}) does not match the paper's "
        f"statistics: its closest centroids are "
        f"{'closer' if shown['min'] < rep['min'] else 'farther'} and its farthest "
        f"{'farther' if shown['max'] > rep['max'] else 'closer'}, so "
        f"$\\kappa_{{\\max}} - \\kappa_{{\\min}}$ ({spreads[first]:.3f} against the paper's "
        f"{paper:.2f}), and with it the lemma's bound, is "
        f"{'larger' if spreads[first] > paper else 'smaller'} than with the paper's centroids. "
        "Other draws of the same generator differ: "
        f"seeds {others[0]}-{others[-1]} give "
        f"{', '.join(f'{spreads[s]:.3f}' for s in others[:-1])} and {spreads[others[-1]]:.3f} "
        "(the line under the table below)"
        + (f", seed {', '.join(map(str, below))}'s below the paper's {paper:.2f}" if below else "")
        + ", so one draw does not show how the generator compares with the paper's."
    )


def alike_text(cent_r1: Mapping[str, Sequence[float]], paired: bool = True) -> str:
    """Table 3's "one-hot and K-means centroids perform alike" on Recall@1 (``cent_r1``: centroid
    set -> per-run R@1, in seed order), an equivalence within the worst-case Table 3 difference
    the paper calls not significant, paired by seed as the claim is (``paired``: the two sets'
    runs share their seeds and batches)."""
    from dmlnb.experiments.discriminative.evidence import (
        alike_margin,
        alike_margins,
        paired_equivalent,
    )
    from dmlnb.reporting import equivalent

    alike = (paired_equivalent if paired else equivalent)(
        cent_r1["one-hot"], cent_r1["K-means"], alike_margin() / 100, scale=100, unit=" pts"
    )
    ev = alike.evidence()
    return (
        "the paper's Table 3 Recall@1 differences, which it calls not significant: "
        + ", ".join(f"{d} {v:.2f} pts" for d, v in alike_margins().items())
        + f"; equivalence margin: the worst case, {alike_margin():.2f} pts\n"
        f"Recall@1 one-hot {100 * np.mean(cent_r1['one-hot']):.1f}% vs K-means "
        f"{100 * np.mean(cent_r1['K-means']):.1f}%: difference {ev['effect']}, 90% interval "
        f"{ev['90% interval']} ({ev['runs per side']} "
        + ("pairs, paired by seed as the claim" if paired else "runs per side, unpaired")
        + f") -> 'alike': {alike}"
    )
