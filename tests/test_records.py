import json
import os
import re

import pytest
import torch
from fabricated import epoch_row, selected_record

from dmlnb.records import (
    RecordError,
    RunRecord,
    atomic_torch_save,
    write_json_atomic,
    write_text_atomic,
)


def test_atomic_json_keeps_old_file_when_serialisation_fails(tmp_path):
    path = tmp_path / "r" / "record.json"
    write_json_atomic(path, {"a": 1, "t": torch.tensor([1.0, 2.0]), "p": tmp_path})
    assert json.loads(path.read_text())["t"] == [1.0, 2.0]
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": 2, "bad": object()})
    assert json.loads(path.read_text())["a"] == 1  # the old record survives
    assert os.listdir(path.parent) == ["record.json"]  # no temp file left behind


def test_atomic_text_is_never_seen_empty_or_partial(tmp_path, monkeypatch):
    # a shard polls for the launcher's abort file and reads it as soon as it exists: the file must
    # not exist until its whole text is on disk (a plain write_text creates it empty first)
    path = tmp_path / "abort"
    seen_while_writing = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (seen_while_writing.append(path.exists()), real_fsync(fd))
    )
    write_text_atomic(path, "worker 0 of 2 failed (exit status 1)\n")
    assert seen_while_writing == [False]
    assert path.read_text() == "worker 0 of 2 failed (exit status 1)\n"
    assert os.listdir(tmp_path) == ["abort"]


def test_atomic_torch_save_roundtrip(tmp_path):
    atomic_torch_save({"w": torch.arange(3)}, tmp_path / "c.pt")
    assert torch.equal(torch.load(tmp_path / "c.pt")["w"], torch.arange(3))


