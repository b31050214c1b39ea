"""Model selection: where a run's best epoch is chosen, and what choosing it on the test classes adds.

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
  (:func:`dmlnb.reporting.compare_to_threshold`: "test-set selection is optimistic").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from dmlnb.reporting import compare_to_threshold

if TYPE_CHECKING:
    from dmlnb.records import RunRecord

__all__ = ["SELECTION_LABELS", "selection_label", "selection_optimism", "optimism_summary", "OPTIMISM_COLUMNS"]

#: How each value of ``select_on`` is named wherever a number selected that way is shown.
SELECTION_LABELS: dict[str, str] = {
    "test": "best epoch on the test classes (the papers' protocol; optimistic)",
    "validation": "best epoch on held-out validation classes (Musgrave et al. 2020)",
}

#: The columns of :func:`selection_optimism`.
OPTIMISM_COLUMNS = ["run", "metric", "test-selected epoch", "validation-selected epoch",
                    "at test-selected", "at validation-selected", "optimism"]


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
        epoch each protocol selects, the test ``metric`` at each (``"at test-selected"``,
        ``"at validation-selected"``) and ``optimism``, their difference (``>= 0``).

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
                f"run {name!r} selected its epochs on {test['metric']!r}, not {metric!r}: the optimism is only "
                f"defined for the selection metric; pass metric={test['metric']!r}"
            )
        at_test, at_val = float(test["metrics"][metric]), float(val["metrics"][metric])
        if at_test < at_val:
            raise ValueError(
                f"run {name!r}: the test-selected epoch {test['epoch']} has {metric} {at_test} below the "
                f"validation-selected epoch {val['epoch']}'s {at_val}; the record's selections are damaged: "
                "copy it again or retrain the run"
            )
        rows.append({"run": name, "metric": metric, "test-selected epoch": test["epoch"],
                     "validation-selected epoch": val["epoch"], "at test-selected": at_test,
                     "at validation-selected": at_val, "optimism": at_test - at_val})
    return pd.DataFrame(rows, columns=OPTIMISM_COLUMNS)


def optimism_summary(
    optimism: pd.DataFrame, by: str | Sequence[str] | None = None, *, scale: float = 1.0, unit: str = "",
) -> pd.DataFrame:
    """The mean optimism per group with the book's interval and verdict.

    Args:
        optimism: a :func:`selection_optimism` frame, with the grouping columns added (e.g. the
            ``"chapter"`` and ``"method"`` of each run).
        by: the grouping column(s); ``None``: all rows as one group, ``"all"``.
        scale, unit: how the verdict formats its effect (e.g. ``100``, ``" pts"``).

    Returns:
        DataFrame indexed by group: ``runs``, ``mean`` (the mean optimism), ``low`` and ``high``
        (the 90% two-sided interval of the mean, whose ends are the one-sided 95% bounds of
        :func:`dmlnb.reporting.compare_to_threshold`; NaN with one run) and ``verdict`` (the
        rule's verdict on "test-set selection is optimistic", i.e. the mean optimism is above 0).
    """
    groups = [("all", optimism)] if by is None else list(optimism.groupby(by, sort=True))
    rows, index = [], []
    for key, part in groups:
        verdict = compare_to_threshold(part["optimism"].to_numpy(dtype=float), 0.0, scale=scale, unit=unit)
        index.append(key)
        rows.append({"runs": len(part), "mean": verdict.effect, "low": verdict.low, "high": verdict.high,
                     "verdict": verdict})
    names = None if by is None or isinstance(by, str) else list(by)
    frame_index = pd.MultiIndex.from_tuples(index, names=names) if names else pd.Index(index, name=by)
    return pd.DataFrame(rows, index=frame_index, columns=["runs", "mean", "low", "high", "verdict"])
