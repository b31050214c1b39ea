"""Figures drawn with the images themselves: retrieval grids (a query and its neighbours) and
2-D maps with a thumbnail at each point (Song et al. 2017, Figures 4-6).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from dmlnb.plots.arrays import as_numpy

__all__ = ["retrieval_grid", "plot_thumbnails"]


def _display_image(img: Tensor | np.ndarray) -> np.ndarray:
    """``(C, H, W)`` -> ``(H, W)`` or ``(H, W, 3)`` scaled to [0, 1] for ``imshow``."""
    a = as_numpy(img).astype(np.float32)
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
    nb = as_numpy(neighbours)
    q_lab, g_lab = as_numpy(query_labels), as_numpy(gallery_labels)
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


def _spread_subset(xy: np.ndarray, min_separation: float, seed: int) -> np.ndarray:
    """Indices of points, visited in a seeded random order, kept when at least
    ``min_separation`` (Chebyshev distance) from every point kept before: ``(K,)``."""
    order = np.random.default_rng(seed).permutation(len(xy))
    kept: list[int] = []
    for i in order:
        if not kept or np.abs(xy[kept] - xy[i]).max(axis=1).min() >= min_separation:  # (K,)
            kept.append(int(i))
    return np.asarray(kept, dtype=np.int64)


def _thumbnail_inputs(
    xy: np.ndarray, images: Tensor | np.ndarray, thumb_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`plot_thumbnails`'s inputs checked: ``xy`` ``(N, 2)`` as float64 and ``images``
    ``(N, C, H, W)`` with ``C`` in {1, 3} as an array."""
    xy = np.asarray(xy, dtype=np.float64)
    imgs = as_numpy(images)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"xy must be (N, 2), got shape {xy.shape}")
    if imgs.ndim != 4 or imgs.shape[0] != xy.shape[0] or imgs.shape[1] not in (1, 3):
        raise ValueError(
            f"images must be (N, C, H, W) with N = {xy.shape[0]} and C in (1, 3), got shape "
            f"{imgs.shape}"
        )
    if not 0.0 < thumb_fraction <= 1.0:
        raise ValueError(f"thumb_fraction must be in (0, 1], got {thumb_fraction}")
    return xy, imgs


def plot_thumbnails(
    xy: np.ndarray,
    images: Tensor | np.ndarray,
    labels: Tensor | np.ndarray | None = None,
    ax: Axes | None = None,
    title: str = "t-SNE map drawn with the images",
    thumb_fraction: float = 0.035,
    seed: int = 0,
) -> Axes:
    """A 2-D map with each image drawn at its position, as in Song et al.'s Figures 4-6.

    Images are drawn in a seeded random order and an image is skipped when it would overlap one
    already drawn (its centre closer than one thumbnail width, ``thumb_fraction`` of the map's
    larger extent, in both axes), so dense regions show one image per cell. With ``labels`` each
    thumbnail gets a frame coloured by class; every point is also shown as a small grey dot.

    Args:
        xy: ``(N, 2)`` map coordinates (e.g. :func:`tsne`).
        images: ``(N, C, H, W)`` images, ``C`` in {1, 3} (scaled to [0, 1] per image).
        labels: optional ``(N,)`` classes for the frame colours.
        thumb_fraction: width of a thumbnail as a fraction of the map's larger extent.

    Returns:
        The axes; ``ax.thumbnail_indices`` holds the indices of the drawn images.
    """
    from matplotlib.offsetbox import AnnotationBbox, OffsetImage

    xy, imgs = _thumbnail_inputs(xy, images, thumb_fraction)
    ax = ax if ax is not None else plt.subplots(figsize=(7, 7))[1]
    extent = float(np.ptp(xy, axis=0).max()) if len(xy) > 1 else 1.0
    extent = extent if extent > 0 else 1.0
    cell = thumb_fraction * extent
    keep = _spread_subset(xy, cell, seed) if len(xy) else np.zeros(0, dtype=np.int64)
    ax.scatter(xy[:, 0], xy[:, 1], s=1, color="0.7", rasterized=True, label=f"all {len(xy)} points")
    lab = as_numpy(labels) if labels is not None else None
    classes = np.unique(lab) if lab is not None else np.zeros(0)
    cmap = plt.get_cmap("tab20")
    colour = {c: cmap(i % cmap.N) for i, c in enumerate(classes)}
    height_px = imgs.shape[2]
    axes_px = ax.get_position().width * ax.figure.get_size_inches()[0] * ax.figure.dpi
    zoom = max(0.05, cell / (1.06 * extent) * axes_px * 0.85 / height_px)  # a thumbnail < one cell
    for i in keep:
        box = OffsetImage(_display_image(imgs[i]), cmap="gray", zoom=zoom, interpolation="nearest")
        props = dict(edgecolor=colour[lab[i]] if lab is not None else "0.4", linewidth=1.0)
        ax.add_artist(
            AnnotationBbox(box, (xy[i, 0], xy[i, 1]), frameon=True, pad=0.05, bboxprops=props)
        )
    pad = 0.03 * extent
    ax.set_xlim(xy[:, 0].min() - pad, xy[:, 0].max() + pad)
    ax.set_ylim(xy[:, 1].min() - pad, xy[:, 1].max() + pad)
    ax.set_title(title)
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    ax.legend(
        handles=[
            plt.Line2D(
                [],
                [],
                ls="",
                marker="s",
                mfc="white",
                mec="0.3",
                label=f"{len(keep)} images drawn"
                + (", frame colour = class" if lab is not None else ""),
            ),
            plt.Line2D([], [], ls="", marker=".", color="0.7", label=f"all {len(xy)} points"),
        ],
        fontsize="x-small",
        loc="upper right",
    )
    ax.thumbnail_indices = keep  # type: ignore[attr-defined]
    return ax
