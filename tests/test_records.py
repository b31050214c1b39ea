import json
import os

import pytest
import torch

from dmlnb.records import RunRecord, atomic_torch_save, write_json_atomic


def test_atomic_json_keeps_old_file_when_serialisation_fails(tmp_path):
    path = tmp_path / "r" / "record.json"
    write_json_atomic(path, {"a": 1, "t": torch.tensor([1.0, 2.0]), "p": tmp_path})
    assert json.loads(path.read_text())["t"] == [1.0, 2.0]
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": 2, "bad": object()})
    assert json.loads(path.read_text())["a"] == 1  # the old record survives
    assert os.listdir(path.parent) == ["record.json"]  # no temp file left behind


def test_atomic_torch_save_roundtrip(tmp_path):
    atomic_torch_save({"w": torch.arange(3)}, tmp_path / "c.pt")
    assert torch.equal(torch.load(tmp_path / "c.pt")["w"], torch.arange(3))


def test_best_epoch_tracking_and_history_frame(tmp_path):
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    # the evaluation before training is history, never the best epoch
    assert not rec.add_epoch({"epoch": 0, "loss": None, "train_seconds": 0.0, "metrics": {"R@1": 0.9}}, "R@1")
    assert rec.add_epoch({"epoch": 1, "loss": 1.0, "train_seconds": 1.0, "metrics": {"R@1": 0.3}}, "R@1")
    assert not rec.add_epoch({"epoch": 2, "loss": 0.9, "train_seconds": 1.0, "metrics": None}, "R@1")
    assert rec.add_epoch({"epoch": 3, "loss": 0.8, "train_seconds": 2.0, "metrics": {"R@1": 0.5}}, "R@1")
    assert not rec.add_epoch({"epoch": 4, "loss": 0.7, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "R@1")
    assert rec.best["epoch"] == 3 and rec.best["seconds_to_best"] == 4.0
    with pytest.raises(KeyError, match="NMI"):
        rec.add_epoch({"epoch": 5, "loss": 0.7, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "NMI")
    frame = rec.history_frame()
    assert list(frame.index) == [0, 1, 2, 3, 4, 5] and frame.loc[3, "R@1"] == 0.5
    rec.save(tmp_path / "rec.json")
    assert RunRecord.load(tmp_path / "rec.json").data == json.loads(json.dumps(rec.data))


def test_evaluations_and_whether_the_best_is_the_last():
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    assert rec.evaluations() == [] and not rec.best_is_last
    rows = [{"epoch": 0, "train_seconds": 0.0, "metrics": {"R@1": 0.9}},  # before training: not an evaluation
            {"epoch": 1, "train_seconds": 1.0, "metrics": {"R@1": 0.3}},
            {"epoch": 2, "train_seconds": 1.0, "metrics": None},
            {"epoch": 3, "train_seconds": 1.0, "metrics": {"R@1": 0.5}}]
    for row in rows:
        rec.add_epoch(row, "R@1")
    assert [r["epoch"] for r in rec.evaluations()] == [1, 3] and rec.best_is_last
    rec.add_epoch({"epoch": 4, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "R@1")
    assert not rec.best_is_last  # the best (epoch 3) was passed by a later evaluation
    rec.add_epoch({"epoch": 5, "train_seconds": 1.0, "metrics": None}, "R@1")
    assert not rec.best_is_last and rec.evaluations()[-1]["epoch"] == 4
