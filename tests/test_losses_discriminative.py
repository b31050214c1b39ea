"""Discriminative loss (Do et al. 2019) vs brute-force loops, Eq. 8 vs Eq. 6, and Lemma 3.1."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy.spatial.distance import pdist

from dmlnb.losses.discriminative import (
    DiscriminativeLoss,
    centroid_distance_stats,
    kmeans_sphere_centroids,
    lemma31_bound,
    onehot_centroids,
    triplet_loss_all,
)


def dist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(((a - b) ** 2).sum())


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def balanced(n_classes: int, per_class: int, dim: int, seed: int, noise: float | None, c=None):
    """Labels 0..C-1 (each ``per_class`` times, shuffled) and unit embeddings: uniform on the
    sphere (``noise=None``) or ``unit(c_y + noise * N(0, I))`` around the centroids."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n_classes).repeat_interleave(per_class)
    y = y[torch.randperm(len(y), generator=g)]
    z = torch.randn(len(y), dim, generator=g, dtype=torch.float64)
    x = unit(z) if noise is None else unit(c.double()[y] + noise * z)
    return x, y


# --- centroids ----------------------------------------------------------------------------------
def test_onehot_centroids_all_at_sqrt2() -> None:
    c = onehot_centroids(7, 10)
    assert c.shape == (7, 10)
    for m, n in itertools.combinations(range(7), 2):
        assert dist(c[m], c[n]).item() == pytest.approx(math.sqrt(2), abs=1e-7)
    s = centroid_distance_stats(c)
    assert s["min"] == pytest.approx(math.sqrt(2)) and s["max"] == pytest.approx(math.sqrt(2))
    assert s["std"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="dim >= num_classes"):
        onehot_centroids(10, 9)


def test_centroid_stats_match_scipy_pdist() -> None:
    c = unit(torch.randn(12, 6, generator=torch.Generator().manual_seed(0)))
    d = pdist(c.double().numpy())
    s = centroid_distance_stats(c)
    assert s["min"] == pytest.approx(d.min(), rel=1e-6)
    assert s["max"] == pytest.approx(d.max(), rel=1e-6)
    assert s["mean"] == pytest.approx(d.mean(), rel=1e-6)
    assert s["std"] == pytest.approx(d.std(), rel=1e-5)


def test_kmeans_centroids_unit_and_seeded() -> None:
    c = kmeans_sphere_centroids(10, 12, seed=0)
    assert c.shape == (10, 12) and c.dtype == torch.float32
    torch.testing.assert_close(c.norm(dim=1), torch.ones(10))
    assert torch.equal(c, kmeans_sphere_centroids(10, 12, seed=0))
    assert not torch.equal(c, kmeans_sphere_centroids(10, 12, seed=1))


def test_kmeans_centroids_like_table3() -> None:
    c = kmeans_sphere_centroids(100, 100, seed=0)
    # Table 3 (CUB, C = D = 100): min 1.21, max 1.63, mean 1.418, std 0.061
    s = centroid_distance_stats(c)
    assert s["mean"] == pytest.approx(1.418, abs=0.005)
    assert s["std"] == pytest.approx(0.061, abs=0.006)
    assert 1.12 <= s["min"] <= 1.30 and 1.56 <= s["max"] <= 1.72


# --- the loss -----------------------------------------------------------------------------------
def reference_loss(x: torch.Tensor, y: torch.Tensor, c: torch.Tensor, normalize: bool):
    """Eq. 8 bracket per sample, averaged: explicit loop over samples and centroids."""
    C = len(c)
    terms = []
    for i in range(len(y)):
        xi = unit(x[i]) if normalize else x[i]
        own = dist(xi, c[y[i]])
        others = sum(dist(xi, c[m]) for m in range(C) if m != y[i])
        terms.append(own - others / (3 * (C - 1)))
    return torch.stack(terms).mean()


