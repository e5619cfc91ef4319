"""P5's mechanism: where the factorial's A4 × KV4 shortfall comes from (an exploratory pilot, no verdict).

P5 graded on the seeded factorial found the effects of 4-bit activations (A4) and a 4-bit KV cache (KV4)
compounding *less* than they add, all of it in the A4KV4 cells. One explanation, stated before the
ablation ran (``bitlaws.study.sweep.MECHANISM_VARIANTS``): V4 and A4 quantize the same signal — the
attention output P·V is o_proj's input, which A4 quantizes again — so the second rounding of an
already-coarse signal costs less than the first. It predicts (i) the shortfall with V4 alone and not
with K4 alone, and (ii) none without o_proj's input quantized. The ablation (experiment
``qat_mechanism``, weights 16-bit, at the factorial's cell and seeds) trains the variants beside the
factorial's own W16 runs of the same seed; :func:`mechanism_table` reads both as within-seed contrasts.

Every number is a within-seed contrast of final validation losses [nats/byte] with the factorial's
within-seed σ as its error (:func:`mechanism_table` gives the formula); at 3 seeds its power against the
factorial's shortfall (−0.0103) is 0.13, so the pilot resolves only effects ≳ 0.034: read the intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["CONTRASTS", "PREDICTIONS", "load_mechanism", "within_seed_sigma", "mechanism_losses", "mechanism_table", "w16_sigma", "ablation_sigma", "reading", "power", "minimum_effect"]

_HP = 16
_COLS = ["bits_w", "bits_a", "bits_kv", "seed", "ptq_method", "status", "loss_val", "train_variant"]


def load_mechanism(profile: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows the pilot reads, at P5's evaluation version (``power.P5_EVAL_VERSION``): the
    factorial's (``law_fits.load_p5_factorial``) and the ablation's (``qat_mechanism``); an empty
    frame with the columns :func:`mechanism_table` reads where the profile has none."""
    from .law_fits import load_p5_factorial
    from .power import P5_EVAL_VERSION
    from .store import load_runs

    fac = load_p5_factorial(profile)
    try:
        mech = load_runs(profile, experiment="qat_mechanism", eval_version=P5_EVAL_VERSION)
    except FileNotFoundError:
        mech = pd.DataFrame()
    return tuple(f if len(f) else pd.DataFrame(columns=_COLS) for f in (fac, mech))
# A configuration: (P_a, P_kv, kv_parts, a_skip), weights 16-bit. The factorial's W16 runs are
# kv_parts "kv" and a_skip "" (the paper's setting).
_BASE = (16, 16, "kv", "")
_A4 = (4, 16, "kv", "")
_KV4 = (16, 4, "kv", "")
_A4KV4 = (4, 4, "kv", "")
_K4, _V4 = (16, 4, "k", ""), (16, 4, "v", "")
_A4K4, _A4V4 = (4, 4, "k", ""), (4, 4, "v", "")
_A4O, _A4OKV4 = (4, 16, "kv", "o_proj"), (4, 4, "kv", "o_proj")


def _interaction(both, a, kv) -> dict:
    return {both: 1.0, a: -1.0, kv: -1.0, _BASE: 1.0}


def _minus(x: Mapping, y: Mapping) -> dict:
    out = dict(x)
    for k, c in y.items():
        out[k] = out.get(k, 0.0) - c
    return {k: c for k, c in out.items() if c != 0.0}


_I_KV = _interaction(_A4KV4, _A4, _KV4)
_I_K = _interaction(_A4K4, _A4, _K4)
_I_V = _interaction(_A4V4, _A4, _V4)
_I_KV_NO_O = _interaction(_A4OKV4, _A4O, _KV4)

