"""NormalizedSoftmaxLoss vs a float64 loop, PML's NormalizedSoftmaxLoss, and gradcheck."""

from __future__ import annotations

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import DotProductSimilarity

from dmlnb.losses.softmax import NormalizedSoftmaxLoss


def make_loss_and_batch(
    seed: int, batch: int = 10, dim: int = 6, classes: int = 5, temperature: float = 0.05
):
    torch.manual_seed(seed)
    loss = NormalizedSoftmaxLoss(classes, dim, temperature=temperature).double()
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, dim, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, classes, (batch,), generator=g)
    return loss, x, y


def brute_softmax(x, y, weight, temperature):
    terms = []
    for i in range(len(y)):
        cos = torch.stack(
            [x[i] @ weight[c] / (x[i].norm() * weight[c].norm()) for c in range(len(weight))]
        )
        logits = cos / temperature
        terms.append(-(logits[y[i]] - torch.log(torch.exp(logits).sum())))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_matches_brute_force(temperature):
    loss, x, y = make_loss_and_batch(seed=50, temperature=temperature)
    value = loss(x, y)
    grads = torch.autograd.grad(value, (x, loss.weight))
    ref = brute_softmax(x, y, loss.weight, temperature)
    ref_grads = torch.autograd.grad(ref, (x, loss.weight))
    torch.testing.assert_close(value, ref)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)


def test_matches_pml_with_same_weights():
    loss, x, y = make_loss_and_batch(seed=51, batch=16)
    pml = pml_losses.NormalizedSoftmaxLoss(
        num_classes=5,
        embedding_size=6,
        temperature=0.05,
        distance=DotProductSimilarity(normalize_embeddings=True),
    ).double()
    with torch.no_grad():
        pml.W.copy_(loss.weight.T)  # PML stores (D, C)
    value, pml_value = loss(x, y), pml(x, y)
    torch.testing.assert_close(value, pml_value)
    (grad,) = torch.autograd.grad(value, x)
    (pml_grad,) = torch.autograd.grad(pml_value, x)
    torch.testing.assert_close(grad, pml_grad)


def test_gradcheck_embeddings_and_weights():
    loss, x, y = make_loss_and_batch(seed=52, batch=5, dim=4, classes=3, temperature=0.5)
    weight = loss.weight.detach().clone().requires_grad_()

    def fn(e, w):  # the module's forward with its weight replaced by the leaf ``w``
        return torch.func.functional_call(loss, {"weight": w}, (e, y))

    assert torch.autograd.gradcheck(fn, (x, weight))


def test_weight_is_a_parameter():
    loss = NormalizedSoftmaxLoss(7, 3)
    assert [p.shape for p in loss.parameters()] == [torch.Size([7, 3])]


def test_bad_input():
    loss, x, y = make_loss_and_batch(seed=53)
    with pytest.raises(ValueError, match="labels must lie in"):
        loss(x, y + 5)
    with pytest.raises(ValueError, match="embedding_dim"):
        loss(x[:, :4], y)
    with pytest.raises(ValueError, match="temperature"):
        NormalizedSoftmaxLoss(3, 4, temperature=0.0)