@pytest.mark.parametrize("normalize", [True, False])
def test_loss_value_and_gradient_match_loop(normalize: bool) -> None:
    c = kmeans_sphere_centroids(6, 6, seed=1, n_points=300).double()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(15, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 6, (15,), generator=g)
    x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ours = DiscriminativeLoss(c, normalize=normalize)(x1, y)
    ref = reference_loss(x2, y, c, normalize)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    # float32 embeddings with the float32 buffer agree too
    got32 = DiscriminativeLoss(c.float(), normalize=normalize)(x.float(), y)
    torch.testing.assert_close(got32.double(), ref.detach(), rtol=1e-4, atol=1e-5)


def test_loss_has_no_pairwise_term() -> None:
    """Linear in N: the batch loss is the mean of single-sample losses."""
    c = onehot_centroids(5, 8)
    x, y = torch.randn(10, 8), torch.arange(5).repeat(2)
    loss = DiscriminativeLoss(c)
    singles = torch.stack([loss(x[i : i + 1], y[i : i + 1]) for i in range(10)])
    torch.testing.assert_close(loss(x, y), singles.mean())


def test_centroids_are_a_buffer_not_a_parameter() -> None:
    loss = DiscriminativeLoss(onehot_centroids(4, 4))
    assert list(loss.parameters()) == []
    assert "centroids" in loss.state_dict()


