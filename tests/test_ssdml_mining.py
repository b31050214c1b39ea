"""Triplet mining from the sorted propagated neighbourhood vs a loop over the paper's definition."""

from __future__ import annotations

import pytest
import torch

from dmlnb.ssdml.mining import neighbourhood_triplets


def brute(W, nbrs):
    out = []
    n, k = nbrs.shape
    half = k // 2
    for a in range(n):
        ranked = sorted(nbrs[a].tolist(), key=lambda j: -W[a, j].item())  # descending affinity
        for i in range(half):
            out.append([a, ranked[i], ranked[k - half + i]])
    return torch.tensor(out)


@pytest.mark.parametrize("k", [2, 4, 5, 10])
def test_matches_definition(k):
    g = torch.Generator().manual_seed(k)
    n = 15
    W = torch.rand(n, n, generator=g, dtype=torch.float64)
    W = (W + W.T) / 2
    nbrs = torch.stack([torch.randperm(n - 1, generator=g)[:k] for _ in range(n)])
    nbrs = nbrs + (nbrs >= torch.arange(n)[:, None]).long()  # never the anchor itself
    out = neighbourhood_triplets(W, nbrs)
    assert out.shape == (n * (k // 2), 3)
    assert torch.equal(out, brute(W, nbrs))
    # every positive is at least as affine to its anchor as its negative
    assert bool((W[out[:, 0], out[:, 1]] >= W[out[:, 0], out[:, 2]]).all())


def test_ties_keep_knn_order_and_errors():
    W = torch.zeros(4, 4)
    nbrs = torch.tensor([[1, 2], [0, 2], [3, 0], [2, 1]])
    out = neighbourhood_triplets(W, nbrs)
    assert out.tolist() == [[0, 1, 2], [1, 0, 2], [2, 3, 0], [3, 2, 1]]
    with pytest.raises(ValueError, match="k >= 2"):
        neighbourhood_triplets(W, nbrs[:, :1])
    with pytest.raises(ValueError, match="rows"):
        neighbourhood_triplets(W, nbrs[:3])
