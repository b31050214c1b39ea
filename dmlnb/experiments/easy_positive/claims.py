"""The chapter's claims as :class:`~dmlnb.chapter.ClaimSpec` values, judged by
:func:`dmlnb.chapter.evaluate` (and under both protocols by
:func:`dmlnb.chapter.evaluate_both_ways`).

Every claim the chapter can test at a profile is a :class:`~dmlnb.chapter.Custom` test over the
chapter's verdict functions (:mod:`~dmlnb.experiments.easy_positive.verdicts`,
:mod:`~dmlnb.experiments.easy_positive.table_verdicts`): their comparisons carry guards the
vocabulary of :class:`~dmlnb.chapter.Beats` cannot say (a side on collapsed runs, an untuned
baseline, two rules that trained alike are not tested), and several are claims about every pair of
two sets of methods. A claim this profile cannot test (Tables 2 and 3 without their runs, an
optimum beyond our grid) is :class:`~dmlnb.chapter.Untestable` with its typed reason. Each judge
reads the runs when called (``record.best``), so the claims recompute under the papers' protocol;
those of Figures 2, 3 and 5 read the kept weights' statistics (:data:`KEPT_WEIGHTS_CLAIMS`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from dmlnb.chapter import ClaimSpec, Custom, RunSet, Untestable
from dmlnb.experiments.easy_positive.design import Study
from dmlnb.experiments.easy_positive.diagnostics import collapsed_groups, loss_curves
from dmlnb.experiments.easy_positive.runs import (
    figure_runs,
    group_size_points,
    paper_table_runs,
    semihard_runs,
    table1_recall,
)
from dmlnb.experiments.easy_positive.table_verdicts import (
    KEPT_WEIGHTS_CLAIMS,
    embedding_claims,
    paper_table_claims,
)
from dmlnb.experiments.easy_positive.verdicts import (
    ClaimInputs,
    group_size_claims,
    our_measurement_claims,
    semihard_values,
)
from dmlnb.reporting import Claim, Verdict

__all__ = [
    "CHAPTER",
    "claim_inputs",
    "build_claims",
    "ClaimContext",
    "declare_claims",
    "specs_of",
    "kept_weights",
]

CHAPTER = "01_easy_positive"


def claim_inputs(
    runs: RunSet, study: Study, images_per_class: int, paper_status: pd.DataFrame | None = None
) -> ClaimInputs:
    """:class:`ClaimInputs` from the chapter's runs, every metric read from the records'
    ``best`` now (so the claims recompute under either protocol); the statistics of Figures 2,
    3 and 5 from each record's stored summary (:func:`analysis_runs` stores it)."""
    table2, table3 = paper_table_runs(runs)
    with_map = "map_at_r" in study.config.eval_metrics
    semihard = semihard_values(semihard_runs(runs, study))
    return ClaimInputs(
        recall=group_size_points(runs, study, "R@1"),
        analysis={
            m: [r.record.data.get("analysis") for r in rs]
            for m, rs in figure_runs(runs, study).items()
        },
        table1=table1_recall(runs, study),
        key_group_size=study.key_group_size,
        images_per_class=images_per_class,
        profile=study.profile,
        paper_status=paper_status,
        table2={ds: [r.metrics["R@1"] for r in rs] for ds, rs in table2.items()},
        table3=[r.metrics["R@1"] for r in table3],
        collapsed=collapsed_groups(loss_curves(runs, study)),
        semihard=semihard[0],
        semihard_collapsed=semihard[1],
        semihard_same=semihard[2],
        map_at_r=group_size_points(runs, study, "MAP@R") if with_map else None,
    )


def build_claims(inputs: ClaimInputs) -> list[Claim]:
    """The paper's claims (Figure 4, Figures 2, 3 and 5, Tables 1 to 3), each with its verdict by
    the book's rule from ``inputs`` (the chapter's own comparisons:
    :func:`~dmlnb.experiments.easy_positive.verdicts.our_measurement_claims`)."""
    return [
        *group_size_claims(
            inputs.recall, inputs.key_group_size, inputs.images_per_class, inputs.collapsed
        ),
        *embedding_claims(inputs.analysis, inputs.key_group_size, inputs.collapsed),
        *paper_table_claims(inputs),
    ]


