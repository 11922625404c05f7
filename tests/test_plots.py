"""The plots people look at (issue 26): a readable size, a distinct colour per method, the
legend outside the data, the random level, error bars only with several seeds."""

import math

import pytest

from dpmt.apps import compare


def _summary(n_methods: int, epsilons=(1.0, 5.0, 20.0), seeds: int = 1):
    rows = []
    for k in range(n_methods):
        eps = math.inf if k < 3 else epsilons[k % len(epsilons)]
        row = {"method": f"method {k}", "seeds": seeds, "epsilon": eps,
               "recall@20": 0.1 + 0.01 * k, "recall@20_std": 0.01,
               "random_recall@20": 0.05}
        for b in range(5):
            row[f"bucket{b}_recall@20"] = 0.05 * b + 0.001 * k
            row[f"bucket{b}_recall@20_std"] = 0.005
            row[f"bucket{b}_random_recall@20"] = 0.04
            row[f"bucket{b}_counts"] = f"{b}-{b + 10}"
        rows.append(row)
    return rows


@pytest.mark.parametrize("n", [4, 27, 45])
def test_the_grid_plot_is_readable(n, tmp_path):
    import matplotlib.image as mpimg

    summary = _summary(n)
    fig = compare.bucket_figure(summary, "a grid")
    fig.canvas.draw()
    width_px = fig.get_size_inches()[0] * compare.PLOT_DPI
    assert width_px <= 2000
    panels = compare.plot_panels(summary)
    n_eps = len({s["epsilon"] for s in summary if math.isfinite(s["epsilon"])})
    assert len(fig.axes) == len(panels) == max(1, n_eps)
    # one style per method, all distinct
    styles = [tuple(compare.plot_style(k).values()) for k in range(n)]
    assert len(set(styles)) == n
    # the legend sits outside every panel's data area, and names every method once
    legend = fig.legends[0]
    lb = legend.get_window_extent()
    for ax in fig.axes:
        assert not lb.overlaps(ax.get_window_extent())
    names = [t.get_text() for t in legend.get_texts()]
    assert len(names) == len(set(names)) == n + 1 and "random ranking" in names
    # one seed: no error bars
    assert not any(c.__class__.__name__ == "ErrorbarContainer" for ax in fig.axes
                   for c in ax.containers)
    compare.plot_buckets(summary, tmp_path / "p.png", "a grid")
    h, w = mpimg.imread(tmp_path / "p.png").shape[:2]
    assert w <= 2000 and h >= 300


def test_error_bars_appear_with_several_seeds():
    fig = compare.bucket_figure(_summary(5, seeds=3), "seeds")
    assert any(c.__class__.__name__ == "ErrorbarContainer" for ax in fig.axes
               for c in ax.containers)
