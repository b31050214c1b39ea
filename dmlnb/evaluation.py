"""Metrics of the standard deep metric learning evaluation protocol.

The protocol (Song et al. 2016, "Deep Metric Learning via Lifted Structured Feature Embedding";
Musgrave et al. 2020, "A Metric Learning Reality Check") embeds a class-disjoint test set and
scores the embedding two ways:

* **retrieval** -- Recall@K (the query itself excluded; In-Shop uses a separate gallery) and
  MAP@R;
* **clustering** -- k-means with one cluster per test class, then NMI and the pairwise F1 of the
  clustering against the classes.

Everything is memory-bounded: neighbour search runs in query chunks (one ``(chunk, G)`` score
matrix at a time), the k-means assignment step in point chunks, and NMI / F1 use the sparse
contingency table (only its non-zero cells), never an ``N x N`` matrix.

Nearest-neighbour order is deterministic: by similarity descending (cosine) or distance ascending
(Euclidean), ties broken by the **lower gallery index**, identically for every ``chunk_size`` and
in float32 as in float64 (exact duplicate gallery rows get bit-identical scores).

Input is checked (:mod:`dmlnb.checks`) before any computation or native call (faiss): embeddings
``(N, D)`` floating point with ``N, D >= 1`` and finite, labels ``(N,)`` integer and ``>= 0`` (a
``-1``, "unlabelled", is rejected: filter those samples out), ``K`` at most the gallery size.
Huge or tiny finite embeddings are handled by exact power-of-two rescaling.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader

from dmlnb.allocator import keep_freed_memory
from dmlnb.checks import check_embeddings, check_labels, check_values
from dmlnb.data.cached_images import CachedImageDataset
from dmlnb.data.prefetch import prefetch
from dmlnb.pairs import euclidean_distance, l2_normalize, power_of_two_scale

__all__ = [
    "compute_embeddings",
    "knn",
    "recall_at_k",
    "kmeans",
    "nmi",
    "nmi_clustering",
    "f1_clustering",
    "map_at_r",
    "evaluate",
]

Metric = Literal["cosine", "euclidean"]
KMeansBackend = Literal["auto", "faiss", "torch"]
NMIAverage = Literal["arithmetic", "geometric"]
METRIC_NAMES = ("recall", "nmi", "f1", "map_at_r")


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def _checked(
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


def _check_metric(metric: str) -> None:
    if metric not in ("cosine", "euclidean"):
        raise ValueError(f"metric must be 'cosine' or 'euclidean', got {metric!r}")


def _check_chunk(chunk_size: int) -> None:
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")


def _query_gallery(
    embeddings: Tensor,
    labels: Tensor,
    gallery_embeddings: Tensor | None,
    gallery_labels: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """Validate a query set and an optional separate gallery.

    Returns ``(query (Q, D), query_labels (Q,), gallery (G, D) or None, gallery_labels (G,))``;
    ``gallery`` is ``None`` when the query set is its own gallery (self excluded by index).
    """
    q, ql = _checked(embeddings, labels)
    assert ql is not None
    if (gallery_embeddings is None) != (gallery_labels is None):
        raise ValueError("pass both gallery_embeddings and gallery_labels, or neither")
    if gallery_embeddings is None:
        return q, ql, None, ql
    g, gl = _checked(gallery_embeddings, gallery_labels, "gallery_embeddings", "gallery_labels")
    check_embeddings(g, "gallery_embeddings", q.shape[1])
    assert gl is not None
    return q, ql, g.to(q.device, q.dtype), gl.to(q.device)


# --------------------------------------------------------------------------------------------
# Embedding a dataset
# --------------------------------------------------------------------------------------------


def _batches(
    dataset: Any, batch_size: int, device: torch.device, num_workers: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield ``(images (B, C, H, W), labels (B,))`` in dataset order."""
    n = len(dataset)
    if isinstance(
        dataset, CachedImageDataset
    ):  # cropped on the device, the next batch read meanwhile
        chunks = [
            torch.arange(start, min(start + batch_size, n)) for start in range(0, n, batch_size)
        ]
        yield from prefetch(lambda _, idx: dataset.get_batch(idx, device=device), chunks, device)
        return
    if hasattr(dataset, "get_batch"):  # in-memory fast path: one indexing op per batch
        for start in range(0, n, batch_size):
            images, labels = dataset.get_batch(torch.arange(start, min(start + batch_size, n)))
            yield images, torch.as_tensor(labels)
        return
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=num_workers,
        pin_memory=device.type == "cuda",
    )
    for images, labels in loader:
        yield images, torch.as_tensor(labels)


