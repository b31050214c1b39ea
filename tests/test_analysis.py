"""dmlnb.analysis against brute-force float64 loops over every pair."""

import itertools

import numpy as np
import pytest
import torch

from dmlnb.analysis import (
    nearest_reference_similarity,
    nearest_same_and_other,
    same_class_similarities,
    similarity_summary,
)
from dmlnb.evaluation import recall_at_k


def _cos(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def _data(n=37, d=5, classes=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * 3.0  # unnormalised on purpose
    y = torch.randint(0, classes, (n,), generator=g)
    y[torch.randperm(n, generator=g)] = y.clone()  # shuffled, not grouped by class
    return x, y


@pytest.mark.parametrize("chunk", [1, 4, 7, 1000])
def test_same_class_similarities_match_all_pairs(chunk):
    x, y = _data()
    got = same_class_similarities(x, y, chunk_size=chunk)
    xn, yn = x.numpy(), y.numpy()
    expected = []
    for c in sorted(set(yn.tolist())):
        members = [i for i in range(len(yn)) if yn[i] == c]
        expected += [_cos(xn[i], xn[j]) for i, j in itertools.combinations(members, 2)]
    assert got.shape == (len(expected),)
    np.testing.assert_allclose(got.numpy(), np.array(expected), rtol=0, atol=1e-12)


def test_same_class_pairs_count_and_singletons():
    x = torch.randn(10, 3)
    y = torch.tensor([0, 0, 0, 1, 2, 2, 3, 3, 3, 3])  # class 1 is a singleton: no pair
    out = same_class_similarities(x, y, chunk_size=3)
    assert out.numel() == 3 + 0 + 1 + 6
    assert out.dtype == torch.float32


def test_same_class_all_one_class_and_identical_points():
    x = torch.ones(4, 2)
    out = same_class_similarities(x, torch.zeros(4, dtype=torch.long))
    torch.testing.assert_close(out, torch.ones(6))


@pytest.mark.parametrize("chunk", [1, 5, 1000])
def test_nearest_reference_similarity_brute_force(chunk):
    q, _ = _data(n=23, seed=1)
    r, _ = _data(n=31, seed=2)
    sim, idx = nearest_reference_similarity(q, r, chunk_size=chunk)
    for i in range(len(q)):
        s = [_cos(q[i].numpy(), r[j].numpy()) for j in range(len(r))]
        assert idx[i] == int(np.argmax(s))
        assert abs(float(sim[i]) - max(s)) < 1e-12


def test_nearest_reference_does_not_exclude_an_identical_point():
    r = torch.randn(8, 4)
    sim, idx = nearest_reference_similarity(r[:3].clone(), r)
    torch.testing.assert_close(sim, torch.ones(3), atol=1e-6, rtol=0)
    assert idx.tolist() == [0, 1, 2]


@pytest.mark.parametrize("chunk", [1, 6, 1000])
def test_nearest_same_and_other_brute_force(chunk):
    x, y = _data(n=41, seed=3)
    y[0] = 99  # a singleton class: no same-class neighbour
    res = nearest_same_and_other(x, y, chunk_size=chunk)
    xn, yn = x.numpy(), y.numpy()
    for i in range(len(yn)):
        same = [_cos(xn[i], xn[j]) for j in range(len(yn)) if j != i and yn[j] == yn[i]]
        other = [_cos(xn[i], xn[j]) for j in range(len(yn)) if yn[j] != yn[i]]
        if same:
            assert abs(float(res.same[i]) - max(same)) < 1e-12
        else:
            assert np.isnan(float(res.same[i]))
        assert abs(float(res.other[i]) - max(other)) < 1e-12
    assert not bool(res.correct[0])  # nan never counts as correct


def test_nearest_same_and_other_accuracy_is_recall_at_1():
    x, y = _data(n=200, d=8, classes=10, seed=4)
    x = x.float()
    res = nearest_same_and_other(x, y, chunk_size=64)
    r1 = recall_at_k(x, y, ks=(1,))[1]
    assert res.accuracy == pytest.approx(r1, abs=1e-12)
    # a point is correct exactly when its nearest neighbour shares its label
    sim = torch.nn.functional.normalize(x, dim=1) @ torch.nn.functional.normalize(x, dim=1).T
    sim.fill_diagonal_(-2.0)
    nn_label = y[sim.argmax(dim=1)]
    assert torch.equal(res.correct, nn_label == y)


def test_nearest_same_and_other_single_class_gives_nan_other():
    res = nearest_same_and_other(torch.randn(5, 3), torch.zeros(5, dtype=torch.long))
    assert torch.isnan(res.other).all() and torch.isfinite(res.same).all()


def test_input_checks():
    with pytest.raises(ValueError, match="2-D"):
        same_class_similarities(torch.randn(5), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="labels must have shape"):
        nearest_same_and_other(torch.randn(5, 2), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        nearest_reference_similarity(torch.full((2, 2), float("nan")), torch.randn(3, 2))
    with pytest.raises(ValueError, match="chunk_size"):
        same_class_similarities(torch.randn(5, 2), torch.zeros(5, dtype=torch.long), chunk_size=0)


def test_similarity_summary():
    v = torch.tensor([0.0, 0.5, 0.95, 1.0, float("nan")])
    s = similarity_summary(v, threshold=0.9)
    assert s["mean"] == pytest.approx(2.45 / 4)
    assert s["median"] == pytest.approx(0.725)
    assert s["frac>0.9"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        similarity_summary(torch.tensor([float("nan")]))
