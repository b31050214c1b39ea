"""``benchmarks/learning_curves.py``: the patience rule replayed on a curve stops where
``TrainConfig.patience`` would (``tests/test_convergence.py`` checks the loop itself)."""

from __future__ import annotations

import pandas as pd
import pytest
from scripts import benchmark_script


def test_replay_stops_after_patience_evaluations_without_a_better_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = benchmark_script("learning_curves", monkeypatch)
    curve = pd.DataFrame(
        {"epoch": [1, 2, 3, 4, 5, 6, 7], "val R@1": [0.5, 0.6, 0.6, 0.55, 0.7, 0.69, 0.68]}
    )
    assert bench.replay(curve, "R@1", 2) == (4, 2)  # a tie does not improve; stop at epoch 4
    assert bench.replay(curve, "R@1", 3) == (7, 5)  # never 3 in a row: the last epoch, best 5
    assert bench.replay(curve, "R@1", 1) == (3, 2)
