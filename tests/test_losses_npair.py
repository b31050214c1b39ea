"""NPairLoss vs a float64 loop over Sohn's N-pair-mc loss, PML's NPairsLoss, and gradcheck."""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import DotProductSimilarity

from dmlnb.losses.npair import NPairLoss, first_pair_per_class
from batches import random_batch


def make_batch(seed: int, batch: int = 14, dim: int = 5, classes: int = 6):
    return random_batch(seed, batch, dim, classes)


def brute_pairs(y):
    first_two = {}
    for i, label in enumerate(y.tolist()):
        first_two.setdefault(label, [])
        if len(first_two[label]) < 2:
            first_two[label].append(i)
    return [tuple(v) for _, v in sorted(first_two.items()) if len(v) == 2]


def brute_npair(x, y, l2_reg, normalize):
    """Sohn 2016: mean_i log(1 + sum_{j != i} exp(f_i.f_j+ - f_i.f_i+)) + l2 * mean ||f||^2."""
    f = x / x.norm(dim=1, keepdim=True) if normalize else x
    pairs = brute_pairs(y)
    terms = []
    for i, (a, p) in enumerate(pairs):
        s = sum(torch.exp(f[a] @ f[q] - f[a] @ f[p]) for k, (_, q) in enumerate(pairs) if k != i)
        terms.append(torch.log(1 + s))
    penalty = sum((x[b] ** 2).sum() for b in range(len(y))) / len(y)
    return sum(terms) / len(terms) + l2_reg * penalty


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def test_first_pair_per_class_matches_loop():
    for seed in range(5):
        _, y = make_batch(seed=seed, batch=20, classes=9)
        anchors, positives = first_pair_per_class(y)
        assert list(zip(anchors.tolist(), positives.tolist())) == brute_pairs(y)


@pytest.mark.parametrize("l2_reg,normalize", [(0.02, False), (0.0, True), (0.5, True)])
def test_matches_brute_force(l2_reg, normalize):
    x, y = make_batch(seed=30)
    value, grad = value_and_grad(NPairLoss(l2_reg=l2_reg, normalize=normalize), x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_npair(e, lab, l2_reg, normalize), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_matches_pml_defaults():
    x, y = make_batch(seed=31, batch=30, classes=10)
    pml = pml_losses.NPairsLoss(distance=DotProductSimilarity(normalize_embeddings=True))
    value, grad = value_and_grad(NPairLoss(l2_reg=0.0, normalize=True), x, y)
    ref_value, ref_grad = value_and_grad(pml, x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_gradcheck():
    x, y = make_batch(seed=32, batch=10)
    loss = NPairLoss(l2_reg=0.1)
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x,))


def test_bad_arguments():
    with pytest.raises(ValueError, match="l2_reg"):
        NPairLoss(l2_reg=-1.0)
