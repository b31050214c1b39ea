"""Claims of the paper's text beside its figures and tables (Sec. 3.4, 6.1 and 6.2), and the test
of a method's change with the group size (:func:`trend_test`), for
:func:`~dmlnb.experiments.easy_positive.claims.declare_claims`: Sec. 6.1's mechanism (the easiest
positive more similar, the hardest less, as n grows), its "N-pair is the best version of Batch All
and Hard Positive", the multi-mode classes of the abstract, Sec. 3.4 and Figure 6, and Sec. 6.2's
claim across architectures."""

from __future__ import annotations

from typing import Any

from dmlnb.chapter import Beats, ClaimSpec, Custom, RunSet, SetAside, Side, Untestable
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.judges import (
    COLLAPSE_CAVEAT,
    Caveated,
    EveryPair,
    Term,
    collapsed_run,
)
from dmlnb.experiments.easy_positive.spec import figure4_side

__all__ = [
    "EVERY_RUN_COLLAPSED",
    "trend_test",
    "mechanism_claims",
    "modes_claim",
    "architecture_claim",
]

#: Why a trend within a method whose every run collapsed is set aside.
EVERY_RUN_COLLAPSED = (
    "every run of this method collapsed at both group sizes (training loss at ln 2): two "
    "collapsed embeddings carry no signal about the group size, so its trend is no test"
)


def _side(m: str, n: int) -> Side:
    return Side(*figure4_side(m, n), name=f"{m} at n = {n}")


def trend_test(runs: RunSet, better: Side, worse: Side, paired: bool) -> Any:
    """A method's change with n: set aside when every run of both ends collapsed (two collapsed
    embeddings say nothing about the group size), judged as a plain
    :class:`~dmlnb.chapter.Beats` when none did, else judged with the collapsed runs named
    (:class:`~dmlnb.experiments.easy_positive.judges.Caveated`)."""
    ends = (better, worse)
    gone = [
        collapsed_run(runs.run(s.group, s.label, seed))
        for s in ends
        for seed in runs.seeds(s.group, s.label)
    ]
    if all(gone):
        guard = SetAside(collapsed_run, EVERY_RUN_COLLAPSED, keep_effect=True)
        return Beats(better, worse, paired=paired, set_aside=guard)
    if not any(gone):
        return Beats(better, worse, paired=paired)
    judge = Caveated(Beats(better, worse, paired=paired), ends)
    return Custom(judge, judge.evidence, shape="comparison", paired=paired)


def mechanism_claims(study: Study) -> list[ClaimSpec]:
    """Sec. 6.1: as n grows the easiest positive becomes more similar and the hardest less
    (no stored record holds a batch's positives' similarities: not run); and N-pair, BA and HP
    at n = 2, is the best version of both (beats each at every larger n of the grid, paired by
    seed: runs at different n share their initialisation, not their batches)."""
    lo = min(study.group_sizes)
    larger = [n for n in sorted(study.group_sizes) if n > lo]
    mechanism = ClaimSpec(
        "sec61-mechanism",
        "As n grows, each anchor's easiest positive in the batch becomes more similar and its "
        "hardest positive less similar",
        Untestable(
            "not-run",
            "the run records keep each epoch's loss and metrics, not the similarities of each "
            "anchor's easiest and hardest positive in a batch; the one rerun with a counter "
            f"(EPHN at n = {lo}) logs the lowest similarity of a batch only",
            "this profile, one seed per n rerun with each batch's easiest and hardest positive "
            "similarity logged (as the drop-rule rerun)",
        ),
        "Sec. 6.1",
        paper_evidence="Sec. 6.1 on Figure 4 (Cars196, ResNet-18): 'the easiest positive image "
        "is likely to become more similar and the hardest positive is likely to become less "
        "similar'; no number",
    )
    npair = Term("N-pair", _side("EP", lo))
    worse = tuple(Term(f"{m} at n = {n}", _side(m, n)) for m in ("BA", "HP") for n in larger)
    judge = EveryPair((npair,), worse, set_aside=None, caveats=(COLLAPSE_CAVEAT,))
    best = ClaimSpec(
        "sec61-npair-best-of-ba-hp",
        f"N-pair (BA and HP at n = {lo}) beats BA and HP at every larger n "
        f"({', '.join(map(str, larger))})",
        Custom(judge, judge.evidence, shape="every", paired=True),
        "Sec. 6.1",
        paper_evidence="Sec. 6.1 (Cars196, ResNet-18): 'the N-pair approach, which is "
        "equivalent to the best version of Batch All and Hard Positive (group size=2)'; "
        "Figure 4 only, no table",
    )
    return [mechanism, best]


def modes_claim() -> ClaimSpec:
    """The abstract, Sec. 3.4 and Figure 6: easy positives let a class spread out, even into
    several modes. The spread is Figure 2's claim; the modes need each class's embeddings, which
    no stored analysis keeps."""
    return ClaimSpec(
        "sec34-multimode",
        "Easy-positive mining lets a class spread over several modes (disjoint clusters) "
        "instead of one tight cluster",
        Untestable(
            "not-run",
            "the stored analyses keep Figure 2's same-class similarities pooled over classes "
            "(they measure the spread, judged in Figure 2's claim) and a t-SNE map (no measured "
            "quantity), not each class's embeddings, which a count of modes per class needs",
            "this profile, with each class's embeddings of EPSHN and N-pair kept and its modes "
            "counted",
        ),
        "Abstract, Sec. 3.4, Figure 6",
        paper_evidence="Sec. 3.4 and Sec. 6.1 on Figure 6 (Cars196, ResNet-18): EPSHN 'embeds "
        "classes to be more spread out and even sometimes disjoint (addressing the fact that "
        "sometimes classes have multiple modes)'; shown by t-SNE, no number",
    )


def architecture_claim() -> ClaimSpec:
    """Sec. 6.2: EPSHN beats triplet, N-pair and Proxy-NCA across the three ImageNet backbones
    on CUB, and for both ResNets on Cars196; our one cell tests Table 1 on ours only."""
    return ClaimSpec(
        "sec62-architectures",
        "EPSHN beats triplet, N-pair and Proxy-NCA with every backbone on CUB and with both "
        "ResNets on Cars196",
        Untestable(
            "needs-paper-data",
            "needs CUB-200-2011 and Cars196 with the three ImageNet-pretrained backbones "
            "(GoogLeNet, ResNet-18, ResNet-50); this profile's Table 1 cell is one small CNN "
            "trained from scratch on Omniglot, judged in Table 1's claim",
            "the paper profile, with a GPU and the datasets, Table 1's six cells",
        ),
        "Sec. 6.2, Table 1",
        paper_evidence="Sec. 6.2: 'the superiority of our approach to these other comparably "
        "simple embedding approaches across all networks for CUB, and for both Resnet "
        "architectures for CAR'",
    )
