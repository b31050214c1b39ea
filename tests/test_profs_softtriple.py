"""SoftTriple's PROFS adaptation: the per-iteration (lagged) proximal term and cluster centres as
HNCM's class representatives."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from dmlnb.hooks import TrainState
from dmlnb.losses import SoftTripleLoss
from dmlnb.profs.proximal import LaggedProximalHook, ProximalHook
from dmlnb.profs.representatives import CenterRepresentatives, RepresentativeSampler


def fake_state(step: int, model: nn.Module, **fields) -> TrainState:
    return TrainState(
        model=model,
        loss_fn=nn.Identity(),
        optimizer=None,  # type: ignore[arg-type]
        device=torch.device("cpu"),
        step=step,
        **fields,
    )


def loss_grads(model: nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    model(x).pow(2).sum().backward()


# ---------------------------------------------------------------------------- lagged proximal term
def test_lagged_term_pulls_towards_the_previous_iterate():
    """grad += lam (theta_t - theta_{t-1}); 0 at the first step; brute force over 4 SGD steps."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    hook = LaggedProximalHook(model, lam=0.5, params="all")
    x = torch.randn(5, 3)
    history = []  # theta at the start of every step, float64
    for step in range(4):
        history.append([p.detach().double().clone() for p in model.parameters()])
        hook.on_step_start(fake_state(step, model))
        loss_grads(model, x)
        plain = [p.grad.double().clone() for p in model.parameters()]
        hook.after_backward(fake_state(step, model))
        for p, g, now, *before in zip(model.parameters(), plain, history[-1], *history[-2:-1]):
            expected = g + (0.5 * (now - before[0]) if before else 0.0)
            assert torch.allclose(p.grad.double(), expected, atol=1e-6)
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(0.1 * p.grad)


def test_literal_m1_proximal_term_is_zero_but_lagged_is_not():
    """Why the lag: ProximalHook with period 1 adds nothing (anchor = the step's start point)."""
    torch.manual_seed(1)
    model = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    literal, lagged = (
        ProximalHook(model, 1.0, period=1, params="all"),
        LaggedProximalHook(model, 1.0, params="all"),
    )
    for step in range(2):
        for hook in (literal, lagged):
            hook.on_step_start(fake_state(step, model))
        loss_grads(model, x)
        base = [p.grad.clone() for p in model.parameters()]
        literal.after_backward(fake_state(step, model))
        assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), base))
        lagged.after_backward(fake_state(step, model))
        changed = any(not torch.equal(p.grad, g) for p, g in zip(model.parameters(), base))
        assert changed == (step > 0)
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(0.1 * p.grad)


def test_lagged_state_round_trip_and_zero_lambda():
    torch.manual_seed(2)
    model = nn.Linear(3, 2)
    hook = LaggedProximalHook(model, 0.3, params="all")
    hook.on_step_start(fake_state(0, model))  # remembers theta_0
    with torch.no_grad():
        model.weight.add_(1.0)  # theta_1 = theta_0 + 1 on the weight
    twin = copy.deepcopy(model)
    resumed = LaggedProximalHook(twin, 0.3, params="all")
    resumed.load_state_dict(hook.state_dict())
    x = torch.randn(4, 3)
    for h, mdl in ((hook, model), (resumed, twin)):
        h.on_step_start(fake_state(1, mdl))
        loss_grads(mdl, x)
        plain = mdl.weight.grad.clone()
        plain_bias = mdl.bias.grad.clone()
        h.after_backward(fake_state(1, mdl))
        assert torch.allclose(mdl.weight.grad - plain, torch.full_like(plain, 0.3))  # 0.3 * (+1)
        assert torch.allclose(mdl.bias.grad, plain_bias)  # the bias did not move
    off = LaggedProximalHook(model, 0.0, params="all")
    off.on_step_start(fake_state(0, model))
    loss_grads(model, x)
    before = [p.grad.clone() for p in model.parameters()]
    off.after_backward(fake_state(0, model))
    assert all(torch.equal(p.grad, q) for p, q in zip(model.parameters(), before))
    with pytest.raises(ValueError, match="lam"):
        LaggedProximalHook(model, -1.0, params="all")


