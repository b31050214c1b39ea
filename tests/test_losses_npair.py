"""NPairLoss vs float64 loops over Sohn's N-pair-mc loss (pairs="first") and Song et al.'s all-pairs
Eq. 3 (pairs="all"), PML's NPairsLoss, the Easy Positive family, paired batches, and gradcheck."""

from __future__ import annotations

import pytest
import torch
from batches import clustered_batch, random_batch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning.distances import DotProductSimilarity

from dmlnb.losses.easy_positive import EasyPositiveLoss
from dmlnb.losses.npair import NPairLoss, first_pair_per_class
from dmlnb.samplers import MPerClassSampler


def make_batch(seed: int, batch: int = 14, dim: int = 5, classes: int = 6):
    return random_batch(seed, batch, dim, classes)


def brute_pairs(y):
    first_two = {}
    for i, label in enumerate(y.tolist()):
        first_two.setdefault(label, [])
        if len(first_two[label]) < 2:
            first_two[label].append(i)
    return [tuple(v) for _, v in sorted(first_two.items()) if len(v) == 2]


def brute_npair(x, y, l2_reg, normalize):
    """Sohn 2016: mean_i log(1 + sum_{j != i} exp(f_i.f_j+ - f_i.f_i+)) + l2 * mean ||f||^2."""
    f = x / x.norm(dim=1, keepdim=True) if normalize else x
    pairs = brute_pairs(y)
    terms = []
    for i, (a, p) in enumerate(pairs):
        s = sum(torch.exp(f[a] @ f[q] - f[a] @ f[p]) for k, (_, q) in enumerate(pairs) if k != i)
        terms.append(torch.log(1 + s))
    penalty = sum((x[b] ** 2).sum() for b in range(len(y))) / len(y)
    return sum(terms) / len(terms) + l2_reg * penalty


def brute_npair_all(x, y, l2_reg, normalize):
    """Song et al. 2017, Eq. 3 (penalty squared, as Sohn's): the mean over every ordered positive
    pair (i, j) of -log(exp S_ij / (exp S_ij + sum_{k: y_k != y_i} exp S_ik)), S = f.f, plus
    l2 * mean ||f||^2; a batch without a positive pair gives 0."""
    f = x / x.norm(dim=1, keepdim=True) if normalize else x
    labels = y.tolist()
    b = len(labels)
    terms = []
    for i in range(b):
        for j in range(b):
            if i == j or labels[i] != labels[j]:
                continue
            num = torch.exp(f[i] @ f[j])
            den = num + sum(torch.exp(f[i] @ f[k]) for k in range(b) if labels[k] != labels[i])
            terms.append(-torch.log(num / den))
    if not terms:
        return x.sum() * 0.0
    penalty = sum((x[k] ** 2).sum() for k in range(b)) / b
    return sum(terms) / len(terms) + l2_reg * penalty


def value_and_grad(loss_fn, x, y):
    value = loss_fn(x, y)
    (grad,) = torch.autograd.grad(value, x)
    return value.detach(), grad


def test_first_pair_per_class_matches_loop():
    for seed in range(5):
        _, y = make_batch(seed=seed, batch=20, classes=9)
        anchors, positives = first_pair_per_class(y)
        assert list(zip(anchors.tolist(), positives.tolist())) == brute_pairs(y)


@pytest.mark.parametrize("l2_reg,normalize", [(0.02, False), (0.0, True), (0.5, True)])
def test_matches_brute_force(l2_reg, normalize):
    x, y = make_batch(seed=30)
    value, grad = value_and_grad(NPairLoss(l2_reg=l2_reg, normalize=normalize), x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_npair(e, lab, l2_reg, normalize), x, y
    )
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_matches_pml_defaults():
    x, y = make_batch(seed=31, batch=30, classes=10)
    pml = pml_losses.NPairsLoss(distance=DotProductSimilarity(normalize_embeddings=True))
    value, grad = value_and_grad(NPairLoss(l2_reg=0.0, normalize=True), x, y)
    ref_value, ref_grad = value_and_grad(pml, x, y)
    torch.testing.assert_close(value, ref_value)
    torch.testing.assert_close(grad, ref_grad)


def test_gradcheck():
    x, y = make_batch(seed=32, batch=10)
    loss = NPairLoss(l2_reg=0.1)
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x,))


@pytest.mark.parametrize("l2_reg,normalize", [(0.02, False), (0.0, True), (0.5, True)])
@pytest.mark.parametrize("seed,batch,classes", [(40, 14, 6), (41, 24, 4), (42, 9, 9)])
def test_all_pairs_matches_brute_force(l2_reg, normalize, seed, batch, classes):
    """Random labels: classes of 1 to many images, some singletons (in no pair, negatives
    only); seed 42 may have no pair at all."""
    x, y = random_batch(seed, batch, 5, classes)
    loss_fn = NPairLoss(l2_reg=l2_reg, normalize=normalize, pairs="all")
    value, grad = value_and_grad(loss_fn, x, y)
    ref_value, ref_grad = value_and_grad(
        lambda e, lab: brute_npair_all(e, lab, l2_reg, normalize), x, y
    )
    torch.testing.assert_close(value, ref_value, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-13)


