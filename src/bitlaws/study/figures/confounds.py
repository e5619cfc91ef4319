"""Chapter 07's figures (design checks): the peak learning rate, δ_PTQ against D per learning-rate
schedule, and δ_PTQ against the passes over the data."""

from __future__ import annotations

from .style import COLORS, MARKERS, label, log_axis, size_color, token_unit

__all__ = ["SCHEDULE_STYLES", "CELL_LINESTYLES", "lr_figure", "schedule_figure", "repetition_figure"]

# line style and marker of each learning-rate schedule (colour: the model size)
SCHEDULE_STYLES: dict[str, tuple[str, str]] = {"constant": ("-", "o"), "wsd": ("--", "s"), "cosine": (":", "^")}


def _sizes(frame) -> list[str]:
    return list(frame.sort_values("n_params")["size"].drop_duplicates()) if len(frame) else []


def lr_figure(check, runs):
    """Pre-PTQ validation loss against the peak learning rate, one line per size, the rule's rate
    ringed, with the band loss_best + t·se inside which a rate is "within the noise".

    Args:
        check: :func:`bitlaws.study.design_checks.lr_rule_check` (one row per size).
        runs: the (size, lr_peak, loss_val) points: the rule's base-grid run and the ``lr_peak`` runs.

    Returns:
        The matplotlib figure (log x axis).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    sizes = list(check["size"])
    for i, (_, row) in enumerate(check.iterrows()):
        g = runs[runs["size"] == row["size"]].sort_values("lr_peak")
        c = size_color(i, len(sizes))
        ax.plot(g["lr_peak"], g["loss_val"], "-o", color=c, label=row["size"])
        ax.plot([row["lr_rule"]], [row["loss_rule"]], "o", ms=12, mfc="none", mec=c)
        ax.axhspan(row["loss_best"], row["loss_best"] + row["t_crit"] * row["se"], color=c, alpha=0.15, lw=0)
    log_axis(ax, "x")
    rates = sorted(set(runs["lr_peak"].round(12)))
    ax.set_xticks(rates, [f"{r:.2g}" for r in rates])
    ax.set_xlabel("Peak learning rate")
    ax.set_ylabel(label("loss_val"))
    ax.legend(frameon=False, fontsize=8)
    return fig


def schedule_figure(tables: dict, bits=(3, 4)):
    """δ_PTQ against D per schedule (constant LR, WSD cooldown, cosine), one panel per (method, bits).

    Args:
        tables: method -> :func:`bitlaws.study.design_checks.schedule_table` of that method. A WSD run
            is drawn at the D it trained (branch point + cooldown), joined to its branch point.
        bits: the P_post columns of panels.

    Returns:
        The matplotlib figure (log–log axes; δ ≤ 0 is not drawn).
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(tables), len(bits), figsize=(3.6 * len(bits), 2.9 * len(tables) + 0.4),
                             sharex=True, squeeze=False, layout="constrained")
    for r, (method, table) in enumerate(tables.items()):
        sizes = _sizes(table)
        for j, b in enumerate(bits):
            ax = axes[r, j]
            t = table[(table["bits_post"] == b) & (table["delta_ptq"] > 0)]
            for i, size in enumerate(sizes):
                c = size_color(i, len(sizes))
                for sch, (ls, mk) in SCHEDULE_STYLES.items():
                    g = t[(t["size"] == size) & (t["schedule"] == sch)].sort_values("n_tokens")
                    ax.plot(g["n_tokens"], g["delta_ptq"], ls=ls, marker=mk, color=c, ms=4, lw=1.1)
                const = t[(t["size"] == size) & (t["schedule"] == "constant")].set_index("n_tokens")["delta_ptq"]
                for _, w in t[(t["size"] == size) & (t["schedule"] == "wsd")].iterrows():
                    if w["d_branch"] in const.index:
                        ax.plot([w["d_branch"], w["n_tokens"]], [const[w["d_branch"]], w["delta_ptq"]],
                                color=c, lw=0.6, alpha=0.6)
            log_axis(ax, "both")
            ax.text(0.03, 0.95, f"{method.upper()} INT{b}", transform=ax.transAxes, va="top", fontsize=8,
                    color=COLORS.get(method, "k"))
            if r == len(tables) - 1:
                ax.set_xlabel(label("n_tokens"))
            if j == 0:
                ax.set_ylabel(label("delta_ptq"))
    handles = [plt.Line2D([], [], ls=ls, marker=mk, color="0.3", label=sch) for sch, (ls, mk) in SCHEDULE_STYLES.items()]
    sizes = _sizes(next(iter(tables.values())))
    handles += [plt.Line2D([], [], color=size_color(i, len(sizes)), lw=3, label=s) for i, s in enumerate(sizes)]
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles), frameon=False, fontsize=8)
    return fig


