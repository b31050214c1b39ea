"""AngularLoss vs a float64 loop over Wang et al.'s N-pair angular loss, PML, and gradcheck."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from batches import random_batch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import LpDistance

from dmlnb.losses.angular import AngularLoss


def make_batch(seed: int, batch: int = 12, dim: int = 5, classes: int = 4):
    return random_batch(seed, batch, dim, classes)


def brute_angular(x, y, alpha_degrees, normalize=True):
    """mean over ordered positive pairs of log(1 + sum_n exp(f_apn))."""
    if normalize:
        x = x / x.norm(dim=1, keepdim=True)
    t2 = math.tan(math.radians(alpha_degrees)) ** 2
    n = len(y)
    terms = []
    for a in range(n):
        for p in range(n):
            if p == a or y[p] != y[a]:
                continue
            s = sum(
                torch.exp(4 * t2 * (x[a] + x[p]) @ x[k] - 2 * (1 + t2) * x[a] @ x[p])
                for k in range(n)
                if y[k] != y[a]
            )
            terms.append(torch.log(1 + s))
    return sum(terms) / len(terms)


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


@pytest.mark.parametrize("alpha,normalize", [(40.0, True), (30.0, True), (45.0, False)])
def test_matches_brute_force(alpha, normalize):
    x, y = make_batch(seed=40)
    scale = 1.0 if normalize else 0.3  # keep raw logits moderate for the naive loop
    x = (x.detach() * scale).requires_grad_()
    ours = AngularLoss(alpha_degrees=alpha, normalize=normalize)
    value, grad = value_and_grad(ours, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_angular(e, lab, alpha, normalize), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_matches_pml_on_normalized_input():
    """PML normalises anchors and positives but not negatives, so the two agree on embeddings
    normalised upstream (values, and gradients w.r.t. the pre-normalisation input)."""
    x, y = make_batch(seed=41, batch=32, classes=6)
    pml = pml_losses.AngularLoss(
        alpha=40, distance=LpDistance(p=2, power=1, normalize_embeddings=True)
    )
    ours = AngularLoss(alpha_degrees=40.0)
    value, grad = value_and_grad(lambda e, lab: ours(F.normalize(e, dim=1), lab), x, y)
    ref_value, ref_grad = value_and_grad(lambda e, lab: pml(F.normalize(e, dim=1), lab), x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_unnormalised_input_matches_the_loop_or_fails_loudly():
    """The factorised sum keeps every term to float64 rounding for moderate norms; where every
    term of a pair would underflow (norms of hundreds), the loss is non-finite and raises,
    never a silent 0."""
    x, y = make_batch(seed=42, batch=20)
    loss = AngularLoss(normalize=False)
    x64 = (3.0 * x.detach()).double()
    torch.testing.assert_close(loss(x64, y), brute_angular(x64, y, 40.0, normalize=False))
    spread = x.clone()
    spread[0] *= 300.0  # anchor 0's negatives and positives point far apart at a huge scale
    spread[1:] *= 3.0
    far = torch.cat([spread[:1], -spread[1:]])
    with pytest.raises(FloatingPointError, match="non-finite"):
        loss(far, y)


def test_gradcheck():
    x, y = make_batch(seed=43, batch=8)
    loss = AngularLoss()
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x,))


def test_bad_arguments():
    with pytest.raises(ValueError, match="alpha_degrees"):
        AngularLoss(alpha_degrees=90.0)
