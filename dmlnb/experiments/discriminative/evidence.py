"""The per-run numbers the claims are judged on, and the chapter's analyses of them: Table 2's
layer pairs, the Lemma 3.1 traces, the timing slopes, the triplet family."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.experiments.discriminative.groups import lemma_frame, run_seed
from dmlnb.experiments.discriminative.spec import METHODS, REPORTED, TRIPLET_FAMILY
from dmlnb.reporting import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Verdict,
    all_of,
    biased_toward_claim,
    compare_to_threshold,
    paired_differences,
    qualify,
)
from dmlnb.runs import Run
from dmlnb.selection import (
    kept_selection,
)

__all__ = [
    "LINEAR_ORDER",
    "CUBIC_ORDER",
    "INVERSE_ORDER",
    "ORDER_OF_MAGNITUDE",
    "LOSS_SHARE_LIMIT",
    "PAPER_TRAIN_SETS",
    "alike_margin",
    "alike_margins",
    "table7_scaling",
    "ClaimEvidence",
    "claim_evidence",
    "layer_pairs",
    "layer_verdict",
    "selection_chose",
    "paired_equivalent",
    "first_last",
    "rises",
    "slope_values",
    "sizes_text",
    "TRIVIAL_GAP_PER_TRIPLET",
    "MAX_EPS",
    "LAYER_SELECTION_BIAS",
    "GAP_PROXY",
    "gap_verdict",
    "fit_sizes",
    "triplet_family_parts",
    "triplet_family_verdicts",
    "triplet_family_text",
]


# --------------------------------------------------------------------------- claims

# Table 1 orders a pass's cost by powers of N. The paper gives no tolerance on a measured
# slope; OUR rule (dmlnb.reporting.order_band): a claimed order k holds when the 90% interval of
# the per-repeat slopes lies within k +- 0.5 (halfway to the neighbouring orders; N log N passes
# as linear at these sizes) and does not hold when it lies beyond an edge, on either side: a
# slope of 4 is no more "cubic" than a slope of 2. "Falls as 1 / C" is the order -1.
LINEAR_ORDER = 1.0
CUBIC_ORDER = 3.0
INVERSE_ORDER = -1.0
# Table 7's claim: "one order of magnitude faster".
ORDER_OF_MAGNITUDE = 10.0
# OUR threshold for "the network, not the loss, dominates a step": the loss's share below 50%.
LOSS_SHARE_LIMIT = 0.5
# Image counts and classes of the paper's training sets (Sec. 4.1), for Table 7's scaling check.
PAPER_TRAIN_SETS = {"CUB-200-2011": (5864, 100), "CAR196": (8054, 98)}


def alike_margin() -> float:
    """The Recall@1 equivalence margin (points) for "one-hot and K-means centroids perform alike":
    the margin the paper itself states, the worst case it calls "not a significant difference"
    (Sec. 4.3: "In the worst case, K-means is 1.5% worse than one-hot on CAR196"), read from its
    Table 3 as the larger of its two Recall@1 differences. (The smaller, with three pairs of
    runs, would leave a half-width near the margin, so "holds" could not be reached by design.)"""
    return float(max(alike_margins().values()))


def alike_margins() -> dict[str, float]:
    """|one-hot - K-means| Recall@1 (points) of the paper's Table 3, per dataset."""
    t3 = REPORTED["table3"].set_index(["dataset", "centroids"])["R@1"]
    return {
        d: abs(float(t3[d, "one-hot"] - t3[d, "K-means"]))
        for d in t3.index.get_level_values(0).unique()
    }


def table7_scaling() -> pd.DataFrame:
    """The paper's Table 7 discriminative times against the N C scaling Table 1 predicts."""
    t7 = REPORTED["table7"]["Discriminative"]
    (n1, c1), (n2, c2) = PAPER_TRAIN_SETS["CUB-200-2011"], PAPER_TRAIN_SETS["CAR196"]
    return pd.DataFrame(
        {
            "CUB-200-2011 / CAR196": {
                "training minutes (Table 7)": t7["CUB-200-2011"] / t7["CAR196"],
                "N C (training images x classes)": (n1 * c1) / (n2 * c2),
            }
        }
    )


