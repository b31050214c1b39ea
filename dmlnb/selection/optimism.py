"""What choosing a run's epoch on the test classes adds: the *optimism* of test-set selection
(the test metric at the epoch the test classes select minus the one at the epoch the validation
classes select, ``>= 0`` by construction), per run (:func:`selection_optimism`), per group with the
book's rule (:func:`optimism_summary`), in words (:func:`optimism_text`,
:func:`selection_gain_text`), and how a table names a record's protocol
(:func:`selection_label`). See :mod:`dmlnb.selection`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from dmlnb.profiles import SELECT_ON
from dmlnb.reporting import (
    best_minus_last,
    compare_to_threshold,
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
]

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