# name -> (what it measures, coefficients over configurations). Main effects, then the interactions
# (a loss increase of both together minus the sum of each alone: < 0 compounds less than it adds),
# then the two differences the hypothesis is about.
CONTRASTS: dict[str, tuple[str, dict]] = {
    "K4": ("K alone at 4 bits (A16)", {_K4: 1.0, _BASE: -1.0}),
    "V4": ("V alone at 4 bits (A16)", {_V4: 1.0, _BASE: -1.0}),
    "KV4": ("K and V at 4 bits (A16; factorial)", {_KV4: 1.0, _BASE: -1.0}),
    "A4": ("A4 (KV16; factorial)", {_A4: 1.0, _BASE: -1.0}),
    "A4 not o_proj": ("A4 without o_proj's input (KV16)", {_A4O: 1.0, _BASE: -1.0}),
    "A4 x KV4": ("interaction A4 × KV4 (factorial)", _I_KV),
    "A4 x K4": ("interaction A4 × K4", _I_K),
    "A4 x V4": ("interaction A4 × V4", _I_V),
    "A4 not o_proj x KV4": ("interaction A4 without o_proj × KV4", _I_KV_NO_O),
    "(A4 x V4) - (A4 x K4)": ("prediction (i): < 0 if V carries the shortfall", _minus(_I_V, _I_K)),
    "(A4 x KV4) - (A4 not o_proj x KV4)": ("prediction (ii): < 0 if o_proj's input carries it",
                                           _minus(_I_KV, _I_KV_NO_O)),
    # added after the rows were read (a referee's reading): what leaving o_proj's input in 16 bits saves of A4
    "A4 - (A4 not o_proj)": ("A4's cost on o_proj's input (KV16; added after the rows were read)",
                             {_A4: 1.0, _A4O: -1.0}),
}


def within_seed_sigma(factorial: pd.DataFrame) -> tuple[float, int]:
    """The factorial's within-seed σ: the residual of the additive combination × seed model.

    Args:
        factorial: ``qat_factorial`` rows of one evaluation version, ``ptq_method`` none (columns
            ``bits_w``, ``bits_a``, ``bits_kv``, ``seed``, ``loss_val`` [nats/byte]); only seeds
            with every combination are used.

    Returns:
        (σ [nats/byte], degrees of freedom (C − 1)(S − 1)); (nan, 0) with fewer than 2 complete seeds.
    """
    r = factorial[factorial["status"] == "ok"]
    wide = r.pivot_table(index=["bits_w", "bits_a", "bits_kv"], columns="seed", values="loss_val", aggfunc="first")
    wide = wide.dropna(axis=1, how="any")
    c, s = wide.shape
    if s < 2 or c < 2:
        return math.nan, 0
    y = wide.to_numpy(float)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (c - 1) * (s - 1)
    return float(np.sqrt((resid ** 2).sum() / df)), int(df)


def mechanism_losses(factorial: pd.DataFrame, mechanism: pd.DataFrame) -> pd.DataFrame:
    """One loss per (configuration, seed): the factorial's W16 runs and the ablation's runs.

    Args:
        factorial: ``qat_factorial`` rows (one evaluation version, ``ptq_method`` none).
        mechanism: ``qat_mechanism`` rows of the same evaluation version (column ``train_variant``).

    Returns:
        Columns ``bits_a``, ``bits_kv``, ``kv_parts``, ``a_skip``, ``seed``, ``loss_val``; only rows with
        status ok and a finite loss.

    Raises:
        ValueError: a mechanism row whose ``train_variant`` cannot be read, or two rows of one
            configuration at one seed.
    """
    f = factorial[(factorial["bits_w"] == _HP) & (factorial["ptq_method"] == "none")]
    f = f.assign(kv_parts="kv", a_skip="")
    m = mechanism[mechanism["ptq_method"] == "none"].copy()

    def flags(v) -> tuple[str, str]:
        d = {"kv_parts": "kv", "a_skip": ""}
        for item in ("" if pd.isna(v) else str(v)).split(";"):
            if not item:
                continue
            k, sep, val = item.partition("=")
            if not sep or k not in d:
                raise ValueError(f"qat_mechanism: train_variant {v!r} has {item!r}; allowed: kv_parts=k|v|kv, "
                                 "a_skip=<linear kinds joined by +>")
            d[k] = val
        return d["kv_parts"], d["a_skip"]

    if len(m):
        parsed = m["train_variant"].map(flags) if "train_variant" in m else pd.Series([("kv", "")] * len(m))
        m["kv_parts"] = [p for p, _ in parsed]
        m["a_skip"] = [s for _, s in parsed]
    cols = ["bits_a", "bits_kv", "kv_parts", "a_skip", "seed", "loss_val", "status"]
    out = pd.concat([f[cols], m[cols] if len(m) else None], ignore_index=True)
    out = out[(out["status"] == "ok") & np.isfinite(out["loss_val"].astype(float))].drop(columns="status")
    out = out.astype({"bits_a": int, "bits_kv": int, "seed": int, "loss_val": float})
    key = ["bits_a", "bits_kv", "kv_parts", "a_skip", "seed"]
    if out.duplicated(key).any():
        raise ValueError(f"qat_mechanism: several rows of one configuration at one seed: "
                         f"{out[out.duplicated(key, keep=False)][key].to_dict('records')[:3]}")
    return out.reset_index(drop=True)