@dataclass
class ClaimEvidence:
    """Per-run numbers the claims are judged on (one entry per seed, in the same seed order on
    every side), gathered by :func:`claim_evidence`.

    Attributes:
        metrics: paper row name -> metric -> value (fraction) of each one-hot
            seed at its best epoch.
        layers: Table 2 pairs, every discriminative run (one-hot and K-means centroids): metric ->
            (second-to-last layer values, last layer values), the same runs in the same order.
        kmeans_r1: Recall@1 of the discriminative runs with K-means centroids.
        lemma: :func:`lemma_frame` rows of every tracked run, with a ``centroids`` column.
        slopes: :func:`timing_study` slopes (``loss``, ``seed``, ``slope in N``, ``slope in C``).
        steps: :func:`step_timing` rows (same-cell step timing).
        epochs: configured epochs; ``last_epoch_share``: share of runs whose best epoch is the last.
        vgg_r1: Recall@1 of the VGG-16 variant (empty when it was not trained).
        layer_selection_chose: whether the selection of some Table 2 run kept an epoch other
            than its last (:func:`selection_chose`): only then is Table 2 biased toward its claim.
        kmeans_paired: whether the K-means runs have the one-hot runs' seeds (same seeds, same
            batches), in the same order: Table 3 is then paired by seed.
        num_classes, embedding_dim: the training classes C (the last layer's units; 0 when not
            given) and the embedding size D of the discriminative network.
    """

    metrics: dict[str, dict[str, list[float]]]
    layers: dict[str, tuple[list[float], list[float]]]
    kmeans_r1: list[float]
    lemma: pd.DataFrame
    slopes: pd.DataFrame
    steps: pd.DataFrame
    epochs: int
    last_epoch_share: float
    vgg_r1: list[float] = field(default_factory=list)
    layer_selection_chose: bool = True
    kmeans_paired: bool = False
    num_classes: int = 0
    embedding_dim: int = 0

    @property
    def r1(self) -> dict[str, list[float]]:
        return {row: m["R@1"] for row, m in self.metrics.items()}


def claim_evidence(
    runs: Mapping[tuple[str, int], Run],
    kmeans_runs: Sequence[Run],
    slopes: pd.DataFrame,
    steps: pd.DataFrame,
    epochs: int,
    vgg_runs: Sequence[Run] = (),
    num_classes: int = 0,
) -> ClaimEvidence:
    """Gather :class:`ClaimEvidence` from the chapter's runs (``runs``: (paper row, seed) ->
    one-hot run), the timing study's per-seed ``slopes`` and the same-cell ``steps`` timing;
    ``num_classes``: the training classes C (0: not given)."""
    seeds = sorted({s for _, s in runs})
    keys = list(runs[next(iter(runs))].metrics)
    metrics = {row: {k: [runs[row, s].metrics[k] for s in seeds] for k in keys} for row in METHODS}
    disc = [runs["Discriminative", s] for s in seeds]
    both = [*disc, *kmeans_runs]
    layers = layer_pairs(both)
    lemma = pd.concat(
        [
            lemma_frame([r for r in disc if r.extras.get("lemma")]).assign(centroids="one-hot"),
            lemma_frame([r for r in kmeans_runs if r.extras.get("lemma")]).assign(
                centroids="K-means"
            ),
        ],
        ignore_index=True,
    )
    every = [*runs.values(), *kmeans_runs]
    return ClaimEvidence(
        metrics=metrics,
        layers=layers,
        kmeans_r1=[r.metrics["R@1"] for r in kmeans_runs],
        lemma=lemma,
        slopes=slopes,
        steps=steps,
        epochs=epochs,
        last_epoch_share=float(np.mean([r.record.best_is_last for r in every])),
        vgg_r1=[r.metrics["R@1"] for r in vgg_runs],
        layer_selection_chose=selection_chose(both),
        kmeans_paired=[run_seed(r) for r in kmeans_runs] == seeds,
        num_classes=num_classes,
        embedding_dim=int(disc[0].record.config.get("embedding_dim", 0)),
    )


def layer_pairs(runs: Sequence[Run]) -> dict[str, tuple[list[float], list[float]]]:
    """Table 2's paired scores of discriminative ``runs``: metric -> (second-to-last layer values,
    last layer values), run by run in the order given. The last layer was scored from the kept
    weights (``extras["last_layer"]``), so each run's second-to-last layer is read at the same
    epoch, the one its validation classes select where it has them
    (:func:`~dmlnb.selection.kept_selection`), whatever epoch ``record.best`` holds."""
    if not runs:
        return {}
    kept = [kept_selection(r.record)["metrics"] for r in runs]  # type: ignore[index]
    keys = [k for k in kept[0] if all(k in r.extras.get("last_layer", {}) for r in runs)]
    return {
        k: ([float(m[k]) for m in kept], [float(r.extras["last_layer"][k]) for r in runs])
        for k in keys
    }


def selection_chose(runs: Sequence[Run]) -> bool:
    """Whether the selection of some run kept an epoch other than its last evaluated one
    (:func:`~dmlnb.selection.kept_selection`): when every run kept its last epoch the selection
    chose nothing, whatever criterion it read."""
    for run in runs:
        evaluated = run.record.evaluations()
        kept = kept_selection(run.record)
        if evaluated and kept is not None and kept["epoch"] != evaluated[-1]["epoch"]:
            return True
    return False