@dataclass(frozen=True, eq=False)
class ClaimContext:
    """What the claims read besides the runs: the ``study``, the training images per class of
    its dataset and the paper profile's run status (:func:`dmlnb.reporting.paper_run_status`)."""

    study: Study
    images_per_class: int
    paper_status: pd.DataFrame | None = None
    _judged: dict[str, list[Claim]] = field(default_factory=dict, repr=False)

    def claims(self, runs: RunSet) -> list[Claim]:
        """Every claim, the paper's then ours, judged on ``runs`` now (computed once per state
        of the records: their selected epochs and stored statistics)."""
        state = json.dumps(
            [[r.best, r.data.get("analysis")] for r in runs.records()], sort_keys=True, default=str
        )
        if state not in self._judged:
            inputs = claim_inputs(runs, self.study, self.images_per_class, self.paper_status)
            self._judged.clear()
            self._judged[state] = [
                *build_claims(inputs),
                *our_measurement_claims(inputs, inputs.map_at_r),
            ]
        return self._judged[state]


@dataclass(frozen=True, eq=False)
class _Judge:
    """Claim ``index`` of :meth:`ClaimContext.claims`: its verdict and our evidence."""

    context: Any  # a ClaimContext: .claims(runs)
    index: int

    def __call__(self, runs: RunSet) -> Verdict:
        return self.context.claims(runs)[self.index].verdict

    def evidence(self, runs: RunSet) -> str:
        return self.context.claims(runs)[self.index].our_evidence


def _place(text: str, ours: bool, cell: int) -> tuple[str, str]:
    """A claim's id and where the paper makes it, from its text."""
    first = text.split()[0].rstrip(":")
    if ours:
        metric = text.split()[-1].replace("@", "").lower()
        if "beat HP" in text:
            return f"ours-easy-beat-hard-{metric}", ""
        if "beat N-pair" in text:
            return "ours-easy-beat-npair", ""
        if text.startswith("EPSHN with the strict"):
            return f"ours-semihard-strict-beats-inclusive-{metric}", ""
        return f"ours-{first.lower()}-falls", ""
    if "group size grows" in text:
        return f"fig4-{first}-{'rises' if 'improves' in text else 'falls'}", "Sec. 6.1, Figure 4"
    if text.startswith("The contrast"):
        return "fig4-contrast", "Sec. 6.1, Figure 4"
    if "peaks at an interior" in text:
        return f"fig4-optimum{'-' + first if first != 'Recall@1' else ''}", "Sec. 6.1, 6.3"
    if text in KEPT_WEIGHTS_CLAIMS:
        fig = ("Figure 2", "Figure 3", "Figure 5")[KEPT_WEIGHTS_CLAIMS.index(text)]
        return f"fig{fig[-1]}-embedding", fig
    if text.startswith("EPSHN beats"):
        return f"table1-cell{cell}", "Table 1"
    if text.startswith("EPSHN512"):
        return f"table2-{text.split(' on ')[1].split()[0].lower()}", "Table 2"
    return "table3-hotels50k", "Table 3, Sec. 6.3"


def _untestable(claim: Claim) -> Untestable | None:
    """The typed reason of a claim this profile cannot test, from its verdict now."""
    v = claim.verdict
    if str(v) != "not tested at this scale" or math.isfinite(v.effect):
        return None
    if claim.our_evidence == "not run":
        return Untestable("needs-paper-data", v.note, "the paper profile, with a GPU and the data")
    if "peaks at an interior" in claim.claim:
        return Untestable("needs-paper-data", v.note, "the paper profile's grid beyond ours")
    return None


def declare_claims(context: ClaimContext, runs: RunSet) -> list[ClaimSpec]:
    """The chapter's claims at ``context.study``'s profile (:func:`specs_of`); ``runs`` decides
    which exist (Tables 2 and 3 are judged only where their runs are declared)."""
    paper = len(build_claims(claim_inputs(runs, context.study, context.images_per_class)))
    return specs_of(context, context.claims(runs), paper)


def specs_of(context: Any, claims: Sequence[Claim], paper: int) -> list[ClaimSpec]:
    """``claims`` (the first ``paper`` the paper's, the rest ours) as declarations: their texts,
    where the paper makes them (or ``origin="ours"``), the paper's evidence and the test (a
    :class:`Custom` judged by claim ``i`` of ``context.claims(runs)``, or :class:`Untestable`
    with the reason when this profile cannot test it)."""
    out, cells = [], 0
    for i, c in enumerate(claims):
        cells += c.claim.startswith("EPSHN beats")
        ident, where = _place(c.claim, i >= paper, cells - 1)
        judge = _Judge(context, i)
        test: Any = _untestable(c) or Custom(judge, evidence=judge.evidence)
        origin = "ours" if i >= paper else "paper"
        out.append(ClaimSpec(ident, c.claim, test, where, origin, c.paper_evidence))
    return out


def kept_weights(text: str) -> bool:
    """Whether a claim reads the kept weights' statistics (Figures 2, 3 and 5): no protocol
    recomputes it."""
    return text in KEPT_WEIGHTS_CLAIMS
