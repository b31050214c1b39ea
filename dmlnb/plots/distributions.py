"""Distributions: similarity histograms, nearest same- against other-class similarity, the
singular-value spectrum of an embedding.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from torch import Tensor

from dmlnb.plots.arrays import as_numpy

__all__ = ["plot_similarity_distributions", "plot_same_vs_other", "plot_spectra"]


def plot_similarity_distributions(
    values: "Mapping[str, Tensor | np.ndarray]",
    ax: Axes | None = None,
    xlabel: str = "cosine similarity",
    title: str = "similarity distributions",
    bins: int = 60,
    value_range: tuple[float, float] | None = None,
) -> Axes:
    """Normalised step histograms of similarities, one per method (``values``: name -> 1-D
    array); each method's median is a dashed vertical line of the same colour."""
    ax = ax if ax is not None else plt.subplots(figsize=(6, 4))[1]
    arrays = {k: as_numpy(v).astype(np.float64).ravel() for k, v in values.items()}
    arrays = {k: v[np.isfinite(v)] for k, v in arrays.items()}
    if value_range is None:
        lo = min(float(v.min()) for v in arrays.values() if v.size)
        value_range = (max(-1.0, np.floor(lo * 10) / 10), 1.0)
    for name, v in arrays.items():
        if not v.size:
            continue
        _, _, patches = ax.hist(
            v,
            bins=bins,
            range=value_range,
            density=True,
            histtype="step",
            lw=1.5,
            label=f"{name} (median {np.median(v):.2f})",
        )
        ax.axvline(np.median(v), color=patches[0].get_edgecolor(), ls="--", lw=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(fontsize="x-small", loc="upper left")
    return ax


def plot_same_vs_other(
    same: Tensor | np.ndarray,
    other: Tensor | np.ndarray,
    ax: Axes | None = None,
    title: str = "nearest same- vs other-class similarity",
    size: float = 3.0,
    lims: tuple[float, float] | None = None,
) -> Axes:
    """Per point, the similarity of its nearest same-class point (x) against that of its nearest
    other-class point (y). Points below ``y = x`` are retrieved correctly at rank 1 (blue), the
    others wrongly (red); the legend gives both fractions."""
    ax = ax if ax is not None else plt.subplots(figsize=(4, 4))[1]
    s, o = as_numpy(same).astype(np.float64), as_numpy(other).astype(np.float64)
    ok = np.isfinite(s) & np.isfinite(o)
    s, o = s[ok], o[ok]
    good = s > o
    for side, colour, label in (
        (good, "tab:blue", f"below y = x: correct ({100 * good.mean():.1f}%)"),
        (~good, "tab:red", f"above: wrong ({100 * (~good).mean():.1f}%)"),
    ):
        ax.scatter(s[side], o[side], s=size, color=colour, alpha=0.5, rasterized=True, label=label)
    if lims is None:
        lo = float(min(s.min(), o.min())) if s.size else 0.0
        lims = (np.floor(lo * 10) / 10, 1.0)
    ax.plot(lims, lims, color="black", lw=1, ls="--", label="y = x")
    ax.set_xlim(lims)
    ax.set_ylim(lims)
    ax.set_aspect("equal")
    ax.set_xlabel("nearest same-class similarity")
    ax.set_ylabel("nearest other-class similarity")
    ax.set_title(title, fontsize="small")
    ax.legend(fontsize="xx-small", loc="upper left", markerscale=3)
    return ax


def plot_spectra(
    spectra: Mapping[str, Sequence[float]],
    ax: Axes | None = None,
    title: str = "Singular values of the test embedding",
) -> Axes:
    """Normalised singular values (``σ_i / Σσ``, descending) of embeddings, one line per name, on
    a log scale: a fast-decaying spectrum means a (partly) collapsed embedding."""
    ax = ax if ax is not None else plt.subplots(figsize=(5, 3.5))[1]
    for name, values in spectra.items():
        v = np.asarray(values, dtype=float)
        ax.plot(np.arange(1, len(v) + 1), v, marker="o", ms=3, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("index i (descending)")
    ax.set_ylabel("σ_i / Σ σ")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return ax