def compute_embeddings(
    model: nn.Module,
    dataset: Any,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    num_workers: int = 0,
) -> tuple[Tensor, Tensor]:
    """Embed every item of ``dataset`` in order.

    The model runs in eval mode under ``torch.inference_mode()``; afterwards the train/eval flag of
    **every submodule** is restored as it was (so e.g. BatchNorm layers frozen in eval mode inside
    a training model stay frozen).

    Args:
        model: maps images ``(B, C, H, W)`` to embeddings ``(B, D)``.
        dataset: a ``dmlnb.data.LabelledDataset``-like object: ``len(dataset)``,
            ``dataset[i] -> (image (C, H, W), label)``; if it has ``get_batch(indices (B,)) ->
            (images, labels)`` (an ``InMemoryDataset``) that is used instead of a DataLoader; a
            ``CachedImageDataset`` crops its batches on ``device``.
        batch_size: images per forward pass.
        device: where the model runs; default the device of the model's parameters (CPU if it has
            none).
        num_workers: DataLoader workers (ignored on the ``get_batch`` path).

    Returns:
        ``(embeddings (N, D) float32 on CPU, labels (N,) long on CPU)``.
    """
    n = len(dataset)
    if n == 0:
        raise ValueError("dataset is empty; nothing to embed")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if device is None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cpu":
        keep_freed_memory()  # each batch's activations reuse the last one's memory
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    outputs: list[Tensor] = []
    label_batches: list[Tensor] = []
    try:
        with torch.inference_mode():
            for images, labels in _batches(dataset, batch_size, device, num_workers):
                out = model(images.to(device, non_blocking=True))  # (B, D)
                if out.dim() != 2 or out.shape[0] != images.shape[0]:
                    raise ValueError(
                        f"the model must return (B, D) embeddings, got {tuple(out.shape)} for a "
                        f"batch of {images.shape[0]}; flatten or pool the output"
                    )
                outputs.append(out.float().cpu())
                label_batches.append(labels.long().cpu())
    finally:
        for module, mode in modes:
            module.training = mode
    # concatenated outside inference mode: ordinary tensors, usable in autograd later
    return torch.cat(outputs), torch.cat(label_batches)  # (N, D), (N,)


# --------------------------------------------------------------------------------------------
# Nearest neighbours
# --------------------------------------------------------------------------------------------


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


