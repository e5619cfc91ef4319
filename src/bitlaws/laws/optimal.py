"""Compute-optimal analysis of the precision laws (Kumar et al. 2024, §4.3, Appendix E).

Cost model: C = (6/16)·N·D·P FLOP-equivalents (§4.3; at P = 16 it is Chinchilla's 6·N·D). The
loss is the tied-precision law L = A·[N·g(P)]^(−α) + B·D^(−β) + E, with g(P) = N_eff/N =
Π_x(1 − e^(−P/γ_x + n_x)) (Eq. 4 and Appendix K's offsets; ``bitlaws.laws.forms``). Entry points:
``optimal_precision`` (P* = argmax g(P)/P, Eqs. 7, 28), ``optimal_n_d`` (N*, D* at fixed P;
Eqs. 6, 14–17), ``optimal_precision_fixed_n`` (Eqs. 18–23), ``critical_data_size`` (D_crit,
Eq. 13), ``inference_optimum`` (Appendix E.3, Fig. 9) and ``compute_matched_losses`` (Fig. 6).
``tests/test_laws_optimal.py`` checks each closed form against a brute-force numerical
optimisation (the ``brute_force_*`` functions); the derivations are in book/methods.md, "Fitting
the laws", and ``book/papers/precision-scaling-laws.md`` §1.4.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from . import forms

__all__ = [
    "COST_FACTOR",
    "P_STAR_X",
    "LLAMA3_MARKERS",
    "compute_cost",
    "precision_lower_bound",
    "optimal_precision",
    "optimal_precision_single_gamma",
    "optimal_n_d",
    "loss_at_compute",
    "brute_force_optimum",
    "optimal_precision_fixed_n",
    "brute_force_fixed_n",
    "fixed_n_asymptotic_slope",
    "critical_data_size",
    "brute_force_critical_data_size",
    "inference_optimum",
    "brute_force_inference_optimum",
    "compute_matched_losses",
]

COST_FACTOR = 6.0 / 16.0


def _solve_x() -> float:
    return brentq(lambda x: math.expm1(x) - 3.0 * x, 1.0, 3.0, xtol=1e-15)


# The root of e^x − 1 = 3x (x > 0): P* = P_STAR_X·γ for one γ, no offsets, tied (§4.3.2).
P_STAR_X = _solve_x()

# Llama-3 (Dubey et al. 2024): ~15T training tokens for the 8B, 70B and 405B models; the markers of
# Kumar et al.'s Fig. 6 (right). Parameter counts are totals, as the paper's figure uses them.
LLAMA3_MARKERS: dict[str, tuple[float, float]] = {
    "Llama-3 8B": (8.0e9, 15.0e12),
    "Llama-3 70B": (70.0e9, 15.0e12),
    "Llama-3 405B": (405.0e9, 15.0e12),
}


def compute_cost(n_params, n_tokens, bits) -> np.ndarray:
    """Training cost C = (6/16)·N·D·P [FLOP-equivalents] (§4.3).

    Args:
        n_params: (...) N; n_tokens: (...) D [tokens]; bits: (...) P, the tied training precision.

    Returns:
        (broadcast shape) C; equals 6·N·D at P = 16.
    """
    return COST_FACTOR * np.asarray(n_params, dtype=float) * np.asarray(n_tokens, dtype=float) \
        * np.asarray(bits, dtype=float)


def _g(bits, params, offsets=True):
    return forms.tied_precision_factor(bits, params, offsets=offsets)


def precision_lower_bound(params: Mapping[str, float], offsets: bool = True) -> float:
    """The smallest P at which g(P) > 0: max_x n_x·γ_x (0 without offsets) [bits].

    Below it the law gives N_eff ≤ 0 (the paper excludes runs that diverged at P_a, P_kv = 3).
    """
    if not offsets:
        return 0.0
    return max(0.0, *(params.get(f"n_{x}", 0.0) * params[f"gamma_{x}"] for x in forms.COMPONENTS))


def optimal_precision(params: Mapping[str, float], offsets: bool = True) -> float:
    """Compute-optimal tied training precision P* = argmax_P g(P)/P (Eqs. 7, 28; "Finding 3").

    The stationarity condition d/dP log(g/P) = Σ_x e^(−P/γ_x+n_x)/(γ_x·f_x(P)) − 1/P = 0 is
    solved by Brent's method; it does not involve C, A, B, E, α or β.

    Args:
        params: ``gamma_w``, ``gamma_a``, ``gamma_kv`` and offsets ``n_w``, ``n_a``, ``n_kv``.
        offsets: False drops the offsets (the main text's form).

    Returns:
        P* [bits] (7.0 from the paper's Table 2; 3.5 without the offsets).

    Raises:
        ValueError: no stationary point between the lower bound and 1000 bits.
    """
    lo = precision_lower_bound(params, offsets) + 1e-9

    def dlog(p: float) -> float:
        total = 0.0
        for x in forms.COMPONENTS:
            gam, n = params[f"gamma_{x}"], (params.get(f"n_{x}", 0.0) if offsets else 0.0)
            e = math.exp(-p / gam + n)
            total += e / (gam * (1.0 - e))
        return total - 1.0 / p

    # dlog > 0 just above the lower bound (a factor f_x → 0+) and < 0 at large P.
    p = max(lo, 1e-6) * (1 + 1e-9) + 1e-9
    if not dlog(p) > 0 > dlog(1000.0):
        raise ValueError("g(P)/P has no interior maximum between the lower bound and 1000 bits")
    return float(brentq(dlog, p, 1000.0, xtol=1e-12))


def optimal_precision_single_gamma(gamma: float) -> float:
    """P* for one shared γ and no offsets: P_STAR_X·γ, where e^x − 1 = 3x (§4.3.2, derived).

    Args:
        gamma: γ̄ [bits], > 0.

    Returns:
        P* [bits] ≈ 1.904·γ.

    Raises:
        ValueError: γ ≤ 0.
    """
    if not gamma > 0:
        raise ValueError(f"gamma must be > 0; got {gamma}")
    return P_STAR_X * gamma


def _alpha_beta(params):
    alpha = params["alpha"]
    return alpha, params.get("beta", alpha)


def optimal_n_d(bits, compute, params: Mapping[str, float], offsets: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """N* and D* at a fixed tied precision P and compute C (Eqs. 6, 14–17, re-derived).

    Minimising A·g^(−α)·N^(−α) + B·(k·N·P/C)^β over N (D = C/(k·N·P)) gives
    N* = [α·A·g(P)^(−α)·C^β / (β·B·(k·P)^β)]^(1/(α+β)) and D* = C/(k·N*·P), k = 6/16. So
    N* ∝ g^(−α/(α+β))·P^(−β/(α+β)) rises as P falls, and D* ∝ (g/P)^(α/(α+β)) peaks at P*.

    Args:
        bits: (...) P [bits], above ``precision_lower_bound``.
        compute: (...) C [FLOP-equivalents].
        params: Chinchilla constants (``A``, ``B``, ``alpha``, optional ``beta``) and γ's, offsets.
        offsets: False drops the offsets.

    Returns:
        (N*, D*), arrays of the broadcast shape.
    """
    alpha, beta = _alpha_beta(params)
    p = np.asarray(bits, dtype=float)
    c = np.asarray(compute, dtype=float)
    g = _g(p, params, offsets)
    n_star = (alpha * params["A"] * g ** (-alpha) * c**beta / (beta * params["B"] * (COST_FACTOR * p) ** beta)) \
        ** (1.0 / (alpha + beta))
    return n_star, c / (COST_FACTOR * n_star * p)


def loss_at_compute(n_params, bits, compute, params: Mapping[str, float], offsets: bool = True) -> np.ndarray:
    """The tied-precision loss of a model of N parameters at precision P trained on all of C.

    D = C/((6/16)·N·P); L = A·[N·g(P)]^(−α) + B·D^(−β) + E.

    Returns:
        (broadcast shape) loss; NaN where g(P) ≤ 0.
    """
    p = np.asarray(bits, dtype=float)
    n = np.asarray(n_params, dtype=float)
    d = np.asarray(compute, dtype=float) / (COST_FACTOR * n * p)
    with np.errstate(invalid="ignore"):
        return forms.chinchilla_loss(n * _g(p, params, offsets), d, params)


def brute_force_optimum(compute: float, params: Mapping[str, float], offsets: bool = True,
                        bits_range: tuple[float, float] = (1.0, 32.0)) -> dict[str, float]:
    """Numerical minimum of the loss over (N, P) at fixed C (D from the constraint); no closed form used.

    Nested bounded scalar minimisations: over log N for each P, then over P.

    Returns:
        ``{"bits", "n_params", "n_tokens", "loss"}`` at the optimum.
    """
    lo = max(bits_range[0], precision_lower_bound(params, offsets) + 1e-3)

    def best_n(p: float) -> tuple[float, float]:
        r = minimize_scalar(lambda ln: float(loss_at_compute(math.exp(ln), p, compute, params, offsets)),
                            bounds=(0.0, math.log(compute)), method="bounded", options={"xatol": 1e-10})
        return math.exp(r.x), float(r.fun)

    r = minimize_scalar(lambda p: best_n(p)[1], bounds=(lo, bits_range[1]), method="bounded",
                        options={"xatol": 1e-8})
    n, loss = best_n(r.x)
    return {"bits": float(r.x), "n_params": n, "n_tokens": compute / (COST_FACTOR * n * r.x), "loss": loss}


def _dlog_g(p: float, params, offsets=True) -> float:
    """g′(P)/g(P)."""
    total = 0.0
    for x in forms.COMPONENTS:
        gam, n = params[f"gamma_{x}"], (params.get(f"n_{x}", 0.0) if offsets else 0.0)
        e = math.exp(-p / gam + n)
        total += e / (gam * (1.0 - e))
    return total


def optimal_precision_fixed_n(n_params: float, n_tokens: float, params: Mapping[str, float],
                              offsets: bool = True) -> float:
    """Compute-optimal precision of a fixed-size model that ends up trained on D tokens (Eqs. 18–23).

    At fixed N and C = k·N·D·P, dL/dP = 0 reads α·A·N^(−α)·g^(−α)·(g′/g)·P = β·B·D^(−β), with
    D = C/(k·N·P) the data the optimum trains on (the paper's Eq. 22, with g in place of
    (1 − e^(−P/γ))³). Solved for P by Brent's method.

    Args:
        n_params: N; n_tokens: D [tokens] at the optimum.
        params: Chinchilla constants and γ's (offsets optional).
        offsets: False drops the offsets.

    Returns:
        P* [bits]; grows like log(D/N) (see ``fixed_n_asymptotic_slope``).

    Raises:
        ValueError: no root between the lower bound and min(1000, 700·max γ) bits (past 745·γ,
            e^(−P/γ) underflows in float64).
    """
    alpha, beta = _alpha_beta(params)
    lo = max(precision_lower_bound(params, offsets), 0.0) + 1e-9
    rhs = math.log(beta * params["B"]) - beta * math.log(n_tokens)

    def h(p: float) -> float:
        g = float(_g(p, params, offsets))
        return (math.log(alpha * params["A"]) - alpha * math.log(n_params) - alpha * math.log(g)
                + math.log(_dlog_g(p, params, offsets)) + math.log(p)) - rhs

    p = lo * (1 + 1e-6) + 1e-6
    # e^(−P/γ) underflows to 0 past P ≈ 745·γ, and d log g / dP with it: keep the bracket inside
    gamma_max = max(float(params[f"gamma_{x}"]) for x in forms.COMPONENTS if f"gamma_{x}" in params)
    hi = min(1000.0, 700.0 * gamma_max)
    if not (h(p) > 0 > h(hi)):
        raise ValueError(f"no optimal precision between {p:.3g} and {hi} bits for N = {n_params:g}, D = {n_tokens:g}")
    return float(brentq(h, p, hi, xtol=1e-12))


def brute_force_fixed_n(n_params: float, compute: float, params: Mapping[str, float], offsets: bool = True,
                        bits_range: tuple[float, float] = (1.0, 200.0)) -> dict[str, float]:
    """Numerical minimum of the loss over P at fixed N and C (D = C/(k·N·P)).

    Returns:
        ``{"bits", "n_tokens", "loss"}`` at the optimum.
    """
    lo = max(bits_range[0], precision_lower_bound(params, offsets) + 1e-3)
    r = minimize_scalar(lambda p: float(loss_at_compute(n_params, p, compute, params, offsets)),
                        bounds=(lo, bits_range[1]), method="bounded", options={"xatol": 1e-10})
    return {"bits": float(r.x), "n_tokens": compute / (COST_FACTOR * n_params * r.x), "loss": float(r.fun)}


def fixed_n_asymptotic_slope(params: Mapping[str, float]) -> float:
    """dP*/d ln D at fixed N as D → ∞: β·max_x γ_x (the paper's P* ≈ β·γ·ln C, Eq. 23).

    At large P, g′/g ≈ e^(−P/γ_max + n)/γ_max, so the first-order condition gives
    P/γ_max − ln P ≈ β·ln D + const; the slope tends to β·γ_max, approached like 1/(1 − γ_max/P).
    """
    _, beta = _alpha_beta(params)
    return beta * max(params[f"gamma_{x}"] for x in forms.COMPONENTS)


def critical_data_size(n_params, bits_post, params: Mapping[str, float]) -> np.ndarray:
    """D_crit (Appendix E.1, Eq. 13): past it, more data raise the post-PTQ loss.

    D_crit = [β·B·N^γ_N·e^(P_post/γ_post) / (γ_D·C_T)]^(1/(γ_D+β)) — where
    ∂/∂D [B·D^(−β) + δ_PTQ(N, D, P_post)] = 0. (The printed Eq. 12 drops the factor β; Eq. 13
    has it.)

    Args:
        n_params: (...) N; bits_post: (...) P_post.
        params: ``B``, ``alpha`` (or ``beta``), ``C_T``, ``gamma_D``, ``gamma_N``, ``gamma_post``.

    Returns:
        (broadcast shape) D_crit [tokens, in the units B was fitted in].
    """
    _, beta = _alpha_beta(params)
    n = np.asarray(n_params, dtype=float)
    p = np.asarray(bits_post, dtype=float)
    log_d = (math.log(beta * params["B"]) + params["gamma_N"] * np.log(n) + p / params["gamma_post"]
             - math.log(params["gamma_D"] * params["C_T"])) / (params["gamma_D"] + beta)
    return np.exp(log_d)


def brute_force_critical_data_size(n_params: float, bits_post: float, params: Mapping[str, float],
                                   log_d_range: tuple[float, float] = (0.0, 80.0)) -> float:
    """The D at which L(N, D) + δ_PTQ(N, D, P_post) is lowest, found numerically (no closed form)."""
    def post_loss(ld: float) -> float:
        d = math.exp(ld)
        return float(forms.chinchilla_loss(n_params, d, params) + forms.delta_ptq(n_params, d, bits_post, params))

    r = minimize_scalar(post_loss, bounds=log_d_range, method="bounded", options={"xatol": 1e-10})
    return math.exp(r.x)


def _inference_loss(n, d, p, params):
    return forms.chinchilla_loss(n, d, params) + forms.delta_ptq(n, d, p, params)


def inference_optimum(compute: float, params: Mapping[str, float],
                      bits_range: tuple[float, float] = (1.0, 32.0)) -> dict[str, float]:
    """The inference-cost model of Appendix E.3 (Fig. 9), solved with D = D_crit(N, P).

    Minimise A·N^(−α) + B·D^(−β) + E + C_T·D^γ_D·N^(−γ_N)·e^(−P/γ_post) subject to N·P = C
    (P = P_post, the serving precision; training cost ignored). For each P the best D is D_crit
    (Eq. 13), so only P is searched (bounded scalar minimisation).

    Args:
        compute: C = N·P [parameter-bits].
        params: Chinchilla and Eq. 2 constants.
        bits_range: the P searched.

    Returns:
        ``{"bits", "n_params", "n_tokens", "loss"}`` at the optimum.
    """
    def at(p: float) -> tuple[float, float, float]:
        n = compute / p
        d = float(critical_data_size(n, p, params))
        return n, d, float(_inference_loss(n, d, p, params))

    r = minimize_scalar(lambda p: at(p)[2], bounds=bits_range, method="bounded", options={"xatol": 1e-10})
    n, d, loss = at(r.x)
    return {"bits": float(r.x), "n_params": n, "n_tokens": d, "loss": loss}


def brute_force_inference_optimum(compute: float, params: Mapping[str, float],
                                  bits_range: tuple[float, float] = (1.0, 32.0)) -> dict[str, float]:
    """The inference-cost optimum by a dense grid over (P, log D), refined locally; no D_crit used."""
    ps = np.linspace(*bits_range, 621)
    lds = np.linspace(0.0, 80.0, 1601)
    P, LD = np.meshgrid(ps, lds, indexing="ij")
    N = compute / P
    L = _inference_loss(N, np.exp(LD), P, params)
    i, j = np.unravel_index(np.nanargmin(L), L.shape)
    from scipy.optimize import minimize

    res = minimize(lambda v: float(_inference_loss(compute / v[0], math.exp(v[1]), v[0], params)),
                   [ps[i], lds[j]], method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})
    p, ld = res.x
    return {"bits": float(p), "n_params": compute / p, "n_tokens": math.exp(ld), "loss": float(res.fun)}


def compute_matched_losses(bits, bits_params: float, n_tokens: float, params: Mapping[str, float],
                           offsets: bool = True) -> np.ndarray:
    """Predicted loss of a compute-matched suite: N·P held at ``bits_params``, D fixed (Fig. 1 right, Fig. 6).

    Args:
        bits: (k,) tied training precisions P.
        bits_params: N·P [parameter-bits] (e.g. 440M × 16 for the paper's suite).
        n_tokens: D (16B tokens in the paper's suite).
        params: Chinchilla constants and γ's, offsets.
        offsets: False drops the offsets.

    Returns:
        (k,) the loss of the model of N = bits_params/P parameters at each P.
    """
    p = np.asarray(bits, dtype=float)
    return forms.qat_loss(bits_params / p, n_tokens, p, p, p, params if offsets else
                          {k: v for k, v in params.items() if not k.startswith("n_")}, cutoff=False)
