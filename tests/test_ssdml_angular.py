"""The proposed objective: Eq. (3) vs a float64 loop, gradcheck, orthogonality kept, prepare."""

from __future__ import annotations

import math

import torch

from dmlnb.ssdml.angular import AngularSSDML, smooth_angular_loss
from dmlnb.ssdml.base import LinearMetric


def test_eq3_matches_loop_and_gradcheck():
    g = torch.Generator().manual_seed(0)
    metric = LinearMetric(5, 3).double()
    with torch.no_grad():
        metric.proj.weight.copy_(torch.randn(3, 5, generator=g, dtype=torch.float64))
    z = torch.randn(7, 3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    alpha = 40.0
    L = metric.L.detach()
    t2 = math.tan(math.radians(alpha)) ** 2
    terms = []
    for a, p, n in z.detach():
        d_ap = ((a - p) @ L @ L.T @ (a - p)).item()
        c = (a + p) / 2
        d_nc = ((n - c) @ L @ L.T @ (n - c)).item()
        terms.append(math.log1p(math.exp(d_ap - 4 * t2 * d_nc)))
    assert abs(smooth_angular_loss(metric, z, alpha).item() - sum(terms) / len(terms)) < 1e-12
    assert torch.autograd.gradcheck(lambda x: smooth_angular_loss(metric, x, alpha), (z,))


def test_orthogonal_metric_stays_on_stiefel_manifold():
    torch.manual_seed(0)
    obj = AngularSSDML(8, 4, orthogonal=True)
    free = AngularSSDML(8, 4, orthogonal=False)
    for o in (obj, free):
        opt = torch.optim.Adam(o.parameters(), lr=0.05)
        for _ in range(20):
            z = torch.nn.functional.normalize(torch.randn(16, 3, 8), dim=-1)
            loss = o.unit_loss(z, torch.arange(16))
            opt.zero_grad()
            loss.backward()
            opt.step()
    L = obj.metric.L.detach()
    assert torch.allclose(L.T @ L, torch.eye(4), atol=1e-5)
    Lf = free.metric.L.detach()
    assert not torch.allclose(Lf.T @ Lf, torch.eye(4), atol=1e-2)  # the ablation is unconstrained


def test_prepare_mines_within_clusters():
    # two tight, far-apart clusters, one labelled point each: positives are never across clusters
    g = torch.Generator().manual_seed(1)
    z = torch.cat(
        [torch.randn(12, 2, generator=g) * 0.1, torch.randn(12, 2, generator=g) * 0.1 + 10.0]
    )
    labels = torch.full((24,), -1)
    labels[0], labels[12] = 0, 1
    obj = AngularSSDML(2, 2, k=6, gamma=0.9)
    units = obj.prepare(z, labels)
    assert units.shape == (24 * 3, 3)
    cluster = (torch.arange(24) >= 12).long()
    assert bool((cluster[units[:, 0]] == cluster[units[:, 1]]).all())
    assert torch.allclose(obj.affinity, obj.affinity.T)
    # the labelled anchor of cluster 0 has its most affine neighbours first
    W = obj.affinity
    assert bool((W[units[:, 0], units[:, 1]] >= W[units[:, 0], units[:, 2]]).all())
