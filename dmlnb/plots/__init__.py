"""Figures with one consistent style: t-SNE maps (openTSNE), retrieval grids, training curves.

Every function draws on a Matplotlib ``Axes``/``Figure`` and returns it; titles, axis labels and
legends are always set. Figures are sized and rasterised for compact notebooks (PNG, ~90 dpi).
"""

from __future__ import annotations

from dmlnb.plots.curves import plot_bound_tracking, plot_history, plot_step_curves
from dmlnb.plots.distributions import (
    plot_same_vs_other,
    plot_similarity_distributions,
    plot_spectra,
)
from dmlnb.plots.images import plot_thumbnails, retrieval_grid
from dmlnb.plots.maps import plot_embedding_2d, plot_reference_overlay, tsne, tsne_with_reference
from dmlnb.plots.style import MAX_FIGURE_PX, figure_png, set_style
from dmlnb.plots.sweeps import plot_group_size, plot_grouped_bars, plot_loglog_timing, plot_sweep

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
