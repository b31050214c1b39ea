"""Model selection: where a run's best epoch is chosen, and what choosing it on
the test classes adds.

The papers the book reproduces report each run at its best epoch on the test classes
(``TrainConfig.select_on="test"``); Musgrave et al. (2020, "A Metric Learning Reality Check")
choose it on validation classes held out of training (``select_on="validation"``, with
``dataset_options={"validation": ...}``) and measure the test classes once, at that epoch. A run
evaluated on a validation split records the epoch both protocols select (``record.selections``),
so either way it tells the *optimism* of test-set selection: the test metric at the epoch the
test classes select minus the test metric at the epoch the validation classes select. It is
``>= 0`` by construction (the test-selected epoch maximises the test metric over the same
evaluations).

* :func:`selection_label`: how a table or figure names the protocol of a record;
* :func:`selection_optimism`: the optimism of each record, one row per run;
* :func:`optimism_summary`: its mean per group with the interval and verdict of the book's rule
  (:func:`dmlnb.reporting.compare_to_threshold`: "test-set selection is optimistic"), and
  :func:`optimism_text`, the same in words, and :func:`selection_gain_text`, what keeping each run's
  selected epoch adds over its last (for a chapter's deviations table);
* both protocols side by side: :func:`selected_metrics` (the test metrics at the epoch a protocol
  selects), :func:`both_ways_table` (a comparison's metric under each, in columns named by
  :func:`protocol_column`), :func:`main_comparison` (the same with the verdicts of "the proposed
  method beats each other one", by :func:`dmlnb.reporting.compare`, under each protocol and
  flagged where they differ), and :func:`both_ways_verdicts` (any chapter's claims computed under
  each protocol, through :func:`selected_on`, which shows every record at the epoch one protocol
  selects; :func:`kept_selection` is the epoch whose weights the run kept);
* :func:`choose_on_validation`: a setting (a variant, a hyper-parameter value) chosen on the
  validation classes, never on the test classes.
"""

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
    best_minus_last,
    compare,
    compare_to_threshold,
    format_mean_std,
    not_tested,
    summarize_runs,
)

if TYPE_CHECKING:
    from dmlnb.records import RunRecord

