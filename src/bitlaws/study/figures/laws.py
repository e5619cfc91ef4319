"""Chapter 03 (law fitting) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

from ...laws import forms
from .style import bits_color, label

__all__ = ["chinchilla_figure", "ptq_fit_figure"]


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
