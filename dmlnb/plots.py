"""Figures with one consistent style: t-SNE maps (openTSNE), retrieval grids, training curves.

Every function draws on a Matplotlib ``Axes``/``Figure`` and returns it; titles, axis labels and
legends are always set. Figures are sized and rasterised for compact notebooks (PNG, ~90 dpi).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "set_style",
    "figure_png",
    "MAX_FIGURE_PX",
    "tsne",
    "tsne_with_reference",
    "plot_embedding_2d",
    "retrieval_grid",
    "plot_history",
    "plot_group_size",
    "plot_similarity_distributions",
    "plot_same_vs_other",
    "plot_reference_overlay",
    "plot_bound_tracking",
    "plot_loglog_timing",
    "plot_spectra",
    "plot_grouped_bars",
    "plot_sweep",
    "plot_thumbnails",
    "plot_step_curves",
]


MAX_FIGURE_PX = 1000
"""Widest PNG a notebook stores: about the book's column, so no figure is scaled
down in the page."""


def figure_png(fig: Figure, dpi: float | None = None, max_px: int = MAX_FIGURE_PX) -> bytes:
    """``fig`` as PNG bytes (tight bounding box) at ``dpi`` (default ``savefig.dpi``), rendered
    again at a proportionally lower dpi when the image would be wider than ``max_px`` pixels."""
    import io
    import struct

    def render(at: float) -> bytes:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=at, bbox_inches="tight")
        return buf.getvalue()

    if dpi is None:
        dpi = plt.rcParams["savefig.dpi"]
        dpi = fig.dpi if dpi == "figure" else dpi  # matplotlib's default: the figure's own dpi
    dpi = float(dpi)
    png = render(dpi)
    for _ in range(3):  # the tight box does not scale exactly with the dpi: shrink until it fits
        width = struct.unpack(">I", png[16:20])[0]  # the IHDR chunk's width
        if width <= max_px:
            break
        dpi *= (max_px - 2) / width  # -2: the tight box rounds up
        png = render(dpi)
    return png


def set_style(dpi: int = 90) -> None:
    """The book's style: seaborn whitegrid, modest dpi so stored notebooks stay small; in IPython,
    figures are stored as PNGs at most :data:`MAX_FIGURE_PX` wide (:func:`figure_png`)."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="tab10")
    plt.rcParams.update({"figure.dpi": dpi, "savefig.dpi": dpi, "figure.autolayout": False})
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        # Load the backend first: importing matplotlib-inline's backend (lazily, at the first
        # figure) registers its own PNG formatter, which would replace this one.
        plt.switch_backend(matplotlib.get_backend())
        shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