# line style of each (size, D) cell of the repetition figure, in the order the cells come; past the
# fourth, dash patterns (on, off) that none of the first four uses
CELL_LINESTYLES: tuple = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 3)))


def repetition_figure(tables: dict, bits=(3, 4)):
    """δ_PTQ and the post-PTQ loss against the passes over the data at fixed (N, D): the whole,
    half and quarter training split, one line per (method, size, D), one column per P_post.

    Each series reads without colour: the method gives the colour and the marker (the book's
    ``COLORS`` and ``MARKERS``, Okabe & Ito's colour-blind-safe palette), the (size, D) cell the line
    style (``CELL_LINESTYLES``, in the order the cells first appear), so no two series share a
    (marker, line style) pair. The legend's text is as large as the tick labels.

    Args:
        tables: method -> :func:`bitlaws.study.design_checks.repetition_table` of that method.
        bits: the P_post columns.

    Returns:
        The matplotlib figure (log x axis of passes); top row δ_PTQ, bottom row the post-PTQ loss; one
        legend for the figure, below the axes, one column per method (none without rows).
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt
    import pandas as pd

    fig, axes = plt.subplots(2, len(bits), figsize=(3.6 * len(bits), 5.6), sharex=True, squeeze=False,
                             layout="constrained")
    frames = [t[["size", "n_tokens"]] for t in tables.values() if len(t)]
    cells = list(pd.concat(frames).drop_duplicates().itertuples(index=False, name=None)) if frames else []
    style = {cell: CELL_LINESTYLES[k % len(CELL_LINESTYLES)] for k, cell in enumerate(cells)}
    for method, table in tables.items():
        for j, b in enumerate(bits):
            t = table[table["bits_post"] == b]
            for size, d in cells:
                g = t[(t["size"] == size) & (t["n_tokens"] == d)].sort_values("passes")
                if not len(g):
                    continue
                kw = dict(color=COLORS.get(method, "k"), marker=MARKERS.get(method, "o"), ms=5,
                          ls=style[(size, d)], lw=1.6)
                axes[0, j].plot(g["passes"], g["delta_ptq"], label=f"{method.upper()} {size}, D={d / 1e6:.1f}M", **kw)
                axes[1, j].plot(g["passes"], g["loss_post"], **kw)
            axes[0, j].text(0.03, 0.95, f"INT{b}", transform=axes[0, j].transAxes, va="top")
            log_axis(axes[1, j], "x")
            passes = sorted(set(table["passes"].round(2)))
            axes[1, j].set_xticks(passes, [f"{p:g}" for p in passes])
            axes[1, j].set_xlabel("Passes over the data [×]")
    axes[0, 0].set_ylabel(label("delta_ptq"))
    axes[1, 0].set_ylabel(f"Post-PTQ loss [nats/{token_unit()}]")
    # the legend below the axes (one column per method), where it covers no line; long handles so
    # that a dashed or dotted line shows its pattern
    seen: dict = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=max(len(tables), 1),
                   frameon=False, handlelength=3.2, fontsize=mpl.rcParams["xtick.labelsize"])
    return fig
