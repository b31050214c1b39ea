"""The run layer: a run is reloaded only under its fingerprint (configuration + specification),
resumed when interrupted, trained (and the reason said) otherwise; never with training disabled."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
import torch

from dmlnb.data import load_dataset
from dmlnb.losses import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.records import CONFIG_KEYS_ADDED, RunRecord, run_fingerprint
from dmlnb.runs import (
    MEASUREMENT,
    TIMING_THREADS,
    reuse_reason,
    stored_measurement,
    train_or_reload,
)
from dmlnb.training import NO_TRAINING_ENV, TrainingDisabledError, fit

CFG = make_config("smoke", {"epochs": 2, "device": "cpu"})


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


SPEC = {"loss": "triplet", "margin": 0.2}


def _layer(splits, run_dir, config=CFG, spec=SPEC, retrain=False, said=None, crash_after=None):
    calls = {"train": 0, "finish": 0}

    def train(resume):
        calls["train"] += 1
        calls["resume"] = resume
        torch.manual_seed(config.seed)
        model, record = fit(
            config,
            TripletLoss(margin=spec["margin"]),
            splits=splits,
            run_dir=run_dir,
            resume=resume,
            progress=False,
            spec=spec,
        )
        return record, model

    def finish(record, model):
        calls["finish"] += 1
        return {"best R@1 again": record.best["metrics"]["R@1"]}

    run = train_or_reload(
        "r",
        run_dir,
        config,
        spec,
        train,
        finish=finish,
        retrain=retrain,
        say=(said.append if said is not None else print),
    )
    return run, calls


def test_fingerprint_follows_config_and_spec_not_key_order():
    assert run_fingerprint(CFG, SPEC) == run_fingerprint(
        CFG.to_dict(), {"margin": 0.2, "loss": "triplet"}
    )
    assert run_fingerprint(CFG, SPEC) != run_fingerprint(CFG.replace(lr=0.5), SPEC)
    assert run_fingerprint(CFG, SPEC) != run_fingerprint(CFG, {**SPEC, "margin": 0.3})


def test_trains_then_reloads_without_training_and_keeps_extras(digits, tmp_path, monkeypatch):
    said: list[str] = []
    first, calls = _layer(digits, tmp_path / "r", said=said)
    assert first.trained and calls == {"train": 1, "finish": 1, "resume": False}
    assert said == [f"training r: no record at {tmp_path / 'r' / 'record.json'}"]
    saved = RunRecord.load(tmp_path / "r" / "record.json")
    assert saved.data["spec"] == SPEC and saved.data["fingerprint"] == run_fingerprint(CFG, SPEC)
    assert saved.data["extras"] == {"best R@1 again": first.metrics["R@1"]}
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    again, calls = _layer(digits, tmp_path / "r", said=said)
    assert (
        not again.trained
        and calls == {"train": 0, "finish": 0}
        and again.extras == saved.data["extras"]
    )
    assert again.model is None and len(said) == 1  # nothing said when reloading


def test_a_changed_spec_retrains_and_says_what_changed(digits, tmp_path, monkeypatch):
    _layer(digits, tmp_path / "r")
    said: list[str] = []
    other, calls = _layer(digits, tmp_path / "r", spec={**SPEC, "margin": 0.3}, said=said)
    assert other.trained and calls["resume"] is False
    assert (
        "fingerprint changed" in said[0]
        and "['margin']" in said[0]
        and "configuration keys []" in said[0]
    )
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    with pytest.raises(TrainingDisabledError, match="fingerprint changed"):
        _layer(
            digits,
            tmp_path / "r",
            config=CFG.replace(lr=0.5),
            spec={**SPEC, "margin": 0.3},
            said=[],
        )


def test_an_interrupted_run_resumes_and_a_finished_one_without_extras_only_finishes(
    digits, tmp_path
):
    run, _ = _layer(digits, tmp_path / "r")
    path = tmp_path / "r" / "record.json"
    record = RunRecord.load(path)
    del record.data["extras"]  # killed between the final record and its extras
    record.save(path)
    said: list[str] = []
    again, calls = _layer(digits, tmp_path / "r", said=said)
    assert calls == {"train": 1, "finish": 1, "resume": True} and "holds no extras" in said[0]
    assert again.record.data["history"] == run.record.data["history"]  # nothing retrained
    record = RunRecord.load(path)
    record.data["status"] = "running"
    record.save(path)
    assert (
        reuse_reason(tmp_path / "r", CFG, SPEC)[0] == "it was interrupted after epoch 2: resuming"
    )


def test_a_record_without_spec_or_a_train_function_without_spec_is_refused(digits, tmp_path):
    _layer(digits, tmp_path / "r")
    path = tmp_path / "r" / "record.json"
    record = RunRecord.load(path)
    del record.data["spec"]
    record.save(path)
    assert "written before the run layer" in reuse_reason(tmp_path / "r", CFG, SPEC)[0]

    def forgetful(resume):
        model, record = fit(
            CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "f", progress=False
        )
        return record, model

    with pytest.raises(ValueError, match="did not pass spec="):
        train_or_reload("f", tmp_path / "f", CFG, SPEC, forgetful, say=lambda _: None)


def test_a_measurement_is_stored_and_reloaded_while_its_settings_match(tmp_path):
    import pandas as pd

    made: list[int] = []

    def make():
        made.append(1)
        return pd.DataFrame({"size": [1, 2], "seconds": [0.5 * len(made), 1.0]})

    said: list[str] = []
    first = stored_measurement(tmp_path / "m", make, settings={"sizes": (1, 2)}, say=said.append)
    again = stored_measurement(tmp_path / "m", make, settings={"sizes": [1, 2]}, say=said.append)
    assert len(made) == 1 and again.equals(first) and (tmp_path / "m" / MEASUREMENT).exists()
    other = stored_measurement(tmp_path / "m", make, settings={"sizes": (1, 2, 4)}, say=said.append)
    assert len(made) == 2 and other["seconds"][0] == 1.0 and "['sizes'] differ" in said[-1]
    stored_measurement(
        tmp_path / "m", make, settings={"sizes": (1, 2, 4)}, retrain=True, say=said.append
    )
    assert len(made) == 3 and said[-1].endswith("retrain=True")


def test_a_timing_is_measured_with_the_timing_threads_whatever_the_process_has(tmp_path):
    seen: list[int] = []

    def make():
        seen.append(torch.get_num_threads())
        return pd.DataFrame({"seconds": [float(len(seen))]})

    before = torch.get_num_threads()
    torch.set_num_threads(TIMING_THREADS + 1)
    try:
        said: list[str] = []
        stored_measurement(tmp_path / "m", make, settings={"n": 1}, say=said.append)
        stored_measurement(None, make, settings={"n": 1})
        assert (
            seen == [TIMING_THREADS, TIMING_THREADS]
            and torch.get_num_threads() == TIMING_THREADS + 1
        )
        file = tmp_path / "m" / MEASUREMENT
        assert json.loads(file.read_text())["threads"] == TIMING_THREADS
        again = stored_measurement(tmp_path / "m", make, settings={"n": 1}, say=said.append)
        assert len(seen) == 2 and again["seconds"].tolist() == [1.0]  # reloaded, not measured
        stored = json.loads(file.read_text())
        file.write_text(
            json.dumps({**stored, "threads": TIMING_THREADS + 1})
        )  # made by a 2-thread process
        remade = stored_measurement(tmp_path / "m", make, settings={"n": 1}, say=said.append)
        assert len(seen) == 3 and remade["seconds"].tolist() == [3.0]
        assert f"measured with {TIMING_THREADS + 1} threads, not {TIMING_THREADS}" in said[-1]
        assert json.loads(file.read_text())["threads"] == TIMING_THREADS

        def fails():
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            stored_measurement(tmp_path / "bad", fails, settings={"n": 1}, say=said.append)
        assert torch.get_num_threads() == TIMING_THREADS + 1  # restored after a failure too
    finally:
        torch.set_num_threads(before)


def test_a_measurement_stored_before_a_config_key_was_added_is_reloaded(tmp_path):
    config = make_config("smoke", {}).to_dict()
    made: list[int] = []

    def make():
        made.append(1)
        return pd.DataFrame({"seconds": [float(len(made))]})

    stored_measurement(
        tmp_path / "m", make, settings={"config": config, "sizes": [1]}, say=lambda _: None
    )
    file = tmp_path / "m" / MEASUREMENT
    stored = json.loads(file.read_text())
    for key in CONFIG_KEYS_ADDED:  # as written before those keys existed
        del stored["settings"]["config"][key]
    file.write_text(json.dumps(stored))
    again = stored_measurement(
        tmp_path / "m", make, settings={"config": config, "sizes": [1]}, say=lambda _: None
    )
    assert made == [1] and again["seconds"].tolist() == [1.0]
    changed = {**config, "select_on": "validation"}  # a key that differs is still a difference
    stored_measurement(
        tmp_path / "m", make, settings={"config": changed, "sizes": [1]}, say=lambda _: None
    )
    assert made == [1, 1]


def test_with_training_disabled_a_timing_study_trains_its_unstored_runs_and_nothing_else(
    digits, tmp_path, monkeypatch
):
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    with pytest.raises(
        TrainingDisabledError
    ) as err:  # outside a measurement: a run without a folder is refused
        fit(CFG, TripletLoss(), splits=digits, run_dir=None, progress=False)
    assert "without run_dir" in str(err.value) and "unset DMLNB_NO_TRAINING" in str(err.value)
    assert "Copy that run folder" not in str(err.value)  # there is no folder to copy

    def timed_steps():
        _, record = fit(CFG, TripletLoss(), splits=digits, run_dir=None, progress=False)
        return pd.DataFrame({"seconds": [sum(h["train_seconds"] for h in record.data["history"])]})

    said: list[str] = []
    table = stored_measurement(
        tmp_path / "timing", timed_steps, settings={"steps": 2}, say=said.append
    )
    assert (tmp_path / "timing" / MEASUREMENT).exists() and table["seconds"][0] > 0
    assert (
        stored_measurement(None, timed_steps, settings={"steps": 2})["seconds"][0] > 0
    )  # unstored: the same

    def trains_a_run_with_a_folder():
        fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "missing", progress=False)
        return pd.DataFrame({"seconds": [1.0]})

    with pytest.raises(
        TrainingDisabledError, match="is missing"
    ):  # a run with a folder never trains in a render
        stored_measurement(
            tmp_path / "other", trains_a_run_with_a_folder, settings={"steps": 2}, say=said.append
        )
    with pytest.raises(
        TrainingDisabledError, match="without run_dir"
    ):  # the exemption ends with the measurement
        fit(CFG, TripletLoss(), splits=digits, run_dir=None, progress=False)


def test_retrain_trains_once_per_launch_and_always_outside_one(tmp_path, monkeypatch):
    from fabricated import fake_run_parts

    from dmlnb.runs import SHARD_SINCE_ENV

    config, spec, make = fake_run_parts(0)
    calls = []

    def train(resume):
        calls.append(resume)
        return make(resume)

    def ask():
        return train_or_reload(
            "r0", tmp_path / "r0", config, spec, train, retrain=True, say=lambda _: None
        )

    monkeypatch.delenv(SHARD_SINCE_ENV, raising=False)
    assert (
        ask().trained and ask().trained and len(calls) == 2
    )  # no launch: retrain=True always trains
    monkeypatch.setenv(
        SHARD_SINCE_ENV, repr(time.time() + 1)
    )  # the record was written before this launch
    assert ask().trained and len(calls) == 3
    monkeypatch.setenv(
        SHARD_SINCE_ENV, repr(time.time() - 1)
    )  # written since: this launch's, reloaded
    again = ask()
    assert not again.trained and len(calls) == 3 and again.record.data["status"] == "finished"


def test_retrain_makes_a_stored_measurement_and_table_once_per_launch(tmp_path, monkeypatch):
    from dmlnb.runs import SHARD_SINCE_ENV, Table, stored_tables

    made: list[str] = []

    def make(name):
        return lambda: made.append(name) or pd.DataFrame({"x": [1]})

    def ask():
        stored_measurement(
            tmp_path / "m", make("m"), settings={"n": 1}, retrain=True, say=lambda _: None
        )
        stored_tables(
            {"t": Table(tmp_path / "t", make("t"), {"n": 1})}, retrain=True, say=lambda _: None
        )

    monkeypatch.delenv(SHARD_SINCE_ENV, raising=False)
    ask()
    ask()
    assert made == ["m", "t", "m", "t"]  # no launch: retrain=True always makes them again
    monkeypatch.setenv(
        SHARD_SINCE_ENV, repr(time.time() + 1)
    )  # stored before this launch: made again
    ask()
    assert made == ["m", "t"] * 3
    monkeypatch.setenv(SHARD_SINCE_ENV, repr(time.time() - 1))  # made by this launch: reloaded
    ask()
    assert made == ["m", "t"] * 3
