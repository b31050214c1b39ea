"""The SSDML chapter's claims declared as data (:class:`dmlnb.chapter.ClaimSpec`), judged by
:func:`dmlnb.chapter.evaluate` on the chapter's :class:`~dmlnb.chapter.RunSet`.

Per setting (group ``key`` of :func:`~dmlnb.experiments.ssdml.spec.groups`): ours beats the deep
SSDML baselines that run there, in Recall@1 and in NMI and R@2-8 (Tables 1-2: "on all the
datasets"), ours improves on its network at initialisation
(:class:`~dmlnb.experiments.ssdml.judges.OverInitial`: at most inconclusive where the selection
favours it and moved the value), orthogonality improves every metric
(:class:`~dmlnb.experiments.ssdml.judges.EveryMetric`), the unlabelled data helps over
supervised-only training, and, ours, not the paper's, an orthogonal ``L`` keeps a higher
effective rank of ``Lᵀz`` (:class:`~dmlnb.experiments.ssdml.judges.EffectiveRank`). The
comparisons with other methods carry, in their note, ours against its own network at
initialisation when that does not hold
(:class:`~dmlnb.experiments.ssdml.judges.NotShownToLearn`). Every one of them is paired by seed:
the methods of a setting share their seeds by design, and a seed fixes the run's labelled draw,
its partitions of the unlabelled data and its network at initialisation
(:func:`~dmlnb.experiments.ssdml.network.load_splits`,
:func:`~dmlnb.ssdml.algorithm.partition_indices`). No comparison sets runs aside
(:class:`~dmlnb.chapter.SetAside`): no metric is near its ceiling.

Then α is stable over the swept range (:class:`~dmlnb.experiments.ssdml.judges.AlphaStable`,
within the paper's own spread, :func:`~dmlnb.experiments.ssdml.reported.alpha_margin`, paired by
seed), the objective decreases (:class:`~dmlnb.experiments.ssdml.judges.LossDecreases`, on the
stored loss curves), ours trains faster than the baselines the paper calls costlier
(:class:`~dmlnb.experiments.ssdml.judges.TrainingSeconds`), and the claims no stored run tests
(:class:`~dmlnb.chapter.Untestable`, each with its reason).
"""

from __future__ import annotations

from collections.abc import Mapping

from dmlnb.chapter import BeatsEvery, ClaimSpec, Custom, Side, Untestable
from dmlnb.experiments.ssdml.judges import (
    AlphaStable,
    EffectiveRank,
    EveryMetric,
    LossDecreases,
    NotShownToLearn,
    OverInitial,
    TrainingSeconds,
)
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
from dmlnb.experiments.ssdml.spec import alpha_group_name

__all__ = [
    "EFFECTIVE_RANK_CLAIM",
    "claim_specs",
    "setting_claims",
    "alpha_claim",
    "alpha_judge",
    "stored_run_claims",
    "untestable",
]

#: The first words of the effective-rank claims (read from the kept weights: no protocol
#: recomputes them, :func:`dmlnb.chapter.evaluate_both_ways` ``kept_weights``).
EFFECTIVE_RANK_CLAIM = "Ours: an orthogonal L keeps a higher effective rank"
#: The baselines whose cost the paper calls higher than ours (LRML O(d³); APLLR, APIT O(d³ + N³)).
COSTLIER = ("lrml", "apllr", "apit")


def _side(key: str, m: str) -> Side:
    return Side(key, m, name=NAMES[m])


def _beats(key: str, others: tuple[str, ...], metric: str) -> BeatsEvery:
    return BeatsEvery(_side(key, "ours"), tuple(_side(key, m) for m in others), metric, paired=True)


def _caveated(key: str, st: Setting, others: tuple[str, ...], metrics: list[str]) -> Custom:
    """ "Ours beats each of ``others``" in every one of ``metrics``, with ours against its network
    at initialisation in the note (:class:`NotShownToLearn`)."""
    judge = NotShownToLearn(tuple(_beats(key, others, m) for m in metrics), OverInitial(key, st))
    return Custom(judge, judge.evidence, "every", paired=True)


