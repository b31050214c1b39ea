"""Smoke test of ``benchmarks/hncm.py`` at tiny sizes (no timing is asserted)."""

from __future__ import annotations

import pytest
from scripts import benchmark_script


def _bench(monkeypatch):
    return benchmark_script("hncm", monkeypatch)


def test_hncm_benchmark_prints_both_rules_side_by_side(capsys, monkeypatch) -> None:
    table = _bench(monkeypatch).main(
        ["--classes", "20", "50", "--dim", "8", "--classes-per-batch", "4", "--repeats", "1"]
    )
    assert list(table.columns) == [
        "L",
        "D",
        "classes per batch",
        "uniform ms",
        "HNCM ms",
        "HNCM scan ms",
        "greedy / scan",
    ]
    assert (
        table["L"].tolist() == [20, 50]
        and (table[["uniform ms", "HNCM ms", "HNCM scan ms"]] > 0).all().all()
    )
    out = capsys.readouterr().out
    assert "HNCM scan ms" in out and "one batch of 4 classes" in out


def test_hncm_benchmark_refuses_fewer_classes_than_a_batch_holds(monkeypatch) -> None:
    with pytest.raises(SystemExit):
        _bench(monkeypatch).main(["--classes", "3", "--classes-per-batch", "4"])
