"""Chapter 06 (QUIK kernels) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

import numpy as np

from .style import COLORS, MARKERS, label

__all__ = ["pipeline_figure", "cpu_speedup_figure", "cpu_stages_figure", "gpu_speedup_figure", "gpu_ceiling_figure"]

# Box fills of the pipeline diagram: Triton kernels, torch operations, tensors.
_TRITON, _TORCH, _DATA = "#cfe3f5", "#e6e6e6", "white"
# The reference path's stages (the benchmark's `part` column) and their colours.
_STAGE_COLORS = {"act_quant": "#E69F00", "int_gemm": COLORS["quik"], "outlier_gemm": "#56B4E9"}


def pipeline_figure():
    """One QUIK linear layer at run time, as a diagram: the activation kernel (`quik_act`), the
    tensors it writes, the 16-bit outlier GEMM and the integer GEMM with its dequantization
    epilogue (QUIK, Algorithm 1 and Fig. 4). Blue boxes are Triton kernels, grey ones torch.

    Returns:
        The matplotlib figure (no axes drawn).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(9.0, 4.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0.3, 5.1)
    ax.axis("off")

    def box(x, y, w, h, text, color):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=color, ec="0.3", lw=1))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8.5)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", color="0.25", lw=1.1))

    box(0.1, 2.0, 1.5, 1.0, "x  (M × K)\nbf16 / fp16", _DATA)
    box(2.1, 1.6, 2.0, 1.8, "quik_act\nrange per token\n(base features)\nquantize · pack\ngather outliers", _TRITON)
    box(4.6, 3.6, 1.9, 0.9, "codes (M × K_b)\nint8 | int4 ×2/byte", _DATA)
    box(4.6, 2.25, 1.9, 0.9, "s_t, z_t  (M,)\nfp32", _DATA)
    box(4.6, 0.5, 1.9, 0.9, "x_outlier (M × k)\n16-bit", _DATA)
    box(6.9, 0.5, 1.5, 0.9, "outlier GEMM\nY = x_o W_oᵀ + b", _TORCH)
    box(6.9, 2.5, 1.5, 1.8, "int GEMM\nA = q wᵀ (int32)\n+ epilogue\ns σ A + s(h−z) R + Y", _TRITON)
    box(8.8, 2.95, 1.1, 0.9, "y (M × N)", _DATA)
    box(6.9, 4.5, 1.5, 0.45, "w (N × K_b), σ, R", _DATA)
    arrow(1.6, 2.5, 2.1, 2.5)
    for y in (4.05, 2.7, 0.95):
        arrow(4.1, 2.5, 4.6, y)
    arrow(6.5, 4.05, 6.9, 3.9)
    arrow(6.5, 2.7, 6.9, 2.9)
    arrow(6.5, 0.95, 6.9, 0.95)
    arrow(7.65, 1.4, 7.65, 2.5)
    arrow(7.65, 4.5, 7.65, 4.3)
    arrow(8.4, 3.4, 8.8, 3.4)
    return fig


