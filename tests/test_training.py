import json
import threading

import pytest
import torch
from fabricated import CrashAt, fabricated_cub, flat_params

from dmlnb.data import load_dataset
from dmlnb.hooks import Hook
from dmlnb.losses.triplet import TripletLoss
from dmlnb.models import build_model
from dmlnb.profiles import make_config
from dmlnb.training import PhaseClock, evaluate_model, fit, precision_description, train

CFG = make_config("smoke", {"epochs": 3, "steps_per_epoch": 4, "eval_metrics": ("recall",)})


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def _model(cfg, splits):
    torch.manual_seed(cfg.seed)
    return build_model(
        cfg.model, splits.input_shape, cfg.embedding_dim, normalize=True, width=cfg.width
    )


def test_training_reduces_the_loss(digits):
    loss_fn = TripletLoss(margin=0.2, mining="all", reduction="mean")
    cfg = CFG.replace(epochs=4, steps_per_epoch=10)
    model = _model(cfg, digits)
    x, y = digits.train.get_batch(torch.arange(0, len(digits.train), 3))
    model.eval()
    with torch.no_grad():
        before = loss_fn(model(x), y).item()
    train(model, loss_fn, digits.train, None, cfg, progress=False)  # on CUDA when present
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        after = loss_fn(model(x.to(device)), y.to(device)).item()
    assert after < 0.8 * before


def test_same_seed_same_weights_other_seed_differs(digits):
    a, _ = fit(CFG, TripletLoss(mining="hard"), splits=digits, progress=False)
    b, _ = fit(CFG, TripletLoss(mining="hard"), splits=digits, progress=False)
    c, _ = fit(CFG.replace(seed=1), TripletLoss(mining="hard"), splits=digits, progress=False)
    assert torch.equal(flat_params(a), flat_params(b))
    assert not torch.equal(flat_params(a), flat_params(c))


def test_cpu_epochs_record_their_step_phases_and_train_channels_last(digits):
    cfg = CFG.replace(device="cpu", epochs=1)
    # every triplet (no hardest pick, which a rounding difference can flip): the two layouts' losses
    # then differ by rounding only
    model, record = fit(cfg, TripletLoss(mining="all"), splits=digits, progress=False)
    row = record.data["history"][-1]
    phases = row["step_seconds"]
    assert list(phases) == list(PhaseClock.PHASES) and all(v >= 0 for v in phases.values())
    assert phases["forward"] > 0 and phases["backward"] > 0
    assert sum(phases.values()) <= row["train_seconds"]  # the laps lie inside the epoch's clock
    conv = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)][
        -1
    ]  # (C_out, C_in > 1, 3, 3)
    assert (
        conv.weight.is_contiguous(memory_format=torch.channels_last)
        and not conv.weight.is_contiguous()
    )
    _, plain = fit(
        cfg.replace(channels_last=False), TripletLoss(mining="all"), splits=digits, progress=False
    )
    assert plain.data["history"][-1]["loss"] == pytest.approx(
        row["loss"], rel=1e-3
    )  # same run up to rounding, over 6 steps


def test_phase_clock_charges_each_lap_to_its_phase(monkeypatch):
    times = iter([10.0, 11.0, 11.5, 14.0, 20.0])
    monkeypatch.setattr("dmlnb.training.meters.time.perf_counter", lambda: next(times))
    clock = PhaseClock(enabled=True)
    clock.lap("data"), clock.lap("forward"), clock.lap("data")
    assert clock.totals() == {**dict.fromkeys(PhaseClock.PHASES, 0.0), "data": 3.5, "forward": 0.5}
    assert PhaseClock(enabled=False).totals() is None


def _strip_timing(history):
    drop = {"train_seconds", "images_per_second", "eval_seconds", "step_seconds"}
    out = []
    for row in history:
        row = {k: v for k, v in row.items() if k not in drop}
        if row.get("metrics"):
            row["metrics"] = {k: v for k, v in row["metrics"].items() if k not in drop}
        out.append(row)
    return out


