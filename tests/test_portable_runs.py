"""Runs made elsewhere (issue #21): safe checkpoints, device changes, record schema, render CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from fabricated import CrashAt, flat_params, parameters_notebook

from dmlnb.checkpoints import CheckpointError, load_checkpoint, restore_rng_state, save_checkpoint
from dmlnb.data import load_dataset
from dmlnb.hooks import Hook
from dmlnb.losses.triplet import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.records import CONFIG_KEYS_ADDED, SCHEMA_VERSION, RecordError, RunRecord, run_fingerprint
from dmlnb.runs import reuse_reason
from dmlnb.training import NO_TRAINING_ENV, TrainingDisabledError, fit

REPO = Path(__file__).resolve().parents[1]
CFG = make_config("smoke", {"epochs": 3, "steps_per_epoch": 4, "eval_metrics": ("recall",)})


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


class _Probe(Hook):
    """Notes where the optimiser state and the RNG state live when training (re)starts."""

    def __init__(self) -> None:
        self.devices: set[str] = set()
        self.rng_device: str | None = None

    def on_train_start(self, state):
        self.devices = {
            v.device.type
            for s in state.optimizer.state.values()
            for v in s.values()
            if isinstance(v, torch.Tensor) and v.dim() > 0
        }
        self.rng_device = torch.get_rng_state().device.type


def _interrupted_run(digits, run_dir, hooks=()):
    """A run killed in the middle of epoch 2: ``run_dir`` holds the checkpoint of epoch 1."""
    crash = CrashAt(at_step=CFG.steps_per_epoch + 2)
    with pytest.raises(KeyboardInterrupt):
        fit(
            CFG,
            TripletLoss(mining="semihard"),
            splits=digits,
            run_dir=run_dir,
            hooks=[crash, *hooks],
            progress=False,
        )
    return crash


# ------------------------------------------------------------------ unsafe checkpoints
def _plant_marker(path: str) -> None:  # what the payload would run on unpickling
    Path(path).write_text("payload ran")


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return _plant_marker, (str(self.marker),)


def test_a_pickle_payload_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "checkpoint.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "evil": _Payload(marker)}, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    message = str(err.value)
    assert str(path) in message and "refused" in message and "_plant_marker" in message
    assert "Nothing in it was run" in message
    assert not marker.exists()


def test_training_refuses_a_run_folder_whose_checkpoint_carries_a_payload(digits, tmp_path):
    marker = tmp_path / "marker"
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    torch.save({"record": _Payload(marker)}, run_dir / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="checkpoint.pt"):
        fit(CFG, TripletLoss(), splits=digits, run_dir=run_dir, progress=False)
    assert not marker.exists()


@pytest.mark.parametrize(
    "value, kind",
    [
        pytest.param(__import__("numpy").zeros(3), "numpy.ndarray", id="numpy-array"),
        pytest.param(__import__("numpy").float64(0.5), "numpy.float64", id="numpy-scalar"),
        pytest.param(torch.Generator(), "Generator", id="torch-generator"),
        pytest.param(object(), "builtins.object", id="object"),
    ],
)
def test_saving_anything_but_tensors_and_plain_containers_is_refused(tmp_path, value, kind):
    with pytest.raises(CheckpointError) as err:
        save_checkpoint({"hooks": [{"ok": 1.0, "bad": value}]}, tmp_path / "checkpoint.pt")
    assert "checkpoint.pt['hooks'][0]['bad']" in str(err.value) and kind in str(err.value)
    assert not (tmp_path / "checkpoint.pt").exists()


def test_a_checkpoint_written_before_schema_1_still_loads(digits, tmp_path):
    """Older checkpoints stored torch.__version__ (torch's TorchVersion, a str subclass) in their
    record: that one type is allowed, and their v0 record is migrated when the run resumes."""
    crash = _interrupted_run(digits, tmp_path / "r")
    path = tmp_path / "r" / "checkpoint.pt"
    ckpt = load_checkpoint(path)
    record = ckpt["record"]
    for key in ("schema_version", "segments", "device_changed"):
        del record[key]
    record["environment"]["torch"] = torch.__version__
    torch.save(ckpt, path)  # as the old loop wrote it (no plain-content check)
    assert type(load_checkpoint(path)["record"]["environment"]["torch"]).__name__ == "TorchVersion"
    _, rec = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "r",
        hooks=[crash],
        progress=False,
    )
    assert rec.data["status"] == "finished" and rec.data["migrated_from"] == 0
    assert [(s["from_epoch"], s["to_epoch"]) for s in rec.data["segments"]] == [(0, 1), (1, 3)]


@pytest.mark.parametrize("content", ["garbage", "truncated"])
def test_a_damaged_checkpoint_is_named(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint({"w": torch.zeros(1000)}, path)
    data = path.read_bytes()
    path.write_bytes(b"not a checkpoint" if content == "garbage" else data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or not a torch checkpoint") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)


def test_every_state_dict_of_a_finished_run_loads_with_weights_only(digits, tmp_path):
    fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "r", progress=False)
    for name in ("checkpoint.pt", "best.pt"):
        torch.load(tmp_path / "r" / name, weights_only=True)  # raises if anything is not plain


# ------------------------------------------------------------------ devices
def test_cpu_rng_state_stays_on_the_cpu_and_cuda_state_is_ignored_on_cpu():
    torch.manual_seed(5)
    saved = torch.get_rng_state()
    expected = torch.rand(3)
    torch.manual_seed(6)
    restore_rng_state(
        {"rng_cpu": saved, "rng_cuda": torch.zeros(16, dtype=torch.uint8)}, torch.device("cpu")
    )
    assert torch.get_rng_state().device.type == "cpu"
    assert torch.equal(torch.rand(3), expected)


def test_same_device_resume_is_bit_identical_and_says_no_device_change(digits, tmp_path):
    model_a, rec_a = fit(
        CFG, TripletLoss(mining="semihard"), splits=digits, run_dir=tmp_path / "a", progress=False
    )
    crash = _interrupted_run(digits, tmp_path / "b")
    model_b, rec_b = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "b",
        hooks=[crash],
        progress=False,
    )
    assert torch.equal(flat_params(model_a), flat_params(model_b))
    assert rec_b.data["device_changed"] is False and "device_notes" not in rec_b.data
    segments = rec_b.data["segments"]
    assert [(s["from_epoch"], s["to_epoch"]) for s in segments] == [(0, 1), (1, 3)]
    assert (
        segments[0]["device"] == segments[1]["device"] == rec_b.data["environment"]["device"]
    )  # cpu, or cuda


def _mark_as_cuda_made(ckpt_path: Path) -> None:
    """Rewrite a CPU checkpoint so it looks written on a CUDA machine (as one copied from a GPU
    box would: its record's segment and environment say CUDA, and it holds a CUDA RNG state)."""
    ckpt = load_checkpoint(ckpt_path)
    record = ckpt["record"]
    record["environment"].update(device="cuda", device_name="NVIDIA H100 80GB HBM3")
    record["segments"][-1].update(device="cuda", device_name="NVIDIA H100 80GB HBM3")
    ckpt["rng_cuda"] = torch.zeros(16, dtype=torch.uint8)
    save_checkpoint(ckpt, ckpt_path)


def test_a_cuda_made_checkpoint_resumes_on_cpu_and_the_record_says_so(
    digits, tmp_path, monkeypatch
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine: CPU only
    crash = _interrupted_run(digits, tmp_path / "r", hooks=[_Probe()])
    _mark_as_cuda_made(tmp_path / "r" / "checkpoint.pt")
    probe = _Probe()
    model, rec = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "r",
        hooks=[crash, probe],
        progress=False,
    )
    assert rec.data["status"] == "finished" and [r["epoch"] for r in rec.data["history"]] == [
        1,
        2,
        3,
    ]
    assert rec.data["device_changed"] is True
    note = rec.data["device_notes"][0]
    assert (
        "cuda" in note and "cpu" in note and "not bit-identical" in note and "after epoch 1" in note
    )
    assert [s["device"] for s in rec.data["segments"]] == ["cuda", "cpu"]
    assert probe.devices == {"cpu"} and probe.rng_device == "cpu"
    assert all(p.device.type == "cpu" for p in model.parameters())
    on_disk = RunRecord.load(tmp_path / "r" / "record.json")
    assert (
        on_disk.data["device_changed"] is True and on_disk.data["segments"] == rec.data["segments"]
    )


@pytest.mark.cuda
def test_a_cpu_made_checkpoint_resumes_on_cuda(digits, tmp_path, monkeypatch):
    from dmlnb.training import loop

    with monkeypatch.context() as m:  # the first process runs on a CPU machine
        m.setattr(loop, "resolve_device", lambda name="auto": torch.device("cpu"))
        crash = _interrupted_run(digits, tmp_path / "r", hooks=[_Probe()])
    probe = _Probe()
    model, rec = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "r",
        hooks=[crash, probe],
        progress=False,
    )
    assert rec.data["status"] == "finished" and rec.data["device_changed"] is True
    assert [s["device"].split(":")[0] for s in rec.data["segments"]] == ["cpu", "cuda"]
    assert (
        probe.devices == {"cuda"} and probe.rng_device == "cpu"
    )  # optimiser state moved to the GPU
    assert all(p.device.type == "cuda" for p in model.parameters())


# ------------------------------------------------------------------ record schema
COMMITTED = (
    REPO
    / "results"
    / "02_facility_location"
    / "default"
    / "omniglot-small-convnet-d64-cm0.25-clustering-g1-seed0"
    / "record.json"
)
ADDED_SINCE_VERSION_0 = (
    "schema_version",
    "segments",
    "device_changed",
    "migrated_from",
    "spec",
    "fingerprint",
)


def _version0_data() -> dict:
    """A record as dmlnb wrote it before schema versions: a committed one less what came since."""
    return {
        k: v for k, v in json.loads(COMMITTED.read_text()).items() if k not in ADDED_SINCE_VERSION_0
    }


def _version0(path: Path) -> Path:
    path.write_text(json.dumps(_version0_data(), indent=1))
    return path


def test_an_unversioned_record_is_migrated_on_load_and_the_file_is_not_rewritten(tmp_path):
    path = _version0(tmp_path / "record.json")
    before = path.read_bytes()
    assert "schema_version" not in json.loads(before)
    record = RunRecord.load(path)
    assert record.data["schema_version"] == SCHEMA_VERSION and record.data["migrated_from"] == 0
    last = record.data["history"][-1]["epoch"]
    assert record.data["segments"] == [
        {
            "device": record.data["environment"]["device"],
            "device_name": record.data["environment"].get("device_name"),
            "from_epoch": 0,
            "to_epoch": last,
            "started": record.data["started"],
        }
    ]
    assert record.data["device_changed"] is False
    assert path.read_bytes() == before


def test_a_record_from_a_newer_schema_is_refused_naming_the_version(tmp_path):
    data = _version0_data()
    data["schema_version"] = SCHEMA_VERSION + 41
    (tmp_path / "record.json").write_text(json.dumps(data))
    with pytest.raises(RecordError, match=f"schema_version {SCHEMA_VERSION + 41}") as err:
        RunRecord.load(tmp_path / "record.json")
    assert str(tmp_path / "record.json") in str(err.value) and "update dmlnb" in str(err.value)


def _drop(data, keys):
    target = data
    for key in keys[:-1]:
        target = target[key]
    del target[keys[-1]]


@pytest.mark.parametrize(
    "keys, field",
    [
        pytest.param(("config",), "config", id="config"),
        pytest.param(("status",), "status", id="status"),
        pytest.param(("history",), "history", id="history"),
        pytest.param(
            ("history", 1, "train_seconds"), "history[1].train_seconds", id="history-train_seconds"
        ),
        pytest.param(("history", 2, "metrics"), "history[2].metrics", id="history-metrics"),
        pytest.param(("best", "metrics"), "best.metrics", id="best-metrics"),
        pytest.param(
            ("best", "seconds_to_best"), "best.seconds_to_best", id="best-seconds_to_best"
        ),
        pytest.param(("total_train_seconds",), "total_train_seconds", id="total_train_seconds"),
        pytest.param(("environment", "device"), "environment.device", id="environment-device"),
    ],
)
def test_a_record_missing_a_field_the_tables_read_is_refused_naming_file_and_field(
    tmp_path, keys, field
):
    data = _version0_data()
    _drop(data, keys)
    path = tmp_path / "run" / "record.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    with pytest.raises(RecordError) as err:
        RunRecord.load(path)
    assert (
        str(path) in str(err.value)
        and repr(field) in str(err.value)
        and "missing" in str(err.value)
    )
    with pytest.raises(RecordError, match="missing"):  # the notebooks' reload path says so too
        reuse_reason(path.parent, data.get("config", {}), {})


def test_a_field_of_the_wrong_type_is_named_with_its_value(tmp_path):
    data = _version0_data()
    data["best"]["value"] = "0.9"
    (tmp_path / "record.json").write_text(json.dumps(data))
    with pytest.raises(RecordError, match=r"'best.value' is '0.9' \(str\), expected a number"):
        RunRecord.load(tmp_path / "record.json")


def test_every_committed_record_loads_validates_and_reloads_as_finished():
    """Every committed run went through the run layer: finished, with its specification and a
    fingerprint that matches them, so the run layer reloads it."""
    paths = sorted((REPO / "results").glob("**/record.json"))
    assert len(paths) > 100
    for path in paths:
        record = RunRecord.load(path)  # migrated and validated
        assert record.data["status"] == "finished", path
        assert record.data["fingerprint"] == run_fingerprint(record.config, record.data["spec"]), (
            path
        )
        reason, again = reuse_reason(path.parent, record.config, record.data["spec"])
        assert reason == "" and again.best == record.best, path


def test_records_made_before_select_on_reload_under_todays_configuration_with_their_outcome(
    tmp_path,
):
    """``select_on`` (and the other :data:`~dmlnb.records.CONFIG_KEYS_ADDED`) joined TrainConfig
    after the first committed runs were made: a record written without them (one per chapter, as
    such a record was written: a committed record's configuration without the added keys and
    without a validation split, its fingerprint computed from that) reloads under the
    configuration a chapter builds for it today (``select_on="test"``, the protocol it used), and
    every committed analysis stays tied to its run's outcome."""
    first = {}
    for path in sorted((REPO / "results").glob("*/default/*/record.json")):
        first.setdefault(path.parts[-4], path)  # one record per chapter
    assert len(first) == 6
    for chapter, path in first.items():
        raw = json.loads(path.read_text())
        old = {k: v for k, v in raw["config"].items() if k not in CONFIG_KEYS_ADDED}
        old["dataset_options"] = {
            k: v for k, v in old["dataset_options"].items() if k != "validation"
        }
        raw.update(config=old, fingerprint=run_fingerprint(old, raw["spec"]))
        raw.pop("selections", None)  # what a run with a validation split records besides
        raw["best"] = {
            k: v
            for k, v in raw["best"].items()
            if k not in ("selected_on", "val_value", "val_metrics")
        }
        raw["history"] = [
            {k: v for k, v in row.items() if k != "val_metrics"} for row in raw["history"]
        ]
        folder = tmp_path / chapter
        folder.mkdir()
        (folder / "record.json").write_text(json.dumps(raw))
        config = make_config(None, old)  # what the chapter asks for today
        assert config.select_on == "test"
        reason, record = reuse_reason(folder, config, raw["spec"])
        assert reason == "", path
        assert (
            record.data["fingerprint"] == run_fingerprint(config, raw["spec"])
            and record.selected_on == "test"
        )
    analyses = sorted((REPO / "results").glob("*/default/*/analysis.json"))
    assert analyses
    for path in analyses:
        outcome = RunRecord.load(path.parent / "record.json").outcome()
        assert all(entry["run"] == outcome for entry in json.loads(path.read_text()).values()), path


@pytest.mark.parametrize(
    "keys", [("select_on",), ("betas", "head_lr_scale")], ids=["select_on", "betas+head_lr_scale"]
)
def test_a_checkpoint_made_before_select_on_resumes(digits, tmp_path, keys):
    """An interrupted run whose checkpoint predates ``select_on`` (or ``betas`` and
    ``head_lr_scale``: its config lacks the keys and its fingerprint was computed without them)
    resumes, and ends where an uninterrupted run ends."""
    spec = {"loss": "triplet", "mining": "semihard"}
    model_a, rec_a = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "a",
        progress=False,
        spec=spec,
    )
    crash = CrashAt(at_step=CFG.steps_per_epoch + 2)
    with pytest.raises(KeyboardInterrupt):
        fit(
            CFG,
            TripletLoss(mining="semihard"),
            splits=digits,
            run_dir=tmp_path / "b",
            hooks=[crash],
            progress=False,
            spec=spec,
        )
    path, record_path = tmp_path / "b" / "checkpoint.pt", tmp_path / "b" / "record.json"
    ckpt, on_disk = load_checkpoint(path), json.loads(record_path.read_text())
    for data in (ckpt["record"], on_disk):  # as the loop wrote them before the keys
        for key in keys:
            del data["config"][key]
        data["fingerprint"] = run_fingerprint(data["config"], spec)
    save_checkpoint(ckpt, path)
    record_path.write_text(json.dumps(on_disk))
    model_b, rec_b = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "b",
        hooks=[crash],
        progress=False,
        spec=spec,
    )
    assert torch.equal(flat_params(model_a), flat_params(model_b)) and rec_b.data["resumed"] == 1
    assert rec_b.data["fingerprint"] == rec_a.data["fingerprint"] == run_fingerprint(CFG, spec)
    assert rec_b.best["epoch"] == rec_a.best["epoch"]


