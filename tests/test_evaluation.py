"""Tests of dmlnb.evaluation against independent references.

References: float64 brute-force Python loops written from the metric definitions, sklearn's
``normalized_mutual_info_score``, faiss's k-means, and pytorch-metric-learning's
``AccuracyCalculator``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import normalized_mutual_info_score
from torch import Tensor, nn

from dmlnb import evaluation as ev
from dmlnb.evaluation import protocol

# --------------------------------------------------------------------------------------------
# Brute-force references (float64, Python loops, straight from the definitions)
# --------------------------------------------------------------------------------------------


def brute_knn(
    query: Tensor, gallery: Tensor, k: int, metric: str, exclude_self: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Double loop: sort candidates by (distance or -similarity, gallery index), keep k."""
    q_rows, g_rows = query.double().tolist(), gallery.double().tolist()
    all_scores, all_idx = [], []
    for i, q in enumerate(q_rows):
        candidates = []
        for j, g in enumerate(g_rows):
            if exclude_self and i == j:
                continue
            if metric == "cosine":
                nq = max(math.sqrt(sum(a * a for a in q)), 1e-12)
                ng = max(math.sqrt(sum(b * b for b in g)), 1e-12)
                score = sum(a * b for a, b in zip(q, g)) / (nq * ng)
                candidates.append((-score, j, score))
            else:
                score = math.sqrt(sum((a - b) ** 2 for a, b in zip(q, g)))
                candidates.append((score, j, score))
        candidates.sort()
        all_scores.append([c[2] for c in candidates[:k]])
        all_idx.append([c[1] for c in candidates[:k]])
    return np.array(all_scores), np.array(all_idx)


def brute_recall(idx: np.ndarray, q_labels: Tensor, g_labels: Tensor, ks) -> dict[int, float]:
    out = {}
    for k in ks:
        hits = sum(
            any(int(g_labels[j]) == int(q_labels[i]) for j in idx[i, :k]) for i in range(len(idx))
        )
        out[k] = hits / len(idx)
    return out


def brute_map_at_r(x: Tensor, labels: Tensor, metric: str) -> float:
    """Musgrave et al. 2020: AP over the first R neighbours, R = other items of the class."""
    y = labels.tolist()
    _, idx = brute_knn(x, x, len(y) - 1, metric, exclude_self=True)
    aps = []
    for i in range(len(y)):
        r = sum(1 for j in range(len(y)) if j != i and y[j] == y[i])
        if r == 0:
            continue
        correct, ap = 0, 0.0
        for rank in range(1, r + 1):
            if y[idx[i, rank - 1]] == y[i]:
                correct += 1
                ap += correct / rank
        aps.append(ap / r)
    return sum(aps) / len(aps)


def brute_f1(clusters: Tensor, labels: Tensor) -> float:
    """O(N^2) pair count: P = TP / same-cluster pairs, R = TP / same-class pairs."""
    c, y = clusters.tolist(), labels.tolist()
    tp = same_cluster = same_class = 0
    for i in range(len(c)):
        for j in range(i + 1, len(c)):
            tp += c[i] == c[j] and y[i] == y[j]
            same_cluster += c[i] == c[j]
            same_class += y[i] == y[j]
    if tp == 0:
        return 0.0
    p, r = tp / same_cluster, tp / same_class
    return 2 * p * r / (p + r)


# --------------------------------------------------------------------------------------------
# Test data
# --------------------------------------------------------------------------------------------


def random_data(n: int = 90, d: int = 12, classes: int = 7, seed: int = 0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=dtype)
    y = torch.randint(0, classes, (n,), generator=g)
    return x, y


