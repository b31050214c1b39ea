"""Curves during training: a metric per epoch, Lemma 3.1's bound per epoch (Do et al. 2019),
per-step quantities inside a loss, each a mean over seeds with a min-max band.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["plot_history", "plot_bound_tracking", "plot_step_curves"]


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
