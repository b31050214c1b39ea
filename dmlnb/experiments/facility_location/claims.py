"""The paper's claims declared as :class:`~dmlnb.chapter.ClaimSpec` values and judged by
:func:`dmlnb.chapter.evaluate` (the book's one rule).

:func:`claim_specs` declares them from the study (which tables ran, their metrics, the two class
ratios on one test set), the Figure 2 toy, the timing of Algorithm 1 and Lemma 1's trace:

* per table and metric: the clustering loss beats the three baselines (:class:`~dmlnb.chapter.
  BeatsEvery`, paired by seed); a table without runs at this profile is
  :class:`~dmlnb.chapter.Untestable`;
* Sec. 3.5: the choice of ``C / m`` does not change the clustering loss's results
  (:class:`~dmlnb.chapter.NoDifference`, paired by seed);
* Sec. 3.4: Algorithm 1 is linear in the batch size (:class:`LinearTime`, on the stored timing
  of the listing) and adds little overhead (untestable with this backbone); Algorithm 2 only
  improves on the greedy set and ``F`` is large compared to the margin term, on the runs' logs
  (:mod:`~dmlnb.experiments.facility_location.logged`); it converges within ``T = 5`` passes
  (:class:`Converges`, on the traced batches);
* Lemma 1 as the paper states it, per pass on L2-normalised batches (:class:`Lemma1`), and our
  measurement per update (:class:`Lemma1Updates`);
* Sec. 3.5: normalisation helps, greedy initialisation beats random: untestable (no such runs);
* Figure 2 per paper local loss of the toy (:class:`StaysApart`) and Figure 3 (:class:`Merges`).

The judges of the :class:`~dmlnb.chapter.Custom` tests are frozen dataclasses: their docstring's
first line is the evidence :func:`dmlnb.chapter.evaluate` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dmlnb.chapter import (
    BeatsEvery,
    ClaimSpec,
    Custom,
    JudgedClaim,
    NoDifference,
    RunSet,
    Side,
    Untestable,
    write_claims_json,
)
from dmlnb.experiments.facility_location.diagnostics import scaling_slopes
from dmlnb.experiments.facility_location.lemma1 import (
    convergence_verdict,
    lemma1_pass_verdict,
    lemma1_verdict,
)
from dmlnb.experiments.facility_location.logged import clustering_logs, logged_claims
from dmlnb.experiments.facility_location.presets import Study
from dmlnb.experiments.facility_location.runs import KeptRun
from dmlnb.experiments.facility_location.spec import (
    CHAPTER,
    METHODS,
    READER_NAMES,
    REPORTED,
    REPORTED_SETTING,
    ROW_NAMES,
)
from dmlnb.experiments.facility_location.tables import claim_metrics, reported_margins
from dmlnb.experiments.facility_location.toy import MERGE_DEGREES, PAPER_LOCAL_TOY_LOSSES
from dmlnb.reporting import (
    HOLDS,
    Verdict,
    compare_to_band,
    compare_to_threshold,
    not_tested,
    order_band,
    qualify,
    shape_unchecked,
)

__all__ = [
    "PAPER_34",
    "LinearTime",
    "Lemma1",
    "Lemma1Updates",
    "Converges",
    "StaysApart",
    "Merges",
    "claim_specs",
    "save_claims",
]

PAPER_34 = (
    "Sec. 3.4: 'The running time of the algorithm is O(|Y|^3 |V|) ... linear in the size of the "
    "minibatch, and hence does not add much overhead on top of the gradient computation'"
)
BASELINES = ("triplet", "lifted", "npair")
#: The tables' comparisons are paired by seed: every method of a seed starts from the same
#: initial weights and sees the same batches (:class:`~dmlnb.samplers.ClassRatioSampler`), and
#: the class ratios' runs share their seeds and test set (sides that share seeds by design are
#: tested paired).
PAIRED = True


def _side(table: str, method: str) -> Side:
    """The runs of ``method`` in ``table``, shown by the name a reader knows
    (:data:`~dmlnb.experiments.facility_location.spec.READER_NAMES`)."""
    return Side(table, method, READER_NAMES[method])


@dataclass(frozen=True)
class LinearTime:
    """Per repeat, the exponent of the greedy inference's time in |V| within 1 +- 0.5"""

    scaling: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        low, high = order_band(1)
        return shape_unchecked(
            compare_to_band(scaling_slopes(self.scaling), low, high),
            self.scaling.groupby("repeat")["batch"].nunique().tolist(),
        )  # each repeat's slope fits its sizes


