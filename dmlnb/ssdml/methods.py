"""The SSDML chapter's objectives registered as methods (:mod:`dmlnb.methods`), so a run's
fingerprint holds every argument of the objective it trains.

==========================  ====================================================================
method                      objective (on the run's ``embedding_dim``-d embeddings, a metric
                            ``L`` to ``metric_dim`` dimensions)
==========================  ====================================================================
``"ssdml-angular"``         :class:`~dmlnb.ssdml.angular.AngularSSDML`, the proposed method
``"ssdml-labelled"``        :class:`~dmlnb.ssdml.supervised.LabelledTriplets` (``loss``:
                            ``"triplet"`` or ``"angular"``), the supervised baselines
``"lrml"`` ... ``"apit"``   the five deep baselines (:mod:`dmlnb.ssdml.baselines`), each on a
                            fresh non-orthogonal metric
==========================  ====================================================================

Each factory's arguments are ``metric_dim`` and every argument of the class after the ones the
factory makes (the embedding size and the metric's size, or the metric a baseline owns): read
from the class, so none is typed twice.
Importing :mod:`dmlnb.ssdml` registers them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from dmlnb.methods import register
from dmlnb.ssdml.angular import AngularSSDML
from dmlnb.ssdml.base import PartitionObjective
from dmlnb.ssdml.baselines import BASELINES, baseline_class, build_baseline
from dmlnb.ssdml.supervised import LabelledTriplets

__all__ = ["objective_factory"]


def objective_factory(
    cls: type[PartitionObjective], build: Callable[..., PartitionObjective], skip: int
) -> Callable[..., PartitionObjective]:
    """A factory ``f(embedding_dim, *, metric_dim=None, <the arguments of cls after its first
    skip>)`` that calls ``build(embedding_dim, metric_dim, **arguments)``; its signature is the
    class's, so the registry sees every argument with its default."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1 + skip :]
    kw = inspect.Parameter.KEYWORD_ONLY

    def factory(embedding_dim: int, **arguments: Any) -> PartitionObjective:
        metric_dim = arguments.pop("metric_dim")
        return build(embedding_dim, metric_dim, **arguments)

    factory.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("embedding_dim", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("metric_dim", kw, default=None),
            *[p.replace(kind=kw) for p in params],
        ]
    )
    factory.__doc__ = f"{cls.__name__} (see its docstring)."
    factory.__name__ = factory.__qualname__ = f"{cls.__name__.lower()}_factory"
    return factory


def _baseline(name: str) -> Callable[..., PartitionObjective]:
    """The factory of the baseline ``name``: :func:`~dmlnb.ssdml.baselines.build_baseline`, the
    class on a fresh ``LinearMetric(embedding_dim, metric_dim)``."""
    return objective_factory(
        baseline_class(name), lambda dim, out, **kw: build_baseline(name, dim, out, **kw), skip=1
    )


register("ssdml-angular", objective_factory(AngularSSDML, AngularSSDML, skip=2))
register("ssdml-labelled", objective_factory(LabelledTriplets, LabelledTriplets, skip=2))
for _name in BASELINES:
    register(_name, _baseline(_name))