def integer_data(n: int = 120, seed: int = 1):
    """Coordinates in {-2, ..., 2}^3: exact float32 distances, many ties and duplicates."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, (n, 3), generator=g).float()
    y = torch.randint(0, 5, (n,), generator=g)
    return x, y


def direction_data(n: int = 100, seed: int = 2):
    """Copies of 6 directions scaled by powers of two: exact cosine ties in any precision."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(6, 5, generator=g)
    which = torch.randint(0, 6, (n,), generator=g)
    scale = 2.0 ** torch.randint(-2, 3, (n, 1), generator=g).float()
    x = directions[which] * scale  # (n, 5)
    y = torch.randint(0, 4, (n,), generator=g)
    # distinct directions must not be near-tied, or float32 could order them unlike float64
    cos = torch.nn.functional.normalize(directions.double(), dim=1)
    cos = cos @ cos.T
    for row in cos:
        gaps = row.sort().values.diff()
        assert gaps.min() > 1e-4
    return x, y


# --------------------------------------------------------------------------------------------
# knn and Recall@K
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_knn_and_recall_match_brute_force_random(metric):
    x, y = random_data()
    scores, idx = ev.knn(x, None, 8, metric)
    ref_scores, ref_idx = brute_knn(x, x, 8, metric, exclude_self=True)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    np.testing.assert_allclose(scores.numpy(), ref_scores, atol=1e-6)
    ks = (1, 2, 4, 8)
    assert ev.recall_at_k(x, y, ks, metric=metric) == pytest.approx(brute_recall(ref_idx, y, y, ks))


@pytest.mark.parametrize("data, metric", [(integer_data, "euclidean"), (direction_data, "cosine")])
def test_knn_and_recall_match_brute_force_with_ties(data, metric):
    x, y = data()
    k = 20
    scores, idx = ev.knn(x, None, k, metric)
    ref_scores, ref_idx = brute_knn(x, x, k, metric, exclude_self=True)
    # the data really is tie-heavy: many neighbour lists have equal scores
    assert (np.diff(ref_scores, axis=1) == 0).sum() > len(x)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)  # ties to the lower gallery index
    np.testing.assert_allclose(scores.numpy(), ref_scores, atol=1e-6)
    ks = (1, 2, 4, 8, 16)
    assert ev.recall_at_k(x, y, ks, metric=metric) == pytest.approx(brute_recall(ref_idx, y, y, ks))


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("data", ["random", "integer"])
def test_knn_independent_of_chunk_size(metric, data):
    if data == "random":
        x, _ = random_data(n=300, d=32, dtype=torch.float32)
    else:
        x, _ = integer_data(n=300)
    ref_scores, ref_idx = ev.knn(x, None, 10, metric, chunk_size=10_000)
    for chunk in (1, 7, 64, 100):
        scores, idx = ev.knn(x, None, 10, metric, chunk_size=chunk)
        assert torch.equal(idx, ref_idx), chunk
        assert torch.equal(scores, ref_scores), chunk
    x_q, x_g = x[:50], x[50:]
    ref = ev.knn(x_q, x_g, 5, metric, chunk_size=1000)[1]
    assert torch.equal(ev.knn(x_q, x_g, 5, metric, chunk_size=3)[1], ref)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_self_excluded_by_index_not_by_distance(metric):
    g = torch.Generator().manual_seed(3)
    base = torch.randint(-50, 50, (20, 6), generator=g).float()  # integer: exact distances
    assert len(torch.unique(base, dim=0)) == 20
    x = torch.cat([base, base, base])  # every point three times: rows i, i+20, i+40
    scores, idx = ev.knn(x, None, 2, metric)
    rows = torch.arange(60)
    copies = torch.stack([(rows + 20) % 60, (rows + 40) % 60], dim=1).sort(dim=1).values
    assert torch.equal(idx, copies)  # both other copies, lower index first, never self
    expected = 1.0 if metric == "cosine" else 0.0
    assert torch.allclose(scores, torch.full_like(scores, expected), atol=1e-6)
    # a duplicate with the same label is a correct neighbour...
    y_same = torch.arange(20).repeat(3)
    assert ev.recall_at_k(x, y_same, (1,), metric=metric)[1] == 1.0
    # ...and one with another label a wrong one (copy 0 and 1 share, copy 2 differs)
    y_mixed = torch.cat([torch.arange(20), torch.arange(20), torch.arange(20) + 100])
    recall = ev.recall_at_k(x, y_mixed, (1, 2), metric=metric)
    # copy 0 -> nearest is copy 1 (hit); copy 1 -> copy 0 (hit); copy 2 -> copy 0 (miss) twice
    assert recall == {1: pytest.approx(40 / 60), 2: pytest.approx(40 / 60)}


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_separate_query_and_gallery(metric):
    xq, yq = random_data(n=40, seed=4)
    xg, yg = random_data(n=70, seed=5)
    ks = (1, 3, 10)
    _, ref_idx = brute_knn(xq, xg, 10, metric, exclude_self=False)
    assert torch.equal(ev.knn(xq, xg, 10, metric)[1], torch.from_numpy(ref_idx))
    recall = ev.recall_at_k(xq, yq, ks, xg, yg, metric=metric)
    assert recall == pytest.approx(brute_recall(ref_idx, yq, yg, ks))
    # a query set searched as its own gallery (no exclusion) finds itself first
    assert ev.recall_at_k(xq, yq, (1,), xq, yq, metric=metric)[1] == 1.0


