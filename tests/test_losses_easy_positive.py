"""Easy Positive family vs a float64 per-anchor loop from the paper, and vs PML."""

from __future__ import annotations

import math

import pytest
import torch
from pytorch_metric_learning.losses import NTXentLoss
from pytorch_metric_learning.miners import BatchEasyHardMiner

from dmlnb.losses.easy_positive import VARIANTS, EasyPositiveLoss, easy_positive_loss

NAMES = list(VARIANTS)


def reference_loss(
    x: torch.Tensor,
    y: torch.Tensor,
    positive: str,
    negative: str,
    temperature: float = 0.1,
    duplicate_threshold: float | None = 0.9999,
    drop_nonpositive: bool = False,
    semihard: str = "strict",
) -> torch.Tensor:
    """Straight from Xuan et al. Sec. 3-4 (+ the authors' duplicate / drop rules), one anchor at
    a time, selections made with Python comparisons. Differentiable in ``x``. Semi-hard
    candidates: ``S_an < S_ap`` (``"strict"``, Sec. 3.1's ``d_an > d_ap``) or ``S_an <= S_ap``
    (``"inclusive"``, the authors' code)."""
    xn = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
    S = xn @ xn.T
    B = len(y)
    terms = []
    for a in range(B):
        P = [
            p
            for p in range(B)
            if p != a
            and y[p] == y[a]
            and (duplicate_threshold is None or S[a, p].item() <= duplicate_threshold)
        ]
        N = [n for n in range(B) if y[n] != y[a]]
        if not P or not N:
            continue
        if positive == "easy":
            P = [max(P, key=lambda p: S[a, p].item())]
        elif positive == "hard":
            P = [min(P, key=lambda p: S[a, p].item())]
        for p in P:
            if negative == "all":
                negs = N
            elif negative == "hard":
                negs = [max(N, key=lambda n: S[a, n].item())]
            else:  # semi-hard: only negatives less similar than the positive (or as similar)
                if semihard == "strict":
                    cand = [n for n in N if S[a, n].item() < S[a, p].item()]
                else:
                    cand = [n for n in N if S[a, n].item() <= S[a, p].item()]
                if not cand:
                    continue
                negs = [max(cand, key=lambda n: S[a, n].item())]
            if drop_nonpositive and (
                S[a, p].item() <= 0 or (negative != "all" and S[a, negs[0]].item() <= 0)
            ):
                continue
            num = torch.exp(S[a, p] / temperature)
            den = num + sum(torch.exp(S[a, n] / temperature) for n in negs)
            terms.append(-torch.log(num / den))
    if not terms:
        return x.sum() * 0.0
    return torch.stack(terms).mean()


def make_batch(seed: int, n_classes: int = 6, per_class: int = 4, dim: int = 8):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(n_classes, dim, generator=g, dtype=torch.float64)
    y = torch.arange(n_classes).repeat_interleave(per_class)
    x = centres[y] + 0.9 * torch.randn(len(y), dim, generator=g, dtype=torch.float64)
    perm = torch.randperm(len(y), generator=g)
    return x[perm], y[perm]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variants_match_bruteforce_value_and_gradient(name: str, seed: int) -> None:
    positive, negative, drop = VARIANTS[name]
    x, y = make_batch(seed)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = easy_positive_loss(name)(x1, y)
    ref = reference_loss(x2, y, positive, negative, drop_nonpositive=drop)
    assert ours.item() > 0
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("positive", ["easy", "hard", "all"])
@pytest.mark.parametrize("negative", ["hard", "semihard", "all"])
@pytest.mark.parametrize("drop", [True, False])
def test_every_combination_matches_bruteforce(positive: str, negative: str, drop: bool) -> None:
    # no class structure in 3-D, shifted off the origin: similarities of both signs, so every
    # combination drops some terms and some semi-hard sets are empty
    g = torch.Generator().manual_seed(3)
    x = torch.randn(20, 3, generator=g, dtype=torch.float64)
    x[:, 0] += 0.8
    y = torch.arange(5).repeat_interleave(4)
    loss = EasyPositiveLoss(positive, negative, temperature=0.5, drop_nonpositive=drop)
    ref = reference_loss(x, y, positive, negative, temperature=0.5, drop_nonpositive=drop)
    assert ref.item() > 0
    torch.testing.assert_close(loss(x, y), ref, rtol=1e-10, atol=1e-12)


