"""Chapter 00's computations: the formats table, SNR against bits on synthetic data, and one scale
per tensor against one per row (per channel) on a matrix with uneven rows.

Nothing here reads run data: every number is recomputed from ``bitlaws.formats`` and
``bitlaws.quant`` in seconds. The figures are in :mod:`bitlaws.study.figures.formats`.

Public names: ``BITS``, ``OCP_AT``, ``PAPER_D2_LISTING``, ``DISTRIBUTIONS``, ``short_name``,
``formats_table``, ``paper_table``, ``snr_db``, ``sample_draws``, ``snr_table``, ``snr_pivot``,
``uniform_int_gain_per_bit``, ``snr_prose_values``, ``uneven_rows_matrix``, ``row_snr_db``,
``granularity_table``, ``granularity_gain``, ``granularity_prose_values``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from ..formats import PAPER_FP_FORMATS, FloatFormat, parse_format
from ..quant import PerChannel, PerTensor, QuantSpec, fake_quantize

__all__ = ["BITS", "OCP_AT", "PAPER_D2_LISTING", "DISTRIBUTIONS", "short_name", "formats_table", "paper_table",
           "snr_db", "sample_draws", "snr_table", "snr_pivot", "uniform_int_gain_per_bit", "snr_prose_values",
           "uneven_rows_matrix", "row_snr_db", "granularity_table", "granularity_gain", "granularity_prose_values"]

# The bit widths the chapter compares, and the OCP (hardware) float format at the widths that have one.
BITS: list[int] = list(range(3, 9))
OCP_AT: dict[int, str] = {4: "fp4_e2m1fn", 6: "fp6_e2m3fn", 8: "fp8_e4m3fn"}

# Kumar et al. 2024, Appendix D.2: the floating-point format the paper lists for each bit width.
PAPER_D2_LISTING: dict[int, str] = {3: "E2M0", 4: "E3M0", 5: "E4M1", 6: "E3M2", 7: "E4M2", 8: "E5M2", 12: "E5M6"}
_PAPER_NOTES = {5: "E4M1 plus a sign is 6 bits; E3M1 is a true 5-bit format and keeps the E = 3 of the 4- and "
                   "6-bit entries, so 4 → 5 → 6 bits adds mantissa bits only",
                8: "OCP / IEEE-like (top exponent field Inf/NaN), as Micikevicius et al.; the others are finite-only"}

# The synthetic data of the SNR comparison: name -> (generator, n) -> float64 samples.
DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "uniform": lambda g, n: g.uniform(-1, 1, n),
    "Gaussian": lambda g, n: g.standard_normal(n),
    "Student-t, ν = 3": lambda g, n: g.standard_t(3, n),
}


def short_name(name: str) -> str:
    """A format's short name: ``"fp6_e3m2fn"`` -> ``"E3M2"``, ``"int4"`` -> ``"INT4"``.

    Raises:
        ValueError: from :func:`bitlaws.formats.parse_format` for an unknown name.
    """
    f = parse_format(name)
    return f"E{f.exp_bits}M{f.man_bits}" if isinstance(f, FloatFormat) else name.upper()


def _describe(name: str, role: str) -> dict:
    f = parse_format(name)
    if not isinstance(f, FloatFormat):
        q = 2 ** (f.bits - 1) - 1
        return {"name": name, "bits": f.bits, "E": "–", "M": "–", "bias": "–", "max": q, "min normal": "–",
                "min subnormal": "–", "values": 2 * q + 1, "range [binades]": f"{np.log2(q):.1f}",
                "used for": role}
    pos = f.values(positive=True)
    return {"name": name, "bits": f.bits, "E": f.exp_bits, "M": f.man_bits, "bias": f.bias,
            "max": f"{f.max:g}", "min normal": f"{f.min_normal:g}",
            "min subnormal": "–" if f.min_subnormal is None else f"{f.min_subnormal:g}",
            "values": len(f.values()), "range [binades]": f"{np.log2(f.max / pos[1]):.1f}", "used for": role}


def formats_table() -> pd.DataFrame:
    """The formats the book uses, one row each: the paper's FP formats (``PAPER_FP_FORMATS``), the
    three OCP formats of ``OCP_AT`` and INT4/INT8 (symmetric absmax codes).

    Returns:
        Columns ``name``, ``bits``, ``E``, ``M``, ``bias``, ``max``, ``min normal``, ``min subnormal``,
        ``values`` (distinct values; for integers the codes ±(2^(b−1)−1)), ``range [binades]``
        (log2 of the largest over the smallest positive value, as text with one decimal) and
        ``used for``; "–" where a column does not apply.
    """
    return pd.DataFrame(
        [_describe(n, f"paper's FP{b} (App. D.2)") for b, n in PAPER_FP_FORMATS.items()]
        + [_describe(n, "OCP format (hardware)") for n in OCP_AT.values()]
        + [_describe(f"int{b}", "INT, symmetric absmax (codes)") for b in (4, 8)]
    )


def paper_table() -> pd.DataFrame:
    """The paper's Appendix D.2 listing beside the format this package uses at each width.

    Returns:
        Columns ``bits``, ``paper (App. D.2)``, ``here`` (a ``PAPER_FP_FORMATS`` name) and ``note``.
    """
    return pd.DataFrame([{"bits": b, "paper (App. D.2)": PAPER_D2_LISTING[b], "here": PAPER_FP_FORMATS[b],
                          "note": _PAPER_NOTES.get(b, "")} for b in PAPER_FP_FORMATS])


def snr_db(xs: Sequence[torch.Tensor], fmt: str, granularity=PerTensor()) -> float:
    """Pooled signal-to-noise ratio of absmax fake quantization over a list of tensors.

    SNR = 10 log10(Σx² / Σ(x − x̂)²), the sums taken in float64 over every tensor of ``xs``.

    Args:
        xs: float32 tensors of any shape. fmt: a format name (``"int4"``, ``"fp6_e3m2fn"``).
        granularity: one scale per tensor (default) or e.g. ``PerChannel(0)``.

    Returns:
        The SNR in dB (inf when every value is on the grid).
    """
    sig = sum(float((x.double() ** 2).sum()) for x in xs)
    err = sum(float(((x - fake_quantize(x, QuantSpec(fmt, granularity))).double() ** 2).sum()) for x in xs)
    return 10 * np.log10(sig / err)


def sample_draws(n_samples: int = 2**16, n_draws: int = 8) -> dict[str, list[torch.Tensor]]:
    """``n_draws`` float32 tensors of ``n_samples`` values from each of ``DISTRIBUTIONS``, draw ``s``
    from ``numpy.random.default_rng(s)`` (so the same data on every machine)."""
    return {d: [torch.from_numpy(gen(np.random.default_rng(s), n_samples).astype(np.float32))
                for s in range(n_draws)] for d, gen in DISTRIBUTIONS.items()}


def snr_table(draws: dict[str, list[torch.Tensor]], bits: Sequence[int] = BITS) -> pd.DataFrame:
    """Per-tensor SNR of every family at every width on every distribution.

    Args:
        draws: :func:`sample_draws`. bits: the widths of the INT and paper-FP families (the OCP
            family is ``OCP_AT``).

    Returns:
        One row per (data, format): columns ``data``, ``family`` (``int``, ``fp`` = the paper's,
        ``ocp``), ``bits``, ``fmt`` and ``snr_db`` (dB, pooled over the draws).
    """
    formats = ([("int", b, f"int{b}") for b in bits] + [("fp", b, PAPER_FP_FORMATS[b]) for b in bits]
               + [("ocp", b, n) for b, n in OCP_AT.items()])
    return pd.DataFrame([{"data": d, "family": fam, "bits": b, "fmt": n, "snr_db": snr_db(draws[d], n)}
                         for d in draws for fam, b, n in formats])


def snr_pivot(snr: pd.DataFrame) -> pd.DataFrame:
    """:func:`snr_table` as a grid: rows (data, family), columns bits, values SNR in dB."""
    return snr.pivot_table(index=["data", "family"], columns="bits", values="snr_db")


def uniform_int_gain_per_bit(snr: pd.DataFrame) -> pd.Series:
    """The SNR each integer bit adds on uniform data, in dB, indexed by the larger width (4 = 3→4 bits)."""
    u = snr[(snr["data"] == "uniform") & (snr["family"] == "int")].set_index("bits")["snr_db"]
    return u.diff().dropna()


def snr_prose_values(snr: pd.DataFrame) -> dict[str, float | str]:
    """The numbers the chapter's SNR paragraph quotes, by glue name.

    Returns:
        ``snr_gain_per_bit`` (the gains of :func:`uniform_int_gain_per_bit`, "7.37, 6.63, ..."),
        ``snr_fp4_name`` (the paper's 4-bit format, e.g. "E3M0"), ``snr_t3_fp4`` and
        ``snr_t3_int4`` (dB on Student-t data at 4 bits), ``snr_gauss_fp6``, ``snr_gauss_fp7``,
        ``snr_gauss_fp8`` (dB of the paper's FP formats on Gaussian data).
    """
    wide = snr_pivot(snr)
    t3, g = wide.loc["Student-t, ν = 3"], wide.loc["Gaussian"]
    return {"snr_gain_per_bit": ", ".join(f"{v:.2f}" for v in uniform_int_gain_per_bit(snr)),
            "snr_fp4_name": short_name(PAPER_FP_FORMATS[4]),
            "snr_t3_fp4": float(t3.loc["fp", 4]), "snr_t3_int4": float(t3.loc["int", 4]),
            **{f"snr_gauss_fp{b}": float(g.loc["fp", b]) for b in (6, 7, 8)}}


def uneven_rows_matrix(rows: int = 256, cols: int = 1024, spread: float = 2.0,
                       seed: int = 1) -> tuple[torch.Tensor, np.ndarray]:
    """A Gaussian weight matrix whose row scales are exp(U(−spread, spread)).

    Returns:
        ``(W, row_scale)``: W float32 (rows × cols); row_scale float64 (rows × 1), from
        ``numpy.random.default_rng(seed)`` (the scales drawn first).
    """
    rng = np.random.default_rng(seed)
    row_scale = np.exp(rng.uniform(-spread, spread, (rows, 1)))
    W = torch.from_numpy((rng.standard_normal((rows, cols)) * row_scale).astype(np.float32))
    return W, row_scale


def row_snr_db(W: torch.Tensor, W_hat: torch.Tensor) -> float:
    """Row-averaged SNR in dB: each row's 10 log10(Σw² / Σ(w − ŵ)²), averaged over rows, so a row
    rounded to zero counts 0 dB however small it is. W, W_hat: (rows × cols) tensors of one shape."""
    return float((10 * torch.log10((W.double() ** 2).sum(1) / ((W - W_hat).double() ** 2).sum(1))).mean())


def granularity_table(W: torch.Tensor, bits: Sequence[int] = BITS) -> pd.DataFrame:
    """Row-averaged SNR of INT and the paper's FP formats, one scale per tensor or per output channel.

    Returns:
        Columns ``family`` (``int``, ``fp``), ``bits``, ``granularity`` (``per tensor``,
        ``per channel``) and ``row_snr_db`` (dB, :func:`row_snr_db`).
    """
    return pd.DataFrame([
        {"family": fam, "bits": b, "granularity": gname,
         "row_snr_db": row_snr_db(W, fake_quantize(W, QuantSpec(fmt, g)))}
        for b in bits
        for fam, fmt in (("int", f"int{b}"), ("fp", PAPER_FP_FORMATS[b]))
        for gname, g in (("per tensor", PerTensor()), ("per channel", PerChannel(0)))
    ])


def granularity_gain(gran: pd.DataFrame) -> dict[str, pd.Series]:
    """Per channel minus per tensor, in dB, by family (``int``, ``fp``), each indexed by bits."""
    gw = gran.pivot_table(index=["family", "granularity"], columns="bits", values="row_snr_db")
    return {fam: gw.loc[(fam, "per channel")] - gw.loc[(fam, "per tensor")] for fam in ("int", "fp")}


def granularity_prose_values(gran: pd.DataFrame, row_scale: np.ndarray) -> dict[str, float]:
    """The numbers the chapter's per-channel paragraph quotes, by glue name.

    Returns:
        ``gran_int_min``/``gran_int_max`` and ``gran_fp_min``/``gran_fp_max`` (the range of
        :func:`granularity_gain` over bits, dB), ``gran_fp_best_bits`` (the width of the largest FP
        gain) and ``gran_fp_best`` (that gain, dB), ``gran_row_spread`` (largest over smallest row scale).
    """
    gain = granularity_gain(gran)
    return {"gran_int_min": float(gain["int"].min()), "gran_int_max": float(gain["int"].max()),
            "gran_fp_min": float(gain["fp"].min()), "gran_fp_max": float(gain["fp"].max()),
            "gran_fp_best_bits": int(gain["fp"].idxmax()), "gran_fp_best": float(gain["fp"].max()),
            "gran_row_spread": float(row_scale.max() / row_scale.min())}
