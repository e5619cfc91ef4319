"""Chapter 04's figures (compute-optimal precision): N_eff/N per bit, P* against compute, N* and D* at a
fixed precision, P* at a fixed model size, the inference-cost optimum and our compute-matched suite.

Each function takes the tables the chapter computed (``bitlaws.study.compute_optimal``) and returns
the matplotlib figure; none fits or reads data.
"""

from __future__ import annotations

import numpy as np

from ...laws import forms, optimal
from .style import COLORS, label

__all__ = ["neff_figure", "p_star_figure", "n_d_star_figure", "fixed_n_figure", "inference_cost_figure",
           "compute_matched_figure"]


def neff_figure(params):
    """N_eff/N against the training precision P when only the weights, only the activations or only
    the KV cache are at P bits, and all three (tied): with the offsets n_x (solid) and without
    (dashed); the tied curve only where every factor is positive (the paper's Fig. 3, left).

    Args:
        params: constants with ``gamma_w``, ``n_w``, ``gamma_a``, ``n_a``, ``gamma_kv``, ``n_kv``
            (``forms.PAPER_CONSTANTS``).

    Returns:
        The matplotlib figure (P from 2 to 16 bits).
    """
    import matplotlib.pyplot as plt


    p = np.linspace(2.0, 16.0, 400)
    fig, ax = plt.subplots()
    for x, lab in (("w", "weights"), ("a", "activations"), ("kv", "KV cache")):
        ax.plot(p, forms.precision_factor(p, params[f"gamma_{x}"], params[f"n_{x}"], cutoff=False),
                color=COLORS[x], label=lab)
        ax.plot(p, forms.precision_factor(p, params[f"gamma_{x}"], cutoff=False), "--", color=COLORS[x], lw=1)
    tied = forms.tied_precision_factor(p, params)
    tied[p <= optimal.precision_lower_bound(params)] = np.nan  # below it one factor is negative: N_eff ≤ 0
    ax.plot(p, tied, color=COLORS["tied"], label="all three (tied)")
    ax.plot(p, forms.tied_precision_factor(p, params, offsets=False), "--", color=COLORS["tied"], lw=1)
    ax.set_ylim(-0.1, 1.02)
    ax.set_xlabel("Training precision $P$ [bits]")
    ax.set_ylabel(label("n_eff_ratio"))
    ax.legend(loc="lower right")
    return fig


def p_star_figure(brute, params, p_star: float, p_star_no_offsets: float):
    """Left, g(P)/P (scaled to its maximum) with and without the offsets, the closed-form P* marked;
    right, the brute-force P* at each compute budget against the closed form (lines).

    Args:
        brute: :func:`bitlaws.study.compute_optimal.brute_force_p_star` (columns ``compute`` [FLOPs],
            ``bits``, ``bits_no_offsets``). params: the constants (``forms.PAPER_CONSTANTS``).
        p_star, p_star_no_offsets: the closed-form P* with and without the offsets [bits].

    Returns:
        The matplotlib figure (two panels).
    """
    import matplotlib.pyplot as plt


    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    q = np.linspace(2.5, 16, 400)
    for off, ls, ps in ((True, "-", p_star), (False, "--", p_star_no_offsets)):
        gp = forms.tied_precision_factor(q, params, offsets=off) / q
        ax1.plot(q, gp / np.nanmax(gp), ls, color=COLORS["tied"],
                 label=f"{'with' if off else 'without'} offsets, P* = {ps:.2f}")
        ax1.plot([ps], [1.0], "o", color=COLORS["tied"])
    ax1.set_ylim(0, 1.25)
    ax1.legend(loc="upper right")
    ax1.set_xlabel("Training precision $P$ [bits]")
    ax1.set_ylabel(r"$g(P)/P$, scaled")
    ax2.plot(brute["compute"], brute["bits"], "o", color=COLORS["tied"], label="brute force, with offsets")
    ax2.plot(brute["compute"], brute["bits_no_offsets"], "s", mfc="none", color=COLORS["tied"],
             label="brute force, without")
    ax2.axhline(p_star, color=COLORS["tied"], lw=1)
    ax2.axhline(p_star_no_offsets, color=COLORS["tied"], lw=1, ls="--")
    ax2.set_xscale("log")
    ax2.set_ylim(0, 9)
    ax2.set_xlabel(label("flops"))
    ax2.set_ylabel("Optimal precision $P^*$ [bits]")
    ax2.legend(loc="lower right")
    return fig