def _knn_chunks(
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


def _check_k(k: int, gallery_size: int, exclude_self: bool, what: str = "k") -> None:
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
    _check_metric(metric)
    _check_chunk(chunk_size)
    q, _ = _checked(query, name="query")
    if gallery is not None:
        check_embeddings(gallery, "gallery", q.shape[1])
    g = q if gallery is None else _checked(gallery, name="gallery")[0].to(q.device, q.dtype)
    exclude = gallery is None if exclude_self is None else bool(exclude_self)
    if exclude and q.shape[0] > g.shape[0]:
        raise ValueError(
            "exclude_self=True needs query row i to be gallery row i, but the query has more "
            f"rows ({q.shape[0]}) than the gallery ({g.shape[0]})"
        )
    _check_k(k, g.shape[0], exclude)
    parts = list(_knn_chunks(q, g, k, metric, exclude, chunk_size))
    scores = torch.cat([s for _, s, _ in parts])  # (Q, k)
    indices = torch.cat([i for _, _, i in parts])  # (Q, k)
    return scores, indices


def _retrieval(
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
    _check_metric(metric)
    _check_chunk(chunk_size)
    exclude = g is None
    gallery = q if g is None else g
    ks = [int(k) for k in ks]
    for k in ks:
        _check_k(k, gallery.shape[0], exclude, "K")
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
    for start, _, idx in _knn_chunks(q, gallery, depth, metric, exclude, chunk_size):
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
    q, ql, g, gl = _query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    return _retrieval(q, ql, g, gl, ks, False, metric, chunk_size)[0]


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
    q, ql, g, gl = _query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    return _retrieval(q, ql, g, gl, (), True, metric, chunk_size)[1]


# --------------------------------------------------------------------------------------------
# k-means
# --------------------------------------------------------------------------------------------


class _FaissUniformStream:
    """The float stream of faiss's ``RandomGenerator(1234).rand_float()``.

    faiss draws ``std::mt19937(1234)`` outputs ``u`` and returns ``float(u) / float(2**32 - 1)``
    (the divisor rounds to ``2**32`` in float32). numpy's legacy ``RandomState(int)`` seeds the
    same Mersenne Twister the same way and ``randint(0, 2**32, dtype=uint32)`` returns its raw
    outputs, so the stream is reproduced exactly. A small buffer lets a scan look ahead and give
    back the draws it did not use.
    """

    def __init__(self, seed: int = 1234) -> None:
        self._rng = np.random.RandomState(seed)
        self._buffer = np.empty(0, dtype=np.float32)

    def peek(self, n: int) -> np.ndarray:
        if self._buffer.size < n:
            raw = self._rng.randint(0, 2**32, size=max(n, 4096), dtype=np.uint32)
            fresh = raw.astype(np.float32) / np.float32(2**32)
            self._buffer = np.concatenate([self._buffer, fresh])
        return self._buffer[:n]

    def consume(self, n: int) -> None:
        self._buffer = self._buffer[n:]


def _split_empty_clusters(centroids: Tensor, counts: Tensor, n: int) -> Tensor:
    """Re-seed empty clusters exactly as faiss's ``split_clusters`` (faiss/Clustering.cpp) does.

    For each empty cluster ``ci`` in ascending order, clusters ``cj = 0, 1, ...`` (cyclically) are
    visited with a fresh uniform ``r`` each until ``r < p_j = (h_j - 1) / (n - k)``, ``h`` the
    current cluster sizes (a stream re-seeded with 1234 at every iteration). Then
    ``c_ci = c_cj * (1 + s eps)``, ``c_cj = c_cj * (1 - s eps)`` with ``eps = 1/1024`` and
    ``s = +1, -1, +1, ...`` over the dimensions, and the size is split: ``h_ci = h_cj / 2``,
    ``h_cj -= h_ci``. All arithmetic is float32 as in faiss.

    Args: ``centroids (k, D)`` after the mean update, ``counts (k,)`` cluster sizes, ``n`` points.
    Returns: the updated ``centroids (k, D)``.
    """
    k = centroids.shape[0]
    h = counts.cpu().numpy().astype(np.float32)  # (k,)
    denom = np.float64(np.float32(n - k))
    dims = torch.arange(centroids.shape[1], device=centroids.device)  # (D,)
    up = torch.where(dims % 2 == 0, 1.0 + 2.0**-10, 1.0 - 2.0**-10).to(centroids.dtype)  # (D,)
    down = torch.where(dims % 2 == 0, 1.0 - 2.0**-10, 1.0 + 2.0**-10).to(centroids.dtype)  # (D,)
    centroids = centroids.clone()
    stream = _FaissUniformStream()
    for ci in np.flatnonzero(h == 0).tolist():
        p = ((h.astype(np.float64) - 1.0) / denom).astype(np.float32)  # (k,)
        cj = 0
        while True:  # one visit per draw, as faiss's loop; terminates since some h_j > 1
            hit = np.flatnonzero(stream.peek(k - cj) < p[cj:])
            if hit.size:
                stream.consume(int(hit[0]) + 1)
                cj += int(hit[0])
                break
            stream.consume(k - cj)
            cj = 0
        source = centroids[cj].clone()  # (D,)
        centroids[ci] = source * up
        centroids[cj] = source * down
        h[ci] = h[cj] / np.float32(2)
        h[cj] -= h[ci]
    return centroids


def _nearest_centroid(x: Tensor, centroids: Tensor, chunk_size: int) -> tuple[Tensor, Tensor]:
    """Nearest centroid of each point by squared L2 (as faiss: ``|x|^2 + |c|^2 - 2 x.c`` clamped
    at 0), ties to the lower centroid index; one ``(chunk, k)`` block at a time.

    Returns ``assignments (N,)`` and the squared distances ``(N,)`` to the chosen centroids.
    """
    parts = [
        euclidean_distance(x[s : s + chunk_size], centroids, squared=True).min(dim=1)  # (c,)
        for s in range(0, x.shape[0], chunk_size)
    ]
    return torch.cat([p.indices for p in parts]), torch.cat([p.values for p in parts])


def _kmeans_torch(x: Tensor, init: Tensor, n_iter: int, chunk_size: int) -> tuple[Tensor, Tensor]:
    """Lloyd's algorithm mirroring faiss's ``Clustering::train`` step for step."""
    n, k = x.shape[0], init.shape[0]
    centroids = x.clone() if n == k else init.clone()  # faiss copies the data when n == k
    previous_objective = None
    for _ in range(n_iter if n > k else 0):
        assign, dist = _nearest_centroid(x, centroids, chunk_size)  # (N,), (N,)
        counts = torch.bincount(assign, minlength=k).to(x.dtype)  # (k,)
        sums = torch.zeros_like(centroids).index_add_(0, assign, x)  # (k, D)
        inv = torch.where(counts > 0, 1.0 / counts.clamp_min(1.0), 0.0)  # (k,) 1/h as faiss
        centroids = sums * inv[:, None]  # (k, D) empty clusters at 0 until split
        if (counts == 0).any():
            centroids = _split_empty_clusters(centroids, counts, n)
        objective = float(dist.double().sum())
        if objective == previous_objective:  # faiss's stop: a fixed point, nothing changes
            break
        previous_objective = objective
    return _nearest_centroid(x, centroids, chunk_size)[0], centroids


def _kmeans_faiss(x: Tensor, init: Tensor, n_iter: int) -> tuple[Tensor, Tensor]:
    """faiss's k-means with as many OpenMP threads as torch has (``torch.get_num_threads()``,
    restored after): faiss may keep its own count, set from ``OMP_NUM_THREADS`` at start-up, and
    its distances round differently with another count, which moves NMI and F1 in the last digits.
    A process that sets torch's threads (a one-thread evaluation) so gets one-thread k-means."""
    import faiss

    xn = np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.float32)  # (N, D)
    n, d = xn.shape
    k = init.shape[0]
    km = faiss.Kmeans(
        d,
        k,
        niter=n_iter,
        nredo=1,
        min_points_per_centroid=1,  # no warning for small clusters (reference setting)
        max_points_per_centroid=n,  # never subsample the data
        verbose=False,
    )
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(torch.get_num_threads())
    try:
        km.train(xn, init_centroids=np.ascontiguousarray(init.cpu().numpy(), dtype=np.float32))
        _, assign = km.index.search(xn, 1)  # (N, 1)
    finally:
        faiss.omp_set_num_threads(before)
    return (
        torch.from_numpy(assign[:, 0]).long().to(x.device),
        torch.from_numpy(km.centroids).to(x.device),
    )


def _faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def kmeans(
    x: Tensor,
    k: int,
    n_iter: int = 20,
    seed: int = 0,
    backend: KMeansBackend = "auto",
    chunk_size: int = 4096,
) -> tuple[Tensor, Tensor]:
    """k-means (Lloyd) clustering, via faiss or an equivalent pure-torch implementation.

    Both backends start from the same centroids -- ``k`` distinct rows of ``x`` drawn without
    replacement by ``torch.randperm`` with a ``torch.Generator`` seeded with ``seed`` -- and run
    ``n_iter`` iterations of: assign each point to its nearest centroid (squared L2), replace each
    centroid by the mean of its points, re-seed empty clusters. The returned assignment is to the
    final centroids. The torch path reproduces faiss (``faiss.Kmeans(..., niter=n_iter,
    min_points_per_centroid=1)`` trained with ``init_centroids``, no subsampling) step for step,
    including faiss's empty-cluster rule: an empty cluster takes a copy of a large cluster's
    centroid (chosen with probability ~ size - 1, faiss's own random stream) and the two copies are
    pushed apart by a relative ``1/1024`` perturbation (see ``_split_empty_clusters``), and its
    early stop when the objective (sum of squared distances) repeats, i.e. at a fixed point. The
    only residual difference is float rounding of the distances (BLAS summation order): it can
    flip a point within float precision of the boundary between two centroids -- in practice
    exact duplicates sitting on a just-split centroid, equidistant from its two copies.

    Args:
        x: ``(N, D)`` points.
        k: number of clusters, ``1 <= k <= N`` (``k == N``: every point is its own centroid).
        n_iter: Lloyd iterations (faiss ``niter``; the reference codebases use 20).
        seed: seeds the choice of initial centroids.
        backend: ``"faiss"``, ``"torch"`` or ``"auto"`` (faiss when installed).
        chunk_size: points per assignment block of the torch path (memory ``chunk x k``).

    Returns:
        ``assignments (N,)`` long and ``centroids (k, D)`` float32, on ``x``'s device.
    """
    x = _checked(x, name="x")[0]  # still in its own dtype: scaled before the float32 cast below
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of points ({n}), got {k}")
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    _check_chunk(chunk_size)
    if backend not in ("auto", "faiss", "torch"):
        raise ValueError(f"backend must be 'auto', 'faiss' or 'torch', got {backend!r}")
    if backend == "faiss" and not _faiss_available():
        raise ImportError("backend='faiss' needs faiss: pip install faiss-cpu, or use 'torch'")
    scale = power_of_two_scale(x)  # () a power of two near max |x|
    if 2.0**-20 <= float(scale) <= 2.0**20:
        scale = torch.ones_like(scale)  # ordinary data: run on x itself
    x = (
        x / scale
    ).float()  # (N, D) exact: huge / tiny finite values neither overflow nor underflow
    generator = torch.Generator().manual_seed(seed)
    init = x[torch.randperm(n, generator=generator)[:k].to(x.device)]  # (k, D)
    if backend == "faiss" or (backend == "auto" and _faiss_available()):
        assignments, centroids = _kmeans_faiss(x, init, n_iter)
    else:
        assignments, centroids = _kmeans_torch(x, init, n_iter, chunk_size)
    return assignments, centroids * scale.to(centroids.device, centroids.dtype)


# --------------------------------------------------------------------------------------------
# Clustering quality
# --------------------------------------------------------------------------------------------


def _contingency(cluster_ids: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Sparse contingency table of two partitions of ``N`` items.

    Returns ``(n_ij (nnz, 3), a (C,), b (K,))``: one row ``(count, class i, cluster j)`` per
    non-zero cell, the class sizes ``a_i`` and the cluster sizes ``b_j`` (all int64, CPU).
    O(N log N) time and O(N) memory: no dense ``C x K`` table.
    """
    check_labels(cluster_ids, None, "cluster_ids")
    check_labels(labels, cluster_ids.shape[0], "labels", of="cluster id")
    if labels.numel() == 0:
        raise ValueError("cluster_ids and labels are empty; pass at least one item")
    _, cls = torch.unique(labels.cpu(), return_inverse=True)  # (N,) in [0, C)
    _, clu = torch.unique(cluster_ids.cpu(), return_inverse=True)  # (N,) in [0, K)
    n_clusters = int(clu.max()) + 1
    cells, counts = torch.unique(cls * n_clusters + clu, return_counts=True)  # (nnz,), (nnz,)
    table = torch.stack([counts, cells // n_clusters, cells % n_clusters], dim=1)  # (nnz, 3)
    return table, torch.bincount(cls), torch.bincount(clu)


def _entropy(sizes: Tensor) -> Tensor:
    """Shannon entropy (nats) of a partition with group ``sizes (C,)``."""
    p = sizes.double() / sizes.sum()  # (C,)
    return -(p * p.log()).sum()


def nmi_clustering(
    cluster_ids: Tensor, labels: Tensor, average: NMIAverage = "arithmetic"
) -> float:
    """Normalised mutual information of a clustering and the class labels,

        NMI = I(Y; Omega) / avg(H(Y), H(Omega)),
        I = sum_ij (n_ij / N) log(N n_ij / (a_i b_j)),

    with ``avg`` the arithmetic mean ``(H1 + H2) / 2`` (sklearn's ``normalized_mutual_info_score``
    default, used by PML and Roth et al. 2020) or the geometric mean ``sqrt(H1 H2)`` (the
    definition in Song et al. 2017, "Deep Metric Learning via Facility Location", Sec. 3). Natural
    logarithms; the ratio does not depend on the base.

    Edge cases follow sklearn: both partitions a single group -> 1.0; exactly one of them a
    single group (``I = 0``) -> 0.0.

    Args: ``cluster_ids (N,)`` and ``labels (N,)``, integer. Returns: NMI in [0, 1].
    """
    if average not in ("arithmetic", "geometric"):
        raise ValueError(f"average must be 'arithmetic' or 'geometric', got {average!r}")
    table, a, b = _contingency(cluster_ids, labels)
    if a.numel() == 1 and b.numel() == 1:
        return 1.0
    if a.numel() == 1 or b.numel() == 1:
        return 0.0
    n = float(a.sum())
    n_ij = table[:, 0].double()  # (nnz,)
    outer = a[table[:, 1]].double() * b[table[:, 2]].double()  # (nnz,) a_i b_j
    mi = ((n_ij / n) * (n * n_ij / outer).log()).sum().clamp_min(0.0)
    h_class, h_cluster = _entropy(a), _entropy(b)
    if average == "arithmetic":
        norm = (h_class + h_cluster) / 2
    else:
        norm = (h_class * h_cluster).sqrt()
    return float(mi / norm)


def nmi(
    embeddings: Tensor,
    labels: Tensor,
    n_clusters: int | None = None,
    seed: int = 0,
    backend: KMeansBackend = "auto",
    average: NMIAverage = "arithmetic",
) -> float:
    """NMI of a k-means clustering of ``embeddings (N, D)`` against ``labels (N,)``.

    ``n_clusters`` defaults to the number of distinct labels (the standard protocol); the
    clustering is :func:`kmeans` (20 iterations, ``seed``, ``backend``) on the embeddings as
    given, and the score :func:`nmi_clustering` with ``average``.
    """
    x, y = _checked(embeddings, labels)
    assert y is not None
    k = int(torch.unique(y).numel()) if n_clusters is None else int(n_clusters)
    assignments, _ = kmeans(x, k, seed=seed, backend=backend)
    return nmi_clustering(assignments, y, average)


def f1_clustering(cluster_ids: Tensor, labels: Tensor) -> float:
    """Pairwise F1 of a clustering against the classes (Song et al. 2016, Sec. 5).

    A pair of items is a true positive when it shares a cluster and a class. With the contingency
    table ``n_ij`` (class i, cluster j), class sizes ``a_i`` and cluster sizes ``b_j``:

        TP = sum_ij C(n_ij, 2),  P = TP / sum_j C(b_j, 2),  R = TP / sum_i C(a_i, 2),
        F1 = 2PR / (P + R) = 2 TP / (sum_j C(b_j, 2) + sum_i C(a_i, 2)).

    The last form is used: it is defined whenever any pair shares a cluster or a class. When none
    does (every item alone in both partitions) the partitions agree on every pair and 1.0 is
    returned. O(N log N) time via the sparse contingency table; never an ``N x N`` matrix.

    Args: ``cluster_ids (N,)`` and ``labels (N,)``, integer. Returns: F1 in [0, 1].
    """
    table, a, b = _contingency(cluster_ids, labels)

    def pairs(sizes: Tensor) -> int:
        return int((sizes * (sizes - 1) // 2).sum())

    tp, same_class, same_cluster = pairs(table[:, 0]), pairs(a), pairs(b)
    if same_class + same_cluster == 0:
        return 1.0
    return 2.0 * tp / (same_class + same_cluster)


# --------------------------------------------------------------------------------------------
# Everything at once
# --------------------------------------------------------------------------------------------


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
    _check_metric(metric)
    q, ql, g, gl = _query_gallery(embeddings, labels, gallery_embeddings, gallery_labels)
    if "recall" in metrics and len(ks) == 0:
        raise ValueError("ks is empty; pass at least one K, e.g. ks=(1, 2, 4, 8)")
    results: dict[str, float] = {}
    map_r = None
    if "recall" in metrics or "map_at_r" in metrics:  # one neighbour search for both
        ks = ks if "recall" in metrics else ()
        recalls, map_r = _retrieval(q, ql, g, gl, ks, "map_at_r" in metrics, metric, 1024)
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