def test_resume_after_interruption_equals_uninterrupted_run(digits, tmp_path):
    model_a, rec_a = fit(
        CFG, TripletLoss(mining="semihard"), splits=digits, run_dir=tmp_path / "a", progress=False
    )
    crash = CrashAt(at_step=CFG.steps_per_epoch + 2)  # in the middle of epoch 2
    with pytest.raises(KeyboardInterrupt):
        fit(
            CFG,
            TripletLoss(mining="semihard"),
            splits=digits,
            run_dir=tmp_path / "b",
            hooks=[crash],
            progress=False,
        )
    on_disk = json.loads((tmp_path / "b" / "record.json").read_text())
    assert on_disk["status"] == "running" and len(on_disk["history"]) == 1
    model_b, rec_b = fit(
        CFG,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "b",
        hooks=[crash],
        progress=False,
    )
    assert torch.equal(flat_params(model_a), flat_params(model_b))
    assert rec_b.data["resumed"] == 1 and rec_b.data["status"] == "finished"
    assert _strip_timing(rec_a.data["history"]) == _strip_timing(rec_b.data["history"])


def test_finished_run_is_loaded_not_retrained(digits, tmp_path):
    model_a, rec_a = fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "r", progress=False)
    counter = _Counter()
    model_b, rec_b = fit(
        CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "r", hooks=[counter], progress=False
    )
    assert counter.steps == 0
    assert torch.equal(flat_params(model_a), flat_params(model_b))
    assert rec_b.best == rec_a.best


def test_resume_refuses_a_different_config(digits, tmp_path):
    fit(CFG, TripletLoss(), splits=digits, run_dir=tmp_path / "r", progress=False)
    with pytest.raises(ValueError, match="different configuration"):
        fit(
            CFG.replace(lr=0.1),
            TripletLoss(),
            splits=digits,
            run_dir=tmp_path / "r",
            progress=False,
        )


def test_run_record_is_complete(digits, tmp_path):
    _, rec = fit(
        CFG,
        TripletLoss(),
        splits=digits,
        run_dir=tmp_path / "r",
        eval_at_start=True,
        progress=False,
    )
    data = json.loads((tmp_path / "r" / "record.json").read_text())
    assert data == json.loads(json.dumps(rec.data))
    assert data["status"] == "finished" and data["finished"]
    assert data["config"]["seed"] == CFG.seed and data["config"]["epochs"] == CFG.epochs
    assert [row["epoch"] for row in data["history"]] == [0, 1, 2, 3]
    for row in data["history"][1:]:
        assert row["train_seconds"] > 0 and row["images_per_second"] > 0
        assert set(row["metrics"]) >= {"R@1", "R@2", "R@4", "R@8", "eval_seconds"}
    best = max(data["history"], key=lambda r: r["metrics"]["R@1"])
    assert data["best"]["value"] == best["metrics"]["R@1"]
    env = data["environment"]
    assert {"torch", "torchvision", "python", "device", "git", "dmlnb"} <= set(env)
    assert "TripletLoss" in data["components"]["loss"]
    assert (tmp_path / "r" / "best.pt").exists()


class _Counter(Hook):
    def __init__(self):
        self.steps, self.batches = 0, []

    def on_step_end(self, state):
        self.steps += 1
        self.batches.append(state.indices.tolist())
        assert state.embeddings.shape == (len(state.indices), CFG.embedding_dim)
        assert not state.embeddings.requires_grad


class _Penalty(Hook):
    def penalty(self, state):
        return torch.tensor(5.0)