@dataclass(frozen=True)
class Lemma1:
    """Every pass of Algorithm 2 as listed, traced on L2-normalised batches like the runs'; one
    pass that ends below its start refutes the lemma"""

    traced: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        return lemma1_pass_verdict(self.traced)


@dataclass(frozen=True)
class Lemma1Updates:
    """Every traced update of Algorithm 2 as listed; one that lowers A refutes the statement"""

    traced: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        return lemma1_verdict(self.traced)


@dataclass(frozen=True)
class Converges:
    """Every traced L2-normalised batch: Algorithm 2 as listed reaches a set a further pass
    leaves unchanged within T = 5 passes"""

    traced: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        return convergence_verdict(self.traced)


@dataclass(frozen=True)
class StaysApart:
    """The toy's split class stays at least the merge threshold apart under one local loss, per
    seed"""

    toy: pd.DataFrame
    loss: str

    def __call__(self, runs: RunSet) -> Verdict:
        f = self.toy[self.toy["loss"] == self.loss]
        if (f["max_loss"] == 0).all():
            return not_tested(
                f"the toy's own layout leaves it untested, not the scale: {self.loss}'s loss is 0 "
                "at every step of every seed (every negative it may mine lies farther from the "
                "anchor than the positive by more than the margin), so it moves no point"
            )
        gaps = f["gap_degrees"].to_numpy(dtype=float)
        return compare_to_threshold(gaps, MERGE_DEGREES, higher_is_better=True, unit="°")


@dataclass(frozen=True)
class Merges:
    """The toy's split class ends less than the merge threshold apart under the clustering
    loss"""

    toy: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        toy = self.toy
        gaps = toy[toy["loss"] == "clustering"]["gap_degrees"].to_numpy(dtype=float)
        verdict = compare_to_threshold(gaps, MERGE_DEGREES, higher_is_better=False, unit="°")
        too = [
            n
            for n in PAPER_LOCAL_TOY_LOSSES
            if len(f := toy[toy["loss"] == n]) and bool((f["merged"] == 1).all())
        ]
        if str(verdict) != HOLDS or not too:
            return verdict
        return qualify(
            verdict,
            f"{' and '.join(too)} merge{'s' if len(too) == 1 else ''} it too, so the toy does not "
            "show the contrast with the local losses",
        )


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def table_claims(study: Study, profile: str, ran: Sequence[str]) -> list[ClaimSpec]:
    """Per reported table: per metric of the table's runs "the clustering loss beats the three
    baselines", paired by seed (a Recall@K near its ceiling too: where every side is alike the
    rule finds it inconclusive), or one untestable claim without runs."""
    out = []
    specs = {t.table: t for t in study.tables}
    margins = reported_margins().set_index(["table", "metric"])
    analogue = "" if profile == "paper" else " (analogue)"
    for table, reported in REPORTED.items():
        where = f"{table} ({REPORTED_SETTING[table].split(',')[0]})"
        if table not in ran:
            m = margins.loc[table]
            gpu = profile == "paper"
            out.append(
                ClaimSpec(
                    _slug(table),
                    f"{table}: the clustering loss gives a higher NMI and Recall@K than triplet "
                    "semi-hard, lifted structure and N-pairs",
                    Untestable(
                        "needs-gpu" if gpu else "needs-paper-data",
                        "not run here: it needs a CUDA GPU and the dataset (see the run status "
                        "table)"
                        if gpu
                        else f"profile {profile} runs no analogue of {table} "
                        f"({REPORTED_SETTING[table]})",
                        f"the paper profile on {REPORTED_SETTING[table].split(',')[0]} (a GPU)",
                    ),
                    where=table,
                    paper_evidence=f"{where}: margin over the best baseline "
                    f"{m['margin'].min():+.1f} to {m['margin'].max():+.1f} points across "
                    f"{', '.join(m.index)}",
                )
            )
            continue
        for metric in claim_metrics(specs[table]):
            test = BeatsEvery(
                _side(table, "clustering"),
                tuple(_side(table, m) for m in BASELINES),
                metric,
                paired=PAIRED,
            )
            paper = (
                f"{where}: "
                + ", ".join(
                    f"{ROW_NAMES[m]} {reported.loc[ROW_NAMES[m], metric]:.1f}" for m in METHODS
                )
                if metric in reported
                else "—"
            )
            out.append(
                ClaimSpec(
                    f"{_slug(table)}-{_slug(metric)}",
                    f"{table}{analogue}: the clustering loss gives a higher {metric} than triplet "
                    "semi-hard, lifted structure and N-pairs",
                    test,
                    where=table,
                    paper_evidence=paper,
                )
            )
    return out