def _orthogonality(key: str, st: Setting, metric: str) -> list[ClaimSpec]:
    t4 = reported_orthogonality_drops()
    every = bool((t4 > 0).all().all())
    rank = EffectiveRank(key, st)
    return [
        ClaimSpec(
            f"{key}-effective-rank",
            f"{EFFECTIVE_RANK_CLAIM} of the test embedding Lᵀz than an unconstrained L ({st.name}; "
            "partly by construction: an orthogonal L scales no direction of its image)",
            Custom(rank, rank.evidence, paired=True),
            origin="ours",
        ),
        ClaimSpec(
            f"{key}-orthogonality-every-metric",
            f"Orthogonality improves every metric ({st.name}, {', '.join(M5)})",
            Custom(EveryMetric(key), EveryMetric(key).evidence, "every", paired=True),
            where="Table 4",
            paper_evidence=f"Table 4: {'every' if every else 'not every'} metric lower "
            f"without orthogonality on {', '.join(t4.index.get_level_values(0).unique())}; "
            f"{metric} w/ minus w/o: " + ", ".join(f"{d} {v:+.1f}" for d, v in t4[metric].items()),
        ),
    ]


def setting_claims(key: str, st: Setting, metric: str = "R@1") -> list[ClaimSpec]:
    """The claims judged on one setting's runs (group ``key``), as far as its methods allow."""
    t5 = REPORTED["table5"]
    base = tuple(m for m in SEMI_SUPERVISED if m in st.methods)
    scope = (
        f"the {len(base)} of {len(SEMI_SUPERVISED)} deep SSDML baselines run here"
        if len(base) < len(SEMI_SUPERVISED)
        else "the deep SSDML baselines"
    )
    sup = tuple(m for m in ("triplet", "angular") if m in st.methods)
    rest = [m for m in M5 if m != metric]
    out = [
        ClaimSpec(
            f"{key}-beats-baselines",
            f"Ours beats {scope} ({st.name}, {metric})",
            _caveated(key, st, base, [metric]),
            where="Tables 1-2",
            paper_evidence=reported_best(metric),
        ),
        ClaimSpec(
            f"{key}-beats-baselines-other-metrics",
            f"Ours beats {scope} in the other metrics too ({st.name}, {', '.join(rest)})",
            _caveated(key, st, base, rest),
            where='Tables 1-2, Discussion ("we outperform the baselines on all the datasets")',
            paper_evidence="; ".join(reported_best(m) for m in rest),
        ),
        ClaimSpec(
            f"{key}-over-initial",
            f"Ours improves on the network at initialisation ({st.name}, R@1, NMI)",
            Custom(OverInitial(key, st), OverInitial(key, st).evidence, "every", paired=True),
            where="Tables 1-2 (Initial row)",
            paper_evidence=reported_over_initial(["R@1", "NMI"]),
        ),
    ]
    if "ours-noorth" in st.methods:
        out += _orthogonality(key, st, metric)
    out.append(
        ClaimSpec(
            f"{key}-unlabelled-data-helps",
            "Unlabelled data helps over supervised-only training with the same labels "
            f"({st.name}, {metric})",
            _caveated(key, st, sup, [metric]),
            where="Table 5",
            paper_evidence=f"Table 5 (CUB-200): ours {t5.at['Ours', metric]:.1f} vs triplet "
            f"{t5.at['Triplet', metric]:.1f} / angular {t5.at['Angular', metric]:.1f}",
        )
    )
    return out


def alpha_judge(key: str, st: Setting, metric: str = "R@1") -> AlphaStable:
    """The α claim's judge on setting ``key``'s grid (with its own α), within the paper's spread."""
    angles = sorted({*st.alpha_grid, st.alpha})
    groups = tuple((a, alpha_group_name(key, a)) for a in angles)
    return AlphaStable(groups, alpha_margin(metric), st.name, metric)


