"""The SSDML chapter's claims declared as data (:class:`dmlnb.chapter.ClaimSpec`), judged by
:func:`dmlnb.chapter.evaluate` on the chapter's :class:`~dmlnb.chapter.RunSet`.

Per setting (group ``key`` of :func:`~dmlnb.experiments.ssdml.spec.groups`): ours beats the deep
SSDML baselines that run there (:class:`~dmlnb.chapter.BeatsEvery`), ours improves on its network
at initialisation (:class:`~dmlnb.experiments.ssdml.judges.OverInitial`: at most inconclusive
where the selection favours it), orthogonality keeps a higher effective rank and improves every
metric (:class:`~dmlnb.experiments.ssdml.judges.EffectiveRank`, :class:`EveryMetric`), and the
unlabelled data helps over supervised-only training (``BeatsEvery``). Every one of them is paired
by seed: the methods of a setting share their seeds by design, and a seed fixes the run's labelled
draw, its partitions of the unlabelled data and its network at initialisation
(:func:`~dmlnb.experiments.ssdml.network.load_splits`,
:func:`~dmlnb.ssdml.algorithm.partition_indices`). No comparison sets runs aside
(:class:`~dmlnb.chapter.SetAside`): no metric is near its ceiling, and a collapse of the
embedding is what the orthogonality claims measure, not a reason to leave runs out.

Then α is stable over the swept range (:class:`~dmlnb.experiments.ssdml.judges.AlphaStable`,
within the paper's own spread, :func:`~dmlnb.experiments.ssdml.reported.alpha_margin`; unpaired:
:func:`~dmlnb.reporting.every_pair_equivalent` has no paired form, though the angles share their
seeds), and the two claims this scale cannot test (:class:`~dmlnb.chapter.Untestable`, the
reason computed from the settings).
"""

from __future__ import annotations

from collections.abc import Mapping

