"""SoftTriple and Proxy-NCA vs float64 loops from Qian et al. 2019 / Movshovitz-Attias et al.
2017, and vs PML with the same centres / proxies."""

from __future__ import annotations

import math

import pytest
import torch
from batches import random_batch
from pytorch_metric_learning.losses import ProxyNCALoss as PMLProxyNCALoss
from pytorch_metric_learning.losses import SoftTripleLoss as PMLSoftTripleLoss
from pytorch_metric_learning.regularizers import SparseCentersRegularizer
from torch.func import functional_call

from dmlnb.losses.proxy_nca import ProxyNCALoss
from dmlnb.losses.soft_triple import SoftTripleLoss

C, K, D = 4, 3, 6


def batch(seed: int = 0, n: int = 10, dim: int = D, n_classes: int = C):
    return random_batch(seed, n, dim, n_classes, requires_grad=False)


def unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm().clamp_min(1e-12)


# --------------------------------------------------------------------------- SoftTriple


def reference_soft_triple(
    x: torch.Tensor,
    y: torch.Tensor,
    w: torch.Tensor,
    la: float,
    gamma: float,
    tau: float,
    margin: float,
    reg_eps: float,
) -> torch.Tensor:
    """Qian et al. 2019: S'_{i,c} = sum_k softmax_k(S^k_{i,c} / gamma) S^k_{i,c}; cross-entropy
    of lambda (S' - delta [c = y_i]); + tau sum_c sum_{t<s} sqrt(2 + eps - 2 w_t.w_s) / (CK(K-1)).
    One sample, class and centre at a time; ``w`` is (C, K, D)."""
    n_classes, k_centers, _ = w.shape
    W = [[unit(w[c, k]) for k in range(k_centers)] for c in range(n_classes)]
    losses = []
    for i in range(len(y)):
        xi = unit(x[i])
        logits = []
        for c in range(n_classes):
            s = [xi @ W[c][k] for k in range(k_centers)]
            z = sum(torch.exp(sk / gamma) for sk in s)
            relaxed = sum(torch.exp(sk / gamma) / z * sk for sk in s)
            logits.append(la * (relaxed - (margin if c == y[i] else 0.0)))
        log_z = torch.log(sum(torch.exp(v) for v in logits))
        losses.append(log_z - logits[int(y[i])])
    loss = sum(losses) / len(losses)
    if tau > 0 and k_centers > 1:
        reg = sum(
            torch.sqrt(2 + reg_eps - 2 * (W[c][t] @ W[c][s]))
            for c in range(n_classes)
            for t in range(k_centers)
            for s in range(t + 1, k_centers)
        )
        loss = loss + tau * reg / (n_classes * k_centers * (k_centers - 1))
    return loss