def test_hooks_see_every_step_and_penalties_enter_the_loss(digits):
    counter = _Counter()
    _, rec = fit(CFG, TripletLoss(), splits=digits, hooks=[counter], progress=False)
    assert counter.steps == CFG.epochs * CFG.steps_per_epoch
    assert all(len(b) == CFG.batch_size for b in counter.batches)
    _, rec_pen = fit(CFG, TripletLoss(), splits=digits, hooks=[_Penalty()], progress=False)
    # a constant penalty has no gradient: same trajectory, loss shifted by exactly 5
    for row, row_pen in zip(rec.data["history"], rec_pen.data["history"]):
        assert row_pen["loss"] == pytest.approx(row["loss"] + 5.0, abs=1e-5)


class _NaN(Hook):
    def penalty(self, state):
        return torch.tensor(float("nan"))


def test_nan_loss_stops_the_run_with_a_clear_error(digits):
    with pytest.raises(FloatingPointError, match="non-finite loss"):
        fit(CFG, TripletLoss(), splits=digits, hooks=[_NaN()], progress=False)


def test_unknown_optimizer(digits):
    with pytest.raises(ValueError, match="unknown optimizer.*adam"):
        fit(CFG.replace(optimizer="lbfgs"), TripletLoss(), splits=digits, progress=False)


class _OnlineSampler(Hook):
    """A sampler-hook that records how many steps had finished when each batch was drawn."""

    def __init__(self, labels, batch_size):
        from dmlnb.samplers import MPerClassSampler

        self.inner = MPerClassSampler(labels, m=8, batch_size=batch_size, seed=0)
        self.finished, self.drawn_after = 0, []

    def __len__(self):
        return len(self.inner)

    def set_epoch(self, epoch):
        self.inner.set_epoch(epoch)

    def __iter__(self):
        for batch in self.inner:
            self.drawn_after.append(self.finished)
            yield batch

    def on_step_end(self, state):
        self.finished += 1


def test_sampler_hooks_draw_each_batch_after_the_previous_step(digits):
    sampler = _OnlineSampler(digits.train.labels, CFG.batch_size)
    cfg = CFG.replace(steps_per_epoch=len(sampler.inner), epochs=1)
    fit(cfg, TripletLoss(), splits=digits, sampler=sampler, progress=False)
    assert sampler.drawn_after == list(range(len(sampler.inner)))
    with pytest.raises(ValueError, match="steps_per_epoch"):
        fit(
            CFG.replace(steps_per_epoch=3),
            TripletLoss(),
            splits=digits,
            sampler=sampler,
            progress=False,
        )


def test_paper_profile_path_on_a_fabricated_cub_tree(tmp_path, monkeypatch):
    """The `paper` configuration (file-backed data through the decoded cache, torchvision
    backbone) runs end to end on a tiny fabricated CUB-200-2011 tree (no pretrained weights
    offline)."""
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))
    fabricated_cub(
        tmp_path, [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 101, 101, 101, 102, 102, 102, 103, 103, 103]
    )
    cfg = make_config(
        "paper",
        {
            "dataset_options": {"image_size": 32},
            "pretrained": False,
            "batch_size": 8,
            "m_per_class": 2,
            "epochs": 1,
            "steps_per_epoch": 2,
            "num_workers": 0,
            "embedding_dim": 16,
            "eval_batch_size": 4,
        },
    )
    assert (cfg.dataset, cfg.model, cfg.embedding_dim) == ("cub200", "resnet50", 16)
    model, rec = fit(
        cfg,
        TripletLoss(mining="semihard"),
        data_root=tmp_path,
        run_dir=tmp_path / "run",
        progress=False,
    )
    assert rec.data["status"] == "finished"
    assert set(rec.best["metrics"]) >= {"R@1", "R@8", "NMI", "F1", "MAP@R"}
    assert model(torch.rand(2, 3, 32, 32, device=next(model.parameters()).device)).shape == (2, 16)


