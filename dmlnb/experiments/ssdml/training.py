"""The SSDML chapter's runs as the chapter reads them: by method and seed, the α grid, the rows
of its tables (the runs declared in :mod:`dmlnb.experiments.ssdml.spec` are trained or reloaded
by :func:`dmlnb.chapter.train_runs` through
:class:`~dmlnb.experiments.ssdml.procedure.SSDMLProcedure`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dmlnb.chapter import RunSet
from dmlnb.experiments.ssdml.settings import NAMES
from dmlnb.experiments.ssdml.spec import alpha_group_name, initial_of, single_seed_group_name
from dmlnb.runs import Run

__all__ = ["by_method", "alpha_runs", "results_frame"]


def by_method(runs: RunSet, group: str) -> dict[str, list[Run]]:
    """``{method: [runs, by seed]}`` of ``group``, in declaration order (with the methods of its
    first seed only, :func:`~dmlnb.experiments.ssdml.spec.single_seed_group_name`)."""
    declared = {**runs.runs[group], **runs.runs.get(single_seed_group_name(group), {})}
    out: dict[str, list[Run]] = {}
    for (method, seed), run in sorted(declared.items(), key=lambda kv: kv[0][1]):
        out.setdefault(method, []).append(run)
    order = list(dict.fromkeys(m for m, _ in declared))
    return {m: out[m] for m in order}


def results_frame(
    runs: Mapping[str, Sequence[Run]],
    metrics: Sequence[str] = ("NMI", "R@1", "R@2", "R@4", "R@8"),
    initial: bool = True,
) -> dict[str, list[dict[str, float]]]:
    """``{row name: [best metrics per seed]}`` for :func:`dmlnb.reporting.summarize_runs`, with an
    ``"Initial"`` row (the networks at initialisation, the first method's seeds)."""
    out: dict[str, list[dict[str, float]]] = {}
    first = next(iter(runs.values()), [])
    if initial and first and initial_of(first[0]) is not None:
        out["Initial"] = [initial_of(r) for r in first]  # type: ignore[misc]
    for method, rs in runs.items():
        out[NAMES[method]] = [{m: r.metrics[m] for m in metrics if m in r.metrics} for r in rs]
    return out


def alpha_runs(runs: RunSet, key: str, setting: Any) -> dict[float, list[Run]]:
    """``{α: [runs, by seed]}``: the proposed method at each angle of ``setting``'s α grid and at
    its own α (:func:`~dmlnb.experiments.ssdml.spec.alpha_group_name` groups of ``key``)."""
    angles = sorted({*setting.alpha_grid, setting.alpha})
    return {a: by_method(runs, alpha_group_name(key, a))["ours"] for a in angles}
