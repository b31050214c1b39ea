"""The losses' CPU fast paths against their plain forms: indexed_cosine_similarity against
cosine_similarity of the gathered rows, N-pair's static class slots against the loop, and the
float32 angular and SoftTriple losses against the same losses in float64."""

from __future__ import annotations

import pytest
import torch
from batches import clustered_batch, random_batch

from dmlnb.losses.angular import AngularLoss
from dmlnb.losses.npair import class_pair_slots, first_pair_per_class
from dmlnb.losses.soft_triple import SoftTripleLoss
from dmlnb.pairs import cosine_similarity, indexed_cosine_similarity, pair_masks


def test_indexed_cosine_similarity_is_the_cosine_of_the_gathered_rows():
    x, _ = random_batch(0, 12, 5, 3, requires_grad=False)
    x[3] = 0.0  # a zero row: cosine 0, zero gradient
    x[1] *= 1e200  # a huge row: scaled first, no overflow
    x.requires_grad_(True)
    rows, cols = torch.tensor([0, 3, 3, 11, 1]), torch.tensor([1, 2, 0, 5, 11, 3])
    ours = indexed_cosine_similarity(x, rows, cols)
    plain = cosine_similarity(x[rows], x[cols])
    g = torch.randn_like(ours)
    (grad,) = torch.autograd.grad(ours, x, g)
    (plain_grad,) = torch.autograd.grad(plain, x, g)
    torch.testing.assert_close(ours, plain, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, plain_grad, rtol=1e-10, atol=1e-14)
    assert torch.equal(grad[3], torch.zeros(5, dtype=x.dtype))
    smooth = x.detach()[[0, 1, 2, 5, 11]].clone().requires_grad_(True)  # no zero row
    r, c = torch.tensor([0, 1, 1, 4]), torch.tensor([2, 3, 0, 4, 1])
    assert torch.autograd.gradcheck(lambda t: indexed_cosine_similarity(t, r, c), (smooth,))


@pytest.mark.parametrize("seed", range(6))
def test_class_pair_slots_hold_every_class_pair_first(seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 7, (int(torch.randint(1, 30, (1,), generator=g)),), generator=g)
    allowed = torch.rand(len(labels), len(labels), generator=g) > 0.3  # a pair filter
    positive = pair_masks(labels).positive & allowed
    anchors, positives, valid = class_pair_slots(labels, positive)
    assert len(anchors) == max(len(labels) // 2, 1)
    n = int(valid.sum())
    assert bool(valid[:n].all()) and not bool(valid[n:].any())  # valid slots first
    expected = {}
    for i, j in positive.nonzero().tolist():  # row-major: the first pair of each class
        expected.setdefault(int(labels[i]), (i, j))
    assert sorted(zip(anchors[:n].tolist(), positives[:n].tolist())) == sorted(expected.values())
    a, p = first_pair_per_class(labels, positive)
    assert list(zip(a.tolist(), p.tolist())) == [expected[c] for c in sorted(expected)]


@pytest.mark.parametrize("alpha", [40.0, 60.0])
def test_float32_angular_loss_matches_float64(alpha):
    x, y = clustered_batch(5, n_classes=8, per_class=4, dim=16, noise=0.8)
    loss = AngularLoss(alpha_degrees=alpha)  # tan^2(alpha) <= 5: summed in float32
    values, grads = [], []
    for dtype in (torch.float32, torch.float64):
        xi = x.to(dtype).requires_grad_(True)
        value = loss(xi, y)
        values.append(value.double())
        grads.append(torch.autograd.grad(value, xi)[0].double())
    torch.testing.assert_close(values[0], values[1], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-7)


def test_float32_soft_triple_matches_float64():
    x, y = clustered_batch(6, n_classes=5, per_class=4, dim=8, noise=0.8)
    torch.manual_seed(0)
    loss = SoftTripleLoss(5, 8, centers_per_class=3)
    values, grads = [], []
    for dtype in (torch.float32, torch.float64):
        xi = x.to(dtype).requires_grad_(True)
        value = loss.to(dtype)(xi, y)
        values.append(value.double())
        grads.append(torch.autograd.grad(value, xi)[0].double())
    torch.testing.assert_close(values[0], values[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-6)
