"""Exact k nearest neighbours in query chunks (:func:`knn`), ties to the lower gallery index,
bit-identical for every chunk size and in float32 as in float64.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.checks import check_embeddings
from dmlnb.evaluation.inputs import (
    Metric,
    check_chunk,
    check_metric,
    checked,
)
from dmlnb.pairs import l2_normalize, power_of_two_scale

__all__ = ["knn_chunks", "check_k", "knn"]


def _order_by_value_then_index(values: Tensor, cols: Tensor) -> tuple[Tensor, Tensor]:
    """Sort each row of ``values`` ``(c, k)`` descending, ties by the lower column ``cols``:
    a sort by column, then a stable sort by value."""
    by_col = cols.argsort(dim=1)  # (c, k)
    values, cols = values.gather(1, by_col), cols.gather(1, by_col)
    order = values.argsort(dim=1, descending=True, stable=True)  # (c, k)
    return values.gather(1, order), cols.gather(1, order)


def _topk_lowest_index(key: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-``k`` of each row of ``key`` ``(c, G)``, largest first, ties to the lower column.

    ``torch.topk`` is not stable. One ``topk(k + 1)`` gives each row's candidates; where the
    k-th and (k+1)-th values differ (almost every row of real embeddings) the top-k *set* is
    unique, and sorting it by (value desc, column asc) gives the order. Only rows where a tie
    group straddles the k-th place take the exact masked path: every column with ``key > t``
    (``t`` the k-th value) plus the lowest-indexed columns with ``key == t``, up to ``k`` in all.
    Cost per row: O(G) for topk, O(k log k) for the sorts; O(G) masks only on straddling rows.

    Returns ``values (c, k)``, ``indices (c, k)``.
    """
    c, g = key.shape
    top_v, top_i = key.topk(min(k + 1, g), dim=1)  # (c, k+1) sorted descending
    values, cols = _order_by_value_then_index(top_v[:, :k], top_i[:, :k])  # (c, k)
    if k < g:
        straddle = (top_v[:, k - 1] == top_v[:, k]).nonzero().squeeze(1)  # (r,) boundary ties
        if straddle.numel():
            sub = key[straddle]  # (r, G)
            kth = top_v[straddle, k - 1 : k]  # (r, 1)
            take = sub > kth  # (r, G)
            tied = sub == kth  # (r, G)
            need = k - take.sum(dim=1, dtype=torch.int32)  # (r,) tied columns still to take
            rank = tied.cumsum(dim=1, dtype=torch.int32)  # (r, G) 1-based rank among ties
            take |= tied & (rank <= need[:, None])
            sub_cols = take.nonzero()[:, 1].view(-1, k)  # (r, k) ascending column index
            v, i = _order_by_value_then_index(sub.gather(1, sub_cols), sub_cols)
            values[straddle], cols[straddle] = v, i
    return values, cols


_MATMUL_ROWS = 256


def _rowwise_matmul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """``a @ b.T`` ``(c, G)`` for ``a (c, D)``, ``b (G, D)``, in fixed blocks of 256 rows, written
    into ``out`` ``(c, G)`` when given (a buffer reused across chunks: a fresh buffer of this size
    costs its page faults again on every chunk).

    A BLAS result can depend on the call's shape (a 1-row product may take a GEMV path with
    another summation order), which would make near-tied neighbours flip with ``chunk_size``.
    Every product here is a ``(256, D) x (D, G)`` call written straight into the output (only the
    last block is zero-padded), so each score is bit-identical whatever the chunking.
    """
    c = a.shape[0]
    out = a.new_empty(c, b.shape[0]) if out is None else out  # (c, G)
    bt = b.T  # (D, G) view
    full = c - c % _MATMUL_ROWS
    for start in range(0, full, _MATMUL_ROWS):
        torch.mm(
            a[start : start + _MATMUL_ROWS], bt, out=out[start : start + _MATMUL_ROWS]
        )  # (256, G)
    if full < c:
        block = F.pad(a[full:], (0, 0, 0, _MATMUL_ROWS - (c - full)))  # (256, D)
        out[full:] = (block @ bt)[: c - full]  # (rows, G)
    return out