# ----------------------------------------------------------------------- centres as representatives
def test_center_representatives_are_normalised_mean_directions():
    torch.manual_seed(3)
    loss = SoftTripleLoss(num_classes=7, embedding_dim=5, centers_per_class=3)
    y = torch.tensor([1, 1, 4, 4, 6, 6, 2, 2] * 2)  # classes {1, 2, 4, 6} of 7
    sampler = RepresentativeSampler(y, batch_size=4, m=2, period=1, hncm=True)
    hook = CenterRepresentatives(sampler, loss)
    hook.on_train_start(fake_state(0, nn.Linear(1, 1)))
    w = loss.weight.detach().double()
    for slot, c in enumerate(sampler.classes.tolist()):  # float64 loops over centres
        acc = torch.zeros(5, dtype=torch.float64)
        for k in range(3):
            acc += w[c, k] / math.sqrt(float((w[c, k] ** 2).sum()))
        ref = acc / math.sqrt(float((acc**2).sum()))
        assert torch.allclose(sampler.memory[slot].double(), ref, atol=1e-6)
    assert bool(sampler.known.all())


def test_hncm_with_centres_picks_classes_of_the_first_picks_cluster():
    """Two well separated groups of classes in centre space: every batch of 3 classes stays in
    the group of its first (uniform) class, as brute-force greedy nearest-class mining says."""
    L, D = 8, 4
    loss = SoftTripleLoss(num_classes=L, embedding_dim=D, centers_per_class=2)
    g = torch.Generator().manual_seed(4)
    axis = torch.zeros(L, D)
    axis[:4, 0], axis[4:, 1] = 1.0, 1.0  # group A along e0, group B along e1
    with torch.no_grad():
        loss.weight.copy_(axis[:, None, :] + 0.05 * torch.randn(L, 2, D, generator=g))
    y = torch.repeat_interleave(torch.arange(L), 4)
    sampler = RepresentativeSampler(
        y, batch_size=6, m=2, period=1, hncm=True, seed=0, num_batches=20
    )
    hook = CenterRepresentatives(sampler, loss)
    hook.on_train_start(fake_state(0, nn.Linear(1, 1)))
    reps = hook.class_vectors().double()
    for batch in sampler:
        classes = y[torch.tensor(batch)].view(3, 2)[:, 0].tolist()
        picked = [classes[0]]
        while len(picked) < 3:  # greedy: nearest unpicked class to any picked one, float64
            best = min(
                (c for c in range(L) if c not in picked),
                key=lambda c: min(torch.dist(reps[c], reps[s]).item() for s in picked),
            )
            picked.append(best)
        assert classes == picked
        assert len({c // 4 for c in classes}) == 1


def test_center_representatives_reject_mismatches():
    loss = SoftTripleLoss(num_classes=3, embedding_dim=4, centers_per_class=2)
    y = torch.repeat_interleave(torch.arange(5), 2)
    with pytest.raises(ValueError, match="hncm=True"):
        CenterRepresentatives(RepresentativeSampler(y, 4, 2, 1, hncm=False), loss)
    with pytest.raises(ValueError, match="centres for classes"):
        CenterRepresentatives(RepresentativeSampler(y, 4, 2, 1, hncm=True), loss)
    with pytest.raises(ValueError, match="centers"):
        CenterRepresentatives(RepresentativeSampler(y, 4, 2, 1, hncm=True), nn.Linear(2, 2))
    sampler = RepresentativeSampler(y, 4, 2, 1, hncm=True)
    with pytest.raises(ValueError, match="L = 5"):
        sampler.set_memory(torch.zeros(3, 4))
