"""What the deviations table says of the runs in words: the K-means centroids' spreads, Table 2
on the one-hot runs alone, what the Table 1 timing study times."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from dmlnb.experiments.discriminative.evidence import (
    layer_pairs,
    layer_verdict,
    selection_chose,
)
from dmlnb.experiments.discriminative.spec import (
    REPORTED,
)
from dmlnb.reporting import paired_differences
from dmlnb.runs import TIMING_THREADS, Run

__all__ = ["kmeans_stats_text", "table2_onehot_text", "timing_text"]


def kmeans_stats_text(
    kmeans: Mapping[int, Mapping[str, float]] | None,
    every_run: Sequence[Run],
    num_classes: int | None,
) -> str:
    """The K-means centroids' distance statistics: ``kmeans`` draws at C = D = 100 against the
    paper's Table 3, and the trained runs' (``""`` when neither)."""
    stats = ""
    if kmeans:
        rep = (
            REPORTED["table3"].set_index(["dataset", "centroids"]).loc[("CUB-200-2011", "K-means")]
        )
        paper_spread = float(rep["max"] - rep["min"])
        spreads = {seed: float(st["max"] - st["min"]) for seed, st in kmeans.items()}
        more_even = [seed for seed, v in spreads.items() if v < paper_spread]
        first, shown = next(iter(kmeans.items()))
        stats = (
            f"at C = D = 100, one draw (seed {first}): min {shown['min']:.3f} / max "
            f"{shown['max']:.3f} / std {shown['std']:.3f} vs the paper's {rep['min']:.2f} / "
            f"{rep['max']:.2f} / {rep['std']:.3f}: kappa_max - kappa_min "
            f"{spreads[first]:.3f} vs {paper_spread:.2f}; the generator's draws "
            f"differ (seeds {min(spreads)}-{max(spreads)}: "
            + ", ".join(f"{v:.3f}" for v in spreads.values())
            + (
                f", seed{'s' if len(more_even) > 1 else ''} {', '.join(map(str, more_even))} more "
                "evenly spread than the paper's"
                if more_even
                else ""
            )
            + "), so one draw does not settle how the generator compares with the paper's"
        )
    trained = [
        r.extras["centroid_stats"]
        for r in every_run
        if r.record.data.get("spec", {}).get("centroids") == "kmeans"
        and r.extras.get("centroid_stats")
    ]
    if trained:
        t = pd.DataFrame(trained).mean()
        stats += (
            ("; " if stats else "")
            + "in the trained runs ("
            + (f"C = {num_classes}, " if num_classes else "")
            + f"{len(trained)} runs): min {t['min']:.3f} / max {t['max']:.3f} / std "
            f"{t['std']:.3f}: kappa_max - kappa_min {t['max'] - t['min']:.3f}"
        )
    return stats


def table2_onehot_text(base: Sequence[Run]) -> str:
    """Table 2 on the paper's one-hot runs only, judged as the claim is (:func:`layer_verdict`:
    every K, paired, the bias rule where the selection chose an epoch); ``""`` without last-layer
    scores."""
    scored = [r for r in base if r.extras.get("last_layer")]
    onehot_pairs = layer_pairs(scored)
    chose = selection_chose(scored)
    onehot_v = layer_verdict(onehot_pairs, chose) if onehot_pairs else None
    table2_runs = ""
    if onehot_v is not None:
        e, r1 = (
            onehot_v.evidence(),
            paired_differences(*onehot_pairs["R@1"], scale=100, unit=" pts").evidence(),
        )
        # all_of names the K it shows in its note: "effect: R@4 (the interval contains 0); ..."
        shown = next(
            (
                part.split(": ", 1)[1]
                for part in onehot_v.note.split("; ")
                if part.startswith("effect: ")
            ),
            "",
        )
        k_name, _, why = shown.partition(" (")
        table2_runs = (
            "one-hot runs only, second-to-last minus last layer (paired, "
            f"{len(onehot_pairs['R@1'][0])} runs): R@1 {r1['effect']} {r1['90% interval']}; at "
            f"every K (the claim), weakest {k_name + ' ' if k_name else ''}{e['effect']} "
            f"{e['90% interval']}{' (' + why if why else ''}: {onehot_v} ("
            + (
                "each run's epoch was chosen by the second-to-last layer: the rule for a "
                "selection biased toward the claim)"
                if chose
                else "every run kept its last epoch: the selection chose nothing, the rule for a "
                "biased selection does not apply)"
            )
        )
    return table2_runs


def timing_text(
    timing: Mapping[str, Any] | None, timing_device: str, timing_repeats: int | None
) -> str:
    """What the Table 1 timing study times, from the profile's ``settings["timing"]``."""
    if timing:
        timing_here = (
            f"one pass of each loss over a whole set of N random {timing['dim']}-d embeddings as "
            "a single batch per size (forward + backward; forward only for the enumerated "
            f"all-triplet sum), no network, on {timing_device}: N up to {max(timing['n_values'])} "
            f"(C = {timing['c_fixed']}), C up to {max(timing['c_values'])} (N = "
            f"{timing['n_fixed']}), "
            + "".join(f"{name} to N = {size}, " for name, size in timing["largest"].items())
            + (
                f"the enumerated sum's own C sweep at N = {timing['naive_c']['n_fixed']}, C = "
                + ", ".join(map(str, timing["naive_c"]["c_values"]))
                + ", "
                if timing.get("naive_c")
                else ""
            )
            + f"the same sizes on every machine; each timing the fastest of {timing['repeats']} "
            f"passes after a warm-up, with {TIMING_THREADS} torch thread(s)"
            + (f", the study repeated {timing_repeats} times" if timing_repeats else "")
            + f"; the discriminative loss's C sweep at a fixed D = {timing['dim']} with random "
            "unit centroids (C may exceed D; the paper's one-hot centroids have D = C); the "
            "enumerated all-triplet sum is the hinged triplet loss with margin 0.2, where Eq. "
            "1-2's simplified L_t has neither hinge nor margin (the order of its cost is the "
            "same)"
        )
    else:
        timing_here = "not timed at this profile"
    return timing_here
