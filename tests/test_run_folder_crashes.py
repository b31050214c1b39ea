"""A run folder after a crash at any point: re-running it leaves record.json consistent with the
checkpoint (finished, every epoch) and removes only our own stray temporary files (issue #14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fabricated import CrashAt, ssdml_data

from dmlnb.checkpoints import load_checkpoint, remove_stray_temp_files
from dmlnb.data import load_dataset
from dmlnb.hooks import Hook
from dmlnb.losses.triplet import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.records import write_json_atomic
from dmlnb.ssdml.algorithm import PartitionSchedule, train_ssdml
from dmlnb.ssdml.angular import AngularSSDML
from dmlnb.training import fit

CFG = make_config("smoke", {"epochs": 3, "steps_per_epoch": 4, "eval_metrics": ("recall",)})
OURS = (".checkpoint.pt.k2j4h1.tmp", ".record.json.x81kq0.tmp", ".best.pt.q0a9zz.tmp")
OTHERS = (".other.json.abc.tmp", "notes.tmp", ".checkpoint.pt.bak")


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


class _Counter(Hook):
    def __init__(self) -> None:
        self.steps = 0

    def on_step_end(self, state):
        self.steps += 1


def _plant_temp_files(run_dir: Path) -> None:
    for name in OURS + OTHERS:
        (run_dir / name).write_bytes(b"half-written")


def _assert_clean_and_consistent(run_dir: Path, epochs: int) -> dict:
    on_disk = json.loads((run_dir / "record.json").read_text())
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert on_disk["status"] == "finished"
    assert [r["epoch"] for r in on_disk["history"] if r["epoch"] > 0] == list(range(1, epochs + 1))
    assert on_disk["history"] == json.loads(json.dumps(ckpt["record"]["history"]))
    assert on_disk["best"] == json.loads(json.dumps(ckpt["record"]["best"]))
    names = {p.name for p in run_dir.iterdir()}
    assert not names & set(OURS)  # our stray temp files are gone
    assert set(OTHERS) <= names  # files that are not ours are never touched
    return on_disk


def _stale(record: dict, epochs_done: int) -> dict:
    """The record as the previous record.json write left it: running, ``epochs_done`` epochs."""
    stale = json.loads(json.dumps(record))
    stale.update(status="running", finished=None, best=None)
    stale.pop("total_train_seconds", None)
    stale["history"] = [r for r in stale["history"] if r["epoch"] <= epochs_done]
    return stale


def test_killed_after_the_last_checkpoint_before_the_last_record(digits, tmp_path):
    run_dir = tmp_path / "r"
    fit(CFG, TripletLoss(), splits=digits, run_dir=run_dir, progress=False)
    record = json.loads((run_dir / "record.json").read_text())
    write_json_atomic(run_dir / "record.json", _stale(record, CFG.epochs - 1))
    _plant_temp_files(run_dir)
    counter = _Counter()
    _, rec = fit(
        CFG, TripletLoss(), splits=digits, run_dir=run_dir, hooks=[counter], progress=False
    )
    assert counter.steps == 0 and rec.data["status"] == "finished"  # reloaded, not retrained
    assert _assert_clean_and_consistent(run_dir, CFG.epochs) == json.loads(json.dumps(rec.data))


def test_killed_before_the_first_record_write(digits, tmp_path):
    run_dir = tmp_path / "r"
    fit(CFG, TripletLoss(), splits=digits, run_dir=run_dir, progress=False)
    (run_dir / "record.json").unlink()
    _plant_temp_files(run_dir)
    fit(CFG, TripletLoss(), splits=digits, run_dir=run_dir, progress=False)
    _assert_clean_and_consistent(run_dir, CFG.epochs)


def test_killed_during_a_checkpoint_write_mid_run(digits, tmp_path):
    """Epoch 2 died while its checkpoint was being written: a temp file is left, checkpoint.pt
    and record.json hold epoch 1; the re-run resumes, finishes and cleans up."""
    run_dir = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        fit(
            CFG,
            TripletLoss(),
            splits=digits,
            run_dir=run_dir,
            hooks=[CrashAt(CFG.steps_per_epoch + 1)],
            progress=False,
        )
    _plant_temp_files(run_dir)
    _, rec = fit(
        CFG, TripletLoss(), splits=digits, run_dir=run_dir, hooks=[CrashAt(-1)], progress=False
    )
    assert rec.data["resumed"] == 1
    _assert_clean_and_consistent(run_dir, CFG.epochs)


def test_killed_between_checkpoint_and_record_mid_run_then_killed_again(digits, tmp_path):
    """The checkpoint of epoch 1 is on disk, record.json never got epoch 1: the re-run writes
    the record from the checkpoint before training on, so a second kill leaves it consistent."""
    run_dir = tmp_path / "r"
    with pytest.raises(KeyboardInterrupt):
        fit(
            CFG,
            TripletLoss(),
            splits=digits,
            run_dir=run_dir,
            hooks=[CrashAt(CFG.steps_per_epoch + 1)],
            progress=False,
        )
    record = json.loads((run_dir / "record.json").read_text())
    write_json_atomic(run_dir / "record.json", _stale(record, 0))
    with pytest.raises(KeyboardInterrupt):  # killed again before epoch 2 ends
        fit(
            CFG,
            TripletLoss(),
            splits=digits,
            run_dir=run_dir,
            hooks=[CrashAt(CFG.steps_per_epoch + 1)],
            progress=False,
        )
    again = json.loads((run_dir / "record.json").read_text())
    assert [r["epoch"] for r in again["history"]] == [1] and again["resumed"] == 1
    _plant_temp_files(run_dir)
    fit(CFG, TripletLoss(), splits=digits, run_dir=run_dir, hooks=[CrashAt(-1)], progress=False)
    _assert_clean_and_consistent(run_dir, CFG.epochs)


def test_remove_stray_temp_files_removes_only_ours(tmp_path):
    _plant_temp_files(tmp_path)
    removed = remove_stray_temp_files(tmp_path)
    assert sorted(p.name for p in removed) == sorted(OURS)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(OTHERS)
    assert remove_stray_temp_files(tmp_path / "missing") == []


def _ssdml_run(run_dir: Path):
    from torch import nn

    torch.manual_seed(0)
    network = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 6))
    cfg = make_config(
        None,
        dict(
            epochs=4,
            batch_size=20,
            m_per_class=10,
            lr=1e-2,
            eval_every=2,
            device="cpu",
            eval_metrics=("recall",),
            seed=3,
        ),
    )
    lab, unl, test = ssdml_data()
    return train_ssdml(
        network,
        AngularSSDML(6, 4, k=4),
        lab,
        unl,
        test,
        cfg,
        PartitionSchedule(partition_size=20, epochs_per_partition=2),
        spec={"m": "ours"},
        run_dir=run_dir,
        progress=False,
    )


def test_ssdml_run_folder_is_repaired_after_a_crash(tmp_path):
    run_dir = tmp_path / "s"
    rec = _ssdml_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    assert record == json.loads(json.dumps(rec.data))
    write_json_atomic(run_dir / "record.json", _stale(record, 2))
    _plant_temp_files(run_dir)
    again = _ssdml_run(run_dir)
    assert "resumed" not in again.data  # the finished checkpoint is reloaded, not retrained
    _assert_clean_and_consistent(run_dir, 4)


def test_ssdml_record_says_finished_only_with_the_final_checkpoint(tmp_path, monkeypatch):
    """Killed while the final checkpoint is written: record.json must not say "finished" yet
    (it would be reloaded as finished without weights to match); the re-run resumes the last
    epoch (inside the last partition) and ends where an uninterrupted run does."""
    from dmlnb.training import checkpointing

    uninterrupted = _ssdml_run(tmp_path / "u")
    real_save = checkpointing.save_checkpoint

    def killed_at_the_final_checkpoint(obj, path):
        if Path(path).name == "checkpoint.pt" and obj["epoch"] == 4:
            (Path(path).parent / ".checkpoint.pt.dead01.tmp").write_bytes(b"half")
            raise KeyboardInterrupt
        real_save(obj, path)

    run_dir = tmp_path / "s"
    with monkeypatch.context() as m:
        m.setattr(checkpointing, "save_checkpoint", killed_at_the_final_checkpoint)
        with pytest.raises(KeyboardInterrupt):
            _ssdml_run(run_dir)
    on_disk = json.loads((run_dir / "record.json").read_text())
    assert (
        on_disk["status"] == "running" and load_checkpoint(run_dir / "checkpoint.pt")["epoch"] == 3
    )
    resumed = _ssdml_run(run_dir)
    assert resumed.data["resumed"] == 1 and resumed.data["device_changed"] is False
    assert not (run_dir / ".checkpoint.pt.dead01.tmp").exists()
    drop = {"train_seconds", "eval_seconds", "prepare_seconds", "images_per_second", "step_seconds"}

    def strip(history):
        return [
            {
                k: ({m: v for m, v in x.items() if m not in drop} if isinstance(x, dict) else x)
                for k, x in row.items()
                if k not in drop
            }
            for row in history
        ]

    assert strip(resumed.data["history"]) == strip(uninterrupted.data["history"])
    on_disk = json.loads((run_dir / "record.json").read_text())
    assert on_disk["status"] == "finished" and on_disk["history"] == json.loads(
        json.dumps(resumed.data["history"])
    )
