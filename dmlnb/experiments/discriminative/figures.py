"""Figure helpers of the chapter."""

from __future__ import annotations

from typing import Any

__all__ = ["tidy_axes"]


def tidy_axes(fig: Any, integer_x: bool = False) -> None:
    """Plain tick labels on log axes (``3``, not ``3x10^0``): majors only on an axis spanning a
    decade or more, minors at 2, 3, 5 (x the power of ten) on a narrower one, which has no major
    tick to label; with ``integer_x``, whole numbers only on the x axes (epochs)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, MaxNLocator, NullFormatter

    for ax in fig.axes:
        for axis, scale, lim in (
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
        ):
            if scale == "log":
                axis.set_major_formatter(FormatStrFormatter("%g"))
                lo, hi = sorted(lim)
                if lo > 0 and hi / lo < 10:
                    axis.set_minor_locator(LogLocator(subs=(2.0, 3.0, 5.0)))
                    axis.set_minor_formatter(FormatStrFormatter("%g"))
                else:
                    axis.set_minor_formatter(NullFormatter())
        if integer_x and ax.get_xscale() == "linear":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
