"""Chapter 00 (number formats) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...formats import PAPER_FP_FORMATS, FloatFormat, parse_format
from ..number_formats import OCP_AT, short_name
from .style import bits_color, log_axis

__all__ = ["FAMILY_COLORS", "grids_figure", "relative_gap_figure", "snr_bits_figure", "per_channel_figure"]

# One colour per format family: INT, the paper's FP formats (Appendix D.2), the OCP FP formats.
FAMILY_COLORS: dict[str, str] = {"int": "#44AA99", "fp": "#AA4499", "ocp": "#999933"}


def _positive_grid(name: str) -> np.ndarray:
    """The non-negative grid values of a format, divided by its largest (integers: absmax codes)."""
    f = parse_format(name)
    if isinstance(f, FloatFormat):
        return f.values(positive=True) / f.max
    q = 2 ** (f.bits - 1) - 1
    return np.arange(q + 1) / q


def grids_figure(bits: Sequence[int] = range(3, 9)):
    """The positive half of each grid, scaled so that the largest value is 1: one row per format, in
    pairs of equal width (INT b, then the paper's FP format at b bits), coloured by ``bits_color``.

    Args:
        bits: the widths to draw (each must have a ``PAPER_FP_FORMATS`` entry).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    rows = []
    for b in bits:
        rows.append((f"INT{b}", _positive_grid(f"int{b}"), b))
        rows.append((f"FP{b} {short_name(PAPER_FP_FORMATS[b])}", _positive_grid(PAPER_FP_FORMATS[b]), b))
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for i, (_, v, b) in enumerate(rows):
        ax.eventplot([v], lineoffsets=-i, linelengths=0.7, linewidths=0.8, colors=bits_color(b))
    ax.set_yticks([-i for i in range(len(rows))], [r[0] for r in rows])
    ax.set_xlim(-0.01, 1.01)
    ax.set_xlabel(r"Grid value / largest value  ($|x| / \max|x|$ after absmax scaling)")
    ax.grid(axis="y", visible=False)
    return fig


def relative_gap_figure(bits: Sequence[int] = (4, 8)):
    """Largest relative rounding error (half the gap below each positive grid value, over the value)
    against the magnitude over the absmax, log–log: INT (solid), the paper's FP (dashed) and the
    OCP format of ``OCP_AT`` (dotted) at each width of ``bits``, coloured by ``bits_color``.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for b in bits:
        for name, family in ((f"int{b}", "int"), (PAPER_FP_FORMATS[b], "fp"), (OCP_AT[b], "ocp")):
            v = _positive_grid(name)
            rel = (np.diff(v) / 2) / v[1:]  # half the gap below each positive value, relative to it
            ax.plot(v[1:], rel, ls={"int": "-", "fp": "--", "ocp": ":"}[family], color=bits_color(b),
                    label=f"{short_name(name)} ({b} bits{', OCP' if family == 'ocp' else ''})")
    log_axis(ax, "both")
    ax.set_xlabel(r"Magnitude / absmax  $|x| / \max|x|$")
    ax.set_ylabel("Largest relative error [fraction]")
    ax.legend(ncols=2)
    return fig


def snr_bits_figure(snr):
    """SNR against bits, one panel per distribution (in the order of the rows), one line per family
    (INT, the paper's FP; OCP as markers only), and on the uniform panel the closed form
    20·log10(2^b − 2) dB of integers (dotted).

    Args:
        snr: :func:`bitlaws.study.number_formats.snr_table` (columns ``data``, ``family``, ``bits``,
            ``snr_db``).

    Returns:
        The matplotlib figure (three panels, shared y in dB).
    """
    import matplotlib.pyplot as plt

    dists = list(dict.fromkeys(snr["data"]))
    fig, axes = plt.subplots(1, len(dists), figsize=(9.6, 3.6), sharey=True)
    for ax, d in zip(np.atleast_1d(axes), dists):
        s = snr[snr["data"] == d]
        for fam, lab, mk in [("int", "INT (absmax)", "o"), ("fp", "paper's FP (App. D.2)", "s"), ("ocp", "OCP FP", "D")]:
            t = s[s["family"] == fam].sort_values("bits")
            ax.plot(t["bits"], t["snr_db"], marker=mk, color=FAMILY_COLORS[fam], label=lab,
                    ls="-" if fam != "ocp" else "none")
        if d == "uniform":
            bb = np.arange(3, 9)
            ax.plot(bb, 20 * np.log10(2.0**bb - 2), ":", color="0.4", lw=1.2, label="20·log10(2^b − 2)")
        ax.text(0.04, 0.96, d, transform=ax.transAxes, va="top")
        ax.set_xlabel("Bits per value $b$")
    np.atleast_1d(axes)[0].set_ylabel("SNR [dB]")
    np.atleast_1d(axes)[0].legend(loc="lower right")
    return fig


def per_channel_figure(gran):
    """Row-averaged SNR against bits: INT and the paper's FP, one absmax scale per tensor (dashed)
    or per output channel (solid).

    Args:
        gran: :func:`bitlaws.study.number_formats.granularity_table` (columns ``family``, ``bits``,
            ``granularity``, ``row_snr_db``).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    for fam, lab in (("int", "INT"), ("fp", "paper's FP")):
        for gname, ls in (("per channel", "-"), ("per tensor", "--")):
            t = gran[(gran["family"] == fam) & (gran["granularity"] == gname)].sort_values("bits")
            ax.plot(t["bits"], t["row_snr_db"], ls=ls, marker="o" if fam == "int" else "s",
                    color=FAMILY_COLORS[fam], label=f"{lab}, {gname}")
    ax.set_xlabel("Bits per value $b$")
    ax.set_ylabel("Row-averaged SNR [dB]")
    ax.legend()
    return fig