def _numpy(x: Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def _error_bars(rows: pd.DataFrame) -> np.ndarray:
    """``(len(rows),)`` error-bar half-heights: the ``std`` column where it is finite, 0 (no bar)
    where it is not (one seed) or when ``rows`` has no ``std`` column."""
    std = rows["std"].to_numpy(dtype=float) if "std" in rows else np.full(len(rows), np.nan)
    return np.where(np.isfinite(std), std, 0.0)


def tsne(
    x: Tensor | np.ndarray, seed: int = 0, perplexity: float = 30.0, n_jobs: int = 1
) -> np.ndarray:
    """2-D t-SNE of ``x`` ``(N, D)`` with openTSNE (cosine metric, PCA
    initialisation) -> ``(N, 2)``."""
    from openTSNE import TSNE

    data = _numpy(x).astype(np.float64)
    perplexity = min(perplexity, max(2.0, (len(data) - 1) / 3))
    emb = TSNE(
        perplexity=perplexity,
        metric="cosine",
        initialization="pca",
        random_state=seed,
        n_jobs=n_jobs,
    ).fit(data)
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
    emb = TSNE(
        perplexity=perplexity,
        metric="cosine",
        initialization="pca",
        random_state=seed,
        n_jobs=n_jobs,
    ).fit(ref)
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


def plot_bound_tracking(
    frame: "object",
    axes: "Sequence[Axes] | None" = None,
    title: str | None = None,
) -> Figure:
    """Lemma 3.1 during training (Do et al. 2019), per triplet (every quantity divided by ``H``).

    ``frame`` is a DataFrame with columns ``epoch``, ``seed``, ``L_t/H``, ``L_d/H``, ``gap/H``,
    ``bound/H``, ``eps`` and ``eps_mean`` (e.g.
    :func:`dmlnb.experiments.discriminative.lemma_frame`); lines show the mean over seeds, bands the
    min-max range. Left: the two losses; middle: the gap ``L_d - L_t`` and the bound
    ``H (kappa_max - kappa_min + 3 eps)`` (log scale); right: ``eps = 2 max_i |x_i - c_{y_i}|`` and
    its mean-based analogue.
    """
    import pandas as pd

    df = pd.DataFrame(frame)
    if axes is None:
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    fig = axes[0].figure
    panels = [
        (
            axes[0],
            [("L_t/H", "$L_t / H$ (triplet loss)"), ("L_d/H", "$L_d / H$ (discriminative)")],
            "loss per triplet",
            "losses",
            False,
        ),
        (
            axes[1],
            [("gap/H", "$(L_d - L_t) / H$"), ("bound/H", "bound $/ H$")],
            "per triplet (log scale)",
            "gap and Lemma 3.1 bound",
            True,
        ),
        (
            axes[2],
            [
                ("eps", r"$\epsilon = 2 \max_i \|x_i - c_{y_i}\|$"),
                ("eps_mean", r"$2\,\mathrm{mean}_i \|x_i - c_{y_i}\|$"),
            ],
            "distance",
            r"$\epsilon$ of the lemma",
            False,
        ),
    ]
    for ax, series, ylabel, panel_title, log in panels:
        for col, label in series:
            grp = df.groupby("epoch")[col]
            mean, lo, hi = grp.mean(), grp.min(), grp.max()
            line = ax.plot(mean.index, mean.values, marker="o", ms=3, label=label)[0]
            ax.fill_between(
                mean.index, lo.values, hi.values, color=line.get_color(), alpha=0.2, lw=0
            )
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.set_title(panel_title)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_loglog_timing(
    timing: "object",
    x: str = "N",
    slopes: "Mapping[str, float] | None" = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Seconds per pass against ``x`` (``"N"`` or ``"C"``) on log-log axes, one line per loss.

    ``timing`` has columns ``loss``, ``x`` and ``seconds``; ``slopes`` (loss -> fitted log-log
    slope) is added to the legend labels. Dotted guides show slopes 1 and 2 through the first
    point of the fastest loss.
    """
    import pandas as pd

    df = pd.DataFrame(timing)
    ax = ax if ax is not None else plt.subplots(figsize=(6, 4))[1]
    for name, grp in df.groupby("loss", sort=False):
        grp = grp.sort_values(x)
        label = (
            name
            if slopes is None or name not in slopes or not np.isfinite(slopes[name])
            else f"{name} (slope {slopes[name]:.2f})"
        )
        ax.plot(grp[x], grp["seconds"], marker="o", ms=3, label=label)
    xs = np.sort(df[x].unique()).astype(float)
    if len(xs) > 1:
        y0 = df[df[x] == xs[0]]["seconds"].min()
        for power, style in ((1, ":"), (2, "--")):
            ax.plot(
                xs,
                y0 * (xs / xs[0]) ** power,
                color="grey",
                ls=style,
                lw=1,
                label=f"slope {power} guide",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel(f"{x} ({'training samples' if x == 'N' else 'classes'})")
    ax.set_ylabel("seconds per pass (fwd + bwd)")
    ax.set_title(title or f"cost of one loss pass as {x} grows")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


# ----------------------------------------------------------------------------------------------
# Easy Positive chapter (Xuan et al. 2020): group-size curves, similarity distributions,
# nearest same- vs other-class scatter, test points placed into a training map.
# ----------------------------------------------------------------------------------------------


def plot_group_size(
    frame: "object",
    ax: Axes | None = None,
    metric_label: str = "Recall@1",
    title: str | None = None,
) -> Axes:
    """A metric against the group size ``n`` (images per class in a batch), one line per method.

    ``frame`` has columns ``method``, ``n``, ``mean`` and optionally ``std`` (error bars where
    finite) and ``seeds``; the x axis is logarithmic in base 2 with a tick at every ``n``.
    """
    import pandas as pd

    df = pd.DataFrame(frame)
    ax = ax if ax is not None else plt.subplots(figsize=(6, 4))[1]
    for name, grp in df.groupby("method", sort=False):
        grp = grp.sort_values("n")
        ax.errorbar(
            grp["n"],
            grp["mean"],
            yerr=_error_bars(grp),
            marker="o",
            ms=4,
            capsize=3,
            label=str(name),
        )
    ns = np.sort(df["n"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(int(n)) for n in ns])
    ax.set_xlabel("group size n (images per class in a batch)")
    ax.set_ylabel(metric_label)
    ax.set_title(title or f"{metric_label} against group size")
    ax.legend(fontsize="small", ncol=2)
    return ax


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
    arrays = {k: _numpy(v).astype(np.float64).ravel() for k, v in values.items()}
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
    s, o = _numpy(same).astype(np.float64), _numpy(other).astype(np.float64)
    ok = np.isfinite(s) & np.isfinite(o)
    s, o = s[ok], o[ok]
    good = s > o
    ax.scatter(
        s[good],
        o[good],
        s=size,
        color="tab:blue",
        alpha=0.5,
        rasterized=True,
        label=f"below y = x: correct ({100 * good.mean():.1f}%)",
    )
    ax.scatter(
        s[~good],
        o[~good],
        s=size,
        color="tab:red",
        alpha=0.5,
        rasterized=True,
        label=f"above: wrong ({100 * (~good).mean():.1f}%)",
    )
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
    ax.scatter(
        reference_2d[:, 0],
        reference_2d[:, 1],
        s=size,
        color="tab:red",
        alpha=0.6,
        rasterized=True,
        label=f"{reference_label} ({len(reference_2d)})",
    )
    ax.scatter(
        new_2d[:, 0],
        new_2d[:, 1],
        s=size,
        color="tab:blue",
        alpha=0.6,
        rasterized=True,
        label=f"{new_label} ({len(new_2d)})",
    )
    ax.set_xlabel("t-SNE 1")
    ax.set_ylabel("t-SNE 2")
    ax.set_title(title)
    ax.legend(fontsize="x-small", markerscale=2, loc="best")
    return ax


# ----------------------------------------------------------------------------------------------
# PROFS chapter (Can et al.): a metric per (group, variant) as bars; sweeps with marked values.
# ----------------------------------------------------------------------------------------------


def plot_grouped_bars(
    frame: "object",
    group: str,
    variant: str,
    ax: Axes | None = None,
    ylabel: str = "Recall@1 (%)",
    title: str = "",
) -> Axes:
    """Bars of ``mean`` (error bar ``std`` where finite) per ``group`` (x) and ``variant`` (colour).

    ``frame`` has columns ``group``, ``variant``, ``mean`` and optionally ``std``.
    """
    import pandas as pd

    df = pd.DataFrame(frame)
    groups = list(dict.fromkeys(df[group]))
    variants = list(dict.fromkeys(df[variant]))
    ax = ax if ax is not None else plt.subplots(figsize=(9, 3.8))[1]
    width = 0.8 / len(variants)
    for i, v in enumerate(variants):
        sub = df[df[variant] == v].set_index(group).reindex(groups)
        ax.bar(
            np.arange(len(groups)) + (i - (len(variants) - 1) / 2) * width,
            sub["mean"],
            width,
            yerr=_error_bars(sub),
            capsize=2,
            label=str(v),
        )
    ax.set_xticks(np.arange(len(groups)))
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=len(variants))
    return ax


def plot_sweep(
    frame: "object",
    x: str,
    group: str,
    ax: Axes | None = None,
    marks: "Mapping[str, float] | None" = None,
    xscale: str = "log",
    xlabel: str | None = None,
    ylabel: str = "Recall@1 (%)",
    title: str = "",
) -> Axes:
    """``mean`` against ``x``, one line per ``group`` (error bars ``std`` where finite).

    ``marks`` maps a group to an ``x`` value drawn as a hollow marker on its line (e.g. the
    ``M`` of a heuristic); ``xscale`` is ``"log"``, ``"symlog"`` (for grids that include 0)
    or ``"linear"``.
    """
    import pandas as pd

    df = pd.DataFrame(frame)
    ax = ax if ax is not None else plt.subplots(figsize=(6, 4))[1]
    for i, (name, grp) in enumerate(df.groupby(group, sort=False)):
        grp = grp.sort_values(x)
        color = f"C{i}"
        ax.errorbar(
            grp[x],
            grp["mean"],
            yerr=_error_bars(grp),
            marker="o",
            ms=4,
            capsize=3,
            color=color,
            label=str(name),
        )
        if marks and name in marks:
            at = grp[grp[x] == marks[name]]
            ax.plot(at[x], at["mean"], marker="o", ms=12, mfc="none", mec=color, mew=2, ls="none")
    if xscale == "symlog":
        positive = df[x][df[x] > 0]
        ax.set_xscale("symlog", linthresh=float(positive.min()) if len(positive) else 1.0)
    else:
        ax.set_xscale(xscale)
    ticks = np.sort(df[x].unique())
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks], fontsize="small")
    ax.minorticks_off()
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
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


# ----------------------------------------------------------------------------------------------
# Facility-location chapter (Song et al. 2017): t-SNE maps drawn with the images themselves,
# per-step curves of what happens inside a loss.
# ----------------------------------------------------------------------------------------------


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
    imgs = _numpy(images)
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
    lab = _numpy(labels) if labels is not None else None
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


def plot_step_curves(
    frame: "object",
    panels: "Sequence[tuple[Sequence[tuple[str, str]], str, str, bool]]",
    hue: str = "method",
    x: str = "step",
    smooth: int = 1,
    axes: "Sequence[Axes] | None" = None,
    title: str | None = None,
) -> Figure:
    """Per-step quantities during training, one panel each, mean over seeds with a min-max band.

    Args:
        frame: DataFrame with columns ``x``, ``hue``, ``seed`` and the plotted columns (e.g.
            :func:`dmlnb.experiments.facility_location.inside_loss_frame`).
        panels: per panel ``(series, ylabel, title, log_y)`` with ``series`` a list of
            ``(column, label)``; a line per (series, ``hue`` value present for that column).
        smooth: centred rolling mean over this many logged steps (per seed) before averaging.
    """
    import pandas as pd

    df = pd.DataFrame(frame)
    if axes is None:
        fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.5), squeeze=False)
        axes = axes[0]
    fig = axes[0].figure
    styles = (
        "-",
        "--",
        ":",
        "-.",
    )  # series of one panel differ in line style, so coinciding curves stay visible
    for ax, (series, ylabel, panel_title, log) in zip(axes, panels):
        for k, (col, label) in enumerate(series):
            if col not in df:
                continue
            for name, grp in df.dropna(subset=[col]).groupby(hue, sort=False):
                per_seed = grp.pivot_table(index=x, columns="seed", values=col)
                per_seed = per_seed.rolling(max(1, smooth), center=True, min_periods=1).mean()
                mean, lo, hi = per_seed.mean(axis=1), per_seed.min(axis=1), per_seed.max(axis=1)
                tag = label if df[hue].nunique() == 1 else f"{label}, {name}"
                line = ax.plot(
                    mean.index,
                    mean.values,
                    lw=1.2 + 0.6 * (k == 0),
                    ls=styles[k % len(styles)],
                    zorder=3 + len(series) - k,
                    label=tag,
                )[0]
                ax.fill_between(
                    mean.index, lo.values, hi.values, color=line.get_color(), alpha=0.2, lw=0
                )
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.set_title(panel_title, fontsize="medium")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
