"""One figure style for the whole book, and one colour and marker per method.

Every chapter calls ``apply_style()`` once, takes a method's colour from ``COLORS`` and its
marker from ``MARKERS`` (so RTN, GPTQ, QUIK, ... look the same in every figure), colours a
post-training bit width with ``bits_color`` and labels its axes with ``label``, whose units follow
the corpus's tokenizer (``use_units``: bytes for the byte-level default, tokens for a BPE). Figures
carry no titles: the caption in the book is the title.

Public names: ``COLORS``, ``MARKERS``, ``BITS_RANGE``, ``apply_style``, ``bits_color``, ``label``,
``log_axis``, ``size_color``, ``human``, ``use_units``, ``token_unit``.
"""

from __future__ import annotations

import matplotlib as mpl
from matplotlib.colors import to_hex

__all__ = ["COLORS", "MARKERS", "BITS_RANGE", "apply_style", "bits_color", "label", "log_axis", "size_color", "human",
           "use_units", "token_unit"]

# Okabe & Ito's colour-blind-safe palette, plus two darker tones for the model parts so that
# they never share a colour with a method that may appear beside them.
COLORS: dict[str, str] = {
    # post-training methods (the `ptq_method` column; `none` is the unquantized model)
    "none": "#000000",
    "rtn": "#E69F00",
    "gptq": "#0072B2",
    "quik": "#009E73",
    "smoothquant": "#CC79A7",
    # model parts quantized during training, and all three at once
    "w": "#56B4E9",
    "a": "#D55E00",
    "kv": "#882255",
    "tied": "#332288",
}

MARKERS: dict[str, str] = {
    "none": "o",
    "rtn": "s",
    "gptq": "^",
    "quik": "D",
    "smoothquant": "v",
    "w": "o",
    "a": "s",
    "kv": "^",
    "tied": "D",
}

# The post-training bit widths that `bits_color` spans, inclusive.
BITS_RANGE = (2, 8)
# Viridis without its pale yellow end, which is hard to see on white.
_BITS_CMAP = "viridis"
_BITS_CMAP_SPAN = (0.0, 0.85)

# {tok}/{toks}: the corpus's token, singular/plural ("byte"/"bytes" byte-level, "token"/"tokens" BPE)
_LABELS: dict[str, str] = {
    "n_tokens": "Training tokens $D$ [{toks}]",
    "n_params": "Non-embedding parameters $N$",
    "n_eff_ratio": r"$N_{\mathrm{eff}}/N$",
    "tokens_per_param": "Tokens per parameter $D/N$",
    "delta_ptq": r"$\delta_{\mathrm{PTQ}}$ [nats/{tok}]",
    "loss_val": "Validation loss [nats/{tok}]",
    "loss_train": "Training loss [nats/{tok}]",
    "bpb_val": "Validation loss [bits/byte]",
    "ppl": "Perplexity [per {tok}]",
    "flops": "Compute $C$ [FLOPs]",
    "bits_post": r"$P_{\mathrm{post}}$ [bits]",
    "bits_w": r"$P_w$ [bits]",
    "bits_a": r"$P_a$ [bits]",
    "bits_kv": r"$P_{\mathrm{kv}}$ [bits]",
    "n_outliers": "Outlier features [count]",
    "latency_ms": "Latency [ms]",
    "speedup": "Speed-up over fp16 [×]",
}


def apply_style() -> None:
    """Set the book's matplotlib style for the rest of the session.

    Readable font sizes at the book's column width, a light grid, no top or right spines and
    constrained layout. Series that stand for a method or a model part take their colour from
    ``COLORS``; matplotlib's default cycle is left for everything else.
    """
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
            "figure.dpi": 110,
            "figure.constrained_layout.use": True,
            "savefig.dpi": 200,
            "savefig.bbox": "tight",
            "font.size": 11,
            "axes.labelsize": 11,
            "axes.titlesize": 11,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            "axes.grid": True,
            "axes.grid.which": "major",
            "grid.alpha": 0.5,
            "grid.linewidth": 0.6,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "lines.linewidth": 1.8,
            "lines.markersize": 6,
        }
    )


