"""2-D maps of embeddings: t-SNE (openTSNE), new points placed into a reference map, scatter
plots coloured by class.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from torch import Tensor

from dmlnb.plots.arrays import as_numpy

__all__ = ["tsne", "tsne_with_reference", "plot_embedding_2d", "plot_reference_overlay"]


def _fitted_tsne(x: Tensor | np.ndarray, seed: int, perplexity: float, n_jobs: int) -> Any:
    """openTSNE's map of ``x`` ``(N, D)`` (a ``TSNEEmbedding`` ``(N, 2)``): cosine metric, PCA
    initialisation, the perplexity capped at ``(N - 1) / 3`` (at least 2)."""
    from openTSNE import TSNE

    data = as_numpy(x).astype(np.float64)
    perplexity = min(perplexity, max(2.0, (len(data) - 1) / 3))
    return TSNE(
        perplexity=perplexity,
        metric="cosine",
        initialization="pca",
        random_state=seed,
        n_jobs=n_jobs,
    ).fit(data)


def tsne(
    x: Tensor | np.ndarray, seed: int = 0, perplexity: float = 30.0, n_jobs: int = 1
) -> np.ndarray:
    """2-D t-SNE of ``x`` ``(N, D)`` with openTSNE (cosine metric, PCA
    initialisation) -> ``(N, 2)``."""
    return np.asarray(_fitted_tsne(x, seed, perplexity, n_jobs))


def tsne_with_reference(
    reference: Tensor | np.ndarray,
    new: Tensor | np.ndarray,
    seed: int = 0,
    perplexity: float = 30.0,
    n_jobs: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Fit t-SNE on ``reference`` ``(N, D)`` and place ``new`` ``(M, D)`` into that map.

    Uses openTSNE's ``TSNEEmbedding.transform`` (new points are optimised against the fixed
    reference map). Returns ``(reference_2d (N, 2), new_2d (M, 2))``; the reference map is copied
    before ``transform``, which re-centres it in place.
    """
    emb = _fitted_tsne(reference, seed, perplexity, n_jobs)
    ref_2d = np.array(emb, copy=True)
    new_2d = np.asarray(emb.transform(as_numpy(new).astype(np.float64)))
    return ref_2d, new_2d


def plot_embedding_2d(
    xy: np.ndarray,
    labels: Tensor | np.ndarray,
    ax: Axes | None = None,
    title: str = "t-SNE of the embedding",
    max_legend: int = 10,
    marker: str = "o",
    size: float = 6.0,
    alpha: float = 0.8,
    label_prefix: str = "class ",
) -> Axes:
    """Scatter a 2-D map coloured by class; a legend for at most ``max_legend`` classes."""
    ax = ax if ax is not None else plt.subplots(figsize=(5, 5))[1]
    lab = as_numpy(labels)
    classes = np.unique(lab)
    cmap = plt.get_cmap("tab20" if len(classes) > 10 else "tab10")
    for i, c in enumerate(classes):
        sel = lab == c
        ax.scatter(
            xy[sel, 0],
            xy[sel, 1],
            s=size,
            alpha=alpha,
            marker=marker,
            color=cmap(i % cmap.N),
            label=f"{label_prefix}{c}" if i < max_legend else None,
            rasterized=True,
        )
    ax.set_title(title)
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    handles, names = ax.get_legend_handles_labels()
    if handles:
        shown = (
            f"{len(handles)} of {len(classes)} classes shown"
            if len(classes) > len(handles)
            else f"{len(classes)} classes"
        )
        ax.legend(
            handles,
            names,
            fontsize="x-small",
            markerscale=2,
            loc="best",
            title=shown,
            title_fontsize="x-small",
        )
    return ax


def plot_reference_overlay(
    reference_2d: np.ndarray,
    new_2d: np.ndarray,
    ax: Axes | None = None,
    title: str = "new points placed into the reference map",
    reference_label: str = "training",
    new_label: str = "test",
    size: float = 4.0,
) -> Axes:
    """A 2-D map with the reference points in red and the new points (e.g. placed by
    :func:`tsne_with_reference`) in blue, as in Xuan et al.'s Figure 6."""
    ax = ax if ax is not None else plt.subplots(figsize=(5, 5))[1]
    for points, colour, label in (
        (reference_2d, "tab:red", reference_label),
        (new_2d, "tab:blue", new_label),
    ):
        ax.scatter(
            points[:, 0],
            points[:, 1],
            s=size,
            color=colour,
            alpha=0.6,
            rasterized=True,
            label=f"{label} ({len(points)})",
        )
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    ax.set_title(title)
    ax.legend(fontsize="x-small", markerscale=2, loc="best")
    return ax
