"""Figures with one consistent style: t-SNE maps (openTSNE), retrieval grids, training curves.

Every function draws on a Matplotlib ``Axes``/``Figure`` and returns it; titles, axis labels and
legends are always set. Figures are sized and rasterised for compact notebooks (PNG, ~90 dpi).
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

__all__ = [
    "set_style",
    "tsne",
    "tsne_with_reference",
    "plot_embedding_2d",
    "retrieval_grid",
    "plot_history",
]


def set_style(dpi: int = 90) -> None:
    """The book's style: seaborn whitegrid, modest dpi so stored notebooks stay small."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="tab10")
    plt.rcParams.update({"figure.dpi": dpi, "savefig.dpi": dpi, "figure.autolayout": False})


def _numpy(x: Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def tsne(x: Tensor | np.ndarray, seed: int = 0, perplexity: float = 30.0, n_jobs: int = 1) -> np.ndarray:
    """2-D t-SNE of ``x`` ``(N, D)`` with openTSNE (cosine metric, PCA initialisation) -> ``(N, 2)``."""
    from openTSNE import TSNE

    data = _numpy(x).astype(np.float64)
    perplexity = min(perplexity, max(2.0, (len(data) - 1) / 3))
    emb = TSNE(perplexity=perplexity, metric="cosine", initialization="pca", random_state=seed, n_jobs=n_jobs).fit(data)
    return np.asarray(emb)


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
    from openTSNE import TSNE

    ref = _numpy(reference).astype(np.float64)
    perplexity = min(perplexity, max(2.0, (len(ref) - 1) / 3))
    emb = TSNE(perplexity=perplexity, metric="cosine", initialization="pca", random_state=seed, n_jobs=n_jobs).fit(ref)
    ref_2d = np.array(emb, copy=True)
    new_2d = np.asarray(emb.transform(_numpy(new).astype(np.float64)))
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
    lab = _numpy(labels)
    classes = np.unique(lab)
    cmap = plt.get_cmap("tab20" if len(classes) > 10 else "tab10")
    for i, c in enumerate(classes):
        sel = lab == c
        ax.scatter(
            xy[sel, 0], xy[sel, 1], s=size, alpha=alpha, marker=marker, color=cmap(i % cmap.N),
            label=f"{label_prefix}{c}" if i < max_legend else None, rasterized=True,
        )
    ax.set_title(title)
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    handles, names = ax.get_legend_handles_labels()
    if handles:
        more = f" (+{len(classes) - max_legend} more)" if len(classes) > max_legend else ""
        ax.legend(handles, names, fontsize="x-small", markerscale=2, loc="best", title=f"{len(classes)} classes{more}", title_fontsize="x-small")
    return ax


def _display_image(img: Tensor | np.ndarray) -> np.ndarray:
    """``(C, H, W)`` -> ``(H, W)`` or ``(H, W, 3)`` scaled to [0, 1] for ``imshow``."""
    a = _numpy(img).astype(np.float32)
    a = (a - a.min()) / (a.max() - a.min() + 1e-8)
    return a[0] if a.shape[0] == 1 else np.transpose(a, (1, 2, 0))


def retrieval_grid(
    query_images: Tensor | np.ndarray,
    query_labels: Tensor | np.ndarray,
    gallery_images: Tensor | np.ndarray,
    gallery_labels: Tensor | np.ndarray,
    neighbours: Tensor | np.ndarray,
    title: str = "Retrieval: query and its top-K neighbours",
) -> Figure:
    """One row per query: the query, then its K nearest gallery items, framed green if they
    share the query's label and red otherwise.

    Args:
        query_images: ``(Q, C, H, W)``.
        query_labels: ``(Q,)``.
        gallery_images: ``(G, C, H, W)``.
        gallery_labels: ``(G,)``.
        neighbours: ``(Q, K)`` gallery indices, nearest first.
    """
    nb = _numpy(neighbours)
    q_lab, g_lab = _numpy(query_labels), _numpy(gallery_labels)
    n_q, k = nb.shape
    fig, axes = plt.subplots(n_q, k + 1, figsize=(1.2 * (k + 1), 1.25 * n_q), squeeze=False)
    for r in range(n_q):
        cells = [(query_images[r], "query", "black")]
        for j in range(k):
            g = int(nb[r, j])
            ok = g_lab[g] == q_lab[r]
            cells.append((gallery_images[g], f"#{j + 1}", "tab:green" if ok else "tab:red"))
        for c, (img, label, colour) in enumerate(cells):
            ax = axes[r, c]
            ax.imshow(_display_image(img), cmap="gray", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_edgecolor(colour)
                spine.set_linewidth(3 if c else 1.5)
            if r == 0:
                ax.set_title(label, fontsize="small")
    handles = [
        plt.Line2D([], [], color="tab:green", lw=3, label="same class (correct)"),
        plt.Line2D([], [], color="tab:red", lw=3, label="other class (wrong)"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize="small", frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return fig


def plot_history(
    histories: Mapping[str, "object"],
    metric: str = "R@1",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Curves of ``metric`` per epoch, one line per run.

    ``histories`` maps a run name to a :class:`dmlnb.records.RunRecord` (or its history
    DataFrame with an ``epoch`` index).
    """
    ax = ax if ax is not None else plt.subplots(figsize=(5, 3.5))[1]
    for name, h in histories.items():
        frame = h.history_frame() if hasattr(h, "history_frame") else h
        series = frame[metric].dropna()
        ax.plot(series.index, series.values, marker="o", ms=3, label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} during training")
    ax.legend(fontsize="small")
    return ax

