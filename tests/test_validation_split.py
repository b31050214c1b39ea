"""Class-disjoint validation splits (:mod:`dmlnb.data.validation`): drawn from the training
classes only, seeded independently of the run, folds that partition the classes, the evaluation
preprocessing, and an error naming the value and the fix for every bad request."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from fabricated import fabricated_cub

from dmlnb.data import (
    SPLIT_OPTIONS,
    CachedImageDataset,
    DatasetSplits,
    ImageFileDataset,
    InMemoryDataset,
    hold_out_classes,
    load_dataset,
    register_dataset,
    semi_supervised,
    validation_classes,
)
from dmlnb.data.base import decode_image
from dmlnb.data.image_folders import image_transforms


@pytest.fixture(scope="module")
def digits() -> DatasetSplits:
    return load_dataset("digits")  # train digits 0-4, test 5-9


def _names(dataset: InMemoryDataset, names: list[str]) -> list[str]:
    """The class name of every item, in order."""
    return [names[y] for y in dataset.labels.tolist()]


def _toy(classes: int, per_class: int = 3) -> DatasetSplits:
    """Splits of ``classes`` training classes (named ``c0, c1, ...``) and 2 test classes."""
    labels = torch.arange(classes).repeat_interleave(per_class)  # (N,)
    images = labels.float()[:, None, None, None].expand(-1, 1, 2, 2).contiguous()  # (N, 1, 2, 2)
    test = InMemoryDataset(torch.zeros(4, 1, 2, 2), torch.tensor([0, 0, 1, 1]))
    return DatasetSplits(
        "toy",
        InMemoryDataset(images, labels),
        test,
        class_names={"train": [f"c{i}" for i in range(classes)], "test": ["t0", "t1"]},
    )


def test_the_validation_classes_come_from_training_and_are_disjoint_from_both_sides(digits):
    split = hold_out_classes(digits, 2)
    names = split.class_names
    assert len(names["validation"]) == 2 and len(names["train"]) == 3
    assert set(names["train"]) | set(names["validation"]) == set(digits.class_names["train"])
    assert not set(names["train"]) & set(names["validation"])
    assert not (set(names["train"]) | set(names["validation"])) & set(names["test"])
    # every image goes to the side of its class, in order, labelled 0..C'-1 / 0..V-1
    # by that side's names
    before = _names(digits.train, digits.class_names["train"])  # (N,)
    held = torch.tensor([n in names["validation"] for n in before])  # (N,)
    assert torch.equal(split.validation.images, digits.train.images[held])
    assert torch.equal(split.train.images, digits.train.images[~held])
    assert _names(split.validation, names["validation"]) == [n for n, h in zip(before, held) if h]
    assert _names(split.train, names["train"]) == [n for n, h in zip(before, held) if not h]
    assert sorted(set(split.train.labels.tolist())) == [0, 1, 2]
    assert sorted(set(split.validation.labels.tolist())) == [0, 1]
    assert split.test is digits.test and split.num_train_classes == 3
    assert (
        digits.validation is None and len(digits.class_names["train"]) == 5
    )  # the input is unchanged


def test_load_dataset_applies_it_to_a_registered_dataset(digits):
    loaded = load_dataset("digits", validation=0.4, validation_seed=3)
    direct = hold_out_classes(digits, 0.4, seed=3)
    assert loaded.class_names == direct.class_names
    assert torch.equal(loaded.validation.images, direct.validation.images)
    assert torch.equal(loaded.train.labels, direct.train.labels)
    options = inspect.signature(load_dataset).parameters
    assert {k: options[k].default for k in SPLIT_OPTIONS} == SPLIT_OPTIONS


def test_the_draw_depends_on_its_seed_only_not_on_the_run_seed():
    torch.manual_seed(1)
    state = torch.get_rng_state()
    a = validation_classes(40, 0.25, seed=0)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is not consumed
    torch.manual_seed(2)
    assert torch.equal(validation_classes(40, 0.25, seed=0), a)
    assert int(a.sum()) == 10
    others = [validation_classes(40, 0.25, seed=s) for s in range(1, 4)]
    assert any(not torch.equal(o, a) for o in others)
    assert torch.equal(validation_classes(40, 10, seed=0), a)  # a count of 10 = a fraction of 0.25


@pytest.mark.parametrize("classes", [0.25, 5])
def test_folds_partition_the_training_classes(classes):
    folds = torch.stack(
        [validation_classes(20, classes, seed=7, fold=k) for k in range(4)]
    )  # (4, C)
    assert torch.equal(
        folds.sum(0), torch.ones(20, dtype=torch.long)
    )  # every class in exactly one fold
    assert folds.sum(1).tolist() == [5, 5, 5, 5]
    toy = _toy(20)
    held = [
        set(hold_out_classes(toy, classes, seed=7, fold=k).class_names["validation"])
        for k in range(4)
    ]
    assert set().union(*held) == set(toy.class_names["train"]) and sum(len(h) for h in held) == 20


def test_uneven_folds_still_partition_the_classes():
    folds = torch.stack(
        [validation_classes(10, 0.3, fold=k) for k in range(3)]
    )  # round(1 / 0.3) = 3 folds
    assert torch.equal(folds.sum(0), torch.ones(10, dtype=torch.long)) and sorted(
        folds.sum(1).tolist()
    ) == [3, 3, 4]


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"classes": 1.0}, ValueError, ["validation=1.0", "outside (0, 1)", "0.2"]),
        ({"classes": 0.0}, ValueError, ["validation=0.0", "outside (0, 1)"]),
        ({"classes": -0.5}, ValueError, ["validation=-0.5", "outside (0, 1)"]),
        ({"classes": 0}, ValueError, ["validation=0", "count >= 1"]),
        ({"classes": True}, TypeError, ["validation=True", "fraction"]),
        ({"classes": "0.2"}, TypeError, ["validation='0.2'", "fraction"]),
        ({"classes": 1}, ValueError, ["holds out 1 and keeps 4", "at least 2"]),
        ({"classes": 4}, ValueError, ["holds out 4 and keeps 1", "at least 2"]),
        ({"classes": 0.1}, ValueError, ["validation=0.1", "holds out 0", "at least 2"]),
        ({"classes": 9}, ValueError, ["holds out 5 and keeps 0"]),
        (
            {"classes": 0.4, "fold": 2},
            ValueError,
            ["validation_fold=2 is out of range", "2 folds", "0..1"],
        ),
        ({"classes": 0.4, "fold": -1}, ValueError, ["validation_fold=-1 is out of range"]),
        ({"classes": 0.8, "fold": 0}, ValueError, ["1 fold(s)", "at least 2", "validation=0.25"]),
        ({"classes": 0.4, "fold": 0.5}, TypeError, ["validation_fold=0.5"]),
        ({"classes": 0.4, "seed": "a"}, TypeError, ["validation_seed='a'"]),
    ],
)
def test_every_bad_request_names_the_value_and_the_fix(digits, kwargs, error, words):
    with pytest.raises(error) as info:
        hold_out_classes(digits, **kwargs)
    for word in words:
        assert word in str(info.value)


def test_same_class_semi_supervised_and_repeated_splits_are_refused(digits):
    with pytest.raises(
        ValueError, match=r"share 10 classes .*class-disjoint split.*select_on='test'"
    ):
        load_dataset("digits", split="samples", validation=0.2)
    with pytest.raises(ValueError, match=r"unlabelled part.*semi_supervised\(splits"):
        load_dataset("digits", labelled_per_class=5, validation=2)
    with pytest.raises(ValueError, match="already hold a validation split"):
        hold_out_classes(hold_out_classes(digits, 2), 2)


def test_semi_supervised_after_the_hold_out_keeps_the_validation_split(digits):
    split = semi_supervised(hold_out_classes(digits, 2), 5)
    assert split.validation is not None and split.num_train_classes == 3 and len(split.train) == 15
    assert set(split.unlabelled_targets.tolist()) == {
        0,
        1,
        2,
    }  # no validation class among the unlabelled


def test_load_dataset_options_are_checked_and_listed():
    with pytest.raises(TypeError) as info:
        load_dataset("digits", validaton=0.2)
    assert "validaton" in str(info.value)
    for option in ("split", "seed", "validation=None", "validation_seed=0", "validation_fold=None"):
        assert option in str(info.value)
    with pytest.raises(
        ValueError, match=r"validation_fold=1 choose a validation split.*validation=0.2"
    ):
        load_dataset("digits", validation_fold=1)
    with pytest.raises(ValueError, match=r"validation_seed=2"):
        load_dataset("digits", validation_seed=2)


def test_a_loader_may_not_take_the_validation_options():
    def loader(root: Path, *, validation: float = 0.1) -> DatasetSplits:
        raise AssertionError("never called")

    with pytest.raises(ValueError, match=r"takes option\(s\) \['validation'\].*rename"):
        register_dataset("validation-clash-test")(loader)


@pytest.mark.parametrize("decoded_cache", [True, False], ids=["cache", "pil"])
def test_a_file_backed_validation_split_is_evaluated_with_the_test_crop(
    tmp_path, monkeypatch, decoded_cache
):
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))
    fabricated_cub(tmp_path / "data", [c for c in (1, 2, 3, 4, 101, 102) for _ in range(3)])
    split = load_dataset(
        "cub200", root=tmp_path / "data", image_size=24, decoded_cache=decoded_cache, validation=2
    )
    assert (
        len(split.train) == 6 and len(split.validation) == 6 and split.validation.num_classes == 2
    )
    assert not set(split.class_names["train"]) & set(split.class_names["validation"])
    torch.manual_seed(0)
    first = torch.stack([split.validation[i][0] for i in range(6)])  # (6, 3, 24, 24)
    torch.manual_seed(1)
    assert torch.equal(
        first, torch.stack([split.validation[i][0] for i in range(6)])
    )  # no random crop
    if decoded_cache:
        assert isinstance(split.validation, CachedImageDataset) and not split.validation.train
        assert split.train.train  # training keeps its augmentation
    else:
        assert isinstance(split.validation, ImageFileDataset)
        test_transform = image_transforms(24)[1]
        assert torch.equal(first[0], test_transform(decode_image(split.validation.paths[0])))
        assert split.train.transform is not split.validation.transform
