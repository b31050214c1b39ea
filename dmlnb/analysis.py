"""How an embedding uses its space: the similarity statistics behind Easy
Positive's Figures 2, 3, 5.

Xuan, Stylianou & Pless (WACV 2020) argue that pulling every image towards *all* (or the
hardest) same-class images over-clusters the training data, and that the resulting embedding maps
unseen classes right onto the training clusters. Three statistics of an L2-normalised embedding
(cosine similarity ``s(x, y) = x.y / (|x| |y|)``) make this visible:

* :func:`same_class_similarities` -- the similarity of every same-class pair ``i < j`` of a set
  (Figure 2: how tightly the training classes are clustered);
* :func:`nearest_reference_similarity` -- each query point's similarity to its nearest point of
  a reference set (Figure 3: how closely test points of new classes land on training points);
* :func:`nearest_same_and_other` -- for every point, the similarity of its nearest same-class
  point and of its nearest other-class point within the same set (Figure 5; the point is
  retrieved correctly at rank 1 exactly when the first exceeds the second, i.e. it lies below
  the line ``y = x`` of a (same, other) scatter).

Everything is exact and memory-bounded: points are processed in row chunks and no ``N x N``
matrix is formed. Same-class pairs are found on the label-sorted order, so a chunk of rows only
meets the columns of its own classes (a ``(chunk, span)`` block, ``span`` about the chunk plus
two class sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from dmlnb.evaluation import knn

__all__ = [
    "same_class_similarities",
    "nearest_reference_similarity",
    "nearest_same_and_other",
    "NearestSameOther",
    "similarity_summary",
]


def _check(embeddings: Tensor, labels: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    if not isinstance(embeddings, Tensor) or embeddings.dim() != 2:
        raise ValueError(
            "embeddings must be a 2-D tensor (N, D), got "
            f"{getattr(embeddings, 'shape', type(embeddings))}"
        )
    if embeddings.shape[0] == 0:
        raise ValueError("embeddings are empty (0 rows)")
    if not torch.isfinite(embeddings).all():
        raise ValueError("embeddings contain NaN or Inf")
    x = embeddings.detach()
    x = x if x.dtype == torch.float64 else x.float()
    if labels is None:
        return x, None
    y = torch.as_tensor(labels).detach().to(x.device)
    if y.dim() != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {tuple(y.shape)}")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"labels must be integers, got dtype {y.dtype}")
    return x, y.long()


def _check_chunk(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def same_class_similarities(embeddings: Tensor, labels: Tensor, chunk_size: int = 1024) -> Tensor:
    """Cosine similarities of all same-class pairs ``{i, j}``, ``i != j``, each pair once.

    Args:
        embeddings: ``(N, D)``; normalised inside (a zero row has similarity 0 to everything).
        labels: ``(N,)`` integer classes.
        chunk_size: rows per block.

    Returns:
        ``(P,)`` float tensor on the CPU, ``P = sum_c n_c (n_c - 1) / 2``; ordered by class
        (ascending label), then by the pair's position in the input's order within the class.

    Memory: one ``(chunk, span)`` block, where ``span`` covers the classes the chunk's rows belong
    to (on the label-sorted order), never ``N x N``.
    """
    _check_chunk(chunk_size)
    x, y = _check(embeddings, labels)
    x = F.normalize(x, dim=1)  # (N, D)
    order = torch.sort(y, stable=True).indices  # (N,) input order kept within a class
    xs, ys = x[order], y[order]  # (N, D), (N,)
    _, counts = torch.unique_consecutive(ys, return_counts=True)  # (C,)
    ends = counts.cumsum(0)  # (C,) one past each class's last sorted position
    starts = ends - counts  # (C,)
    cls = torch.repeat_interleave(torch.arange(counts.numel(), device=ys.device), counts)  # (N,)
    parts: list[Tensor] = []
    n = xs.shape[0]
    for r0 in range(0, n, chunk_size):
        r1 = min(n, r0 + chunk_size)
        c0, c1 = int(starts[cls[r0]]), int(ends[cls[r1 - 1]])  # columns of the chunk's classes
        block = xs[r0:r1] @ xs[c0:c1].T  # (c, span)
        rows = torch.arange(r0, r1, device=xs.device)[:, None]  # (c, 1)
        cols = torch.arange(c0, c1, device=xs.device)[None, :]  # (1, span)
        keep = (cls[r0:r1, None] == cls[None, c0:c1]) & (cols > rows)  # (c, span) pair once
        parts.append(block[keep])
    return torch.cat(parts).cpu() if parts else x.new_zeros(0).cpu()


def nearest_reference_similarity(
    queries: Tensor, reference: Tensor, chunk_size: int = 1024
) -> tuple[Tensor, Tensor]:
    """Each query's cosine similarity to its most similar reference point, and that point.

    E.g. every test image against the training set (Easy Positive, Figure 3). The query and
    reference sets are distinct sets, so nothing is excluded. Chunked exact search
    (:func:`dmlnb.evaluation.knn`), ties to the lower reference index.

    Returns:
        ``similarity (Q,)`` and ``index (Q,)`` into ``reference``, on the CPU.
    """
    _check_chunk(chunk_size)
    q, _ = _check(queries)
    r, _ = _check(reference)
    scores, idx = knn(q, r, k=1, metric="cosine", exclude_self=False, chunk_size=chunk_size)
    return scores[:, 0].cpu(), idx[:, 0].cpu()


@dataclass(frozen=True)
class NearestSameOther:
    """Per point: similarity of the nearest same-class point and of the nearest other-class point.

    Attributes:
        same: ``(N,)`` max similarity to another point of the same class (``nan`` if the point's
            class has no other member).
        other: ``(N,)`` max similarity to a point of another class (``nan`` if every point shares
            one class).
    """

    same: Tensor
    other: Tensor

    @property
    def correct(self) -> Tensor:
        """``(N,)`` bool: the nearest neighbour is of the same class (``same > other``; a point
        below ``y = x`` in the (same, other) scatter). ``nan`` entries count as wrong."""
        return self.same > self.other

    @property
    def accuracy(self) -> float:
        """Fraction of points with ``same > other``: Recall@1 up to exact ties."""
        return float(self.correct.double().mean())


def nearest_same_and_other(
    embeddings: Tensor, labels: Tensor, chunk_size: int = 1024
) -> NearestSameOther:
    """For each point, the cosine similarity of its nearest same-class point (itself excluded)
    and of its nearest other-class point, within the same set (Easy Positive, Figure 5).

    Memory: one ``(chunk, N)`` block at a time.
    """
    _check_chunk(chunk_size)
    x, y = _check(embeddings, labels)
    x = F.normalize(x, dim=1)  # (N, D)
    n = x.shape[0]
    same = torch.empty(n, dtype=x.dtype, device=x.device)
    other = torch.empty(n, dtype=x.dtype, device=x.device)
    for r0 in range(0, n, chunk_size):
        r1 = min(n, r0 + chunk_size)
        block = x[r0:r1] @ x.T  # (c, N)
        is_same = y[r0:r1, None] == y[None, :]  # (c, N)
        rows = torch.arange(r1 - r0, device=x.device)
        is_same[rows, r0 + rows] = False  # not itself
        is_other = y[r0:r1, None] != y[None, :]  # (c, N)
        s = block.masked_fill(~is_same, float("-inf")).amax(dim=1)  # (c,)
        o = block.masked_fill(~is_other, float("-inf")).amax(dim=1)  # (c,)
        same[r0:r1] = torch.where(is_same.any(dim=1), s, torch.full_like(s, float("nan")))
        other[r0:r1] = torch.where(is_other.any(dim=1), o, torch.full_like(o, float("nan")))
    return NearestSameOther(same=same.cpu(), other=other.cpu())


def similarity_summary(values: Tensor | np.ndarray, threshold: float = 0.9) -> dict[str, float]:
    """Mean, median, 10th / 90th percentile and the fraction above ``threshold`` of a set of
    similarities (``nan`` entries ignored)."""
    v = np.asarray(values.cpu() if isinstance(values, Tensor) else values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        raise ValueError("no finite similarity to summarise")
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "p10": float(np.percentile(v, 10)),
        "p90": float(np.percentile(v, 90)),
        f"frac>{threshold:g}": float((v > threshold).mean()),
    }
