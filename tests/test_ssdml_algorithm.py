"""Algorithm 1: partitions cover the pool, runs are recorded, reloaded and resumed exactly."""

from __future__ import annotations

import pytest
import torch
from fabricated import ssdml_data
from torch import nn

from dmlnb.profiles import make_config
from dmlnb.records import RunRecord
from dmlnb.ssdml.algorithm import (
    PartitionSchedule,
    TrainingPool,
    UnitLoss,
    partition_indices,
    run_spec,
    train_ssdml,
    unlabelled_reached,
)
from dmlnb.ssdml.angular import AngularSSDML
from dmlnb.ssdml.supervised import LabelledTriplets


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 6))


CFG = make_config(
    None,
    dict(
        epochs=4,
        batch_size=20,
        m_per_class=10,
        lr=1e-2,
        eval_every=2,
        device="cpu",
        eval_metrics=("recall",),
        seed=3,
    ),
)
SCHED = PartitionSchedule(partition_size=20, epochs_per_partition=2)
SPEC = run_spec(SCHED, {"m": "ours"})


def test_partitions_sweep_the_unlabelled_pool():
    lab, unl, _ = ssdml_data()
    pool = TrainingPool(lab, unl)
    parts = [partition_indices(pool, PartitionSchedule(partition_size=17), 0, p) for p in range(3)]
    for p in parts:
        assert p[:9].tolist() == list(range(9))  # all labelled first
        assert len(p) == 9 + 17
    unl_seen = torch.cat([p[9:] for p in parts])
    assert len(set(unl_seen.tolist())) == 51  # 3 disjoint chunks = the whole pool
    assert torch.equal(pool.labels[:9], lab.labels) and bool((pool.labels[9:] == -1).all())


class _Augmented(torch.utils.data.Dataset):
    """A file-backed stand-in: items are ``base + 1`` (an augmentation) unless
    made for evaluation."""

    def __init__(self, base, shift=1.0):
        self.base, self.shift, self.labels = base, shift, base.labels

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return x + self.shift, y

    def for_evaluation(self):
        return _Augmented(self.base, 0.0)


def test_the_partitions_embed_the_pool_without_augmentation():
    """Training reads the pool as augmented; the graph and the mining read its evaluation view."""
    lab, unl, _ = ssdml_data()
    pool = TrainingPool(_Augmented(lab), _Augmented(unl))
    part = torch.tensor([0, 3, 12])
    assert torch.equal(pool.dataset[12][0], unl[3][0] + 1)
    assert torch.equal(pool.for_mining(part)[2][0], unl[3][0]) and torch.equal(
        pool.for_mining(part)[1][0], lab[3][0]
    )
    in_memory = TrainingPool(lab, unl)
    assert in_memory.mining is in_memory.dataset


def test_unlabelled_reached_replays_the_partition_draws():
    """A pool of 50 in partitions of 20: two chunks per sweep, each sweep reshuffled, so four
    partitions reach fewer than 50 (the 10 left over by each sweep's two chunks)."""
    lab, unl, _ = ssdml_data()
    pool = TrainingPool(lab, unl.subset(torch.arange(50)))
    sched = PartitionSchedule(partition_size=20)
    parts = [partition_indices(pool, sched, 5, p)[9:] - 9 for p in range(4)]
    reached = unlabelled_reached(50, sched, 5, range(4))
    assert torch.equal(reached, torch.unique(torch.cat(parts)))  # the indices the runs draw
    assert len(torch.unique(torch.cat(parts[:2]))) == 40  # one sweep: two disjoint chunks
    assert 40 <= len(reached) < 50
    assert len(unlabelled_reached(51, PartitionSchedule(partition_size=17), 0, range(3))) == 51