def test_loss_meter_reads_back_every_k_steps_and_names_the_first_bad_step():
    from dmlnb.training import LossMeter

    meter = LossMeter(torch.device("cpu"), every=3)
    losses = [0.5, 0.25, 2.0]
    for step, value in enumerate(losses):
        meter.add(torch.tensor(value), batch_size=4, step=step)
        assert meter.due() == (step == 2)
    assert meter.read(epoch=0) == 2.0 and not meter.due()
    assert meter.epoch_mean(epoch=0) == sum(4 * v for v in losses) / 12
    meter.add(torch.tensor(float("nan")), batch_size=4, step=3)  # not read yet: no error
    meter.add(torch.tensor(1.0), batch_size=4, step=4)
    with pytest.raises(FloatingPointError, match="epoch 1, step 3.*'lr'"):
        meter.read(epoch=0)
    assert LossMeter(torch.device("cpu")).every == 1  # a read is free on the CPU


def test_progress_bars_follow_the_argument_else_the_environment(monkeypatch):
    from dmlnb.env import PROGRESS_ENV, show_progress

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert show_progress(None) and not show_progress(False)
    monkeypatch.setenv(PROGRESS_ENV, "0")  # what `make notebooks` sets
    assert not show_progress(None) and show_progress(True)


class _NaNAt(torch.nn.Module):
    """Wraps a model; its output at forward call ``at`` (0-based) holds a NaN."""

    def __init__(self, model: torch.nn.Module, at: int) -> None:
        super().__init__()
        self.model, self.at, self.calls = model, at, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        if self.training:
            if self.calls == self.at:
                out = out.clone()
                out[0, 0] = float("nan")
            self.calls += 1
        return out


def test_deferred_checks_stop_a_bad_batch_at_the_next_read(digits, monkeypatch):
    """With reads every 3 steps (as on a GPU, every 50), a NaN embedding at step 4 raises the
    loss's own error at the read after step 5, not a silent continuation."""
    import functools

    from dmlnb.checks import NonFiniteError
    from dmlnb.training import loop

    monkeypatch.setattr(loop, "LossMeter", functools.partial(loop.LossMeter, every=3))
    cfg = CFG.replace(epochs=1, steps_per_epoch=8)
    model = _NaNAt(_model(cfg, digits), at=4)
    with pytest.raises(NonFiniteError, match="contain NaN or Inf in 1 of"):
        train(model, TripletLoss(), digits.train, None, cfg, progress=False)
    assert model.calls == 6  # steps 0-5 ran; the read after step 5 stopped the run


@pytest.mark.cuda
def test_resume_on_cuda_without_deterministic_algorithms_is_close(
    digits, tmp_path, nondeterministic_cuda
):
    """Without deterministic algorithms (cuDNN autotuning on) a resumed CUDA run is not promised
    to be bit-identical; it stays within a small tolerance of the uninterrupted one."""
    cfg = CFG.replace(amp=False)
    model_a, _ = fit(
        cfg, TripletLoss(mining="semihard"), splits=digits, run_dir=tmp_path / "a", progress=False
    )
    with pytest.raises(KeyboardInterrupt):
        fit(
            cfg,
            TripletLoss(mining="semihard"),
            splits=digits,
            run_dir=tmp_path / "b",
            hooks=[CrashAt(at_step=cfg.steps_per_epoch + 2)],
            progress=False,
        )
    model_b, rec_b = fit(
        cfg,
        TripletLoss(mining="semihard"),
        splits=digits,
        run_dir=tmp_path / "b",
        hooks=[CrashAt(at_step=-1)],
        progress=False,
    )
    assert rec_b.data["resumed"] == 1
    torch.testing.assert_close(flat_params(model_a), flat_params(model_b), rtol=1e-3, atol=1e-4)


