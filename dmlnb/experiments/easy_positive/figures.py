"""The chapter's figures drawn from what its runs store (:mod:`dmlnb.plots`): Figure 4 (Recall@1
against the group size), Figures 2 and 3 (similarity distributions), Figure 5 (nearest same- vs
other-class similarity) and Figure 6 (t-SNE maps), each titled with the data, network, profile
and selection protocol it shows."""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dmlnb.experiments.easy_positive.spec import FIGURE_METHODS, TSNE_METHODS
from dmlnb.plots import (
    plot_embedding_2d,
    plot_group_size,
    plot_reference_overlay,
    plot_same_vs_other,
    plot_similarity_distributions,
)

__all__ = ["AXIS_PERCENTILE", "plot_figure4", "plot_figures_2_3", "plot_figure5", "plot_figure6"]


def plot_figure4(fig4: pd.DataFrame, title: str) -> plt.Figure:
    """Recall@1 (%) against the group size, per method, with the std over seeds."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    scaled = fig4.assign(mean=100 * fig4["mean"], std=100 * fig4["std"])
    plot_group_size(scaled, ax=ax, metric_label="Recall@1 (%)", title=title)
    fig.tight_layout()
    return fig


def plot_figures_2_3(
    figs: Mapping[str, Mapping[str, np.ndarray]], labels: Mapping[str, str], title: str
) -> plt.Figure:
    """Figure 2 (every same-class training pair) and Figure 3 (each test image to its nearest
    training image), one curve per method."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    plot_similarity_distributions(
        {labels[m]: f["train_same_class_quantiles"] for m, f in figs.items()},
        ax=axes[0],
        title="Figure 2: all same-class training pairs",
        xlabel="cosine similarity of a same-class training pair",
    )
    plot_similarity_distributions(
        {labels[m]: f["test_to_train"] for m, f in figs.items()},
        ax=axes[1],
        title="Figure 3: test image to its nearest training image",
        xlabel="similarity of a test image to its nearest training image",
    )
    fig.suptitle(title)
    fig.tight_layout()
    return fig


#: Figure 5's shared axes start at this percentile of every plotted similarity.
AXIS_PERCENTILE = 0.5


def plot_figure5(
    figs: Mapping[str, Mapping[str, np.ndarray]], labels: Mapping[str, str], title: str
) -> tuple[plt.Figure, str]:
    """Figure 5: per method (columns) and part (training, test rows), each point's nearest
    same-class against nearest other-class similarity, on shared axes from the 0.5th percentile
    of every plotted similarity up to 1; and, in words, the points each panel leaves out."""
    every = np.concatenate(
        [f[f"{p}_{w}"] for f in figs.values() for p in ("train", "test") for w in ("same", "other")]
    )
    lims = (float(np.floor(np.nanpercentile(every, AXIS_PERCENTILE) * 10) / 10), 1.0)
    k = len(FIGURE_METHODS)
    fig, axes = plt.subplots(2, k, figsize=(2.7 * k, 6.0))
    for j, m in enumerate(FIGURE_METHODS):
        for i, part in enumerate(("train", "test")):
            plot_same_vs_other(
                figs[m][f"{part}_same"],
                figs[m][f"{part}_other"],
                ax=axes[i, j],
                title=f"{labels[m]}, {part}",
                size=1.5,
                lims=lims,
            )
            if j:
                axes[i, j].set_ylabel("")
            if i == 0:
                axes[i, j].set_xlabel("")
    fig.suptitle(title)
    fig.tight_layout()
    low = lambda m, p: (figs[m][f"{p}_same"] < lims[0]) | (figs[m][f"{p}_other"] < lims[0])  # noqa: E731
    hidden = {f"{m} {p}": int(low(m, p).sum()) for m in FIGURE_METHODS for p in ("train", "test")}
    return fig, (
        f"points outside the shared axes (either similarity below {lims[0]:.1f}): "
        + ", ".join(f"{k} {v}" for k, v in hidden.items())
    )


def plot_figure6(
    maps: Mapping[str, Mapping[str, np.ndarray]], labels: Mapping[str, str], title: str
) -> plt.Figure:
    """Figure 6: per method of :data:`TSNE_METHODS`, the t-SNE map of its training classes and
    the test classes placed into it; ``title`` is completed with the classes drawn."""
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.4))
    for j, m in enumerate(TSNE_METHODS):
        t = maps[m]
        plot_embedding_2d(
            t["train"],
            t["train_labels"],
            ax=axes[2 * j],
            title=f"{labels[m]}: training",
            max_legend=5,
            size=5,
        )
        plot_reference_overlay(
            t["train"], t["test"], ax=axes[2 * j + 1], title=f"{labels[m]}: test + training", size=4
        )
    last = maps[TSNE_METHODS[-1]]
    fig.suptitle(
        f"Figure 6 reproduced: {len(np.unique(last['train_labels']))} training and "
        f"{len(np.unique(last['test_labels']))} test classes, {title}"
    )
    fig.tight_layout()
    return fig