def w16_sigma(factorial: pd.DataFrame, mechanism: pd.DataFrame) -> tuple[float, int]:
    """A sensitivity check on σ_w (written after the rows were read, a referee's reading): the residual
    of the additive configuration × seed model over the W16 configurations the contrasts read (the
    factorial's nine (P_a, P_kv) and the ablation's variants), on the seeds that have all of them.

    Returns:
        (σ [nats/byte], degrees of freedom (C − 1)(S − 1)); (nan, 0) with fewer than 2 complete seeds.
    """
    return _additive_residual(mechanism_losses(factorial, mechanism))


def _additive_residual(losses: pd.DataFrame) -> tuple[float, int]:
    """σ and degrees of freedom of the configuration × seed additive model on ``mechanism_losses``' rows."""
    wide = losses.pivot_table(index=["bits_a", "bits_kv", "kv_parts", "a_skip"], columns="seed", values="loss_val",
                              aggfunc="first").dropna(axis=1, how="any")
    c, s = wide.shape
    if s < 2 or c < 2:
        return math.nan, 0
    y = wide.to_numpy(float)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (c - 1) * (s - 1)
    return float(np.sqrt((resid ** 2).sum() / df)), int(df)


def ablation_sigma(factorial: pd.DataFrame, mechanism: pd.DataFrame) -> dict[str, float]:
    """A second sensitivity check (written after the rows were read, a referee's reading): the additive
    residual over the ablation's own configurations (those that are not factorial runs), and a
    two-sided F-test of its variance against the factorial's within-seed σ_w (``within_seed_sigma``).

    Returns:
        ``sigma``, ``df`` (the ablation's), ``sigma_w``, ``df_w`` (the factorial's), ``f`` = σ²/σ_w²,
        ``p`` (two-sided, F on (df, df_w)); NaN where either σ has no degrees of freedom.
    """
    from scipy import stats

    losses = mechanism_losses(factorial, mechanism)
    own = losses[(losses["kv_parts"] != "kv") | (losses["a_skip"] != "")]
    sigma, df = _additive_residual(own)
    sigma_w, df_w = within_seed_sigma(factorial[factorial["ptq_method"] == "none"])
    out = {"sigma": sigma, "df": float(df), "sigma_w": sigma_w, "df_w": float(df_w), "f": math.nan, "p": math.nan}
    if df > 0 and df_w > 0 and sigma_w > 0:
        f = sigma ** 2 / sigma_w ** 2
        out.update(f=f, p=float(min(1.0, 2 * min(stats.f.sf(f, df, df_w), stats.f.cdf(f, df, df_w)))))
    return out


