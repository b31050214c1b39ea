"""Claims the chapter added after a review: Sec. 4.4's "larger improvements at larger K" over
Triplet+proxy, the claims against triplet with smart mining (not implemented in dmlnb), and Table
2's comparison on the one-hot and K-means runs pooled (ours; the paper's claim is on one-hot)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dmlnb.experiments.discriminative.evidence import ClaimEvidence, layer_verdict
from dmlnb.experiments.discriminative.spec import REPORTED
from dmlnb.reporting import Claim, compare_to_threshold, not_tested

__all__ = ["pooled_layer_claim", "larger_k_claims"]


def _pct(values: Sequence[float]) -> float:
    """The mean of fractions, in points."""
    return 100 * float(np.mean(values))


def pooled_layer_claim(ev: ClaimEvidence) -> Claim:
    """Ours: Table 2's comparison on every discriminative run, one-hot and K-means pooled, each
    run's two layers paired (the runs of one seed share their batches, so the pooled pairs are
    not independent across centroid sets)."""
    layer_ks = [k for k in ev.metrics["Discriminative"] if k.startswith("R@") and k in ev.layers]
    return Claim(
        "the second-to-last layer gives better Recall@K than the last, one-hot and K-means runs "
        "pooled",
        "—",
        f"paired per run (penultimate - last), {len(ev.layers['R@1'][0])} runs (one-hot and "
        f"K-means: two runs per seed, sharing batches), at {', '.join(layer_ks)}; R@1 "
        f"{_pct(ev.layers['R@1'][0]):.1f} vs {_pct(ev.layers['R@1'][1]):.1f}",
        layer_verdict({k: ev.layers[k] for k in layer_ks}, ev.layer_selection_chose),
    )


def larger_k_claims(ev: ClaimEvidence) -> list[Claim]:
    """Sec. 4.4's "larger improvements are observed at larger K" over Triplet+proxy (CUB), per
    seed: the improvement at the largest K minus that at R@1, paired; and the claims against
    triplet with smart mining, which dmlnb does not implement."""
    disc, proxy = ev.metrics["Discriminative"], ev.metrics["Triplet+proxy"]
    ks = sorted((k for k in disc if k.startswith("R@")), key=lambda k: int(k[2:]))
    top = ks[-1]
    grow = [
        (d8 - p8) - (d1 - p1)
        for d8, p8, d1, p1 in zip(disc[top], proxy[top], disc["R@1"], proxy["R@1"])
    ]
    t4 = REPORTED["table4"]
    rep = {k: t4.loc["Discriminative", k] - t4.loc["Triplet+proxy", k] for k in ("R@1", top)}
    return [
        Claim(
            f"against Triplet+proxy, 'larger improvements are observed at larger K' (here: the "
            f"improvement at {top} exceeds that at R@1)",
            f"Table 4 (CUB): Discriminative - Triplet+proxy {rep['R@1']:+.2f} at R@1, "
            f"{rep[top]:+.2f} at {top}",
            f"per seed, ({top} difference) - (R@1 difference), paired by seed; R@1 difference "
            f"{_pct(disc['R@1']) - _pct(proxy['R@1']):+.1f}, {top} difference "
            f"{_pct(disc[top]) - _pct(proxy[top]):+.1f} pts",
            compare_to_threshold(grow, 0.0, scale=100, unit=" pts"),
        ),
        Claim(
            "on CAR196, 'Discriminative has 3.6% improvement in R@1 over the triplet+smart mining'",
            "Sec. 4.4 / Table 5 (CAR196)",
            "Triplet+smart mining is not implemented in dmlnb",
            not_tested(
                "the claim sets our runs against smart mining's reported CAR196 number; dmlnb "
                "implements neither smart mining nor trains CAR196 below the paper profile"
            ),
        ),
        Claim(
            "training is 'around 13 and 17 times faster' than triplet with smart mining (CUB, "
            "CAR196)",
            "Table 7",
            "Triplet+smart mining is not implemented in dmlnb",
            not_tested(
                "smart mining's training, in its own default configuration, on the paper's "
                "datasets and machine: the claim rests on the paper's timings"
            ),
        ),
    ]