def test_best_epoch_tracking_and_history_frame(tmp_path):
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    # the evaluation before training is history, never the best epoch
    assert not rec.add_epoch(
        {"epoch": 0, "loss": None, "train_seconds": 0.0, "metrics": {"R@1": 0.9}}, "R@1"
    )
    assert rec.add_epoch(
        {"epoch": 1, "loss": 1.0, "train_seconds": 1.0, "metrics": {"R@1": 0.3}}, "R@1"
    )
    assert not rec.add_epoch(
        {"epoch": 2, "loss": 0.9, "train_seconds": 1.0, "metrics": None}, "R@1"
    )
    assert rec.add_epoch(
        {"epoch": 3, "loss": 0.8, "train_seconds": 2.0, "metrics": {"R@1": 0.5}}, "R@1"
    )
    assert not rec.add_epoch(
        {"epoch": 4, "loss": 0.7, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "R@1"
    )
    assert rec.best["epoch"] == 3 and rec.best["seconds_to_best"] == 4.0
    with pytest.raises(KeyError, match="NMI"):
        rec.add_epoch(
            {"epoch": 5, "loss": 0.7, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "NMI"
        )
    frame = rec.history_frame()
    assert list(frame.index) == [0, 1, 2, 3, 4, 5] and frame.loc[3, "R@1"] == 0.5
    rec.save(tmp_path / "rec.json")
    assert RunRecord.load(tmp_path / "rec.json").data == json.loads(json.dumps(rec.data))


def test_evaluations_and_whether_the_best_is_the_last():
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    assert rec.evaluations() == [] and not rec.best_is_last
    rows = [
        {
            "epoch": 0,
            "train_seconds": 0.0,
            "metrics": {"R@1": 0.9},
        },  # before training: not an evaluation
        {"epoch": 1, "train_seconds": 1.0, "metrics": {"R@1": 0.3}},
        {"epoch": 2, "train_seconds": 1.0, "metrics": None},
        {"epoch": 3, "train_seconds": 1.0, "metrics": {"R@1": 0.5}},
    ]
    for row in rows:
        rec.add_epoch(row, "R@1")
    assert [r["epoch"] for r in rec.evaluations()] == [1, 3] and rec.best_is_last
    rec.add_epoch({"epoch": 4, "train_seconds": 1.0, "metrics": {"R@1": 0.4}}, "R@1")
    assert not rec.best_is_last  # the best (epoch 3) was passed by a later evaluation
    rec.add_epoch({"epoch": 5, "train_seconds": 1.0, "metrics": None}, "R@1")
    assert not rec.best_is_last and rec.evaluations()[-1]["epoch"] == 4


# ------------------------------------------------------------------ selection on a validation split
TEST_R1 = [0.5, 0.7, 0.6, 0.8, 0.75]  # epochs 1..5: the test classes peak at epoch 4
VAL_R1 = [
    0.6,
    0.9,
    0.7,
    0.65,
    0.9,
]  # the validation classes peak at epoch 2 (epoch 5 ties: the earlier stays)


def _selected(select_on: str) -> tuple[RunRecord, list[bool]]:
    """Five evaluated epochs, and one before training whose higher numbers are never selected."""
    return selected_record(TEST_R1, VAL_R1, select_on)


def test_selection_on_validation_picks_the_best_validation_epoch_and_reports_its_test_metrics(
    tmp_path,
):
    rec, improved = _selected("validation")
    assert improved == [True, True, False, False, False]
    best = rec.best
    assert best["epoch"] == 2 and best["selected_on"] == "validation" and best["metric"] == "R@1"
    assert (
        best["metrics"] == epoch_row(2, 0.7, 0.9)["metrics"] and best["value"] == 0.7
    )  # the TEST classes
    assert best["val_value"] == 0.9 and best["val_metrics"] == epoch_row(2, 0.7, 0.9)["val_metrics"]
    assert best["seconds_to_best"] == 2.0 and rec.selected_on == "validation"
    assert rec.selections["validation"] == best
    assert rec.selections["test"]["epoch"] == 4 and rec.selections["test"]["value"] == 0.8
    assert (
        rec.selections["test"]["selected_on"] == "test"
        and rec.selections["test"]["val_value"] == 0.65
    )
    assert rec.history_frame().loc[2, "val R@1"] == 0.9 and rec.history_frame().loc[2, "R@1"] == 0.7
    rec.save(tmp_path / "rec.json")
    assert RunRecord.load(tmp_path / "rec.json").data == json.loads(json.dumps(rec.data))


def test_selection_on_test_is_the_papers_protocol_and_keeps_both_selections():
    rec, improved = _selected("test")
    assert improved == [True, True, False, True, False]
    assert rec.best["epoch"] == 4 and rec.best["value"] == 0.8 and rec.best["selected_on"] == "test"
    assert rec.best["val_value"] == 0.65
    assert rec.selections == _selected("validation")[0].selections  # the same two epochs either way
    assert rec.selections["test"] == rec.best


def test_a_run_without_validation_records_no_selections():
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    for e, t in enumerate(TEST_R1, 1):
        rec.add_epoch(epoch_row(e, t, None), "R@1")
    assert "selections" not in rec.data and rec.selections == {} and rec.selected_on == "test"
    assert rec.best["epoch"] == 4 and set(rec.best) == {
        "epoch",
        "metric",
        "value",
        "metrics",
        "seconds_to_best",
        "selected_on",
    }


def test_selection_refuses_rows_it_cannot_select_from():
    rec = RunRecord.new("x", config={}, components={}, environment={"device": "cpu"})
    with pytest.raises(
        ValueError, match=r"select_on 'valid' is not one of \['validation', 'test'\]"
    ):
        rec.add_epoch(epoch_row(1, 0.5, 0.6), "R@1", "valid")
    with pytest.raises(ValueError, match="no validation metrics to select on.*val_set="):
        rec.add_epoch(epoch_row(1, 0.5, None), "R@1", "validation")
    with pytest.raises(ValueError, match="validation metrics but no test metrics"):
        rec.add_epoch(epoch_row(1, None, 0.6), "R@1", "validation")
    assert rec.data["history"] == []  # a refused row is not recorded
    assert not rec.add_epoch(
        epoch_row(1, None, None), "R@1", "validation"
    )  # an epoch without evaluation
    with pytest.raises(KeyError, match="F1"):
        rec.add_epoch(epoch_row(2, 0.5, 0.6), "F1", "validation")


@pytest.mark.parametrize(
    "damage, field",
    [
        pytest.param(lambda d: d["best"].update(epoch=4), "'best'", id="best-not-its-selection"),
        pytest.param(
            lambda d: d["config"].update(select_on="test"),
            "'best.selected_on'",
            id="selected-elsewhere",
        ),
        pytest.param(
            lambda d: d["selections"].update(train=d["best"]),
            "'selections'",
            id="unknown-selection",
        ),
        pytest.param(
            lambda d: d["selections"]["test"].update(selected_on="validation"),
            "'selections.test.selected_on'",
            id="selection-mislabelled",
        ),
        pytest.param(
            lambda d: d["selections"]["test"].pop("metrics"),
            "'selections.test.metrics'",
            id="selection-metrics",
        ),
        pytest.param(
            lambda d: d["best"].update(val_value="0.9"), "'best.val_value'", id="val-value"
        ),
        pytest.param(
            lambda d: d["history"][2].update(val_metrics={"R@1": "x"}),
            "'history[2].val_metrics'",
            id="row-val-metrics",
        ),
    ],
)
def test_a_damaged_selection_is_refused_naming_the_field(damage, field):
    data = json.loads(json.dumps(_selected("validation")[0].data))
    RunRecord.from_data(data, "ok")
    damage(data)
    with pytest.raises(RecordError, match=re.escape(f"field {field}")):
        RunRecord.from_data(data, "damaged")


def test_the_outcome_follows_validation_numbers_and_select_on_but_not_the_default():
    rec = _selected("test")[0]
    old = RunRecord(json.loads(json.dumps(rec.data)))
    del old.data["config"]["select_on"]  # a record made before select_on: the default is left out
    assert old.outcome() == rec.outcome()
    assert _selected("validation")[0].outcome() != rec.outcome()
    timed = RunRecord(json.loads(json.dumps(rec.data)))
    timed.data["history"][1]["val_metrics"]["eval_seconds"] = 9.0
    assert timed.outcome() == rec.outcome()
    moved = RunRecord(json.loads(json.dumps(rec.data)))
    moved.data["history"][1]["val_metrics"]["R@1"] = 0.61
    assert moved.outcome() != rec.outcome()


def test_records_made_before_betas_and_head_lr_scale_keep_fingerprint_and_outcome():
    """A record written before ``betas`` and ``head_lr_scale`` joined TrainConfig loads with them at
    the values its run used (torch's Adam betas, one learning rate): its stored fingerprint is
    recomputed to the one today's configuration gives, and its outcome is unchanged; another
    value of either key is another run."""
    from dmlnb.profiles import make_config
    from dmlnb.records import CONFIG_KEYS_ADDED, run_fingerprint

    config = make_config("smoke").to_dict()
    spec = {"loss": "triplet"}
    rec = RunRecord.new("x", config=config, components={}, environment={"device": "cpu"}, spec=spec)
    rec.add_epoch(epoch_row(1, 0.5, None), "R@1")
    old = json.loads(json.dumps(rec.data))
    for key in ("betas", "head_lr_scale"):
        del old["config"][key]
    old["fingerprint"] = run_fingerprint(old["config"], spec)  # as it was computed then
    loaded = RunRecord.from_data(old, "old")
    assert loaded.config["betas"] == CONFIG_KEYS_ADDED["betas"] == (0.9, 0.999)
    assert loaded.data["fingerprint"] == run_fingerprint(config, spec) == rec.data["fingerprint"]
    assert (
        loaded.outcome() == rec.outcome() == RunRecord(json.loads(json.dumps(rec.data))).outcome()
    )
    for key, value in (("betas", [0.9, 0.99]), ("head_lr_scale", 10.0)):
        other = RunRecord(json.loads(json.dumps(rec.data)))
        other.data["config"][key] = value
        assert other.outcome() != rec.outcome()
        assert run_fingerprint(other.config, spec) != rec.data["fingerprint"]


def test_git_state_covers_the_package_folder_only(tmp_path):
    import shutil
    import subprocess

    from dmlnb.records import git_state, package_changed

    if shutil.which("git") is None:
        pytest.skip("no git here")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "dmlnb").mkdir()
    (tmp_path / "dmlnb" / "loss.py").write_text("a = 1\n")
    (tmp_path / "results.json").write_text("{}\n")
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=tmp_path, check=True)
    package = tmp_path / "dmlnb"
    clean = git_state(package)
    assert (
        len(clean["commit"]) == 40
        and clean["dirty"] is False
        and clean["changed"] == []
        and clean["scope"] == "dmlnb"
    )
    (tmp_path / "results.json").write_text(
        '{"rewritten": true}\n'
    )  # a tracked record outside the package
    assert git_state(package)["dirty"] is False
    (package / "loss.py").write_text("a = 2\n")
    (package / "new.py").write_text("b = 1\n")  # untracked, not ignored: part of the code that ran
    state = git_state(package)
    assert state["dirty"] is True and state["changed"] == ["dmlnb/loss.py", "dmlnb/new.py"]
    assert package_changed(state) is True and package_changed(clean) is False
    # records made before the scope: their flag counted the whole tree
    assert package_changed({"commit": "c", "dirty": True}) is None
    assert package_changed({"commit": "c", "dirty": False}) is False
    assert package_changed({"commit": None, "dirty": None, "scope": "dmlnb"}) is None
