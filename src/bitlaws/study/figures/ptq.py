"""Chapter 01's figures: the post-PTQ loss and δ_PTQ against D, N and P_post (Kumar et al. 2024,
Fig. 1 left and Fig. 2), GPTQ and RTN side by side. Each takes the tables the chapter computed with
:mod:`bitlaws.study.ptq_degradation` (``tabs``: method -> ``ptq_table``, in the order the methods
are drawn) and returns the matplotlib figure."""

from __future__ import annotations

import numpy as np

from ...laws import forms
from ..ptq_degradation import METHOD_LABELS, NOISE_K, fit_gamma_post
from .style import COLORS, MARKERS, label, log_axis

__all__ = ["ptq_vs_d_smallest_figure", "loss_vs_d_grid_figure", "delta_vs_d_grid_figure", "delta_vs_bits_figure"]

# the line style of each post-training precision in the Fig. 1 (left) panel
BIT_STYLES = {3: "-", 4: "--", 5: "-.", 6: ":"}
_D_CRIT_STYLE = (0, (1, 3))  # sparse dots: Eq. 13's D_crit


def _bits_present(tabs, bits) -> list[int]:
    """The precisions of ``bits`` that some method's table has, in order."""
    return [b for b in sorted(bits) if any(b in set(t["bits_post"]) for t in tabs.values())]


def _size_colors(tabs) -> dict:
    """One cividis colour per model size N of the tables (smallest darkest)."""
    import matplotlib.pyplot as plt

    sizes = sorted(set().union(*(set(t["n_params"]) for t in tabs.values())))
    return dict(zip(sizes, plt.cm.cividis(np.linspace(0.0, 0.85, len(sizes)))))


