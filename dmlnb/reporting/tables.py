"""Runs summarised as mean ± std, and the paper's tables beside ours, one block of columns per
source and dataset (:func:`reported_vs_reproduced`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["summarize_runs", "format_mean_std", "source_dataset", "reported_vs_reproduced"]


def summarize_runs(
    metrics_by_run: Mapping[str, Sequence[Mapping[str, float]]],
    columns: Sequence[str],
) -> pd.DataFrame:
    """Mean, std (ddof=1) and run count per method.

    Args:
        metrics_by_run: method name -> one metrics dict per seed (e.g. ``record.best["metrics"]``).
        columns: metric names to summarise.

    Returns:
        DataFrame indexed by method with a ``(metric, stat)`` column MultiIndex, stats
        ``mean``, ``std`` (NaN for a single run) and ``n``.
    """
    data = {}
    for method, runs in metrics_by_run.items():
        row = {}
        for col in columns:
            vals = np.array([float(r[col]) for r in runs], dtype=np.float64)
            row[(col, "mean")] = vals.mean()
            row[(col, "std")] = vals.std(ddof=1) if len(vals) > 1 else np.nan
            row[(col, "n")] = len(vals)
        data[method] = row
    frame = pd.DataFrame.from_dict(data, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["metric", "stat"])
    return frame


def format_mean_std(summary: pd.DataFrame, scale: float = 100.0, digits: int = 1) -> pd.DataFrame:
    """Render a :func:`summarize_runs` frame as ``"mean ± std"`` strings (scaled, e.g. to %)."""
    out = {}
    for metric in summary.columns.get_level_values("metric").unique():
        mean = summary[(metric, "mean")] * scale
        std = summary[(metric, "std")] * scale
        out[metric] = [
            f"{m:.{digits}f} ± {s:.{digits}f}" if np.isfinite(s) else f"{m:.{digits}f}"
            for m, s in zip(mean, std)
        ]
    return pd.DataFrame(out, index=summary.index)


#: A column label of :func:`reported_vs_reproduced`: the source, then the dataset first in brackets.
_SOURCE_LABEL = re.compile(
    r"(?P<kind>reported|reproduced) \((?P<dataset>[^,;()]*[^,;()\s])\s*[,;)]"
)
_SOURCE_WORD = re.compile(r"\b(reported|reproduced)\b", re.IGNORECASE)


def source_dataset(label: str) -> str:
    """The dataset a source label of :func:`reported_vs_reproduced` names: the text between its
    opening bracket and the first comma, semicolon or closing bracket
    (``"reported (CUB-200-2011, GoogLeNet)"`` -> ``"CUB-200-2011"``).

    Raises:
        ValueError: the label is not ``"reported (<dataset>...)"`` or
            ``"reproduced (<dataset>...)"``.
    """
    m = _SOURCE_LABEL.match(label)
    if m is None:
        raise ValueError(
            f"source label {label!r} does not name its source and dataset: write "
            "'reported (<dataset>, <setting>)' or 'reproduced (<dataset>, <setting>)'"
        )
    return m.group("dataset").strip()


def _labels(frame: pd.DataFrame, axis: str) -> list[str]:
    """Every label of ``frame``'s index or columns (each level of a MultiIndex) as text."""
    index = frame.index if axis == "rows" else frame.columns
    return [str(v) for level in range(index.nlevels) for v in index.get_level_values(level)]


def reported_vs_reproduced(
    reported: Mapping[str, pd.DataFrame],
    reproduced: Mapping[str, pd.DataFrame] | None = None,
    rows: Sequence[Any] | None = None,
) -> pd.DataFrame:
    """The paper's tables and ours side by side, one block of columns per source and dataset.

    Every key is the block's column label and names its source and dataset first:
    ``"reported (CUB-200-2011, GoogLeNet)"``, ``"reproduced (omniglot-small, convnet, default,
    3 seeds)"`` (:func:`source_dataset`). Each block holds its own frame's columns (metrics) and
    nothing else, so a column never holds numbers of two sources or of two datasets: a reproduced
    analogue stands beside a reported number of another dataset, never under it. The header has
    two levels, ``(source, metric)``, reported blocks first, in the order given; rows are ``rows``
    (default: every frame's rows, in order of first appearance); a block without a row shows "—".
    ``reproduced`` may be empty (the paper's numbers alone, labelled with their dataset).

    Raises:
        ValueError: a label that does not name its source (``reported`` for the ``reported``
            frames, ``reproduced`` for the others) and its dataset; a frame with more than one
            column level (a frame per dataset: a dataset level would put two datasets under one
            label); a row or column label that names a source ("reported", "reproduced") or the
            dataset of any block (rows of another source or dataset in this block's columns).
    """
    blocks = {
        **{k: ("reported", f) for k, f in reported.items()},
        **{k: ("reproduced", f) for k, f in (reproduced or {}).items()},
    }
    if not blocks:
        raise ValueError("reported_vs_reproduced needs at least one frame")
    if len(blocks) < len(reported) + len(reproduced or {}):
        raise ValueError("a label is used for a reported and a reproduced frame")
    datasets = {label: source_dataset(label) for label in blocks}
    for label, (kind, frame) in blocks.items():
        if not label.startswith(kind):
            raise ValueError(f"{label!r} is given as {kind}, but its label says otherwise")
        if frame.columns.nlevels != 1:
            raise ValueError(
                f"{label!r}: the frame has {frame.columns.nlevels} column levels; give one frame "
                "(one block) per dataset, with the metrics as its columns"
            )
        for axis in ("rows", "columns"):
            for name in _labels(frame, axis):
                if _SOURCE_WORD.search(name):
                    raise ValueError(
                        f"{label!r}: the {axis[:-1]} {name!r} names a source; it would share this "
                        "block's columns with numbers of another source"
                    )
                if name in datasets.values():
                    raise ValueError(
                        f"{label!r}: the {axis[:-1]} {name!r} names a dataset; give one block per "
                        "dataset, labelled with it"
                    )
    order = (
        list(rows)
        if rows is not None
        else list(dict.fromkeys(r for _, f in blocks.values() for r in f.index))
    )
    cols = {
        (label, m): frame[m].reindex(order)
        for label, (_, frame) in blocks.items()
        for m in frame.columns
    }
    table = pd.DataFrame(cols, index=pd.Index(order, name=None))
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["source", "metric"])
    return table.astype(object).where(table.notna(), "—")