def knn_chunks(
    query: Tensor,
    gallery: Tensor,
    k: int,
    metric: Metric,
    exclude_self: bool,
    chunk_size: int,
) -> Iterator[tuple[int, Tensor, Tensor]]:
    """Yield ``(start, scores (c, k), indices (c, k))`` for consecutive query chunks.

    ``scores`` are cosine similarities (descending) or Euclidean distances (ascending). Ranking
    uses squared distances ``|q|^2 + |g|^2 - 2 q.g`` (clamped at 0), so the square root never
    merges or reorders candidates. Norms and normalisations are computed once for the whole
    query and gallery sets, the products by :func:`_rowwise_matmul`: no value depends on the
    chunking. With ``exclude_self`` the gallery column ``start + i`` of query row ``i`` is masked
    (by index, so an exact duplicate of the query stays a valid neighbour).

    Exact ties: a BLAS product may give two identical gallery rows dot products that differ in
    the last bit (seen in float64), so every column of a duplicated (normalised / scaled) gallery
    row takes the score of its first copy: duplicates are tied bit-exactly and go to the lower
    index. Euclidean inputs are first divided by one common :func:`~dmlnb.pairs.power_of_two_scale`
    (exact; distances are scaled back), so huge or tiny finite embeddings neither overflow nor
    underflow and rank as the unscaled ones.
    """
    scale = None
    if metric == "cosine":
        query, gallery = l2_normalize(query), l2_normalize(gallery)  # (Q, D), (G, D)
    else:
        scale = torch.maximum(power_of_two_scale(query), power_of_two_scale(gallery))  # ()
        query, gallery = query / scale, gallery / scale  # (Q, D), (G, D) exact
        q_sq = (query * query).sum(dim=1)  # (Q,)
        g_sq = (gallery * gallery).sum(dim=1)  # (G,)
    first_copy = _first_copy(gallery)  # (G,) or None
    rows_max = min(chunk_size, query.shape[0])
    products = query.new_empty(rows_max, gallery.shape[0])  # (c, G) reused by every chunk
    squared = query.new_empty(rows_max, gallery.shape[0]) if metric == "euclidean" else None
    for start in range(0, query.shape[0], chunk_size):
        q = query[start : start + chunk_size]  # (c, D)
        key = _rowwise_matmul(
            q, gallery, out=products[: q.shape[0]]
        )  # (c, G) q.g, larger is nearer for cosine
        if metric == "euclidean":
            assert squared is not None
            q_sq_c = q_sq[start : start + chunk_size, None]  # (c, 1)
            dist = torch.add(
                q_sq_c, g_sq[None, :], out=squared[: q.shape[0]]
            )  # (c, G) |q|^2 + |g|^2
            key = (
                dist.sub_(key, alpha=2.0).clamp_min_(0.0).neg_()
            )  # (c, G) -|q - g|^2 (2 q.g is exact)
        if first_copy is not None:
            key = key[:, first_copy]  # (c, G) duplicates bit-identical
        if exclude_self:
            rows = torch.arange(q.shape[0], device=key.device)  # (c,)
            key[rows, start + rows] = float("-inf")
        values, indices = _topk_lowest_index(key, k)  # (c, k), (c, k)
        scores = values if scale is None else (-values).sqrt() * scale  # (c, k)
        yield start, scores, indices


def _first_copy(rows: Tensor) -> Tensor | None:
    """Index ``(G,)`` of the first exact copy of each row of ``rows`` ``(G, D)`` (itself when it
    is the first), or ``None`` when all rows are distinct. One ``torch.unique`` over the rows."""
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)  # (G,) group of each row
    n_groups = int(inverse.max()) + 1
    if n_groups == rows.shape[0]:
        return None
    index = torch.arange(rows.shape[0], device=rows.device)  # (G,)
    first = torch.full((n_groups,), rows.shape[0], dtype=torch.long, device=rows.device)
    first.scatter_reduce_(0, inverse, index, reduce="amin")  # (n_groups,) lowest index per group
    return first[inverse]  # (G,)


def check_k(k: int, gallery_size: int, exclude_self: bool, what: str = "k") -> None:
    """Refuse a ``k`` below 1 or above the neighbours a gallery of ``gallery_size`` rows has
    (one fewer with ``exclude_self``); ``what`` names ``k`` in the message."""
    available = gallery_size - int(exclude_self)
    if k < 1:
        raise ValueError(f"{what} must be >= 1, got {k}")
    if k > available:
        note = " (the query itself excluded)" if exclude_self else ""
        raise ValueError(
            f"{what}={k} asks for more neighbours than the gallery has: {available} available"
            f"{note}; lower {what} or use a larger gallery"
        )


def knn(
    query: Tensor,
    gallery: Tensor | None,
    k: int,
    metric: Metric = "cosine",
    exclude_self: bool | None = None,
    chunk_size: int = 1024,
) -> tuple[Tensor, Tensor]:
    """Exact k nearest neighbours of each query row in the gallery.

    Cosine: ``s(q, g) = q.g / (|q| |g|)`` (normalised inside; a zero vector has similarity 0 to
    everything). Euclidean: ``d(q, g) = |q - g|_2``.

    Memory: one ``(chunk_size, G)`` score matrix (plus boolean masks of the same shape) at a
    time. Time: ``(chunk, D) x (D, G)`` matmuls (in fixed 256-row blocks), one ``topk(k + 1)``
    per chunk, then O(k log k) sorts per query; O(G) masks and a tie cumsum run only on rows whose
    tie group straddles the k-th place. Euclidean distances come from the one-matmul expansion
    ``|q|^2 + |g|^2 - 2 q.g``, so near-duplicates carry the usual absolute error of about
    ``sqrt(eps) * |q|`` (~3e-4 for unit vectors in float32); integer-valued data is exact.

    Args:
        query: ``(Q, D)``.
        gallery: ``(G, D)``, or ``None`` to search the query set itself.
        k: neighbours per query.
        metric: ``"cosine"`` or ``"euclidean"``.
        exclude_self: drop gallery row ``i`` from the neighbours of query ``i`` (by index, not by
            distance 0: a duplicate of the query is a legitimate neighbour). Default: ``True``
            exactly when ``gallery is None``.
        chunk_size: queries per chunk; results are identical for every chunk size.

    Returns:
        ``scores (Q, k)`` -- cosine similarities, descending, or Euclidean distances, ascending --
        and gallery ``indices (Q, k)``; ties go to the lower gallery index.
    """
    check_metric(metric)
    check_chunk(chunk_size)
    q, _ = checked(query, name="query")
    if gallery is not None:
        check_embeddings(gallery, "gallery", q.shape[1])
    g = q if gallery is None else checked(gallery, name="gallery")[0].to(q.device, q.dtype)
    exclude = gallery is None if exclude_self is None else bool(exclude_self)
    if exclude and q.shape[0] > g.shape[0]:
        raise ValueError(
            "exclude_self=True needs query row i to be gallery row i, but the query has more "
            f"rows ({q.shape[0]}) than the gallery ({g.shape[0]})"
        )
    check_k(k, g.shape[0], exclude)
    parts = list(knn_chunks(q, g, k, metric, exclude, chunk_size))
    scores = torch.cat([s for _, s, _ in parts])  # (Q, k)
    indices = torch.cat([i for _, _, i in parts])  # (Q, k)
    return scores, indices
