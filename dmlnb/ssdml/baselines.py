"""The five stochastic deep SSDML baselines of Dutta, Harandi and Sekhar (AAAI 2021).

Each is a :class:`~dmlnb.ssdml.base.PartitionObjective` over pairs (``unit_size = 2``) owning a
:class:`~dmlnb.ssdml.base.LinearMetric` (``M = L Lᵀ``, unconstrained ``L``), trained by
Algorithm 1 like the proposed method:

* ``"lrml"``: :class:`~dmlnb.ssdml.lrml.DeepLRML` (Hoi, Liu and Chang 2010), min-max on the
  labelled pairs + kNN Laplacian regulariser, ``log|M| ≥ 0``.
* ``"seraph"``: :class:`~dmlnb.ssdml.seraph.DeepSERAPH` (Niu et al. 2014), labelled-pair
  likelihood + unlabelled-pair entropy minimisation + ``Tr(M)``.
* ``"isdml"``: :class:`~dmlnb.ssdml.isdml.DeepISDML` (Ying et al. 2017), LRML with a
  density-adapted Laplacian.
* ``"apllr"`` / ``"apit"``: :class:`~dmlnb.ssdml.apllr_apit.DeepAPLLR` /
  :class:`~dmlnb.ssdml.apllr_apit.DeepAPIT` (Dutta and Sekhar 2018), LogDet closeness to a
  log-likelihood-ratio / ITML prior + Laplacian of propagated affinities.
"""

from __future__ import annotations

from typing import Any

from dmlnb.ssdml.apllr_apit import DeepAPIT, DeepAPLLR
from dmlnb.ssdml.base import LinearMetric, PartitionObjective
from dmlnb.ssdml.isdml import DeepISDML
from dmlnb.ssdml.lrml import DeepLRML
from dmlnb.ssdml.seraph import DeepSERAPH

__all__ = [
    "BASELINES",
    "build_baseline",
    "baseline_class",
    "DeepLRML",
    "DeepSERAPH",
    "DeepISDML",
    "DeepAPLLR",
    "DeepAPIT",
]

_CLASSES: dict[str, type[PartitionObjective]] = {
    "lrml": DeepLRML,
    "seraph": DeepSERAPH,
    "isdml": DeepISDML,
    "apllr": DeepAPLLR,
    "apit": DeepAPIT,
}

#: The baseline names :func:`build_baseline` accepts, in the paper's table order.
BASELINES: tuple[str, ...] = tuple(_CLASSES)


def baseline_class(name: str) -> type[PartitionObjective]:
    """The class of the baseline ``name`` (one of :data:`BASELINES`, any case)."""
    key = name.lower()
    if key not in _CLASSES:
        raise ValueError(f"unknown SSDML baseline {name!r}; valid names: {', '.join(BASELINES)}")
    return _CLASSES[key]


def build_baseline(
    name: str, dim: int, out_dim: int | None = None, **hyper: Any
) -> PartitionObjective:
    """The baseline ``name`` on ``dim``-dimensional embeddings with a fresh (non-orthogonal)
    ``LinearMetric(dim, out_dim)`` (identity start; the baselines learn a full ``M``, so
    ``out_dim`` defaults to ``dim``); ``hyper`` goes to the class (see its docstring)."""
    return baseline_class(name)(LinearMetric(dim, out_dim), **hyper)
