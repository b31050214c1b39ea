"""The papers' reported tables: numbers quoted from the papers, read from CSV files.

Every table of numbers a paper reports that the book quotes is a file
``dmlnb/experiments/reported/<chapter>_<table>.csv`` (shipped with the package), never Python
literals. :func:`reported_table` reads one into a DataFrame; :func:`reported_source` says where
its numbers come from.

File format (UTF-8, comma-separated; a header of ``# key: value`` lines, then the table)::

    # source: Do et al., CVPR 2019, Table 4: CUB-200-2011, ImageNet GoogLeNet, in %
    # index: -
    # columns: -
    ,NMI,R@1,R@2,R@4,R@8
    SoftMax,57.21,48.34,60.16,71.21,80.30

* ``source`` (required): paper, table (or figure) and dataset of the numbers, and their unit;
* ``index``: the names of the row-index levels, comma-separated, one leading column each (``-``
  for an unnamed level); no names (``# index:`` left empty) means no index columns and a
  ``0 .. n-1`` row index;
* ``columns``: the names of the column levels, one header row each (``-`` for an unnamed level).

In the header rows the index columns are blank, except that the last header row names the
index levels. A cell is an integer, a decimal number, empty (a number the paper does not
report: NaN) or text; a column (or index level) of integers is ``int64``, one of numbers and
empty cells ``float64``, anything else text.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["REPORTED_DIR", "reported_names", "reported_table", "reported_source"]

#: Where the reported tables live (package data of :mod:`dmlnb.experiments`).
REPORTED_DIR = Path(__file__).resolve().parent / "experiments" / "reported"

_INT = re.compile(r"[+-]?\d+")
_UNNAMED = "-"


def reported_names() -> list[str]:
    """The names :func:`reported_table` accepts (file stems), sorted."""
    return sorted(p.stem for p in REPORTED_DIR.glob("*.csv"))


def _path(name: str) -> Path:
    path = REPORTED_DIR / f"{name}.csv"
    if not path.is_file():
        raise KeyError(
            f"no reported table {name!r} in {REPORTED_DIR}; choose one of {reported_names()}"
        )
    return path


def _read(name: str) -> tuple[dict[str, str], list[list[str]]]:
    """The ``# key: value`` header of ``name`` and its CSV rows."""
    meta: dict[str, str] = {}
    body: list[str] = []
    with _path(name).open(encoding="utf-8", newline="") as f:
        for line in f:
            if not body and line.startswith("#"):
                key, sep, value = line[1:].partition(":")
                if not sep:
                    raise ValueError(
                        f"{name}.csv: header line {line.strip()!r} is not '# key: value'"
                    )
                meta[key.strip()] = value.strip()
            else:
                body.append(line)
    if "source" not in meta:
        raise ValueError(f"{name}.csv states no '# source:' (paper, table, dataset)")
    return meta, list(csv.reader(body))


def _level_names(meta: dict[str, str], key: str) -> list[str | None]:
    text = meta.get(key, "")
    names = [n.strip() for n in text.split(",")] if text else []
    return [None if n == _UNNAMED else n for n in names]


def _values(cells: list[str]) -> list[Any]:
    """One column's cells as ints, floats (an empty cell: NaN) or, when any cell is text, text."""
    if all(_INT.fullmatch(c) for c in cells):
        return [int(c) for c in cells]
    try:
        return [float(c) if c else math.nan for c in cells]
    except ValueError:
        return list(cells)


def reported_source(name: str) -> str:
    """The ``source`` line of reported table ``name``: paper, table, dataset and unit."""
    return _read(name)[0]["source"]


def reported_table(name: str) -> pd.DataFrame:
    """The reported table ``name`` (a file stem of :data:`REPORTED_DIR`, e.g.
    ``"discriminative_table4"``) as a DataFrame, rows and columns in the file's order.

    Shape: ``(data rows, columns - index columns)``; a row index of one level per name of the
    file's ``index`` header (a ``MultiIndex`` for two or more), a column index of one level per
    ``columns`` name (one header row each).

    Raises:
        KeyError: no such table.
        ValueError: the file breaks the format (module docstring).
    """
    meta, rows = _read(name)
    index_names, column_names = _level_names(meta, "index"), _level_names(meta, "columns")
    n_index, n_header = len(index_names), len(column_names)
    if n_header < 1 or len(rows) < n_header:
        raise ValueError(
            f"{name}.csv: '# columns:' must name at least one level, each a header row"
        )
    header, data = rows[:n_header], rows[n_header:]
    width = len(header[0])
    bad = [i for i, r in enumerate(rows) if len(r) != width]
    if bad:
        raise ValueError(
            f"{name}.csv: rows {bad} do not have the {width} cells of the first header row"
        )
    labels = [tuple(row[j] for row in header) for j in range(n_index, width)]
    columns: pd.Index = (
        pd.MultiIndex.from_tuples(labels, names=column_names)
        if n_header > 1
        else pd.Index([label[0] for label in labels], name=column_names[0])
    )
    if n_index == 0:
        index: pd.Index = pd.RangeIndex(len(data))
    else:
        levels = [_values([r[j] for r in data]) for j in range(n_index)]
        index = (
            pd.MultiIndex.from_arrays(levels, names=index_names)
            if n_index > 1
            else pd.Index(levels[0], name=index_names[0])
        )
    cells = {j: _values([r[n_index + j] for r in data]) for j in range(len(labels))}
    frame = pd.DataFrame(cells, index=index)
    frame.columns = columns
    return frame
