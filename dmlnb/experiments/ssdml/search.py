"""The SSDML chapter's baselines: what dmlnb implements of each, the search of one key
hyper-parameter each on the validation classes, and the values it chose."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.chapter import RunSet
from dmlnb.experiments.ssdml.network import build_objective
from dmlnb.experiments.ssdml.settings import (
    BASELINE_SEARCH,
    NAMES,
    SEMI_SUPERVISED,
    Setting,
)
from dmlnb.experiments.ssdml.spec import search_group_name
from dmlnb.runs import Run

__all__ = ["BASELINE_NOTES", "baseline_table", "chosen", "chosen_hyper", "search_table", "searched"]


def searched(runs: RunSet, key: str, profile: str) -> dict[str, dict[float, list[Run]]]:
    """The baselines' search on setting ``key``
    (:func:`~dmlnb.experiments.ssdml.spec.search_groups`) in ``runs``:
    ``{method: {value: [run]}}`` (empty when the setting has no search)."""
    out: dict[str, dict[float, list[Run]]] = {}
    for method, (_, values) in BASELINE_SEARCH[profile].items():
        for v in values:
            group = search_group_name(key, method, v)
            if group in runs.runs:
                out.setdefault(method, {})[v] = list(runs.runs[group].values())
    return out


def chosen(
    runs: RunSet, keys: Sequence[str], profile: str
) -> dict[str, dict[str, dict[str, float]]]:
    """``{setting key: {method: {keyword: value}}}``: the values the search of each setting of
    ``keys`` chose (:func:`chosen_hyper`), for the settings that ran one."""
    found = {k: searched(runs, k, profile) for k in keys}
    return {k: chosen_hyper(s, profile) for k, s in found.items() if s}


def chosen_hyper(
    search: Mapping[str, Mapping[float, Sequence[Any]]], profile: str, metric: str = "R@1"
) -> dict[str, dict[str, float]]:
    """``{method: {keyword: value}}``: per baseline of ``search`` (:func:`searched`),
    the value with the highest validation ``metric``
    (:func:`dmlnb.selection.choose_on_validation`)."""
    from dmlnb.selection import choose_on_validation

    return {
        m: {
            BASELINE_SEARCH[profile][m][0]: choose_on_validation(
                {v: [r.record for r in rs] for v, rs in runs.items()}, metric
            )
        }
        for m, runs in search.items()
    }


def search_table(
    search: Mapping[str, Mapping[float, Sequence[Any]]], profile: str, metric: str = "R@1"
) -> pd.DataFrame:
    """The search in a table: per (baseline, keyword, value), the runs, the validation ``metric``
    (%, mean over runs, at each run's validation-selected epoch; no test number) and whether it
    was chosen (:func:`chosen_hyper`)."""
    chosen = chosen_hyper(search, profile, metric)
    rows = {}
    for method, runs in search.items():
        name = BASELINE_SEARCH[profile][method][0]
        for value, rs in runs.items():
            rows[(NAMES[method], name, f"{value:g}")] = {
                "runs": len(rs),
                f"validation {metric} (%)": 100
                * float(
                    np.mean([r.record.selections["validation"]["val_metrics"][metric] for r in rs])
                ),
                "chosen": "yes" if value == chosen[method][name] else "no",
            }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.names = ["baseline", "hyper-parameter", "value"]
    return frame


#: What dmlnb implements of each baseline and where it departs from the original (the classes'
#: docstrings in dmlnb.ssdml hold the details): ``{method: (implemented, deviations)}``.
BASELINE_NOTES: dict[str, tuple[str, str]] = {
    "lrml": (
        "DeepLRML: mean similar / dissimilar labelled distances against the heat-kernel kNN "
        "Laplacian, M = L Lᵀ, log|M| = 0 by rescaling",
        "γ_S, γ_D relative to the graph's total affinity Ω; log|M| ≥ 0 as an equality; SGD on L "
        "and θ instead of an SDP; kernel bandwidth the mean squared kNN distance",
    ),
    "seraph": (
        "DeepSERAPH: labelled-pair NLL + μ × unlabelled-pair entropy + λ Tr(M)",
        "unlabelled pairs sampled per partition (max_unlabelled_pairs), μ = |P|/|U| by default; "
        "SGD instead of the original's EM-like updates",
    ),
    "isdml": (
        "DeepISDML: LRML with the density-adapted Laplacian ρ̄ D^-1/2 W D^-1/2",
        "the SSDML paper's one-line description implemented, not Ying et al.'s Riemannian "
        "optimisation",
    ),
    "apllr": (
        "DeepAPLLR: LogDet divergence to a KISSME prior + λ × Laplacian of the propagated "
        "affinities",
        "covariance shrinkage and an eigenvalue floor on the prior; SGD instead of the closed "
        "form; Laplacian on kNN edges and labelled pairs only",
    ),
    "apit": (
        "DeepAPIT: LogDet divergence to an ITML prior + λ × Laplacian of the propagated affinities",
        "ITML with 5th / 95th percentile bounds, slack 1, at most 5,000 constraints, 10 sweeps; "
        "as APLLR otherwise",
    ),
    "triplet": (
        "LabelledTriplets('triplet'): hinge on squared distances, one random negative per "
        "labelled positive pair",
        "margin not given by the paper; unconstrained L",
    ),
    "angular": (
        "LabelledTriplets('angular'): Eq. (3) on labelled triplets",
        "the proposed loss, not Wang et al.'s "
        "angular loss (hinge / N-pair forms); α kept at the proposed method's",
    ),
}


#: Constructor keywords a baseline's loss does not read (the labelled-only losses share one class:
#: the triplet hinge has no angle, Eq. (3) no margin), left out of the baselines table.
UNUSED = {"triplet": ("alpha_degrees",), "angular": ("margin",)}
#: How a keyword left at ``None`` is shown: what the objective uses instead.
NONE_MEANS = {"mu": "|P| / |U|"}


def _shown(name: str, value: Any) -> str:
    """A hyper-parameter as a reader reads it: ``None`` as what it means, numbers as ``:g``."""
    if value is None:
        return NONE_MEANS.get(name, "none")
    return f"{value:g}" if isinstance(value, float) else str(value)


def baseline_table(setting: Setting, profile: str) -> pd.DataFrame:
    """The baselines of ``setting`` as dmlnb runs them: per baseline, what is implemented and how
    it departs from the original (:data:`BASELINE_NOTES`), its hyper-parameters as the objective
    is built (every constructor keyword, :func:`build_objective` on embeddings of the metric's
    size ``l``, so the values are the code's and the setting's, not typed; the keywords its loss
    does not read, :data:`UNUSED`, left out), and the search of
    :data:`BASELINE_SEARCH` at ``profile`` (``—``: none)."""
    import inspect

    rows = {}
    for method in [m for m in (*SEMI_SUPERVISED, "triplet", "angular") if m in setting.methods]:
        objective = build_objective(method, setting, setting.metric_dim)
        names = [
            p
            for p in inspect.signature(type(objective).__init__).parameters
            if p not in ("self", "metric", "dim", "out_dim", "loss")
        ]
        search = BASELINE_SEARCH.get(profile, {}).get(method)
        implemented, deviations = BASELINE_NOTES[method]
        rows[NAMES[method]] = {
            "dmlnb implements": implemented,
            "deviations from the original": deviations,
            "hyper-parameters (as built)": ", ".join(
                f"{n} = {_shown(n, getattr(objective, n))}"
                for n in names
                if hasattr(objective, n) and n not in UNUSED.get(method, ())
            ),
            "searched on validation": f"{search[0]} ∈ {{{', '.join(f'{v:g}' for v in search[1])}}}"
            if search
            else "—",
        }
    return pd.DataFrame.from_dict(rows, orient="index")
