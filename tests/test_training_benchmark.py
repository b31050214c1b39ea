"""benchmarks/training.py runs end to end at tiny sizes on the CPU and prints every table."""

from __future__ import annotations

import pytest
from scripts import benchmark_script


@pytest.fixture
def training_script(monkeypatch):
    """benchmarks/training.py as a module (not named ``benchmark``: pytest-benchmark
    owns that fixture)."""
    return benchmark_script("training", monkeypatch)


def test_quick_run_prints_the_training_inference_and_loss_tables(training_script, tmp_path):
    out = tmp_path / "bench.txt"
    text = training_script.main(
        [
            "--quick",
            "--device",
            "cpu",
            "--parts",
            "training",
            "inference",
            "losses",
            "--out",
            str(out),
        ]
    )
    assert out.read_text() == text
    assert "## Training img/s, in-memory input" in text and "bare PyTorch loop" in text
    assert "dmlnb.train (defaults)" in text
    assert "## Facility-location loss-augmented inference" in text and "CPU (ms)" in text
    assert "## Losses" in text and "multi-similarity" in text
    assert "ours ops" in text and "PML ops" in text
    assert "device: " in text and "torch " in text


#: Operators a loss may dispatch beyond PML's, each with its reason (an open item, not a goal).
#: N-pair's class slots are static-shape (K = B // 2, no host read), which made it 2-4x faster
#: than before on the CPU but costs 88 operators against PML's 84, which reads the labels back
#: to size its pairs; issue #45 left closing this gap to a later change.
EXTRA_OPERATORS = {"n-pair": 4}


def test_loss_script_counts_operators_only_and_ours_dispatch_at_most_pmls(training_script, capsys):
    """Issue #16, item 6: at B = 128 each loss's GPU time is its operator dispatches, so every
    loss with a PML counterpart dispatches at most as many operators as PML's, forward and
    backward, value checks deferred (the counts do not depend on B or D; B = 32
    keeps this quick)."""
    table = training_script.loss_benchmark.main(
        ["--ops-only", "--device", "cpu", "--batch-sizes", "32", "--dims", "16"]
    )
    text = capsys.readouterr().out
    assert (
        "operator counts only" in text
        and "ours ops" in text
        and "PML ops" in text
        and "(ms)" not in text
    )
    compared = table[table["PML ops"].notna()].set_index("loss")
    assert len(compared) == 14 and (compared["ours ops"] > 0).all()
    allowed = compared.index.map(lambda loss: EXTRA_OPERATORS.get(loss, 0))
    over = compared[compared["ours ops"] > compared["PML ops"] + allowed]
    assert over.empty, f"more operators than PML: {over[['ours ops', 'PML ops']].to_dict('index')}"
    assert (
        table.loc[table["loss"] == "facility location", "ours ops"].isna().all()
    )  # CPU path != CUDA's
