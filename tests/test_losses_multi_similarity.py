"""Multi-Similarity loss and miner vs float64 loops from Wang et al. 2019, and vs PML."""

from __future__ import annotations

import math

import pytest
import torch
from batches import clustered_batch
from pytorch_metric_learning.losses import MultiSimilarityLoss as PMLMultiSimilarityLoss
from pytorch_metric_learning.miners import MultiSimilarityMiner as PMLMultiSimilarityMiner

from dmlnb.losses.multi_similarity import MultiSimilarityLoss, MultiSimilarityMiner
from dmlnb.pairs import cosine_similarity, pair_masks


def batch(seed: int = 0, n_classes: int = 4, per_class: int = 4, dim: int = 8):
    return clustered_batch(seed, n_classes, per_class, dim, noise=0.9)


def reference_mining(S: torch.Tensor, y: torch.Tensor, eps: float) -> tuple[list, list]:
    """Per anchor: negatives with S_an + eps > min_p S_ap, positives with S_ap - eps < max_n S_an
    (Wang et al., pair mining), with Python comparisons."""
    B = len(y)
    P_all = [[k for k in range(B) if k != i and y[k] == y[i]] for i in range(B)]
    N_all = [[k for k in range(B) if y[k] != y[i]] for i in range(B)]
    P, N = [], []
    for i in range(B):
        min_pos = min((S[i, k].item() for k in P_all[i]), default=math.inf)
        max_neg = max((S[i, k].item() for k in N_all[i]), default=-math.inf)
        N.append([k for k in N_all[i] if S[i, k].item() + eps > min_pos])
        P.append([k for k in P_all[i] if S[i, k].item() - eps < max_neg])
    return P, N


def reference_loss(
    x: torch.Tensor,
    y: torch.Tensor,
    alpha: float,
    beta: float,
    base: float,
    mining: bool,
    eps: float = 0.1,
) -> torch.Tensor:
    """1/m sum_i {1/alpha log[1 + sum_P exp(-alpha(S_ik - base))] + 1/beta log[1 + sum_N
    exp(beta(S_ik - base))]}, one anchor at a time (float64, plain sums of exponentials)."""
    xn = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    S = xn @ xn.T
    B = len(y)
    if mining:
        P, N = reference_mining(S.detach(), y, eps)
    else:
        P = [[k for k in range(B) if k != i and y[k] == y[i]] for i in range(B)]
        N = [[k for k in range(B) if y[k] != y[i]] for i in range(B)]
    total = x.sum() * 0.0
    for i in range(B):
        pos = sum((torch.exp(-alpha * (S[i, k] - base)) for k in P[i]), torch.zeros(()))
        neg = sum((torch.exp(beta * (S[i, k] - base)) for k in N[i]), torch.zeros(()))
        total = total + torch.log1p(pos) / alpha + torch.log1p(neg) / beta
    return total / B


@pytest.mark.parametrize("mining", [True, False])
@pytest.mark.parametrize("params", [(2.0, 50.0, 0.5), (1.0, 10.0, 0.3)])
def test_value_and_gradients_match_reference(mining: bool, params: tuple) -> None:
    alpha, beta, base = params
    x, y = batch(1)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = MultiSimilarityLoss(alpha, beta, base, miner=mining)(x1, y)
    ref = reference_loss(x2, y, alpha, beta, base, mining)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)


def test_miner_matches_reference_and_drops_pairs() -> None:
    x, y = batch(2)
    S = cosine_similarity(x)
    mined = MultiSimilarityMiner(0.1)(S, pair_masks(y))
    P, N = reference_mining(S, y, 0.1)
    B = len(y)
    expected_pos = torch.zeros(B, B, dtype=torch.bool)
    expected_neg = torch.zeros(B, B, dtype=torch.bool)
    for i in range(B):
        expected_pos[i, P[i]] = True
        expected_neg[i, N[i]] = True
    assert torch.equal(mined.positive, expected_pos)
    assert torch.equal(mined.negative, expected_neg)
    masks = pair_masks(y)  # the fixture makes mining actually drop pairs of both kinds
    assert mined.negative.sum() < masks.negative.sum()
    assert 0 < mined.positive.sum() < masks.positive.sum()


@pytest.mark.parametrize("mining", [True, False])
def test_equals_pml(mining: bool) -> None:
    x, y = batch(3)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = MultiSimilarityLoss(2.0, 50.0, 0.5, miner=mining, epsilon=0.1)(x1, y)
    pml_loss = PMLMultiSimilarityLoss(alpha=2, beta=50, base=0.5)
    if mining:
        pairs = PMLMultiSimilarityMiner(epsilon=0.1)(x2, y)
        assert len(pairs[0]) > 1 and len(pairs[2]) > 1  # PML returns 0 for <= 1 pair
        theirs = pml_loss(x2, y, pairs)
    else:
        theirs = pml_loss(x2, y)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("mining", [True, False])
def test_gradcheck(mining: bool) -> None:
    x, y = batch(4, n_classes=3, per_class=3, dim=5)
    x.requires_grad_(True)
    loss = MultiSimilarityLoss(2.0, 10.0, 0.5, miner=mining)
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x,))


def test_large_beta_is_stable_in_float32() -> None:
    # beta (S - base) reaches 200 * 0.5 = 100: exp overflows float32 (max ~ 3.4e38)
    x, y = batch(5)
    x[4] = x[0] + 1e-3  # a near-duplicate negative: S ~ 1
    ours = MultiSimilarityLoss(2.0, 200.0, 0.5, miner=False)(x.float(), y)
    ref = reference_loss(x, y, 2.0, 200.0, 0.5, mining=False)
    assert torch.isfinite(ours)
    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-6)


_G = torch.Generator().manual_seed(0)  # seeded edge-case data
EDGE_CASES = {
    "no_positive_pair": (torch.randn(5, 4, generator=_G), torch.arange(5)),
    "single_class": (torch.randn(5, 4, generator=_G), torch.zeros(5, dtype=torch.long)),
    "duplicates": (torch.randn(1, 4, generator=_G).repeat(6, 1), torch.tensor([0, 0, 0, 1, 1, 1])),
    "zero_norm": (
        torch.cat([torch.zeros(2, 4), torch.randn(4, 4, generator=_G)]),
        torch.tensor([0, 0, 1, 1, 2, 2]),
    ),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
@pytest.mark.parametrize("mining", [True, False])
def test_edge_cases_are_finite_and_match_reference(case: str, mining: bool) -> None:
    torch.manual_seed(0)
    x, y = EDGE_CASES[case]
    x1 = x.double().requires_grad_(True)
    x2 = x.double().requires_grad_(True)
    value = MultiSimilarityLoss(miner=mining)(x1, y)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(x1.grad).all()
    ref = reference_loss(x2, y, 2.0, 50.0, 0.5, mining)
    torch.testing.assert_close(value, ref, rtol=1e-10, atol=1e-12)


def test_no_kept_pair_gives_graph_attached_zero() -> None:
    x = torch.randn(5, 4, requires_grad=True)
    value = MultiSimilarityLoss(miner=True)(x, torch.arange(5))  # no positive: nothing mined
    value.backward()
    assert value.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="alpha and beta"):
        MultiSimilarityLoss(alpha=0.0)


@pytest.mark.cuda
@pytest.mark.parametrize("mining", [True, False])
def test_cuda_matches_cpu(mining: bool) -> None:
    x, y = batch(6)
    loss = MultiSimilarityLoss(miner=mining)
    torch.testing.assert_close(loss(x.cuda(), y.cuda()).cpu(), loss(x, y))
