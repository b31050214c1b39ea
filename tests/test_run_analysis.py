"""dmlnb.run_analysis: analyses stored next to a run record, keyed by their settings and by the
record's fingerprint; the compact forms they are stored in."""

import json
import math

import numpy as np
import pytest
import torch

from dmlnb.checkpoints import RUN_FILES, prepare_run_dir
from dmlnb.profiles import make_config
from dmlnb.records import RunRecord
from dmlnb.run_analysis import (
    ANALYSIS_FILE,
    missing_reason,
    quantiles,
    rounded,
    save_analysis,
    stored_analysis,
)


def _record(loss: float = 1.0, seconds: float = 2.0, lr: float = 1e-3) -> RunRecord:
    """A finished one-epoch record of the smoke configuration with the given
    loss, timings and lr."""
    config = make_config("smoke", {"lr": lr}).to_dict()
    record = RunRecord.new("run", config, {}, {"device": "cpu"})
    record.add_epoch(
        {
            "epoch": 1,
            "loss": loss,
            "train_seconds": seconds,
            "metrics": {"R@1": 0.5, "eval_seconds": seconds},
        },
        "R@1",
    )
    record.finish("2024-01-01T00:00:00+00:00")
    return record


def test_fingerprint_ignores_timings_and_follows_the_numbers(tmp_path):
    base = _record()
    assert len(base.outcome()) == 16 and base.outcome() == _record(seconds=9.0).outcome()
    assert base.outcome() != _record(loss=1.0 + 1e-12).outcome()
    assert base.outcome() != _record(lr=1e-2).outcome()
    base.save(tmp_path / "record.json")  # tuples in the config read back as lists: same fingerprint
    assert RunRecord.load(tmp_path / "record.json").outcome() == base.outcome()


def test_stored_analysis_is_keyed_by_settings_and_training(tmp_path):
    record = _record()
    assert stored_analysis(tmp_path, "maps", {"k": (1, 2)}, record) is None
    assert missing_reason(tmp_path, "maps", {"k": (1, 2)}, record).endswith(
        f"{ANALYSIS_FILE} is missing"
    )
    values = save_analysis(
        tmp_path, "maps", {"k": (1, 2)}, record, {"x": np.float32(0.5), "y": (1, 2)}
    )
    assert values == {"x": 0.5, "y": [1, 2]}  # as they read back from the file
    assert stored_analysis(tmp_path, "maps", {"k": [1, 2]}, record) == values
    assert missing_reason(tmp_path, "maps", {"k": (1, 2)}, record) == ""
    # a second analysis is added to the same file; the first is kept
    save_analysis(tmp_path, "other", {}, record, {"z": [0.25]})
    assert stored_analysis(tmp_path, "maps", {"k": (1, 2)}, record) == values
    assert stored_analysis(tmp_path, "other", {}, record) == {"z": [0.25]}
    # compact (one line) and written atomically (no temporary file left)
    assert [p.name for p in tmp_path.iterdir()] == [ANALYSIS_FILE]
    text = (tmp_path / ANALYSIS_FILE).read_text()
    assert (
        text.count("\n") == 1
        and ", " not in text
        and json.loads(text)["maps"]["run"] == record.outcome()
    )
    # unusable: other settings, another training, another name
    assert stored_analysis(tmp_path, "maps", {"k": (1, 3)}, record) is None
    assert "made with other settings ({'k': [1, 2]})" in missing_reason(
        tmp_path, "maps", {"k": (1, 3)}, record
    )
    retrained = _record(loss=1.5)
    assert stored_analysis(tmp_path, "maps", {"k": (1, 2)}, retrained) is None
    assert "of another training of the run" in missing_reason(
        tmp_path, "maps", {"k": (1, 2)}, retrained
    )
    assert "holds no analysis 'tsne'" in missing_reason(tmp_path, "tsne", {}, record)
    # a retraining that reproduces the record (other timings only) still reads it
    assert stored_analysis(tmp_path, "maps", {"k": (1, 2)}, _record(seconds=7.0)) == values
    # a killed write's temporary file is cleared when the folder is prepared for a run
    assert ANALYSIS_FILE in RUN_FILES
    (tmp_path / f".{ANALYSIS_FILE}.x1.tmp").write_text("{")
    prepare_run_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [ANALYSIS_FILE]


def test_quantiles_keep_extremes_median_and_bin_shares():
    g = torch.Generator().manual_seed(0)
    x = torch.cat(
        [torch.rand(20000, generator=g) ** 3, torch.tensor([float("nan")])]
    )  # skewed, one nan
    finite = x[:-1].double().numpy()
    q = np.asarray(quantiles(x, 1001, 6))
    assert q.shape == (1001,) and np.all(np.diff(q) >= 0)
    assert q[[0, 500, -1]] == pytest.approx(
        [finite.min(), np.median(finite), finite.max()], abs=5e-7
    )
    bins = np.linspace(0, 1, 61)
    shares = np.histogram(finite, bins)[0] / finite.size
    assert np.abs(np.histogram(q, bins)[0] / q.size - shares).max() <= 2 / 1001
    with pytest.raises(ValueError, match="count must be >= 2"):
        quantiles(x, 1, 4)
    with pytest.raises(ValueError, match="no finite value"):
        quantiles(torch.tensor([float("nan")]), 11, 4)


def test_rounded_keeps_shape_and_nan():
    out = rounded(torch.tensor([[0.123456, float("nan")], [-2.0, 1.00005]], dtype=torch.float64), 3)
    assert out[0][0] == 0.123 and math.isnan(out[0][1]) and out[1] == [-2.0, 1.0]
    assert json.dumps(rounded(np.array([0.1 + 0.2]), 4)) == "[0.3]"
