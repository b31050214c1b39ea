"""The five deep SSDML baselines against float64 loops written from each method's formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dmlnb.ssdml.apllr_apit import DeepAPIT, DeepAPLLR, itml_prior
from dmlnb.ssdml.baselines import BASELINES, build_baseline
from dmlnb.ssdml.isdml import DeepISDML
from dmlnb.ssdml.lrml import DeepLRML
from dmlnb.ssdml.seraph import DeepSERAPH

K = 4


def partition(seed: int = 0, n_unlabelled: int = 9, d: int = 4):
    """7 labelled examples of 3 classes followed by ``n_unlabelled`` unlabelled ones."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.cat([torch.tensor([0, 0, 1, 1, 2, 2, 0]), torch.full((n_unlabelled,), -1)])
    z = torch.randn(labels.numel(), d, generator=g, dtype=torch.float64)
    return z, labels


def set_random_metric(obj, seed: int = 1) -> np.ndarray:
    """Give ``obj.metric`` a random ``L`` ``(d, l)``; returns it as numpy."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        w = obj.metric.proj.weight
        w.copy_(
            torch.eye(*w.shape, dtype=w.dtype)
            + 0.3 * torch.randn(w.shape, generator=g, dtype=w.dtype)
        )
    return obj.metric.L.detach().numpy().copy()


def epoch_sum(obj, z, labels, n_batches: int = 2) -> float:
    """Prepare, then sum ``unit_loss`` over a random split of all units into mini-batches."""
    units = obj.prepare(z, labels)
    perm = torch.randperm(units.shape[0], generator=torch.Generator().manual_seed(3))
    return sum(
        float(obj.unit_loss(z[units[rows]], rows).detach()) for rows in perm.chunk(n_batches)
    )


def sq_dist(L: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    v = a - b
    return float(v @ L @ L.T @ v)


def brute_heat_knn(z: np.ndarray, k: int) -> np.ndarray:
    """Union-kNN heat kernel, ``σ²`` = mean squared distance to the ``k`` nearest neighbours."""
    n = len(z)
    d2 = np.array([[float(((z[i] - z[j]) ** 2).sum()) for j in range(n)] for i in range(n)])
    nbrs = [sorted((j for j in range(n) if j != i), key=lambda j: d2[i, j])[:k] for i in range(n)]
    sigma2 = np.mean([d2[i, j] for i in range(n) for j in nbrs[i]])
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if j in nbrs[i] or i in nbrs[j]:
                W[i, j] = math.exp(-d2[i, j] / sigma2)
    return W


def brute_knn_Q(z: np.ndarray, k: int) -> np.ndarray:
    n = len(z)
    Q = np.zeros((n, n))
    for i in range(n):
        for j in sorted(
            (j for j in range(n) if j != i), key=lambda j: float(((z[i] - z[j]) ** 2).sum())
        )[:k]:
            Q[i, j] = 1.0 / k
    return Q


def pair_kind(labels, i: int, j: int) -> str:
    if labels[i] < 0 or labels[j] < 0:
        return "none"
    return "same" if labels[i] == labels[j] else "diff"


# ----------------------------------------------------------------------------- exact values


@pytest.mark.parametrize("cls,out_dim", [(DeepLRML, None), (DeepLRML, 3), (DeepISDML, None)])
def test_lrml_isdml_value_matches_loop(cls, out_dim):
    z, labels = partition()
    obj = cls(
        build_baseline("lrml", 4, out_dim=out_dim).metric, gamma_s=0.7, gamma_d=0.4, k=K
    ).double()
    L = set_random_metric(obj)
    zn, y, n = z.numpy(), labels.tolist(), len(labels)
    W = brute_heat_knn(zn, K)
    if cls is DeepISDML:  # density-adapted: mean degree * W_ij / sqrt(deg_i deg_j)
        deg = W.sum(1)
        W = np.array(
            [
                [deg.mean() * W[i, j] / math.sqrt(deg[i] * deg[j]) for j in range(n)]
                for i in range(n)
            ]
        )
    J = 0.5 * sum(W[i, j] * sq_dist(L, zn[i], zn[j]) for i in range(n) for j in range(n))
    omega = 0.5 * W.sum()  # γ_S = 0.7 Ω / |S|, γ_D = 0.4 Ω / |D|
    kinds = [pair_kind(y, i, j) for i in range(n) for j in range(i + 1, n)]
    n_same, n_diff = kinds.count("same"), kinds.count("diff")
    for i in range(n):
        for j in range(i + 1, n):
            kind = pair_kind(y, i, j)
            if kind == "same":
                J += 0.7 * omega / n_same * sq_dist(L, zn[i], zn[j])
            elif kind == "diff":
                J -= 0.4 * omega / n_diff * sq_dist(L, zn[i], zn[j])
    J *= np.linalg.det(L.T @ L) ** (-1.0 / L.shape[1])  # log|M| = 0 normalisation
    assert epoch_sum(obj, z, labels) == pytest.approx(J, rel=1e-9)


@pytest.mark.parametrize("mu", [0.3, None])
def test_seraph_value_matches_loop(mu):
    z, labels = partition()
    obj = DeepSERAPH(
        build_baseline("seraph", 4).metric, eta=1.5, mu=mu, lam=0.2, max_unlabelled_pairs=None
    ).double()
    L = set_random_metric(obj)
    zn, y, n = z.numpy(), labels.tolist(), len(labels)
    lab = [(i, j) for i in range(n) for j in range(i + 1, n) if y[i] >= 0 and y[j] >= 0]
    unl = [(i, j) for i in range(n) for j in range(i + 1, n) if y[i] < 0 and y[j] < 0]
    mu_val = len(lab) / len(unl) if mu is None else mu

    def p(i, j, yij):
        return 1.0 / (1.0 + math.exp(yij * (sq_dist(L, zn[i], zn[j]) - 1.5)))

    J = -sum(math.log(p(i, j, 1 if y[i] == y[j] else -1)) for i, j in lab)
    J += -mu_val * sum(p(i, j, s) * math.log(p(i, j, s)) for i, j in unl for s in (-1, 1))
    J += 0.2 * np.trace(L @ L.T)
    assert epoch_sum(obj, z, labels, n_batches=3) == pytest.approx(J, rel=1e-9)
    assert obj.mu_ == pytest.approx(mu_val)


def brute_prior_affinity_objective(zn, y, L, M0, lam, gamma, k):
    n, d = len(y), zn.shape[1]
    Q = brute_knn_Q(zn, k)
    W0 = np.array(
        [
            [
                1.0 if i == j else {"same": 1.0, "diff": -1.0, "none": 0.0}[pair_kind(y, i, j)]
                for j in range(n)
            ]
            for i in range(n)
        ]
    )
    Ws = (1 - gamma) * np.linalg.inv(np.eye(n) - gamma * Q) @ W0
    W = 0.5 * (Ws + Ws.T)
    M = L @ L.T
    J = np.trace(M @ np.linalg.inv(M0)) - np.linalg.slogdet(M)[1] + np.linalg.slogdet(M0)[1] - d
    for i in range(n):
        for j in range(i + 1, n):
            if Q[i, j] > 0 or Q[j, i] > 0 or pair_kind(y, i, j) != "none":
                J += lam * W[i, j] * sq_dist(L, zn[i], zn[j])
    return J


def brute_llr_prior(zn, y, shrinkage, floor):
    n, d = len(y), zn.shape[1]
    M0 = np.zeros((d, d))
    for kind, sign in (("same", 1.0), ("diff", -1.0)):
        vs = [
            zn[i] - zn[j] for i in range(n) for j in range(i + 1, n) if pair_kind(y, i, j) == kind
        ]
        S = sum(np.outer(v, v) for v in vs) / len(vs)
        S = (1 - shrinkage) * S + shrinkage * np.trace(S) / d * np.eye(d)
        M0 += sign * np.linalg.inv(S)
    ev, U = np.linalg.eigh(M0)
    return U @ np.diag(np.maximum(ev, floor * ev.max())) @ U.T


def test_apllr_value_matches_loop():
    z, labels = partition()
    obj = DeepAPLLR(
        build_baseline("apllr", 4).metric, lam=0.5, k=K, gamma=0.9, shrinkage=0.2, floor=0.05
    ).double()
    L = set_random_metric(obj)
    got = epoch_sum(obj, z, labels)
    M0 = brute_llr_prior(z.numpy(), labels.tolist(), 0.2, 0.05)
    np.testing.assert_allclose(obj.M0.numpy(), M0, rtol=1e-9, atol=1e-12)
    assert got == pytest.approx(
        brute_prior_affinity_objective(z.numpy(), labels.tolist(), L, M0, 0.5, 0.9, K), rel=1e-9
    )


def test_apit_value_matches_loop_given_its_prior():
    z, labels = partition()
    obj = DeepAPIT(build_baseline("apit", 4).metric, lam=0.5, k=K, gamma=0.9).double()
    L = set_random_metric(obj)
    got = epoch_sum(obj, z, labels)
    M0 = obj.M0.numpy()
    assert np.linalg.eigvalsh(M0).min() > 0
    assert got == pytest.approx(
        brute_prior_affinity_objective(z.numpy(), labels.tolist(), L, M0, 0.5, 0.9, K), rel=1e-9
    )


def test_itml_prior_meets_hard_constraints():
    """With a huge slack weight ITML's Bregman projections satisfy every constraint:
    similar pairs within the 5th percentile ``u``, dissimilar beyond the 95th ``l``."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(4).repeat_interleave(4)
    z = torch.randn(16, 3, generator=g, dtype=torch.float64) * 0.3
    z[:, 0] = (
        2.0 * y
    )  # classes apart along axis 0, spread along 1, 2 only: a feasible metric exists
    M0 = itml_prior(z, y, slack=1e6, max_sweeps=100, tol=1e-9).numpy()
    zn = z.numpy()
    pairs = [(i, j) for i in range(16) for j in range(i + 1, 16)]
    d_euc = np.array([((zn[i] - zn[j]) ** 2).sum() for i, j in pairs])
    u, lo = np.percentile(d_euc, [5, 95])
    for i, j in pairs:
        v = zn[i] - zn[j]
        if y[i] == y[j]:
            assert v @ M0 @ v <= u * 1.01
        else:
            assert v @ M0 @ v >= lo * 0.99
    assert np.linalg.eigvalsh(M0).min() > 0


