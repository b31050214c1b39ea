"""A run trains until its selection metric has stopped improving (``TrainConfig.patience``):
it stops after ``patience`` evaluations without a better one, trains exactly as without the
rule until then, stays stopped when resumed, and records made before the field keep their
fingerprints."""

from __future__ import annotations

import pytest
import torch
from fabricated import flat_params

from dmlnb.data import load_dataset
from dmlnb.hooks import Hook
from dmlnb.losses.triplet import TripletLoss
from dmlnb.profiles import make_config
from dmlnb.records import run_fingerprint, with_added_config_keys
from dmlnb.training import fit

#: an Adam step of about 1e-12: the metric soon stops moving (only batch norm's statistics do)
FROZEN = make_config(
    "smoke",
    {"epochs": 12, "steps_per_epoch": 3, "eval_metrics": ("recall",), "lr": 1e-12, "patience": 2},
)


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def _timeless(value):
    """``value`` without its timings (``*seconds*``, ``images_per_second``), nested."""
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    if isinstance(value, dict):
        return {
            k: _timeless(v)
            for k, v in value.items()
            if "seconds" not in k and k != "images_per_second"
        }
    return value


class _Steps(Hook):
    def __init__(self) -> None:
        self.steps = 0

    def on_step_start(self, state) -> None:
        self.steps += 1


def test_a_run_stops_after_patience_evaluations_without_a_better_one(digits, tmp_path):
    model, record = fit(FROZEN, TripletLoss(), splits=digits, run_dir=tmp_path / "r")
    # it stops at the second evaluation after its best one (later ties keep the earlier epoch)
    stop = record.best["epoch"] + 2
    assert [row["epoch"] for row in record.evaluations()] == list(range(1, stop + 1))
    assert stop < FROZEN.epochs and record.evaluations_since_best() == 2
    assert record.stopped_early and record.data["stopped"] == {"epoch": stop, "patience": 2}
    assert record.data["status"] == "finished"
    # until it stops, the rule changes nothing: the same epochs without it
    _, plain = fit(FROZEN.replace(epochs=stop, patience=None), TripletLoss(), splits=digits)
    assert _timeless(plain.data["history"]) == _timeless(record.data["history"])
    assert not plain.stopped_early
    # resumed, a stopped run stays stopped: nothing trains, the weights are the stored ones
    steps = _Steps()
    again, reloaded = fit(
        FROZEN, TripletLoss(), splits=digits, run_dir=tmp_path / "r", hooks=[steps]
    )
    assert steps.steps == 0 and len(reloaded.data["history"]) == stop
    assert torch.equal(flat_params(again), flat_params(model))


def test_an_improving_run_is_not_stopped(digits):
    cfg = FROZEN.replace(lr=3e-3, epochs=3, steps_per_epoch=6, patience=3)
    _, record = fit(cfg, TripletLoss(), splits=digits)
    assert len(record.evaluations()) == 3 and not record.stopped_early


def test_records_made_before_patience_keep_their_fingerprints():
    spec = {"factory": {"name": "triplet", "version": 1}}
    now = make_config("smoke", {})
    before = {k: v for k, v in now.to_dict().items() if k != "patience"}  # a record's config
    assert run_fingerprint(with_added_config_keys(before), spec) == run_fingerprint(now, spec)
    assert run_fingerprint(before, spec) == run_fingerprint(now, spec)  # the stored fingerprints
    assert run_fingerprint(now.replace(patience=3), spec) != run_fingerprint(now, spec)
    with pytest.raises(ValueError, match="patience"):
        make_config("smoke", {"patience": 0})