def ratio_claims(study: Study, ran: Sequence[str]) -> list[ClaimSpec]:
    """Sec. 3.5's "the choice of C/m does not change the results", on the clustering loss at the
    first two ratios the profile runs on one dataset (none when no dataset has two)."""
    by_data: dict[str, dict[float, str]] = {}
    for t in study.tables:
        if t.table in ran:
            by_data.setdefault(t.config.dataset, {})[t.class_ratio] = t.table
    ratios = max(by_data.values(), key=len, default={})
    if len(ratios) < 2:
        return []
    (ra, a), (rb, b) = sorted(ratios.items())[:2]
    return [
        ClaimSpec(
            f"class-ratio-{_slug(metric)}",
            f"Sec. 3.5: the choice of C/m ({ra:g} vs {rb:g}) does not lead to significant "
            f"changes in the clustering loss's {metric}",
            NoDifference(
                Side(a, "clustering", f"C/m {ra:g}"),
                Side(b, "clustering", f"C/m {rb:g}"),
                metric,
                paired=PAIRED,
            ),
            where="Sec. 3.5",
            paper_evidence="Sec. 3.5: 'We tried three different settings C/m = {0.25, 0.50, 0.75} "
            "and the choice of the ratio did not lead to significant changes in the experimental "
            "results' (no numbers)",
        )
        for metric in ("NMI", "R@1")
    ]


def method_claims(
    scaling: pd.DataFrame | None, traced: pd.DataFrame, logs: pd.DataFrame | None = None
) -> list[ClaimSpec]:
    """Sec. 3.4 (linear time, on the stored ``scaling``; overhead, untestable with this backbone;
    Algorithm 2 only improves on the greedy set and F dominates the margin term, on the runs'
    ``logs`` (:func:`clustering_logs`); convergence within T = 5, on ``traced``), Lemma 1 per
    pass and our per-update measurement (on ``traced``) and Sec. 3.5's two untested statements."""
    out = []
    if scaling is not None and len(scaling):
        out.append(
            ClaimSpec(
                "algorithm1-linear",
                "Algorithm 1 (greedy inference) runs in time linear in the batch size |V| at "
                "fixed |Y|",
                Custom(LinearTime(scaling), shape="band", paired=False),
                where="Sec. 3.4",
                paper_evidence=PAPER_34,
            )
        )
    out.append(
        ClaimSpec(
            "inference-overhead",
            "The loss-augmented inference does not add much overhead on top of the gradient "
            "computation",
            Untestable(
                "needs-paper-data",
                "the overhead is relative to Inception-BN's gradient computation; here the "
                "network is a 4-block CNN whose step is far cheaper, so the logged shares (our "
                "evidence) measure another ratio: at this scale they speak against 'not much "
                "overhead', and only the paper's backbone can test the claim",
                "the paper profile with its Inception-BN-like backbone",
            ),
            where="Sec. 3.4",
            paper_evidence=PAPER_34 + " (no number given)",
        )
    )
    if logs is not None and len(logs):
        out += logged_claims(logs)
    return out + [
        ClaimSpec(
            "converges-quickly",
            "Algorithm 2 converges quickly in practice: T = 5 passes suffice",
            Custom(Converges(traced), shape="every", paired=False),
            where="Sec. 3.4",
            paper_evidence="Sec. 3.4: 'In practice, it converges quickly, so we run the algorithm "
            "for T = 5 iterations only' (no numbers)",
        ),
        ClaimSpec(
            "lemma1",
            "Algorithm 2 monotonically increases the objective A over its passes (Lemma 1), "
            "with L2-normalised embeddings as in the paper",
            Custom(Lemma1(traced), shape="trace", paired=False),
            where="Lemma 1",
            paper_evidence="Lemma 1: 'Algorithm 2 monotonically increases the objective function "
            "A(S)'; the proof: each update keeps the medoid or takes the member that maximises A",
        ),
        ClaimSpec(
            "lemma1-per-update",
            "Every single update of Algorithm 2 as listed keeps or raises A, as the proof of "
            "Lemma 1 argues",
            Custom(Lemma1Updates(traced), shape="trace", paired=False),
            origin="ours",
        ),
        *_untested_choices(),
    ]