def test_record_reload_and_exact_resume(tmp_path):
    lab, unl, test = ssdml_data()
    full = net()
    rec = train_ssdml(
        full,
        AngularSSDML(6, 4, k=4),
        lab,
        unl,
        test,
        CFG,
        SCHED,
        spec=SPEC,
        run_dir=tmp_path / "a",
        progress=False,
    )
    saved = RunRecord.load(tmp_path / "a" / "record.json")
    assert saved.data["status"] == "finished" and saved.best is not None
    assert saved.config["seed"] == 3 and "method" not in saved.config  # the TrainConfig only
    assert saved.data["spec"] == {"schedule": SCHED.to_dict(), "method": {"m": "ours"}}
    hist = saved.history_frame()
    assert list(hist.index) == [0, 1, 2, 3, 4]
    assert hist["units"].dropna().tolist() == [(9 + 20) * 2] * 2  # N floor(k/2) per partition
    assert set(hist["partition"].dropna()) == {0, 1}

    class Stop(Exception):
        pass

    def stop_at_second(units, part):
        if stop_at_second.calls == 1:
            raise Stop
        stop_at_second.calls += 1
        return {}

    stop_at_second.calls = 0
    with pytest.raises(Stop):
        train_ssdml(
            net(),
            AngularSSDML(6, 4, k=4),
            lab,
            unl,
            test,
            CFG,
            SCHED,
            spec=SPEC,
            run_dir=tmp_path / "b",
            progress=False,
            diagnose=stop_at_second,
        )
    assert (tmp_path / "b" / "checkpoint.pt").exists()
    resumed = net()
    rec_b = train_ssdml(
        resumed,
        AngularSSDML(6, 4, k=4),
        lab,
        unl,
        test,
        CFG,
        SCHED,
        spec=SPEC,
        run_dir=tmp_path / "b",
        progress=False,
    )
    assert rec_b.data["resumed"] == 1
    for (k1, v1), (k2, v2) in zip(full.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(v1, v2), k1
    assert rec_b.best["metrics"]["R@1"] == rec.best["metrics"]["R@1"]


OBJECTIVES = {
    "angular": lambda: AngularSSDML(6, 4, k=4),
    "labelled triplets": lambda: LabelledTriplets(
        6, 4, "triplet"
    ),  # prepare draws from the global RNG
}


@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_a_run_interrupted_inside_a_partition_resumes_exactly(tmp_path, objective):
    """The checkpoint after epoch 1 (inside partition 0) keeps the partition's embedding and the
    RNG state its units were drawn with: the resumed process rebuilds the same units and ends
    where an uninterrupted run ends."""
    lab, unl, test = ssdml_data()
    supervised = objective == "labelled triplets"

    class Stop(Exception):
        pass

    def build():
        torch.manual_seed(1)  # the metric's initialisation (the orthogonal parametrisation draws)
        return OBJECTIVES[objective]()

    def stopping(after: int):
        obj = build()
        real, calls = obj.unit_loss, [0]

        def unit_loss(z, rows):
            calls[0] += 1
            if calls[0] == after:
                raise Stop
            return real(z, rows)

        obj.unit_loss = unit_loss
        return obj, calls

    full = net()
    counted, calls = stopping(after=-1)
    rec = train_ssdml(
        full,
        counted,
        lab,
        None if supervised else unl,
        test,
        CFG.replace(epochs=2),
        SCHED,
        spec=SPEC,
        progress=False,
    )
    steps = calls[0] // 3  # one metric pass and two epochs over the same units
    stopper, _ = stopping(after=2 * steps + 1)  # the first step of epoch 2
    with pytest.raises(Stop):
        train_ssdml(
            net(),
            stopper,
            lab,
            None if supervised else unl,
            test,
            CFG.replace(epochs=2),
            SCHED,
            spec=SPEC,
            run_dir=tmp_path,
            progress=False,
        )
    assert RunRecord.load(tmp_path / "record.json").data["history"][-1]["epoch"] == 1
    resumed = net()
    rec_b = train_ssdml(
        resumed,
        build(),
        lab,
        None if supervised else unl,
        test,
        CFG.replace(epochs=2),
        SCHED,
        spec=SPEC,
        run_dir=tmp_path,
        progress=False,
    )
    assert rec_b.data["resumed"] == 1
    for (k1, v1), v2 in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(v1, v2), k1
    assert [r["loss"] for r in rec_b.data["history"]] == [r["loss"] for r in rec.data["history"]]


def test_bad_objective_output_is_reported():
    lab, unl, test = ssdml_data()

    class Broken(AngularSSDML):
        def prepare(self, z, labels):
            return torch.zeros(0, 3, dtype=torch.long)

    with pytest.raises(ValueError, match="expected a non-empty"):
        train_ssdml(net(), Broken(6, 4, k=4), lab, unl, None, CFG, SCHED, progress=False)


def test_max_units_caps_the_units_per_partition():
    lab, unl, _ = ssdml_data()
    sched = PartitionSchedule(partition_size=20, epochs_per_partition=1, max_units=7)
    rec = train_ssdml(
        net(), AngularSSDML(6, 4, k=4), lab, unl, None, CFG.replace(epochs=2), sched, progress=False
    )
    hist = rec.history_frame()
    assert hist["units_used"].tolist() == [7, 7] and hist["units"].tolist() == [58, 58]


def test_unit_loss_gradients_are_deterministic_on_two_threads():
    """Gathering the units' embeddings scatters their gradients back into the batch's distinct
    images; with advanced indexing that scatter is a parallel accumulate whose order (and so its
    float sum) changed between identical runs on 2 threads."""

    class Weighted(nn.Module):
        def unit_loss(self, z, rows):
            return (z * weights).sum()

    g = torch.Generator().manual_seed(0)
    embeddings = torch.randn(3000, 64, generator=g)
    weights = torch.randn(6000, 3, 64, generator=g)
    loss = UnitLoss(Weighted())  # type: ignore[arg-type]
    loss.rows, loss.inverse = torch.arange(6000), torch.randint(0, 3000, (6000, 3), generator=g)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(10):
            e = embeddings.clone().requires_grad_()
            loss(e, torch.zeros(3000, dtype=torch.long)).backward()
            grads.append(e.grad)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(grads[0], x) for x in grads[1:])