def alpha_claim(
    key: str | None, st: Setting | None, metric: str = "R@1", test_images: int | None = None
) -> ClaimSpec:
    """α is stable over the paper's range: every pair of angles of setting ``key``'s α grid within
    the paper's own spread (:func:`alpha_margin`), paired by seed; the text says what it tests
    (the setting, its k and selection, the absolute margin against one test image's share of
    ``metric``, ``test_images``); untestable without a grid."""
    t_alpha, margin = REPORTED["alpha"], alpha_margin(metric)
    lo, hi = t_alpha.index.min(), t_alpha.index.max()
    text = (
        f"α is insensitive in {lo:g}°-{hi:g}° (every pair of angles within ±{100 * margin:.1f} "
        f"pts {metric})"
    )
    paper = (
        f'Fig. 2 (middle, Cars-196): "fairly stable in the range {lo:g}°-{hi:g}°"; {metric} '
        f"{t_alpha[metric].min():.1f}-{t_alpha[metric].max():.1f}, a spread of {100 * margin:.1f} "
        "pts (the margin)"
    )
    if key is None or st is None:
        test = Untestable(
            "not-run", "no α sweep at this profile", "the default profile's α grid on digits"
        )
        return ClaimSpec("alpha-stable", text, test, where="Fig. 2 (middle)", paper_evidence=paper)
    image = f", where one test image is {100 / test_images:.3g} pts" if test_images else ""
    text += (
        f"; tested on {st.name} (k = {st.k}, each run at its best test epoch: no validation "
        f"split), paired by seed, with the paper's absolute margin{image}"
    )
    judge = alpha_judge(key, st, metric)
    return ClaimSpec(
        "alpha-stable",
        text,
        Custom(judge, judge.evidence, "no-difference", paired=True),
        where="Fig. 2 (middle)",
        paper_evidence=paper,
    )


def stored_run_claims(settings: Mapping[str, Setting]) -> list[ClaimSpec]:
    """The claims judged on what every run stores: its loss curve (Fig. 2 left) and its recorded
    training seconds (the complexity paragraph)."""
    with_ours = tuple((k, st.name) for k, st in settings.items() if "ours" in st.methods)
    costly = tuple(m for m in COSTLIER if all(m in st.methods for st in settings.values()))
    if not with_ours:
        return []
    loss = LossDecreases(with_ours)
    seconds = TrainingSeconds(with_ours, tuple((m, NAMES[m]) for m in costly))
    out = [
        ClaimSpec(
            "objective-decreases",
            "The objective decreases during training (the first epoch's loss against the last, "
            "paired by run; each partition mines new triplets, so the curve is not one objective)",
            Custom(loss, loss.evidence, "every", paired=True),
            where="Fig. 2 (left)",
            paper_evidence=f"Fig. 2 (left, Cars-196): the loss over the first "
            f"{REPORTED_CONVERGENCE_EPOCHS} epochs, whole training set",
        ),
    ]
    if not costly:
        return out
    return out + [
        ClaimSpec(
            "cheaper-than-baselines",
            "Ours costs less than "
            + ", ".join(NAMES[m] for m in costly)
            + " (here: recorded training seconds per run, paired by seed)",
            Custom(seconds, seconds.evidence, "every", paired=True),
            where="Sec. Triplet-based Orthogonality-Promoting SSDML (complexity)",
            paper_evidence="theoretical only: ours O(dT_b + d²T_b + d²l); LRML O(d³); APLLR and "
            "APIT O(d³ + N³); no time is reported",
        ),
    ]


def _qualitative() -> list[ClaimSpec]:
    """The paper's figures read by eye: no measure to judge."""
    return [
        ClaimSpec(
            "tsne-separation",
            "With orthogonality the t-SNE embeddings are better separated (Fig. 2 right)",
            Untestable(
                "structurally-untestable",
                "a qualitative reading of a t-SNE plot, which has no measure and does not keep "
                "the embedding's distances; Table 4's metrics are the quantitative claim",
                "no run: the figure is shown, not judged",
            ),
            where="Fig. 2 (right)",
            paper_evidence="Fig. 2 (right, MNIST and CIFAR-10), qualitative",
        ),
        ClaimSpec(
            "retrieval-examples",
            "Ours retrieves better than the baselines on example queries (Fig. 3)",
            Untestable(
                "structurally-untestable",
                "a qualitative figure of a few chosen queries; Tables 1-2's Recall@K are the "
                "quantitative claim",
                "no run: the figure is shown, not judged",
            ),
            where="Fig. 3",
            paper_evidence="Fig. 3 (Cars-196), qualitative",
        ),
    ]


