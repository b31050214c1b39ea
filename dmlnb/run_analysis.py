"""Analyses of a run's trained weights, stored next to its record so a chapter
re-renders without them.

Weights (``checkpoint.pt``, ``best.pt``) are not versioned; records are. What a chapter draws
from a trained model (per-point similarities, t-SNE coordinates, retrieval neighbours) is
therefore computed once, while the weights exist, and saved in the run folder as
``analysis.json`` (:data:`ANALYSIS_FILE`), one entry per named analysis::

    {"<name>": {"settings": {...}, "run": "<RunRecord.outcome()>", "values": {...}}, ...}

An entry is reused only when it was computed with the settings asked for now and from the
training the record describes (:meth:`dmlnb.records.RunRecord.outcome`); otherwise
:func:`stored_analysis` returns ``None`` and :func:`missing_reason` says why, and the chapter
computes it again from the weights (training the run again only when the weights are gone and
training is allowed). Values are stored rounded (:func:`rounded`) and compactly, and a chapter
always draws from what :func:`save_analysis` returns (the stored values), so a figure drawn right
after training and one re-rendered from the file are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
from torch import Tensor

from dmlnb.records import RunRecord, as_json, read_json, write_json_atomic

__all__ = [
    "ANALYSIS_FILE",
    "stored_analysis",
    "missing_reason",
    "save_analysis",
    "rounded",
    "quantiles",
]

ANALYSIS_FILE = "analysis.json"
"""The file of a run folder holding the analyses of its weights (committed with ``record.json``;
one of :data:`dmlnb.checkpoints.RUN_FILES`, whose stray temporary files a new run clears)."""


def _array(values: Tensor | np.ndarray) -> np.ndarray:
    """``values`` as a float64 numpy array (a tensor is detached and copied to the CPU)."""
    a = values.detach().cpu().numpy() if isinstance(values, Tensor) else np.asarray(values)
    return a.astype(np.float64)


def _lookup(
    run_dir: str | Path, name: str, settings: Mapping[str, Any], record: RunRecord
) -> tuple[Any, str]:
    """``(values, "")`` of the usable entry ``name``, else ``(None, why it is not usable)``."""
    path = Path(run_dir) / ANALYSIS_FILE
    if not path.exists():
        return None, f"{path} is missing"
    entry = read_json(path).get(name)
    if entry is None:
        return None, f"{path} holds no analysis {name!r}"
    if entry.get("settings") != as_json(settings):
        return (
            None,
            f"{path} holds analysis {name!r} made with other settings ({entry.get('settings')})",
        )
    if entry.get("run") != record.outcome():
        return None, (
            f"{path} holds analysis {name!r} of another training of the run (fingerprint "
            f"{entry.get('run')}, the record's is {record.outcome()})"
        )
    return entry["values"], ""


def stored_analysis(
    run_dir: str | Path, name: str, settings: Mapping[str, Any], record: RunRecord
) -> dict[str, Any] | None:
    """The stored values of analysis ``name`` of the run in ``run_dir`` if they were computed with
    ``settings`` from the training ``record`` describes, else ``None``."""
    return _lookup(run_dir, name, settings, record)[0]


def missing_reason(
    run_dir: str | Path, name: str, settings: Mapping[str, Any], record: RunRecord
) -> str:
    """Why :func:`stored_analysis` finds nothing usable (``""`` when it does): the file or the
    entry is missing, its settings differ, or it belongs to another training of the run."""
    return _lookup(run_dir, name, settings, record)[1]


def save_analysis(
    run_dir: str | Path,
    name: str,
    settings: Mapping[str, Any],
    record: RunRecord,
    values: Mapping[str, Any],
) -> dict[str, Any]:
    """Store ``values`` (JSON-ready: lists, numbers, strings) as analysis ``name`` of the run in
    ``run_dir``, computed with ``settings`` from the training of ``record``; the other analyses
    of the file are kept. The file is replaced atomically. Returns the values as they read back."""
    path = Path(run_dir) / ANALYSIS_FILE
    data = read_json(path) if path.exists() else {}
    data[name] = {"settings": as_json(settings), "run": record.outcome(), "values": as_json(values)}
    write_json_atomic(path, data, compact=True)
    return data[name]["values"]


def rounded(values: Tensor | np.ndarray, decimals: int) -> list[Any]:
    """``values`` (any shape) as nested lists of floats rounded to ``decimals`` (``nan`` kept)."""
    return np.round(_array(values), decimals).tolist()


def quantiles(values: Tensor | np.ndarray, count: int, decimals: int) -> list[float]:
    """``count`` evenly spaced quantiles (levels ``0, 1 / (count - 1), ..., 1``, linear
    interpolation) of the finite entries of ``values`` ``(N,)``, rounded to ``decimals``: a
    distribution in ``count`` numbers. They keep its minimum, maximum and (``count`` odd) median,
    and a histogram of them puts in every bin the sample's fraction to within
    about ``1 / count``."""
    if count < 2:
        raise ValueError(f"count must be >= 2 (the minimum and the maximum), got {count}")
    a = _array(values).ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        raise ValueError("no finite value to take quantiles of")
    return rounded(np.quantile(a, np.linspace(0.0, 1.0, count)), decimals)
