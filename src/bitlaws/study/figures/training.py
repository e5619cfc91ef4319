"""Chapter 02 (low-precision training) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

import math

from ...formats import parse_format
from ..number_formats import short_name
from .style import COLORS, human, size_color

__all__ = ["marginal_figure", "seeded_marginal_figure", "sensitivity_figure", "format_label", "formats_figure",
           "compute_matched_figure"]

_PART_NAMES = {"w": "weights", "a": "activations", "kv": "KV cache"}


def _finish_part_panels(fig, axes, bits, ylabel: str | None, budgets=()):
    """The three part panels' P axis and ticks; with a ``ylabel`` (panels holding data) also the zero line, the
    shared y label and the legend: one entry per size (its colour, as labelled by the plotted lines) and, with
    two or more ``budgets`` (D, bytes), one per line style (solid: the largest D; dashed: the others); ``fig``."""
    from matplotlib.lines import Line2D

    for ax, part in zip(axes, _PART_NAMES):
        if ylabel is not None:
            ax.axhline(0, color="0.5", lw=0.8, ls=":")
        ax.set_xlabel(f"$P_\\mathrm{{{part}}}$ [bits] ({_PART_NAMES[part]})")
        ax.set_xticks(list(bits))
    if ylabel is not None:
        axes[0].set_ylabel(ylabel)
        handles, labels = axes[0].get_legend_handles_labels()
        # a size's entry shows its colour only: the line style says D, in entries of its own
        handles = [Line2D([], [], color=h.get_color() if hasattr(h, "get_color") else h[0].get_color(), marker="o",
                          ms=4, ls="none") for h in handles]
        budgets = sorted(budgets)
        if len(budgets) >= 2:  # D exact (bytes): 1M and 2.1M would hide that 2^20 and 2^21 are 2× apart
            others = ", ".join(f"{int(d):,}" for d in budgets[:-1])
            handles += [Line2D([], [], color="0.3", ls="-"), Line2D([], [], color="0.3", ls="--")]
            labels += [f"D = {int(budgets[-1]):,} bytes", f"D = {others} bytes"]
        axes[0].legend(handles, labels, fontsize=8)
    return fig


def marginal_figure(marginal, bits):
    """The paper's Fig. 3–4 at our scale: loss increase over the high-precision run of the same N and
    D when only the weights, only the activations or only the KV cache train at P bits; one panel
    per part, one colour per model size, solid for the largest D and dashed for the others.

    Args:
        marginal: :func:`bitlaws.study.low_precision_training.marginal_table` (columns ``status``,
            ``part``, ``n_params``, ``n_tokens``, ``bits``, ``delta_train`` in nats/byte; only
            ``status == "ok"`` rows are drawn). bits: the x ticks (the swept P).

    Returns:
        The matplotlib figure (three panels sharing y).
    """
    import matplotlib.pyplot as plt

    ok = marginal[marginal["status"] == "ok"]
    sizes, budgets = sorted(ok["n_params"].unique()), sorted(ok["n_tokens"].unique())
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.8), sharey=True)
    for ax, part in zip(axes, _PART_NAMES):
        for i, n in enumerate(sizes):
            labelled = False
            for d in budgets:
                s = ok[(ok["part"] == part) & (ok["n_params"] == n) & (ok["n_tokens"] == d)].sort_values("bits")
                if len(s):
                    ax.plot(s["bits"], s["delta_train"], marker="o", ms=3, color=size_color(i, len(sizes)),
                            ls="-" if d == budgets[-1] else "--", label=None if labelled else f"N = {human(n)}")
                    labelled = True
    return _finish_part_panels(fig, axes, bits, "$L - L_\\mathrm{high}$ [nats/byte]", budgets)


def seeded_marginal_figure(seeded, bits):
    """The marginal sweep where it is seeded: the mean loss increase over the seeds of each (N, D) against
    P, with a bar of the mean's 95 % t-interval over those seeds (the interval the chapter's count reads).
    One panel per part, one colour per model size, solid for the largest D and dashed for the others.

    Args:
        seeded: :func:`bitlaws.study.low_precision_training.seeded_marginal_table` (``part``, ``n_params``,
            ``n_tokens``, ``bits``, ``seeds``, ``delta_mean``, ``delta_half`` in nats/byte). bits: the x ticks.

    Returns:
        The matplotlib figure (three panels sharing y); with an empty table (no cell with two seeds among the
        rows read), the panels say so and hold no point.
    """
    import matplotlib.pyplot as plt

    if seeded.empty:
        fig, axes = plt.subplots(1, 3, figsize=(11, 2.4), sharey=True)
        for ax in axes:
            ax.text(0.5, 0.5, "no seeded cell among\nthe rows read", ha="center", va="center", transform=ax.transAxes)
        return _finish_part_panels(fig, axes, bits, None)
    sizes, budgets = sorted(seeded["n_params"].unique()), sorted(seeded["n_tokens"].unique())
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.8), sharey=True)
    for ax, part in zip(axes, _PART_NAMES):
        for i, n in enumerate(sizes):
            labelled = False
            for j, d in enumerate(budgets):
                s = seeded[(seeded["part"] == part) & (seeded["n_params"] == n)
                           & (seeded["n_tokens"] == d)].sort_values("bits")
                if len(s):
                    shift = 0.06 * (i - (len(sizes) - 1) / 2) + 0.02 * j  # bars side by side, not on top
                    ax.errorbar(s["bits"] + shift, s["delta_mean"], yerr=s["delta_half"], marker="o", ms=3,
                                capsize=2, lw=1, color=size_color(i, len(sizes)),
                                ls="-" if d == budgets[-1] else "--",
                                label=None if labelled else f"N = {human(n)} ({int(s['seeds'].min())} seeds)")
                    labelled = True
    return _finish_part_panels(fig, axes, bits, "mean $L - L_\\mathrm{high}$ [nats/byte]", budgets)


def sensitivity_figure(ours, paper):
    """The factor f_x(P) = N_eff/N of each part against P: ours from the Eq. 3–4 fits (solid), the
    paper's from its Table 2 (dashed), one colour per part (``COLORS["w"|"a"|"kv"]``).

    Args:
        ours: :func:`bitlaws.study.low_precision_training.fitted_factors` on a grid of P (index P
            in bits, columns ``w``, ``a``, ``kv``), or None when a fit is missing (paper only).
        paper: :func:`bitlaws.study.low_precision_training.paper_factors` on the same grid.

    Returns:
        The matplotlib figure (y from 0 to 1.02).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    grid = paper.index.to_numpy(float)
    for part, name in _PART_NAMES.items():
        if ours is not None:
            ax.plot(grid, ours[part], color=COLORS[part], label=f"{name}, ours")
        ax.plot(grid, paper[part], color=COLORS[part], ls="--", alpha=0.8, label=f"{name}, paper")
    ax.set_xlabel("training precision P [bits]")
    ax.set_ylabel("$f_x(P) = N_\\mathrm{eff} / N$")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8, ncol=2)
    return fig