def test_zero_embedding_is_defined():
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(6))
    x[3] = 0.0
    scores, _ = ev.knn(x, None, 3, "cosine")
    assert torch.isfinite(scores).all()
    assert torch.all(scores[3] == 0.0)


# --------------------------------------------------------------------------------------------
# NMI, F1, k-means
# --------------------------------------------------------------------------------------------


def random_partitions(seed: int):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(5, 200, (1,), generator=g))
    clusters = torch.randint(0, int(torch.randint(1, 15, (1,), generator=g)), (n,), generator=g)
    labels = torch.randint(0, int(torch.randint(1, 15, (1,), generator=g)), (n,), generator=g)
    return clusters * 7 + 3, labels - 5  # arbitrary, non-contiguous ids


@pytest.mark.parametrize("average", ["arithmetic", "geometric"])
def test_nmi_clustering_matches_sklearn(average):
    cases = [random_partitions(seed) for seed in range(25)]
    y = torch.arange(30) % 6
    cases += [
        (y, y),  # identical
        ((y + 1) % 6 * 10, y),  # permuted ids
        (torch.zeros(30, dtype=torch.long), torch.zeros(30, dtype=torch.long)),  # one group
        (torch.zeros(30, dtype=torch.long), y),  # one side one group
        (torch.arange(30), y),  # all singletons
    ]
    for clusters, labels in cases:
        ref = normalized_mutual_info_score(labels.numpy(), clusters.numpy(), average_method=average)
        assert ev.nmi_clustering(clusters, labels, average) == pytest.approx(ref, abs=1e-12)


def test_f1_clustering_matches_pair_count():
    cases = [random_partitions(seed) for seed in range(25)]
    y = torch.arange(30) % 6
    cases += [(y, y), (torch.zeros(30, dtype=torch.long), y), (torch.arange(30), y)]
    for clusters, labels in cases:
        assert ev.f1_clustering(clusters, labels) == pytest.approx(brute_f1(clusters, labels))
    # no pair shares a cluster or a class: the partitions agree on every pair
    assert ev.f1_clustering(torch.arange(5), torch.arange(5)) == 1.0


def blobs(n_per: int = 30, classes: int = 8, d: int = 6, seed: int = 7):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, d, generator=g) * 10
    y = torch.arange(classes).repeat_interleave(n_per)
    return centres[y] + 0.3 * torch.randn(len(y), d, generator=g), y


