"""PROFS pieces: M from the paper's formula, representative batches, HNCM, the proximal hook."""

from __future__ import annotations

import copy
import math
from collections import defaultdict

import pytest
import torch
from torch import nn

from dmlnb.hooks import TrainState
from dmlnb.models import EmbeddingNet
from dmlnb.profs.proximal import ProximalHook
from dmlnb.profs.representatives import RepresentativeSampler, projection_period


# ---------------------------------------------------------------------------- helpers
def class_labels(seed: int = 0) -> torch.Tensor:
    """16 classes of 3..9 images, a 2-image and a 1-image class, 6 unlabelled, shuffled."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(3, 10, (16,), generator=g)
    sizes[3], sizes[9] = 2, 1
    y = torch.cat([torch.repeat_interleave(torch.arange(16), sizes), torch.full((6,), -1)])
    return y[torch.randperm(len(y), generator=g)]


def epoch(sampler, e: int) -> list[list[int]]:
    sampler.set_epoch(e)
    return list(sampler)


def fake_state(step: int = 0, model: nn.Module | None = None, **fields) -> TrainState:
    """A TrainState with what the hooks read; no optimiser (building one imports torch._dynamo,
    seconds on a busy machine): the tests step the parameters by hand with :func:`sgd_step`."""
    return TrainState(
        model=model if model is not None else nn.Linear(2, 2),
        loss_fn=nn.Identity(),
        optimizer=None,  # type: ignore[arg-type]
        device=torch.device("cpu"),
        step=step,
        **fields,
    )


def sgd_step(model: nn.Module, lr: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(lr * p.grad)


# ---------------------------------------------------------------------------- projection_period
@pytest.mark.parametrize(
    "rho, B, I, L, expected",
    [
        (6, 128, 2, 11318, 1062),  # SOP: 6 * 2 * 11318 / 128 = 1061.06
        (6, 128, 2, 100, 10),  # CUB: 9.375
        (6, 128, 2, 98, 10),  # Cars196: 9.1875
        (6, 128, 2, 64, 6),  # every class in every batch: p = 1
        (0.1, 20, 2, 100, 1),  # p = 0.1 exactly: rho / p = 1, no float round-up to 2
        (0.3, 10, 1, 10, 1),  # p = 1, 0.3 -> 1
    ],
)
def test_projection_period_formula(rho, B, I, L, expected):
    assert projection_period(rho, B, I, L) == expected


def test_projection_period_rejects_impossible_batches():
    with pytest.raises(ValueError, match="num_classes"):
        projection_period(6, 128, 2, 50)
    with pytest.raises(ValueError, match="divide"):
        projection_period(6, 128, 3, 500)


def test_class_frequency_matches_the_papers_p_y():
    """p(y) = B / (I L) is the per-batch probability that the sampler (no HNCM) holds a class."""
    y = torch.repeat_interleave(torch.arange(20), 4)
    B, m = 16, 2  # 8 of 20 classes per batch: p = 0.4
    s = RepresentativeSampler(y, batch_size=B, m=m, period=5, seed=0, num_batches=600)
    counts = torch.zeros(20)
    for batch in s:
        counts[y[batch].unique()] += 1
    freq = counts / len(s)
    assert torch.allclose(freq, torch.full((20,), B / (m * 20)), atol=0.07)


# ---------------------------------------------------------------------------- batches
def test_batch_composition_and_current_representatives():
    y = class_labels()
    B, m, M = 12, 3, 4
    s = RepresentativeSampler(y, batch_size=B, m=m, period=M, seed=1)
    T = len(s)
    assert T == int((y >= 0).sum()) // B
    for e in range(2):
        for t, batch in enumerate(epoch(s, e)):
            assert len(batch) == B
            groups = torch.tensor(batch).view(B // m, m)  # (C, m)
            labels = y[groups]
            assert (labels >= 0).all() and (labels == labels[:, :1]).all()
            assert labels[:, 0].unique().numel() == B // m
            reps = s.representatives((e * T + t) // M)  # (L,) slot = class id here
            for group, c in zip(groups.tolist(), labels[:, 0].tolist()):
                assert group[0] == reps[c]  # the class's current representative comes first
                n_c = int((y == c).sum())
                if n_c >= m:  # the others are distinct non-representative images of the class
                    assert len(set(group)) == m
                elif n_c > 1:  # all other images, then repeats of them (never the rep)
                    members = set(torch.nonzero(y == c).squeeze(1).tolist())
                    assert set(group[1:]) == members - {group[0]}
                else:
                    assert group == [group[0]] * m


def test_representatives_held_exactly_M_steps_then_renewed():
    y = class_labels()
    B, m, M = 12, 3, 4
    s = RepresentativeSampler(y, batch_size=B, m=m, period=M, seed=2)
    T = len(s)
    assert T % M != 0  # cycles straddle the epoch boundary
    first_of = defaultdict(set)  # (class, cycle) -> representatives seen in batches
    for e in range(3):
        for t, batch in enumerate(epoch(s, e)):
            for group in torch.tensor(batch).view(-1, m).tolist():
                first_of[(int(y[group[0]]), (e * T + t) // M)].add(group[0])
    assert all(len(reps) == 1 for reps in first_of.values())
    # Renewal at every cycle: consecutive sets differ for every class of >= 2 images, and a class
    # with n images uses n distinct representatives in n consecutive cycles.
    cycles = torch.stack([s.representatives(k) for k in range(40)])  # (K, L)
    for c in range(16):
        n_c = int((y == c).sum())
        members = set(torch.nonzero(y == c).squeeze(1).tolist())
        assert set(cycles[:, c].tolist()) <= members
        if n_c > 1:
            assert (cycles[1:, c] != cycles[:-1, c]).all()
            for k in range(0, 40 - n_c, n_c):
                assert len(set(cycles[k : k + n_c, c].tolist())) == n_c


def test_seeded_and_epoch_deterministic():
    y = class_labels()
    a = RepresentativeSampler(y, batch_size=12, m=3, period=4, seed=7)
    for e in range(3):
        epoch(a, e)
    fresh = RepresentativeSampler(y, batch_size=12, m=3, period=4, seed=7)
    assert epoch(a, 3) == epoch(fresh, 3)
    assert epoch(a, 1) == epoch(fresh, 1)  # going back replays the representatives
    assert epoch(a, 1) != epoch(a, 2)
    other = RepresentativeSampler(y, batch_size=12, m=3, period=4, seed=8)
    assert epoch(other, 1) != epoch(a, 1)


def test_rejects_bad_configuration():
    y = class_labels()
    with pytest.raises(ValueError, match="m >= 2"):
        RepresentativeSampler(y, batch_size=12, m=1, period=3)
    with pytest.raises(ValueError, match="multiple of m"):
        RepresentativeSampler(y, batch_size=12, m=5, period=3)
    with pytest.raises(ValueError, match="distinct classes"):
        RepresentativeSampler(y, batch_size=40, m=2, period=3)


# ---------------------------------------------------------------------------- HNCM
def store(sampler: RepresentativeSampler, classes: list[int], table: torch.Tensor) -> None:
    """Feed on_step_end a batch whose representative rows carry ``table[class]``."""
    m = sampler.m
    labels = torch.tensor(classes).repeat_interleave(m)  # (B,)
    emb = table[labels] + 100.0 * (torch.arange(len(labels)) % m != 0)[:, None]  # non-reps far off
    state = fake_state(indices=torch.arange(len(labels)), labels=labels, embeddings=emb)
    sampler.on_step_end(state)


def greedy_nearest(first: int, table: torch.Tensor, known: set[int], count: int) -> list[int]:
    """The HNCM rule, brute force in float64: next = argmin over unpicked known c of
    min over picked known s of ||e_c - e_s||; returns the picks while a known class is left."""
    picked = [first]
    while len(picked) < count:
        best, best_d = None, math.inf
        for c in range(len(table)):
            if c in picked or c not in known:
                continue
            for s in picked:
                if s in known:
                    d = torch.dist(table[c].double(), table[s].double()).item()
                    if d < best_d:
                        best, best_d = c, d
        if best is None:
            break
        picked.append(best)
    return picked


def test_hncm_picks_the_nearest_representatives():
    L, m = 12, 2
    y = torch.repeat_interleave(torch.arange(L), 3)
    s = RepresentativeSampler(y, batch_size=12, m=m, period=5, hncm=True, seed=0, num_batches=30)
    table = torch.randn(L, 8, generator=torch.Generator().manual_seed(0))  # (L, D) by hand
    store(s, list(range(6)), table)
    store(s, list(range(6, 12)), table)
    firsts = set()
    for batch in s:
        chosen = y[batch][::m].tolist()
        firsts.add(chosen[0])
        assert chosen == greedy_nearest(chosen[0], table, set(range(L)), 6)
    assert len(firsts) > 3  # the first class is random


def test_hncm_with_partially_stored_representatives():
    L, m = 12, 2
    y = torch.repeat_interleave(torch.arange(L), 3)
    s = RepresentativeSampler(y, batch_size=12, m=m, period=5, hncm=True, seed=1, num_batches=60)
    table = torch.randn(L, 8, generator=torch.Generator().manual_seed(1))
    known = [0, 2, 4, 6, 8, 10]
    store(s, known, table)
    checked = 0
    for batch in s:
        chosen = y[batch][::m].tolist()
        assert len(set(chosen)) == 6
        if chosen[0] in known:  # the known classes come first, nearest-first; then the others
            assert chosen == greedy_nearest(chosen[0], table, set(known), 6)
            checked += 1
    assert checked > 0


def test_hncm_scan_picks_the_classes_nearest_to_the_first():
    """``hncm_mode="scan"``: the first class uniform, then the C - 1 classes whose stored
    representatives are nearest to its representative, nearest first (brute force in float64);
    every class left out is at least as far from it as every class taken."""
    L, m, C = 40, 2, 8
    y = torch.repeat_interleave(torch.arange(L), 3)
    s = RepresentativeSampler(
        y, batch_size=C * m, m=m, period=5, hncm=True, hncm_mode="scan", seed=0, num_batches=30
    )
    table = torch.randn(L, 8, generator=torch.Generator().manual_seed(0))
    for start in range(0, L, C):
        store(s, list(range(start, start + C)), table)
    firsts = set()
    for batch in s:
        chosen = y[batch][::m].tolist()
        first = chosen[0]
        firsts.add(first)
        dist = [torch.dist(table[c].double(), table[first].double()).item() for c in range(L)]
        expected = [first] + sorted((c for c in range(L) if c != first), key=lambda c: dist[c])[
            : C - 1
        ]
        assert chosen == expected
        assert max(dist[c] for c in chosen) <= min(dist[c] for c in range(L) if c not in chosen)
    assert len(firsts) > 10  # the first class is uniform


def test_hncm_scan_with_partially_stored_representatives():
    """Classes without a stored embedding come after the stored ones (uniformly); all of them are
    uniform when the first class has none."""
    L, m, C = 12, 2, 6
    y = torch.repeat_interleave(torch.arange(L), 3)
    s = RepresentativeSampler(
        y, batch_size=C * m, m=m, period=5, hncm=True, hncm_mode="scan", seed=1, num_batches=60
    )
    table = torch.randn(L, 8, generator=torch.Generator().manual_seed(1))
    known = [0, 2, 4, 6]
    store(s, known + [0, 2], table)
    seen_known = seen_unknown = 0
    for batch in s:
        chosen = y[batch][::m].tolist()
        assert len(set(chosen)) == C
        if chosen[0] in known:
            others = sorted(
                (c for c in known if c != chosen[0]),
                key=lambda c: torch.dist(table[c], table[chosen[0]]).item(),
            )
            assert chosen[1:4] == others and not set(chosen[4:]) & set(known)
            seen_known += 1
        else:
            seen_unknown += 1
    assert seen_known > 0 and seen_unknown > 0


def test_hncm_scan_is_seeded_and_differs_from_the_greedy_chain():
    L, m = 30, 2
    y = torch.repeat_interleave(torch.arange(L), 3)
    table = torch.randn(L, 4, generator=torch.Generator().manual_seed(2))

    def sampler(seed: int, mode: str) -> RepresentativeSampler:
        s = RepresentativeSampler(
            y, batch_size=16, m=m, period=5, hncm=True, hncm_mode=mode, seed=seed, num_batches=20
        )
        for start in range(0, L - 7, 8):
            store(s, list(range(start, start + 8)), table)
        store(s, list(range(L - 8, L)), table)
        return s

    a, b = sampler(4, "scan"), sampler(4, "scan")
    assert epoch(a, 3) == epoch(b, 3) and epoch(a, 0) == epoch(b, 0)
    assert epoch(sampler(5, "scan"), 3) != epoch(a, 3)
    assert epoch(sampler(4, "greedy"), 3) != epoch(a, 3)
    with pytest.raises(ValueError, match=r"unknown hncm_mode 'nearest'.*\['greedy', 'scan'\]"):
        RepresentativeSampler(y, batch_size=16, m=m, period=5, hncm=True, hncm_mode="nearest")
    with pytest.raises(ValueError, match="hncm_mode='scan'.*hncm=True"):
        RepresentativeSampler(y, batch_size=16, m=m, period=5, hncm_mode="scan")


def test_hncm_memory_round_trips_through_state_dict():
    L, m = 12, 2
    y = torch.repeat_interleave(torch.arange(L), 3)
    a = RepresentativeSampler(y, batch_size=12, m=m, period=5, hncm=True, seed=3)
    table = torch.randn(L, 4, generator=torch.Generator().manual_seed(3))
    store(a, list(range(6)), table)
    store(a, list(range(6, 12)), table)
    b = RepresentativeSampler(y, batch_size=12, m=m, period=5, hncm=True, seed=3)
    assert epoch(b, 2) != epoch(a, 2)  # without the memory the classes are uniform
    b.load_state_dict(a.state_dict())
    assert epoch(b, 2) == epoch(a, 2)


def test_on_step_end_rejects_a_reordered_batch():
    y = torch.repeat_interleave(torch.arange(12), 3)
    s = RepresentativeSampler(y, batch_size=12, m=2, period=5, hncm=True)
    batch = torch.tensor(next(iter(s)))
    shuffled = batch[torch.randperm(12, generator=torch.Generator().manual_seed(0))]
    with pytest.raises(RuntimeError, match="layout"):
        state = fake_state(indices=shuffled, labels=y[shuffled], embeddings=torch.zeros(12, 3))
        s.on_step_end(state)
    with pytest.raises(RuntimeError, match="expected 12"):
        state = fake_state(indices=batch[:6], labels=y[batch[:6]], embeddings=torch.zeros(6, 3))
        s.on_step_end(state)


# ---------------------------------------------------------------------------- ProximalHook
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(5, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.backbone(x)))


def batch_loss(model: nn.Module, step: int) -> torch.Tensor:
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(step))
    return model(x).pow(2).sum()


def test_after_backward_equals_the_explicit_penalty_gradient():
    torch.manual_seed(0)
    model, lam = Net(), 0.3
    hook = ProximalHook(model, lam=lam, period=10)
    hook.on_step_start(fake_state(0, model))
    theta_k = [p.detach().clone() for p in model.backbone.parameters()]
    with torch.no_grad():  # move theta away from theta_k
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    hook.on_step_start(fake_state(1, model))  # not a refresh step
    model.zero_grad()
    batch_loss(model, 1).backward()
    hook.after_backward(fake_state(1, model))
    got = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    penalty = sum(((p - a) ** 2).sum() for p, a in zip(model.backbone.parameters(), theta_k))
    (batch_loss(model, 1) + lam / 2 * penalty).backward()
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    assert any(not torch.equal(a, p) for a, p in zip(theta_k, model.backbone.parameters()))


def test_training_with_the_hook_equals_algorithm_1():
    """SGD with the hook vs SGD on loss + lam/2 ||theta - theta_k||^2 with theta_k <- theta at the
    start of every M-th step (Algorithm 1), written out here."""
    torch.manual_seed(1)
    lam, M = 0.5, 3
    with_hook = Net()
    explicit = copy.deepcopy(with_hook)
    hook = ProximalHook(with_hook, lam=lam, period=M, params="all")
    refreshed = []
    theta_k: list[torch.Tensor] = []
    for step in range(10):
        before = hook.anchor
        hook.on_step_start(fake_state(step, with_hook))
        if hook.anchor is not before:
            refreshed.append(step)
        with_hook.zero_grad()
        batch_loss(with_hook, step).backward()
        hook.after_backward(fake_state(step, with_hook))
        sgd_step(with_hook, 0.05)

        if step % M == 0:
            theta_k = [p.detach().clone() for p in explicit.parameters()]
        explicit.zero_grad()
        penalty = sum(((p - a) ** 2).sum() for p, a in zip(explicit.parameters(), theta_k))
        (batch_loss(explicit, step) + lam / 2 * penalty).backward()
        sgd_step(explicit, 0.05)
    assert refreshed == [0, 3, 6, 9]
    for a, b in zip(with_hook.parameters(), explicit.parameters()):
        torch.testing.assert_close(a, b)


def test_state_round_trip_and_missing_grad():
    torch.manual_seed(2)
    model, lam = Net(), 0.2
    a = ProximalHook(model, lam=lam, period=3)
    for step in range(5):  # anchor taken at step 3
        a.on_step_start(fake_state(step, model))
        model.zero_grad()
        batch_loss(model, step).backward()
        a.after_backward(fake_state(step, model))
        sgd_step(model, 0.1)
    clone = copy.deepcopy(model)
    b = ProximalHook(clone, lam=lam, period=3)
    b.load_state_dict(a.state_dict())
    for hook, net in ((a, model), (b, clone)):
        hook.on_step_start(fake_state(5, net))  # not a refresh step: keeps the loaded anchor
        net.zero_grad(set_to_none=True)  # no backward: grads are None
        hook.after_backward(fake_state(5, net))
    for p, q in zip(model.backbone.parameters(), clone.backbone.parameters()):
        assert p.grad is not None and torch.equal(p.grad, q.grad)
    # grad = lam * (theta - theta_k) with theta_k = theta at the start of step 3 (nonzero).
    assert any(p.grad.abs().max() > 0 for p in model.backbone.parameters())
    assert all(p.grad is None for p in model.head.parameters())


def test_lam_zero_is_a_no_op():
    model = Net()
    hook = ProximalHook(model, lam=0.0, period=2)
    hook.on_step_start(fake_state(0, model))
    batch_loss(model, 0).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    with torch.no_grad():
        model.backbone.weight.add_(1.0)
    hook.after_backward(fake_state(0, model))
    assert hook.anchor is None
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))


def test_parameter_selection():
    with pytest.raises(ValueError, match="model.trunk or model.backbone"):
        ProximalHook(nn.Linear(3, 3), lam=1e-3, period=2)
    embedding_net = EmbeddingNet(nn.Linear(5, 4), feature_dim=4, embedding_dim=3)
    trunk = ProximalHook(embedding_net, 1e-3, 2)
    assert trunk.params == list(embedding_net.trunk.parameters())
    net = Net()
    head = ProximalHook(net, 1e-3, 2, params=lambda m: m.head.parameters())
    assert head.params == list(net.head.parameters())
    assert len(ProximalHook(net, 1e-3, 2, params="all").params) == 4
    net.backbone.bias.requires_grad_(False)
    assert ProximalHook(net, 1e-3, 2).params == [net.backbone.weight]


def test_proximal_refresh_aligned_with_representative_renewal():
    y = class_labels()
    M = 4
    s = RepresentativeSampler(y, batch_size=12, m=3, period=M, seed=0)
    model = Net()
    hook = ProximalHook(model, lam=1e-3, period=M)
    T = len(s)
    reps_before, anchor_before = None, None
    for e in range(2):
        for t, batch in enumerate(epoch(s, e)):
            step = e * T + t
            hook.on_step_start(fake_state(step, model))
            reps = s.representatives(step // M)
            renewed = reps_before is None or not torch.equal(reps, reps_before)
            assert renewed == (hook.anchor is not anchor_before)
            reps_before, anchor_before = reps, hook.anchor