def test_all_pairs_uses_every_image_where_first_leaves_half_of_them_to_the_penalty():
    """Four images per class (the facility-location chapter's batches): "first" takes the first
    two of each class, so the last two get gradient from the penalty only; "all" puts every image
    in the loss. On paired batches (two per class) "first" is Sohn's loss and uses every image."""
    x, y = clustered_batch(43, n_classes=5, per_class=4, dim=6, noise=0.7)
    x.requires_grad_(True)
    for pairs, in_loss in (("first", {0, 1}), ("all", {0, 1, 2, 3})):
        (grad,) = torch.autograd.grad(NPairLoss(l2_reg=0.0, pairs=pairs)(x, y), x)
        position = torch.arange(20) % 4  # the position of each image in its class's group
        touched = {int(p) for p in position[grad.abs().sum(dim=1) > 0]}
        assert touched == in_loss, pairs
    # paired batches from the sampler: every image is an anchor or a positive of "first"
    labels = torch.arange(12).repeat_interleave(3)
    batch = torch.as_tensor(next(iter(MPerClassSampler(labels, m=2, batch_size=8, seed=0))))
    yb = labels[batch]
    assert torch.bincount(yb).max() == 2 and yb.unique().numel() == 4  # N = 4 pairs
    anchors, positives = first_pair_per_class(yb)
    assert sorted(anchors.tolist() + positives.tolist()) == list(range(8))
    xb = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(NPairLoss(l2_reg=0.0)(xb, yb), xb)
    assert bool((grad.abs().sum(dim=1) > 0).all())
    # ... and there the two forms still differ (N terms with N - 1 negatives vs 2N with 2N - 2)
    assert not torch.isclose(NPairLoss(pairs="all")(xb, yb), NPairLoss()(xb, yb))


def test_all_pairs_is_the_batch_all_nca_loss_at_temperature_one():
    """Eq. 3 with normalised embeddings = the Easy Positive family's Batch All (every positive
    pair, all negatives) at temperature 1 without its duplicate and drop rules."""
    x, y = clustered_batch(44, n_classes=6, per_class=4, dim=8, noise=0.9)
    ba = EasyPositiveLoss(
        "all", "all", temperature=1.0, duplicate_threshold=None, drop_nonpositive=False
    )
    torch.testing.assert_close(
        NPairLoss(l2_reg=0.0, normalize=True, pairs="all")(x, y), ba(x, y), rtol=1e-12, atol=1e-14
    )


def test_default_is_sohns_first_pair_per_class():
    loss = NPairLoss()
    assert loss.pairs == "first" and loss.penalty == "squared"
    assert repr(loss) == "NPairLoss(l2_reg=0.02, normalize=False, pairs='first', penalty='squared')"


@pytest.mark.parametrize("pairs", ["first", "all"])
def test_eq_3_penalty_is_lambda_over_m_times_the_sum_of_the_norms(pairs):
    """Song et al.'s Eq. 3: lambda / m * sum_i ||f(X_i)||_2 (unsquared), Sohn's: the
    mean squared norm."""
    x, y = clustered_batch(3, n_classes=4, per_class=4, dim=6, noise=0.7)
    x = 3.0 * x  # norms far from 1, where the two penalties differ
    bare = NPairLoss(l2_reg=0.0, pairs=pairs)(x, y)
    norm = NPairLoss(l2_reg=0.1, pairs=pairs, penalty="norm")(x, y)
    squared = NPairLoss(l2_reg=0.1, pairs=pairs)(x, y)
    lengths = torch.sqrt((x**2).sum(dim=1))  # (B,)
    torch.testing.assert_close(norm - bare, 0.1 * lengths.sum() / len(x))
    torch.testing.assert_close(squared - bare, 0.1 * (lengths**2).sum() / len(x))
    x0 = torch.zeros(
        16, 6, dtype=torch.float64, requires_grad=True
    )  # the norm's subgradient at 0 is 0
    (grad,) = torch.autograd.grad(NPairLoss(pairs=pairs, penalty="norm")(x0, y), x0)
    assert torch.isfinite(grad).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="l2_reg"):
        NPairLoss(l2_reg=-1.0)
    with pytest.raises(ValueError, match="pairs must be one of"):
        NPairLoss(pairs="every")
    with pytest.raises(ValueError, match="penalty must be one of"):
        NPairLoss(penalty="l1")