def test_kmeans_torch_matches_faiss():
    faiss = pytest.importorskip("faiss")
    # well-separated data: identical assignments and centroids
    x, y = blobs()
    a_f, c_f = ev.kmeans(x, 8, seed=0, backend="faiss")
    a_t, c_t = ev.kmeans(x, 8, seed=0, backend="torch")
    assert torch.equal(a_f, a_t)
    assert torch.allclose(c_f, c_t, atol=1e-5)
    # data with duplicated points: initial centroids coincide, clusters go empty and faiss
    # splits them with its own random stream -- the torch path must reproduce that exactly
    g = torch.Generator().manual_seed(8)
    x = torch.randn(300, 4, generator=g)
    x[1:6] = x[0]
    x[10:13] = x[9]
    n_split = 0
    for seed in range(6):
        init = x[torch.randperm(300, generator=torch.Generator().manual_seed(seed))[:100]]
        km = faiss.Kmeans(4, 100, niter=20, min_points_per_centroid=1, max_points_per_centroid=300)
        km.train(x.numpy(), init_centroids=init.numpy())
        n_split += sum(stat["nsplit"] for stat in km.iteration_stats)
        a_f, c_f = ev.kmeans(x, 100, seed=seed, backend="faiss")
        a_t, c_t = ev.kmeans(x, 100, seed=seed, backend="torch")
        assert torch.equal(a_f, a_t)
        assert torch.allclose(c_f, c_t, atol=1e-5)
    assert n_split > 0  # the empty-cluster rule was exercised
    # generic random data: same NMI
    x, y = random_data(n=400, d=8, classes=20, dtype=torch.float32)
    nmi_f = ev.nmi(x, y, backend="faiss")
    nmi_t = ev.nmi(x, y, backend="torch")
    assert nmi_f == pytest.approx(nmi_t, abs=1e-3)


def test_faiss_kmeans_runs_with_torchs_thread_count(monkeypatch):
    """faiss may keep its own OpenMP thread count (``OMP_NUM_THREADS`` at start-up; here its
    runtime is torch's) and rounds its distances differently with another: k-means takes torch's
    count for the call and restores faiss's after, so a one-thread evaluation is a one-thread
    k-means in any install."""
    faiss = pytest.importorskip("faiss")
    seen = []
    real = faiss.Kmeans

    class Spy(real):  # type: ignore[misc, valid-type]
        def train(self, *args, **kwargs):
            seen.append(faiss.omp_get_max_threads())
            return super().train(*args, **kwargs)

    monkeypatch.setattr(faiss, "Kmeans", Spy)
    x, _ = blobs()
    torch_before, faiss_before = torch.get_num_threads(), faiss.omp_get_max_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            had = faiss.omp_get_max_threads()
            ev.kmeans(x, 8, seed=0, backend="faiss")
            assert faiss.omp_get_max_threads() == had  # restored
    finally:
        torch.set_num_threads(torch_before)
        faiss.omp_set_num_threads(faiss_before)
    assert seen == [1, 2]


def test_kmeans_is_a_converged_lloyd_solution_and_seeded():
    x, _ = blobs()
    assignments, centroids = ev.kmeans(x, 8, seed=0, backend="torch")
    assert centroids.shape == (8, 6) and assignments.shape == (240,)
    # every point is assigned to its nearest centroid (float64 brute force)...
    d2 = ((x.double()[:, None, :] - centroids.double()[None]) ** 2).sum(dim=2)  # (N, k)
    assert torch.equal(assignments, d2.argmin(dim=1))
    # ...and, after 20 iterations on blob data, each centroid is the mean of its points
    for c in range(8):
        assert torch.allclose(centroids[c], x[assignments == c].mean(dim=0), atol=1e-4)
    first = ev.kmeans(x, 8, seed=3, backend="torch")[0]
    assert torch.equal(first, ev.kmeans(x, 8, seed=3, backend="torch")[0])
    # k == N: every point is its own cluster
    assert torch.equal(ev.kmeans(x[:10], 10, backend="torch")[0], torch.arange(10))


def test_nmi_uses_number_of_classes_and_both_averages():
    x, y = random_data(n=200, d=8, classes=10, dtype=torch.float32)
    assignments, _ = ev.kmeans(x, 10, seed=0)
    for average in ("arithmetic", "geometric"):
        ref = normalized_mutual_info_score(y.numpy(), assignments.numpy(), average_method=average)
        assert ev.nmi(x, y, average=average) == pytest.approx(ref, abs=1e-12)


