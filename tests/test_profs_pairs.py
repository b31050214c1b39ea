"""RepresentativePairs: PROFS's losses on the pairs of the class representatives (Sec. 5.3),
against brute-force float64 loops over the pairs the paper keeps."""

from __future__ import annotations

import math

import pytest
import torch

from dmlnb.losses import (
    ContrastiveLoss,
    LiftedStructureLoss,
    NPairLoss,
    SoftTripleLoss,
    TripletLoss,
)
from dmlnb.profs.representative_pairs import RepresentativePairs, representative_pair_filter
from dmlnb.profs.representatives import RepresentativeSampler


def sampler_batch(m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A real RepresentativeSampler batch (5 classes of m, representative first) and embeddings."""
    y_all = torch.arange(8).repeat_interleave(6)
    s = RepresentativeSampler(y_all, batch_size=5 * m, m=m, period=3, seed=seed)
    idx = torch.tensor(next(iter(s)))
    g = torch.Generator().manual_seed(seed)
    return torch.randn(idx.numel(), 4, generator=g, dtype=torch.float64), y_all[idx]


def is_rep(i: int, m: int) -> bool:
    return i % m == 0


@pytest.mark.parametrize("m", [1, 2, 3])
def test_filter_of_each_mode_matches_the_definition(m):
    B = 4 * m
    anchored = representative_pair_filter(B, m, "anchored")
    anyend = representative_pair_filter(B, m, "any")
    for i in range(B):
        for j in range(B):
            assert bool(anchored[i, j]) == is_rep(i, m)
            assert bool(anyend[i, j]) == (is_rep(i, m) or is_rep(j, m))
    assert representative_pair_filter(B, m, "all") is None
    assert anchored.dtype == torch.bool and anchored.shape == (B, B)


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True)


def d(x: torch.Tensor, i: int, j: int, squared: bool = False) -> float:
    v = float(((x[i] - x[j]) ** 2).sum())
    return v if squared else math.sqrt(v)


@pytest.mark.parametrize("m", [2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_anchored_contrastive_hard_is_over_representatives_only(m, seed):
    """C-PROFS: each representative, its hardest positive (in its group) and hardest negative."""
    x, y = sampler_batch(m, seed)
    got = RepresentativePairs(
        ContrastiveLoss(neg_margin=1.0, squared_hinge=True, mining="hard", reduction="mean"),
        m,
        "anchored",
    )(x, y)
    u, B = unit(x), len(y)
    pos, neg = [], []
    for r in range(0, B, m):
        pos.append(max(d(u, r, j) for j in range(B) if y[j] == y[r] and j != r) ** 2)
        neg.append(max(1.0 - min(d(u, r, j) for j in range(B) if y[j] != y[r]), 0.0) ** 2)
    assert float(got) == pytest.approx(sum(pos) / len(pos) + sum(neg) / len(neg), rel=1e-10)


@pytest.mark.parametrize("m", [2, 3])
def test_anchored_triplet_semihard_uses_representative_anchors(m):
    x, y = sampler_batch(m, 2)
    got = RepresentativePairs(
        TripletLoss(margin=0.2, mining="semihard", distance="squared", reduction="mean"),
        m,
        "anchored",
    )(x, y)
    u, B, terms = unit(x), len(y), []
    for a in range(0, B, m):
        negs = [d(u, a, n, True) for n in range(B) if y[n] != y[a]]
        for p in range(B):
            if y[p] == y[a] and p != a:
                dp = d(u, a, p, True)
                farther = [v for v in negs if v > dp]
                terms.append(max(dp - (min(farther) if farther else max(negs)) + 0.2, 0.0))
    assert float(got) == pytest.approx(sum(terms) / len(terms), rel=1e-10)


@pytest.mark.parametrize("m", [2, 3])
def test_any_lifted_ignores_pairs_between_non_representatives(m):
    """L-PROFS: Song et al.'s J_ij over positive pairs with a representative, each sample's
    negatives restricted to the pairs with a representative at one end."""
    x, y = sampler_batch(m, 3)
    got = RepresentativePairs(LiftedStructureLoss(neg_margin=1.0), m, "any")(x, y)
    u, B = unit(x), len(y)
    ok = lambda i, j: is_rep(i, m) or is_rep(j, m)  # noqa: E731
    terms = []
    for i in range(B):
        for j in range(B):
            if i != j and y[i] == y[j] and ok(i, j):
                s = sum(math.exp(1.0 - d(u, i, k)) for k in range(B) if y[k] != y[i] and ok(i, k))
                s += sum(math.exp(1.0 - d(u, j, k)) for k in range(B) if y[k] != y[j] and ok(j, k))
                terms.append(max(math.log(s) + d(u, i, j), 0.0) ** 2 / 2)
    assert float(got) == pytest.approx(sum(terms) / len(terms), rel=1e-10)


def test_all_mode_is_the_inner_loss_unchanged():
    x, y = sampler_batch(2, 4)
    inner = NPairLoss(l2_reg=0.02)
    assert torch.equal(RepresentativePairs(inner, 2, "all")(x, y), inner(x, y))


def test_bad_use_raises():
    x, y = sampler_batch(2, 5)
    with pytest.raises(ValueError, match="not a multiple"):
        RepresentativePairs(ContrastiveLoss(), 3, "anchored")(x[:10], y[:10])
    with pytest.raises(ValueError, match="layout"):
        RepresentativePairs(ContrastiveLoss(), 2, "anchored")(x, y.flip(0).roll(1))
    with pytest.raises(ValueError, match="mode"):
        RepresentativePairs(ContrastiveLoss(), 2, "reps")
    with pytest.raises(ValueError, match="does not support pair_filter"):
        RepresentativePairs(SoftTripleLoss(8, 4), 2, "anchored")
    with pytest.raises(TypeError, match="MetricLoss"):
        RepresentativePairs(torch.nn.MSELoss(), 2, "all")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="does not support pair_filter"
    ):  # the wrapper owns the filter
        RepresentativePairs(ContrastiveLoss(), 2, "any")(
            x, y, pair_filter=torch.ones(10, 10, dtype=torch.bool)
        )
