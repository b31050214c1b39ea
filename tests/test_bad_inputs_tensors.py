"""Issue #14, tensor level: degenerate input gets an error naming the problem, the value and the
fix (never a crash in native code); huge finite embeddings behave like ordinary ones; exact
duplicate gallery rows are tied, in float64 as in float32."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from dmlnb import evaluation as ev
from dmlnb.checks import NonFiniteError
from dmlnb.losses import (
    AngularLoss,
    ContrastiveLoss,
    DiscriminativeLoss,
    DistanceWeightedMiner,
    EasyPositiveLoss,
    FacilityLocationLoss,
    LiftedStructureLoss,
    MarginLoss,
    MultiSimilarityLoss,
    MultiSimilarityMiner,
    NormalizedSoftmaxLoss,
    NPairLoss,
    ProxyNCALoss,
    SoftTripleLoss,
    TripletLoss,
)
from dmlnb.losses.discriminative import lemma31_bound, onehot_centroids, triplet_loss_all
from dmlnb.losses.facility_location import oracle_score
from dmlnb.pairs import cosine_similarity, euclidean_distance, l2_normalize, pair_masks
from dmlnb.samplers import ClassRatioSampler, MPerClassSampler

B, D, C = 8, 6, 4

# every loss, built for a batch of width D with labels in [0, C)
LOSSES: dict[str, Callable[[], torch.nn.Module]] = {
    "contrastive": lambda: ContrastiveLoss(),
    "triplet": lambda: TripletLoss(),
    "lifted": lambda: LiftedStructureLoss(),
    "npair": lambda: NPairLoss(l2_reg=0.0, normalize=True),  # no penalty on the raw norm
    "angular": lambda: AngularLoss(),
    "margin": lambda: MarginLoss(),
    "margin-per-class": lambda: MarginLoss(num_classes=C),
    "multi-similarity": lambda: MultiSimilarityLoss(),
    "easy-positive": lambda: EasyPositiveLoss(),
    "facility-location": lambda: FacilityLocationLoss(),
    "soft-triple": lambda: SoftTripleLoss(C, D, centers_per_class=2),
    "proxy-nca": lambda: ProxyNCALoss(C, D),
    "normalized-softmax": lambda: NormalizedSoftmaxLoss(C, D),
    "discriminative": lambda: DiscriminativeLoss(onehot_centroids(C, D)),
}
PER_CLASS = ("margin-per-class", "soft-triple", "proxy-nca", "normalized-softmax", "discriminative")
FIXED_WIDTH = ("soft-triple", "proxy-nca", "normalized-softmax", "discriminative")


def batch(dtype: torch.dtype = torch.float32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, D, generator=g, dtype=dtype), torch.arange(B) % C  # (B, D), (B,)


def with_nan() -> torch.Tensor:
    x, _ = batch()
    x[3, 2] = float("nan")
    return x


def call_loss(name: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return LOSSES[name]()(x, y)


X, Y = batch()
unlabelled = Y.clone()
unlabelled[[1, 5]] = -1

# (id, thunk, exception, regex the message must match)
LOSS_CASES = []
for name in LOSSES:
    LOSS_CASES += [
        (
            f"{name}-empty-batch",
            lambda n=name: call_loss(n, X[:0], Y[:0]),
            ValueError,
            r"embeddings is empty \(shape \(0, 6\), 0 rows\)",
        ),
        (
            f"{name}-zero-width",
            lambda n=name: call_loss(n, X[:, :0], Y),
            ValueError,
            r"width 0 \(shape \(8, 0\)\)",
        ),
        (
            f"{name}-float-labels",
            lambda n=name: call_loss(n, X, Y.float()),
            ValueError,
            r"labels must be integers .* got dtype torch.float32; convert with .long\(\)",
        ),
        (
            f"{name}-bool-labels",
            lambda n=name: call_loss(n, X, Y > 1),
            ValueError,
            r"got dtype torch.bool",
        ),
        (
            f"{name}-length-mismatch",
            lambda n=name: call_loss(n, X, Y[:7]),
            ValueError,
            r"labels has 7 entries for 8 embeddings",
        ),
        (
            f"{name}-unlabelled",
            lambda n=name: call_loss(n, X, unlabelled),
            ValueError,
            r"-1 marks an unlabelled sample.*filter unlabelled samples out first",
        ),
        (
            f"{name}-nan",
            lambda n=name: call_loss(n, with_nan(), Y),
            NonFiniteError,
            r"embeddings contain NaN or Inf in 1 of 8 rows",
        ),
    ]
for name in FIXED_WIDTH:
    cls = type(LOSSES[name]()).__name__
    LOSS_CASES.append(
        (
            f"{name}-wrong-width",
            lambda n=name: call_loss(n, torch.randn(B, D + 1), Y),
            ValueError,
            rf"width 7 \(shape \(8, 7\)\) but {cls} has embedding_dim=6",
        )
    )
for name in PER_CLASS:
    LOSS_CASES.append(
        (
            f"{name}-label-out-of-range",
            lambda n=name: call_loss(n, X, Y + 1),
            ValueError,
            r"labels must lie in \[0, num_classes=4\) .*got range \[1, 4\]",
        )
    )

EVAL_CASES = [
    (
        "evaluate-zero-width",
        lambda: ev.evaluate(torch.zeros(20, 0), torch.arange(20) % 4),
        ValueError,
        r"embeddings have width 0 \(shape \(20, 0\)\)",
    ),
    (
        "evaluate-empty",
        lambda: ev.evaluate(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)),
        ValueError,
        r"embeddings is empty",
    ),
    ("evaluate-float-labels", lambda: ev.evaluate(X, Y.float()), ValueError, r"torch.float32"),
    ("evaluate-bool-labels", lambda: ev.evaluate(X, Y > 0), ValueError, r"torch.bool"),
    (
        "evaluate-unlabelled",
        lambda: ev.evaluate(X, unlabelled),
        ValueError,
        r"labels contain negative values \(2 of 8, min -1",
    ),
    (
        "evaluate-inf",
        lambda: ev.evaluate(X.clone().index_fill_(0, torch.tensor([2]), float("inf")), Y),
        ValueError,
        r"NaN or Inf in 1 of 8 rows",
    ),
    (
        "evaluate-int-embeddings",
        lambda: ev.evaluate(X.long(), Y),
        ValueError,
        r"floating-point tensor, got dtype torch.int64",
    ),
    (
        "evaluate-gallery-width",
        lambda: ev.evaluate(X, Y, gallery_embeddings=torch.randn(8, 5), gallery_labels=Y),
        ValueError,
        r"gallery_embeddings have width 5 .* other operand has width 6",
    ),
    (
        "evaluate-gallery-zero-width",
        lambda: ev.evaluate(X, Y, gallery_embeddings=torch.zeros(8, 0), gallery_labels=Y),
        ValueError,
        r"gallery_embeddings have width 0",
    ),
    (
        "recall-k-too-large",
        lambda: ev.recall_at_k(X, Y, ks=(1, 8)),
        ValueError,
        r"K=8 asks for more neighbours than the gallery has: 7 available",
    ),
    (
        "recall-label-length",
        lambda: ev.recall_at_k(X, Y[:5]),
        ValueError,
        r"labels has 5 entries for 8 embeddings",
    ),
    (
        "map-at-r-unlabelled-gallery",
        lambda: ev.map_at_r(X, Y, gallery_embeddings=X, gallery_labels=unlabelled),
        ValueError,
        r"gallery_labels contain negative values",
    ),
    (
        "knn-zero-width",
        lambda: ev.knn(torch.zeros(5, 0), None, 1),
        ValueError,
        r"query have width 0",
    ),
    ("knn-k-too-large", lambda: ev.knn(X, X, 9), ValueError, r"k=9 asks for more neighbours"),
    ("knn-nan-gallery", lambda: ev.knn(X, with_nan(), 1), ValueError, r"gallery contain NaN"),
    (
        "knn-1d-query",
        lambda: ev.knn(torch.randn(5), None, 1),
        ValueError,
        r"query must be a 2-D tensor \(N, D\), got \(5,\)",
    ),
    ("kmeans-zero-width", lambda: ev.kmeans(torch.zeros(20, 0), 4), ValueError, r"x have width 0"),
    (
        "kmeans-k-too-large",
        lambda: ev.kmeans(X, 9),
        ValueError,
        r"k must be between 1 and the number of points \(8\), got 9",
    ),
    (
        "nmi-zero-width",
        lambda: ev.nmi(torch.zeros(20, 0), torch.arange(20) % 4),
        ValueError,
        r"width 0",
    ),
    (
        "nmi-clustering-float",
        lambda: ev.nmi_clustering(Y.float(), Y),
        ValueError,
        r"cluster_ids must be integers",
    ),
    (
        "f1-clustering-length",
        lambda: ev.f1_clustering(Y, Y[:3]),
        ValueError,
        r"labels has 3 entries for 8 cluster ids",
    ),
]

PAIR_CASES = [
    (
        "l2-normalize-zero-width",
        lambda: l2_normalize(torch.zeros(3, 0)),
        ValueError,
        r"x have width 0",
    ),
    (
        "l2-normalize-1d",
        lambda: l2_normalize(torch.randn(4)),
        ValueError,
        r"x must be a 2-D tensor",
    ),
    (
        "l2-normalize-int",
        lambda: l2_normalize(torch.ones(2, 3, dtype=torch.long)),
        ValueError,
        r"floating-point tensor, got dtype torch.int64; convert with .float\(\)",
    ),
    (
        "cosine-width-mismatch",
        lambda: cosine_similarity(X, torch.randn(3, 5)),
        ValueError,
        r"y have width 5 .* other operand has width 6",
    ),
    ("euclidean-empty", lambda: euclidean_distance(X[:0]), ValueError, r"x is empty"),
    (
        "ms-miner-not-square",
        lambda: MultiSimilarityMiner()(torch.randn(4, 3), pair_masks(Y[:4])),
        ValueError,
        r"similarity must be a square \(B, B\) matrix, got \(4, 3\)",
    ),
    (
        "ms-miner-mask-mismatch",
        lambda: MultiSimilarityMiner()(torch.randn(4, 4), pair_masks(Y)),
        ValueError,
        r"pair masks of shape \(8, 8\) do not match similarity of shape \(4, 4\)",
    ),
    (
        "dw-miner-empty",
        lambda: DistanceWeightedMiner()(torch.zeros(0, 0), pair_masks(Y[:0]), D),
        ValueError,
        r"distance is empty",
    ),
    (
        "facility-oracle-empty",
        lambda: oracle_score(torch.zeros(0, 0), Y[:0]),
        ValueError,
        r"dist is empty",
    ),
    (
        "facility-oracle-float-labels",
        lambda: oracle_score(torch.rand(B, B), Y.float()),
        ValueError,
        r"labels must be integers",
    ),
    (
        "triplet-loss-all-unlabelled",
        lambda: triplet_loss_all(X, unlabelled),
        ValueError,
        r"unlabelled",
    ),
    (
        "lemma31-wrong-width",
        lambda: lemma31_bound(X, Y, onehot_centroids(C, D + 2)),
        ValueError,
        r"width 6 .* the centroids has embedding_dim=8",
    ),
    (
        "dw-miner-zero-dim",
        lambda: DistanceWeightedMiner().probabilities(torch.ones(B, B), pair_masks(Y).negative, 0),
        ValueError,
        r"dim .* must be >= 1, got 0",
    ),
]

SAMPLER_CASES = [
    (
        "mper-float-labels",
        lambda: MPerClassSampler(torch.tensor([0.0, 1.0]), m=1, batch_size=2),
        ValueError,
        r"labels must be integers .*torch.float32",
    ),
    (
        "mper-bool-labels",
        lambda: MPerClassSampler(torch.tensor([True, False]), m=1, batch_size=2),
        ValueError,
        r"torch.bool",
    ),
    (
        "mper-2d-labels",
        lambda: MPerClassSampler(torch.zeros(2, 2, dtype=torch.long), m=1, batch_size=2),
        ValueError,
        r"labels must be a 1-D tensor \(N,\), got \(2, 2\)",
    ),
    (
        "mper-minus-two",
        lambda: MPerClassSampler(torch.tensor([0, 0, 1, -2]), m=2, batch_size=2),
        ValueError,
        r"or -1 for an unlabelled sample; got -2",
    ),
    (
        "mper-all-unlabelled",
        lambda: MPerClassSampler(torch.full((6,), -1), m=2, batch_size=2),
        ValueError,
        r"no labelled sample \(every label is -1\)",
    ),
    (
        "ratio-empty-labels",
        lambda: ClassRatioSampler(torch.zeros(0, dtype=torch.long), ratio=0.5, batch_size=4),
        ValueError,
        r"no labelled sample",
    ),
]

CASES = LOSS_CASES + EVAL_CASES + PAIR_CASES + SAMPLER_CASES


@pytest.mark.parametrize("thunk, exc, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_rejected_with_a_clear_message(thunk, exc, match):
    with pytest.raises(exc, match=match):
        thunk()


def test_there_are_many_bad_input_cases():
    assert len(CASES) >= 35
    assert len({c[0] for c in CASES}) == len(CASES)


def test_non_finite_error_is_both_a_floating_point_and_a_value_error():
    assert issubclass(NonFiniteError, FloatingPointError) and issubclass(NonFiniteError, ValueError)


# ------------------------------------------------------------------------------ huge norms


def test_l2_normalize_of_huge_rows_equals_that_of_the_rows():
    x, _ = batch()
    for factor in (1e20, 1e30, 1e-6):
        torch.testing.assert_close(l2_normalize(factor * x), l2_normalize(x))
    assert torch.equal(l2_normalize(1e-20 * x), torch.zeros_like(x))  # norm <= eps: a zero row
    assert torch.equal(l2_normalize(x), F.normalize(x, dim=1))  # ordinary rows: bit-identical
    x64, _ = batch(torch.float64)
    torch.testing.assert_close(l2_normalize(1e300 * x64), l2_normalize(x64))


def test_l2_normalize_gradients():
    x64, _ = batch(torch.float64)
    x64.requires_grad_()
    assert torch.autograd.gradcheck(l2_normalize, (x64,))
    assert torch.autograd.gradcheck(lambda t: l2_normalize(1e200 * t), (x64,))
    z = torch.zeros(2, D, requires_grad=True)
    out = l2_normalize(torch.cat([z, x64.detach().float()[:2]]))
    (out * torch.randn_like(out)).sum().backward()
    assert torch.equal(out[:2], torch.zeros(2, D)) and torch.equal(z.grad, torch.zeros(2, D))


@pytest.mark.parametrize("name", list(LOSSES))
def test_normalising_losses_ignore_a_huge_scale(name):
    x, y = batch(seed=3)
    y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    values, grads = [], []
    for factor in (1.0, 1e20):
        torch.manual_seed(0)  # same proxies / centres / weights
        loss = LOSSES[name]()
        xi = x.clone().requires_grad_()
        value = loss(factor * xi, y)
        assert value.grad_fn is not None or not value.requires_grad
        (grad,) = torch.autograd.grad(value, xi, allow_unused=True)
        values.append(value.detach())
        grads.append(torch.zeros_like(x) if grad is None else grad)
    torch.testing.assert_close(values[1], values[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_evaluate_of_huge_embeddings(metric):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(40, 6, generator=g), torch.arange(40) % 4
    ref = ev.evaluate(x, y, metric=metric)
    huge = ev.evaluate(1e20 * x, y, metric=metric)
    assert huge == ref
    scores, _ = ev.knn(1e20 * x, None, 3, metric=metric)
    assert torch.isfinite(scores).all()
    if metric == "euclidean":  # distances come back in the caller's units
        ref_scores, _ = ev.knn(x, None, 3, metric=metric)
        torch.testing.assert_close(scores / 1e20, ref_scores, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ exact ties


def tied_case(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """60 distinct gallery rows, each copied a few times (200 rows, shuffled), labels that differ
    between copies, and 150 noisy queries near gallery rows."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn(60, 37, generator=g, dtype=torch.float64)
    rows = torch.cat([torch.arange(60), torch.randint(0, 60, (140,), generator=g)])
    rows = rows[torch.randperm(200, generator=g)]  # (200,)
    gallery = base[rows].to(dtype)  # (200, 37)
    gallery_labels = torch.arange(200) % 3  # copies of one row carry different labels
    near = torch.randint(0, 200, (150,), generator=g)
    query = (
        gallery[near].double() + 0.3 * torch.randn(150, 37, generator=g, dtype=torch.float64)
    ).to(dtype)
    return query, gallery_labels[near], gallery, gallery_labels


