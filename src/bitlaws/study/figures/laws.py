"""Chapter 03 (law fitting) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

from ...laws import forms
from .style import bits_color, human, label, size_color

__all__ = ["chinchilla_figure", "p3_lack_of_fit_figure", "p5_factorial_figure", "p5_mechanism_figure",
           "p9_matched_figure", "ptq_fit_figure"]


def chinchilla_figure(frame, tied, free):
    """Chinchilla's L(N, D) on the high-precision runs (the paper's Appendix K, first stage): seed-mean
    validation loss against D on a log axis, one colour per N (cividis), with the tied fit (α = β,
    solid) and the free fit (dashed) drawn over 1/1.5 to 1.5 times the measured D.

    Args:
        frame: the ``chinchilla`` stage's rows (:func:`bitlaws.study.law_fits.stage_frames`; columns
            ``n_params``, ``n_tokens``, ``loss_val`` in nats/byte).
        tied, free: the fitted constants (``A``, ``B``, ``E``, ``alpha``, ``beta``) of the
            ``chinchilla`` and ``chinchilla_free`` stages (:func:`bitlaws.study.law_fits.params_of`),
            or None to leave that curve out.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    base = frame.groupby(["n_params", "n_tokens"], as_index=False)["loss_val"].mean()
    sizes = sorted(base["n_params"].unique())
    colors = plt.cm.cividis(np.linspace(0.0, 0.85, max(len(sizes), 1)))
    fig, ax = plt.subplots()
    d_line = np.geomspace(base["n_tokens"].min() / 1.5, base["n_tokens"].max() * 1.5, 100)
    for n, c in zip(sizes, colors):
        s = base[base["n_params"] == n].sort_values("n_tokens")
        ax.plot(s["n_tokens"], s["loss_val"], "o", color=c, label=f"N = {int(n):,}")
        for params, ls, lw in ((tied, "-", 1.2), (free, "--", 1.0)):
            if params:
                ax.plot(d_line, forms.chinchilla_loss(n, d_line, params), ls, color=c, lw=lw)
    ax.set_xscale("log")
    ax.set_xlabel(label("n_tokens"))
    ax.set_ylabel(label("loss_val"))
    ax.legend()
    return fig


