"""The two readings of the affinity propagation, negatives from outside the neighbourhood, and
the mining-quality measurement of the chapter's diagnosis."""

from __future__ import annotations

import pytest
import torch

from dmlnb.ssdml.angular import AngularSSDML
from dmlnb.ssdml.diagnosis import mining_quality
from dmlnb.ssdml.graph import (
    initial_affinity,
    knn_transition,
    propagate_affinity,
    propagated_affinity,
    symmetrize,
)
from dmlnb.ssdml.mining import neighbourhood_triplets


def _graph(n: int = 12, k: int = 3):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(n, 2, generator=g, dtype=torch.float64)
    labels = torch.full((n,), -1)
    labels[:4] = torch.tensor([0, 0, 1, 1])
    return initial_affinity(labels).double(), knn_transition(z, k)


def test_one_sided_reading_is_the_papers_formula_symmetrised():
    W0, Q = _graph()
    assert torch.allclose(
        propagated_affinity(W0, Q, 0.9), symmetrize(propagate_affinity(W0, Q, 0.9))
    )


def test_two_sided_reading_against_an_explicit_inverse():
    W0, Q = _graph()
    P = 0.1 * torch.linalg.inv(
        torch.eye(len(Q), dtype=torch.float64) - 0.9 * Q
    )  # (N, N) row-stochastic
    W = propagated_affinity(W0, Q, 0.9, "two-sided")
    assert torch.allclose(W, P @ W0 @ P.T, atol=1e-12)
    assert torch.allclose(W, W.T, atol=1e-12)
    # an unlabelled pair gets label information (it differs from pure graph proximity)
    one = propagated_affinity(W0, Q, 0.9)
    assert not torch.allclose(W[4:, 4:], one[4:, 4:], atol=1e-6)
    with pytest.raises(ValueError, match="propagation must be one of"):
        propagated_affinity(W0, Q, 0.9, "both")


def test_outside_negatives_are_outside_the_neighbourhood_and_positives_unchanged():
    n, k = 30, 6
    z = torch.randn(n, 3, generator=torch.Generator().manual_seed(1))
    nbrs = torch.cdist(z, z).fill_diagonal_(float("inf")).topk(k, largest=False).indices  # (N, k)
    W = torch.rand(n, n, generator=torch.Generator().manual_seed(2))
    W = W + W.T
    paper = neighbourhood_triplets(W, nbrs)
    out = neighbourhood_triplets(W, nbrs, "outside", generator=torch.Generator().manual_seed(3))
    assert out.shape == paper.shape and torch.equal(out[:, :2], paper[:, :2])
    inside = torch.zeros(n, n, dtype=torch.bool).scatter_(1, nbrs, True) | torch.eye(
        n, dtype=torch.bool
    )
    assert not bool(inside[out[:, 0], out[:, 2]].any())
    per_anchor = out[:, 2].view(n, k // 2)
    assert all(len(set(row.tolist())) == k // 2 for row in per_anchor)  # without replacement
    with pytest.raises(ValueError, match="points outside each neighbourhood"):
        neighbourhood_triplets(W[:7, :7], nbrs[:7, :5].clamp(max=6), "outside")
    with pytest.raises(ValueError, match="negatives must be one of"):
        neighbourhood_triplets(W, nbrs, "far")


def test_angular_ssdml_mines_with_its_options():
    torch.manual_seed(0)
    z = torch.nn.functional.normalize(torch.randn(40, 4), dim=1)
    labels = torch.full((40,), -1)
    labels[:6] = torch.tensor([0, 0, 1, 1, 2, 2])
    obj = AngularSSDML(4, 2, k=4, negatives="outside", propagation="two-sided")
    t = obj.prepare(z, labels)
    nbrs = torch.cdist(z, z).fill_diagonal_(float("inf")).topk(4, largest=False).indices
    inside = torch.zeros(40, 40, dtype=torch.bool).scatter_(1, nbrs, True)
    assert not bool(inside[t[:, 0], t[:, 2]].any())
    assert "propagation=two-sided, negatives=outside" in repr(obj)
    with pytest.raises(ValueError, match="negatives must be one of"):
        AngularSSDML(4, 2, negatives="far")


def test_mining_quality_counts_against_the_hidden_classes():
    # two tight, far-apart clusters of 10: every kNN neighbour (k = 4) is of the anchor's class
    g = torch.Generator().manual_seed(0)
    targets = torch.arange(2).repeat_interleave(10)
    z = (
        torch.randn(20, 2, generator=g) * 0.01 + torch.nn.functional.one_hot(targets, 2).float()
    )  # directions
    labels = torch.full((20,), -1)
    labels[[0, 10]] = torch.tensor([0, 1])
    q = mining_quality(z, labels, targets, k=4, gamma=0.9)
    assert (
        q["knn_same"] == 1.0
        and q["pos_same"] == 1.0
        and q["neg_other"] == 0.0
        and q["triplet_correct"] == 0.0
    )
    out = mining_quality(
        z,
        labels,
        targets,
        k=4,
        gamma=0.9,
        negatives="outside",
        generator=torch.Generator().manual_seed(0),
    )
    assert 0.5 < out["neg_other"] <= 1.0 and out["triplet_correct"] == out["neg_other"]
    chance = mining_quality(
        z,
        labels,
        targets,
        k=4,
        gamma=0.9,
        affinity="random",
        generator=torch.Generator().manual_seed(0),
    )
    again = mining_quality(
        z,
        labels,
        targets,
        k=4,
        gamma=0.9,
        affinity="random",
        generator=torch.Generator().manual_seed(0),
    )
    assert chance == again
    with pytest.raises(ValueError, match="hidden class"):
        mining_quality(z, labels, labels, k=4, gamma=0.9)
    with pytest.raises(ValueError, match="affinity must be one of"):
        mining_quality(z, labels, targets, k=4, gamma=0.9, affinity="labels")


@pytest.mark.parametrize("k", [4, 6])
def test_two_sortings_of_one_neighbourhood_move_positives_and_negatives_alike(k):
    """Positives and negatives split the same k neighbours (k even), so two sortings of them
    (W against a random W, the two propagations) change the share of positives of the anchor's
    class and of negatives of another class by the same amount: the diagnosis asks it once."""
    g = torch.Generator().manual_seed(0)
    targets = torch.arange(4).repeat_interleave(10)
    z = (
        torch.randn(40, 3, generator=g)
        + 0.8 * torch.nn.functional.one_hot(targets, 4)[:, :3].float()
    )
    labels = torch.full((40,), -1)
    labels[::7] = targets[::7]
    w = mining_quality(z, labels, targets, k=k, gamma=0.9)
    for other in (
        mining_quality(
            z,
            labels,
            targets,
            k=k,
            gamma=0.9,
            affinity="random",
            generator=torch.Generator().manual_seed(1),
        ),
        mining_quality(z, labels, targets, k=k, gamma=0.9, propagation="two-sided"),
    ):
        assert other["knn_same"] == w["knn_same"]
        assert other["pos_same"] - w["pos_same"] == pytest.approx(
            other["neg_other"] - w["neg_other"], abs=1e-6
        )
