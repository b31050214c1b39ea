"""Tables for the book: runs summarised as mean ± std, reported beside reproduced.

Reproduced numbers only ever come from run records; the paper's numbers enter only through the
``reported`` argument and are labelled as such in every table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

if TYPE_CHECKING:
    from dmlnb.profiles import TrainConfig

__all__ = [
    "summarize_runs", "format_mean_std", "reported_vs_reproduced", "compare", "group_verdict",
    "Claim", "claims_table", "paper_run_status",
]


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


def reported_vs_reproduced(
    reported: pd.DataFrame,
    reproduced: pd.DataFrame,
    reported_label: str,
    reproduced_label: str,
) -> pd.DataFrame:
    """Side-by-side table with a two-level column header: (metric, source).

    ``reported_label`` names the paper's setting (e.g. "reported (CUB-200, GoogLeNet)") and
    ``reproduced_label`` ours (e.g. "reproduced (omniglot-small, convnet, default, 3 seeds)").
    Methods missing on one side show as "—".
    """
    metrics = list(dict.fromkeys([*reported.columns, *reproduced.columns]))
    methods = list(dict.fromkeys([*reported.index, *reproduced.index]))
    cols = {}
    for m in metrics:
        cols[(m, reported_label)] = reported[m].reindex(methods) if m in reported else pd.Series(index=methods, dtype=object)
        cols[(m, reproduced_label)] = reproduced[m].reindex(methods) if m in reproduced else pd.Series(index=methods, dtype=object)
    table = pd.DataFrame(cols, index=methods)
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["metric", "source"])
    return table.astype(object).where(table.notna(), "—")


HOLDS, FAILS, WITHIN_NOISE, NOT_TESTED = "holds", "does not hold", "inconclusive (within noise)", "not tested at this scale"


def compare(a: Sequence[float], b: Sequence[float], higher_is_better: bool = True) -> str:
    """Verdict on "A beats B" from per-seed results.

    With ``se`` the standard error of the difference of the means (Welch): ``"holds"`` when A's
    mean is better by more than ``se``, ``"does not hold"`` when it is worse by more than ``se``
    (with a single run per side, ``se = 0``: when it is not better), and
    ``"inconclusive (within noise)"`` when the means differ by at most ``se``.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size == 0 or y.size == 0:
        return NOT_TESTED
    diff = (x.mean() - y.mean()) * (1.0 if higher_is_better else -1.0)
    se = np.sqrt((x.var(ddof=1) / x.size if x.size > 1 else 0.0) + (y.var(ddof=1) / y.size if y.size > 1 else 0.0))
    if diff > se:
        return HOLDS
    if diff < -se or (se == 0 and diff <= 0):
        return FAILS
    return WITHIN_NOISE


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the paper's evidence, ours, and a verdict computed from our runs
    (use :func:`compare` or another computation; never a typed-in string)."""

    claim: str
    paper_evidence: str
    our_evidence: str
    verdict: str


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a DataFrame with columns claim / paper's evidence / our evidence / verdict."""
    return pd.DataFrame(
        [(c.claim, c.paper_evidence, c.our_evidence, c.verdict) for c in claims],
        columns=["claim", "paper's evidence", "our evidence", "verdict"],
    )


def group_verdict(
    better: Mapping[str, Sequence[float]],
    worse: Mapping[str, Sequence[float]],
    higher_is_better: bool = True,
) -> tuple[str, pd.DataFrame]:
    """Verdict on "every method of ``better`` beats every method of ``worse``".

    Each pair is judged by :func:`dmlnb.reporting.compare`. Returns the verdict — ``"holds"``
    when every pair holds, ``"does not hold"`` when every pair fails, ``"does not hold: k of m
    pairs hold"`` when some pair fails (the claim is about every pair), else ``"inconclusive
    (within noise)"`` — and the table of pairwise verdicts.
    """
    rows = []
    for a, xa in better.items():
        for b, xb in worse.items():
            diff = (np.mean(xa) - np.mean(xb)) * (1 if higher_is_better else -1) if len(xa) and len(xb) else math.nan
            rows.append({"better": a, "worse": b, "difference of means": diff,
                         "verdict": compare(xa, xb, higher_is_better)})
    table = pd.DataFrame(rows)
    if table.empty:
        return NOT_TESTED, table
    verdicts = table["verdict"].tolist()
    if all(v == HOLDS for v in verdicts):
        return HOLDS, table
    if all(v == FAILS for v in verdicts):
        return FAILS, table
    if FAILS in verdicts:
        return f"{FAILS}: {verdicts.count(HOLDS)} of {len(verdicts)} pairs hold", table
    return WITHIN_NOISE, table


def paper_run_status(configs: Sequence["TrainConfig"], data_root: str | Path | None = None) -> pd.DataFrame:
    """Whether each run of Table 2 can be reproduced here: a CUDA GPU and the dataset's files.

    Returns one row per config: ``dataset``, ``gpu`` (bool), ``data`` ("found" or the first
    line of the loader's missing-file error) and ``runnable``.
    """
    from dmlnb.data import load_dataset

    gpu = torch.cuda.is_available()
    rows = []
    for cfg in configs:
        try:
            load_dataset(cfg.dataset, root=data_root, **cfg.dataset_options)
            data = "found"
        except FileNotFoundError as err:
            data = str(err).splitlines()[0]
        rows.append({"dataset": cfg.dataset, "gpu": gpu, "data": data, "runnable": gpu and data == "found"})
    return pd.DataFrame(rows, columns=["dataset", "gpu", "data", "runnable"])
