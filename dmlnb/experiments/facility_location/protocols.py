"""The chapter's claims under three ways of choosing each run's epoch: on the validation classes
(the verdicts the chapter states), on the test classes (the optimistic protocol of other papers)
and the last epoch (this paper's protocol: it trains a fixed number of iterations and reports the
weights at the end, Sec. 4)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pandas as pd

from dmlnb.chapter import ClaimSpec, RunSet, evaluate
from dmlnb.experiments.facility_location.runs import recorded
from dmlnb.reporting import Verdict, verdict_category
from dmlnb.selection import selected_on

if TYPE_CHECKING:
    from dmlnb.records.run_record import RunRecord

__all__ = ["PROTOCOLS", "at_last_epoch", "protocol_verdicts", "category_changes"]

#: The three protocols' column headings, in the order the table shows them.
PROTOCOLS = {
    "validation": "verdict, best epoch on validation classes",
    "test": "verdict, best epoch on test classes (optimistic; other papers' protocol)",
    "last": "verdict, last epoch (this paper's protocol: a fixed number of iterations)",
}
#: The columns that say whether a protocol puts a claim in another category than validation.
CHANGES = {
    "test": "category changes, test-selected",
    "last": "category changes, last epoch",
}


@contextmanager
def at_last_epoch(records: Iterable["RunRecord"]) -> Iterator[None]:
    """Within the block every record's ``best`` is its last evaluated epoch (the test metrics
    the loop recorded there); restored on leaving, as :func:`dmlnb.selection.selected_on` does."""
    unique = list({id(r): r for r in records}.values())
    kept = [(r, r.data["best"]) for r in unique]
    try:
        for r in unique:
            last = r.evaluations()[-1]
            r.data["best"] = {**r.data["best"], "epoch": last["epoch"], "metrics": last["metrics"]}
        yield
    finally:
        for r, best in kept:
            r.data["best"] = best


def _judged(claims: Sequence[ClaimSpec], runs: RunSet) -> list[Verdict]:
    return [j.verdict for j in evaluate(claims, runs)]


def protocol_verdicts(claims: Sequence[ClaimSpec], runs: RunSet) -> pd.DataFrame | None:
    """Every claim judged by :func:`dmlnb.chapter.evaluate` on the runs' recorded metrics
    (:func:`~dmlnb.experiments.facility_location.runs.recorded`, the loop's arithmetic NMI) at
    the epoch each protocol of :data:`PROTOCOLS` gives, and whether the test-selected and the
    last epoch put it in another category than the validation-selected epoch (``"yes"`` /
    ``"no"``); then the validation verdict's effect, interval, runs per side and note. ``None``
    when no run has a validation split. Claims that read no record (the toy, the timing, the
    trace) are the same under the three."""
    rs = recorded(runs)
    records = rs.records()
    if not records or not any("validation" in r.selections for r in records):
        return None
    verdicts: dict[str, list[Verdict]] = {}
    for basis in ("validation", "test"):
        with selected_on(records, basis, strict=False):
            verdicts[basis] = _judged(claims, rs)
    with at_last_epoch(records):
        verdicts["last"] = _judged(claims, rs)
    rows = []
    for i, c in enumerate(claims):
        v = verdicts["validation"][i]
        row = {"claim": c.text, **{PROTOCOLS[b]: str(verdicts[b][i]) for b in PROTOCOLS}}
        for b, col in CHANGES.items():
            other = verdict_category(verdicts[b][i]) != verdict_category(v)
            row[col] = "yes" if other else "no"
        rows.append(row | v.evidence())
    return pd.DataFrame(rows)


def category_changes(frame: pd.DataFrame | None, basis: str) -> pd.DataFrame:
    """The rows of :func:`protocol_verdicts` whose category changes under ``basis``
    (``"test"`` or ``"last"``); empty without a frame."""
    if frame is None:
        return pd.DataFrame(columns=["claim"])
    return frame[frame[CHANGES[basis]] == "yes"]
