"""TripletLoss vs float64 brute-force loops, a port of TF's semi-hard definition, and PML."""

from __future__ import annotations

import pytest
import torch
from batches import random_batch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer

from dmlnb.losses.triplet import TripletLoss


def make_batch(seed: int, batch: int = 14, dim: int = 6, classes: int = 4):
    return random_batch(seed, batch, dim, classes)


def distance_fn(x, squared):
    def dist(i, j):
        d2 = ((x[i] - x[j]) ** 2).sum()
        return d2 if squared else d2.sqrt()

    return dist


def reduce(terms, reduction, like):
    if reduction == "nonzero":
        terms = [t for t in terms if t > 0]
    return sum(terms) / len(terms) if terms else like.sum() * 0.0


def brute_triplet(x, y, margin, mining, squared, reduction, normalize=True):
    """Loops straight from the definitions of each triplet selection."""
    xn = x / x.norm(dim=1, keepdim=True) if normalize else x
    dist = distance_fn(xn, squared)
    n = len(y)
    terms = []
    for a in range(n):
        pos = [p for p in range(n) if p != a and y[p] == y[a]]
        neg = [k for k in range(n) if y[k] != y[a]]
        if not pos or not neg:
            continue
        if mining == "all":
            terms += [torch.relu(dist(a, p) - dist(a, k) + margin) for p in pos for k in neg]
        elif mining == "hard":
            d_ap = max(dist(a, p) for p in pos)
            d_an = min(dist(a, k) for k in neg)
            terms.append(torch.relu(d_ap - d_an + margin))
        else:  # TensorFlow triplet_semihard_loss / FaceNet semi-hard, one triplet per (a, p)
            for p in pos:
                d_ap = dist(a, p)
                farther = [dist(a, k) for k in neg if dist(a, k) > d_ap]
                d_an = min(farther) if farther else max(dist(a, k) for k in neg)
                terms.append(torch.relu(d_ap + margin - d_an))
    return reduce(terms, reduction, x)


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


@pytest.mark.parametrize("mining", ["all", "hard", "semihard"])
@pytest.mark.parametrize("distance", ["euclidean", "squared"])
@pytest.mark.parametrize("reduction", ["nonzero", "mean"])
def test_matches_brute_force(mining, distance, reduction):
    x, y = make_batch(seed=10)
    ours = TripletLoss(margin=0.3, mining=mining, distance=distance, reduction=reduction)
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_triplet(e, lab, 0.3, mining, distance == "squared", reduction), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


@pytest.mark.parametrize("mining", ["all", "semihard"])
def test_unnormalized_large_margin(mining):
    """Raw embeddings, margin large enough that most triplets are active (sum identity)."""
    x, y = make_batch(seed=11, batch=16)
    ours = TripletLoss(margin=2.0, mining=mining, normalize=False, reduction="mean")
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_triplet(e, lab, 2.0, mining, False, "mean", normalize=False), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_tf_semihard_settings_on_hand_computed_batch():
    """1-D points, squared distances, TF semantics (mean over all positive pairs).

    Class 0 at 0 and 3, class 1 at 1 and 5. Squared distances: d(0,3)=9, d(0,1)=1, d(0,5)=25,
    d(3,1)=4, d(3,5)=4, d(1,5)=16.
    (0 -> 3): negatives 1, 25; smallest > 9 is 25 -> [9 + m - 25]_+ = 0 for m = 1.
    (3 -> 0): negatives 4, 4; none > 9 -> farthest 4 -> 9 + 1 - 4 = 6.
    (1 -> 5): negatives 1, 4 (to 0 and 3); none > 16 -> farthest 4 -> 16 + 1 - 4 = 13.
    (5 -> 1): negatives 25, 4; smallest > 16 is 25 -> 16 + 1 - 25 < 0 -> 0.
    Mean over the 4 positive pairs: 19 / 4.
    """
    x = torch.tensor([[0.0], [3.0], [1.0], [5.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    loss = TripletLoss(
        margin=1.0, mining="semihard", distance="squared", normalize=False, reduction="mean"
    )
    torch.testing.assert_close(loss(x, y), torch.tensor(19.0 / 4, dtype=torch.float64))


def test_semihard_negative_must_be_strictly_farther():
    """Class 0 at 0 and 2, class 1 at -2 and 10 (1-D, squared distances, m = 1).

    (0 -> 2): d_ap = 4; negatives 4 (tie, not semi-hard) and 100 -> 4 + 1 - 100 < 0 -> 0.
    (2 -> 0): d_ap = 4; negatives 16, 64 -> 16 -> 0.
    (-2 -> 10): d_ap = 144; negatives 4, 16, none farther -> 16 -> 129.
    (10 -> -2): d_ap = 144; negatives 100, 64, none farther -> 100 -> 45.
    Mean: 174 / 4 (a non-strict choice would give 175 / 4).
    """
    x = torch.tensor([[0.0], [2.0], [-2.0], [10.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    loss = TripletLoss(
        margin=1.0, mining="semihard", distance="squared", normalize=False, reduction="mean"
    )
    torch.testing.assert_close(loss(x, y), torch.tensor(174.0 / 4, dtype=torch.float64))


@pytest.mark.parametrize("power", [1, 2])
def test_batch_all_matches_pml(power):
    x, y = make_batch(seed=12, batch=40, classes=6)
    pml = pml_losses.TripletMarginLoss(
        margin=0.1,
        distance=LpDistance(p=2, power=power, normalize_embeddings=True),
        reducer=AvgNonZeroReducer(),
    )
    ours = TripletLoss(margin=0.1, mining="all", distance="euclidean" if power == 1 else "squared")
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(pml, x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


@pytest.mark.parametrize("reduction", ["nonzero", "mean"])
def test_batch_hard_matches_pml(reduction):
    x, y = make_batch(seed=13, batch=40, classes=6)
    distance = LpDistance(p=2, power=1, normalize_embeddings=True)
    miner = pml_miners.BatchHardMiner(distance=distance)
    pml = pml_losses.TripletMarginLoss(
        margin=0.2,
        distance=LpDistance(p=2, power=1, normalize_embeddings=True),
        reducer=AvgNonZeroReducer() if reduction == "nonzero" else MeanReducer(),
    )
    ours = TripletLoss(margin=0.2, mining="hard", reduction=reduction)
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(lambda e, lab: pml(e, lab, miner(e, lab)), x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_batch_all_float32_large_batch_matches_pml():
    """The sorted prefix-sum formulation stays accurate in float32 at a realistic size."""
    g = torch.Generator().manual_seed(14)
    x = torch.randn(128, 32, generator=g, requires_grad=True)
    y = torch.randint(0, 16, (128,), generator=g)
    pml = pml_losses.TripletMarginLoss(
        margin=0.2,
        distance=LpDistance(p=2, power=1, normalize_embeddings=True),
        reducer=AvgNonZeroReducer(),
    )
    value, grad = value_and_grad(TripletLoss(margin=0.2), x, y)
    ref_value, ref_grad = value_and_grad(pml, x, y)
    torch.testing.assert_close(value, ref_value, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-7)


def test_bad_arguments():
    with pytest.raises(ValueError, match="mining"):
        TripletLoss(mining="easy")
    with pytest.raises(ValueError, match="distance"):
        TripletLoss(distance="cosine")
    with pytest.raises(ValueError, match="margin"):
        TripletLoss(margin=-0.1)
