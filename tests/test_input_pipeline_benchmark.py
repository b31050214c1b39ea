"""Smoke test of ``benchmarks/input_pipeline.py`` with tiny arguments on the CPU (the lead runs
it at full size on a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import benchmark_script


def test_input_pipeline_benchmark_runs_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DMLNB_CACHE", str(tmp_path / "user-cache"))
    monkeypatch.setenv("DMLNB_PROGRESS", "0")
    bench = benchmark_script("input_pipeline", monkeypatch)
    table = bench.main(
        [
            "--images",
            "80",
            "--width",
            "40",
            "--height",
            "30",
            "--image-size",
            "16",
            "--batch-size",
            "8",
            "--steps",
            "2",
            "--workers",
            "0",
            "--model",
            "convnet",
            "--device",
            "cpu",
            "--root",
            str(tmp_path / "bench"),
            "--out",
            str(tmp_path / "table.csv"),
        ]
    )
    names = list(table.index)
    assert names[0].startswith("cache build") and names[1].startswith("cache reuse")
    assert any(n.startswith("PIL + DataLoader, 0 workers") for n in names)
    assert any(n.startswith("cached batches on the CPU") for n in names)
    assert sum(n.startswith("train convnet") for n in names) == 3
    assert (table["images/s"] > 0).all()
    assert (tmp_path / "table.csv").is_file() and (tmp_path / "bench" / "cache").is_dir()
    assert not (tmp_path / "user-cache").exists()  # the benchmark's cache lives under --root
