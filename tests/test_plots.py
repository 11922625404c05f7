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


# -- shared checks ------------------------------------------------------------------------
def _legend_outside_every_panel(fig):
    fig.canvas.draw()
    assert len(fig.legends) == 1, "one figure legend"
    lb = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        assert not lb.overlaps(ax.get_window_extent()), "the legend covers a panel"
    assert not any(ax.get_legend() for ax in fig.axes), "a legend inside a panel"
    return [t.get_text() for t in fig.legends[0].get_texts()]


def _png_size(fig, tmp_path, save):
    import matplotlib.image as mpimg

    path = tmp_path / "p.png"
    save(path)
    h, w = mpimg.imread(path).shape[:2]
    return w, h


def _line_looks(handles):
    """(colour, marker, line style) of each legend handle (a line, or an errorbar's line)."""
    from matplotlib.colors import to_hex

    out = []
    for h in handles:
        line = h[0] if isinstance(h, tuple) or h.__class__.__name__ == "ErrorbarContainer" \
            else h
        if hasattr(line, "get_marker"):
            out.append((to_hex(line.get_color()), line.get_marker(), str(line.get_linestyle())))
        else:                                               # a LineCollection (axhline-like)
            out.append((to_hex(line.get_color()[0]), None, str(line.get_linestyle())))
    return out


# -- the quality report's plot --------------------------------------------------------------
def _quality_summary(n_private: int, seeds: int, eps=(1.0, 5.0, 20.0)):
    from types import SimpleNamespace

    ds = SimpleNamespace(name="a dataset", epsilons=eps)
    base = ["popularity (exact, not private)", "ALS (non-private, tuned)"]
    priv = ["dpmt defaults", "private popularity", "uniform", "tail", "adaptive",
            "adaptive-normalized", "adaptive, SSP project", "adaptive, SSP shift",
            "more 1", "more 2", "more 3", "more 4"][:n_private]
    summary = {}

    def cell(v):
        return {"test": v, "test_std": 0.01, "seeds": seeds,
                "buckets": [0.02 * b + v / 4 for b in range(5)],
                "buckets_std": [0.005] * 5, "random": 0.03,
                "bucket_random": [0.06] * 5}

    for k, m in enumerate(base):
        summary[(ds.name, m, math.inf)] = cell(0.2 + 0.05 * k)
    for k, m in enumerate(priv):
        for e in eps:
            summary[(ds.name, m, e)] = cell(0.05 + 0.01 * k + 0.004 * e)
    return summary, ds, base + priv


@pytest.mark.parametrize("n_private", [2, 12])
def test_the_quality_plot_is_readable(n_private, tmp_path):
    from benchmarks import quality_report as qr

    summary, ds, methods = _quality_summary(n_private, seeds=1)
    fig = qr.quality_figure(summary, ds)
    names = _legend_outside_every_panel(fig)
    assert names == methods + ["random ranking"]            # every series once, random last
    handles = fig.legends[0].legend_handles
    looks = _line_looks(handles[:-1])
    assert len({c for c, _, _ in looks}) == len(methods)    # a colour per method
    assert len(set(looks)) == len(methods)
    assert _line_looks(handles[-1:])[0][0] == "#000000"     # random: black
    assert len(fig.axes) == 2
    for ax in fig.axes:                                     # a y label on every panel
        assert ax.get_ylabel().strip()
        assert any(str(ln.get_linestyle()) == "--" and ln.get_color() in ("k", "#000000")
                   for ln in ax.get_lines()) or any(
            c.__class__.__name__ == "LineCollection" for c in ax.collections), \
            "the random level is drawn"
    assert not any(c.__class__.__name__ == "ErrorbarContainer" for ax in fig.axes
                   for c in ax.containers)                  # one seed: no error bars
    # the bars of the right panel wear the colours of the left panel's lines
    bar_colours = [c.patches[0].get_facecolor() for c in fig.axes[1].containers]
    from matplotlib.colors import to_hex
    assert [to_hex(c) for c in bar_colours] == [c for c, _, _ in looks]
    w, h = _png_size(fig, tmp_path, lambda p: qr.plot(summary, ds, p))
    assert w <= 2000 and h >= 300


