"""What the figures share to read their inputs: tensors or arrays as numpy arrays, error bars
from a ``std`` column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["as_numpy", "error_bars"]


def as_numpy(x: Tensor | np.ndarray) -> np.ndarray:
    """``x`` as a numpy array (a tensor detached and copied to the CPU)."""
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def error_bars(rows: pd.DataFrame) -> np.ndarray:
    """``(len(rows),)`` error-bar half-heights: the ``std`` column where it is finite, 0 (no bar)
    where it is not (one seed) or when ``rows`` has no ``std`` column."""
    std = rows["std"].to_numpy(dtype=float) if "std" in rows else np.full(len(rows), np.nan)
    return np.where(np.isfinite(std), std, 0.0)