from dmlnb.chapter import BeatsEvery, ClaimSpec, Custom, Side, Untestable
from dmlnb.experiments.ssdml.judges import (
    AlphaStable,
    EffectiveRank,
    EveryMetric,
    OverInitial,
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
from dmlnb.experiments.ssdml.settings import SEMI_SUPERVISED, Setting
from dmlnb.experiments.ssdml.spec import alpha_group_name

__all__ = ["EFFECTIVE_RANK_CLAIM", "claim_specs", "setting_claims", "alpha_claim", "untestable"]

#: The first words of the effective-rank claims (read from the kept weights: no protocol
#: recomputes them, :func:`dmlnb.chapter.evaluate_both_ways` ``kept_weights``).
EFFECTIVE_RANK_CLAIM = "Orthogonality keeps a higher effective rank"


def _beats(key: str, st: Setting, others: tuple[str, ...], metric: str) -> BeatsEvery:
    return BeatsEvery(Side(key, "ours"), tuple(Side(key, m) for m in others), metric, paired=True)


def setting_claims(key: str, st: Setting, metric: str = "R@1") -> list[ClaimSpec]:
    """The claims judged on one setting's runs (group ``key``), as far as its methods allow."""
    t4, t5 = reported_orthogonality_drops(), REPORTED["table5"]
    base = tuple(m for m in SEMI_SUPERVISED if m in st.methods)
    scope = (
        f"the {len(base)} of {len(SEMI_SUPERVISED)} deep SSDML baselines run here"
        if len(base) < len(SEMI_SUPERVISED)
        else "the deep SSDML baselines"
    )
    sup = tuple(m for m in ("triplet", "angular") if m in st.methods)
    out = [
        ClaimSpec(
            f"{key}-beats-baselines",
            f"Ours beats {scope} ({st.name}, {metric})",
            _beats(key, st, base, metric),
            where="Tables 1-2",
            paper_evidence=reported_best(metric),
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
        every = bool((t4 > 0).all().all())
        out += [
            ClaimSpec(
                f"{key}-effective-rank",
                f"{EFFECTIVE_RANK_CLAIM} of the test embedding ({st.name})",
                Custom(EffectiveRank(key, st), EffectiveRank(key, st).evidence, paired=True),
                where="Table 4, Fig. 2 (right)",
                paper_evidence=f"Table 4 ({', '.join(t4.index)}): w/ orth higher in "
                f"{int((t4 > 0).sum().sum())} of {t4.size} cells; Fig. 2 (right, t-SNE, MNIST and "
                "CIFAR-10); the paper argues that orthogonality avoids a collapse, which it does "
                "not measure",
            ),
            ClaimSpec(
                f"{key}-orthogonality-every-metric",
                f"Orthogonality improves every metric ({st.name}, {', '.join(M5)})",
                Custom(EveryMetric(key), EveryMetric(key).evidence, "every", paired=True),
                where="Table 4",
                paper_evidence=f"Table 4: {'every' if every else 'not every'} metric lower "
                f"without orthogonality on {', '.join(t4.index.get_level_values(0).unique())}; "
                f"{metric} w/ minus w/o: "
                + ", ".join(f"{d} {v:+.1f}" for d, v in t4[metric].items()),
            ),
        ]
    out.append(
        ClaimSpec(
            f"{key}-unlabelled-data-helps",
            "Unlabelled data helps over supervised-only training with the same labels "
            f"({st.name}, {metric})",
            _beats(key, st, sup, metric),
            where="Table 5",
            paper_evidence=f"Table 5 (CUB-200): ours {t5.at['Ours', metric]:.1f} vs triplet "
            f"{t5.at['Triplet', metric]:.1f} / angular {t5.at['Angular', metric]:.1f}",
        )
    )
    return out


def alpha_claim(key: str | None, st: Setting | None, metric: str = "R@1") -> ClaimSpec:
    """α is stable over the paper's range: every pair of angles of setting ``key``'s α grid within
    the paper's own spread (:func:`alpha_margin`); untestable without a grid."""
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
            "needs-gpu", "no α sweep at this profile", "the default or paper profile's α grid"
        )
        return ClaimSpec("alpha-stable", text, test, where="Fig. 2 (middle)", paper_evidence=paper)
    angles = sorted({*st.alpha_grid, st.alpha})
    judge = AlphaStable(tuple((a, alpha_group_name(key, a)) for a in angles), margin, st.name)
    return ClaimSpec(
        "alpha-stable",
        text,
        Custom(judge, judge.evidence, "no-difference", paired=False),
        where="Fig. 2 (middle)",
        paper_evidence=paper,
    )


def untestable(settings: Mapping[str, Setting]) -> list[ClaimSpec]:
    """The claims this chapter cannot test, with the reason computed from the settings."""
    runs_here = "; ".join(
        f"{st.name}: {st.config['epochs']} epochs in "
        f"{-(-st.config['epochs'] // st.epochs_per_partition)} partitions"
        for st in settings.values()
    )
    t3 = REPORTED["table3"]
    return [
        ClaimSpec(
            "objective-decreases",
            "The objective decreases steadily during training (Fig. 2 left)",
            Untestable(
                "needs-gpu",
                f"{runs_here}, triplets re-mined per partition, against "
                f"{REPORTED_CONVERGENCE_EPOCHS} epochs on one set in the paper",
                f"the paper profile on Cars-196 ({REPORTED_CONVERGENCE_EPOCHS} epochs, the whole "
                "training set)",
            ),
            where="Fig. 2 (left)",
            paper_evidence=f"Fig. 2 (left, Cars-196): the loss over the first "
            f"{REPORTED_CONVERGENCE_EPOCHS} epochs, whole training set",
        ),
        ClaimSpec(
            "beats-unsupervised",
            "Ours beats the unsupervised methods (Table 3)",
            Untestable(
                "needs-paper-data",
                f"none of the {len(t3.index.drop('Ours'))} unsupervised methods is "
                "reimplemented here",
                "the paper profile on CUB-200 and Cars-196 with the unsupervised methods "
                "implemented",
            ),
            where="Table 3",
            paper_evidence=reported_leader_sentence("table3"),
        ),
    ]


def claim_specs(
    settings: Mapping[str, Setting], alpha_key: str | None = None, metric: str = "R@1"
) -> list[ClaimSpec]:
    """Every claim of the chapter on ``settings`` (:func:`setting_claims` per setting with the
    proposed method, :func:`alpha_claim` on ``alpha_key``'s grid, :func:`untestable`)."""
    out = [
        c
        for key, st in settings.items()
        if "ours" in st.methods
        for c in setting_claims(key, st, metric)
    ]
    st = settings.get(alpha_key) if alpha_key is not None else None
    return out + [alpha_claim(alpha_key, st, metric)] + untestable(settings)