@pytest.mark.cuda
def test_a_training_step_on_cuda_does_not_synchronise(digits):
    """Steps between the loss meter's reads make no host synchronisation: with the data on the
    GPU, 2 epochs of 40 steps synchronise a handful of times (epoch ends), not once per step."""
    import warnings

    cfg = CFG.replace(epochs=2, steps_per_epoch=40)
    train_set = digits.train.to("cuda")
    model = _model(cfg, digits)
    train(
        model,
        TripletLoss(),
        train_set,
        None,
        cfg.replace(epochs=1, steps_per_epoch=2),
        progress=False,
    )  # warm-up
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            train(model, TripletLoss(), train_set, None, cfg, progress=False)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]
    assert len(syncs) <= 6 * cfg.epochs, (
        f"{len(syncs)} synchronisations in {2 * 40} steps: {syncs[:5]}"
    )


def _cached_cub(tmp_path, monkeypatch):
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "cache"))
    fabricated_cub(tmp_path / "data", [c for c in (1, 2, 3, 4, 101, 102) for _ in range(4)])
    return load_dataset("cub200", root=tmp_path / "data", image_size=24)


CACHED_CFG = make_config(
    "smoke",
    {
        "batch_size": 8,
        "m_per_class": 2,
        "epochs": 2,
        "steps_per_epoch": 3,
        "eval_metrics": ("recall",),
        "eval_ks": (1, 2),
        "eval_batch_size": 5,
    },
)


def test_training_on_cached_files_is_seeded_and_resumes_bit_identically(tmp_path, monkeypatch):
    """Batches of the decoded cache are cropped with a generator seeded by (seed, epoch, step)
    and prefetched in a thread: same seed, same weights; a run killed in epoch 2 and resumed ends
    where the uninterrupted run ends; another seed differs; no prefetch thread outlives a run."""
    splits = _cached_cub(tmp_path, monkeypatch)
    run = lambda cfg, **kw: fit(cfg, TripletLoss(mining="all"), splits=splits, progress=False, **kw)  # noqa: E731
    model_a, rec_a = run(CACHED_CFG, run_dir=tmp_path / "a")
    model_b, _ = run(CACHED_CFG)
    crash = CrashAt(at_step=CACHED_CFG.steps_per_epoch + 1)
    with pytest.raises(KeyboardInterrupt):
        run(CACHED_CFG, run_dir=tmp_path / "c", hooks=[crash])
    assert not any(t.name == "dmlnb-prefetch" for t in threading.enumerate())
    model_c, rec_c = run(CACHED_CFG, run_dir=tmp_path / "c", hooks=[crash])
    model_d, _ = run(CACHED_CFG.replace(seed=1))
    assert torch.equal(flat_params(model_a), flat_params(model_b))
    assert torch.equal(flat_params(model_a), flat_params(model_c)) and rec_c.data["resumed"] == 1
    assert _strip_timing(rec_a.data["history"]) == _strip_timing(rec_c.data["history"])
    assert not torch.equal(flat_params(model_a), flat_params(model_d))
    assert set(rec_a.best["metrics"]) >= {"R@1"}


# ------------------------------------------------------------------ a validation split (issue #20)
VAL_CFG = make_config(
    "smoke",
    {
        "epochs": 3,
        "steps_per_epoch": 2,
        "batch_size": 24,
        "eval_metrics": ("recall",),
        "dataset_options": {"validation": 2},
        "select_on": "validation",
    },
)


@pytest.fixture(scope="module")
def held_out():
    return load_dataset(
        "digits", **VAL_CFG.dataset_options
    )  # train on 3 of digits 0-4, validate on 2


def _strip_record(data):
    """A record's training outcome without timings: history, best and selections."""

    def timeless(entry):
        drop = {"seconds_to_best", "images_per_second"}
        entry = {k: v for k, v in entry.items() if not k.endswith("_seconds") and k not in drop}
        for key in ("metrics", "val_metrics"):
            if entry.get(key):
                entry[key] = {k: v for k, v in entry[key].items() if k != "eval_seconds"}
        return entry

    return (
        [timeless(row) for row in data["history"]],
        timeless(data["best"]),
        {k: timeless(v) for k, v in data.get("selections", {}).items()},
    )


