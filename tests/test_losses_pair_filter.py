"""``pair_filter``: every pair-based loss against float64 brute-force loops over only the allowed
pairs / triplets (written from each paper's formula), an all-True filter equals no filter, a
sample in no allowed pair gets no gradient, bad filters and non-pair losses raise."""

from __future__ import annotations

import math

import pytest
import torch

from dmlnb.losses import (
    AngularLoss,
    ContrastiveLoss,
    DiscriminativeLoss,
    EasyPositiveLoss,
    FacilityLocationLoss,
    LiftedStructureLoss,
    MarginLoss,
    MultiSimilarityLoss,
    NormalizedSoftmaxLoss,
    NPairLoss,
    ProxyNCALoss,
    SoftTripleLoss,
    TripletLoss,
)

LABELS = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 3, 3])
B = LABELS.numel()


def batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 5, generator=g, dtype=torch.float64)
    f = torch.rand(B, B, generator=g) < 0.6
    return x, f


def allowed(f: torch.Tensor) -> tuple[list[list[bool]], list[list[bool]]]:
    """Positive / negative allowed pairs as nested lists (the reference's own masks)."""
    y = LABELS.tolist()
    pos = [[bool(f[i, j]) and y[i] == y[j] and i != j for j in range(B)] for i in range(B)]
    neg = [[bool(f[i, j]) and y[i] != y[j] for j in range(B)] for i in range(B)]
    return pos, neg


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True)


def dist(x: torch.Tensor, i: int, j: int, squared: bool = False) -> float:
    d2 = float(((x[i] - x[j]) ** 2).sum())
    return d2 if squared else math.sqrt(d2)


def relu(t: float) -> float:
    return max(t, 0.0)


# ---------------------------------------------------------------------------- references
def ref_contrastive(x, f, mining, pos_margin, neg_margin, squared_hinge, reduction):
    x, (pos, neg) = unit(x), allowed(f)
    p = 2 if squared_hinge else 1
    if mining == "all":
        pt = [
            relu(dist(x, i, j) - pos_margin) ** p for i in range(B) for j in range(B) if pos[i][j]
        ]
        nt = [
            relu(neg_margin - dist(x, i, j)) ** p for i in range(B) for j in range(B) if neg[i][j]
        ]
    else:
        pt, nt = [], []
        for i in range(B):
            if any(pos[i]) and any(neg[i]):
                pt.append(relu(max(dist(x, i, j) for j in range(B) if pos[i][j]) - pos_margin) ** p)
                nt.append(relu(neg_margin - min(dist(x, i, j) for j in range(B) if neg[i][j])) ** p)

    def red(t):
        n = sum(v > 0 for v in t) if reduction == "nonzero" else len(t)
        return sum(t) / max(n, 1)

    return red(pt) + red(nt)


def ref_triplet(x, f, mining, margin, squared, reduction):
    x, (pos, neg) = unit(x), allowed(f)
    d = lambda i, j: dist(x, i, j, squared)  # noqa: E731
    terms = []
    for a in range(B):
        negs = [n for n in range(B) if neg[a][n]]
        poss = [p for p in range(B) if pos[a][p]]
        if not negs or not poss:
            continue
        if mining == "all":
            terms += [relu(d(a, p) - d(a, n) + margin) for p in poss for n in negs]
        elif mining == "hard":
            terms.append(relu(max(d(a, p) for p in poss) - min(d(a, n) for n in negs) + margin))
        else:
            for p in poss:
                farther = [d(a, n) for n in negs if d(a, n) > d(a, p)]
                dn = min(farther) if farther else max(d(a, n) for n in negs)
                terms.append(relu(d(a, p) - dn + margin))
    n = sum(t > 0 for t in terms) if reduction == "nonzero" else len(terms)
    return sum(terms) / max(n, 1)


def ref_lifted(x, f, neg_margin=1.0):
    x, (pos, neg) = unit(x), allowed(f)
    terms = []
    for i in range(B):
        for j in range(B):
            if pos[i][j]:
                s = sum(math.exp(neg_margin - dist(x, i, k)) for k in range(B) if neg[i][k])
                s += sum(math.exp(neg_margin - dist(x, j, k)) for k in range(B) if neg[j][k])
                jj = (math.log(s) if s > 0 else -math.inf) + dist(x, i, j)
                terms.append(relu(jj) ** 2 / 2)
    return sum(terms) / len(terms)


