"""Class-balanced batch samplers: batch composition, epoch rule, seeding, padding, ratio batches."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from dmlnb.samplers import ClassRatioSampler, MPerClassSampler


def imbalanced_labels(seed: int = 0) -> torch.Tensor:
    """30 classes of 2..17 images, a 2-image class, 15 unlabelled (-1) samples, shuffled."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(4, 18, (30,), generator=g)
    sizes[7] = 2  # a class smaller than m = 4
    y = torch.cat([torch.repeat_interleave(torch.arange(30), sizes), torch.full((15,), -1)])
    return y[torch.randperm(len(y), generator=g)]


def epoch(sampler, e: int) -> list[list[int]]:
    sampler.set_epoch(e)
    return list(sampler)


def test_composition_mper_class():
    y = imbalanced_labels()
    m, B = 4, 32
    s = MPerClassSampler(y, m=m, batch_size=B, seed=3)
    for e in range(3):
        for batch in epoch(s, e):
            assert len(batch) == B
            labels = y[batch]
            assert (labels >= 0).all(), "an unlabelled sample was drawn"
            groups = labels.view(B // m, m)  # contiguous groups of one class
            assert (groups == groups[:, :1]).all()
            assert groups[:, 0].unique().numel() == B // m, "classes repeat within a batch"


def test_epoch_length_default_and_override():
    y = imbalanced_labels()
    n_labelled = int((y >= 0).sum())
    s = MPerClassSampler(y, m=4, batch_size=32)
    assert len(s) == n_labelled // 32 and len(list(s)) == len(s)
    s = MPerClassSampler(y, m=4, batch_size=32, num_batches=7)
    assert len(s) == 7 and len(list(s)) == 7


def test_seeds_epochs_and_global_rng():
    y = imbalanced_labels()
    a = MPerClassSampler(y, m=4, batch_size=32, seed=1)
    b = MPerClassSampler(y, m=4, batch_size=32, seed=1)
    c = MPerClassSampler(y, m=4, batch_size=32, seed=2)
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    state = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    first = epoch(a, 0)
    # The sampler never touches the global generators ...
    assert torch.equal(torch.get_rng_state(), state[0])
    assert np.array_equal(np.random.get_state()[1], state[1]) and random.getstate() == state[2]
    # ... and does not depend on them.
    torch.manual_seed(999)
    assert epoch(b, 0) == first
    assert epoch(c, 0) != first
    assert epoch(a, 1) != first


def test_set_epoch_is_independent_of_history():
    y = imbalanced_labels()
    walked = MPerClassSampler(y, m=4, batch_size=32, seed=5)
    for e in range(3):
        epoch(walked, e)
    fresh = MPerClassSampler(y, m=4, batch_size=32, seed=5)
    assert epoch(walked, 3) == epoch(fresh, 3)


def test_small_class_is_padded_with_its_own_images():
    y = imbalanced_labels()
    small = torch.nonzero(y == 7).squeeze(1).tolist()  # the 2-image class
    s = MPerClassSampler(y, m=4, batch_size=32, seed=0, num_batches=200)
    seen = 0
    for batch in s:
        groups = torch.tensor(batch).view(8, 4)
        for group in groups.tolist():
            if y[group[0]] == 7:
                seen += 1
                assert sorted(set(group)) == sorted(small)  # both images, then repeats of them
    assert seen > 0


def test_images_of_a_class_do_not_repeat_before_the_class_is_used_up():
    """The epoch rule: a class's draws walk through a permutation of its images (Sec. 3 of the
    MPerClassSampler docstring), so every consecutive n_c of its draws are distinct."""
    y = imbalanced_labels()
    m = 4
    s = MPerClassSampler(y, m=m, batch_size=32, seed=11, num_batches=60)  # several passes
    for e in range(2):
        draws: dict[int, list[int]] = {}
        for batch in epoch(s, e):
            for group in torch.tensor(batch).view(-1, m).tolist():
                c = int(y[group[0]])
                n_c = int((y == c).sum())
                draws.setdefault(c, []).extend(group[: min(m, n_c)])  # padding excluded
        for c, seq in draws.items():
            n_c = int((y == c).sum())
            for k in range(0, len(seq), n_c):
                chunk = seq[k : k + n_c]
                assert len(set(chunk)) == len(chunk), f"class {c} repeats an image within a pass"
                if len(chunk) == n_c:
                    assert set(chunk) == set(torch.nonzero(y == c).squeeze(1).tolist())


def test_epoch_visits_images_not_classes_uniformly():
    """Class sizes multiples of m, B | N: every image exactly once per epoch. Uniform class
    sampling (PML's rule), simulated here independently, leaves many images out."""
    y = torch.repeat_interleave(torch.arange(40), 8)  # 320 images
    m, B = 4, 32
    s = MPerClassSampler(y, m=m, batch_size=B, seed=0)
    for e in range(10):
        assert sorted(sum(epoch(s, e), [])) == list(range(len(y)))

    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(len(y) // B):
        for c in torch.randperm(40, generator=g)[: B // m].tolist():
            members = torch.nonzero(y == c).squeeze(1)
            seen.update(members[torch.randperm(8, generator=g)[:m]].tolist())
    assert len(seen) / len(y) < 0.9


def test_class_ratio_sampler_counts_unique_classes():
    y = imbalanced_labels()
    # Song et al. ratio 0.25 -> 8 classes x 4 at B = 32: the same batches as MPerClassSampler(m=4).
    r = ClassRatioSampler(y, batch_size=32, ratio=0.25, seed=4)
    assert epoch(r, 2) == epoch(MPerClassSampler(y, m=4, batch_size=32, seed=4), 2)
    # Ratio 0.75 at B = 16: C = 12 classes, 4 of them with 2 images and 8 with 1.
    r = ClassRatioSampler(y, batch_size=16, ratio=0.75, seed=0)
    for batch in r:
        labels = y[batch]
        assert len(batch) == 16 and (labels >= 0).all()
        counts = Counter(labels.tolist())
        assert len(counts) == 12 and sorted(counts.values()) == [1] * 8 + [2] * 4
    assert ClassRatioSampler(y, batch_size=16, classes_per_batch=5).classes_per_batch == 5


def test_works_as_dataloader_batch_sampler():
    y = imbalanced_labels()
    data = TensorDataset(torch.arange(len(y)), y)
    loader = DataLoader(data, batch_sampler=MPerClassSampler(y, m=4, batch_size=32, seed=0))
    for idx, labels in loader:
        assert torch.equal(y[idx], labels) and len(idx) == 32


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(m=3, batch_size=32), "multiple of m"),
        (dict(m=2, batch_size=128), "distinct classes"),  # 64 classes needed, 30 available
        (dict(m=4, batch_size=32, num_batches=0), "num_batches"),
    ],
)
def test_bad_configuration_is_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MPerClassSampler(imbalanced_labels(), **kwargs)


def test_bad_labels_are_rejected():
    with pytest.raises(ValueError, match="-1 for an unlabelled"):
        MPerClassSampler(torch.tensor([0, 0, 1, 1, -2]), m=2, batch_size=4)
    with pytest.raises(ValueError, match="integers"):
        MPerClassSampler(torch.tensor([0.0, 1.0]), m=1, batch_size=2)
    with pytest.raises(ValueError, match="fewer than batch_size"):
        MPerClassSampler(torch.tensor([0, 0, 1, 1, 2, -1, -1]), m=2, batch_size=6)


def test_a_sampler_is_named_by_its_settings_not_its_address():
    """A run record stores ``repr(sampler)``: equal samplers print alike, in every process."""
    y = imbalanced_labels()
    a, b = (
        MPerClassSampler(y, m=4, batch_size=16, seed=3),
        MPerClassSampler(y, m=4, batch_size=16, seed=3),
    )
    assert (
        repr(a)
        == repr(b)
        == f"MPerClassSampler(batch_size=16, classes_per_batch=4, seed=3, num_batches={len(a)})"
    )
    assert repr(ClassRatioSampler(y, 16, classes_per_batch=5)).startswith(
        "ClassRatioSampler(batch_size=16, classes_per_batch=5,"
    )