def _untested_choices() -> list[ClaimSpec]:
    """Sec. 3.5's statements on normalisation and initialisation (no such runs here)."""
    return [
        ClaimSpec(
            "no-normalisation",
            "The clustering loss slightly underperforms without L2 normalisation of the embedding",
            Untestable(
                "not-run",
                "no run of the clustering loss without normalisation at this profile",
                "this profile, the clustering loss trained with normalize=False",
            ),
            where="Sec. 3.5",
            paper_evidence="Sec. 3.5: 'The model slightly underperformed when we omitted the "
            "embedding normalization' (no numbers)",
        ),
        ClaimSpec(
            "random-initialisation",
            "Algorithm 2 from a random initialisation works less well than from the greedy "
            "solution",
            Untestable(
                "not-run",
                "no run with a random initialisation at this profile",
                "this profile, Algorithm 2 started from random medoids",
            ),
            where="Sec. 3.5",
            paper_evidence="Sec. 3.5: 'it didn't work as well as initializing the algorithm with "
            "the greedy solution' (no numbers)",
        ),
    ]


def toy_claims(toy: pd.DataFrame) -> list[ClaimSpec]:
    """Figure 2 per paper local loss of the toy, Figure 3 on the clustering loss."""
    out = [
        ClaimSpec(
            f"figure2-{_slug(name)}",
            "Figure 2: in its layout a local loss cannot merge a class split by other "
            f"classes -- {name} (in the toy: its two groups end at least {MERGE_DEGREES:g}° "
            "apart, our threshold)",
            Custom(StaysApart(toy, name), shape="threshold", paired=False),
            where="Figure 2",
            paper_evidence="Figure 2: 'Example failure mode for local metric learning methods "
            "... the purple clusters can't be merged'",
        )
        for name in PAPER_LOCAL_TOY_LOSSES
        if (toy["loss"] == name).any()
    ]
    if (toy["loss"] == "clustering").any():
        out.append(
            ClaimSpec(
                "figure3",
                "Figure 3: the clustering loss merges the split class (in the toy: its two "
                f"groups end less than {MERGE_DEGREES:g}° apart, our threshold)",
                Custom(Merges(toy), shape="threshold", paired=False),
                where="Figure 3",
                paper_evidence="Figure 3 (illustration)",
            )
        )
    return out


def claim_specs(
    study: Study,
    profile: str,
    ran: Sequence[str],
    toy: pd.DataFrame,
    scaling: pd.DataFrame | None,
    traced: pd.DataFrame,
    all_runs: Sequence[KeptRun] = (),
) -> list[ClaimSpec]:
    """Every claim of the chapter, in the order the chapter shows them: the tables' (``ran``:
    the tables with runs), the class ratio's, the methods' (``scaling``: the stored timing,
    ``traced``: :func:`~dmlnb.experiments.facility_location.lemma1.lemma1_per_update`,
    ``all_runs``: the runs whose logs :func:`clustering_logs` reads) and the toy's (``toy``:
    :func:`~dmlnb.experiments.facility_location.toy.toy_frame`)."""
    assert set(BASELINES) | {"clustering"} == set(METHODS)
    return [
        *table_claims(study, profile, ran),
        *ratio_claims(study, ran),
        *method_claims(scaling, traced, clustering_logs(all_runs)),
        *toy_claims(toy),
    ]


def save_claims(folder: str | Path, judged: Sequence[JudgedClaim], profile: str) -> Path:
    """``folder/claims.json`` of the chapter by :func:`dmlnb.chapter.write_claims_json` (which
    leaves a file that already holds these claims as it is: a render writes nothing under
    ``results``)."""
    return write_claims_json(folder, judged, chapter=CHAPTER, profile=profile)