def ref_ms(x, f, alpha=2.0, beta=50.0, base=0.5, eps=0.1):
    x, (pos, neg) = unit(x), allowed(f)
    s = lambda i, j: float(x[i] @ x[j])  # noqa: E731
    total = 0.0
    for i in range(B):
        P = [j for j in range(B) if pos[i][j]]
        N = [j for j in range(B) if neg[i][j]]
        min_p = min((s(i, j) for j in P), default=math.inf)
        max_n = max((s(i, j) for j in N), default=-math.inf)
        Pm = [j for j in P if s(i, j) - eps < max_n]
        Nm = [j for j in N if s(i, j) + eps > min_p]
        total += math.log(1 + sum(math.exp(-alpha * (s(i, j) - base)) for j in Pm)) / alpha
        total += math.log(1 + sum(math.exp(beta * (s(i, j) - base)) for j in Nm)) / beta
    return total / B


def ref_margin(
    x, f, sampling, margin=0.2, beta=float(torch.tensor(1.2))
):  # beta is a float32 parameter
    x, (pos, neg) = unit(x), allowed(f)
    total, active = 0.0, 0.0
    for a in range(B):
        n_pos, n_neg = sum(pos[a]), sum(neg[a])
        for j in range(B):
            if pos[a][j]:
                w = 1 if sampling == "all_pairs" else n_neg
                t = relu(margin + dist(x, a, j) - beta)
                total, active = total + w * t, active + w * (t > 0)
            if neg[a][j]:
                w = 1 if sampling == "all_pairs" else n_pos
                t = relu(margin - dist(x, a, j) + beta)
                total, active = total + w * t, active + w * (t > 0)
    return total / max(active, 1)


def ref_angular(x, f, alpha_degrees=40.0):
    x, (pos, neg) = unit(x), allowed(f)
    t2 = math.tan(math.radians(alpha_degrees)) ** 2
    terms = []
    for a in range(B):
        for p in range(B):
            if pos[a][p]:
                s = sum(
                    math.exp(
                        4 * t2 * float((x[a] + x[p]) @ x[n]) - 2 * (1 + t2) * float(x[a] @ x[p])
                    )
                    for n in range(B)
                    if neg[a][n]
                )
                terms.append(math.log(1 + s))
    return sum(terms) / len(terms)


def ref_npair(x, f, l2_reg):
    pos, neg = allowed(f)
    pairs = []
    for c in sorted(set(LABELS.tolist())):  # first allowed (a, p) of the class, row-major
        hit = next(
            ((a, p) for a in range(B) for p in range(B) if LABELS[a] == c and pos[a][p]), None
        )
        if hit is not None:
            pairs.append(hit)
    terms = []
    for i, (a, p) in enumerate(pairs):
        s = sum(
            math.exp(float(x[a] @ x[pj]) - float(x[a] @ x[p]))
            for j, (_, pj) in enumerate(pairs)
            if j != i and neg[a][pj]
        )
        terms.append(math.log(1 + s))
    return sum(terms) / len(terms) + l2_reg * float((x**2).sum(dim=1).mean())


def ref_npair_all(x, f, l2_reg):
    """Song et al. Eq. 3 over the allowed pairs: every allowed positive (a, p), its allowed
    negatives; a term without negatives is log 1 = 0 and counts."""
    pos, neg = allowed(f)
    terms = []
    for a in range(B):
        for p in range(B):
            if pos[a][p]:
                s = sum(
                    math.exp(float(x[a] @ x[n]) - float(x[a] @ x[p])) for n in range(B) if neg[a][n]
                )
                terms.append(math.log1p(s))
    return sum(terms) / len(terms) + l2_reg * float((x**2).sum(dim=1).mean())


def ref_easy_positive(x, f, positive, negative, temperature=0.1):
    x, (pos, neg) = unit(x), allowed(f)
    s = lambda i, j: float(x[i] @ x[j])  # noqa: E731
    terms = []
    for a in range(B):
        P = [p for p in range(B) if pos[a][p]]
        N = [n for n in range(B) if neg[a][n]]
        if not P or not N:
            continue
        if positive == "easy":
            P = [max(P, key=lambda p: s(a, p))]
        if negative == "all":
            lse = math.log(sum(math.exp(s(a, n) / temperature) for n in N))
        else:
            lse = s(a, max(N, key=lambda n: s(a, n))) / temperature
        terms += [math.log1p(math.exp(lse - s(a, p) / temperature)) for p in P]
    return sum(terms) / max(len(terms), 1)