def test_loss_edge_cases_are_finite() -> None:
    c = onehot_centroids(3, 3)
    x = torch.stack([c[0], torch.zeros(3), torch.tensor([0.0, 2.0, 0.0])])  # on c_0, zero, on c_1
    x.requires_grad_(True)
    y = torch.tensor([0, 2, 1])
    loss = DiscriminativeLoss(c)(x, y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()
    torch.testing.assert_close(loss.detach(), reference_loss(x.detach(), y, c, True))
    single = DiscriminativeLoss(c)(torch.randn(4, 3), torch.zeros(4).long())  # one class
    assert torch.isfinite(single)


def test_loss_bad_input_raises() -> None:
    loss = DiscriminativeLoss(onehot_centroids(3, 4))
    with pytest.raises(ValueError, match=r"\[0, num_classes=3\)"):
        loss(torch.randn(2, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="DiscriminativeLoss has embedding_dim=4"):
        loss(torch.randn(2, 5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="C >= 2"):
        DiscriminativeLoss(torch.ones(1, 4))


# --- Eq. 1-2, Eq. 6 / 8 -------------------------------------------------------------------------
def all_triplets(y: torch.Tensor):
    n = len(y)
    for i, j, k in itertools.product(range(n), repeat=3):
        if j != i and y[j] == y[i] and y[k] != y[i]:
            yield i, j, k


def reference_triplet_sum(x, y, margin=None) -> float:
    total = 0.0
    for i, j, k in all_triplets(y):
        t = dist(x[i], x[j]).item() - dist(x[i], x[k]).item()
        total += t if margin is None else max(0.0, t + margin)
    return total


@pytest.mark.parametrize("margin", [None, 0.0, 0.2, 1.0])
def test_triplet_loss_all_matches_triple_loop(margin: float | None) -> None:
    g = torch.Generator().manual_seed(3)
    x = unit(torch.randn(11, 3, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 1])  # unbalanced, fine for L_t
    want = reference_triplet_sum(x, y, margin)
    for chunk in (1, 2, 5, 11, 1000):
        got = triplet_loss_all(x, y, margin=margin, chunk_size=chunk)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_triplet_loss_all_no_triplets_is_zero() -> None:
    x = torch.randn(5, 3)
    assert triplet_loss_all(x, torch.zeros(5).long()) == 0.0
    assert triplet_loss_all(x, torch.arange(5), margin=0.1) == 0.0


def test_eq8_equals_sum_of_eq6_over_all_triplets() -> None:
    """The paper's 'algebraic manipulation': on a balanced set, L_d (Eq. 8, with G) is the sum
    of l_d (Eq. 6) over all triplets, and each l_t <= l_d (Eq. 5)."""
    c = kmeans_sphere_centroids(3, 4, seed=0, n_points=200).double()
    x, y = balanced(3, 3, 4, seed=4, noise=None)
    ld_sum = 0.0
    for i, j, k in all_triplets(y):
        l_d = (
            dist(x[i], c[y[i]]) - dist(x[i], c[y[k]]) + dist(x[j], c[y[i]]) + dist(x[k], c[y[k]])
        ).item()
        l_t = dist(x[i], x[j]).item() - dist(x[i], x[k]).item()
        assert l_t <= l_d + 1e-12
        ld_sum += l_d
    r = lemma31_bound(x, y, c)
    assert r["L_d"] == pytest.approx(ld_sum, rel=1e-10)
    assert r["H"] == len(list(all_triplets(y)))
    # batch mean of the module times G N is Eq. 8
    n, C = len(y), 3
    g_const = 3 * (C - 1) * (n / C - 1) * n / C
    module = DiscriminativeLoss(c)(x, y).item()
    assert g_const * n * module == pytest.approx(ld_sum, rel=1e-10)


# --- Lemma 3.1 ----------------------------------------------------------------------------------
def check_lemma(x, y, c) -> dict[str, float]:
    r = lemma31_bound(x, y, c)
    # the lemma's quantities, recomputed by loops
    C = len(c)
    pair_d = [dist(c[m], c[n]).item() for m, n in itertools.combinations(range(C), 2)]
    assert r["kappa_min"] == pytest.approx(min(pair_d), rel=1e-9)
    assert r["kappa_max"] == pytest.approx(max(pair_d), rel=1e-9)
    assert r["eps"] == pytest.approx(2 * max(dist(x[i], c[y[i]]).item() for i in range(len(y))))
    n = len(y)
    assert r["H"] == (n / C - 1) * n * (n - n / C)
    assert r["L_t"] == pytest.approx(reference_triplet_sum(x, y), rel=1e-9, abs=1e-9)
    assert r["bound"] == pytest.approx(
        r["H"] * (r["kappa_max"] - r["kappa_min"] + 3 * r["eps"]), rel=1e-12
    )
    # Lemma 3.1, literally
    assert 0 <= r["L_d"] - r["L_t"] <= r["H"] * (r["kappa_max"] - r["kappa_min"] + 3 * r["eps"])
    return r


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("centroids", ["onehot", "kmeans"])
def test_lemma31_random_data(seed: int, centroids: str) -> None:
    c = onehot_centroids(4, 6) if centroids == "onehot" else kmeans_sphere_centroids(4, 6, seed)
    x, y = balanced(4, 4, 6, seed=seed, noise=None)
    check_lemma(x, y, c.double())


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("centroids", ["onehot", "kmeans"])
def test_lemma31_clustered_data_is_tight(seed: int, centroids: str) -> None:
    c = onehot_centroids(4, 6) if centroids == "onehot" else kmeans_sphere_centroids(4, 6, seed)
    x, y = balanced(4, 4, 6, seed=seed, noise=0.05, c=c)
    r = check_lemma(x, y, c.double())
    x_far, _ = balanced(4, 4, 6, seed=seed, noise=None)
    r_far = lemma31_bound(x_far, y, c)
    assert r["eps"] < 0.5 and r["gap"] < r_far["gap"]  # tight clusters: a smaller gap


def test_lemma31_holds_without_normalisation() -> None:
    """The lemma needs only the triangle inequality, not unit norm."""
    g = torch.Generator().manual_seed(9)
    c = 3.0 * torch.randn(3, 5, generator=g, dtype=torch.float64)
    y = torch.arange(3).repeat(3)
    x = c[y] + torch.randn(9, 5, generator=g, dtype=torch.float64)
    r = lemma31_bound(x, y, c, normalize=False)
    assert 0 <= r["gap"] <= r["bound"]
    assert r["L_t"] == pytest.approx(reference_triplet_sum(x, y), rel=1e-9)


def test_lemma31_rejects_unbalanced_sets() -> None:
    c = onehot_centroids(3, 3)
    with pytest.raises(ValueError, match="balanced"):
        lemma31_bound(torch.randn(5, 3), torch.tensor([0, 0, 1, 1, 2]), c)
    with pytest.raises(ValueError, match="balanced"):  # a class without samples
        lemma31_bound(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]), c)
