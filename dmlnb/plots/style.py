"""The book's figure style and how a notebook stores figures (PNG, at most
:data:`MAX_FIGURE_PX` wide).
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["MAX_FIGURE_PX", "figure_png", "set_style"]


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