def mechanism_table(factorial: pd.DataFrame, mechanism: pd.DataFrame, level: float = 0.95,
                    sigma: str = "factorial") -> pd.DataFrame:
    """Every contrast of :data:`CONTRASTS`, averaged over the seeds that have all of its runs.

    A contrast Σc·L of final validation losses is taken within each seed and averaged over the S seeds
    that have every run it needs; its standard error is σ_w·√(Σc²/S), with σ_w the factorial's
    within-seed σ (the residual of the combination × seed additive model, (C − 1)(S − 1) degrees of
    freedom, :func:`within_seed_sigma`), and its interval a two-sided t-interval on those degrees of
    freedom. At 3 seeds a four-run contrast has SE ≈ 0.012.

    Args:
        factorial, mechanism: as :func:`mechanism_losses` (one evaluation version each, the same).
        level: the two-sided interval's coverage.
        sigma: ``"factorial"`` (the rule fixed before the rows were read: :func:`within_seed_sigma`) or
            ``"w16"`` (the sensitivity check :func:`w16_sigma`).

    Raises:
        ValueError: another ``sigma``.

    Returns:
        One row per contrast: ``contrast``, ``meaning``, ``n_seeds``, ``estimate`` (mean over those
        seeds) [nats/byte], ``se`` (σ_w·√(Σc²/S)), ``lo``, ``hi`` (t-interval on σ_w's degrees of
        freedom), ``sd_seeds`` (the contrast's spread over seeds, a check on σ_w·√Σc²), ``sigma_w``,
        ``df``, and ``per_seed`` (seed -> value). A contrast with no complete seed has NaNs.
    """
    from scipy import stats

    if sigma not in ("factorial", "w16"):
        raise ValueError(f"mechanism_table: sigma must be 'factorial' or 'w16', got {sigma!r}")
    losses = mechanism_losses(factorial, mechanism)
    sigma, df = (within_seed_sigma(factorial[factorial["ptq_method"] == "none"]) if sigma == "factorial"
                 else w16_sigma(factorial[factorial["ptq_method"] == "none"], mechanism))
    t = float(stats.t.ppf(0.5 + level / 2, df)) if df > 0 else math.nan
    by = {(int(a), int(kv), p, s, int(seed)): v for a, kv, p, s, seed, v in
          losses[["bits_a", "bits_kv", "kv_parts", "a_skip", "seed", "loss_val"]].itertuples(index=False)}
    seeds = sorted(losses["seed"].unique())
    rows = []
    for name, (meaning, coef) in CONTRASTS.items():
        per = {}
        for seed in seeds:
            if all((*cfg, seed) in by for cfg in coef):
                per[int(seed)] = float(sum(c * by[(*cfg, seed)] for cfg, c in coef.items()))
        n = len(per)
        est = float(np.mean(list(per.values()))) if n else math.nan
        se = sigma * math.sqrt(sum(c * c for c in coef.values()) / n) if n else math.nan
        rows.append({"contrast": name, "meaning": meaning, "n_seeds": n, "estimate": est, "se": se,
                     "lo": est - t * se, "hi": est + t * se,
                     "sd_seeds": float(np.std(list(per.values()), ddof=1)) if n > 1 else math.nan,
                     "sigma_w": sigma, "df": df, "per_seed": per})
    return pd.DataFrame(rows)


# The hypothesis's two predictions and the contrast that tests each (< 0 supports it).
# The hypothesis predicted the shortfall with V and not K, and none without o_proj's input quantized; each
# contrast tests the ordering part of its prediction (more with V than with K; less without o_proj's input),
# so the labels say that and no more.
PREDICTIONS: dict[str, str] = {
    "(i) more of the shortfall with V than with K": "(A4 x V4) - (A4 x K4)",
    "(ii) less of the shortfall without o_proj's input quantized": "(A4 x KV4) - (A4 not o_proj x KV4)",
}