CASES = [
    (
        "contrastive-all-mean",
        lambda: ContrastiveLoss(pos_margin=0.3, neg_margin=1.2, reduction="mean"),
        lambda x, f: ref_contrastive(x, f, "all", 0.3, 1.2, False, "mean"),
    ),
    (
        "contrastive-all-nonzero-sq",
        lambda: ContrastiveLoss(neg_margin=1.2, squared_hinge=True),
        lambda x, f: ref_contrastive(x, f, "all", 0.0, 1.2, True, "nonzero"),
    ),
    (
        "contrastive-hard",
        lambda: ContrastiveLoss(
            neg_margin=1.0, squared_hinge=True, mining="hard", reduction="mean"
        ),
        lambda x, f: ref_contrastive(x, f, "hard", 0.0, 1.0, True, "mean"),
    ),
    (
        "triplet-all",
        lambda: TripletLoss(margin=0.3, mining="all"),
        lambda x, f: ref_triplet(x, f, "all", 0.3, False, "nonzero"),
    ),
    (
        "triplet-hard",
        lambda: TripletLoss(margin=0.2, mining="hard", distance="squared", reduction="mean"),
        lambda x, f: ref_triplet(x, f, "hard", 0.2, True, "mean"),
    ),
    (
        "triplet-semihard",
        lambda: TripletLoss(margin=0.2, mining="semihard", distance="squared", reduction="mean"),
        lambda x, f: ref_triplet(x, f, "semihard", 0.2, True, "mean"),
    ),
    ("lifted", lambda: LiftedStructureLoss(neg_margin=1.0), ref_lifted),
    ("ms", lambda: MultiSimilarityLoss(), ref_ms),
    (
        "margin-all-pairs",
        lambda: MarginLoss(sampling="all_pairs"),
        lambda x, f: ref_margin(x, f, "all_pairs"),
    ),
    (
        "margin-all-triplets",
        lambda: MarginLoss(sampling="all_triplets"),
        lambda x, f: ref_margin(x, f, "all_triplets"),
    ),
    ("angular", lambda: AngularLoss(), ref_angular),
    ("npair", lambda: NPairLoss(l2_reg=0.02), lambda x, f: ref_npair(x, f, 0.02)),
    (
        "npair-all",
        lambda: NPairLoss(l2_reg=0.0, pairs="all"),
        lambda x, f: ref_npair_all(x, f, 0.0),
    ),
    (
        "easy-positive-EPHN",
        lambda: EasyPositiveLoss("easy", "hard", duplicate_threshold=None, drop_nonpositive=False),
        lambda x, f: ref_easy_positive(x, f, "easy", "hard"),
    ),
    (
        "easy-positive-all",
        lambda: EasyPositiveLoss("all", "all", duplicate_threshold=None, drop_nonpositive=False),
        lambda x, f: ref_easy_positive(x, f, "all", "all"),
    ),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name, make, reference", CASES, ids=IDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_filtered_loss_matches_brute_force(name, make, reference, seed):
    x, f = batch(seed)
    got = make()(x, LABELS, pair_filter=f).detach()
    assert float(got) == pytest.approx(reference(x, f), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("name, make, reference", CASES, ids=IDS)
def test_all_true_filter_equals_no_filter(name, make, reference):
    x, _ = batch(3)
    x32 = x.float()
    plain = make()(x32, LABELS)
    full = make()(x32, LABELS, pair_filter=torch.ones(B, B, dtype=torch.bool))
    assert torch.equal(plain, full)


def test_distance_weighted_margin_samples_only_allowed_pairs():
    """The random sampler: the same draw with an all-True filter, and never an excluded pair."""
    x, f = batch(4)
    torch.manual_seed(0)
    plain = MarginLoss()(x, LABELS)
    full = MarginLoss()(x, LABELS, pair_filter=torch.ones(B, B, dtype=torch.bool))
    assert torch.equal(plain, full)
    loss = MarginLoss()
    from dmlnb.pairs import PairMasks, euclidean_distance, pair_masks

    m = pair_masks(LABELS)
    masks = PairMasks(m.positive & f, m.negative & f)
    w_pos, w_neg = loss._pair_weights(euclidean_distance(unit(x)), masks, x.shape[1])
    assert bool((w_pos[~f] == 0).all()) and bool((w_neg[~f] == 0).all())
    assert float(w_neg.sum()) > 0


ISOLATING = [c for c in CASES if c[0] != "npair"] + [
    ("npair-no-penalty", lambda: NPairLoss(l2_reg=0.0), None),
    ("margin-dw", lambda: MarginLoss(), None),
]


@pytest.mark.parametrize("name, make, reference", ISOLATING, ids=[c[0] for c in ISOLATING])
def test_sample_in_no_allowed_pair_gets_no_gradient(name, make, reference):
    """Excluding every pair that involves sample k (its row and its column) leaves k out of every
    term: its gradient is exactly 0 while the other samples still get one."""
    x, f = batch(5)
    f = f | torch.eye(B, dtype=torch.bool)
    k = 1
    f[k, :] = False
    f[:, k] = False
    x = x.clone().requires_grad_(True)
    make()(x, LABELS, pair_filter=f).backward()
    assert torch.equal(x.grad[k], torch.zeros_like(x.grad[k]))
    assert float(x.grad.abs().sum()) > 0


def test_bad_filters_raise():
    x, f = batch(6)
    loss = ContrastiveLoss()
    with pytest.raises(ValueError, match=r"shape \(B, B\)"):
        loss(x, LABELS, pair_filter=f[:, :-1])
    with pytest.raises(TypeError, match="dtype torch.bool"):
        loss(x, LABELS, pair_filter=f.float())
    with pytest.raises(TypeError, match="torch.Tensor"):
        loss(x, LABELS, pair_filter=f.tolist())
    with pytest.raises(ValueError, match="is on meta"):
        loss(x, LABELS, pair_filter=torch.ones(B, B, dtype=torch.bool, device="meta"))


# Losses not built on the batch's pairs (proxies, centres, a classifier, centroids, clustering).
NON_PAIR = [
    lambda: ProxyNCALoss(4, 5),
    lambda: SoftTripleLoss(4, 5, centers_per_class=2),
    lambda: NormalizedSoftmaxLoss(4, 5),
    lambda: DiscriminativeLoss(torch.randn(4, 5)),
    lambda: FacilityLocationLoss(),
]
NON_PAIR_IDS = ["proxy_nca", "soft_triple", "softmax", "discriminative", "facility_location"]


@pytest.mark.parametrize("make", NON_PAIR, ids=NON_PAIR_IDS)
def test_non_pair_losses_reject_a_filter_and_work_without(make):
    x, f = batch(7)
    loss = make()
    x = x.float()
    assert torch.isfinite(loss(x, LABELS))
    with pytest.raises(ValueError, match=f"{type(loss).__name__} does not support pair_filter"):
        loss(x, LABELS, pair_filter=f)


@pytest.mark.parametrize("make", NON_PAIR, ids=NON_PAIR_IDS)
def test_non_pair_losses_build_no_pair_masks(make, monkeypatch):
    # the (B, B) masks cost O(B^2): a proxy / centroid loss must not pay for them
    import dmlnb.losses.base as base

    def refuse(labels):
        raise AssertionError("pair_masks called")

    monkeypatch.setattr(base, "pair_masks", refuse)
    loss = make()
    assert not loss.uses_pair_masks and torch.isfinite(loss(batch(7)[0].float(), LABELS))
    with pytest.raises(AssertionError, match="pair_masks called"):
        TripletLoss(margin=0.2)(batch(7)[0], LABELS)  # a pair loss still builds them


def test_a_filtering_loss_must_use_the_pair_masks():
    from dmlnb.losses import MetricLoss

    with pytest.raises(TypeError, match="must use the pair masks"):
        type("Broken", (MetricLoss,), {"supports_pair_filter": True, "uses_pair_masks": False})


def test_empty_filter_gives_a_graph_attached_zero():
    x, _ = batch(8)
    x = x.requires_grad_(True)
    none = torch.zeros(B, B, dtype=torch.bool)
    for name, make, _ in CASES:
        if name == "npair":
            continue
        loss = make()(x, LABELS, pair_filter=none)
        assert float(loss.detach()) == 0.0, name
        loss.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