def test_itml_prior_constraint_cap():
    z, labels = partition(n_unlabelled=3)
    full = itml_prior(z, labels, max_constraints=None)
    torch.testing.assert_close(itml_prior(z, labels, max_constraints=21), full)  # 21 = all pairs
    torch.manual_seed(0)
    capped = itml_prior(z, labels, max_constraints=6)
    assert torch.isfinite(capped).all() and torch.linalg.eigvalsh(capped).min() > 0
    assert not torch.allclose(capped, full)


# ----------------------------------------------------------------------------- gradients, edges


@pytest.mark.parametrize("name", BASELINES)
def test_gradients_reach_z_and_L(name):
    z, labels = partition()
    obj = build_baseline(name, 4, k=K) if name != "seraph" else build_baseline(name, 4)
    obj = obj.double()
    set_random_metric(obj)
    units = obj.prepare(z, labels)
    zu = z[units].clone().requires_grad_(True)
    obj.unit_loss(zu, torch.arange(units.shape[0])).backward()
    gL = obj.metric.proj.weight.grad
    assert torch.isfinite(zu.grad).all() and zu.grad.abs().sum() > 0
    assert torch.isfinite(gL).all() and gL.abs().sum() > 0


EDGE_LABELS = {
    "no_unlabelled": torch.tensor([0, 0, 1, 1, 2, 2, 0]),
    "single_class": torch.tensor([1, 1, 1, -1, -1, -1, -1, -1]),
    "no_labels": torch.full((8,), -1),
    "one_labelled": torch.tensor([3, -1, -1, -1, -1, -1]),
}