def reading(table: pd.DataFrame) -> str:
    """What the pilot says about each prediction, by a rule fixed before its rows were read: a
    prediction is *supported* when its contrast's 95 % interval lies wholly below 0, *contradicted*
    when wholly above, else *not resolved*; each with the contrast, its interval and its seeds.

    Args:
        table: :func:`mechanism_table`.

    Returns:
        One Markdown sentence per prediction, and the factorial's own A4 × KV4 interaction at W16.
    """
    t = table.set_index("contrast")

    def num(name: str) -> str:
        r = t.loc[name]
        if not int(r["n_seeds"]):
            return f"{name}: no complete seed yet"
        return (f"{name} = {r['estimate']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}] nats/byte "
                f"({int(r['n_seeds'])} seed{'s' if int(r['n_seeds']) != 1 else ''})")

    out = [f"At W16 the factorial's own {num('A4 x KV4')}."]
    for what, name in PREDICTIONS.items():
        r = t.loc[name]
        if not int(r["n_seeds"]):
            word = "not yet testable"
        elif r["hi"] < 0:
            word = "supported"
        elif r["lo"] > 0:
            word = "contradicted"
        else:
            word = "not resolved"
        out.append(f"Prediction {what}: **{word}** ({num(name)}).")
    return " ".join(out).replace(" x ", " × ")


def power(se: float, df: int, effect: float, level: float = 0.95) -> float:
    """The probability that a contrast's two-sided ``level`` t-interval excludes 0 when its true value
    is ``effect`` (noncentral t on ``df`` degrees of freedom, noncentrality effect/se).

    Args:
        se: the contrast's standard error [nats/byte] (``mechanism_table``'s ``se``). df: σ_w's degrees
            of freedom. effect: the true contrast [nats/byte].

    Raises:
        ValueError: ``se`` not positive and finite, or ``df`` < 1.
    """
    from scipy import stats

    if not (math.isfinite(se) and se > 0) or df < 1:
        raise ValueError(f"power: se must be positive and finite and df >= 1; got se={se!r}, df={df!r}")
    t = stats.t.ppf(0.5 + level / 2, df)
    nc = effect / se
    # scipy's noncentral t gives NaN for a tail far from the noncentrality (|nc| ≳ 10), where it is 0
    upper, lower = (float(np.nan_to_num(x, nan=0.0)) for x in (stats.nct.sf(t, df, nc), stats.nct.cdf(-t, df, nc)))
    return min(1.0, upper + lower)


def minimum_effect(df: int, target: float = 0.8, level: float = 0.95) -> float:
    """The true contrast, in standard errors, that a two-sided ``level`` t-interval on ``df`` degrees of
    freedom excludes from 0 with probability ``target`` (:func:`power` inverted); about 2.8 at 0.8.

    Raises:
        ValueError: ``target`` not in (1 − level, 1), or ``df`` < 1.
    """
    from scipy import optimize

    if not (1 - level < target < 1) or df < 1:
        raise ValueError(f"minimum_effect: target must lie in ({1 - level:g}, 1) and df >= 1; got {target!r}, {df!r}")
    return float(optimize.brentq(lambda e: power(1.0, df, e, level) - target, 0.0, 10.0, xtol=1e-10))


def seeds_needed(se: float, n_seeds: int, df: int, effect: float, target: float = 0.8,
                 level: float = 0.95) -> int:
    """The fewest seeds at which a contrast measured with standard error ``se`` on ``n_seeds`` seeds
    reaches power ``target`` against a true value ``effect`` (its SE shrinks as 1/√S; σ_w's degrees of
    freedom ``df`` held, which understates the power of a design that would re-estimate σ_w on more
    degrees of freedom: the count is conservative by about one seed at df 52, and it scales with σ_w²).

    Raises:
        ValueError: ``se`` not positive and finite, ``n_seeds`` < 1, ``effect`` zero or not finite, or the
            arguments of :func:`minimum_effect`.
    """
    if not (math.isfinite(se) and se > 0) or n_seeds < 1 or not (math.isfinite(effect) and effect != 0):
        raise ValueError(f"seeds_needed: se must be positive and finite, n_seeds >= 1 and effect finite and "
                         f"nonzero; got se={se!r}, n_seeds={n_seeds!r}, effect={effect!r}")
    # power depends on effect/SE only; the SE at S seeds is se·√(n_seeds/S)
    need = (minimum_effect(df, target, level) * se / abs(effect)) ** 2 * n_seeds
    return max(1, math.ceil(need - 1e-9))