def format_label(name: str) -> str:
    """A floating-point format as the book names it in prose and on axes: its width and ExMy,
    ``"fp4_e2m1fn"`` -> ``"FP4 E2M1"`` (chapter 00's grids write the paper's formats so).

    Raises:
        ValueError: from :func:`bitlaws.formats.parse_format` for an unknown name.
    """
    return f"FP{parse_format(name).bits} {short_name(name)}"


def formats_figure(formats, sizes, paper_formats):
    """Floating point against integer (Appendix N): per format, the loss of weight-only training in
    that format minus the integer run of the same N, D and bit width; one marker per run, coloured by
    model size, filled for the paper's formats and hollow for the other OCP formats; each format named
    by :func:`format_label` (``FP4 E2M1``), as the chapter's prose names it.

    Args:
        formats: :func:`bitlaws.study.low_precision_training.formats_table` without NaN ``delta``
            (columns ``fmt``, ``bits``, ``n_params``, ``delta`` in nats/byte).
        sizes: the model sizes N, ascending, that set the colours (the chapter's marginal sizes, so
            that a size has one colour across figures; a size not listed is not drawn).
        paper_formats: the names of the paper's formats (``bitlaws.formats.PAPER_FP_FORMATS`` values).

    Returns:
        The matplotlib figure (formats on x, ordered by bit width then name).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    fmts = list(dict.fromkeys(formats.sort_values(["bits", "fmt"])["fmt"]))
    paper_formats = set(paper_formats)
    for j, f in enumerate(fmts):
        s = formats[formats["fmt"] == f]
        for i, n in enumerate(sizes):
            r = s[s["n_params"] == n]
            if len(r):
                c = size_color(i, len(sizes))
                ax.scatter([j] * len(r), r["delta"], color=c, facecolors=c if f in paper_formats else "none", s=30,
                           label=f"N = {human(n)}" if j == 0 else None)
    ax.axhline(0, color="0.5", lw=0.8, ls=":")
    ax.set_xticks(range(len(fmts)), [format_label(f) for f in fmts], rotation=20)
    ax.set_ylabel("$L_\\mathrm{FP} - L_\\mathrm{INT}$ [nats/byte]")
    if len(fmts):
        ax.legend(fontsize=8)
    return fig


def compute_matched_figure(table, summary):
    """The compute-matched suite (the paper's Fig. 1, right): validation loss against P (all of W, A
    and KV at P), single runs as small dots, the mean over seeds with its standard error σ/√n from
    the suite's σ (error bars drawn only when every member has one), N written beside each member.

    Args:
        table: :func:`bitlaws.study.low_precision_training.compute_matched_table` (columns
            ``status``, ``bits``, ``loss_val`` in nats/byte, ``n_params``).
        summary: :func:`bitlaws.study.low_precision_training.compute_matched_summary` (reads ``sigma``).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    ok = table[table["status"] == "ok"]
    per = ok.groupby("bits").agg(loss=("loss_val", "mean"), n=("loss_val", "size"), n_params=("n_params", "first"))
    per["se"] = summary["sigma"] / np.sqrt(per["n"]) if math.isfinite(summary["sigma"]) else np.nan
    fig, ax = plt.subplots()
    ax.plot(ok["bits"], ok["loss_val"], ".", ms=4, color="0.6", label="single runs")
    ax.errorbar(per.index, per["loss"], yerr=per["se"] if per["se"].notna().all() else None, marker="o", capsize=3,
                color=COLORS["none"], label="mean over seeds ± s.e.")
    for b, r in per.iterrows():
        ax.annotate(f"N = {human(r['n_params'])}", (b, r["loss"]), textcoords="offset points", xytext=(5, 6),
                    fontsize=8)
    ax.set_xlabel("training precision P of W, A and KV [bits]")
    ax.set_ylabel("validation loss [nats/byte]")
    ax.set_xticks(list(per.index))
    ax.legend()
    return fig