def brute_force_top1(query: torch.Tensor, gallery: torch.Tensor, metric: str) -> torch.Tensor:
    """Nearest gallery row, scored once per *distinct* row (so copies are tied exactly), ties to
    the lower index (``argmax`` returns the first maximum)."""
    distinct, group = torch.unique(gallery.double(), dim=0, return_inverse=True)  # (U, D), (G,)
    q = query.double()
    if metric == "cosine":
        score = F.normalize(q, dim=1) @ F.normalize(distinct, dim=1).T  # (Q, U)
    else:
        score = -torch.cdist(q, distinct)  # (Q, U)
    return score[:, group].argmax(dim=1)  # (Q,)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_exact_duplicates_are_tied_to_the_lower_gallery_index(dtype, metric):
    query, query_labels, gallery, gallery_labels = tied_case(dtype)
    _, idx = ev.knn(query, gallery, 5, metric=metric)
    expected = brute_force_top1(query, gallery, metric)
    assert torch.equal(idx[:, 0], expected)
    recall = ev.recall_at_k(
        query,
        query_labels,
        ks=(1,),
        gallery_embeddings=gallery,
        gallery_labels=gallery_labels,
        metric=metric,
    )
    assert recall[1] == pytest.approx(
        float((gallery_labels[expected] == query_labels).double().mean())
    )
    # within the top 5, copies of one row appear in ascending index order
    same = (gallery[idx[:, :, None]] == gallery[idx[:, None, :]]).all(dim=3)  # (Q, 5, 5)
    later = torch.arange(5)[:, None] < torch.arange(5)[None, :]  # (5, 5) column after row
    assert not (same & later & (idx[:, :, None] > idx[:, None, :])).any()


def test_zero_loss_of_a_batch_whose_sum_overflows_is_zero_with_zero_gradient():
    from dmlnb.losses.base import zero_loss

    x = torch.full((4, 8), 3e38, requires_grad=True)  # float32: the plain sum overflows to inf
    loss = zero_loss(x)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_scale_handles_float32_max_and_float64_extremes():
    from dmlnb.pairs import power_of_two_scale

    fmax = torch.finfo(torch.float32).max
    out = l2_normalize(torch.tensor([[fmax, 1.0]]))
    assert torch.isfinite(out).all() and out[0, 0] == 1.0
    assert power_of_two_scale(torch.tensor([3.9, 4.0])) == 4.0  # largest entry scaled into [1, 2)
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.arange(40) % 5
    plain = ev.evaluate(x, y, metric="euclidean", metrics=("nmi",))
    for factor in (1e300, 1e-300):  # beyond float32's range: scaled before k-means casts to float32
        assert ev.evaluate(factor * x, y, metric="euclidean", metrics=("nmi",)) == plain