def test_a_run_with_a_validation_split_records_both_and_selects_where_asked(held_out, tmp_path):
    from dmlnb.checkpoints import load_checkpoint

    _, rec = fit(
        VAL_CFG,
        TripletLoss(),
        splits=held_out,
        run_dir=tmp_path / "v",
        eval_at_start=True,
        progress=False,
    )
    rows = rec.data["history"]
    assert [r["epoch"] for r in rows] == [0, 1, 2, 3]
    assert all(
        set(r["val_metrics"]) >= {"R@1", "R@8", "eval_seconds"} and r["metrics"] for r in rows
    )
    assert all(r["val_metrics"]["R@1"] != r["metrics"]["R@1"] for r in rows)  # two different sets
    best_val = max(rows[1:], key=lambda r: r["val_metrics"]["R@1"])
    assert rec.best["epoch"] == best_val["epoch"] and rec.best["selected_on"] == "validation"
    assert (
        rec.best["metrics"] == best_val["metrics"]
        and rec.best["val_metrics"] == best_val["val_metrics"]
    )
    assert rec.data["selections"]["validation"] == rec.best
    assert (
        rec.data["selections"]["test"]["epoch"]
        == max(rows[1:], key=lambda r: r["metrics"]["R@1"])["epoch"]
    )
    assert (
        rec.data["components"]["val_set"]
        == f"InMemoryDataset of {len(held_out.validation)} items, 2 classes"
    )
    assert rec.data["config"]["dataset_options"] == {"validation": 2}
    assert load_checkpoint(tmp_path / "v" / "best.pt")["epoch"] == rec.best["epoch"]
    _, on_test = fit(
        VAL_CFG.replace(select_on="test"),
        TripletLoss(),
        splits=held_out,
        run_dir=tmp_path / "t",
        eval_at_start=True,
        progress=False,
    )
    assert (
        _strip_record(on_test.data)[0] == _strip_record(rec.data)[0]
    )  # the same training and evaluations
    assert (
        on_test.best["selected_on"] == "test" and on_test.best == on_test.data["selections"]["test"]
    )
    assert (
        _strip_record(on_test.data)[2] == _strip_record(rec.data)[2]
    )  # both selections either way
    assert load_checkpoint(tmp_path / "t" / "best.pt")["epoch"] == on_test.best["epoch"]


def test_evaluating_a_validation_split_does_not_change_the_training(held_out):
    cfg = VAL_CFG.replace(select_on="test")
    a = _model(cfg, held_out)
    rec_a = train(
        a,
        TripletLoss(),
        held_out.train,
        held_out.test,
        cfg,
        val_set=held_out.validation,
        progress=False,
    )
    b = _model(cfg, held_out)
    rec_b = train(b, TripletLoss(), held_out.train, held_out.test, cfg, progress=False)
    assert torch.equal(flat_params(a), flat_params(b))
    assert [r["metrics"]["R@1"] for r in rec_a.data["history"]] == [
        r["metrics"]["R@1"] for r in rec_b.data["history"]
    ]
    assert rec_a.best["epoch"] == rec_b.best["epoch"] and "selections" not in rec_b.data
    last = {
        k: v for k, v in rec_a.data["history"][-1]["val_metrics"].items() if k != "eval_seconds"
    }
    assert last == evaluate_model(
        a, held_out.validation, cfg
    )  # the validation set, as query and gallery


def test_a_run_without_evaluation_may_carry_select_on_validation(held_out):
    record = train(
        _model(VAL_CFG, held_out), TripletLoss(), held_out.train, None, VAL_CFG, progress=False
    )
    assert (
        record.data["status"] == "finished" and record.best is None
    )  # nothing evaluated, nothing selected