@pytest.mark.parametrize("tau", [0.0, 0.2])
def test_soft_triple_matches_reference(tau: float) -> None:
    torch.manual_seed(0)
    x, y = batch(1)
    loss = SoftTripleLoss(C, D, centers_per_class=K, tau=tau).double()
    w_ref = loss.weight.detach().clone().requires_grad_(True)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = loss(x1, y)
    ref = reference_soft_triple(x2, y, w_ref, 20.0, 0.1, tau, 0.01, 1e-5)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(loss.weight.grad, w_ref.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("tau", [0.0, 0.2])
def test_soft_triple_equals_pml(tau: float) -> None:
    torch.manual_seed(0)
    x, y = batch(2)
    tiny = torch.finfo(torch.float64).tiny
    ours = SoftTripleLoss(C, D, centers_per_class=K, la=20, gamma=0.1, tau=tau, reg_eps=tiny)
    ours = ours.double()
    kwargs = {}
    if tau > 0:
        kwargs = dict(weight_regularizer=SparseCentersRegularizer(C, K), weight_reg_weight=tau)
    pml = PMLSoftTripleLoss(C, D, centers_per_class=K, la=20, gamma=0.1, margin=0.01, **kwargs)
    assert tuple(pml.fc.shape) == (D, C * K)  # PML layout: fc = weight.reshape(C*K, D).T
    pml.fc.data = ours.weight.detach().reshape(C * K, D).T.clone()
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    a, b = ours(x1, y), pml(x2, y)
    a.backward()
    b.backward()
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(ours.weight.grad.reshape(C * K, D).T, pml.fc.grad)


def test_soft_triple_init_matches_pml_distribution() -> None:
    # same init rule (kaiming_uniform_(a=sqrt(5)) on (D, C*K)): uniform in +-1/sqrt(C*K)
    torch.manual_seed(0)
    w = SoftTripleLoss(50, 64, centers_per_class=10).weight
    torch.manual_seed(0)
    fc = PMLSoftTripleLoss(50, 64, centers_per_class=10).fc
    bound = 1 / math.sqrt(500)
    assert w.abs().max() <= bound and fc.abs().max() <= bound
    assert w.abs().max() > 0.99 * bound and abs(w.std().item() - fc.std().item()) < 1e-3


def test_soft_triple_gradcheck() -> None:
    torch.manual_seed(0)
    x, y = batch(3, n=4, dim=4, n_classes=3)
    loss = SoftTripleLoss(3, 4, centers_per_class=2, la=5.0, gamma=0.5, tau=0.2).double()
    w = loss.weight.detach().clone().requires_grad_(True)
    x.requires_grad_(True)

    def f(e: torch.Tensor, w_: torch.Tensor) -> torch.Tensor:
        return functional_call(loss, {"weight": w_}, (e, y))

    assert torch.autograd.gradcheck(f, (x, w))


def test_centers_are_normalised_weight_and_relax_to_max() -> None:
    torch.manual_seed(0)
    loss = SoftTripleLoss(C, D, centers_per_class=K, gamma=1e-4).double()
    centers = loss.centers()
    assert centers.shape == (C, K, D)
    torch.testing.assert_close(centers.norm(dim=2), torch.ones(C, K, dtype=torch.float64))
    torch.testing.assert_close(centers * loss.weight.norm(dim=2, keepdim=True), loss.weight)
    # as gamma -> 0 the relaxed similarity becomes the max over the class's centres
    x, _ = batch(4)
    s = torch.einsum("bd,ckd->bck", torch.nn.functional.normalize(x, dim=1), centers)
    torch.testing.assert_close(loss.class_similarity(x), s.amax(dim=2), rtol=0, atol=1e-3)


# --------------------------------------------------------------------------- Proxy-NCA


def reference_proxy_nca(
    x: torch.Tensor, y: torch.Tensor, p: torch.Tensor, scale: float, exclude_positive: bool
) -> torch.Tensor:
    """-log exp(-s d(x, p_y)) / sum_{c != y} exp(-s d(x, p_c)) with d = ||x^ - p^||^2
    (Movshovitz-Attias et al. 2017); the positive joins the sum when not ``exclude_positive``."""
    P = [unit(pc) for pc in p]
    losses = []
    for i in range(len(y)):
        xi = unit(x[i])
        e = [torch.exp(-scale * (xi - pc).pow(2).sum()) for pc in P]
        denom = sum(e[c] for c in range(len(P)) if c != y[i] or not exclude_positive)
        losses.append(-torch.log(e[int(y[i])] / denom))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("exclude_positive", [True, False])
@pytest.mark.parametrize("scale", [1.0, 9.0])
def test_proxy_nca_matches_reference(exclude_positive: bool, scale: float) -> None:
    torch.manual_seed(0)
    x, y = batch(5)
    loss = ProxyNCALoss(C, D, scale=scale, exclude_positive=exclude_positive).double()
    p_ref = loss.proxies.detach().clone().requires_grad_(True)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = loss(x1, y)
    ref = reference_proxy_nca(x2, y, p_ref, scale, exclude_positive)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(loss.proxies.grad, p_ref.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("scale", [1.0, 9.0])
def test_proxy_nca_with_positive_in_denominator_equals_pml(scale: float) -> None:
    torch.manual_seed(0)
    x, y = batch(6)
    ours = ProxyNCALoss(C, D, scale=scale, exclude_positive=False).double()
    pml = PMLProxyNCALoss(C, D, softmax_scale=scale)
    pml.proxies.data = ours.proxies.detach().clone()
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    a, b = ours(x1, y), pml(x2, y)
    a.backward()
    b.backward()
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(ours.proxies.grad, pml.proxies.grad, rtol=1e-8, atol=1e-10)


def test_paper_form_differs_from_pml_by_the_documented_identity() -> None:
    # per sample: l_paper = l_pml + log(1 - exp(-l_pml))
    torch.manual_seed(0)
    x, y = batch(7)
    ours = ProxyNCALoss(C, D, exclude_positive=True).double()
    pml = PMLProxyNCALoss(C, D)
    pml.proxies.data = ours.proxies.detach().clone()
    for i in range(len(y)):
        l_pml = pml(x[i : i + 1], y[i : i + 1])
        torch.testing.assert_close(
            ours(x[i : i + 1], y[i : i + 1]), l_pml + torch.log(-torch.expm1(-l_pml))
        )


@pytest.mark.parametrize("exclude_positive", [True, False])
def test_proxy_nca_gradcheck(exclude_positive: bool) -> None:
    torch.manual_seed(0)
    x, y = batch(8, n=5)
    loss = ProxyNCALoss(C, D, scale=3.0, exclude_positive=exclude_positive).double()
    p = loss.proxies.detach().clone().requires_grad_(True)
    x.requires_grad_(True)

    def f(e: torch.Tensor, p_: torch.Tensor) -> torch.Tensor:
        return functional_call(loss, {"proxies": p_}, (e, y))

    assert torch.autograd.gradcheck(f, (x, p))


# --------------------------------------------------------------------------- both


_G = torch.Generator().manual_seed(0)  # seeded edge-case data
EDGE_CASES = {
    "no_positive_pair": (torch.randn(4, D, generator=_G), torch.arange(4)),
    "single_class": (torch.randn(5, D, generator=_G), torch.zeros(5, dtype=torch.long)),
    "duplicates": (torch.randn(1, D, generator=_G).repeat(6, 1), torch.tensor([0, 0, 0, 1, 1, 1])),
    "zero_norm": (
        torch.cat([torch.zeros(2, D), torch.randn(4, D, generator=_G)]),
        torch.tensor([0, 0, 1, 1, 2, 2]),
    ),
}


def make(name: str) -> torch.nn.Module:
    if name == "soft_triple":
        return SoftTripleLoss(C, D, centers_per_class=K)
    return ProxyNCALoss(C, D, exclude_positive=name == "proxy_nca")


@pytest.mark.parametrize("case", list(EDGE_CASES))
@pytest.mark.parametrize("name", ["soft_triple", "proxy_nca", "proxy_nca_pml_form"])
def test_edge_cases_are_finite(case: str, name: str) -> None:
    torch.manual_seed(0)
    loss = make(name)
    x, y = EDGE_CASES[case]
    x = x.clone().requires_grad_(True)
    value = loss(x, y)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in loss.parameters())


def test_coincident_centres_keep_finite_regulariser_gradient() -> None:
    torch.manual_seed(0)
    loss = SoftTripleLoss(C, D, centers_per_class=K)
    with torch.no_grad():
        loss.weight[:, 1] = loss.weight[:, 0]  # two identical centres per class
    x, y = batch(9)
    loss(x.float(), y).backward()
    assert torch.isfinite(loss.weight.grad).all()


def test_bad_arguments_and_labels() -> None:
    with pytest.raises(ValueError, match="num_classes"):
        SoftTripleLoss(C, D)(torch.randn(3, D), torch.tensor([0, 1, C]))
    with pytest.raises(ValueError, match="num_classes"):
        ProxyNCALoss(C, D)(torch.randn(3, D), torch.tensor([-1, 0, 1]))
    with pytest.raises(ValueError, match="exclude_positive"):
        ProxyNCALoss(1, D)
    with pytest.raises(ValueError, match="gamma"):
        SoftTripleLoss(C, D, gamma=0.0)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["soft_triple", "proxy_nca", "proxy_nca_pml_form"])
def test_cuda_matches_cpu(name: str) -> None:
    torch.manual_seed(0)
    loss = make(name).double()
    x, y = batch(10)
    expected = loss(x, y)
    torch.testing.assert_close(loss.cuda()(x.cuda(), y.cuda()).cpu(), expected)
