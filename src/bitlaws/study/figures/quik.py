"""Chapter 05's figures: QUIK on SmolLM2-135M (methods, the outlier count, outlier statistics) and on
the byte-level models."""

from __future__ import annotations

import matplotlib as mpl

from .style import COLORS, log_axis

__all__ = ["smol_methods_figure", "smol_k_figure", "smol_outlier_figure"]


def _family(method: str) -> str:
    head = method.split("_")[0]
    return {"random": "quik", "only": "quik", "fp": "none"}.get(head, head)


def smol_methods_figure(table, methods=None):
    """Δ loss per token against fp, one bar per method, with its 95 % window-bootstrap interval.

    Args:
        table: :func:`bitlaws.study.quik_smollm.smol_table` (columns ``method``, ``delta_loss``,
            ``delta_lo``, ``delta_hi``). methods: the bars in order (default every non-fp row).

    Returns:
        The matplotlib figure (symmetric-log x axis, nats per token).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    t = table.set_index("method")
    methods = [m for m in (methods or list(t.index)) if m in t.index and m != "fp"]
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(methods) + 1.0))
    y = np.arange(len(methods))[::-1]
    d = t.loc[methods, "delta_loss"].to_numpy(float)
    lo = t.loc[methods, "delta_lo"].to_numpy(float) if "delta_lo" in t else d
    hi = t.loc[methods, "delta_hi"].to_numpy(float) if "delta_hi" in t else d
    ax.barh(y, d, color=[COLORS[_family(m)] for m in methods], alpha=0.8)
    ax.errorbar(d, y, xerr=[d - lo, hi - d], fmt="none", ecolor="k", lw=0.8, capsize=2)
    ax.set_yticks(y, [m.replace("_", " ") for m in methods], fontsize=8)
    ax.set_xscale("symlog", linthresh=1e-2)
    ax.set_xlim(left=min(-2e-3, 1.5 * float(np.nanmin(lo))))
    ax.axvline(0, color="k", lw=0.6)
    ax.set_xlabel("Δ loss against fp [nats/token]")
    return fig


def smol_k_figure(ks, paper_k: dict | None = None, width: int = 576, paper_width: int = 8192):
    """QUIK W4A4 against the outlier count: absmax-chosen outliers and the random-columns control,
    Δ per token with 95 % intervals, x = k / in_features (log); the paper's Table 7 (LLaMA-2-70B,
    nats per LLaMA token) beside it at its own fractions.

    Args:
        ks: :func:`bitlaws.study.quik_smollm.k_sweep_smol`. paper_k: k -> Δ nats (``PAPER_NATS["k_70b"]``).
        width, paper_width: the input width that k is a fraction of (ours, the paper's).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.8, 3.4))
    for sel, color, marker in (("absmax", COLORS["quik"], "D"), ("random", COLORS["rtn"], "s")):
        s = ks[(ks["select"] == sel) & (ks["k"] > 0)].sort_values("k")
        if not len(s):
            continue
        x = s["k"] / width
        ax.plot(x, s["delta_loss"], marker=marker, color=color,
                label="outliers by max|x| (QUIK)" if sel == "absmax" else "random columns, same k")
        if "delta_lo" in s:
            ax.fill_between(x, s["delta_lo"], s["delta_hi"], color=color, alpha=0.2, lw=0)
    k0 = ks[(ks["select"] == "absmax") & (ks["k"] == 0)]
    if len(k0):
        ax.axhline(float(k0["delta_loss"].iloc[0]), color=COLORS["gptq"], ls="--", lw=1, label="k = 0 (GPTQ W4A4)")
    if paper_k:
        xs = sorted(paper_k)
        ax.plot([k / paper_width for k in xs], [paper_k[k] for k in xs], marker="o", color="0.4", ls=":",
                label="paper, LLaMA-2-70B (Table 7)")
    log_axis(ax, "x")
    ax.set_yscale("log")
    ax.set_xlabel("outlier features k / in_features")
    ax.set_ylabel("Δ loss [nats/token]")
    ax.legend(fontsize=7)
    return fig


def smol_outlier_figure(stats):
    """QUIK's outlier statistic (max / median of channel max|x| on the calibration tokens) per block
    of SmolLM2-135M, one line per input (q/k/v, o, gate/up, down), and an i.i.d. Gaussian of the
    same shape (dashed).

    Args:
        stats: the rows of ``quik_smollm_outliers.csv``.

    Returns:
        The matplotlib figure (log y).
    """
    import matplotlib.pyplot as plt

    roles = {"q_proj": "q/k/v_proj", "k_proj": "q/k/v_proj", "v_proj": "q/k/v_proj", "o_proj": "o_proj",
             "gate_proj": "gate/up_proj", "up_proj": "gate/up_proj", "down_proj": "down_proj"}
    st = stats.assign(role=stats["kind"].map(roles)).drop_duplicates(["layer_index", "role"])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for j, role in enumerate(["q/k/v_proj", "o_proj", "gate/up_proj", "down_proj"]):
        r = st[st["role"] == role].sort_values("layer_index")
        ax.plot(r["layer_index"], r["absmax_ratio"], marker="osv^"[j], ls=":", lw=0.8, ms=4,
                color=mpl.colormaps["tab10"](j), label=role)
    for i, (w, g) in enumerate(st.groupby("in_features")["gauss_ratio"].first().items()):
        ax.axhline(g, color="0.4", ls="--", lw=0.8, label="Gaussian, same shape" if i == 0 else None)
    log_axis(ax, "y")
    ax.set_xlabel("block")
    ax.set_ylabel("max / median of channel max|x|")
    ax.legend(fontsize=7, ncol=3)
    return fig