def cpu_speedup_figure(layer):
    """Speed-up of QuikLinear's reference path over the dense layer against tokens per forward,
    log–log, one panel per layer shape (ordered by k_in, then n_out), W8A8 solid and W4A4 dashed,
    and the break-even line at 1 (dotted).

    Args:
        layer: the benchmark's ``part == "layer"`` rows (columns ``layer``, ``n_out``, ``k_in``,
            ``method``, ``m_tokens``, ``speedup``).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    shapes = layer[["layer", "n_out", "k_in"]].drop_duplicates().sort_values(["k_in", "n_out"]).to_numpy()
    fig, axes = plt.subplots(1, len(shapes), figsize=(3.2 * len(shapes), 3.4), sharey=True)
    styles = {"quik_w8a8": ("-", MARKERS["quik"]), "quik_w4a4": ("--", "o")}
    for ax, (name, n, k) in zip(np.atleast_1d(axes), shapes):
        g = layer[(layer["n_out"] == n) & (layer["k_in"] == k)]
        for method, (ls, mk) in styles.items():
            s = g[g["method"] == method].sort_values("m_tokens")
            ax.plot(s["m_tokens"], s["speedup"], ls=ls, marker=mk, color=COLORS["quik"],
                    label=method.replace("quik_", "").upper())
        ax.axhline(1.0, color=COLORS["none"], lw=1, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("Tokens per forward $M$")
        ax.text(0.03, 0.95, f"{name}\n{n} × {k}", transform=ax.transAxes, va="top", fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel("Speed-up over dense fp32 [×]")
    np.atleast_1d(axes)[-1].legend(loc="lower right")
    return fig


def cpu_stages_figure(cpu):
    """Where the reference path spends its time: one panel per token count, a bar for the dense
    layer and stacked bars (activation quantization, integer GEMM with its epilogue, outlier GEMM)
    for W8A8 and W4A4, each summed over the layer shapes.

    Args:
        cpu: a CPU benchmark (columns ``part``, ``method``, ``m_tokens``, ``latency_ms``).

    Returns:
        The matplotlib figure (latency in ms).
    """
    import matplotlib.pyplot as plt

    layer = cpu[cpu["part"] == "layer"]
    parts = cpu[cpu["part"] != "layer"].pivot_table(index=["m_tokens", "method"], columns="part",
                                                    values="latency_ms", aggfunc="sum").fillna(0.0)
    dense_ms = layer[layer["method"] == "dense"].groupby("m_tokens")["latency_ms"].sum()
    tokens = sorted(layer["m_tokens"].unique())
    fig, axes = plt.subplots(1, len(tokens), figsize=(2.4 * len(tokens), 3.4))
    for ax, m in zip(np.atleast_1d(axes), tokens):
        ax.bar(0, dense_ms[m], color=COLORS["none"], width=0.6)
        for i, method in enumerate(["quik_w8a8", "quik_w4a4"], start=1):
            bottom = 0.0
            for part, c in _STAGE_COLORS.items():
                v = parts.loc[(m, method), part] if (m, method) in parts.index else 0.0
                ax.bar(i, v, bottom=bottom, color=c, width=0.6, label=part if (m == tokens[0] and i == 2) else None)
                bottom += v
        ax.set_xticks([0, 1, 2], ["dense", "W8A8", "W4A4"], rotation=30)
        ax.text(0.03, 0.97, f"M = {m}", transform=ax.transAxes, va="top", fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel(label("latency_ms"))
    fig.legend(loc="outside lower center", ncol=3)
    return fig


def gpu_speedup_figure(gpu):
    """Speed-up of the Triton QuikLinear over the bf16 dense layer on the GPU against tokens per
    forward, log–log, one panel per Llama-2 model, one marker per layer shape, W8A8 solid and
    W4A4 dashed; break-even at 1 (dotted) and the ideal INT8 matmul's 2× over fp16 on an RTX 3090
    (grey; QUIK's Fig. 9, no quantization: Q4's 8-bit threshold is anchored to it, and Fig. 6's text
    gives no QUIK-8B number).

    Args:
        gpu: the GPU benchmark rows (``load_benchmark("gpu")``; columns ``model``, ``layer``,
            ``n_out``, ``k_in``, ``method``, ``part``, ``m_tokens``, ``speedup``).

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    layer = gpu[gpu["part"] == "layer"]
    models = list(dict.fromkeys(layer["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(3.3 * len(models), 3.5), sharey=True)
    marks = ["D", "o", "s", "^"]
    for ax, model in zip(np.atleast_1d(axes), models):
        g = layer[layer["model"] == model]
        shapes = g[["layer", "n_out", "k_in"]].drop_duplicates().sort_values(["k_in", "n_out"]).to_numpy()
        for (name, n, k), mk in zip(shapes, marks):
            for method, ls in (("quik_w8a8", "-"), ("quik_w4a4", "--")):
                s = g[(g["n_out"] == n) & (g["k_in"] == k) & (g["method"] == method)].sort_values("m_tokens")
                ax.plot(s["m_tokens"], s["speedup"], ls=ls, marker=mk, color=COLORS["quik"], ms=4,
                        label=f"{name} {n}×{k}" if method == "quik_w8a8" else None)
        ax.axhline(1.0, color=COLORS["none"], lw=1, ls=":")
        ax.axhline(2.0, color="0.6", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_yticks([0.05, 0.1, 0.2, 0.5, 1, 2], ["0.05", "0.1", "0.2", "0.5", "1", "2"])
        ax.set_xlabel("Tokens per forward $M$")
        ax.text(0.03, 0.97, model, transform=ax.transAxes, va="top", fontsize=9)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=7, ncol=1, frameon=False,
                  title="solid W8A8, dashed W4A4", title_fontsize=7)
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("Speed-up over dense bf16 [×]")
    first.text(0.97, 2.0, "ideal INT8 matmul, RTX 3090", transform=first.get_yaxis_transform(), ha="right", va="bottom",
               fontsize=7, color="0.45")
    first.text(0.97, 1.0, "break-even", transform=first.get_yaxis_transform(), ha="right", va="bottom",
               fontsize=7, color="0.45")
    return fig


def gpu_ceiling_figure(gpu, m=None):
    """At `m` tokens (default the largest), for each layer shape: the speed-up over the bf16 layer
    of the QuikLinear W8A8 and W4A4 layers and of the int8 GEMM alone on the base features, ours
    (Triton) and the GPU library's (cuBLASLt, ``impl = cublas``); break-even at 1, and 2×: the ideal
    INT8 matmul over fp16 on an RTX 3090 (QUIK's Fig. 9).

    Args:
        gpu: the GPU benchmark rows (as :func:`gpu_speedup_figure`, plus ``impl``, ``bits``,
            ``latency_ms``).
        m: tokens per forward.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    m = int(gpu["m_tokens"].max()) if m is None else m
    g = gpu[gpu["m_tokens"] == m]
    key = ["model", "layer", "n_out", "k_in"]
    dense = g[(g["part"] == "layer") & (g["method"] == "dense")].set_index(key)["latency_ms"]
    series = {
        "W8A8 layer": g[(g["part"] == "layer") & (g["method"] == "quik_w8a8")],
        "int8 GEMM, ours": g[(g["part"] == "int_gemm") & (g["bits"] == 8) & (g["impl"] == "triton")],
        "int8 GEMM, cuBLASLt": g[(g["part"] == "int_gemm") & (g["impl"] == "cublas")],
        "W4A4 layer (256 outliers)": g[(g["part"] == "layer") & (g["method"] == "quik_w4a4")],
    }
    colors = [COLORS["quik"], "#56B4E9", "#999999", "#E69F00"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    x = np.arange(len(dense))
    width = 0.8 / len(series)
    for i, ((name, rows), c) in enumerate(zip(series.items(), colors)):
        ratio = (dense / rows.set_index(key)["latency_ms"].reindex(dense.index)).to_numpy()
        ax.bar(x + (i - (len(series) - 1) / 2) * width, ratio, width, color=c, label=name)
    ax.axhline(1.0, color=COLORS["none"], lw=1, ls=":")
    ax.axhline(2.0, color="0.6", lw=1)
    ax.set_xticks(x, [f"{mo.removeprefix('llama2-')}\n{la}" for mo, la, _, _ in dense.index], fontsize=8)
    ax.set_ylabel(f"Speed-up over dense bf16 at $M$ = {m} [×]")
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    return fig
