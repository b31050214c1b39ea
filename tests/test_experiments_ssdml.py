"""The SSDML chapter's glue: settings of every profile build, the paper-profile build path on
fabricated inputs, collapse measures against numpy, supervised triplets, run reload."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dmlnb.data.base import DatasetSplits, InMemoryDataset
from dmlnb.experiments import ssdml as ssx
from dmlnb.ssdml.base import PartitionObjective


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_settings_build(profile):
    for key, st in ssx.settings_for(profile).items():
        cfg = st.train_config(profile, st.seeds[0])
        assert cfg.epochs >= st.epochs_per_partition or cfg.epochs >= 1
        assert set(st.methods) <= set(ssx.METHODS.values())
        assert key in ssx.REPORTED_COLUMN
    for table in ssx.TABLE_SETTINGS[profile].values():
        assert set(table) <= set(ssx.settings_for(profile))


def test_paper_profile_networks_and_objectives_on_fabricated_inputs():
    paper = ssx.settings_for("paper")
    for key, shape, d in [("mnist", (1, 28, 28), 128), ("cifar10", (3, 32, 32), 64)]:
        cfg = paper[key].train_config("paper", 0)
        net, dim = ssx.build_network(cfg, shape)
        assert dim == d
        z = net(torch.randn(4, *shape))
        assert z.shape == (4, d) and torch.allclose(z.norm(dim=1), torch.ones(4), atol=1e-5)
        for method in ssx.METHODS.values():
            obj = ssx.build_objective(method, paper[key], dim)
            assert isinstance(obj, PartitionObjective)
            assert obj.metric.out_dim == paper[key].metric_dim
    cub = paper["cub200"].train_config("paper", 0).replace(pretrained=False)
    net, dim = ssx.build_network(cub, (3, 64, 64))
    assert net.eval()(torch.randn(2, 3, 64, 64)).shape == (2, dim)
    assert ssx.build_objective("ours", paper["cub200"], dim).metric.L.shape == (1024, 128)


def test_effective_rank_against_numpy():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 6, generator=g) * torch.tensor([5.0, 3.0, 1.0, 1.0, 0.5, 0.1])
    s = np.linalg.svd(x.double().numpy() - x.double().numpy().mean(0), compute_uv=False)
    p = s / s.sum()
    out = ssx.embedding_spectrum(x)
    assert out["effective_rank"] == pytest.approx(float(np.exp(-(p * np.log(p)).sum())), rel=1e-9)
    np.testing.assert_allclose(out["singular_values"], p, rtol=1e-9)
    line = torch.randn(50, 1, generator=g) * torch.randn(1, 6, generator=g)  # all points on a line
    assert ssx.embedding_spectrum(line)["effective_rank"] == pytest.approx(1.0, abs=1e-3)


def test_labelled_triplets_only_use_labels():
    torch.manual_seed(0)
    labels = torch.tensor([0, -1, 0, 1, -1, 1, 2, 2])
    obj = ssx.LabelledTriplets(4, 2, "triplet")
    t = obj.prepare(torch.randn(8, 4), labels)
    assert len(t) == 6  # ordered positive pairs: 2 per class
    assert bool((labels[t] >= 0).all())
    assert bool((labels[t[:, 0]] == labels[t[:, 1]]).all() and (labels[t[:, 0]] != labels[t[:, 2]]).all())
    z = torch.randn(6, 3, 4, dtype=torch.float64)
    obj = obj.double()
    a, p, n = z.unbind(1)
    L = obj.metric.L.detach()
    d = lambda u, v: ((u - v) @ L).pow(2).sum(1)
    ref = torch.clamp(d(a, p) - d(a, n) + 0.2, min=0).mean()
    assert obj.unit_loss(z, torch.arange(6)).item() == pytest.approx(ref.item(), rel=1e-12)


def test_run_method_trains_then_reloads(tmp_path):
    g = torch.Generator().manual_seed(0)
    y = torch.arange(3).repeat(12)
    train = InMemoryDataset(torch.randn(36, 1, 8, 8, generator=g) + y[:, None, None, None].float(), y)
    splits = ssx.semi_supervised(DatasetSplits("fake", train=train, test=train), 3, seed=0)
    st = ssx.settings_for("smoke")["digits"]
    st = dataclasses.replace(st, partition_size=10, config={**st.config, "epochs": 1})
    run = ssx.run_method("ours", st, "smoke", 0, splits, tmp_path, tsne_points=False)
    assert run.trained and run.record.data["status"] == "finished"
    assert {"spectrum", "neighbours", "queries"} <= set(run.extras)
    again = ssx.run_method("ours", st, "smoke", 0, splits, tmp_path)
    assert not again.trained and again.best == run.best