def p5_mechanism_figure(table):
    """P5's mechanism pilot: each within-seed contrast with its 95 % interval, main effects (and A4's cost
    on o_proj's input, their difference) on the left,
    interactions with A4 and the two differences the hypothesis is about on the right (< 0: compounds
    less than it adds). The factorial's own A4 × KV4 row is drawn in its colour; a contrast with no
    complete seed is named "(no runs yet)".

    Args:
        table: :func:`bitlaws.study.p5_mechanism.mechanism_table` (columns ``contrast``, ``estimate``,
            ``lo``, ``hi``, ``n_seeds``) [nats/byte].

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    from ..p5_mechanism import CONTRASTS

    names = list(CONTRASTS)
    main = [n for n in names if " x " not in n]  # each part alone, and A4's cost on o_proj's input
    inter = [n for n in names if " x " in n]
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), gridspec_kw={"width_ratios": [1, 1.25]}, layout="constrained")
    t = table.set_index("contrast")
    for ax, group, title in ((axes[0], main, "loss increase of each part alone"),
                             (axes[1], inter, "interactions (< 0: less than additive)")):
        for i, name in enumerate(group):
            y = len(group) - 1 - i
            r = t.loc[name] if name in t.index else None
            if r is None or not int(r["n_seeds"]):
                ax.text(0.0, y, "  (no runs yet)", va="center", fontsize=8, color="0.4")
                continue
            col = "#D55E00" if name == "A4 x KV4" else ("#0072B2" if name.startswith("(") else "0.15")
            ax.errorbar(r["estimate"], y, xerr=[[r["estimate"] - r["lo"]], [r["hi"] - r["estimate"]]], fmt="o",
                        color=col, ms=5, capsize=3)
        ax.axvline(0.0, color="0.5", lw=0.8, ls=":")
        ax.set_yticks(range(len(group)))
        ax.set_yticklabels([n.replace(" x ", " × ") for n in reversed(group)], fontsize=8)
        ax.set_xlabel("within-seed contrast [nats/byte], 95 % interval")
        ax.set_title(title, fontsize=9)
    return fig


def ptq_fit_figure(frame, params):
    """Measured δ_PTQ against the fit of Eq. 2, one point per row and P_post (colour from
    :func:`bits_color`), log–log with the dashed line of equality; rows with δ ≤ 0 are not drawn.

    Args:
        frame: the ``ptq`` stage's rows (:func:`bitlaws.study.law_fits.stage_frames`; columns
            ``n_params``, ``n_tokens``, ``bits_post``, ``loss_val`` and ``loss_base`` in nats/byte).
        params: the fitted Eq. 2 constants (``C_T``, ``gamma_D``, ``gamma_N``, ``gamma_post``), or
            None: the axes then say that there is no fit.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    if params is not None and len(frame):
        pred = forms.delta_ptq(frame["n_params"], frame["n_tokens"], frame["bits_post"], params)
        meas = frame["loss_val"] - frame["loss_base"]
        for b in sorted(frame["bits_post"].unique()):
            m = (frame["bits_post"] == b) & (meas > 0)
            ax.plot(pred[m], meas[m], "o", color=bits_color(b), label=f"INT{int(b)}", alpha=0.8)
        if (meas > 0).any():
            lim = [max(1e-5, float(meas[meas > 0].min()) / 2), float(max(meas.max(), pred.max())) * 2]
            ax.plot(lim, lim, "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no Eq. 2 fit for this profile", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(r"fitted $\delta_{\mathrm{PTQ}}$ [nats/byte]")
    ax.set_ylabel(label("delta_ptq"))
    return fig


def p3_lack_of_fit_figure(table, test):
    """What the N_eff law (Eq. 3) misses between training precisions at fixed (N, D): the least-squares fit's
    residual at each design point, averaged over its seeds, against P_w; one panel per size N, one line per
    budget D, with ±2 standard errors of that mean from the pure error; the title gives P3's leg-(a) test
    (rule v7). A law that fits leaves every line scattered about zero within its bars.

    Args:
        table, test: :func:`bitlaws.study.law_fits.p3_lack_of_fit_table`'s two values (columns ``n_params``,
            ``n_tokens``, ``bits_w``, ``seeds``, ``residual``, ``se`` in nats/byte; ``f``, ``p``, ``dof_lof``,
            ``dof_pe``).

    Returns:
        The matplotlib figure.
    """
    import math

    import matplotlib.pyplot as plt

    sizes = sorted(table["n_params"].unique()) if len(table) else []
    fig, axes = plt.subplots(1, max(1, len(sizes)), sharey=True, squeeze=False, figsize=(9, 3.4))
    axes = axes[0]
    if not sizes:
        axes[0].text(0.5, 0.5, "no fitted P_w sweep for this profile", ha="center", va="center",
                     transform=axes[0].transAxes)
    budgets = sorted(table["n_tokens"].unique()) if len(table) else []
    ticks = sorted(table["bits_w"].unique()) if len(table) else []
    for ax, n in zip(axes, sizes):
        for d, g in table[table["n_params"] == n].groupby("n_tokens", sort=True):
            k = budgets.index(d)
            ax.errorbar(g["bits_w"] * (1 + 0.03 * (k - (len(budgets) - 1) / 2)), g["residual"], yerr=2 * g["se"],
                        color=size_color(k, len(budgets)), marker="o", ms=4, capsize=2, label=f"D = {human(d)}")
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [f"{int(b)}" for b in ticks])
        ax.minorticks_off()
        ax.set_title(f"N = {human(n)}", fontsize="medium")
        ax.set_xlabel("training $P_w$ [bits]")
    axes[0].set_ylabel("law's residual, seed mean\n[nats/byte]")
    if sizes:
        axes[-1].legend(fontsize="small")
    if math.isfinite(test.get("p", math.nan)):
        fig.suptitle(f"Lack of fit against pure error: F = {test['f']:.2f} on ({test['dof_lof']:.0f}, "
                     f"{test['dof_pe']:.0f}) degrees of freedom, p = {test['p']:.2g}", fontsize="medium")
    return fig


