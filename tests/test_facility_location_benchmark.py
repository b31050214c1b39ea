"""Smoke test of ``benchmarks/facility_location.py`` with tiny batches on the CPU (the lead runs it
at full size on a GPU)."""

from __future__ import annotations

import pytest
from scripts import benchmark_script


def test_facility_location_benchmark_runs_on_a_cpu(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    bench = benchmark_script("facility_location", monkeypatch)
    table = bench.main(
        [
            "--device",
            "cpu",
            "--batch-sizes",
            "16",
            "32",
            "--per-class",
            "4",
            "--repeats",
            "2",
            "--count-ops",
        ]
    )
    assert list(table.columns) == ["B", "m", "C", "ms", "pam_swaps", "ops", "kernels", "reads"]
    assert table["B"].tolist() == [16, 32] and (table["ms"] > 0).all()
    assert (table["kernels"] > 0).all() and (table["ops"] >= table["kernels"]).all()
    assert (table["reads"] >= 1).all()  # the labels' encoding, the passes' early stops
    out = capsys.readouterr().out
    assert "one call at B=128, C=32, static-shape path (CUDA's)" in out and "kernels" in out
