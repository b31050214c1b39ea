"""Sec. 3.4's statements that the clustering runs' logs test (the :class:`~dmlnb.losses.
facility_location.InsideLossHook` logs ``F(X, S_PAM)``, the loss-augmented score and the greedy
and refined objectives at every step): Algorithm 2 only improves on the greedy set
(:class:`OnlyImproves`) and ``F`` is large compared to the margin term (:class:`FDominates`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dmlnb.chapter import ClaimSpec, Custom, RunSet
from dmlnb.experiments.facility_location.diagnostics import inside_loss_frame
from dmlnb.experiments.facility_location.runs import KeptRun
from dmlnb.experiments.facility_location.spec import PAM_TOLERANCE
from dmlnb.reporting import Verdict, holds_for_every

__all__ = ["OnlyImproves", "FDominates", "clustering_logs", "logged_claims", "logged_evidence"]


def clustering_logs(all_runs: Sequence[KeptRun]) -> pd.DataFrame:
    """The logs of the clustering runs with Algorithm 2 as listed (the tables' and the margin
    ablation's), one row per logged step (:func:`~.diagnostics.inside_loss_frame`) with ``run``
    (its name) and ``margin`` (``augmented - predicted = gamma (1 - NMI)``)."""
    frames = [
        inside_loss_frame([r]).assign(run=r.name)
        for r in all_runs
        if r.method == "clustering" and r.spec.get("refinement", "paper") == "paper"
    ]
    frames = [f for f in frames if "refined" in f]
    if not frames:
        return pd.DataFrame(columns=["run", "greedy", "refined", "predicted", "margin"])
    f = pd.concat(frames, ignore_index=True)
    return f.assign(margin=f["augmented"] - f["predicted"])


@dataclass(frozen=True)
class OnlyImproves:
    """Every logged training step of the clustering runs (Algorithm 2 as listed): the refined
    set's A at or above the greedy set's"""

    logs: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        f = self.logs
        tol = PAM_TOLERANCE * f["greedy"].abs().clip(lower=1.0)
        return holds_for_every((f["refined"] >= f["greedy"] - tol).tolist(), "logged steps")


@dataclass(frozen=True)
class FDominates:
    """Every logged training step of the clustering runs: |F(X, S_PAM)| above the margin term
    gamma (1 - NMI) (our threshold: the ratio 1, the weakest reading of 'large compared to')"""

    logs: pd.DataFrame

    def __call__(self, runs: RunSet) -> Verdict:
        f = self.logs
        return holds_for_every((f["predicted"].abs() > f["margin"]).tolist(), "logged steps")


def logged_claims(logs: pd.DataFrame) -> list[ClaimSpec]:
    """Sec. 3.4's two statements the runs' logs test (:class:`OnlyImproves`,
    :class:`FDominates`)."""
    return [
        ClaimSpec(
            "pam-only-improves",
            "Algorithm 2 can only improve over the greedy solution",
            Custom(
                OnlyImproves(logs),
                lambda runs: logged_evidence(logs, "improves"),
                shape="every",
            ),
            where="Sec. 3.4",
            paper_evidence="Sec. 3.4: 'The following lemma states that the algorithm can only "
            "improve over the greedy solution'",
        ),
        ClaimSpec(
            "f-dominates-margin",
            "Throughout training the facility location term F is large compared to the margin "
            "term (in the runs: |F| above gamma (1 - NMI) at every logged step, our threshold)",
            Custom(
                FDominates(logs),
                lambda runs: logged_evidence(logs, "dominates"),
                shape="every",
            ),
            where="Sec. 3.4",
            paper_evidence="Sec. 3.4: 'We observed that throughout the learning process, this "
            "term is large compared to the second, margin term' (no numbers)",
        ),
    ]


def logged_evidence(logs: pd.DataFrame, what: str) -> str:
    """The numbers a logged claim rests on: for ``"improves"`` the steps where Algorithm 2 ends
    strictly above, at and below the greedy set; for ``"dominates"`` the ratio |F| / margin term
    (median, lowest) over the logged steps."""
    runs, steps = logs["run"].nunique(), len(logs)
    if what == "improves":
        gain = logs["refined"] - logs["greedy"]
        tol = PAM_TOLERANCE * logs["greedy"].abs().clip(lower=1.0)
        return (
            f"the InsideLossHook's log, {steps} steps of {runs} clustering runs (Algorithm 2 as "
            f"listed): refined A above the greedy set's at {int((gain > tol).sum())}, equal at "
            f"{int((gain.abs() <= tol).sum())}, below at {int((gain < -tol).sum())}"
        )
    ratio = logs["predicted"].abs() / logs["margin"]
    return (
        f"the InsideLossHook's log, {steps} steps of {runs} clustering runs: |F(X, S_PAM)| over "
        f"the margin term gamma (1 - NMI), median {ratio.median():.1f}, lowest {ratio.min():.2f}"
    )