def test_a_new_record_is_written_with_the_current_version(digits, tmp_path):
    _, rec = fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "r", progress=False)
    data = json.loads((tmp_path / "r" / "record.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and "migrated_from" not in data
    RunRecord.load(tmp_path / "r" / "record.json")


# ------------------------------------------------------------------ training disabled (render)
def test_with_training_disabled_a_missing_run_is_named_and_a_finished_one_reloads(
    digits, tmp_path, monkeypatch
):
    model_a, rec_a = fit(
        CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "done", progress=False
    )
    monkeypatch.setenv(NO_TRAINING_ENV, "1")
    model_b, rec_b = fit(
        CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "done", progress=False
    )
    assert torch.equal(flat_params(model_a), flat_params(model_b)) and rec_b.best == rec_a.best
    with pytest.raises(TrainingDisabledError) as err:
        fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "missing", progress=False)
    assert str(tmp_path / "missing" / "record.json") in str(err.value) and "is missing" in str(
        err.value
    )
    assert not (tmp_path / "missing").exists()  # nothing is created in the copied runs folder
    (tmp_path / "records-only").mkdir()
    shutil.copy(tmp_path / "done" / "record.json", tmp_path / "records-only" / "record.json")
    with pytest.raises(TrainingDisabledError, match="checkpoint.pt"):
        fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "records-only", progress=False)