def n_d_star_figure(curves, checks, p_star: float):
    """N* and D* at a fixed precision and compute, relative to 16 bits: the closed form (lines) and
    brute-force minimisations over N (markers); P* dotted.

    Args:
        curves, checks: :func:`bitlaws.study.compute_optimal.n_d_star_curves` (columns ``bits``,
            ``n_rel``, ``d_rel``). p_star: the closed-form P* [bits].

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(curves["bits"], curves["n_rel"], color=COLORS["w"], label="$N^*$")
    ax.plot(curves["bits"], curves["d_rel"], color=COLORS["a"], label="$D^*$")
    ax.plot(checks["bits"], checks["n_rel"], "o", color=COLORS["w"])
    ax.plot(checks["bits"], checks["d_rel"], "o", color=COLORS["a"])
    ax.axvline(p_star, color="0.4", ls=":", lw=1)
    ax.set_xlabel("Training precision $P$ [bits]")
    ax.set_ylabel("Relative to 16 bits")
    ax.legend()
    return fig


def fixed_n_figure(curves, markers, checks):
    """The compute-optimal precision of a fixed-size model against its training tokens, one line per
    model size; stars at the Llama-3 markers; open circles, brute-force minimisations over P at
    fixed N and C (the paper's Fig. 6, right).

    Args:
        curves, markers, checks: :func:`bitlaws.study.compute_optimal.fixed_n_curves` (columns
            ``name``, ``n_params``, ``n_tokens``, ``bits``), in the order of the model sizes.

    Returns:
        The matplotlib figure (log x).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    names = list(dict.fromkeys(markers["name"]))
    for name, color in zip(names, plt.cm.cividis([0.0, 0.45, 0.8])):
        c, m, b = (t[t["name"] == name] for t in (curves, markers, checks))
        ax.plot(c["n_tokens"], c["bits"], color=color, label=f"N = {float(m['n_params'].iloc[0]) / 1e9:g}B")
        ax.plot(m["n_tokens"], m["bits"], "*", ms=13, color=color, mec="k")
        ax.plot(b["n_tokens"], b["bits"], "o", mfc="none", color=color, ls="none")
    ax.set_xscale("log")
    ax.set_xlabel("Training tokens $D$")
    ax.set_ylabel("Optimal precision $P^*$ [bits]")
    ax.legend(title="fixed model size")
    return fig


def inference_cost_figure(opt, checks):
    """The inference-cost optimum against the serving budget C = N·P_post: left, the serving
    precision; right, N* and D*; open markers, the brute-force grid search (the paper's Fig. 9).

    Args:
        opt, checks: :func:`bitlaws.study.compute_optimal.inference_cost_curves` (columns
            ``compute`` [parameter-bits], ``bits``, ``n_params``, ``n_tokens``).

    Returns:
        The matplotlib figure (two panels, log x).
    """
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    ax1.plot(opt["compute"], opt["bits"], color=COLORS["tied"])
    ax2.plot(opt["compute"], opt["n_params"], color=COLORS["w"], label="$N^*$")
    ax2.plot(opt["compute"], opt["n_tokens"], color=COLORS["a"], label="$D^*$")
    ax1.plot(checks["compute"], checks["bits"], "o", mfc="none", color=COLORS["tied"], ls="none")
    ax2.plot(checks["compute"], checks["n_params"], "o", mfc="none", color=COLORS["w"], ls="none")
    ax2.plot(checks["compute"], checks["n_tokens"], "o", mfc="none", color=COLORS["a"], ls="none")
    for a in (ax1, ax2):
        a.set_xscale("log")
        a.set_xlabel("Serving cost $C = N P_{\\mathrm{post}}$ [parameter-bits]")
    ax1.set_ylabel(r"Optimal $P_{\mathrm{post}}$ [bits]")
    ax2.set_yscale("log")
    ax2.set_ylabel("Parameters, tokens")
    ax2.legend()
    return fig


def compute_matched_figure(members, law_curve=None):
    """Our compute-matched suite: the measured validation loss per member (mean over seeds, ± its
    standard error), our fitted law at each member (crosses) and along N = N·P/P (line).

    Args:
        members: :func:`bitlaws.study.compute_optimal.suite_members` (index ``bits``; columns
            ``loss``, ``se`` (NaN without a σ), ``law`` (NaN without our γ's)).
        law_curve: the law along the suite (columns ``bits``, ``loss``), or None.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    b_m = members.index.to_numpy(float)
    se = members["se"].to_numpy(float)
    fig, ax = plt.subplots()
    ax.errorbar(b_m, members["loss"], yerr=None if np.isnan(se).all() else se, fmt="o", capsize=3,
                color=COLORS["tied"], label="measured, mean over seeds ± s.e.")
    if law_curve is not None:
        ax.plot(law_curve["bits"], law_curve["loss"], color="0.5", lw=1, label="our fitted law")
        ax.plot(b_m, members["law"], "x", color="0.3", ms=8)
    ax.set_xticks(b_m)
    ax.set_xlabel("Training precision $P$ of W, A and KV [bits]")
    ax.set_ylabel("validation loss [nats/byte]")
    ax.legend()
    return fig
