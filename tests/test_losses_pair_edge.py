"""Edge cases shared by the pair/triplet losses: degenerate batches give a defined, finite
value and finite gradients; batches with no term give exactly 0; CPU and CUDA agree."""

from __future__ import annotations

import pytest
import torch

from dmlnb.losses.angular import AngularLoss
from dmlnb.losses.contrastive import ContrastiveLoss
from dmlnb.losses.lifted import LiftedStructureLoss
from dmlnb.losses.npair import NPairLoss
from dmlnb.losses.softmax import NormalizedSoftmaxLoss
from dmlnb.losses.triplet import TripletLoss

DIM = 4
LOSSES = {
    "contrastive": lambda: ContrastiveLoss(),
    "contrastive-hard": lambda: ContrastiveLoss(mining="hard", squared_hinge=True),
    "triplet-all": lambda: TripletLoss(),
    "triplet-hard": lambda: TripletLoss(mining="hard"),
    "triplet-semihard": lambda: TripletLoss(
        mining="semihard", distance="squared", reduction="mean"
    ),
    "lifted": lambda: LiftedStructureLoss(),
    "npair": lambda: NPairLoss(l2_reg=0.0),
    "npair-all": lambda: NPairLoss(l2_reg=0.0, pairs="all"),
    "angular": lambda: AngularLoss(),
    "softmax": lambda: NormalizedSoftmaxLoss(num_classes=8, embedding_dim=DIM),
}
# losses that have no term at all without a positive pair (contrastive "all" still has its
# negative pairs, PML's convention; the softmax loss needs no pairs)
ZERO_WITHOUT_POSITIVES = {
    "contrastive-hard",
    "triplet-all",
    "triplet-hard",
    "triplet-semihard",
    "lifted",
    "npair",
    "npair-all",
    "angular",
}
# losses that have no term at all in a single-class batch (no negatives)
ZERO_FOR_SINGLE_CLASS = ZERO_WITHOUT_POSITIVES - {"npair"}


def value_and_grad(name, x, y):
    torch.manual_seed(0)
    loss = LOSSES[name]().to(device=x.device, dtype=x.dtype)
    value = loss(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def batch(seed=0, n=8, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g, dtype=torch.float64)
    return x.to(device).requires_grad_(), torch.tensor([0, 0, 1, 1, 2, 2, 3, 4])[:n].to(device)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_no_positive_pair(name):
    x, _ = batch()
    value, grad = value_and_grad(name, x, torch.arange(8))
    assert torch.isfinite(value) and torch.isfinite(grad).all()
    if name in ZERO_WITHOUT_POSITIVES:
        assert value == 0 and (grad == 0).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_single_class(name):
    x, _ = batch()
    value, grad = value_and_grad(name, x, torch.zeros(8, dtype=torch.long))
    assert torch.isfinite(value) and torch.isfinite(grad).all()
    if name in ZERO_FOR_SINGLE_CLASS:
        assert value == 0 and (grad == 0).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_duplicate_embeddings(name):
    """Identical rows within a class and across classes (d = 0, ties everywhere)."""
    x, y = batch()
    dup = x.detach().clone()
    dup[1] = dup[0]  # same class
    dup[2] = dup[0]  # other class
    dup[5] = dup[4]
    dup.requires_grad_()
    value, grad = value_and_grad(name, dup, y)
    assert torch.isfinite(value) and torch.isfinite(grad).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_collapsed_batch(name):
    """Every embedding identical: the collapse a diverging run falls into."""
    x = torch.ones(8, DIM, dtype=torch.float64, requires_grad=True)
    value, grad = value_and_grad(name, x, batch()[1])
    assert torch.isfinite(value) and torch.isfinite(grad).all()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_zero_norm_embeddings(name):
    x, y = batch()
    z = x.detach().clone()
    z[0] = 0.0
    z[3] = 0.0
    z.requires_grad_()
    value, grad = value_and_grad(name, z, y)
    assert torch.isfinite(value) and torch.isfinite(grad).all()


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_cuda_matches_cpu(name):
    x, y = batch(seed=3)
    value, grad = value_and_grad(name, x, y)
    xc, yc = batch(seed=3, device="cuda")
    value_c, grad_c = value_and_grad(name, xc, yc)
    torch.testing.assert_close(value_c.cpu(), value)
    torch.testing.assert_close(grad_c.cpu(), grad)