def p5_factorial_figure(rows, t_interval, bits=(4, 8, 16)):
    """P5 on the seeded factorial: for every combination with two or three parts quantized, the measured
    loss increase over its own seed's all-16 run (seed mean, ±2 standard errors over the seeds) against the
    sum of its parts' measured marginal increases (what "add" predicts, the dotted line of equality), beside
    the paper's multiplicative law on the same measured marginals, (∏_x(1 + κΔ_x) − 1)/κ with κ = 1/T over
    T's registered interval (a grey bar from one end to the other). Points under the line compound less
    than they add; the paper's bars lie above it. The combinations with activations and KV cache both at the
    lowest width (W4A4KV4, W8A4KV4, A4KV4) are ringed.

    Args:
        rows: the factorial's rows (``bitlaws.study.law_fits.load_p5_factorial``; columns ``bits_w``,
            ``bits_a``, ``bits_kv`` — NaN or 16 for an unquantized part — ``seed``, ``loss_val`` in nats/byte).
        t_interval: (T_lo, T_hi), the paper's T = A·N^(−α) interval (``power.P5_T_INTERVAL_V7``) [nats/byte].
        bits: the widths of the factorial; the largest is unquantized.

    Returns:
        The matplotlib figure (a note on the axes where there are no rows).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if rows is None or not len(rows):
        ax.text(0.5, 0.5, "no factorial rows for this profile", ha="center", va="center", transform=ax.transAxes)
        return fig
    hi = float(max(bits))
    parts = ("bits_w", "bits_a", "bits_kv")
    r = rows.copy()
    for c in parts:
        r[c] = r[c].fillna(hi).astype(float)
    base = r[(r[list(parts)] == hi).all(axis=1)].set_index("seed")["loss_val"]
    r["delta"] = r["loss_val"] - r["seed"].map(base)
    g = r.groupby(list(parts))["delta"]
    mean, se = g.mean(), g.std(ddof=1) / np.sqrt(g.count())

    def marginal(i, b):
        key = tuple(b if j == i else hi for j in range(3))
        return float(mean.get(key, np.nan)) if b != hi else 0.0

    kappas = sorted(1.0 / float(t) for t in t_interval)
    low = float(min(bits))
    styles = {2: ("o", "#0072B2", "two parts quantized"), 3: ("s", "#D55E00", "all three quantized")}
    seen = set()
    for combo, m in mean.items():
        k = sum(b != hi for b in combo)
        if k < 2:
            continue
        d = [marginal(i, b) for i, b in enumerate(combo)]
        x = float(np.sum(d))
        paper = [(np.prod([1.0 + kap * v for v in d]) - 1.0) / kap for kap in kappas]
        ax.plot([x, x], paper, color="0.6", lw=3, solid_capstyle="butt",
                label="paper's law on these marginals (κ = 1/T over T's interval)" if "paper" not in seen else None)
        seen.add("paper")
        mk, col, lab = styles[k]
        ax.errorbar(x, m, yerr=2 * float(se[combo]), fmt=mk, color=col, ms=5, capsize=2,
                    label=f"measured, {lab}" if k not in seen else None)
        seen.add(k)
        if combo[1] == low and combo[2] == low:  # activations and KV cache both at the lowest width: ringed
            ax.plot([x], [m], "o", ms=12, mfc="none", mec="0.1", mew=1.0,
                    label=f"A{int(low)}KV{int(low)} (any W): ringed" if "ring" not in seen else None)
            seen.add("ring")
    lim = ax.get_xlim()
    ax.plot(lim, lim, ":", color="0.2", lw=1, label="add: the sum of the marginals")
    ax.set_xlim(lim)
    ax.set_xlabel("sum of the parts' measured marginal increases [nats/byte]")
    ax.set_ylabel("loss increase over the all-16 run [nats/byte]")
    ax.legend(fontsize=8, loc="upper left", frameon=False)
    return fig


def p9_matched_figure(units, c_w_range, graded=(4, 5, 6)):
    """P9's matched grid: r = ln(δ_low/δ_hp) of every unit against the P_w it was trained at (quantized to
    P_post = P_w − 1), one panel per PTQ grid. Each unit is a point coloured by its model size (circles at the
    smaller D, squares at the larger); each P_w's mean over the sizes is a black bar with its 95 % t-interval
    (sizes as the replicates, as the rule reads them); the paper's law (Eq. 9 over Eq. 2, Table 2) is a grey
    bar over C_w's range with a tick at C_w = 1. At the right, the graded mean r̄ over ``graded`` with its
    interval, beside the law's range on the same units. Below 0: the low-precision-trained model degrades less.

    Args:
        units: grid name (``quant_scheme``) → :func:`bitlaws.study.p9_matched.matched_units` of that grid
            (dimensionless r; δ in nats/byte). The first grid is the graded one.
        c_w_range: (low, high) C_w of the paper's range (``p9_matched.P9_C_W_RANGE``).
        graded: the P_w that the rule grades; the others are drawn apart (hatched background).

    Returns:
        The matplotlib figure (a note on the axes where there are no units).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from ..p9_matched import matched_statistics, paper_r

    grids = list(units)
    fig, axes = plt.subplots(1, max(len(grids), 1), figsize=(4.0 * max(len(grids), 1), 4.6), sharey=True, squeeze=False,
                             layout="constrained")
    axes = axes[0]
    if not grids or all(not len(u) or not u["included"].any() for u in units.values()):
        axes[0].text(0.5, 0.5, "no matched units for this profile", ha="center", va="center", transform=axes[0].transAxes)
        return fig
    sizes = sorted({int(n) for u in units.values() for n in u["n_params"]})
    budgets = sorted({int(d) for u in units.values() for d in u["n_tokens"]})
    marks = dict(zip(budgets, "osD^v"))
    for ax, grid in zip(axes, grids):
        u = units[grid][units[grid]["included"]]
        bits = sorted(int(b) for b in u["bits_w"].unique())
        x_pool = max(bits) + 1.2
        ungraded = [b for b in bits if b not in graded]
        for b in ungraded:
            ax.axvspan(b - 0.45, b + 0.45, color="0.93", zorder=0)
        for b in bits + [None]:
            sel = graded if b is None else (b,)
            st = matched_statistics(units[grid], c_w_range=c_w_range, bits=tuple(sel))
            x = x_pool if b is None else b
            ax.plot([x + 0.22] * 2, [st["paper_lo"], st["paper_hi"]], color="0.6", lw=5, solid_capstyle="butt",
                    label=f"paper's law, $C_w$ ∈ [{c_w_range[0]:g}, {c_w_range[1]:.2f}]" if x == bits[0] else None)
            ax.plot([x + 0.12, x + 0.32], [st["paper_c1"]] * 2, color="0.2", lw=1.2,
                    label="paper's law, $C_w$ = 1" if x == bits[0] else None)
            if np.isfinite(st["r_mean"]):
                ax.errorbar([x - 0.22 if b is not None else x], [st["r_mean"]],
                            yerr=[[st["r_mean"] - st["r_lo"]], [st["r_hi"] - st["r_mean"]]], fmt="_" if b else "D",
                            color="k", ms=12 if b else 6, mew=2, capsize=3, elinewidth=1.5,
                            label="mean over sizes, 95 % t-interval" if x == bits[0] else None)
        jitter = np.linspace(-0.12, 0.12, len(sizes))
        for i, n in enumerate(sizes):
            for d in budgets:
                pts = u[(u["n_params"] == n) & (u["n_tokens"] == d)]
                ax.plot(pts["bits_w"] + jitter[i] - 0.05 * (budgets.index(d) - 0.5), pts["r"], marks[d],
                        color=size_color(i, len(sizes)), ms=4, alpha=0.8, ls="none",
                        label=f"N = {human(n)}" if (d == budgets[0] and ax is axes[0]) else None)
        ax.axhline(0.0, color="0.3", lw=0.8, ls=":")
        ax.set_xticks(bits + [x_pool], [str(b) for b in bits] + [f"{min(graded)}–{max(graded)}\n({'graded ' if ax is axes[0] else ''}r̄)"])
        ax.set_xlabel(label("bits_w") + r", quantized to $P_w - 1$")
        ax.set_title({"sym_per_channel": "training's grid (symmetric absmax; graded)",
                      "asym_per_channel": "asymmetric min-max (reported)"}.get(grid, grid), fontsize=9)
    axes[0].set_ylabel(r"$r = \ln(\delta_{\mathrm{low}}/\delta_{\mathrm{hp}})$  (< 0: resists PTQ)")
    handles, labels = axes[0].get_legend_handles_labels()
    shapes = [plt.Line2D([], [], marker=marks[d], color="0.4", ls="none", ms=4) for d in budgets]
    fig.legend(handles + shapes, labels + [f"D = {human(d)}" for d in budgets], fontsize=7, frameon=False,
               loc="outside lower center", ncol=5)
    return fig
