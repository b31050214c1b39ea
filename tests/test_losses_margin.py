"""Margin loss and distance weighted sampling vs float64 loops from Wu et al. 2017, and vs PML."""

from __future__ import annotations

import math

import pytest
import torch
from batches import clustered_batch
from pytorch_metric_learning.losses import MarginLoss as PMLMarginLoss
from scipy.stats import chisquare

from dmlnb.losses.margin import DistanceWeightedMiner, MarginLoss
from dmlnb.pairs import euclidean_distance, pair_masks

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def batch(seed: int = 0, n_classes: int = 4, per_class: int = 3, dim: int = 6):
    return clustered_batch(seed, n_classes, per_class, dim, noise=0.8)


def unit_distances(x: torch.Tensor) -> list[list[torch.Tensor]]:
    """Euclidean distances of the L2-normalised rows, one scalar at a time (differentiable)."""
    xn = [xi / xi.norm().clamp_min(1e-12) for xi in x]
    return [[(a - b).pow(2).sum().clamp_min(1e-30).sqrt() for b in xn] for a in xn]


def reference_margin(
    x: torch.Tensor,
    y: torch.Tensor,
    beta: torch.Tensor,
    margin: float,
    nu: float,
    sampling: str,
    neg_counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """l(i,j) = [alpha + y_ij (D_ij - beta)]_+ (Wu et al. Sec. 5), summed over the pair list
    built by ``sampling``, divided by the number of non-zero terms; one pair at a time."""
    D = unit_distances(x)
    B = len(y)

    def b(i: int) -> torch.Tensor:
        return beta[y[i]] if beta.numel() > 1 else beta[0]

    def term(i: int, j: int) -> torch.Tensor:
        sign = 1.0 if y[i] == y[j] else -1.0
        return torch.relu(margin + sign * (D[i][j] - b(i)))

    pairs = []  # (i, j) with multiplicity
    for a in range(B):
        P = [p for p in range(B) if p != a and y[p] == y[a]]
        N = [n for n in range(B) if y[n] != y[a]]
        if sampling == "all_pairs":
            pairs += [(a, j) for j in P + N]
        elif sampling == "all_triplets":
            for p in P:
                for n in N:
                    pairs += [(a, p), (a, n)]
        else:  # one sampled negative per positive: the negatives come from neg_counts
            pairs += [(a, p) for p in P]
            for n in range(B):
                pairs += [(a, n)] * int(neg_counts[a, n])
    terms = [term(i, j) for i, j in pairs]
    active = sum(1 for t in terms if t.item() > 0)
    if active == 0:
        return x.sum() * 0.0
    return (sum(terms) + nu * sum(b(i) for i, _ in pairs)) / active


@pytest.mark.parametrize("sampling", ["all_pairs", "all_triplets", "distance_weighted"])
@pytest.mark.parametrize("num_classes", [None, 4])
def test_value_and_gradients_match_reference(sampling: str, num_classes: int | None) -> None:
    x, y = batch(1)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    loss = MarginLoss(
        margin=0.2, beta=1.0, num_classes=num_classes, nu=0.05, sampling=sampling
    ).double()
    with torch.no_grad():  # distinct per-class betas so the class indexing matters
        loss.beta.copy_(torch.linspace(0.9, 1.1, loss.beta.numel(), dtype=torch.float64))
    beta_ref = loss.beta.detach().clone().requires_grad_(True)
    neg_counts = None
    if sampling == "distance_weighted":  # same seed => same draws as the loss's own miner
        d = euclidean_distance(torch.nn.functional.normalize(x, dim=1))
        neg_counts = DistanceWeightedMiner(seed=0)(d, pair_masks(y), x.shape[1])
        assert neg_counts.sum() > 0
    ours = loss(x1, y)
    ref = reference_margin(x2, y, beta_ref, 0.2, 0.05, sampling, neg_counts)
    ours.backward()
    ref.backward()
    assert ours.item() > 0
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(loss.beta.grad, beta_ref.grad, rtol=1e-8, atol=1e-10)
    assert loss.beta.grad.abs().sum() > 0


@pytest.mark.parametrize("num_classes", [None, 4])
def test_all_triplets_equals_pml_margin_loss(num_classes: int | None) -> None:
    x, y = batch(2)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    nu = 0.03 if num_classes else 0.0  # PML's global-beta regulariser is not normalised
    ours = MarginLoss(
        margin=0.2, beta=1.2, num_classes=num_classes, nu=nu, sampling="all_triplets"
    ).double()
    pml = PMLMarginLoss(
        margin=0.2, beta=1.2, learn_beta=True, num_classes=num_classes, nu=2 * nu
    ).double()
    betas = torch.linspace(1.0, 1.3, ours.beta.numel(), dtype=torch.float64)
    with torch.no_grad():
        ours.beta.copy_(betas)
        pml.beta.copy_(betas)
    a, b = ours(x1, y), pml(x2, y)
    a.backward()
    b.backward()
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(ours.beta.grad, pml.beta.grad, rtol=1e-8, atol=1e-10)


def test_fixed_beta_is_a_buffer() -> None:
    loss = MarginLoss(learn_beta=False, sampling="all_pairs")
    assert list(loss.parameters()) == []
    assert "beta" in dict(loss.named_buffers())


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
@pytest.mark.parametrize("sampling", ["all_pairs", "all_triplets", "distance_weighted"])
def test_edge_cases_are_finite(case: str, sampling: str) -> None:
    torch.manual_seed(0)
    x, y = EDGE_CASES[case]
    x = x.clone().requires_grad_(True)
    loss = MarginLoss(num_classes=5, nu=0.1, sampling=sampling)
    value = loss(x, y)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(x.grad).all()
    assert torch.isfinite(loss.beta.grad).all()
    if case == "duplicates":  # negatives at distance 0 violate the margin: a positive loss
        assert value.item() > 0


def test_bad_arguments_and_labels() -> None:
    with pytest.raises(ValueError, match="sampling"):
        MarginLoss(sampling="random")
    with pytest.raises(ValueError, match="miner"):
        MarginLoss(sampling="all_pairs", miner=DistanceWeightedMiner())
    with pytest.raises(ValueError, match="cutoff"):
        DistanceWeightedMiner(cutoff=1.5, nonzero_loss_cutoff=1.4)
    with pytest.raises(ValueError, match="num_classes"):
        MarginLoss(num_classes=2)(torch.randn(4, 3), torch.tensor([0, 1, 2, 2]))


# ------------------------------------------------------------------ distance weighted miner


def miner_batch():
    """8 points in R^5, two classes of 4, every anchor with several negatives in [0.5, 1.4)
    and some negatives below the 0.5 clamp or beyond the 1.4 cut-off."""
    g = torch.Generator().manual_seed(1)
    c = torch.tensor([[1.0, 0, 0, 0, 0]] * 4 + [[0.8, 0.6, 0, 0, 0]] * 4, dtype=torch.float64)
    x = torch.nn.functional.normalize(c + 0.5 * torch.randn(8, 5, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    return x, y


def reference_probabilities(x, y, cutoff=0.5, nonzero=1.4) -> list[list[float]]:
    """Pr(n | a) proportional to q(max(d, cutoff))^-1 = d^(2-n) (1 - d^2/4)^((3-n)/2) (Wu et al.
    Sec. 4) over negatives with d < nonzero, one pair at a time in plain Python floats."""
    n_dim = x.shape[1]
    xs = x.tolist()
    rows = []
    for a in range(len(y)):
        w = []
        for j in range(len(y)):
            d = math.dist(xs[a], xs[j])
            if y[j] == y[a] or d >= nonzero:
                w.append(0.0)
                continue
            dc = max(d, cutoff)
            w.append(dc ** (2 - n_dim) * (1 - dc * dc / 4) ** ((3 - n_dim) / 2))
        total = sum(w)
        rows.append([v / total for v in w])
    return rows


def test_probabilities_match_the_analytic_weights() -> None:
    x, y = miner_batch()
    d = euclidean_distance(x)
    ref = torch.tensor(reference_probabilities(x, y), dtype=torch.float64)
    # the fixture exercises the clamp, the cut-off and several admissible negatives per anchor
    neg = pair_masks(y).negative
    assert ((d < 0.5) & neg).any() and ((d >= 1.4) & neg).any()
    assert ((ref > 0).sum(dim=1) >= 2).all()
    probs = DistanceWeightedMiner().probabilities(d, neg, x.shape[1])
    torch.testing.assert_close(probs, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_frequencies_match_weights(device: str) -> None:
    x, y = miner_batch()
    x = x.to(device)
    y = y.to(device)
    d = euclidean_distance(x)
    masks = pair_masks(y)
    miner = DistanceWeightedMiner(seed=7)
    counts = torch.zeros(8, 8, dtype=torch.float64, device=device)
    for _ in range(300):  # 3 draws per anchor per call: 900 draws per anchor
        draw = miner(d, masks, x.shape[1])
        assert (draw.sum(dim=1) == masks.positive.sum(dim=1)).all()  # one draw per positive
        counts += draw
    counts = counts.cpu()
    ref = torch.tensor(reference_probabilities(x.cpu(), y.cpu()), dtype=torch.float64)
    assert (counts[ref == 0] == 0).all()  # never a positive, itself, or a pair beyond 1.4
    for a in range(8):
        support = ref[a] > 0
        expected = ref[a][support] * counts[a].sum()
        assert chisquare(counts[a][support].numpy(), expected.numpy()).pvalue > 1e-4


def test_sampler_is_seeded_and_independent_of_global_rng() -> None:
    x, y = miner_batch()
    d = euclidean_distance(x)
    masks = pair_masks(y)
    torch.manual_seed(1)
    a = DistanceWeightedMiner(seed=5)(d, masks, 5)
    torch.manual_seed(2)
    b = DistanceWeightedMiner(seed=5)(d, masks, 5)
    draws = [DistanceWeightedMiner(seed=s)(d, masks, 5) for s in range(6)]
    assert torch.equal(a, b)
    assert any(not torch.equal(draws[0], o) for o in draws[1:])


def test_falls_back_to_uniform_negatives_when_all_are_beyond_cutoff() -> None:
    # anchor 0's only negatives (class 1) are antipodal-ish: d ~ 2 > 1.4
    x = torch.tensor([[1.0, 0.0], [0.99, 0.14], [-1.0, 0.05], [-0.99, -0.1]], dtype=torch.float64)
    x = torch.nn.functional.normalize(x)
    y = torch.tensor([0, 0, 1, 1])
    probs = DistanceWeightedMiner().probabilities(euclidean_distance(x), pair_masks(y).negative, 2)
    expected = torch.tensor([0, 0, 0.5, 0.5], dtype=torch.float64)
    torch.testing.assert_close(probs[0], expected)
    torch.testing.assert_close(probs[1], expected)


def test_high_dimension_weights_do_not_overflow() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(16, 512, generator=g))  # float32, n = 512
    x[8:] = torch.nn.functional.normalize(x[:8] + 0.9 * torch.randn(8, 512, generator=g))
    y = torch.arange(8).repeat(2)
    d = euclidean_distance(x)
    probs = DistanceWeightedMiner().probabilities(d, pair_masks(y).negative, 512)
    assert torch.isfinite(probs).all()
    torch.testing.assert_close(probs.sum(dim=1), torch.ones(16))


@pytest.mark.cuda
@pytest.mark.parametrize("sampling", ["all_pairs", "all_triplets", "distance_weighted"])
def test_cuda_runs_and_matches_cpu(sampling: str) -> None:
    x, y = batch(4)
    loss = MarginLoss(num_classes=4, sampling=sampling).double()
    on_cuda = loss.cuda()(x.cuda().requires_grad_(True), y.cuda())
    on_cuda.backward()
    assert torch.isfinite(on_cuda) and torch.isfinite(loss.beta.grad).all()
    if sampling != "distance_weighted":  # the sampler's CUDA stream differs from the CPU one
        torch.testing.assert_close(on_cuda.cpu(), loss.cpu()(x, y))