__all__ = [
    "SELECTION_LABELS",
    "selection_label",
    "selection_optimism",
    "optimism_summary",
    "OPTIMISM_COLUMNS",
    "optimism_text",
    "selection_gain_text",
    "COLUMN_LABELS",
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

#: How each value of ``select_on`` is named wherever a number selected that way is shown.
SELECTION_LABELS: dict[str, str] = {
    "test": "best epoch on the test classes (the papers' protocol; optimistic)",
    "validation": "best epoch on held-out validation classes (Musgrave et al. 2020)",
}

#: The columns of :func:`selection_optimism`.
OPTIMISM_COLUMNS = [
    "run",
    "metric",
    "evaluations",
    "test-selected epoch",
    "validation-selected epoch",
    "at test-selected",
    "at validation-selected",
    "optimism",
]


def optimism_text(records: Iterable["RunRecord"], metric: str = "R@1") -> str:
    """``"; choosing on the test classes instead would add +1.2 pts [+0.4, +2] R@1 (9 runs)"``:
    the mean optimism of ``records`` with its 90% interval (:func:`optimism_summary`), to append
    to a sentence on how a chapter selects; ``""`` when no record has a validation split."""
    frame = selection_optimism(records, metric)
    if frame.empty:
        return ""
    e = optimism_summary(frame, scale=100.0, unit=" pts").loc["all", "verdict"].evidence()
    return (
        f"; choosing on the test classes instead would add {e['effect']} {e['90% interval']} "
        f"{metric} ({len(frame)} runs)"
    )


def selection_gain_text(records: Iterable["RunRecord"], metric: str = "R@1") -> str:
    """What keeping each run's selected epoch adds over its last evaluation, in words, naming
    where the runs selected it (``config.select_on``, :attr:`~dmlnb.records.RunRecord.selected_on`):
    ``"validation-selected minus last epoch R@1, 24 runs: +0.297 pts [+0.0542, +0.539]"`` (the mean
    of :func:`dmlnb.reporting.best_minus_last` with its 90% interval by the book's rule; runs that
    selected in both places: ``"selected minus last epoch R@1 (validation-selected in 21 runs,
    test-selected in 3 runs), 24 runs: ..."``), followed by :func:`optimism_text` when the records
    have a validation split; ``""`` when no record has an evaluation. The gain is ``>= 0`` by
    construction where the epoch is chosen on the test classes: that selection is optimistic by
    at least this much."""
    records = list(records)
    gain = best_minus_last(records, metric)
    if not gain:
        return ""
    bases = [r.selected_on for r in records if r.evaluations()]
    counts = {b: bases.count(b) for b in SELECT_ON if b in bases}
    if len(counts) == 1:
        what = f"{next(iter(counts))}-selected minus last epoch {metric}"
    else:
        what = (
            f"selected minus last epoch {metric} ("
            + ", ".join(
                f"{b}-selected in {k} run{'s' if k != 1 else ''}" for b, k in counts.items()
            )
            + ")"
        )
    e = compare_to_threshold(gain, 0.0, scale=100, unit=" pts").evidence()
    return f"{what}, {len(gain)} runs: {e['effect']} {e['90% interval']}" + optimism_text(
        records, metric
    )


def selection_label(record: "RunRecord") -> str:
    """The label of the protocol that chose ``record.best`` (:data:`SELECTION_LABELS`); records
    made before the choice existed selected on the test classes."""
    return SELECTION_LABELS[record.selected_on]


def selection_optimism(records: Iterable["RunRecord"], metric: str = "R@1") -> pd.DataFrame:
    """The optimism of test-set selection, one row per record that holds both selections (a run
    evaluated on a validation split; other records are skipped).

    Args:
        records: run records (:class:`dmlnb.records.RunRecord`).
        metric: the test metric compared; it must be the one the records selected their epochs on
            (``config.select_metric``), the one whose optimism is ``>= 0`` by construction.

    Returns:
        DataFrame with :data:`OPTIMISM_COLUMNS`: ``run`` (the record's name), ``metric``, the
        ``evaluations`` both protocols chose among (:meth:`~dmlnb.records.RunRecord.evaluations`:
        the more there are, the more the test classes can pick), the epoch each protocol
        selects, the test ``metric`` at each (``"at test-selected"``, ``"at validation-selected"``)
        and ``optimism``, their difference (``>= 0``).

    Raises:
        ValueError: a record selected on another metric than ``metric`` (the message names it and
            the ``metric=`` to pass), or a negative optimism (the record's selections disagree
            with its history: the file is damaged).
    """
    rows = []
    for record in records:
        selections = record.selections
        if set(selections) != {"test", "validation"}:
            continue
        test, val = selections["test"], selections["validation"]
        name = record.data["name"]
        if test["metric"] != metric or val["metric"] != metric:
            raise ValueError(
                f"run {name!r} selected its epochs on {test['metric']!r}, not {metric!r}: the "
                "optimism is only defined for the selection metric; pass "
                f"metric={test['metric']!r}"
            )
        at_test, at_val = float(test["metrics"][metric]), float(val["metrics"][metric])
        if at_test < at_val:
            raise ValueError(
                f"run {name!r}: the test-selected epoch {test['epoch']} has {metric} {at_test} "
                f"below the validation-selected epoch {val['epoch']}'s {at_val}; the record's "
                "selections are damaged: copy it again or retrain the run"
            )
        rows.append(
            {
                "run": name,
                "metric": metric,
                "evaluations": len(record.evaluations()),
                "test-selected epoch": test["epoch"],
                "validation-selected epoch": val["epoch"],
                "at test-selected": at_test,
                "at validation-selected": at_val,
                "optimism": at_test - at_val,
            }
        )
    return pd.DataFrame(rows, columns=OPTIMISM_COLUMNS)


def optimism_summary(
    optimism: pd.DataFrame,
    by: str | Sequence[str] | None = None,
    *,
    scale: float = 1.0,
    unit: str = "",
) -> pd.DataFrame:
    """The mean optimism per group with the book's interval and verdict.

    Args:
        optimism: a :func:`selection_optimism` frame, with the grouping columns added (e.g. the
            ``"chapter"`` and ``"method"`` of each run).
        by: the grouping column(s); ``None``: all rows as one group, ``"all"``.
        scale, unit: how the verdict formats its effect (e.g. ``100``, ``" pts"``).

    Returns:
        DataFrame indexed by group: ``runs``, ``evaluations per run`` (the fewest to the most,
        ``"3-13"``, or one count, ``"5"``: runs with more evaluations have more epochs for the
        test classes to pick from, so groups with different counts are not comparable), ``mean``
        (the mean optimism), ``low`` and ``high`` (the 90% two-sided interval of the mean, whose
        ends are the one-sided 95% bounds of :func:`dmlnb.reporting.compare_to_threshold`; NaN
        with one run; a low end below 0 reads as 0, since no run's optimism is negative) and
        ``verdict`` (the rule's verdict on "test-set selection is optimistic", i.e. the mean
        optimism is above 0; it cannot be "does not hold", and a group whose every optimism is 0
        is "inconclusive", the mean being at the threshold itself).
    """
    groups = [("all", optimism)] if by is None else list(optimism.groupby(by, sort=True))
    rows, index = [], []
    for key, part in groups:
        verdict = compare_to_threshold(
            part["optimism"].to_numpy(dtype=float), 0.0, scale=scale, unit=unit
        )
        fewest, most = int(part["evaluations"].min()), int(part["evaluations"].max())
        index.append(key)
        rows.append(
            {
                "runs": len(part),
                "evaluations per run": f"{fewest}" if fewest == most else f"{fewest}-{most}",
                "mean": verdict.effect,
                "low": verdict.low,
                "high": verdict.high,
                "verdict": verdict,
            }
        )
    names = None if by is None or isinstance(by, str) else list(by)
    frame_index = (
        pd.MultiIndex.from_tuples(index, names=names) if names else pd.Index(index, name=by)
    )
    columns = ["runs", "evaluations per run", "mean", "low", "high", "verdict"]
    return pd.DataFrame(rows, index=frame_index, columns=columns)


# ----------------------------------------------------------------------------------------------
# Both protocols side by side
# ----------------------------------------------------------------------------------------------

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