def layer_verdict(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]], chose: bool = True
) -> Verdict:
    """Table 2's claim, "the second-to-last layer gives better Recall@K than the last layer", on
    :func:`layer_pairs`: at every Recall@K (:func:`~dmlnb.reporting.all_of`), each K by the paired
    test of the per-run differences (:func:`~dmlnb.reporting.paired_differences`), then, when the
    selection ``chose`` an epoch (:func:`selection_chose`), the rule for a selection biased toward
    the claim (:func:`~dmlnb.reporting.biased_toward_claim` with :data:`LAYER_SELECTION_BIAS`):
    each run's epoch was chosen by the second-to-last layer. When every run kept its last epoch
    the selection chose nothing and the rule does not apply. The one computation of this verdict:
    the claims table, the notebook's Table 2 cell and the deviations table's one-hot row all call
    it."""
    parts = {
        k: paired_differences(*pairs[k], scale=100, unit=" pts")
        for k in pairs
        if k.startswith("R@")
    }
    every = all_of(parts, "Recall@K")
    return biased_toward_claim(every, LAYER_SELECTION_BIAS) if chose else every


def paired_equivalent(
    a: Sequence[float], b: Sequence[float], margin: float, *, scale: float = 1.0, unit: str = ""
) -> Verdict:
    """ "A and B perform alike" within ``±margin`` on paired per-run values (``a[i]`` and
    ``b[i]`` share a seed: the same batches): the two one-sided tests of
    :func:`~dmlnb.reporting.equivalent` on the per-run differences
    (:func:`~dmlnb.reporting.compare_to_threshold` against ``-margin`` and ``+margin``). Holds
    when both hold (the 90% interval of the mean difference lies inside the margin), does not hold
    when one does not, else inconclusive; the effect shown is the mean difference
    (:func:`~dmlnb.reporting.paired_differences`)."""
    d = paired_differences(a, b, scale=scale, unit=unit)
    diffs = [x - y for x, y in zip(a, b)]
    above = compare_to_threshold(diffs, -margin)
    below = compare_to_threshold(diffs, margin, higher_is_better=False)
    both = (str(above), str(below))
    text = HOLDS if both == (HOLDS, HOLDS) else FAILS if FAILS in both else INCONCLUSIVE
    note = f"equivalence margin ±{margin * scale:.3g}{unit}, paired by seed"
    if d.note:
        note += f"; {d.note}"
    elif text == INCONCLUSIVE:
        note += "; the interval crosses the margin"
    return Verdict(text, d.effect, d.low, d.high, d.n, note, scale, unit)


def first_last(
    lemma: pd.DataFrame, column: str, centroids: str = "one-hot"
) -> tuple[np.ndarray, np.ndarray]:
    """Per tracked run with ``centroids`` (in seed order): ``column`` before training and at the
    last epoch."""
    part = lemma[lemma["centroids"] == centroids].sort_values("epoch").groupby("seed")[column]
    return part.first().to_numpy(float), part.last().to_numpy(float)


def rises(lemma: pd.DataFrame, column: str) -> tuple[int, int]:
    """Per tracked run (one-hot centroids): how many runs see ``column`` rise between two
    consecutive tracked points, and how many runs there are."""
    part = lemma[lemma["centroids"] == "one-hot"].sort_values("epoch").groupby("seed")[column]
    rises = part.apply(lambda v: bool((v.diff() > 0).any()))
    return int(rises.sum()), len(rises)


def slope_values(slopes: pd.DataFrame, loss: str, column: str) -> list[float]:
    return [float(v) for v in slopes.loc[slopes["loss"] == loss, column] if np.isfinite(v)]


def sizes_text(slopes: pd.DataFrame, loss: str, sweep: str) -> str:
    """How many sizes each repeat's fit used, e.g. " (2, 2, 3 sizes fitted)", and, when a repeat
    fitted only two, that its slope is a line through two points (nothing checks the curve's
    shape between or beyond them)."""
    col = f"sizes fitted in {sweep}"
    if col not in slopes:
        return ""
    v = [int(x) for x in slopes.loc[slopes["loss"] == loss, col] if np.isfinite(x)]
    if not v:
        return ""
    two = sum(k <= 2 for k in v)
    return (
        f" ({', '.join(map(str, v))} sizes fitted"
        + (
            f"; {'every' if two == len(v) else f'{two} of {len(v)}'} repeat "
            f"slope{'s' if two > 1 else ''} through two sizes only: a line through two points, "
            "the curve's shape unchecked"
            if two
            else ""
        )
        + ")"
    )