# --------------------------------------------------------------------------------------------
# MAP@R
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_map_at_r_matches_brute_force(metric):
    x, y = random_data(n=80, classes=6)
    y[0] = 99  # a class of one: R = 0, skipped
    assert ev.map_at_r(x, y, metric) == pytest.approx(brute_map_at_r(x, y, metric), abs=1e-12)
    assert ev.map_at_r(x, y, metric, chunk_size=3) == pytest.approx(
        brute_map_at_r(x, y, metric), abs=1e-12
    )
    x, y = integer_data()
    if metric == "euclidean":  # exact ties resolved like the brute force
        assert ev.map_at_r(x, y, metric) == pytest.approx(brute_map_at_r(x, y, metric), abs=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_map_at_r_matches_pml(metric):
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.distances import CosineSimilarity, LpDistance
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    distance = CosineSimilarity() if metric == "cosine" else LpDistance(normalize_embeddings=False)
    calculator = AccuracyCalculator(
        include=("mean_average_precision_at_r",),
        k="max_bin_count",
        knn_func=CustomKNN(distance),
        device=torch.device("cpu"),
    )
    x, y = random_data(n=150, d=16, classes=9, seed=9, dtype=torch.float32)
    ref = calculator.get_accuracy(x, y)["mean_average_precision_at_r"]
    assert ev.map_at_r(x, y, metric) == pytest.approx(ref, abs=1e-6)


def test_map_at_r_with_separate_gallery_matches_brute_force():
    xq, yq = random_data(n=30, seed=10)
    xg, yg = random_data(n=60, seed=11)
    _, idx = brute_knn(xq, xg, 60, "cosine", exclude_self=False)
    aps = []
    for i in range(30):
        r = int((yg == yq[i]).sum())
        if r:
            hits = (yg[torch.from_numpy(idx[i, :r])] == yq[i]).double()
            aps.append(float((hits.cumsum(0) / torch.arange(1, r + 1) * hits).sum() / r))
    expected = sum(aps) / len(aps)
    assert ev.map_at_r(xq, yq, gallery_embeddings=xg, gallery_labels=yg) == pytest.approx(expected)


# --------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------


def test_evaluate_combines_metrics_with_one_kmeans(monkeypatch):
    x, y = random_data(n=120, d=8, classes=6, dtype=torch.float32)
    calls = []
    real_kmeans = ev.kmeans

    def counting_kmeans(*args, **kwargs):
        calls.append(1)
        return real_kmeans(*args, **kwargs)

    monkeypatch.setattr(protocol, "kmeans", counting_kmeans)  # the module evaluate calls it in
    out = ev.evaluate(x, y, ks=(1, 4), seed=0)
    assert list(out) == ["R@1", "R@4", "NMI", "F1", "MAP@R"]
    assert len(calls) == 1
    recall = ev.recall_at_k(x, y, (1, 4))
    assert out["R@1"] == recall[1] and out["R@4"] == recall[4]
    assignments, _ = real_kmeans(torch.nn.functional.normalize(x, dim=1), 6, seed=0)
    assert out["NMI"] == pytest.approx(
        normalized_mutual_info_score(y.numpy(), assignments.numpy()), abs=1e-12
    )
    assert out["F1"] == pytest.approx(brute_f1(assignments, y))
    assert out["MAP@R"] == pytest.approx(brute_map_at_r(x, y, "cosine"), abs=1e-9)
    assert list(ev.evaluate(x, y, metrics=("map_at_r",))) == ["MAP@R"]
    assert list(ev.evaluate(x, y, metrics=("nmi",))) == ["NMI"]
    # a separate gallery (In-Shop): retrieval metrics search the gallery
    xg, yg = random_data(n=60, d=8, classes=6, seed=13, dtype=torch.float32)
    out = ev.evaluate(
        x, y, ks=(1, 2), metrics=("recall", "map_at_r"), gallery_embeddings=xg, gallery_labels=yg
    )
    assert out["R@1"] == ev.recall_at_k(x, y, (1,), xg, yg)[1]
    assert out["MAP@R"] == pytest.approx(
        ev.map_at_r(x, y, gallery_embeddings=xg, gallery_labels=yg), abs=1e-12
    )


# --------------------------------------------------------------------------------------------
# compute_embeddings
# --------------------------------------------------------------------------------------------


class TensorDataset:
    """Stand-in for dmlnb.data.LabelledDataset: ``labels`` and ``__getitem__``."""

    def __init__(self, images: Tensor, labels: Tensor) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        return self.images[i], int(self.labels[i])


class BatchDataset(TensorDataset):
    """Stand-in for an InMemoryDataset: also ``get_batch``; ``__getitem__`` must not be used."""

    def __init__(self, images: Tensor, labels: Tensor) -> None:
        super().__init__(images, labels)
        self.batches: list[Tensor] = []

    def __getitem__(self, i: int):
        raise AssertionError("compute_embeddings should use get_batch")

    def get_batch(self, indices: Tensor) -> tuple[Tensor, Tensor]:
        self.batches.append(indices)
        return self.images[indices], self.labels[indices]


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Dropout(0.5),
        nn.Linear(4 * 6 * 6, 5),
    )