def ptq_vs_d_smallest_figure(tabs, crit, main: str):
    """The smallest model's validation loss before PTQ (black) and after each method at INT3–INT6
    (colour per method, line style per precision) against D, with D/N on the top axis and a dotted
    vertical line at each method's INT3 D_crit of Eq. 13 where it falls inside the plotted D.

    Args:
        tabs: method -> :func:`~bitlaws.study.ptq_degradation.ptq_table` (columns ``n_params``,
            ``n_tokens``, ``bits_post``, ``loss_post``, ``loss_base``).
        crit: method -> :func:`~bitlaws.study.ptq_degradation.critical_data_sizes` (``n_params``,
            ``bits_post``, ``d_crit_eq13`` [tokens]).
        main: the method whose table gives the before-PTQ curve (``verdict_method``).

    Returns:
        The matplotlib figure (log x; the paper's Fig. 1 left).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    n_min = min(t["n_params"].min() for t in tabs.values())
    fig, ax = plt.subplots()
    base = tabs[main][tabs[main]["n_params"] == n_min].drop_duplicates("n_tokens").sort_values("n_tokens")
    ax.plot(base["n_tokens"], base["loss_base"], marker=MARKERS["none"], color=COLORS["none"], zorder=3, lw=1.2)
    bits = _bits_present(tabs, BIT_STYLES)
    for m, tab in tabs.items():
        small = tab[tab["n_params"] == n_min]
        for b in bits:
            s = small[small["bits_post"] == b].sort_values("n_tokens")
            if len(s):
                ax.plot(s["n_tokens"], s["loss_post"], marker=MARKERS[m], ms=4, color=COLORS[m], ls=BIT_STYLES[b])
        c3 = crit[m][(crit[m]["n_params"] == n_min) & (crit[m]["bits_post"] == 3)]["d_crit_eq13"]
        if len(c3) and np.isfinite(c3.iloc[0]) and base["n_tokens"].min() <= c3.iloc[0] <= base["n_tokens"].max():
            ax.axvline(c3.iloc[0], color=COLORS[m], ls=_D_CRIT_STYLE, lw=1.2)
    log_axis(ax, "x")
    ax.set_xlabel(label("n_tokens"))
    ax.set_ylabel(label("loss_val"))
    top = ax.secondary_xaxis("top", functions=(lambda d: d / n_min, lambda r: r * n_min))
    top.xaxis.set_minor_formatter(NullFormatter())
    top.set_xlabel(label("tokens_per_param"))
    handles = [Line2D([], [], color=COLORS["none"], marker="o", label="before PTQ")]
    handles += [Line2D([], [], color=COLORS[m], marker=MARKERS[m], label=METHOD_LABELS[m]) for m in tabs]
    handles += [Line2D([], [], color="0.4", ls=BIT_STYLES[b], label=f"INT{b}") for b in bits]
    handles += [Line2D([], [], color="0.4", ls=_D_CRIT_STYLE, lw=1.2, label="D_crit, Eq. 13, INT3")]
    fig.legend(handles=handles, title=f"N = {n_min:,}", loc="outside right upper")
    return fig


def _grid(tabs, bits):
    import matplotlib.pyplot as plt

    return plt.subplots(len(tabs), len(bits), figsize=(3.0 * len(bits), 2.8 * len(tabs)), sharex=True,
                        sharey=True, squeeze=False)


def _finish_grid(fig, axes, y: str) -> None:
    for row in axes:
        row[0].set_ylabel(label(y))
    for ax in axes[-1]:
        ax.set_xlabel(label("n_tokens"))
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside right upper")


def loss_vs_d_grid_figure(tabs):
    """The post-PTQ validation loss against D, one line per model size N (colour), one column per
    P_post of INT3–INT6, one row per method.

    Args:
        tabs: method -> ``ptq_table`` (``n_params``, ``n_tokens``, ``bits_post``, ``loss_post``).

    Returns:
        The matplotlib figure (log x, shared axes; the paper's Fig. 2 top).
    """
    bits, colors = _bits_present(tabs, (3, 4, 5, 6)), _size_colors(tabs)
    fig, axes = _grid(tabs, bits)
    for i, (m, tab) in enumerate(tabs.items()):
        for j, b in enumerate(bits):
            ax = axes[i, j]
            for n, color in colors.items():
                s = tab[(tab["n_params"] == n) & (tab["bits_post"] == b)].sort_values("n_tokens")
                ax.plot(s["n_tokens"], s["loss_post"], marker="o", ms=4, color=color, label=f"N = {n:,}")
            ax.text(0.95, 0.95, f"{METHOD_LABELS[m]} INT{b}", transform=ax.transAxes, ha="right", va="top",
                    color=COLORS[m])
            log_axis(ax, "x")
    _finish_grid(fig, axes, "loss_val")
    return fig


def delta_vs_d_grid_figure(tabs, eq2, floors):
    """δ_PTQ against D (log–log; cells with δ_PTQ ≤ 0 not drawn), one line per N, one column per
    P_post of INT3–INT6, one row per method; dashed: the method's Eq. 2 fit; grey band: up to
    ``NOISE_K`` times the method's seed-noise floor of δ_PTQ at that P_post.

    Args:
        tabs: method -> ``ptq_table`` (``n_params``, ``n_tokens``, ``bits_post``, ``delta_ptq``).
        eq2: method -> ``eq2_fit`` (``C_T``, ``gamma_D``, ``gamma_N``, ``gamma_post``); no dashed
            lines where ``C_T`` is NaN.
        floors: method -> ``noise_floor`` (``delta_<b>`` keys, nats).

    Returns:
        The matplotlib figure (shared log axes; the paper's Fig. 2 bottom).
    """
    import pandas as pd

    bits, colors = _bits_present(tabs, (3, 4, 5, 6)), _size_colors(tabs)
    positive = pd.concat([t.loc[t["bits_post"].isin(bits) & (t["delta_ptq"] > 0), "delta_ptq"] for t in tabs.values()])
    lo, hi = positive.min() / 2, positive.max() * 2
    fig, axes = _grid(tabs, bits)
    for i, (m, tab) in enumerate(tabs.items()):
        for j, b in enumerate(bits):
            ax = axes[i, j]
            for n, color in colors.items():
                s = tab[(tab["n_params"] == n) & (tab["bits_post"] == b)].sort_values("n_tokens")
                pos = s[s["delta_ptq"] > 0]
                ax.plot(pos["n_tokens"], pos["delta_ptq"], marker="o", ms=4, color=color, label=f"N = {n:,}")
                if len(s) and np.isfinite(eq2[m]["C_T"]):
                    d = np.geomspace(s["n_tokens"].min(), s["n_tokens"].max(), 30)
                    ax.plot(d, forms.delta_ptq(n, d, b, eq2[m]), color=color, ls="--", lw=1.0)
            thr = NOISE_K * floors[m].get(f"delta_{b}", np.nan)
            if np.isfinite(thr):
                ax.axhspan(lo, thr, color="0.88", zorder=0, lw=0)
            ax.text(0.05, 0.95, f"{METHOD_LABELS[m]} INT{b}", transform=ax.transAxes, ha="left", va="top",
                    color=COLORS[m])
            log_axis(ax, "both")
            ax.set_ylim(lo, hi)
    _finish_grid(fig, axes, "delta_ptq")
    return fig


def delta_vs_bits_figure(tabs, floors):
    """δ_PTQ against P_post for each (N, D) cell, points above ``NOISE_K`` times the method's seed
    floor only (a cell needs two such points), and a dashed line per method of slope −1/γ_post
    (``fit_gamma_post``: one slope, one intercept per cell) from the geometric mean of its INT3
    points; a note in the panel where no cell clears the floor.

    Args:
        tabs: method -> ``ptq_table`` (``n_params``, ``n_tokens``, ``bits_post``, ``delta_ptq``).
        floors: method -> ``noise_floor`` (``delta_<b>`` keys, nats).

    Returns:
        The matplotlib figure (log y).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for m, tab in tabs.items():
        floor = floors[m]
        for _, s in tab.groupby(["n_params", "n_tokens"]):
            s = s[s["delta_ptq"] > NOISE_K * s["bits_post"].map(lambda b: floor.get(f"delta_{int(b)}", 0.0))]
            s = s.sort_values("bits_post")
            if len(s) >= 2:
                ax.plot(s["bits_post"], s["delta_ptq"], color=COLORS[m], alpha=0.4, marker=MARKERS[m], ms=3, lw=1.0)
        gamma_post, _, _ = fit_gamma_post(tab, floor)
        at3 = tab[(tab["bits_post"] == 3) & (tab["delta_ptq"] > NOISE_K * floor.get("delta_3", 0.0))]["delta_ptq"]
        if np.isfinite(gamma_post) and len(at3):
            p = np.array([3.0, 6.0])
            anchor = float(np.exp(np.log(at3).mean()))  # the geometric mean of the method's INT3 points
            ax.plot(p, anchor * np.exp(-(p - 3.0) / gamma_post), color=COLORS[m], ls="--", lw=2.0,
                    label=f"{METHOD_LABELS[m]}: slope −1/γ_post, γ_post = {gamma_post:.2f}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    else:  # micro models (the smoke profile): nothing clears the floor, so there is no slope to draw
        ax.text(0.5, 0.5, "no cell's δ_PTQ clears twice the seed-noise floor\nat two precisions: no slope to fit",
                transform=ax.transAxes, ha="center", va="center", color="0.3")
    log_axis(ax, "y")
    ax.set_xlabel(label("bits_post"))
    ax.set_ylabel(label("delta_ptq"))
    return fig
