"""LiftedStructureLoss vs a float64 loop over Song et al.'s Eq. 4, PML, and gradcheck."""

from __future__ import annotations

import math

import pytest
import torch
from batches import random_batch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import LpDistance

from dmlnb.losses.lifted import LiftedStructureLoss


def make_batch(seed: int, batch: int = 12, dim: int = 5, classes: int = 4):
    return random_batch(seed, batch, dim, classes)


def brute_lifted(x, y, neg_margin, pos_margin, normalize=True):
    """Song et al. 2016 Eq. 4: P = unordered positive pairs, 1 / (2|P|) sum [J_ij]_+^2."""
    if normalize:
        x = x / x.norm(dim=1, keepdim=True)
    n = len(y)

    def dist(i, j):
        return ((x[i] - x[j]) ** 2).sum().sqrt()

    terms = []
    for i in range(n):
        for j in range(i + 1, n):
            if y[i] != y[j]:
                continue
            s = sum(math.e ** (neg_margin - dist(i, k)) for k in range(n) if y[k] != y[i])
            s = s + sum(math.e ** (neg_margin - dist(j, l)) for l in range(n) if y[l] != y[j])
            j_ij = torch.log(s) + dist(i, j) - pos_margin
            terms.append(torch.relu(j_ij) ** 2)
    return sum(terms) / (2 * len(terms))


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


@pytest.mark.parametrize(
    "neg_margin,pos_margin,normalize",
    [
        (1.0, 0.0, True),
        (0.5, 0.2, True),
        (2.0, 0.0, False),
    ],
)
def test_matches_brute_force(neg_margin, pos_margin, normalize):
    x, y = make_batch(seed=20)
    ours = LiftedStructureLoss(neg_margin=neg_margin, pos_margin=pos_margin, normalize=normalize)
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_lifted(e, lab, neg_margin, pos_margin, normalize), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


@pytest.mark.parametrize("neg_margin,pos_margin", [(1.0, 0.0), (0.8, 0.3)])
def test_matches_pml(neg_margin, pos_margin):
    x, y = make_batch(seed=21, batch=32, classes=6)
    pml = pml_losses.LiftedStructureLoss(
        neg_margin=neg_margin,
        pos_margin=pos_margin,
        distance=LpDistance(p=2, power=1, normalize_embeddings=True),
    )
    ours = LiftedStructureLoss(neg_margin=neg_margin, pos_margin=pos_margin)
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(pml, x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_large_distances_stay_finite():
    """logsumexp keeps the loss finite where exp(m - D) would underflow to 0."""
    x, y = make_batch(seed=22)
    big = (x.detach() * 1e3).requires_grad_()
    value = LiftedStructureLoss(normalize=False)(big, y)
    (grad,) = torch.autograd.grad(value, big)
    assert torch.isfinite(value) and value > 0
    assert torch.isfinite(grad).all()


def test_gradcheck():
    x, y = make_batch(seed=23, batch=8)
    loss = LiftedStructureLoss()
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x,))