@pytest.mark.parametrize("dataset_cls", [TensorDataset, BatchDataset])
def test_compute_embeddings_restores_modes(dataset_cls):
    g = torch.Generator().manual_seed(12)
    images = torch.randn(23, 1, 8, 8, generator=g)
    labels = torch.randint(0, 4, (23,), generator=g)
    model = tiny_model()
    model.train()
    model(images)  # move the BatchNorm running statistics away from their init
    model[1].eval()  # a submodule frozen in eval mode inside a training model
    dataset = dataset_cls(images, labels)
    embeddings, out_labels = ev.compute_embeddings(model, dataset, batch_size=5)
    # modes restored per submodule
    assert model.training and model[4].training and not model[1].training
    # eval-mode forward in dataset order (Dropout off, BatchNorm on running statistics)
    model.eval()
    with torch.no_grad():
        expected = model(images)
    assert embeddings.dtype == torch.float32 and embeddings.device.type == "cpu"
    assert torch.allclose(embeddings, expected, atol=1e-6)
    assert torch.equal(out_labels, labels)
    assert embeddings.requires_grad is False and not embeddings.is_inference()
    if dataset_cls is BatchDataset:
        assert torch.equal(torch.cat(dataset.batches), torch.arange(23))
        assert [len(b) for b in dataset.batches] == [5, 5, 5, 5, 3]


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def test_bad_input_raises_clear_errors():
    x, y = random_data(n=10)
    with pytest.raises(ValueError, match="one label per embedding"):
        ev.recall_at_k(x, y[:9])
    with pytest.raises(ValueError, match="K=10 asks for more neighbours"):
        ev.recall_at_k(x, y, ks=(1, 10))  # 9 others only
    with pytest.raises(ValueError, match="k=11 asks for more neighbours"):
        ev.knn(x[:3], x, 11)
    bad = x.clone()
    bad[2, 1] = float("nan")
    for fn in (ev.recall_at_k, ev.map_at_r, ev.nmi, ev.evaluate):
        with pytest.raises(ValueError, match="NaN"):
            fn(bad, y)
    with pytest.raises(ValueError, match="one label per embedding"):
        ev.recall_at_k(x, y, gallery_embeddings=x, gallery_labels=y[:5])
    with pytest.raises(ValueError, match="integer"):
        ev.recall_at_k(x, y.float())
    with pytest.raises(ValueError, match="between 1 and the number of points"):
        ev.kmeans(x, 11)
    with pytest.raises(ValueError, match="no query has another item"):
        ev.map_at_r(x, torch.arange(10))
    with pytest.raises(ValueError, match="4 entries for 3 cluster ids"):
        ev.f1_clustering(torch.zeros(3, dtype=torch.long), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown metrics"):
        ev.evaluate(x, y, metrics=("recall", "accuracy"))
