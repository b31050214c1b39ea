"""A metric against a setting: cost against N or C on log-log axes, a metric against the group
size, a sweep with marked values, bars per group and variant.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from dmlnb.plots.arrays import error_bars

__all__ = ["plot_loglog_timing", "plot_group_size", "plot_grouped_bars", "plot_sweep"]


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
            yerr=error_bars(grp),
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
            yerr=error_bars(sub),
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
            yerr=error_bars(grp),
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
