"""The chapter's claims declared as data (:class:`~dmlnb.chapter.ClaimSpec`: an id, where the
paper makes it, whose it is, the test) and judged by :func:`dmlnb.chapter.evaluate`.

The claims the vocabulary of :mod:`dmlnb.chapter.claims` says (the VGG-16 variant against the
GoogLeNet runs, paired by seed) are :class:`~dmlnb.chapter.Beats`; those no run of a profile can
test are :class:`~dmlnb.chapter.Untestable` with their typed reason and the scale that would; the
rest are :class:`~dmlnb.chapter.Custom` tests with their declared shape and pairing
(:data:`PAPER_CLAIMS`, :data:`OUR_CLAIMS`): a lemma's trace (first against last tracked point of
each run, paired), Table 2's two layers of each run at every Recall@K (paired), Table 3's
equivalence within the paper's own margin (paired by seed: the vocabulary's
:class:`~dmlnb.chapter.NoDifference` has no margin, so it could never hold), a method beaten at
every measure and "most of" the triplet family (paired by seed: every method trains with the same
seeds and batches), timing slopes in a band. Each judge (:class:`ClaimJudge`) computes the claim
of :func:`~dmlnb.experiments.discriminative.claims.chapter_claims` (or
:func:`~dmlnb.experiments.discriminative.claims.our_measurements`) from the run set when called,
so :func:`dmlnb.chapter.evaluate_both_ways` judges it under both protocols.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dmlnb.chapter import Beats, ClaimSpec, Custom, RunSet, Side, Untestable
from dmlnb.experiments.discriminative.bound import eps_floor, tight_scale
from dmlnb.experiments.discriminative.claims import chapter_claims, our_measurements
from dmlnb.experiments.discriminative.evidence import ClaimEvidence, claim_evidence
from dmlnb.experiments.discriminative.groups import ClusteringSearch, comparison
from dmlnb.reporting import Verdict

__all__ = [
    "PAPER_CLAIMS",
    "OUR_CLAIMS",
    "UNTESTABLE",
    "TIGHTNESS_CLAIMS",
    "ClaimJudge",
    "claims_runset",
    "runset_evidence",
    "claim_specs",
    "claim_text",
]

#: The paper's claims in the order of ``chapter_claims``: (id, where the paper makes it, the shape
#: of its test, whether it is paired). Paired: the lemma's first and last tracked points of one
#: run; Table 2's two layers of one run; Table 3's one-hot and K-means runs and Sec. 4.4's methods
#: share their seeds and batches by design; the timing slopes are one per repeat, unpaired.
PAPER_CLAIMS: tuple[tuple[str, str, str, bool], ...] = (
    ("bound-tightens", "Sec. 3.1", "trace", True),
    ("gap-shrinks", "Sec. 1", "trace", True),
    ("table2-second-to-last-layer", "Table 2", "every", True),
    ("table3-centroids-alike", "Table 3, Sec. 4.3", "no-difference", True),
    ("beats-softmax", "Sec. 4.4, Tables 4-5", "every", True),
    ("beats-most-triplet-based", "Sec. 4.4, Tables 4-5", "any", True),
    ("beats-semihard", "Sec. 4.4, Tables 4-5", "every", True),
    ("beats-npair", "Sec. 4.4, Tables 4-5", "every", True),
    ("competitive", "Abstract, Sec. 5", "untestable", False),
    ("table7-order-of-magnitude-faster", "Table 7", "untestable", False),
    ("table7-linear-time", "Table 7", "untestable", False),
    ("table1-linear-in-n", "Table 1", "band", False),
    ("table1-linear-in-c", "Table 1", "band", False),
    ("table1-naive-cubic-in-n", "Table 1", "band", False),
    ("table1-naive-inverse-in-c", "Table 1", "band", False),
    ("table1-proxy-linear-in-n", "Table 1", "band", False),
    ("table1-clustering-linear-in-n", "Table 1", "band", False),
    ("table8-vgg16", "Table 8", "comparison", True),
    ("eps-decreases", "Sec. 3.1", "trace", True),
    ("minimising-bound-minimises-triplet", "Sec. 1", "trace", True),
    ("smaller-spread-tighter-bound", "Sec. 4.3", "comparison", True),
    ("larger-k-larger-improvement-vs-proxy", "Sec. 4.4", "comparison", True),
    ("beats-smart-mining-car196", "Sec. 4.4", "untestable", False),
    ("table7-faster-than-smart-mining", "Table 7", "untestable", False),
)
#: The chapter's own measurements in the order of ``our_measurements``: (id, shape, paired). The
#: step timing's repeats are interleaved (the methods take turns within a repeat): its seconds
#: and ratios are paired by repeat.
OUR_CLAIMS: tuple[tuple[str, str, bool], ...] = (
    ("lemma-holds-in-our-code", "trace", False),
    ("step-faster-than-semihard", "comparison", True),
    ("step-10x-faster", "threshold", True),
    ("loss-share-discriminative", "threshold", False),
    ("loss-share-semihard", "threshold", False),
    ("our-clustering-loss-linear-in-n", "band", False),
    ("bound-falls", "trace", True),
    ("gap-falls", "trace", True),
    ("table2-layers-pooled", "every", True),
)
#: The paper's claims that cannot be approached by construction when the embedding has fewer
#: dimensions than the last layer (:func:`~dmlnb.experiments.discriminative.bound.eps_floor`).
TIGHTNESS_CLAIMS = ("bound-tightens", "gap-shrinks")
#: The claims no run of a CPU profile tests: id -> (typed reason, the scale that would test it).
UNTESTABLE: dict[str, tuple[str, str]] = {
    "competitive": (
        "structurally-untestable",
        "none: no run could test it ('competitive' needs a threshold, which the paper does not "
        "give)",
    ),
    "table7-order-of-magnitude-faster": (
        "not-run",
        "each method's whole training in its own default configuration, timed on one machine "
        "under one load (at this profile, or the paper profile for the paper's data)",
    ),
    "table1-clustering-linear-in-n": (
        "not-run",
        "an epoch of mini-batch training with the facility-location loss, timed as N grows at "
        "a fixed batch size, at this profile",
    ),
    "beats-smart-mining-car196": (
        "needs-paper-data",
        "the paper profile on CAR196 with an implementation of triplet with smart mining",
    ),
    "table7-faster-than-smart-mining": (
        "needs-paper-data",
        "the paper profile on CUB-200-2011 and CAR196 with an implementation of triplet with "
        "smart mining, each method timed in its own default configuration",
    ),
    "table7-linear-time": (
        "needs-paper-data",
        "every method's whole training on CUB-200-2011 and on CAR196 (the paper profile)",
    ),
    "table8-vgg16": ("needs-gpu", "the paper profile (VGG-16, ImageNet weights, 224 pixels)"),
}


@dataclass(eq=False)
class ClaimJudge:
    """A :class:`~dmlnb.chapter.Custom` test's judge: claim ``index`` of ``chapter_claims`` (of
    ``our_measurements`` when ``ours``) computed from the run set when called
    (:func:`runset_evidence`, with the timing study's ``slopes``, the step timing's ``steps`` and
    the configured ``epochs``). After a call its ``__doc__`` is the claim's evidence in words,
    which :func:`dmlnb.chapter.evaluate` shows."""

    index: int
    ours: bool
    slopes: pd.DataFrame
    steps: pd.DataFrame
    epochs: int
    num_classes: int = 0

    def __call__(self, runs: RunSet) -> Verdict:
        ev = runset_evidence(runs, self.slopes, self.steps, self.epochs, self.num_classes)
        claim = (our_measurements if self.ours else chapter_claims)(ev)[self.index]
        self.__doc__ = claim.our_evidence
        return claim.verdict


def claims_runset(runs: RunSet, search: ClusteringSearch) -> RunSet:
    """The runs the claims read: ``table4`` (Tables 4-5's methods by the paper's row names, the
    clustering baseline at its chosen gamma, :func:`~dmlnb.experiments.discriminative.groups.
    comparison`), ``kmeans`` and, when trained, ``arch`` (the VGG-16 variant)."""
    groups = {"table4": comparison(runs, search), "kmeans": runs.runs["kmeans"]}
    if "arch" in runs.runs:
        groups["arch"] = runs.runs["arch"]
    return RunSet(groups)


def runset_evidence(
    runs: RunSet, slopes: pd.DataFrame, steps: pd.DataFrame, epochs: int, num_classes: int = 0
) -> ClaimEvidence:
    """:func:`~dmlnb.experiments.discriminative.evidence.claim_evidence` of a
    :func:`claims_runset`, its metrics read from the records now (``num_classes``: the training
    classes C, 0 when not given)."""
    kmeans = [
        runs.run("kmeans", "discriminative", s) for s in runs.seeds("kmeans", "discriminative")
    ]
    vgg = (
        [runs.run("arch", "discriminative", s) for s in runs.seeds("arch", "discriminative")]
        if "arch" in runs.runs
        else []
    )
    return claim_evidence(runs.runs["table4"], kmeans, slopes, steps, epochs, vgg, num_classes)


def claim_specs(
    runs: RunSet, slopes: pd.DataFrame, steps: pd.DataFrame, epochs: int, num_classes: int = 0
) -> tuple[list[ClaimSpec], list[ClaimSpec]]:
    """The paper's claims and the chapter's own measurements as
    :class:`~dmlnb.chapter.ClaimSpec` values, their texts and the paper's evidence (read from
    the reported tables) as ``chapter_claims`` states them on ``runs``
    (:func:`claims_runset`); with the training classes ``num_classes``, the claims of a tight
    bound (:data:`TIGHTNESS_CLAIMS`) are structurally untestable where the embedding has fewer
    dimensions than the last layer (:func:`~dmlnb.experiments.discriminative.bound.eps_floor`)."""
    ev = runset_evidence(runs, slopes, steps, epochs, num_classes)
    judge = {"slopes": slopes, "steps": steps, "epochs": epochs, "num_classes": num_classes}
    floor = eps_floor(num_classes, ev.embedding_dim)
    paper = []
    for i, ((cid, where, shape, paired), claim) in enumerate(
        zip(PAPER_CLAIMS, chapter_claims(ev), strict=True)
    ):
        test: Any
        if cid == "table8-vgg16" and ev.vgg_r1:
            test = Beats(
                Side("arch", "discriminative"), Side("table4", "Discriminative"), paired=paired
            )
        elif cid in UNTESTABLE:
            reason, scale = UNTESTABLE[cid]
            test = Untestable(reason, claim.verdict.note, scale)  # type: ignore[arg-type]
        elif cid in TIGHTNESS_CLAIMS and floor:
            test = Untestable(
                "structurally-untestable", claim.verdict.note, tight_scale(num_classes)
            )
        else:
            test = Custom(ClaimJudge(i, False, **judge), shape=shape, paired=paired)
        text = claim_text(claim.claim, where)
        paper.append(ClaimSpec(cid, text, test, where=where, paper_evidence=claim.paper_evidence))
    ours = [
        ClaimSpec(
            cid,
            claim.claim,
            Custom(ClaimJudge(i, True, **judge), shape=shape, paired=paired),
            origin="ours",
            paper_evidence=claim.paper_evidence,
        )
        for i, ((cid, shape, paired), claim) in enumerate(
            zip(OUR_CLAIMS, our_measurements(ev), strict=True)
        )
    ]
    return paper, ours


def claim_text(text: str, where: str) -> str:
    """``text`` without its leading reference to the paper (``"Table 2: ..."``, ``"Sec. 4.4, as
    tested here: ..."``) when the claim's ``where`` column says where it stands."""
    head, sep, rest = text.partition(": ")
    if sep and where and re.match(r"(Table|Sec\.|Abstract)", head) and len(head) < 40:
        return rest[:1].upper() + rest[1:]
    return text
