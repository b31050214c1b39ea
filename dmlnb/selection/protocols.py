"""Both selection protocols side by side: the test metrics at the epoch a protocol selects
(:func:`selected_metrics`), a comparison under each (:func:`both_ways_table`,
:func:`main_comparison`), any chapter's claims under each (:func:`both_ways_verdicts` through
:func:`selected_on`), and a setting chosen on the validation classes
(:func:`choose_on_validation`). See :mod:`dmlnb.selection`."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from dmlnb.profiles import SELECT_ON
from dmlnb.reporting import (
    Claim,
    Verdict,
    compare,
    format_mean_std,
    not_tested,
    summarize_runs,
)

if TYPE_CHECKING:
    from dmlnb.records import RunRecord


__all__ = [
    "COLUMN_LABELS",
    "NO_VALIDATION",
    "protocol_column",
    "selected_metrics",
    "kept_selection",
    "selected_on",
    "both_ways_table",
    "main_comparison",
    "both_ways_verdicts",
    "NOT_RECOMPUTED",
    "both_ways_text",
    "choose_on_validation",
]

K = TypeVar("K", bound=Hashable)


#: How a column of numbers selected each way is headed (after the metric, :func:`protocol_column`).
COLUMN_LABELS: dict[str, str] = {
    "validation": "best epoch on validation",
    "test": "best epoch on test (papers' protocol, optimistic)",
}

#: A cell of a protocol the runs cannot show (trained without a validation split).
NO_VALIDATION = "— (no validation split)"


def protocol_column(what: str, basis: str) -> str:
    """The heading of ``what`` (a metric, a verdict) selected on ``basis``: ``"R@1, best epoch on
    validation"``, ``"R@1, best epoch on test (papers' protocol, optimistic)"``."""
    return f"{what}, {COLUMN_LABELS[basis]}"


def selected_metrics(record: "RunRecord", basis: str) -> dict[str, float]:
    """The test metrics of ``record`` at the epoch ``basis`` selects (``"validation"`` or
    ``"test"``): its ``selections[basis]``, or, for a run without a validation split, its
    ``best`` when it was selected there (on the test classes).

    Raises:
        ValueError: ``basis`` is not one of :data:`dmlnb.profiles.SELECT_ON`; the run has no epoch
            selected on ``basis`` (trained without a validation split, or never evaluated).
    """
    if basis not in SELECT_ON:
        raise ValueError(f"basis {basis!r} is not one of {list(SELECT_ON)}")
    if basis in record.selections:
        return record.selections[basis]["metrics"]
    if basis == record.selected_on and record.best is not None:
        return record.best["metrics"]
    raise ValueError(
        f"run {record.data['name']!r} has no epoch selected on the {basis} classes (it selected "
        "on "
        f"{record.selected_on!r}{'' if record.best is not None else ' and was never evaluated'}): "
        "train it with a validation split (a chapter's validation= switch, or "
        f"dataset_options={{'validation': 0.2}}), or report it as selected on the test classes"
    )


def kept_selection(record: "RunRecord") -> dict[str, Any] | None:
    """The selection the run kept the weights of (``best.pt``, and what a chapter computed from
    them after training: its ``extras``), the one ``config.select_on`` chose, whatever epoch a
    :func:`selected_on` block shows as ``best``."""
    return record.selections.get(record.selected_on) or record.best


@contextmanager
def selected_on(records: Iterable["RunRecord"], basis: str, strict: bool = True) -> Iterator[None]:
    """Within the block, every record's ``best`` is the epoch ``basis`` selects
    (:func:`selected_metrics`), so a chapter's tables and claims, which read ``record.best``,
    compute under that protocol; on leaving (also on an error) every ``best`` is restored. Only
    ``best`` changes: ``config`` and ``selected_on`` still say how the run was made, and what a
    chapter computed from the kept weights (``extras``; :func:`kept_selection`) stays at the kept
    epoch. Save no record inside the block. ``strict=False``: a run without a validation split
    (e.g. a setting whose train and test share classes) keeps its own selection.

    Raises:
        ValueError: with ``strict``, a record has no epoch selected on ``basis`` (checked before
            any change).
    """
    unique = list({id(r): r for r in records}.values())
    for record in unique if strict else ():
        selected_metrics(record, basis)  # raises for a record that cannot be shown so
    kept = [(record, record.data["best"]) for record in unique]
    try:
        for record in unique:
            record.data["best"] = record.selections.get(basis, record.data["best"])
        yield
    finally:
        for record, best in kept:
            record.data["best"] = best


def _values(records: Sequence["RunRecord"], basis: str, metric: str) -> list[float] | None:
    """``metric`` of each record at the epoch ``basis`` selects, or ``None`` when some record has
    no such epoch (no validation split)."""
    try:
        return [float(selected_metrics(r, basis)[metric]) for r in records]
    except ValueError:
        return None


def both_ways_table(
    records: Mapping[str, Sequence["RunRecord"]],
    metric: str = "R@1",
    *,
    scale: float = 100.0,
    digits: int = 1,
) -> pd.DataFrame:
    """A comparison's ``metric`` (on the test classes) under both protocols, one row per method.

    Args:
        records: method -> its runs' records (one per seed).
        metric: a test metric of the records (e.g. ``"R@1"``).
        scale, digits: how the numbers are shown (``100``, ``1``: points to one decimal).

    Returns:
        DataFrame indexed by method: :func:`protocol_column` ``(metric, "validation")`` and
        ``(metric, "test")`` as ``"mean ± std"`` strings (:func:`dmlnb.reporting.format_mean_std`;
        :data:`NO_VALIDATION` for runs trained without a validation split), ``runs`` and
        ``evaluations`` (the fewest evaluations a run made after training began: with one, both
        protocols select the same, the last, epoch).
    """
    rows = {}
    for method, recs in records.items():
        row: dict[str, Any] = {}
        for basis in COLUMN_LABELS:
            values = _values(recs, basis, metric)
            row[protocol_column(metric, basis)] = (
                NO_VALIDATION
                if values is None
                else format_mean_std(
                    summarize_runs({method: [{metric: v} for v in values]}, [metric]), scale, digits
                ).iloc[0, 0]
            )
        row["runs"] = len(recs)
        row["evaluations"] = min((len(r.evaluations()) for r in recs), default=0)
        rows[method] = row
    columns = [protocol_column(metric, b) for b in COLUMN_LABELS] + ["runs", "evaluations"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def main_comparison(
    records: Mapping[str, Sequence["RunRecord"]],
    proposed: str,
    metric: str = "R@1",
    *,
    higher_is_better: bool = True,
    scale: float = 100.0,
    unit: str = " pts",
    digits: int = 1,
) -> pd.DataFrame:
    """A chapter's main comparison under both protocols: :func:`both_ways_table`, and per other
    method the verdict of "``proposed`` beats it" on ``metric`` by the book's rule
    (:func:`dmlnb.reporting.compare`, seeds as runs) at the epochs each protocol selects. The
    verdict that counts is the validation-selected one (its effect and 90% interval are shown);
    ``verdict changes`` flags the methods where the papers' protocol says otherwise.

    Args:
        records: method -> its runs' records; ``proposed`` must be a key.
        metric, higher_is_better: what is compared, and which way is better.
        scale, unit, digits: how numbers and effects are shown.

    Returns:
        The :func:`both_ways_table` with, for every method but ``proposed``,
        ``protocol_column(f"{proposed} beats it", basis)`` for both protocols (a verdict; "not
        tested at this scale" where the runs have no validation split), ``effect`` and ``90%
        interval`` of the validation-selected verdict, and ``verdict changes`` (``True`` /
        ``False``; ``"—"`` where one protocol cannot be judged).

    Raises:
        KeyError: ``proposed`` is not a method of ``records``.
    """
    if proposed not in records:
        raise KeyError(
            f"proposed method {proposed!r} is not among the compared methods {list(records)}"
        )
    table = both_ways_table(records, metric, scale=scale, digits=digits)
    claim = f"{proposed} beats it"
    extra: dict[str, dict[str, Any]] = {}
    for method, recs in records.items():
        if method == proposed:
            continue
        verdicts = {}
        for basis in COLUMN_LABELS:
            ours, theirs = _values(records[proposed], basis, metric), _values(recs, basis, metric)
            verdicts[basis] = (
                not_tested("no validation split: the runs were trained without one")
                if ours is None or theirs is None
                else compare(ours, theirs, higher_is_better, scale=scale, unit=unit)
            )
        judged = all(str(v) != "not tested at this scale" for v in verdicts.values())
        evidence = verdicts["validation"].evidence()
        extra[method] = {
            **{protocol_column(claim, b): str(v) for b, v in verdicts.items()},
            "effect": evidence["effect"],
            "90% interval": evidence["90% interval"],
            "verdict changes": str(verdicts["validation"]) != str(verdicts["test"])
            if judged
            else "—",
        }
    verdict_columns = [protocol_column(claim, b) for b in COLUMN_LABELS] + [
        "effect",
        "90% interval",
        "verdict changes",
    ]
    frame = table.join(pd.DataFrame.from_dict(extra, orient="index", columns=verdict_columns))
    return frame.astype(object).where(frame.notna(), "—")


#: How :func:`both_ways_verdicts` marks a claim that reads the kept weights (``kept_weights``).
NOT_RECOMPUTED = "not recomputed (kept weights)"


def both_ways_verdicts(
    records: Iterable["RunRecord"],
    judge: Callable[[], Sequence[Claim] | Mapping[str, Verdict]],
    strict: bool = True,
    kept_weights: Callable[[str], bool] | None = None,
) -> pd.DataFrame:
    """A chapter's claims under both protocols: ``judge()`` (its claims, or named verdicts,
    computed from the runs' records) called once with every record shown at its
    validation-selected epoch and once at its test-selected one (:func:`selected_on`;
    ``strict=False`` lets runs without a validation split keep their test selection in both, so
    their claims never change).

    ``judge`` must read the metrics from the records (``record.best``) when it is called; what it
    reads from the kept weights (``extras``) stays at the kept epoch under both protocols, so such
    a claim never shows a change: name those claims with ``kept_weights`` (claim -> bool), and
    their test-protocol verdict is ``"—"`` and their ``verdict changes`` :data:`NOT_RECOMPUTED`,
    never ``False`` (:func:`both_ways_text` counts the others only).

    Returns:
        One row per claim, in ``judge``'s order: ``claim``, :func:`protocol_column` ``("verdict",
        basis)`` for both protocols, ``verdict changes`` and the validation-selected verdict's
        effect, 90% interval, runs per side and note.

    Raises:
        ValueError: with ``strict``, a record has no validation split (:func:`selected_on`), or
            ``judge`` returned other claims the second time.
    """
    records = list(records)
    judged: dict[str, list[tuple[str, Verdict]]] = {}
    for basis in COLUMN_LABELS:
        with selected_on(records, basis, strict):
            out = judge()
        judged[basis] = (
            list(out.items()) if isinstance(out, Mapping) else [(c.claim, c.verdict) for c in out]
        )
    val, test = judged["validation"], judged["test"]
    if [k for k, _ in val] != [k for k, _ in test]:
        raise ValueError(
            "judge() returned other claims under the two protocols; it must state the same claims, "
            "in the same order, whatever the numbers"
        )
    rows = [
        {
            "claim": k,
            protocol_column("verdict", "validation"): str(v),
            protocol_column("verdict", "test"): str(t),
            "verdict changes": str(v) != str(t),
            **v.evidence(),
        }
        for (k, v), (_, t) in zip(val, test)
    ]
    frame = pd.DataFrame(rows).astype({"verdict changes": object})
    if kept_weights is not None and len(frame):
        kept = frame["claim"].map(kept_weights).astype(bool)
        frame.loc[kept, "verdict changes"] = NOT_RECOMPUTED
        frame.loc[kept, protocol_column("verdict", "test")] = "—"
    return frame


def both_ways_text(frame: pd.DataFrame) -> str:
    """A :func:`both_ways_verdicts` frame in words: how many of the recomputed verdicts change
    under the papers' protocol (and which), and how many claims read the kept weights and were not
    recomputed."""
    recomputed = frame[frame["verdict changes"].map(lambda v: v != NOT_RECOMPUTED)]
    changed = recomputed[recomputed["verdict changes"].map(lambda v: v is True)]
    kept = len(frame) - len(recomputed)
    return (
        f"{len(changed)} of {len(recomputed)} recomputed verdicts change under the papers' protocol"
        + (": " + "; ".join(changed["claim"]) if len(changed) else "")
        + (
            f"; {kept} claim{'s' if kept != 1 else ''} read{'' if kept != 1 else 's'} the kept "
            f"weights and {'are' if kept != 1 else 'is'} not recomputed"
            if kept
            else ""
        )
    )


def choose_on_validation(candidates: Mapping[K, Sequence["RunRecord"]], metric: str = "R@1") -> K:
    """The candidate (a variant, a hyper-parameter value) whose runs have the highest mean
    validation ``metric`` at their validation-selected epochs (``val_metrics``, never a test
    number); ties keep the first. Give every candidate of a comparison the same budget (runs,
    epochs, evaluations), and state the search where its result is shown.

    Raises:
        ValueError: no candidate, or a run without a validation selection (the message names it).
    """
    if not candidates:
        raise ValueError("no candidate to choose from")
    means = {}
    for key, records in candidates.items():
        values = []
        for record in records:
            chosen = record.selections.get("validation")
            if chosen is None:
                raise ValueError(
                    f"candidate {key!r}: run {record.data['name']!r} has no validation selection; "
                    "a setting is chosen on validation classes only (train with a validation split)"
                )
            values.append(float(chosen["val_metrics"][metric]))
        means[key] = float(np.mean(values))
    return max(means, key=means.__getitem__)
