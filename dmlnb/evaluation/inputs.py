"""The evaluation's input types and checks: embeddings ``(N, D)`` and labels ``(N,)`` validated
(:mod:`dmlnb.checks`) before any computation or native call, a query set with its optional
separate gallery, the metric and the chunk size.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from dmlnb.checks import check_embeddings, check_labels, check_values

__all__ = [
    "Metric",
    "KMeansBackend",
    "NMIAverage",
    "METRIC_NAMES",
    "checked",
    "check_metric",
    "check_chunk",
    "query_gallery",
]


Metric = Literal["cosine", "euclidean"]
KMeansBackend = Literal["auto", "faiss", "torch"]
NMIAverage = Literal["arithmetic", "geometric"]
METRIC_NAMES = ("recall", "nmi", "f1", "map_at_r")


def checked(
    x: Tensor, labels: Tensor | None = None, name: str = "embeddings", label_name: str = "labels"
) -> tuple[Tensor, Tensor | None]:
    """Validate embeddings ``(N, D)`` and optional class labels ``(N,)`` (:mod:`dmlnb.checks`:
    shapes and dtypes, then one read for NaN / Inf and negative labels, ``-1`` "unlabelled"
    included). Returns the embeddings as float32 (float64 kept) and the labels as long on their
    device; both checked before anything reaches faiss or another native routine."""
    check_embeddings(x, name)
    x = x if x.dtype == torch.float64 else x.float()
    y = None
    if labels is not None:
        check_labels(labels, x.shape[0], label_name)
        y = labels.to(device=x.device, dtype=torch.long)
    check_values(x, y, name=name, label_name=label_name)
    return x, y


def check_metric(metric: str) -> None:
    """Refuse a metric other than ``"cosine"`` and ``"euclidean"``."""
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"metric must be 'cosine' or 'euclidean', got {metric!r}")


def check_chunk(chunk_size: int) -> None:
    """Refuse a ``chunk_size`` below 1."""
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")


def query_gallery(
    embeddings: Tensor,
    labels: Tensor,
    gallery_embeddings: Tensor | None,
    gallery_labels: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """Validate a query set and an optional separate gallery.

    Returns ``(query (Q, D), query_labels (Q,), gallery (G, D) or None, gallery_labels (G,))``;
    ``gallery`` is ``None`` when the query set is its own gallery (self excluded by index).
    """
    q, ql = checked(embeddings, labels)
    assert ql is not None
    if (gallery_embeddings is None) != (gallery_labels is None):
        raise ValueError("pass both gallery_embeddings and gallery_labels, or neither")
    if gallery_embeddings is None:
        return q, ql, None, ql
    g, gl = checked(gallery_embeddings, gallery_labels, "gallery_embeddings", "gallery_labels")
    check_embeddings(g, "gallery_embeddings", q.shape[1])
    assert gl is not None
    return q, ql, g.to(q.device, q.dtype), gl.to(q.device)
