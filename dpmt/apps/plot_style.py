"""One look for the plots dpmt draws (issue 26): a qualitative palette with enough distinct
entries, a distinct colour and marker (bars: colour, then hatch) per series, the legend
outside the data, at most 1,920 px wide at :data:`PLOT_DPI`, the random level as a black
dashed line. Used by the compare grid (:mod:`dpmt.apps.compare`), the quality report's
plots (:mod:`benchmarks.quality_report`) and ``dpmt stream --compare --plot``."""

from __future__ import annotations

import io
from pathlib import Path

from dpmt._io import atomic_write_bytes

#: tab20 with its pairs reordered so that neighbours differ: 20 distinct colours
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
           "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
#: 7 markers (7 and 20 are coprime: the (colour, marker) pairs repeat after 140 series)
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")
HATCHES = ("", "//", "..", "xx", "\\\\")
#: the widest figure (inches at PLOT_DPI): 1,920 px, legend included
MAX_WIDTH_IN, PLOT_DPI = 16.0, 120
#: the random level (and other reference levels): black, dashed, thin
RANDOM = {"color": "k", "linestyle": "--", "linewidth": 1.0}
RANDOM_LABEL = "random ranking"


def bar_style(k: int) -> dict:
    """Colour and hatch of the k-th bar series (distinct for the first 100)."""
    return {"color": PALETTE[k % len(PALETTE)],
            "hatch": HATCHES[(k // len(PALETTE)) % len(HATCHES)]}


def line_style(k: int) -> dict:
    """Colour, marker and line style of the k-th line series (distinct colours for the
    first 20, distinct (colour, marker) pairs for the first 140)."""
    return {"color": PALETTE[k % len(PALETTE)], "marker": MARKERS[k % len(MARKERS)],
            "linestyle": LINESTYLES[(k // len(PALETTE)) % len(LINESTYLES)]}


def legend_outside(fig, handles, labels, legend_in: float, top: float = 0.95) -> None:
    """One legend for the whole figure in a column of ``legend_in`` inches to the right of
    every panel (so it covers no data), the panels laid out in the rest."""
    width_in = fig.get_size_inches()[0]
    frac = legend_in / width_in
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1 - frac + 0.005, 0.5),
               fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 1 - frac, top))


def save_png(fig, path) -> None:
    """``fig`` as a PNG at :data:`PLOT_DPI`, written atomically; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PLOT_DPI)
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
