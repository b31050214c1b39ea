"""ContrastiveLoss vs a float64 brute-force loop and vs pytorch-metric-learning."""

from __future__ import annotations

import pytest
import torch
from batches import random_batch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer

from dmlnb.losses.contrastive import ContrastiveLoss


def make_batch(seed: int, batch: int = 14, dim: int = 6, classes: int = 5):
    return random_batch(seed, batch, dim, classes)


def brute_contrastive(x, y, pos_margin, neg_margin, squared_dist, squared_hinge, mining, reduction):
    """Loop straight from the definition (L2-normalised input)."""
    x = x / x.norm(dim=1, keepdim=True)
    n = len(y)
    power = 2 if squared_hinge else 1

    def dist(i, j):
        d2 = ((x[i] - x[j]) ** 2).sum()
        return d2 if squared_dist else d2.sqrt()

    pos_pairs, neg_pairs = [], []
    if mining == "all":
        for i in range(n):
            for j in range(n):
                if i != j:
                    (pos_pairs if y[i] == y[j] else neg_pairs).append(dist(i, j))
    else:
        for i in range(n):
            pos = [dist(i, j) for j in range(n) if j != i and y[j] == y[i]]
            neg = [dist(i, j) for j in range(n) if y[j] != y[i]]
            if pos and neg:
                pos_pairs.append(max(pos))
                neg_pairs.append(min(neg))
    pos_terms = [torch.relu(d - pos_margin) ** power for d in pos_pairs]
    neg_terms = [torch.relu(neg_margin - d) ** power for d in neg_pairs]

    def reduce(terms):
        if reduction == "nonzero":
            terms = [t for t in terms if t > 0]
        return sum(terms) / len(terms) if terms else x.sum() * 0.0

    return reduce(pos_terms) + reduce(neg_terms)


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


@pytest.mark.parametrize("mining", ["all", "hard"])
@pytest.mark.parametrize("reduction", ["nonzero", "mean"])
@pytest.mark.parametrize(
    "distance,squared_hinge", [("euclidean", False), ("euclidean", True), ("squared", False)]
)
def test_matches_brute_force(mining, reduction, distance, squared_hinge):
    x, y = make_batch(seed=1)
    kwargs = dict(pos_margin=0.3, neg_margin=1.1)
    ours = ContrastiveLoss(
        **kwargs,
        distance=distance,
        squared_hinge=squared_hinge,
        mining=mining,
        reduction=reduction,
    )
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_contrastive(
            e, lab, 0.3, 1.1, distance == "squared", squared_hinge, mining, reduction
        ),
        x,
        y,
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


@pytest.mark.parametrize("mining", ["all", "hard"])
@pytest.mark.parametrize("reduction", ["nonzero", "mean"])
@pytest.mark.parametrize("power", [1, 2])
def test_matches_pml(mining, reduction, power):
    x, y = make_batch(seed=2, batch=24)
    distance = LpDistance(p=2, power=power, normalize_embeddings=True)
    reducer = AvgNonZeroReducer() if reduction == "nonzero" else MeanReducer()
    pml = pml_losses.ContrastiveLoss(
        pos_margin=0.25, neg_margin=0.9, distance=distance, reducer=reducer
    )
    if mining == "hard":
        miner = pml_miners.BatchHardMiner(
            distance=LpDistance(p=2, power=power, normalize_embeddings=True)
        )
        pml_fn = lambda e, lab: pml(e, lab, miner(e, lab))  # noqa: E731
    else:
        pml_fn = pml
    ours = ContrastiveLoss(
        pos_margin=0.25,
        neg_margin=0.9,
        distance="euclidean" if power == 1 else "squared",
        mining=mining,
        reduction=reduction,
    )
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(pml_fn, x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_unnormalized_uses_raw_distances():
    x, y = make_batch(seed=3)
    value = ContrastiveLoss(neg_margin=5.0, normalize=False, squared_hinge=True, reduction="mean")(
        x, y
    )
    xd = x.detach()
    d = torch.cdist(xd, xd)
    same = y[:, None] == y[None, :]
    off = ~torch.eye(len(y), dtype=torch.bool)
    expected = (d[same & off] ** 2).mean() + (torch.relu(5.0 - d[~same]) ** 2).mean()
    torch.testing.assert_close(value.detach(), expected)


def test_bad_arguments():
    with pytest.raises(ValueError, match="mining"):
        ContrastiveLoss(mining="semihard")
    with pytest.raises(ValueError, match="pos_margin"):
        ContrastiveLoss(pos_margin=2.0, neg_margin=1.0)
