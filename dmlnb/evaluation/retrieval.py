"""The retrieval metrics, Recall@K (:func:`recall_at_k`) and MAP@R (:func:`map_at_r`), from
one chunked neighbour search.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from dmlnb.evaluation.inputs import (
    Metric,
    check_chunk,
    check_metric,
    query_gallery,
)
from dmlnb.evaluation.neighbours import check_k, knn_chunks

__all__ = ["recall_and_map", "recall_at_k", "map_at_r"]


def recall_and_map(
    q: Tensor,
    ql: Tensor,
    g: Tensor | None,
    gl: Tensor,
    ks: Sequence[int],
    with_map: bool,
    metric: Metric,
    chunk_size: int,
) -> tuple[dict[int, float], float | None]:
    """Recall@K for ``ks`` and (if ``with_map``) MAP@R from one chunked neighbour search.

    ``q (Q, D)``, ``ql (Q,)``; ``g (G, D)`` or ``None`` (query set is its own gallery, self
    excluded); ``gl (G,)`` (``ql`` when ``g`` is ``None``). The search depth is
    ``max(max(ks), max R)``; each chunk holds at most ``(chunk_size, G)`` scores.
    """
    check_metric(metric)
    check_chunk(chunk_size)
    exclude = g is None
    gallery = q if g is None else g
    ks = [int(k) for k in ks]
    for k in ks:
        check_k(k, gallery.shape[0], exclude, "K")
    depth = max(ks, default=0)
    if with_map:
        classes, counts = torch.unique(gl, return_counts=True)  # (C,), (C,)
        pos = torch.searchsorted(classes, ql).clamp_max(classes.numel() - 1)  # (Q,)
        r = torch.where(classes[pos] == ql, counts[pos], 0) - int(exclude)  # (Q,) R per query
        if not (r > 0).any():
            raise ValueError(
                "MAP@R is undefined: no query has another item of its class in the gallery "
                "(every R = 0); evaluate on a set with at least two items per class"
            )
        r_max = int(r.max())
        ranks = torch.arange(1, r_max + 1, device=q.device, dtype=torch.float64)  # (r_max,)
        depth = max(depth, r_max)
    columns = torch.tensor([k - 1 for k in ks], dtype=torch.long, device=q.device)  # (len(ks),)
    hits = torch.zeros(len(ks), dtype=torch.float64, device=q.device)  # (len(ks),)
    ap_sum = torch.zeros((), dtype=torch.float64, device=q.device)
    for start, _, idx in knn_chunks(q, gallery, depth, metric, exclude, chunk_size):
        stop = start + idx.shape[0]
        same = gl[idx] == ql[start:stop, None]  # (c, depth) neighbour shares the query's label
        if ks:
            found = same.cumsum(dim=1) > 0  # (c, depth) a hit within the first j+1
            hits += found[:, columns].sum(dim=0)
        if with_map:
            rc = r[start:stop]  # (c,)
            rel = same[:, :r_max] & (ranks[None, :] <= rc[:, None])  # (c, r_max) first R only
            precision = rel.cumsum(dim=1) / ranks  # (c, r_max) P(i)
            ap = (precision * rel).sum(dim=1) / rc.clamp_min(1)  # (c,)
            ap_sum += ap[rc > 0].sum()
    recalls = {k: float(h) / q.shape[0] for k, h in zip(ks, hits.tolist())}
    map_r = float(ap_sum) / int((r > 0).sum()) if with_map else None
    return recalls, map_r


def recall_at_k(
    embeddings: Tensor,
    labels: Tensor,
    ks: Sequence[int] = (1, 2, 4, 8),
    gallery_embeddings: Tensor | None = None,
    gallery_labels: Tensor | None = None,
    metric: Metric = "cosine",
    chunk_size: int = 1024,
) -> dict[int, float]:
    """Recall@K of Song et al. (2016): the fraction of queries with at least one same-label item
    among their K nearest neighbours,

        R@K = (1/Q) sum_q 1[ exists j <= K : y(nn_j(q)) = y_q ].

    Without a gallery the query set is its own gallery and each query's own row is excluded
    (CUB / Cars / SOP protocol); with one, queries search the separate gallery (In-Shop). Every
    query counts, including one whose class has no other member (it scores 0).

    Args:
        embeddings: query embeddings ``(Q, D)``; labels: ``(Q,)``.
        ks: the K values.
        gallery_embeddings, gallery_labels: optional ``(G, D)`` and ``(G,)``.
        metric: ``"cosine"`` or ``"euclidean"``; chunk_size: queries per chunk (see :func:`knn`).

    Returns:
        ``{K: recall}``.
    """
    if len(ks) == 0:
        raise ValueError("ks is empty; pass at least one K, e.g. ks=(1, 2, 4, 8)")
    q, ql, g, gl = query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    return recall_and_map(q, ql, g, gl, ks, False, metric, chunk_size)[0]


def map_at_r(
    embeddings: Tensor,
    labels: Tensor,
    metric: Metric = "cosine",
    chunk_size: int = 1024,
    gallery_embeddings: Tensor | None = None,
    gallery_labels: Tensor | None = None,
) -> float:
    """MAP@R of Musgrave et al. (2020, "A Metric Learning Reality Check", Sec. 3.2).

    For a query with ``R`` relevant gallery items (same label; the query itself excluded when the
    query set is its own gallery),

        AP@R = (1/R) sum_{i=1}^{R} P(i) * rel(i),   P(i) = (1/i) sum_{j<=i} rel(j),

    over its R nearest neighbours; MAP@R is the mean over queries with ``R >= 1`` (queries with
    ``R = 0`` are skipped, as in PML's AccuracyCalculator).

    Memory: the neighbour search runs with ``k = max R`` in chunks, so at most
    ``(chunk_size, G)`` scores are held at once.

    Args:
        embeddings: ``(Q, D)``; labels: ``(Q,)``.
        metric: ``"cosine"`` or ``"euclidean"``; chunk_size: queries per chunk.
        gallery_embeddings, gallery_labels: optional separate gallery ``(G, D)``, ``(G,)``.
    """
    q, ql, g, gl = query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    return recall_and_map(q, ql, g, gl, (), True, metric, chunk_size)[1]