# ------------------------------------------------------------------ python -m dmlnb render
@pytest.fixture
def calls(monkeypatch):
    """Replaces papermill.execute_notebook; records its keyword arguments and the environment."""
    import papermill

    seen: list[dict] = []

    def execute_notebook(**kwargs):
        seen.append(
            {
                **kwargs,
                "env": os.environ.get(NO_TRAINING_ENV),
                "profile_env": os.environ.get("DMLNB_PROFILE"),
            }
        )

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.delenv(NO_TRAINING_ENV, raising=False)
    return seen


def _runs(tmp_path, profile="default"):
    runs = tmp_path / "copied" / "02_facility_location"
    (runs / profile / "ranking-seed0").mkdir(parents=True)
    return runs


def test_render_builds_the_papermill_call(tmp_path, calls):
    from dmlnb.cli import main

    runs = _runs(tmp_path, "smoke")
    nb = REPO / "notebooks" / "02_facility_location.ipynb"
    assert (
        main(
            [
                "render",
                str(nb),
                "--runs",
                str(runs),
                "--profile",
                "smoke",
                "-o",
                str(tmp_path / "out.ipynb"),
            ]
        )
        == 0
    )
    (call,) = calls
    assert call["input_path"] == str(nb) and call["output_path"] == str(tmp_path / "out.ipynb")
    assert call["parameters"] == {
        "profile": "smoke",
        "results_dir": str(runs.resolve()),
        "retrain": False,
    }
    assert call["cwd"] == str(nb.parent) and call["kernel_name"] == "python3"
    assert (
        call["env"] == "1" and os.environ.get(NO_TRAINING_ENV) is None
    )  # set during the call only


