"""Chapter 05's figures: QUIK on SmolLM2-135M (methods, the outlier count, outlier statistics), on the
byte-level models (methods per size, the outlier fraction, outlier statistics) and MiniLM's outlier
statistic beside our largest model's."""

from __future__ import annotations

import matplotlib as mpl

from .style import COLORS, log_axis

__all__ = ["smol_methods_figure", "smol_k_figure", "smol_outlier_figure", "tiny_methods_figure", "tiny_k_figure",
           "tiny_outlier_figure", "minilm_outlier_figure"]


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


def tiny_methods_figure(tab, sizes, methods):
    """Δ validation loss per method on the byte-level models: one group of bars per method, one bar
    per model size (lighter for smaller N, left to right in increasing N); symmetric-log y.

    Args:
        tab: :func:`bitlaws.study.quik_accuracy.method_table` (columns ``size``, ``method``,
            ``delta_loss`` [nats/byte]). sizes: the sizes in increasing N. methods: the groups, in order
            (``quik_accuracy.MAIN_METHODS``); each takes the colour of its family (the name's first part).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    methods = list(methods)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / len(sizes)
    for j, size in enumerate(sizes):
        sub = tab[tab["size"] == size].set_index("method").reindex(methods)
        x = np.arange(len(methods)) + (j - (len(sizes) - 1) / 2) * width
        ax.bar(x, sub["delta_loss"], width, color=[COLORS[m.split("_")[0]] for m in methods],
               alpha=0.35 + 0.65 * (j + 1) / len(sizes), edgecolor="k", linewidth=0.3)
    ax.set_xticks(np.arange(len(methods)), [m.replace("_", " ") for m in methods], rotation=20)
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_ylabel("Δ loss [nats/byte]")
    ax.axhline(0, color="k", lw=0.6)
    return fig


def tiny_k_figure(ks, floor: float):
    """QUIK W4A4 on the byte-level models: Δ validation loss against the outlier fraction
    k / in_features, one line per size, with a band of ± the calibration-seed noise around the
    lowest Δ (none when ``floor`` is NaN).

    Args:
        ks: :func:`bitlaws.study.quik_accuracy.k_sweep` (columns ``size``, ``k_frac``, ``delta_loss``).
        floor: :func:`bitlaws.study.quik_accuracy.calibration_noise` [nats/byte].

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for size, sub in ks.groupby("size", sort=False):
        ax.plot(sub["k_frac"], sub["delta_loss"], marker="D", label=size)
    if np.isfinite(floor):
        ax.axhspan(ks["delta_loss"].min() - floor, ks["delta_loss"].min() + floor, color="0.9", zorder=0,
                   label="± calibration-seed noise")
    ax.set_xlabel("outlier features $k$ / in_features")
    ax.set_ylabel("Δ loss [nats/byte]")
    ax.legend()
    return fig


def tiny_outlier_figure(st, sizes):
    """QUIK's outlier statistic (max / median of channel max|x|) per linear layer of each byte-level
    model: one group per size, one marker per layer type, points within a group over the layers.

    Args:
        st: :func:`bitlaws.study.quik_accuracy.outlier_statistics` (columns ``size``, ``kind`` with
            q/k/v and gate/up merged, ``layer_index``, ``absmax_ratio``). sizes: the sizes in order.

    Returns:
        The matplotlib figure (log y).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    kinds = ["q/k/v_proj", "o_proj", "gate/up_proj", "down_proj"]
    marks = dict(zip(kinds, "osv^"))
    for i, size in enumerate(s for s in sizes if s in set(st["size"])):
        sub = st[st["size"] == size]
        for kind in kinds:
            r = sub[sub["kind"] == kind]
            ax.scatter(i + 0.15 * (kinds.index(kind) - 1.5) + 0.02 * r["layer_index"], r["absmax_ratio"],
                       marker=marks[kind], color=plt.cm.tab10(kinds.index(kind)), s=18,
                       label=kind if i == 0 else None)
    ax.set_xticks(range(len(sizes)), sizes)
    log_axis(ax, "y")
    ax.set_ylabel("max / median of channel max|x|")
    ax.legend(fontsize=8, ncol=2)
    return fig


def minilm_outlier_figure(cmp):
    """QUIK's outlier statistic per layer, by what the layer reads: all-MiniLM-L6-v2 (left) against
    our largest byte-level model (right); dashed, an i.i.d. Gaussian input of the same shape.

    Args:
        cmp: :func:`bitlaws.study.quik_realmodel.minilm_comparison` (``mini_layers`` and ``ours``
            with columns ``role``, ``layer_index``, ``absmax_ratio``; ``role_order``; the Gaussian
            references ``gauss_mini_all`` and ``gauss_ours_by_width``; ``ours_size``).

    Returns:
        The matplotlib figure (two panels sharing a log y).
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, frame, title in ((axes[0], cmp.mini_layers, "all-MiniLM-L6-v2 (real pretrained)"),
                             (axes[1], cmp.ours, f"ours, {cmp.ours_size} (largest)")):
        for j, role in enumerate(cmp.role_order):
            r = frame[frame["role"] == role]
            ax.plot(r["layer_index"] + 0.08 * (j - 1.5), r["absmax_ratio"], marker="osv^"[j], ls=":", lw=0.8,
                    color=plt.cm.tab10(j), label=role)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("layer")
    for i, g in enumerate(cmp.gauss_mini_all):
        axes[0].axhline(g, color="0.4", ls="--", lw=0.8, label="Gaussian, same shape" if i == 0 else None)
    for g in cmp.gauss_ours_by_width.values():
        axes[1].axhline(g, color="0.4", ls="--", lw=0.8)
    log_axis(axes[0], "y")
    axes[0].set_ylabel("max / median of channel max|x|")
    axes[0].legend(fontsize=7)
    return fig