def untestable(settings: Mapping[str, Setting]) -> list[ClaimSpec]:
    """The claims no stored run tests, each with its typed reason and the run that would."""
    t3 = REPORTED["table3"]
    unsupervised = list(t3.index.drop("Ours"))
    retrain = "the default profile with that measurement added to every run (a retrain)"
    return [
        ClaimSpec(
            "orthogonality-avoids-collapse",
            "Orthogonality avoids a model collapse: without it, distinct, close examples are "
            "embedded at one point",
            Untestable(
                "not-run",
                "the runs store the spectrum of Lᵀz and a few neighbours, not the distances "
                "between distinct test examples in z or Lᵀz that would show points merging; the "
                "effective rank (our claim above) is not this",
                retrain + ": the nearest distinct test example's distance in z and Lᵀz",
            ),
            where="Sec. Triplet-based Orthogonality-Promoting SSDML; Table 4; Fig. 2 (right)",
            paper_evidence="not measured: the Johnson–Lindenstrauss near-isometry argument, "
            "Table 4's retrieval metrics and Fig. 2's t-SNE (MNIST, CIFAR-10)",
        ),
        *_qualitative(),
        ClaimSpec(
            "supervised-overfit",
            "The supervised-only baselines overfit the few labelled images",
            Untestable(
                "not-run",
                "the runs evaluate the test (and validation) classes only; no Recall@1 on the "
                "labelled training images is stored",
                retrain + ": Recall@1 on the labelled training images at every evaluation",
            ),
            where="Discussion (Table 5)",
            paper_evidence="stated, no measurement",
        ),
        ClaimSpec(
            "linear-in-batch",
            "The cost of a step is linear in the triplets per mini-batch T_b",
            Untestable(
                "not-run",
                "every run keeps one T_b per setting; no run varies it",
                "a timing sweep over T_b at the default profile (seconds per run on digits)",
            ),
            where="Sec. Triplet-based Orthogonality-Promoting SSDML (complexity)",
            paper_evidence="theoretical: O(dT_b + d²T_b + d²l); no time is reported",
        ),
        ClaimSpec(
            "beats-unsupervised",
            "Ours beats the unsupervised methods (Table 3)",
            Untestable(
                "not-run",
                f"none of the {len(unsupervised)} unsupervised methods "
                f"({', '.join(unsupervised)}) is implemented in dmlnb: the methods, not the data "
                "or the scale, are what is missing",
                "any profile once the methods are implemented (digits and Omniglot-small first)",
            ),
            where="Table 3",
            paper_evidence=reported_leader_sentence("table3"),
        ),
    ]


def claim_specs(
    settings: Mapping[str, Setting],
    alpha_key: str | None = None,
    metric: str = "R@1",
    test_images: Mapping[str, int] | None = None,
) -> list[ClaimSpec]:
    """Every claim of the chapter on ``settings`` (:func:`setting_claims` per setting with the
    proposed method, :func:`alpha_claim` on ``alpha_key``'s grid with its setting's
    ``test_images``, :func:`stored_run_claims`, :func:`untestable`)."""
    out = [
        c
        for key, st in settings.items()
        if "ours" in st.methods
        for c in setting_claims(key, st, metric)
    ]
    st = settings.get(alpha_key) if alpha_key is not None else None
    n = (test_images or {}).get(alpha_key) if alpha_key is not None else None
    return (
        out
        + [alpha_claim(alpha_key, st, metric, n)]
        + stored_run_claims(settings)
        + untestable(settings)
    )
