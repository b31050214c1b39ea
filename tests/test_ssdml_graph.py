"""dmlnb.ssdml.graph against brute-force float64 references (numpy inverse, sklearn kNN, loops)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.neighbors import NearestNeighbors

from dmlnb.ssdml import graph


def points(n: int = 40, d: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_knn_indices_and_transition_match_sklearn():
    z = points()
    k = 6
    _, ref = NearestNeighbors(n_neighbors=k + 1).fit(z.numpy()).kneighbors(z.numpy())
    ref = ref[:, 1:]  # drop the point itself
    np.testing.assert_array_equal(graph.knn_indices(z, k).numpy(), ref)
    Q = graph.knn_transition(z, k).numpy()
    Qref = np.zeros((len(z), len(z)))
    for i, row in enumerate(ref):
        Qref[i, row] = 1.0 / k
    np.testing.assert_allclose(Q, Qref)


def test_knn_affinity_heat_kernel_union_of_neighbourhoods():
    z = points(30, 3, seed=1)
    k = 4
    dist, ref = NearestNeighbors(n_neighbors=k + 1).fit(z.numpy()).kneighbors(z.numpy())
    sigma2 = (dist[:, 1:] ** 2).mean()
    n = len(z)
    Aref = np.zeros((n, n))
    for i in range(n):
        for j in ref[i, 1:]:
            w = np.exp(-np.sum((z[i].numpy() - z[j].numpy()) ** 2) / sigma2)
            Aref[i, j] = Aref[j, i] = w
    A = graph.knn_affinity(z, k).numpy()
    np.testing.assert_allclose(A, Aref, rtol=1e-9, atol=1e-12)
    assert np.all(np.diag(A) == 0)


def test_normalized_affinity_and_laplacian():
    A = graph.knn_affinity(points(20, 3, seed=2), 3)
    A[0, :] = 0.0
    A[:, 0] = 0.0  # an isolated node: its row must stay zero, not NaN
    deg = A.sum(1).numpy()
    S = graph.normalized_affinity(A).numpy()
    n = len(deg)
    for i in range(n):
        for j in range(n):
            ref = 0.0 if deg[i] == 0 or deg[j] == 0 else A[i, j].item() / np.sqrt(deg[i] * deg[j])
            assert S[i, j] == pytest.approx(ref, abs=1e-12)
    L = graph.graph_laplacian(A)
    Z = torch.randn(n, 2, dtype=torch.float64)
    quad = torch.trace(Z.T @ L @ Z).item()
    pairwise = 0.5 * sum(
        A[i, j].item() * (Z[i] - Z[j]).pow(2).sum().item() for i in range(n) for j in range(n)
    )
    assert quad == pytest.approx(pairwise, rel=1e-10)


def test_initial_affinity_definition():
    y = torch.tensor([0, 1, -1, 0, -1, 1])
    W0 = graph.initial_affinity(y).numpy()
    for i in range(len(y)):
        for j in range(len(y)):
            if i == j:
                ref = 1.0
            elif y[i] >= 0 and y[j] >= 0:
                ref = 1.0 if y[i] == y[j] else -1.0
            else:
                ref = 0.0
            assert W0[i, j] == ref


@pytest.mark.parametrize("solver", ["solve", "cg"])
def test_propagation_matches_numpy_inverse_symmetric_q(solver):
    z = points(60, 4, seed=3)
    Q = graph.normalized_affinity(graph.knn_affinity(z, 5))
    y = torch.full((60,), -1)
    y[:12] = torch.arange(12) % 3
    W0 = graph.initial_affinity(y).double()
    gamma = 0.9
    ref = (1 - gamma) * np.linalg.inv(np.eye(60) - gamma * Q.numpy()) @ W0.numpy()
    out = graph.propagate_affinity(W0, Q, gamma, solver=solver, tol=1e-12).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-9)


def test_propagation_paper_q_and_fixed_point():
    z = points(50, 3, seed=4)
    Q = graph.knn_transition(z, 6)  # row-stochastic, not symmetric
    y = torch.full((50,), -1)
    y[:10] = torch.arange(10) % 2
    W0 = graph.initial_affinity(y).double()
    gamma = 0.99
    out = graph.propagate_affinity(W0, Q, gamma)  # auto -> LU
    ref = (1 - gamma) * np.linalg.inv(np.eye(50) - gamma * Q.numpy()) @ W0.numpy()
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-9)
    # the random-walk fixed point W = γ Q W + (1 - γ) W0
    np.testing.assert_allclose(
        (gamma * Q @ out + (1 - gamma) * W0).numpy(), out.numpy(), atol=1e-10
    )
    with pytest.raises(ValueError, match="symmetric Q"):
        graph.propagate_affinity(W0, Q, gamma, solver="cg")


def test_symmetrize_and_errors():
    W = torch.randn(7, 7, dtype=torch.float64)
    np.testing.assert_allclose(graph.symmetrize(W).numpy(), (W.numpy() + W.numpy().T) / 2)
    with pytest.raises(ValueError, match="gamma"):
        graph.propagate_affinity(torch.eye(3), torch.zeros(3, 3), 1.0)
    with pytest.raises(ValueError, match="k must be"):
        graph.knn_affinity(torch.randn(5, 2), 5)
    with pytest.raises(ValueError, match="square"):
        graph.graph_laplacian(torch.randn(3, 4))