def tied_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 embeddings with exact ties ``S_an = S_ap`` and no other tie: 4 classes x 4 random
    points; anchor 0 has coordinate 1 exactly 0 and a close positive 1, and negative 4 is point 1
    with coordinate 1 negated, so ``S_04 = S_01`` bit for bit (the anchor's zero makes the
    products equal, the squares make the norms equal); anchor 8 and its close positive 9 with
    negative 12 the same way in coordinate 3."""
    g = torch.Generator().manual_seed(23)
    y = torch.arange(4).repeat_interleave(4)
    x = torch.randn(4, 6, generator=g, dtype=torch.float64)[y] + 0.8 * torch.randn(
        16, 6, generator=g, dtype=torch.float64
    )
    for anchor, positive, negative, k in ((0, 1, 4, 1), (8, 9, 12, 3)):
        x[anchor, k] = 0.0
        x[positive] = x[anchor] + 0.2 * torch.randn(6, generator=g, dtype=torch.float64)
        x[negative] = x[positive]
        x[negative, k] = -x[positive, k]
    return x, y


def _ties(x: torch.Tensor) -> set[tuple[int, int, int]]:
    """``(a, i, j)`` with ``i < j``, both not ``a``, and ``S_ai = S_aj`` exactly."""
    xn = torch.nn.functional.normalize(x, dim=1)
    s = (xn @ xn.T).tolist()
    b = len(s)
    return {
        (a, i, j)
        for a in range(b)
        for i in range(b)
        for j in range(i + 1, b)
        if a not in (i, j) and s[a][i] == s[a][j]
    }


@pytest.mark.parametrize("rule", ["strict", "inclusive"])
@pytest.mark.parametrize("positive", ["easy", "hard", "all"])
@pytest.mark.parametrize("drop", [True, False])
def test_semihard_rules_match_the_loop_on_exact_ties(rule: str, positive: str, drop: bool) -> None:
    x, y = tied_batch()
    assert _ties(x) == {(0, 1, 4), (8, 9, 12)}  # the planted ties, exact, and no other
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    ours = EasyPositiveLoss(positive, "semihard", drop_nonpositive=drop, semihard=rule)(x1, y)
    ref = reference_loss(x2, y, positive, "semihard", drop_nonpositive=drop, semihard=rule)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-8, atol=1e-10)


def test_strict_semihard_is_the_default_and_differs_from_inclusive_on_ties_only() -> None:
    x, y = tied_batch()
    xn = torch.nn.functional.normalize(x, dim=1)
    s = xn @ xn.T
    assert easy_positive_loss("EPSHN").semihard == "strict"
    # the ties matter: 1 and 9 are their anchors' easy positives
    for anchor, positive in ((0, 1), (8, 9)):
        same = (y == y[anchor]) & (torch.arange(16) != anchor)
        assert s[anchor].masked_fill(~same, -2.0).argmax().item() == positive
    strict = easy_positive_loss("EPSHN", drop_nonpositive=False)(x, y)
    inclusive = easy_positive_loss("EPSHN", drop_nonpositive=False, semihard="inclusive")(x, y)
    assert not torch.isclose(strict, inclusive)
    # the tie alone (anchor 0, its positive 1 and the tied negative 4): inclusive gives anchor
    # 0's term ln 2; strict has no semi-hard negative for anchor 0, and the other two anchors'
    # terms are the same under both rules
    keep = torch.tensor([0, 1, 4])
    only_i = EasyPositiveLoss("easy", "semihard", drop_nonpositive=False, semihard="inclusive")
    only_s = EasyPositiveLoss("easy", "semihard", drop_nonpositive=False)
    ref_i = reference_loss(x[keep], y[keep], "easy", "semihard", semihard="inclusive")
    ref_s = reference_loss(x[keep], y[keep], "easy", "semihard", semihard="strict")
    torch.testing.assert_close(only_i(x[keep], y[keep]), ref_i, rtol=1e-12, atol=0)
    torch.testing.assert_close(only_s(x[keep], y[keep]), ref_s, rtol=1e-12, atol=0)
    assert not torch.isclose(ref_i, ref_s)
    # away from ties the two rules agree bit for bit
    xr, yr = make_batch(21)
    assert not _ties(xr)
    assert torch.equal(
        easy_positive_loss("EPSHN")(xr, yr),
        easy_positive_loss("EPSHN", semihard="inclusive")(xr, yr),
    )
    assert "semihard='strict'" in repr(easy_positive_loss("EPSHN"))
    assert "semihard" not in repr(easy_positive_loss("EPHN"))


def test_float32_close_to_float64() -> None:
    x, y = make_batch(4)
    for name in NAMES:
        loss = easy_positive_loss(name)
        torch.testing.assert_close(loss(x.float(), y).double(), loss(x, y), rtol=1e-4, atol=1e-5)


def test_gradcheck_ephn() -> None:
    x, y = make_batch(5, n_classes=3, per_class=3, dim=4)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: easy_positive_loss("EPSHN")(z, y), (x,))


def test_drop_nonpositive_changes_what_it_should() -> None:
    # random 3-D embeddings: similarities of both signs, so dropping must change EPHN
    g = torch.Generator().manual_seed(6)
    x = torch.randn(16, 3, generator=g, dtype=torch.float64)
    y = torch.arange(8).repeat_interleave(2)
    kept = easy_positive_loss("EPHN", drop_nonpositive=False)(x, y)
    dropped = easy_positive_loss("EPHN")(x, y)
    assert not torch.isclose(kept, dropped)
    torch.testing.assert_close(
        dropped, reference_loss(x, y, "easy", "hard", drop_nonpositive=True), rtol=1e-10, atol=0
    )


def test_group_size_two_equivalences() -> None:
    """Sec. 6.1: with n = 2, EP = HP = BA (= N-pair) and EPHN = HPHN."""
    x, y = make_batch(7, n_classes=16, per_class=2)
    ep, hp, ba = (easy_positive_loss(n)(x, y) for n in ("EP", "HP", "BA"))
    torch.testing.assert_close(ep, hp)
    torch.testing.assert_close(ep, ba)
    ephn = easy_positive_loss("EPHN", drop_nonpositive=False)(x, y)
    torch.testing.assert_close(ephn, easy_positive_loss("HPHN")(x, y))


# --- PML: BatchEasyHardMiner + NTXentLoss(temperature=0.1) -----------------------------------
PML_SETTINGS = {
    "EP": ("easy", "all"),
    "EPHN": ("easy", "hard"),
    "EPSHN": ("easy", "semihard"),
    "HP": ("hard", "all"),
    "HPHN": ("hard", "hard"),
    "BA": ("all", "all"),
}


@pytest.mark.parametrize("name", NAMES)
def test_matches_pml_without_drops_or_duplicates(name: str) -> None:
    """All similarities > 0 (positive orthant) and no duplicates: nothing is dropped, and the
    authors' EP form equals PML's miner + NT-Xent (mean over the mined positive pairs)."""
    g = torch.Generator().manual_seed(11)
    y = torch.arange(8).repeat_interleave(4)
    x = (torch.randn(8, 16, generator=g)[y] + torch.randn(32, 16, generator=g)).abs()
    x = x.double().requires_grad_(True)
    xp = x.detach().clone().requires_grad_(True)
    pos, neg = PML_SETTINGS[name]
    miner = BatchEasyHardMiner(pos_strategy=pos, neg_strategy=neg)
    pml = NTXentLoss(temperature=0.1)(xp, y, miner(xp, y))
    ours = easy_positive_loss(name)(x, y)
    torch.testing.assert_close(ours, pml, rtol=1e-9, atol=1e-12)
    ours.backward()
    pml.backward()
    torch.testing.assert_close(x.grad, xp.grad, rtol=1e-7, atol=1e-10)


def test_duplicates_differ_from_pml_as_documented() -> None:
    """PML's easy positive is the duplicate itself; ours skips it (authors' 0.9999 rule)."""
    x, y = make_batch(12)
    x = x.abs()
    x = torch.cat([x, x[:1] * 2.0])  # a scaled copy: cosine similarity 1 with sample 0
    y = torch.cat([y, y[:1]])
    ours = easy_positive_loss("EPHN")(x, y)
    ref = reference_loss(x, y, "easy", "hard", drop_nonpositive=True)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=0)
    pml = NTXentLoss(temperature=0.1)(
        x, y, BatchEasyHardMiner(pos_strategy="easy", neg_strategy="hard")(x, y)
    )
    assert not torch.isclose(ours, pml)
    no_dup = easy_positive_loss("EPHN", duplicate_threshold=None)(x, y)
    torch.testing.assert_close(no_dup, pml, rtol=1e-9, atol=1e-12)


# --- edge cases ---------------------------------------------------------------------------------
def _assert_zero_attached(loss_fn, x: torch.Tensor, y: torch.Tensor) -> None:
    x = x.clone().requires_grad_(True)
    loss = loss_fn(x, y)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.parametrize("name", NAMES)
def test_no_positive_pair_gives_attached_zero(name: str) -> None:
    _assert_zero_attached(easy_positive_loss(name), torch.randn(6, 4), torch.arange(6))


@pytest.mark.parametrize("name", NAMES)
def test_single_class_gives_attached_zero(name: str) -> None:
    _assert_zero_attached(easy_positive_loss(name), torch.randn(6, 4), torch.zeros(6).long())


@pytest.mark.parametrize("name", NAMES)
def test_only_duplicate_positives_give_zero(name: str) -> None:
    x = torch.randn(3, 5).repeat_interleave(2, dim=0)  # each sample's only positive is a copy
    _assert_zero_attached(easy_positive_loss(name), x, torch.arange(3).repeat_interleave(2))


@pytest.mark.parametrize("name", NAMES)
def test_zero_norm_embeddings_are_finite(name: str) -> None:
    x, y = make_batch(13)
    x[[0, 5]] = 0.0
    x.requires_grad_(True)
    loss = easy_positive_loss(name)(x, y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all()
    ref = reference_loss(x.detach(), y, *VARIANTS[name][:2], drop_nonpositive=VARIANTS[name][2])
    torch.testing.assert_close(loss.detach(), ref, rtol=1e-10, atol=1e-12)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="EPHN"):
        easy_positive_loss("EPX")
    with pytest.raises(ValueError, match="positive"):
        EasyPositiveLoss(positive="semihard")
    with pytest.raises(ValueError, match="negative"):
        EasyPositiveLoss(negative="easy")
    with pytest.raises(ValueError, match="temperature"):
        EasyPositiveLoss(temperature=0.0)
    with pytest.raises(ValueError, match="semihard must be one of"):
        EasyPositiveLoss(negative="semihard", semihard="loose")
    with pytest.raises(TypeError):
        easy_positive_loss("EP", negative="hard")  # a variant fixes its strategies


def test_temperature_scales_as_nca() -> None:
    """EPHN with one negative: loss = log(1 + exp((S_an - S_ap)/T)) per anchor (Sec. 4)."""
    x = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    # anchor0: p=1 (0.8), n=2 (0.6); anchor1: p=0 (0.8), n=2 (0.96);
    # anchor2: p=3 (0.8), n=1 (0.96); anchor3: p=2 (0.8), n=1 (0.6)
    gaps = [0.6 - 0.8, 0.96 - 0.8, 0.96 - 0.8, 0.6 - 0.8]
    for t in (0.1, 1.0):
        want = sum(math.log1p(math.exp(g / t)) for g in gaps) / 4
        got = EasyPositiveLoss("easy", "hard", temperature=t)(x, y).item()
        assert got == pytest.approx(want, rel=1e-12)
