"""k-means (Lloyd) clustering, via faiss or a pure-torch path that reproduces faiss step for
step (:func:`kmeans`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from dmlnb.evaluation.inputs import (
    KMeansBackend,
    check_chunk,
    checked,
)
from dmlnb.pairs import euclidean_distance, power_of_two_scale

__all__ = ["kmeans"]


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
    x = checked(x, name="x")[0]  # still in its own dtype: scaled before the float32 cast below
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of points ({n}), got {k}")
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    check_chunk(chunk_size)
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
