"""The standard protocol in one call (:func:`evaluate`): Recall@K, NMI, F1 and MAP@R, one
neighbour search and one k-means run shared by the metrics that need them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from dmlnb.evaluation.clustering import f1_clustering, nmi_clustering
from dmlnb.evaluation.inputs import (
    METRIC_NAMES,
    Metric,
    NMIAverage,
    check_metric,
    query_gallery,
)
from dmlnb.evaluation.k_means import kmeans
from dmlnb.evaluation.retrieval import recall_and_map
from dmlnb.pairs import l2_normalize

__all__ = ["evaluate"]


def evaluate(
    embeddings: Tensor,
    labels: Tensor,
    ks: Sequence[int] = (1, 2, 4, 8),
    metrics: Sequence[str] = METRIC_NAMES,
    seed: int = 0,
    gallery_embeddings: Tensor | None = None,
    gallery_labels: Tensor | None = None,
    metric: Metric = "cosine",
    nmi_average: NMIAverage = "arithmetic",
) -> dict[str, float]:
    """The standard protocol in one call.

    * ``"recall"`` -> ``"R@1"``, ``"R@2"``, ... (:func:`recall_at_k` with ``ks``);
    * ``"nmi"`` -> ``"NMI"`` and ``"f1"`` -> ``"F1"``: one :func:`kmeans` run (k = number of
      distinct labels, ``seed``) shared by both. With ``metric="cosine"`` the points are
      L2-normalised first, so the clustering sees the geometry retrieval ranks by. With a
      separate gallery the clustered set is query and gallery together;
    * ``"map_at_r"`` -> ``"MAP@R"`` (:func:`map_at_r`); Recall@K and MAP@R share one chunked
      neighbour search.

    Args:
        embeddings: ``(Q, D)``; labels: ``(Q,)``.
        ks: the Recall@K values.
        metrics: any subset of ``("recall", "nmi", "f1", "map_at_r")``.
        seed: k-means seed.
        gallery_embeddings, gallery_labels: optional separate gallery (In-Shop).
        metric: ``"cosine"`` or ``"euclidean"``.
        nmi_average: ``"arithmetic"`` (sklearn / PML) or ``"geometric"`` (Song et al. 2017).

    Returns:
        ``{"R@1": ..., "NMI": ..., "F1": ..., "MAP@R": ...}`` for the requested metrics.
    """
    unknown = set(metrics) - set(METRIC_NAMES)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; choose from {METRIC_NAMES}")
    check_metric(metric)
    q, ql, g, gl = query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    if "recall" in metrics and len(ks) == 0:
        raise ValueError("ks is empty; pass at least one K, e.g. ks=(1, 2, 4, 8)")
    results: dict[str, float] = {}
    map_r = None
    if "recall" in metrics or "map_at_r" in metrics:  # one neighbour search for both
        ks = ks if "recall" in metrics else ()
        recalls, map_r = recall_and_map(q, ql, g, gl, ks, "map_at_r" in metrics, metric, 1024)
        results.update({f"R@{k}": v for k, v in recalls.items()})
    if "nmi" in metrics or "f1" in metrics:
        points = q if g is None else torch.cat([q, g])  # (N, D)
        point_labels = ql if g is None else torch.cat([ql, gl])  # (N,)
        if metric == "cosine":
            points = l2_normalize(points)
        n_clusters = int(torch.unique(point_labels).numel())
        assignments, _ = kmeans(points, n_clusters, seed=seed)
        if "nmi" in metrics:
            results["NMI"] = nmi_clustering(assignments, point_labels, nmi_average)
        if "f1" in metrics:
            results["F1"] = f1_clustering(assignments, point_labels)
    if map_r is not None:
        results["MAP@R"] = map_r
    return results