@pytest.mark.parametrize("case", list(EDGE_LABELS))
@pytest.mark.parametrize("name", BASELINES)
def test_edge_partitions_give_finite_values(name, case):
    labels = EDGE_LABELS[case]
    z = torch.randn(labels.numel(), 4, generator=torch.Generator().manual_seed(2))
    obj = build_baseline(name, 4)  # default k = 10 > N - 1: capped
    units = obj.prepare(z, labels)
    assert units.dim() == 2 and units.shape[1] == 2 and units.shape[0] > 0
    zu = z[units].clone().requires_grad_(True)
    loss = obj.unit_loss(zu, torch.arange(units.shape[0]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(zu.grad).all()
    assert torch.isfinite(obj.metric.proj.weight.grad).all()


@pytest.mark.parametrize("name", BASELINES)
def test_single_example_partition_has_no_units(name):
    assert build_baseline(name, 4).prepare(torch.randn(1, 4), torch.tensor([0])).shape == (0, 2)


def test_seraph_samples_unlabelled_pairs_with_unbiased_weights():
    z, labels = partition(n_unlabelled=30)
    torch.manual_seed(0)
    obj = DeepSERAPH(build_baseline("seraph", 4).metric, mu=0.5, max_unlabelled_pairs=50)
    units = obj.prepare(z, labels)
    n_lab, total = 21, 30 * 29 // 2
    assert units.shape == (n_lab + 50, 2)
    unl = units[n_lab:]
    assert (labels[unl] < 0).all() and (unl[:, 0] < unl[:, 1]).all()
    assert torch.allclose(
        obj.weights[n_lab:], torch.full((50,), 0.5 * total / 50, dtype=obj.weights.dtype)
    )
    assert (obj.kind[n_lab:] == 0).all() and (obj.kind[:n_lab].abs() == 1).all()


def test_unit_loss_before_prepare_and_bad_inputs_raise():
    obj = build_baseline("lrml", 4)
    with pytest.raises(RuntimeError, match="prepare"):
        obj.unit_loss(torch.randn(3, 2, 4), torch.arange(3))
    with pytest.raises(ValueError, match="embeddings"):
        obj.prepare(torch.randn(5, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="integer"):
        obj.prepare(torch.randn(5, 4), torch.zeros(5))


def test_factory_names_and_errors():
    assert BASELINES == ("lrml", "seraph", "isdml", "apllr", "apit")
    classes = (DeepLRML, DeepSERAPH, DeepISDML, DeepAPLLR, DeepAPIT)
    for name, cls in zip(BASELINES, classes):
        obj = build_baseline(name.upper(), 6, out_dim=5)
        assert type(obj) is cls and obj.unit_size == 2 and obj.metric.L.shape == (6, 5)
    assert build_baseline("seraph", 4, eta=2.0).eta == 2.0
    with pytest.raises(ValueError, match="lrml, seraph, isdml, apllr, apit"):
        build_baseline("itml", 4)


# ----------------------------------------------------------------------------- learning


def toy_problem(seed: int = 0, per_class: int = 60, n_labels: int = 6):
    """Two classes apart along axis 0 (std 0.15, means ±0.5) under five unit-variance nuisance
    axes, which spoil Euclidean neighbours; ``n_labels`` labelled examples per class."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(2).repeat_interleave(per_class)
    x = torch.randn(2 * per_class, 6, generator=g, dtype=torch.float64)
    x[:, 0] = 0.15 * x[:, 0] + torch.where(y == 0, -0.5, 0.5).double()
    labels = torch.full_like(y, -1)
    for c in range(2):
        labels[(y == c).nonzero()[:n_labels, 0]] = c
    return x, y, labels


def loo_1nn_accuracy(x: torch.Tensor, y: torch.Tensor) -> float:
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    return float((y[d.argmin(1)] == y).double().mean())


@pytest.fixture
def one_thread():
    """Tiny tensors: intra-op threads only add overhead (and contend on a shared machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", BASELINES)
def test_gradient_descent_improves_knn_accuracy(name, one_thread):
    """Identity network: plain GD on ``L`` over one partition (the mean unit loss) must raise the
    leave-one-out 1-NN accuracy of the learned metric above the Euclidean start (0.80 on this
    draw). Not every draw works for APIT: its signed propagated Laplacian can outweigh the prior
    (see :class:`~dmlnb.ssdml.apllr_apit.PriorAffinityObjective`)."""
    x, y, labels = toy_problem(seed=1)
    torch.manual_seed(0)
    obj = build_baseline(name, 6).double()
    start = loo_1nn_accuracy(obj.metric(x).detach(), y)
    units = obj.prepare(x, labels)
    rows = torch.arange(units.shape[0])
    opt = torch.optim.SGD(obj.parameters(), lr=1.0)
    for _ in range(300):
        opt.zero_grad()
        (obj.unit_loss(x[units], rows) / units.shape[0]).backward()
        opt.step()
    end = loo_1nn_accuracy(obj.metric(x).detach(), y)
    assert end >= start + 0.03, (start, end)
