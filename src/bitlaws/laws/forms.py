"""The functional forms of Kumar et al. 2024, "Scaling Laws for Precision", vectorised over numpy.

Every form takes arrays of the data (``n_params`` N, ``n_tokens`` D, bit widths) that broadcast
against each other and a mapping of named constants (the keys of ``PAPER_CONSTANTS``, Table 2),
and returns an array of the broadcast shape, in the data's loss units (nats per token; per byte
for our byte-level runs). Equations are the paper's (camera-ready, arXiv 2411.04330):
``chinchilla_loss`` (§2.2), ``delta_ptq`` (Eq. 2), ``precision_factor``, f_x(P) =
1 − e^(−P/γ_x + n_x) (Eq. 3 with Appendix K's offsets), ``n_eff`` and ``tied_precision_factor``
(Eq. 4), ``qat_loss`` (Eqs. 3–4), ``unified_delta_ptq`` (Eq. 9), ``unified_loss`` (Eq. 11) and
``TABLE1_FORMS`` (our readings of the alternatives of Appendix C, Table 1). By default a bit
width ≥ ``HIGH_PRECISION_BITS`` (16) is unquantized, f_x = 1; ``n_eff`` is NaN wherever a factor
f_x ≤ 0. The forms use ``exp``/``log`` only, so ``bitlaws.laws.fit`` can differentiate them by
complex steps. Why the offsets, and the other choices: book/methods.md, "Fitting the laws".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable

import numpy as np

__all__ = [
    "HIGH_PRECISION_BITS",
    "PAPER_CONSTANTS",
    "PAPER_SOURCE",
    "REFERENCE_FITS",
    "COMPONENTS",
    "chinchilla_loss",
    "delta_ptq",
    "precision_factor",
    "n_eff",
    "tied_precision_factor",
    "qat_loss",
    "unified_delta_ptq",
    "unified_loss",
    "TABLE1_FORMS",
    "Table1Form",
]

HIGH_PRECISION_BITS = 16
COMPONENTS = ("w", "a", "kv")

PAPER_SOURCE = (
    "Kumar et al. 2024, 'Scaling Laws for Precision' (ICLR 2025 camera-ready, arXiv 2411.04330), "
    "Appendix K, Table 2; subscripts lost in the text conversions are "
    "restored from context (γ_i read as γ_a, the unlabelled 0.5907 as γ_post)"
)
# Appendix K, Table 2. α = β is tied. `b_post` is Table 2's unexplained bias b (probably an offset
# inside the PTQ exponential); the forms here do not use it. C_w, C_a, C_kv (Eq. 9) are not
# reported anywhere in the paper.
PAPER_CONSTANTS: dict[str, float] = {
    "A": 4.299e3,
    "B": 1.806e4,
    "E": 2.7648,
    "alpha": 0.4965,
    "beta": 0.4965,
    "gamma_w": 2.6745,
    "n_w": 0.3037,
    "gamma_a": 2.2102,
    "n_a": 1.4072,
    "gamma_kv": 0.9578,
    "n_kv": 2.4185,
    "C_T": 0.0598,
    "gamma_D": 0.5068,
    "gamma_N": 0.3439,
    "gamma_post": 0.5907,
    "b_post": 1.1277,
}

# Other published Chinchilla fits, for comparison in the chapters (exponents transfer; A, B, E
# depend on the tokenizer and data). Standard errors where the source gives them.
REFERENCE_FITS: dict[str, dict[str, float | str]] = {
    "hoffmann": {
        "source": "Hoffmann et al. 2022, approach 3, unrounded values from the TeX source "
        "(as quoted by Besiroglu et al. 2024)",
        "A": 406.4, "B": 410.7, "E": 1.6934, "alpha": 0.3392, "beta": 0.2849,
    },
    "epoch": {
        "source": "Besiroglu et al. 2024 (Epoch AI), 'Chinchilla Scaling: A replication attempt', "
        "fit to 240 points digitised from Hoffmann et al.'s Fig. 4; SEs from 4,000 bootstraps",
        "A": 482.01, "B": 2085.43, "E": 1.8172, "alpha": 0.3478, "beta": 0.3658,
        "A_se": 124.58, "B_se": 1293.23, "E_se": 0.03, "alpha_se": 0.02, "beta_se": 0.02,
    },
}


def _param(params: Mapping[str, object], name: str, default: object = None):
    """``params[name]``, or ``default`` if given; a clear KeyError otherwise."""
    if name in params:
        return params[name]
    if default is not None:
        return default
    raise KeyError(f"the form needs the constant {name!r}; got {sorted(params)}")


def _power(x, exponent):
    """x**exponent as exp(exponent·log x), which is complex-step safe in ``exponent``."""
    return np.exp(exponent * np.log(x))


def _asarray(x):
    """x as an array of floats (complex arrays, from complex-step derivatives, stay complex)."""
    a = np.asarray(x)
    return a if a.dtype.kind in "fc" else a.astype(float)


def chinchilla_loss(n_params, n_tokens, params: Mapping[str, float]) -> np.ndarray:
    """Chinchilla's loss, L(N, D) = A·N^(−α) + B·D^(−β) + E (Hoffmann et al. 2022; §2.2 of the paper).

    Args:
        n_params: (...) float — N, non-embedding parameters, > 0.
        n_tokens: (...) float — D, training tokens, > 0; broadcasts with ``n_params``.
        params: ``A``, ``B``, ``E``, ``alpha`` and optionally ``beta`` (absent: β = α, the
            paper's tied fit, Appendix K).

    Returns:
        (broadcast shape) the loss, in the units of E (nats per token).

    Raises:
        KeyError: a constant is missing.
    """
    alpha = _param(params, "alpha")
    beta = params.get("beta", alpha)
    n, d = _asarray(n_params), _asarray(n_tokens)
    return (_param(params, "A") * _power(n, -alpha) + _param(params, "B") * _power(d, -beta)
            + _param(params, "E"))


def delta_ptq(n_params, n_tokens, bits_post, params: Mapping[str, float]) -> np.ndarray:
    """Loss added by post-training quantization of a high-precision model (Eq. 2, "Finding 1").

    δ_PTQ = C_T · D^γ_D / N^γ_N · exp(−P_post/γ_post).

    Args:
        n_params: (...) float — N, > 0.
        n_tokens: (...) float — D, > 0.
        bits_post: (...) float — P_post, the weights' post-training bit width.
        params: ``C_T``, ``gamma_D``, ``gamma_N``, ``gamma_post`` (all > 0 in the paper).

    Returns:
        (broadcast shape) δ_PTQ in the loss's units; always > 0 for positive constants.

    Raises:
        KeyError: a constant is missing.
    """
    n, d, p = _asarray(n_params), _asarray(n_tokens), _asarray(bits_post)
    return (_param(params, "C_T") * np.exp(_param(params, "gamma_D") * np.log(d)
                                           - _param(params, "gamma_N") * np.log(n)
                                           - p / _param(params, "gamma_post")))


def _is_high(bits) -> np.ndarray:
    return np.asarray(bits, dtype=float) >= HIGH_PRECISION_BITS


def precision_factor(bits, gamma, offset=0.0, cutoff: bool = True) -> np.ndarray:
    """f_x(P) = 1 − exp(−P/γ_x + n_x): N_eff/N when only part x is trained at P bits.

    Eq. 3 of the paper (weights; Eq. 4 for activations and KV cache), with the offset n_x of
    Appendix K, Table 2 (read as a shift of the curve to the right by n_x·γ_x bits).

    Args:
        bits: (...) float — P, the training bit width of the part; ≥ 16 means unquantized.
        gamma: γ_x [bits], > 0 (float or array broadcasting with ``bits``).
        offset: n_x, dimensionless (0 gives the main text's form).
        cutoff: True (for data): P ≥ 16 means unquantized, f = 1. False: the formula at every P
            (for the compute-optimal analysis, where P is continuous; f(16) ≈ 0.997 for weights).

    Returns:
        (broadcast shape) f_x(P); may be ≤ 0 at very low P with a positive offset.
    """
    p = _asarray(bits)
    high = _is_high(p) if cutoff else np.zeros(p.shape, dtype=bool)
    p_fin = np.where(high, 0.0, p)
    f = 1.0 - np.exp(-p_fin / gamma + offset)
    return np.where(high, 1.0, f) if np.any(high) else f


def n_eff(n_params, bits_w, bits_a, bits_kv, params: Mapping[str, float], cutoff: bool = True) -> np.ndarray:
    """Effective parameter count, N_eff = N·f_w(P_w)·f_a(P_a)·f_kv(P_kv) (Eq. 4, "Finding 2").

    Args:
        n_params: (...) float — N, > 0.
        bits_w, bits_a, bits_kv: (...) float — training bit widths of weights, activations
            (linear inputs) and KV cache; ≥ 16 means unquantized.
        params: ``gamma_w``, ``gamma_a``, ``gamma_kv`` and the offsets ``n_w``, ``n_a``, ``n_kv``
            (absent offsets are 0). A γ is needed only where its part is quantized somewhere.
        cutoff: as for ``precision_factor`` (True: P ≥ 16 is unquantized).

    Returns:
        (broadcast shape) N_eff, in parameters; NaN wherever any factor f_x ≤ 0 (the form is
        undefined there: with Table 2's offsets, at or below n_x·γ_x ≈ 3.1 bits for activations, 2.3 for the KV cache).

    Raises:
        KeyError: a γ is missing for a part that is quantized in the data.
    """
    out = _asarray(n_params)
    undefined = np.zeros(np.shape(out), dtype=bool)
    for x, bits in zip(COMPONENTS, (bits_w, bits_a, bits_kv)):
        if cutoff and np.all(_is_high(bits)):
            continue
        f = precision_factor(bits, _param(params, f"gamma_{x}"), params.get(f"n_{x}", 0.0), cutoff)
        undefined = undefined | (np.real(f) <= 0)  # two negative factors must not multiply into a positive N_eff
        out = out * f
    return np.where(undefined, np.nan, out) if np.any(undefined) else out


def tied_precision_factor(bits, params: Mapping[str, float], offsets: bool = True,
                          cutoff: bool = False) -> np.ndarray:
    """g(P) = N_eff/N with weights, activations and KV cache all trained at P bits (Eq. 4, §4.3).

    A function of a continuous P for the compute-optimal analysis: by default the formula holds
    at every P (g(16) ≈ 0.994 with Table 2), with no cutoff at 16 bits.

    Args:
        bits: (...) float — the shared training precision P.
        params: ``gamma_w``, ``gamma_a``, ``gamma_kv`` and offsets ``n_w``, ``n_a``, ``n_kv``.
        offsets: False drops the offsets (the main text's form), for comparison.
        cutoff: True treats P ≥ 16 as unquantized (g = 1), as the data functions do.

    Returns:
        (...) g(P) = Π_x (1 − e^(−P/γ_x + n_x)).
    """
    use = params if offsets else {k: v for k, v in params.items() if not k.startswith("n_")}
    return n_eff(1.0, bits, bits, bits, use, cutoff=cutoff)


def qat_loss(n_params, n_tokens, bits_w, bits_a, bits_kv, params: Mapping[str, float],
             cutoff: bool = True) -> np.ndarray:
    """Loss of a model trained with weights, activations and KV cache in low precision (Eqs. 3–4).

    L = A·N_eff^(−α) + B·D^(−β) + E with N_eff from ``n_eff``.

    Args:
        n_params, n_tokens: (...) float — N and D, > 0.
        bits_w, bits_a, bits_kv: (...) float — training bit widths (≥ 16: unquantized).
        params: the Chinchilla constants (``A``, ``B``, ``E``, ``alpha``, optional ``beta``) and
            those of ``n_eff``.
        cutoff: as for ``precision_factor`` (True: P ≥ 16 is unquantized).

    Returns:
        (broadcast shape) the loss; NaN where N_eff ≤ 0.
    """
    with np.errstate(invalid="ignore"):
        return chinchilla_loss(n_eff(n_params, bits_w, bits_a, bits_kv, params, cutoff), n_tokens, params)


def _robustness_bracket(bits_train, bits_post, c):
    """1 − exp(−C_x·(P_x − P_post)) of Eq. 9; 1 for an unquantized part, 0 where P_x ≤ P_post."""
    high = _is_high(bits_train)
    gap = _asarray(bits_train) - _asarray(bits_post)
    gap = np.where(high | (gap <= 0), 0.0, gap)
    bracket = 1.0 - np.exp(-c * gap)
    return np.where(high, 1.0, bracket)


def unified_delta_ptq(n_params, n_tokens, bits_w, bits_a, bits_kv, bits_post,
                      params: Mapping[str, float]) -> np.ndarray:
    """δ_PTQ of a model trained in low precision, then quantized post-training (Eq. 9, "Finding 4").

    δ_PTQ = C_T·e^(−P_post/γ_post)·D^γ_D / N_eff^γ_N · Π_x [1 − e^(−C_x·(P_x − P_post))].

    The paper assumes P_x > P_post and sets δ ≡ 0 at P_x = P_post; we set a part's bracket to 0
    wherever P_x ≤ P_post (our choice, documented). An unquantized part (P_x ≥ 16) has bracket 1,
    so for a model trained in high precision this is Eq. 2.

    Args:
        n_params, n_tokens: (...) float — N and D, > 0.
        bits_w, bits_a, bits_kv: (...) float — training bit widths.
        bits_post: (...) float — P_post.
        params: ``C_T``, ``gamma_D``, ``gamma_N``, ``gamma_post``, the ``n_eff`` constants and
            ``C_w``, ``C_a``, ``C_kv`` (a C_x is needed only where its part is quantized).

    Returns:
        (broadcast shape) δ_PTQ ≥ 0 for positive constants.

    Raises:
        KeyError: a constant is missing.
    """
    neff = n_eff(n_params, bits_w, bits_a, bits_kv, params)
    with np.errstate(invalid="ignore"):
        out = delta_ptq(neff, n_tokens, bits_post, params)
    for x, bits in zip(COMPONENTS, (bits_w, bits_a, bits_kv)):
        if np.all(_is_high(bits)):
            continue
        out = out * _robustness_bracket(bits, bits_post, _param(params, f"C_{x}"))
    return out


def unified_loss(n_params, n_tokens, bits_w, bits_a, bits_kv, bits_post,
                 params: Mapping[str, float]) -> np.ndarray:
    """The unified law, L = A·N_eff^(−α) + B·D^(−β) + E + δ_PTQ (Eq. 11, i.e. Eq. 1).

    Args:
        as ``unified_delta_ptq``; ``bits_post`` ≥ 16 means no post-training quantization
        (δ_PTQ = 0).

    Returns:
        (broadcast shape) the loss after post-training quantization.
    """
    loss = qat_loss(n_params, n_tokens, bits_w, bits_a, bits_kv, params)
    no_ptq = _is_high(bits_post)
    post = np.where(no_ptq, 0.0, bits_post)
    delta = unified_delta_ptq(n_params, n_tokens, bits_w, bits_a, bits_kv, post, params)
    return loss + np.where(no_ptq, 0.0, delta)


# --- Table 1 (Appendix C): alternatives for L(N, D, P_w) -------------------------------------------
# The paper names the forms but does not print them; these are our readings (see each docstring).
# All refit A, B, E, α, β jointly with the precision constants, as the paper's remark that power
# laws "cause the fitted constants A, B to blow up" implies.

def _f(bits, params, gamma_key, offset_key):
    return precision_factor(bits, _param(params, gamma_key), params.get(offset_key, 0.0))


def _table1_n_eff(n, d, p, params):
    """N_eff (the paper's choice): A·[N·f(P_w)]^(−α) + B·D^(−β) + E, f = 1 − e^(−P/γ_w + n_w)."""
    return chinchilla_loss(_asarray(n) * _f(p, params, "gamma_w", "n_w"), d, params)


def _table1_additive_power(n, d, p, params):
    """Additive/independent power law: A·N^(−α) + B·D^(−β) + E + c_p·P_w^(−α_p)."""
    p = _asarray(p)
    high = _is_high(p)
    term = _param(params, "c_p") * _power(np.where(high, 1.0, p), -_param(params, "alpha_p"))
    return chinchilla_loss(n, d, params) + np.where(high, 0.0, term)


def _table1_d_eff(n, d, p, params):
    """D_eff: A·N^(−α) + B·[D·f(P_w)]^(−β) + E, with f as the N_eff form's."""
    return chinchilla_loss(n, _asarray(d) * _f(p, params, "gamma_w", "n_w"), params)


def _table1_n_d_eff_tied(n, d, p, params):
    """N_eff and D_eff, tied: one γ_w, separate offsets n_w (on N) and n_d (on D)."""
    fn = _f(p, params, "gamma_w", "n_w")
    fd = _f(p, params, "gamma_w", "n_d")
    return chinchilla_loss(_asarray(n) * fn, _asarray(d) * fd, params)


def _table1_n_d_eff_untied(n, d, p, params):
    """N_eff and D_eff, not tied: (γ_w, n_w) on N and (γ_d, n_d) on D."""
    fn = _f(p, params, "gamma_w", "n_w")
    fd = _f(p, params, "gamma_d", "n_d")
    return chinchilla_loss(_asarray(n) * fn, _asarray(d) * fd, params)


def _table1_mult_power(n, d, p, params):
    """Multiplicative power law in N and P: A·N^(−α)·(1 + c_p·P_w^(−α_p)) + B·D^(−β) + E."""
    p = _asarray(p)
    high = _is_high(p)
    factor = 1.0 + np.where(high, 0.0, _param(params, "c_p")
                            * _power(np.where(high, 1.0, p), -_param(params, "alpha_p")))
    alpha = _param(params, "alpha")
    beta = params.get("beta", alpha)
    return (_param(params, "A") * _power(_asarray(n), -alpha) * factor
            + _param(params, "B") * _power(_asarray(d), -beta) + _param(params, "E"))


class Table1Form:
    """One row of the paper's Table 1: a form for L(N, D, P_w) and what the paper found.

    Attributes:
        name: key in ``TABLE1_FORMS``.
        label: the paper's row label.
        loss: ``loss(n_params, n_tokens, bits_w, params)`` → (broadcast shape) loss.
        precision_params: names of the precision constants we fit (our reading of the form).
        paper_val_r2: the paper's held-out R².
        paper_n_params: the paper's "number of fitted parameters" (its count; ours may differ).
    """

    def __init__(self, name: str, label: str, loss: Callable, precision_params: tuple[str, ...],
                 paper_val_r2: float, paper_n_params: int):
        self.name, self.label, self.loss = name, label, loss
        self.precision_params = precision_params
        self.paper_val_r2, self.paper_n_params = paper_val_r2, paper_n_params

    def __repr__(self) -> str:
        return f"Table1Form({self.name!r}, precision_params={self.precision_params})"


TABLE1_FORMS: dict[str, Table1Form] = {
    f.name: f
    for f in (
        Table1Form("n_eff", "N_eff", _table1_n_eff, ("gamma_w", "n_w"), 0.82, 3),
        Table1Form("additive_power", "Additive/independent power law", _table1_additive_power,
                   ("c_p", "alpha_p"), 0.71, 2),
        Table1Form("d_eff", "D_eff", _table1_d_eff, ("gamma_w", "n_w"), 0.74, 3),
        Table1Form("n_d_eff_tied", "N_eff and D_eff (tied)", _table1_n_d_eff_tied,
                   ("gamma_w", "n_w", "n_d"), 0.79, 3),
        Table1Form("n_d_eff_untied", "N_eff and D_eff (not tied)", _table1_n_d_eff_untied,
                   ("gamma_w", "n_w", "gamma_d", "n_d"), 0.84, 4),
        Table1Form("mult_power", "Multiplicative power law, N, P", _table1_mult_power,
                   ("c_p", "alpha_p"), 0.75, 2),
    )
}