def test_the_quality_plot_has_error_bars_with_several_seeds():
    from benchmarks import quality_report as qr

    summary, ds, _ = _quality_summary(3, seeds=3)
    fig = qr.quality_figure(summary, ds)
    for ax in fig.axes:
        assert any(c.__class__.__name__ == "ErrorbarContainer" for c in ax.containers)


def test_the_quality_summary_keeps_the_random_level():
    from benchmarks import quality_report as qr

    test = {"overall": 0.1, "buckets": [0.1] * 5, "users": 10, "random": 0.03,
            "bucket_random": [0.06] * 5, "bucket_users": [2] * 5}
    rows = [{"dataset": "d", "method": "m", "epsilon": 1.0, "seed": s, "test": test,
             "validation": 0.1, "seconds": 1.0, "chosen": "defaults"} for s in (0, 1)]
    s = qr.summarise(rows)[("d", "m", 1.0)]
    assert s["random"] == 0.03 and s["bucket_random"] == [0.06] * 5
    assert s["buckets_std"] == [0.0] * 5


# -- dpmt stream --compare --plot ------------------------------------------------------------
def _curves(T=3000):
    import numpy as np

    rng = np.random.default_rng(0)
    curves = {}
    for f in ("popularity", "model"):
        best = np.cumsum(rng.random(T) < 0.2)
        curves[(f, "best fixed threshold")] = best
        curves[(f, "soa")] = np.cumsum(rng.random(T) < 0.3)
        jdp = np.cumsum(rng.random(T) < 0.25)
        curves[(f, "name-and-shame")] = jdp.copy()          # the same line as jdp's
        curves[(f, "jdp")] = jdp
    return curves


def test_the_stream_plot_is_readable(tmp_path):
    from dpmt.apps import stream

    curves = _curves()
    fig = stream.cumulative_figure(curves, "a title")
    names = _legend_outside_every_panel(fig)
    assert names == [f"{n}, {f} features" for f, n in curves]
    looks = _line_looks(fig.legends[0].legend_handles)
    assert len(set(looks)) == len(curves)                   # every line its own look
    methods = {n: c for (c, _m, _s), (_f, n) in zip(looks, curves)}
    assert len(set(methods.values())) == 4                  # a colour per method
    for ax in fig.axes:
        assert ax.get_ylabel().strip() and ax.get_xlabel().strip()
    # name-and-shame equals jdp here, and stays visible: drawn under jdp, wider, with its
    # markers elsewhere
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    lines = dict(zip([f"{n}, {f}" for f, n in curves], fig.axes[0].get_lines()))
    for f in ("popularity", "model"):
        ns, jdp = lines[f"name-and-shame, {f}"], lines[f"jdp, {f}"]
        assert ns.get_zorder() < jdp.get_zorder()
        assert ns.get_linewidth() > jdp.get_linewidth()
        assert set(ns.get_markevery()).isdisjoint(jdp.get_markevery())
    w, h = _png_size(fig, tmp_path, lambda p: stream.plot_cumulative(curves, p, "a title"))
    assert w <= 2000 and h >= 300


def test_the_stream_plot_title_gives_the_tables_privacy():
    from dpmt.apps import stream

    privacy = {"soa": {"epsilon": None, "delta": 1.0},
               "name-and-shame": {"epsilon": 2.0, "delta": 1e-4},
               "jdp": {"epsilon": 1.9999, "delta": 1.2345e-4}}
    names = ["soa", "name-and-shame", "jdp"]
    cap = stream.privacy_caption(privacy, names)
    for n in ("name-and-shame", "jdp"):                     # exactly as the table prints
        assert f"{n} {stream._pair(privacy[n])}" in cap
    assert "(2, 0.000123)" in cap and "soa not private" in cap
    privacy["jdp"] = {"epsilon": 2.0, "delta": 1e-4}
    assert stream.privacy_caption(privacy, names) == \
        "name-and-shame, jdp at (2, 0.0001); soa not private"
