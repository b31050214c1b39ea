import pytest
import torch

from dmlnb.checks import check_batch
from dmlnb.pairs import cosine_similarity, euclidean_distance, gram, l2_normalize, pair_masks


def test_masks_against_a_loop():
    y = torch.tensor([0, 1, 0, 2, 1, 0])
    m = pair_masks(y)
    for i in range(6):
        for j in range(6):
            assert m.positive[i, j] == (y[i] == y[j] and i != j)
            assert m.negative[i, j] == (y[i] != y[j])
    assert m.has_positive.tolist() == [True, True, True, False, True, True]
    ref = torch.tensor([2, 0])
    m2 = pair_masks(y, ref)
    assert m2.positive.shape == (6, 2) and m2.positive[0, 0] == False and m2.positive[3, 0]  # noqa: E712


def test_distances_against_cdist_and_finite_gradients_at_duplicates():
    torch.manual_seed(0)
    x = torch.randn(7, 5, dtype=torch.float64)
    x[3] = x[1]  # an exact duplicate: distance 0 off the diagonal
    x.requires_grad_(True)
    d = euclidean_distance(x)
    torch.testing.assert_close(
        d, torch.cdist(x, x).masked_fill(torch.eye(7, dtype=torch.bool), 0.0), atol=1e-6, rtol=0
    )
    assert d[1, 3] == 0 and d.diagonal().eq(0).all()
    d.sum().backward()
    assert torch.isfinite(x.grad).all()
    y = torch.randn(4, 5, dtype=torch.float64)
    torch.testing.assert_close(
        euclidean_distance(x.detach(), y, squared=True), torch.cdist(x.detach(), y) ** 2
    )
    torch.testing.assert_close(
        cosine_similarity(x.detach(), y),
        torch.nn.functional.cosine_similarity(x.detach()[:, None], y[None], dim=2),
    )


def test_l2_normalize_zero_rows_have_zero_gradient():
    x = torch.randn(4, 3, dtype=torch.float64)
    x[2] = 0.0
    x.requires_grad_(True)
    z = l2_normalize(x)
    torch.testing.assert_close(z[[0, 1, 3]].norm(dim=1), torch.ones(3, dtype=torch.float64))
    assert z[2].abs().sum() == 0
    (z * torch.randn_like(z)).sum().backward()
    assert x.grad[2].abs().sum() == 0 and torch.isfinite(x.grad).all()
    torch.autograd.gradcheck(
        l2_normalize, (torch.randn(3, 4, dtype=torch.float64, requires_grad=True),)
    )


def test_check_batch_messages():
    with pytest.raises(ValueError, match=r"2-D tensor \(N, D\)"):
        check_batch(torch.randn(4), torch.arange(4))
    with pytest.raises(ValueError, match="labels has 3 entries for 4 embeddings"):
        check_batch(torch.randn(4, 2), torch.arange(3))
    with pytest.raises(FloatingPointError, match="NaN"):
        check_batch(torch.tensor([[float("nan"), 0.0]]), torch.tensor([0]))


def test_euclidean_distance_gradcheck_and_near_duplicates():
    torch.manual_seed(1)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda t: euclidean_distance(t), (x,))
    y = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda a, b: euclidean_distance(a, b), (x, y))
    near = torch.randn(1, 3).repeat(2, 1)
    near[1] += 1e-9  # squared distance far below eps: exactly 0, zero gradient, no blow-up
    near.requires_grad_(True)
    d = euclidean_distance(near)
    assert d[0, 1] == 0
    d.sum().backward()
    assert near.grad.abs().max() == 0


def test_squared_distances_and_dot_products_gradcheck():
    """The one-pass backwards of euclidean_distance(squared=True) and gram, for a batch with
    itself and with another set (the clamped round-off and the diagonal get no gradient)."""
    torch.manual_seed(2)
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: euclidean_distance(t, squared=True), (x,))
    assert torch.autograd.gradcheck(lambda a, b: euclidean_distance(a, b, squared=True), (x, y))
    assert torch.autograd.gradcheck(gram, (x,))
    assert torch.autograd.gradcheck(gram, (x, y))
    d = euclidean_distance(x, squared=True)
    d.diagonal().sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