# The gap of one triplet is at most 8 on the unit sphere (l_d <= 2 + 2 + 2, l_t >= -2): a bound per
# triplet above it says nothing the sphere does not; eps is at most 4 (twice the diameter 2).
TRIVIAL_GAP_PER_TRIPLET = 8.0
MAX_EPS = 4.0


#: Why Table 2's layer comparison cannot hold on these runs
#: (:func:`dmlnb.reporting.biased_toward_claim`).
LAYER_SELECTION_BIAS = (
    "each run's epoch was chosen by the second-to-last layer's Recall@1 (on the classes the run "
    "selects on), and the records hold no last-layer score at any other epoch, so the layers "
    "cannot be compared at a neutral epoch"
)


#: What "L_d approaches L_t" tests (:func:`gap_verdict`): a fall of the gap, not its limit.
GAP_PROXY = "the gap falls; whether it tends to zero, its limit, is not tested"


def gap_verdict(gap_first: Sequence[float], gap_last: Sequence[float]) -> Verdict:
    """ "L_d approaches L_t" (the paper: the gap "tends to zero"), judged on a proxy: each tracked
    run's decrease of the gap per triplet from ``gap_first`` (before training) to ``gap_last``
    (the last tracked epoch) against 0 (:func:`~dmlnb.reporting.compare_to_threshold`). A "holds"
    is qualified by what it tested (:data:`GAP_PROXY`, :func:`~dmlnb.reporting.qualify`): any
    fall passes, however far from zero the gap stays."""
    v = compare_to_threshold(
        np.asarray(gap_first, dtype=float) - np.asarray(gap_last, dtype=float), 0.0
    )
    return qualify(v, GAP_PROXY) if str(v) == HOLDS else v


def fit_sizes(slopes: pd.DataFrame, loss: str, sweep: str) -> list[int]:
    """The sizes each repeat's slope of ``loss`` in ``sweep`` was fitted on, for the repeats with a
    slope (``[]`` when the slopes do not say)."""
    col = f"sizes fitted in {sweep}"
    if col not in slopes:
        return []
    part = slopes[slopes["loss"] == loss]
    return [
        int(k)
        for k, v in zip(part[col], part[f"slope in {sweep}"])
        if np.isfinite(v) and np.isfinite(k)
    ]


def triplet_family_parts(ev: ClaimEvidence) -> dict[str, dict[str, Verdict]]:
    """Per method of :data:`TRIPLET_FAMILY`, per Recall@K: "the discriminative loss beats it at this
    K", paired by seed (every method trains with the same seeds and batches:
    :func:`~dmlnb.reporting.paired_differences`), the parts of :func:`triplet_family_verdicts`."""
    disc = ev.metrics["Discriminative"]
    recall = [k for k in disc if k.startswith("R@")]
    return {
        row: {
            k: paired_differences(disc[k], ev.metrics[row][k], scale=100, unit=" pts")
            for k in recall
        }
        for row in TRIPLET_FAMILY
    }


def triplet_family_verdicts(ev: ClaimEvidence) -> dict[str, Verdict]:
    """Sec. 4.4's "improves over ... methods based on triplet", one verdict per method of
    :data:`TRIPLET_FAMILY`: the discriminative loss beats it at every Recall@K
    (:func:`~dmlnb.reporting.all_of` over the K, each paired by seed;
    :func:`triplet_family_parts`)."""
    return {row: all_of(parts, "measures") for row, parts in triplet_family_parts(ev).items()}


def triplet_family_text(ev: ClaimEvidence) -> str:
    """The discriminative loss against each triplet-based method, in words, from the same verdicts
    as :func:`triplet_family_verdicts`: "ahead at every K of" the methods whose claim holds;
    "behind at" the Ks where it does not hold (the method ahead there beyond the interval), per
    method, "every K" when all of them; "neither ahead at every K nor behind at any K" the rest."""
    parts = triplet_family_parts(ev)
    verdicts = triplet_family_verdicts(ev)
    ahead = [row for row, v in verdicts.items() if str(v) == HOLDS]
    behind = []
    for row, ks in parts.items():
        lost = [k for k, v in ks.items() if str(v) == FAILS]
        if lost:
            behind.append(f"{row} at {'every K' if len(lost) == len(ks) else ', '.join(lost)}")
    undecided = [
        row
        for row, v in verdicts.items()
        if str(v) != HOLDS and not any(str(x) == FAILS for x in parts[row].values())
    ]
    return (
        f"ahead at every K of: {', '.join(ahead) or 'none'}; behind: "
        f"{'; '.join(behind) or 'none'}; neither ahead at every K nor behind at any K: "
        f"{', '.join(undecided) or 'none'}"
    )