def test_render_runs_the_asked_profile_whatever_dmlnb_profile_says(tmp_path, calls, monkeypatch):
    from dmlnb.cli import main

    monkeypatch.setenv(
        "DMLNB_PROFILE", "smoke"
    )  # as `make test` leaves it: it would win in the kernel
    runs = _runs(tmp_path, "default")
    nb = REPO / "notebooks" / "02_facility_location.ipynb"
    assert (
        main(
            [
                "render",
                str(nb),
                "--runs",
                str(runs),
                "--profile",
                "default",
                "-o",
                str(tmp_path / "o.ipynb"),
            ]
        )
        == 0
    )
    assert calls[0]["profile_env"] == "default" and os.environ["DMLNB_PROFILE"] == "smoke"


def test_render_passes_retrain_only_to_notebooks_that_have_it(tmp_path, calls, monkeypatch):
    from dmlnb.cli import main

    runs = tmp_path / "runs"
    (runs / "default").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    # every chapter has a retrain parameter now: a notebook without one, as a reader may write
    parameters_notebook(
        tmp_path / "reader.ipynb", 'profile = "default"\nresults_dir = "results"\ndata_root = None'
    )
    assert (
        main(["render", "reader.ipynb", "--runs", "runs", "-o", "out.ipynb", "--data-root", "data"])
        == 0
    )
    params = calls[0]["parameters"]
    assert (
        "retrain" not in params
        and params["results_dir"] == str(runs)
        and params["profile"] == "default"
    )
    assert params["data_root"] == str(tmp_path / "data")