def log_axis(ax, which: str = "x") -> None:
    """Put `ax`'s `which` axis ("x", "y" or "both") on a log scale with labels on the decades only.

    Matplotlib labels minor ticks of a log axis that spans less than a decade or two, and those
    labels collide; the book keeps the minor ticks and drops their labels.
    """
    from matplotlib.ticker import NullFormatter

    for name in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if name == "x" else ax.yaxis
        (ax.set_xscale if name == "x" else ax.set_yscale)("log")
        axis.set_minor_formatter(NullFormatter())


def bits_color(bits: float) -> str:
    """The colour of a post-training bit width on the book's sequential colormap.

    Args:
        bits: P_post in bits, within ``BITS_RANGE``; fewer bits are darker.

    Returns:
        A hex colour string such as ``"#440154"``.

    Raises:
        ValueError: if ``bits`` lies outside ``BITS_RANGE`` (draw an unquantized model with
            ``COLORS["none"]``).
    """
    low, high = BITS_RANGE
    if not low <= bits <= high:
        raise ValueError(f"bits must lie in [{low}, {high}]; got {bits}")
    start, stop = _BITS_CMAP_SPAN
    position = start + (stop - start) * (bits - low) / (high - low)
    return to_hex(mpl.colormaps[_BITS_CMAP](position))


_UNITS = {"byte": "bytes", "token": "tokens"}
_unit = ["byte"]  # the token of the corpus the figures are about (use_units)


def use_units(unit_or_corpus: str) -> str:
    """Make :func:`label` speak of the tokens of a corpus from now on.

    Args:
        unit_or_corpus: ``"byte"`` or ``"token"``, or a corpus name (``shakespeare`` is byte-level,
            so ``"byte"``; any BPE corpus, e.g. the ``gpu`` profile's ``fineweb-edu``, ``"token"``).

    Returns:
        The unit now in use, ``"byte"`` or ``"token"``.

    Raises:
        ValueError: neither a unit nor a corpus name (the message lists both).
    """
    from ...corpus import corpus_vocab_size, is_byte_level

    if unit_or_corpus not in _UNITS:
        try:
            corpus_vocab_size(unit_or_corpus)  # raises for an unknown name
        except ValueError as exc:
            raise ValueError(f"use_units: {unit_or_corpus!r} is neither a unit ({', '.join(_UNITS)}) "
                             f"nor a corpus ({exc})") from None
        unit_or_corpus = "byte" if is_byte_level(unit_or_corpus) else "token"
    _unit[0] = unit_or_corpus
    return _unit[0]


def token_unit(plural: bool = False) -> str:
    """The token unit :func:`label` uses now: ``"byte"``/``"bytes"`` or ``"token"``/``"tokens"``."""
    return _UNITS[_unit[0]] if plural else _unit[0]


def label(name: str) -> str:
    """The axis label of a results column, with its symbol and unit.

    Args:
        name: a column name such as ``"n_tokens"`` or ``"delta_ptq"``.

    Returns:
        The label, in matplotlib mathtext, e.g. ``"Training tokens $D$ [bytes]"`` for the
        byte-level corpus, ``"Training tokens $D$ [tokens]"`` after ``use_units("token")``.

    Raises:
        KeyError: if the column has no label yet; the message lists the known ones.
    """
    try:
        text = _LABELS[name]
    except KeyError:
        raise KeyError(f"no axis label for {name!r}; known: {', '.join(_LABELS)}") from None
    return text.replace("{tok}", token_unit()).replace("{toks}", token_unit(plural=True))


def size_color(i: int, n: int) -> str:
    """The colour of the `i`-th of `n` model sizes (smallest first) on a sequential colormap.

    Raises:
        ValueError: if ``i`` is not in ``[0, n)``.
    """
    if not 0 <= i < n:
        raise ValueError(f"size index must lie in [0, {n}); got {i}")
    return to_hex(mpl.colormaps["plasma"](0.82 * i / max(1, n - 1)))  # from deep blue: the dark end stays apart


def human(n: float) -> str:
    """A count in short form: 26,784 → ``27K``, 1,205,888 → ``1.2M``."""
    n = float(n)
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.2g}{suffix}" if v < 10 else f"{v:.0f}{suffix}"
    return f"{n:g}"


# ---------------------------------------------------------------------------------------------