def test_selecting_on_validation_needs_a_validation_split(held_out, digits):
    with pytest.raises(
        ValueError, match=r"select_on is 'validation'.*dataset_options=\{'validation': 0.2\}"
    ):
        fit(VAL_CFG.replace(dataset_options={}), TripletLoss(), splits=digits, progress=False)
    model = _model(VAL_CFG, held_out)
    with pytest.raises(ValueError, match="val_set is given without an eval_set"):
        train(
            model,
            TripletLoss(),
            held_out.train,
            None,
            VAL_CFG,
            val_set=held_out.validation,
            progress=False,
        )
    with pytest.raises(ValueError, match="val_set is empty"):
        train(
            model,
            TripletLoss(),
            held_out.train,
            held_out.test,
            VAL_CFG,
            val_set=held_out.validation.subset([]),
            progress=False,
        )


def test_a_run_with_a_validation_split_resumes_bit_identically(held_out, tmp_path):
    run = lambda **kw: fit(
        VAL_CFG, TripletLoss(mining="semihard"), splits=held_out, progress=False, **kw
    )  # noqa: E731
    model_a, rec_a = run(run_dir=tmp_path / "a")
    crash = CrashAt(at_step=VAL_CFG.steps_per_epoch + 1)  # in the middle of epoch 2
    with pytest.raises(KeyboardInterrupt):
        run(run_dir=tmp_path / "b", hooks=[crash])
    on_disk = json.loads((tmp_path / "b" / "record.json").read_text())
    assert on_disk["status"] == "running" and set(on_disk["selections"]) == {"validation", "test"}
    model_b, rec_b = run(run_dir=tmp_path / "b", hooks=[crash])
    assert torch.equal(flat_params(model_a), flat_params(model_b)) and rec_b.data["resumed"] == 1
    assert _strip_record(rec_a.data) == _strip_record(rec_b.data)
    assert rec_b.best == rec_b.data["selections"]["validation"]


def test_optimizer_takes_betas_and_a_head_group_at_head_lr_scale(digits):
    """``betas`` reach Adam / AdamW; ``head_lr_scale`` puts ``model.head`` in a group of its own at
    ``scale * lr`` after the trunk's (``param_groups[0]`` keeps the base rate), the loss's last;
    the default keeps one model group, as every run before the key was made."""
    from dmlnb.losses import SoftTripleLoss
    from dmlnb.training import build_optimizer

    model = _model(CFG, digits)
    loss = SoftTripleLoss(10, CFG.embedding_dim)
    plain = build_optimizer(CFG, model, loss)
    assert [len(g["params"]) for g in plain.param_groups] == [len(list(model.parameters())), 1]
    assert plain.param_groups[0]["betas"] == (0.9, 0.999)
    cfg = CFG.replace(betas=(0.9, 0.99), head_lr_scale=10.0, loss_lr=0.5)
    for name in ("adam", "adamw"):
        opt = build_optimizer(cfg.replace(optimizer=name), model, loss)
        trunk, head, centres = opt.param_groups
        assert [g["betas"] for g in opt.param_groups] == [(0.9, 0.99)] * 3
        assert {id(p) for p in head["params"]} == {id(p) for p in model.head.parameters()}
        assert len(trunk["params"]) + len(head["params"]) == len(list(model.parameters()))
        assert (trunk["lr"], head["lr"], centres["lr"]) == pytest.approx((cfg.lr, 10 * cfg.lr, 0.5))
    with pytest.raises(
        ValueError, match=r"head_lr_scale=10 needs model.head.*Linear.*head_lr_scale=1.0"
    ):
        build_optimizer(cfg, torch.nn.Linear(3, 2), loss)


def test_precision_description_follows_amp():
    """The deviations tables' precision row says what mixed_precision does with each setting."""
    on, off = precision_description(CFG), precision_description(CFG.replace(amp=False))
    assert CFG.amp and "bf16 autocast on a CUDA GPU" in on and "float32 on a CPU" in on
    assert off == "float32 on every device (amp off)"