@pytest.mark.parametrize(
    "layout, message",
    [
        pytest.param("no-profile-folder", "holds no 'default' folder", id="runs-without-profile"),
        pytest.param("profile-folder-itself", "pass its parent", id="runs-is-the-profile-folder"),
        pytest.param("missing", "is not a folder", id="runs-missing"),
    ],
)
def test_render_names_a_wrong_runs_folder(tmp_path, calls, capsys, layout, message):
    from dmlnb.cli import main

    runs = tmp_path / "results"
    if layout == "no-profile-folder":
        (runs / "smoke").mkdir(parents=True)
    elif layout == "profile-folder-itself":
        runs = runs / "default"
        runs.mkdir(parents=True)
    nb = REPO / "notebooks" / "02_facility_location.ipynb"
    assert main(["render", str(nb), "--runs", str(runs), "-o", str(tmp_path / "o.ipynb")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(runs) in err and calls == []


def test_render_refuses_a_notebook_without_results_dir(tmp_path, calls, capsys):
    from dmlnb.cli import main

    parameters_notebook(tmp_path / "x.ipynb", 'profile = "default"')
    (tmp_path / "runs" / "default").mkdir(parents=True)
    assert (
        main(
            [
                "render",
                str(tmp_path / "x.ipynb"),
                "--runs",
                str(tmp_path / "runs"),
                "-o",
                str(tmp_path / "o.ipynb"),
            ]
        )
        == 2
    )
    assert "no `results_dir` parameter" in capsys.readouterr().err and calls == []


def test_render_reports_the_failing_cell_and_its_error(tmp_path, monkeypatch, capsys):
    import papermill

    from dmlnb.cli import main

    def failing(**kwargs):
        raise papermill.PapermillExecutionError(
            7, 7, "fit(...)", "TrainingDisabledError", "x/default/run/record.json is missing", []
        )

    monkeypatch.setattr(papermill, "execute_notebook", failing)
    runs = _runs(tmp_path)
    nb = REPO / "notebooks" / "02_facility_location.ipynb"
    assert main(["render", str(nb), "--runs", str(runs), "-o", str(tmp_path / "o.ipynb")]) == 1
    err = capsys.readouterr().err
    assert "TrainingDisabledError" in err and "record.json is missing" in err and "cell 7" in err


@pytest.mark.parametrize(
    "argv, code, text",
    [
        pytest.param(["--help"], 0, "render", id="help"),
        pytest.param(["render", "--help"], 0, "--runs", id="render-help"),
        pytest.param([], 2, "COMMAND", id="no-command"),
        pytest.param(["render", "nb.ipynb", "-o", "o.ipynb"], 2, "--runs", id="runs-required"),
        pytest.param(["render", "nb.ipynb", "--runs", "r"], 2, "--output", id="output-required"),
    ],
)
def test_cli_arguments(argv, code, text, capsys):
    from dmlnb.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == code
    out = capsys.readouterr()
    assert text in out.out + out.err


def test_render_refuses_to_overwrite_the_notebook(tmp_path, calls):
    from dmlnb.render import RenderError, render_call

    nb = REPO / "notebooks" / "02_facility_location.ipynb"
    with pytest.raises(RenderError, match="the notebook itself"):
        render_call(nb, _runs(tmp_path), "default", nb)


# ------------------------------------------------------------------ hook and sampler state
def test_every_hook_state_is_plain_even_when_built_from_numpy(tmp_path):
    import numpy as np

    from dmlnb.data.base import InMemoryDataset
    from dmlnb.hooks import TrainState
    from dmlnb.losses.discriminative import LemmaTracker
    from dmlnb.losses.facility_location import FacilityLocationLoss, InsideLossHook, MarginDecayHook
    from dmlnb.profs.proximal import LaggedProximalHook, ProximalHook
    from dmlnb.profs.representatives import RepresentativeSampler
    from dmlnb.profs.timing import TimedSampler

    model = torch.nn.Linear(4, 3)
    state = TrainState(
        model=model,
        loss_fn=torch.nn.Module(),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        device=torch.device("cpu"),
    )
    labels = np.repeat(np.arange(4), 3)  # numpy labels, as a caller may pass them
    reps = RepresentativeSampler(labels, batch_size=4, m=2, period=2, hncm=True)
    reps.set_memory(torch.randn(4, 3))
    prox, lagged = (
        ProximalHook(model, np.float64(0.1), 2, params="all"),
        LaggedProximalHook(model, 0.1, params="all"),
    )
    prox.on_step_start(state)
    lagged.on_step_start(state)
    inside = InsideLossHook()
    inside.log = {"loss": [np.float64(0.5)], "step": [np.int64(0)]}
    lemma = LemmaTracker(
        InMemoryDataset(torch.randn(6, 1, 2, 2), torch.arange(3).repeat(2)), torch.eye(3)
    )
    lemma.rows = [{"epoch": np.float64(1.0), "gap": np.float32(0.25)}]
    hooks = [
        reps,
        TimedSampler(RepresentativeSampler(labels, 4, 2, 2)),
        prox,
        lagged,
        MarginDecayHook(FacilityLocationLoss(margin_multiplier=np.float64(10.0))),
        inside,
        lemma,
    ]
    save_checkpoint({"hooks": [h.state_dict() for h in hooks]}, tmp_path / "checkpoint.pt")
    loaded = load_checkpoint(tmp_path / "checkpoint.pt")["hooks"]
    for hook, saved in zip(hooks, loaded):
        hook.load_state_dict(saved)
    assert torch.equal(reps.memory, loaded[0]["memory"]) and inside.log == {
        "loss": [0.5],
        "step": [0.0],
    }
