"""train / fit / train_ssdml refuse degenerate input with an error that names the problem and
the fix (issue #14)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from dmlnb.checkpoints import CheckpointError
from dmlnb.data.base import InMemoryDataset
from dmlnb.losses.triplet import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.ssdml.algorithm import PartitionSchedule, train_ssdml
from dmlnb.ssdml.angular import AngularSSDML
from dmlnb.training import fit, train

CFG = make_config(
    "smoke",
    {
        "epochs": 1,
        "steps_per_epoch": 2,
        "batch_size": 8,
        "m_per_class": 2,
        "eval_metrics": ("recall",),
        "device": "cpu",
    },
)


def _data(n_classes: int = 6, per_class: int = 4, seed: int = 0) -> InMemoryDataset:
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_classes).repeat_interleave(per_class)  # (N,)
    return InMemoryDataset(torch.randn(len(labels), 1, 4, 4, generator=g), labels)


def _relabel(dataset: InMemoryDataset, labels: torch.Tensor) -> InMemoryDataset:
    dataset.labels = labels  # bypasses the dataset's own checks, as a hand-built set would
    return dataset


class _NoLabels(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        return torch.zeros(1, 4, 4), 0


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 4))


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.write_text("I am a file")
    return path


def _broken_checkpoint(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(b"\x00" * 64)
    return run_dir


CASES = [
    # id, train set, eval set, run_dir factory, exception, words the message must hold
    (
        "empty-train-set",
        lambda: _data().subset(torch.arange(0)),
        lambda: None,
        None,
        ValueError,
        ["train_set is empty", "0 examples"],
    ),
    (
        "fewer-classes-than-a-batch-needs",
        lambda: _data(n_classes=3),
        lambda: None,
        None,
        ValueError,
        ["4 distinct classes", "got 3", "lower batch_size"],
    ),
    (
        "empty-eval-set",
        lambda: _data(),
        lambda: _data().subset(torch.arange(0)),
        None,
        ValueError,
        ["eval_set is empty", "pass None"],
    ),
    (
        "float-labels",
        lambda: _relabel(_data(), _data().labels.float()),
        lambda: None,
        None,
        TypeError,
        ["train_set.labels", "torch.float32", "labels.long()"],
    ),
    (
        "negative-labels",
        lambda: _relabel(_data(), torch.cat([torch.full((4,), -1), _data().labels[4:]])),
        lambda: None,
        None,
        ValueError,
        ["4 negative labels", "min -1", "filter them out"],
    ),
    (
        "labels-not-one-per-example",
        lambda: _relabel(_data(), _data().labels[:, None]),
        lambda: None,
        None,
        ValueError,
        ["shape (24, 1)", "one class id per example"],
    ),
    (
        "no-labels-attribute",
        _NoLabels,
        lambda: None,
        None,
        TypeError,
        ["_NoLabels", "no `labels` attribute"],
    ),
    (
        "run-dir-is-a-file",
        lambda: _data(),
        lambda: None,
        _file,
        NotADirectoryError,
        ["is a file", "run"],
    ),
    (
        "unreadable-checkpoint",
        lambda: _data(),
        lambda: None,
        _broken_checkpoint,
        CheckpointError,
        ["checkpoint.pt", "delete it"],
    ),
]


@pytest.mark.parametrize(
    "make_train, make_eval, make_run_dir, error, words",
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_train_rejects(tmp_path, make_train, make_eval, make_run_dir, error, words):
    run_dir = make_run_dir(tmp_path) if make_run_dir is not None else None
    with pytest.raises(error) as err:
        train(
            _model(), TripletLoss(), make_train(), make_eval(), CFG, run_dir=run_dir, progress=False
        )
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_empty_gallery_set_is_named():
    with pytest.raises(ValueError, match="gallery_set is empty"):
        train(
            _model(),
            TripletLoss(),
            _data(),
            _data(),
            CFG,
            gallery_set=_data().subset(torch.arange(0)),
            progress=False,
        )


def test_fit_rejects_an_empty_train_split():
    from dmlnb.data import DatasetSplits

    train_split = _data().subset(torch.arange(0))
    splits = DatasetSplits(name="fabricated", train=train_split, test=_data())
    with pytest.raises(ValueError, match="train_set is empty"):
        fit(CFG, TripletLoss(), splits=splits, progress=False)


@pytest.mark.parametrize(
    "labels, error, words",
    [
        pytest.param(
            torch.tensor([0, 1, -1, 2]),
            ValueError,
            ["labelled.labels", "1 negative"],
            id="ssdml-negative-labels",
        ),
        pytest.param(
            torch.tensor([0.0, 1.0, 1.0, 2.0]),
            TypeError,
            ["labelled.labels", "float32"],
            id="ssdml-float-labels",
        ),
    ],
)
def test_train_ssdml_rejects_bad_labelled_sets(labels, error, words):
    labelled = _relabel(
        InMemoryDataset(torch.randn(4, 1, 4, 4), torch.zeros(4, dtype=torch.long)), labels
    )
    cfg = make_config(
        None, dict(epochs=1, batch_size=4, m_per_class=2, device="cpu", eval_metrics=("recall",))
    )
    with pytest.raises(error) as err:
        train_ssdml(
            _model(),
            AngularSSDML(4, 2, k=2),
            labelled,
            None,
            None,
            cfg,
            PartitionSchedule(),
            progress=False,
        )
    for word in words:
        assert word in str(err.value)
