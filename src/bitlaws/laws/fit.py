"""Fitting the precision scaling laws: Besiroglu et al.'s recipe, stage by stage as Kumar et al.

The recipe (Besiroglu et al. 2024, §2): the summed Huber loss (δ = 1e-3) of the log-loss
residuals, minimised by L-BFGS-B from the best points of a screened grid of starts, with exact
gradients by complex steps; intervals from a bootstrap over runs; held-out error by leaving one
model size (or data budget) out. ``STAGES`` is the paper's piecewise pipeline (Appendix K):
``chinchilla``, ``chinchilla_free``, ``neff_w``, ``neff_a``, ``neff_kv``, ``neff_joint``
(Eqs. 3–4; ``neff_*_paired`` on L(P) − L_hp), ``ptq``, ``ptq_linear`` (Eq. 2) and ``unified``
(Eq. 9), each holding the earlier stages' constants fixed (``fixed=``, or a callable of each
held-out fold); ``joint_all`` fits A, B, E, α and every γ_x, n_x at once. Entry points:
``fit_stage``, ``bootstrap``, ``holdout`` (``holdout_predictions``), ``predict``; choices in
book/methods.md, "Fitting the laws". A stage takes a pandas frame with the results columns
``n_params``, ``n_tokens``, ``loss_val``, ``bits_w``, ``bits_a``, ``bits_kv``, ``bits_post``,
``run_id`` and, for the PTQ stages, ``loss_base`` (the same run's loss before PTQ); a missing
``bits_*`` column means 16 (high precision). numpy/scipy only.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from . import forms

__all__ = [
    "HUBER_DELTA",
    "Stage",
    "FitResult",
    "BOUND_RTOL",
    "bound_side",
    "STAGES",
    "staged_start",
    "huber",
    "prepare",
    "fit_stage",
    "bootstrap",
    "holdout",
    "holdout_predictions",
    "predict",
    "r2_mse",
    "table1_stage",
    "hoffmann_grid",
]

HUBER_DELTA = 1e-3
_STEP = 1e-20          # complex step
_BAD = 1e30            # objective where the model is undefined (e.g. N_eff ≤ 0)
_SCREEN_CELLS = 4_000_000  # grid points × data points per vectorised screening chunk


def _one_blas_thread(fn):
    """Run `fn` with every BLAS library (numpy's, scipy's) limited to one thread (threadpoolctl).

    Used around ``fit_stage``, ``bootstrap`` and ``holdout``: the optimiser's linear algebra is a
    (p, n) matrix-vector product per step, far too small to share, and multi-threaded OpenBLAS
    oversubscribes a busy machine (measured on 2 cores beside two training runs: an L-BFGS-B step
    took ~6 ms instead of ~0.1 ms, the Chinchilla refit 36.9 s instead of 2.7 s).
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)
    return wrapper


def _get_stage(stage) -> "Stage":
    """A ``Stage`` as given, or ``STAGES[name]``; a ValueError naming the known stages otherwise."""
    if isinstance(stage, Stage):
        return stage
    if isinstance(stage, str) and stage in STAGES:
        return STAGES[stage]
    raise ValueError(f"unknown stage {stage!r}; known: {', '.join(STAGES)} (or pass a Stage, e.g. table1_stage(...))")


def huber(r: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    """Huber loss, elementwise: r²/2 for |r| ≤ δ, δ·(|r| − δ/2) beyond.

    Args:
        r: (...) float — residuals.
        delta: the threshold δ (1e-3, as Hoffmann et al. and Besiroglu et al.).

    Returns:
        (...) the loss of each residual (sum them for the objective).
    """
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


@dataclasses.dataclass(frozen=True)
class Stage:
    """One fit of the pipeline: which constants it fits, how it predicts, its grid and bounds.

    Attributes:
        name: the stage's key in ``STAGES`` (and of ``data/fits/<profile>_<name>.json``).
        equation: where the form is in the paper.
        param_names: the fitted (raw) parameters, in order; ``log_X`` means X = e^log_X.
        grid: raw parameter name -> initial values; the grid is their Cartesian product.
        bounds: raw parameter name -> (low, high) for L-BFGS-B.
        natural: raw θ (k, p) -> dict of natural constants, each (k, 1) (broadcasts with data).
        loss: (data dict, constants dict) -> predicted target (k, n).
        scale: ``"log"`` (residual log L̂ − log L) or ``"linear"`` (residual L̂ − L).
        target: the data column the residuals are taken on.
        needs: data columns beyond N, D and the target.
        baseline: a column subtracted from target and prediction before R² (``loss_base`` for
            the PTQ stages, so their R² is on δ_PTQ), or ``None``.
        requires_fixed: constants that earlier stages must supply through ``fixed``.
        n_refine: L-BFGS-B starts (the best screened grid points); ``None`` = every grid point.
        cell: the columns that make a distinct design point (to count identifiable points).
    """

    name: str
    equation: str
    param_names: tuple[str, ...]
    grid: Mapping[str, Sequence[float]]
    bounds: Mapping[str, tuple[float, float]]
    natural: Callable[[np.ndarray], dict]
    loss: Callable[[dict, dict], np.ndarray]
    scale: str = "log"
    target: str = "loss_val"
    needs: tuple[str, ...] = ()
    baseline: str | None = None
    requires_fixed: tuple[str, ...] = ()
    n_refine: int | None = 16
    cell: tuple[str, ...] = ("n_params", "n_tokens")

    @property
    def n_params_fitted(self) -> int:
        return len(self.param_names)

    def grid_points(self) -> np.ndarray:
        """(G, p) the initialisation grid, in ``param_names`` order."""
        return np.array(list(itertools.product(*(self.grid[k] for k in self.param_names))), dtype=float)

    @property
    def n_starts(self) -> int:
        return int(np.prod([len(self.grid[k]) for k in self.param_names]))


@dataclasses.dataclass
class FitResult:
    """The outcome of ``fit_stage`` (plus ``bootstrap``/``holdout`` when run).

    Attributes:
        stage: the stage's name.
        params: fitted natural constants (e.g. ``A``, ``alpha``), floats.
        theta: the raw optimum, in the stage's ``param_names`` order.
        fixed: constants held fixed from earlier stages.
        objective: the summed Huber loss at the optimum.
        n_points: rows fitted; ``n_cells``: distinct design points; ``n_groups``: runs.
        n_starts: grid size; ``n_refined``: L-BFGS-B runs; ``n_at_best``: runs that ended within
            1e-6 (relative) of the best objective (a check that the optimum is not a fluke).
        converged: objective finite, projected gradient small and the refined starts agreeing
            (``_converged``), and the design identifies the constants.
        on_bound: the fitted constants (natural names, as in ``params``) whose raw parameter lies
            within ``BOUND_RTOL`` of a bound of the stage's box (``bound_side``): the optimum lies on
            or beyond the box there, so the data do not fix that constant.
        identified: ``converged`` and no constant ``on_bound``. A fit can converge (the optimiser
            stopped at the best point of the box) without its constants being identified.
        r2, mse: in-sample R² and MSE of the target (δ_PTQ for the PTQ stages).
        ci95, se: bootstrap 95% interval and standard error per natural constant.
        n_boot, n_boot_ok: resamples asked for and fitted.
        holdout: ``by`` column -> {r2, mse, n_folds, n_points, folds_skipped}.
    """

    stage: str
    params: dict[str, float]
    theta: list[float]
    fixed: dict[str, float]
    objective: float
    n_points: int
    n_cells: int
    n_groups: int
    n_starts: int
    n_refined: int
    n_at_best: int
    converged: bool
    r2: float
    mse: float
    on_bound: list[str] = dataclasses.field(default_factory=list)
    identified: bool = False
    ci95: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    se: dict[str, float] = dataclasses.field(default_factory=dict)
    n_boot: int = 0
    n_boot_ok: int = 0
    holdout: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """A JSON-ready dict (floats; NaN as None)."""
        return _json_clean(dataclasses.asdict(self))


def _json_clean(obj):
    if isinstance(obj, dict):
        return {k: _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_clean(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(float(obj)) else None
    return obj


# A constant is on a bound when its raw parameter lies within this fraction of the box's width of it.
BOUND_RTOL = 1e-6


def bound_side(bounds: Mapping[str, Sequence[float]], name: str, value: float,
               rtol: float = BOUND_RTOL) -> str | None:
    """Which bound of a stage's box a constant sits on: ``"lower"``, ``"upper"`` or None (inside).

    Args:
        bounds: raw parameter name -> (low, high), as ``Stage.bounds`` or a fit record's ``bounds``;
            a raw ``log_X`` bounds log X.
        name: the natural constant (``n_a``, ``A``); looked up as ``name`` or ``log_<name>``.
        value: its natural value (an interval's end, or a fitted value).
        rtol: the tolerance, a fraction of the box's width (high − low) in raw units.

    Returns:
        The side, or None where ``value`` is inside by more than the tolerance, not finite, has no
        bounds, or (for a log parameter) is not positive.
    """
    raw, v = (name, float(value)) if name in bounds else (f"log_{name}", float(value))
    if raw not in bounds or not math.isfinite(v):
        return None
    if raw != name:
        if v <= 0:
            return None
        v = math.log(v)
    lo, hi = (float(b) for b in bounds[raw])
    tol = rtol * (hi - lo)
    if v <= lo + tol:
        return "lower"
    if v >= hi - tol:
        return "upper"
    return None


def _on_bound(stage: "Stage", params: Mapping[str, float]) -> list[str]:
    """The constants of ``params`` on a bound of ``stage`` (``bound_side``), in ``param_names`` order."""
    names = [k.removeprefix("log_") for k in stage.param_names]
    return [k for k in names if k in params and bound_side(stage.bounds, k, params[k]) is not None]


# --- stages ------------------------------------------------------------------------------------

def hoffmann_grid(tied: bool) -> dict[str, list[float]]:
    """Hoffmann et al.'s initialisation grid, as Besiroglu et al. use it.

    α, β ∈ {0, 0.5, …, 2}; e ∈ {−1, −0.5, …, 1}; a, b ∈ {0, 5, …, 25}: 4,500 starts (900 tied).
    """
    grid = {"log_A": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0], "log_B": [0.0, 5.0, 10.0, 15.0, 20.0, 25.0],
            "log_E": [-1.0, -0.5, 0.0, 0.5, 1.0], "alpha": [0.0, 0.5, 1.0, 1.5, 2.0]}
    if not tied:
        grid["beta"] = [0.0, 0.5, 1.0, 1.5, 2.0]
    return grid


_CHIN_BOUNDS = {"log_A": (-20.0, 80.0), "log_B": (-20.0, 80.0), "log_E": (-10.0, 5.0),
                "alpha": (0.0, 4.0), "beta": (0.0, 4.0)}


def _chinchilla_natural(tied: bool):
    def natural(theta: np.ndarray) -> dict:
        t = np.atleast_2d(theta)
        out = {"A": np.exp(t[:, [0]]), "B": np.exp(t[:, [1]]), "E": np.exp(t[:, [2]]), "alpha": t[:, [3]]}
        out["beta"] = t[:, [3]] if tied else t[:, [4]]
        return out
    return natural


def _chinchilla_stage_loss(data: dict, c: dict) -> np.ndarray:
    # exp(LSE(a − α log N, b − β log D, e)): the same number as forms.chinchilla_loss.
    return forms.chinchilla_loss(data["n_params"], data["n_tokens"], c)


def _neff_stage(component: str, paired: bool = False) -> Stage:
    """The marginal N_eff stage of one part; ``paired``: on L(P) − L_hp(N, D, seed), the loss over the
    high-precision run of the same N, D and seed (column ``loss_base``), predicted as
    L_hp + L(N_eff, D) − L(N, D) with the fixed Chinchilla constants (B·D^(−β) and E cancel)."""
    g, n = f"gamma_{component}", f"n_{component}"

    def natural(theta):
        t = np.atleast_2d(theta)
        return {g: t[:, [0]], n: t[:, [1]]}

    def loss(data, c):
        return forms.qat_loss(data["n_params"], data["n_tokens"], data["bits_w"], data["bits_a"],
                              data["bits_kv"], {**data["fixed"], **c})

    def paired_loss(data, c):
        hp = forms.chinchilla_loss(data["n_params"], data["n_tokens"], data["fixed"])
        return data["loss_base"] + (loss(data, c) - hp)

    equation = (f"Eq. 3–4: L = A·[N·f_{component}(P_{component})]^(−α) + B·D^(−β) + E, "
                f"f = 1 − exp(−P/γ_{component} + n_{component})")
    if paired:
        equation = (f"Eq. 3–4 on paired differences: L(P_{component}) − L_hp(N, D, seed) = "
                    f"A·[N·f_{component}(P_{component})]^(−α) − A·N^(−α), f = 1 − exp(−P/γ_{component} + "
                    f"n_{component}), fitted through L_hp + the difference")
    return Stage(
        name=f"neff_{component}" + ("_paired" if paired else ""),
        equation=equation,
        param_names=(g, n),
        grid={g: [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], n: [-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0]},
        bounds={g: (0.05, 20.0), n: (-5.0, 10.0)},
        natural=natural, loss=paired_loss if paired else loss,
        needs=("bits_w", "bits_a", "bits_kv") + (("loss_base",) if paired else ()),
        baseline="loss_base" if paired else None,
        requires_fixed=("A", "B", "E", "alpha"), n_refine=None,
        cell=("n_params", "n_tokens", "bits_w", "bits_a", "bits_kv"),
    )


def _neff_joint_stage() -> Stage:
    names = ("gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv")

    def natural(theta):
        t = np.atleast_2d(theta)
        return {k: t[:, [i]] for i, k in enumerate(names)}

    def loss(data, c):
        return forms.qat_loss(data["n_params"], data["n_tokens"], data["bits_w"], data["bits_a"],
                              data["bits_kv"], {**data["fixed"], **c})

    grid = {}
    for x in ("w", "a", "kv"):
        grid[f"gamma_{x}"] = [1.0, 2.5]
        grid[f"n_{x}"] = [0.0, 1.5]
    return Stage(
        name="neff_joint",
        equation="Eq. 4: N_eff = N·Π_x(1 − exp(−P_x/γ_x + n_x)), all six constants fitted jointly (Fig. 5, centre)",
        param_names=names, grid=grid,
        bounds={k: ((0.05, 20.0) if k.startswith("gamma") else (-5.0, 10.0)) for k in names},
        natural=natural, loss=loss, needs=("bits_w", "bits_a", "bits_kv"),
        requires_fixed=("A", "B", "E", "alpha"), n_refine=16,
        cell=("n_params", "n_tokens", "bits_w", "bits_a", "bits_kv"),
    )


_NEFF_NAMES = ("gamma_w", "n_w", "gamma_a", "n_a", "gamma_kv", "n_kv")


def _all_joint_stage() -> Stage:
    names = ("log_A", "log_B", "log_E", "alpha") + _NEFF_NAMES

    def natural(theta):
        t = np.atleast_2d(theta)
        out = {"A": np.exp(t[:, [0]]), "B": np.exp(t[:, [1]]), "E": np.exp(t[:, [2]]), "alpha": t[:, [3]],
               "beta": t[:, [3]]}
        out.update({k: t[:, [4 + i]] for i, k in enumerate(_NEFF_NAMES)})
        return out

    def loss(data, c):
        return forms.qat_loss(data["n_params"], data["n_tokens"], data["bits_w"], data["bits_a"], data["bits_kv"], c)

    grid = {"log_A": [5.0], "log_B": [5.0], "log_E": [0.0], "alpha": [0.5]}
    for x in ("w", "a", "kv"):
        grid[f"gamma_{x}"], grid[f"n_{x}"] = [1.0, 2.5], [0.0, 1.5]
    return Stage(
        name="joint_all",
        equation="Eqs. 3–4 with Chinchilla (α = β): A, B, E, α and every γ_x, n_x fitted at once on the "
                 "high-precision and low-precision runs (started from the staged fits)",
        param_names=names, grid=grid,
        bounds={**{k: _CHIN_BOUNDS[k] for k in names[:4]},
                **{k: ((0.05, 20.0) if k.startswith("gamma") else (-5.0, 10.0)) for k in _NEFF_NAMES}},
        natural=natural, loss=loss, needs=("bits_w", "bits_a", "bits_kv"), n_refine=None,
        cell=("n_params", "n_tokens", "bits_w", "bits_a", "bits_kv"),
    )


def staged_start(stage: Stage, constants: Mapping[str, float]) -> np.ndarray:
    """(1, p) the raw start of ``stage`` at natural ``constants`` (``log_X`` from X), e.g. the staged
    fits' constants as the start of ``joint_all``.

    Raises:
        KeyError: a constant the stage fits is missing (the message names it).
    """
    missing = [k for k in stage.param_names if k.removeprefix("log_") not in constants]
    if missing:
        raise KeyError(f"staged_start: no value for {', '.join(missing)} of stage {stage.name!r}")
    return np.array([[math.log(constants[k[4:]]) if k.startswith("log_") else float(constants[k])
                      for k in stage.param_names]])


def _ptq_natural(theta):
    t = np.atleast_2d(theta)
    return {"C_T": np.exp(t[:, [0]]), "gamma_D": t[:, [1]], "gamma_N": t[:, [2]], "gamma_post": t[:, [3]]}


def _ptq_post_loss(data, c):
    return data["loss_base"] + forms.delta_ptq(data["n_params"], data["n_tokens"], data["bits_post"], c)


def _ptq_stage(linear: bool) -> Stage:
    return Stage(
        name="ptq_linear" if linear else "ptq",
        equation="Eq. 2: δ_PTQ = C_T·D^γ_D·N^(−γ_N)·exp(−P_post/γ_post)"
                 + ("; Huber on δ_PTQ itself [nats]" if linear
                    else "; fitted through the post-PTQ loss, log(L_before + δ̂) − log(L_after)"),
        param_names=("log_C_T", "gamma_D", "gamma_N", "gamma_post"),
        grid={"log_C_T": [-12.0, -8.0, -4.0, 0.0, 4.0], "gamma_D": [0.25, 0.5, 1.0],
              "gamma_N": [0.25, 0.5, 1.0], "gamma_post": [0.3, 0.6, 1.2, 2.4]},
        bounds={"log_C_T": (-60.0, 60.0), "gamma_D": (0.0, 4.0), "gamma_N": (0.0, 4.0),
                "gamma_post": (0.05, 10.0)},
        natural=_ptq_natural, loss=_ptq_post_loss, scale="linear" if linear else "log",
        needs=("bits_post", "loss_base"), baseline="loss_base", n_refine=16,
        cell=("n_params", "n_tokens", "bits_post"),
    )


def _unified_stage() -> Stage:
    names = ("log_C_w", "log_C_a", "log_C_kv")

    def natural(theta):
        t = np.atleast_2d(theta)
        return {f"C_{x}": np.exp(t[:, [i]]) for i, x in enumerate(("w", "a", "kv"))}

    def loss(data, c):
        delta = forms.unified_delta_ptq(data["n_params"], data["n_tokens"], data["bits_w"], data["bits_a"],
                                        data["bits_kv"], data["bits_post"], {**data["fixed"], **c})
        return data["loss_base"] + delta

    return Stage(
        name="unified",
        equation="Eq. 9: δ_PTQ = C_T·e^(−P_post/γ_post)·D^γ_D/N_eff^γ_N·Π_x[1 − e^(−C_x(P_x − P_post))], "
                 "fitted through the post-PTQ loss",
        param_names=names, grid={k: [-3.0, -1.5, 0.0, 1.5, 3.0] for k in names},
        bounds={k: (-12.0, 8.0) for k in names}, natural=natural, loss=loss,
        needs=("bits_w", "bits_a", "bits_kv", "bits_post", "loss_base"), baseline="loss_base",
        requires_fixed=("C_T", "gamma_D", "gamma_N", "gamma_post"), n_refine=None,
        cell=("n_params", "n_tokens", "bits_w", "bits_a", "bits_kv", "bits_post"),
    )


STAGES: dict[str, Stage] = {
    "chinchilla": Stage(
        name="chinchilla",
        equation="§2.2: log L = LSE(a − α·log N, b − α·log D, e), α = β tied (Appendix K)",
        param_names=("log_A", "log_B", "log_E", "alpha"), grid=hoffmann_grid(tied=True),
        bounds=_CHIN_BOUNDS, natural=_chinchilla_natural(tied=True), loss=_chinchilla_stage_loss,
        n_refine=16,
    ),
    "chinchilla_free": Stage(
        name="chinchilla_free",
        equation="§2.2: log L = LSE(a − α·log N, b − β·log D, e) (Hoffmann et al. 2022; Besiroglu et al. 2024)",
        param_names=("log_A", "log_B", "log_E", "alpha", "beta"), grid=hoffmann_grid(tied=False),
        bounds=_CHIN_BOUNDS, natural=_chinchilla_natural(tied=False), loss=_chinchilla_stage_loss,
        n_refine=32,
    ),
    "neff_w": _neff_stage("w"),
    "neff_a": _neff_stage("a"),
    "neff_kv": _neff_stage("kv"),
    "neff_w_paired": _neff_stage("w", paired=True),
    "neff_a_paired": _neff_stage("a", paired=True),
    "neff_kv_paired": _neff_stage("kv", paired=True),
    "neff_joint": _neff_joint_stage(),
    "joint_all": _all_joint_stage(),
    "ptq": _ptq_stage(linear=False),
    "ptq_linear": _ptq_stage(linear=True),
    "unified": _unified_stage(),
}


def table1_stage(form: str, chinchilla: Mapping[str, float] | None = None) -> Stage:
    """A stage for one of Table 1's forms, fitting A, B, E, α, β and the precision constants jointly.

    Args:
        form: a key of ``bitlaws.laws.forms.TABLE1_FORMS``.
        chinchilla: a Chinchilla fit (``A``, ``B``, ``E``, ``alpha``, ``beta``) to start the
            Chinchilla constants from; without it they start on a small grid.

    Returns:
        The stage (name ``table1_<form>``), grid = Chinchilla starts × precision-constant grid.

    Raises:
        KeyError: unknown form.
    """
    if form not in forms.TABLE1_FORMS:
        raise KeyError(f"unknown Table 1 form {form!r}; known: {', '.join(forms.TABLE1_FORMS)}")
    spec = forms.TABLE1_FORMS[form]
    chin = ("log_A", "log_B", "log_E", "alpha", "beta")
    names = chin + spec.precision_params
    if chinchilla is not None:
        grid = {"log_A": [math.log(chinchilla["A"])], "log_B": [math.log(chinchilla["B"])],
                "log_E": [math.log(chinchilla["E"])], "alpha": [chinchilla["alpha"]],
                "beta": [chinchilla.get("beta", chinchilla["alpha"])]}
    else:
        grid = {"log_A": [5.0, 15.0], "log_B": [5.0, 15.0], "log_E": [0.0, 1.0], "alpha": [0.5],
                "beta": [0.5]}
    pgrid = {"gamma_w": [1.0, 2.5, 4.0], "n_w": [0.0, 1.0, 2.0], "gamma_d": [1.0, 2.5, 4.0],
             "n_d": [0.0, 1.0, 2.0], "c_p": [0.1, 1.0, 10.0], "alpha_p": [0.5, 1.5, 3.0]}
    pbounds = {"gamma_w": (0.05, 20.0), "n_w": (-5.0, 10.0), "gamma_d": (0.05, 20.0),
               "n_d": (-5.0, 10.0), "c_p": (0.0, 1e6), "alpha_p": (0.0, 10.0)}
    grid.update({k: pgrid[k] for k in spec.precision_params})

    def natural(theta):
        t = np.atleast_2d(theta)
        out = {"A": np.exp(t[:, [0]]), "B": np.exp(t[:, [1]]), "E": np.exp(t[:, [2]]),
               "alpha": t[:, [3]], "beta": t[:, [4]]}
        out.update({k: t[:, [5 + i]] for i, k in enumerate(spec.precision_params)})
        return out

    def loss(data, c):
        return spec.loss(data["n_params"], data["n_tokens"], data["bits_w"], c)

    return Stage(
        name=f"table1_{form}", equation=f"Appendix C, Table 1: {spec.label} (our reading: "
        f"{spec.loss.__doc__.splitlines()[0]})", param_names=names, grid=grid,
        bounds={**_CHIN_BOUNDS, **{k: pbounds[k] for k in spec.precision_params}},
        natural=natural, loss=loss, needs=("bits_w",), n_refine=8,
        cell=("n_params", "n_tokens", "bits_w"),
    )


# --- data ----------------------------------------------------------------------------------------

def prepare(stage: Stage, frame: pd.DataFrame, fixed: Mapping[str, float] | None = None) -> dict:
    """Check a frame for a stage and turn it into the arrays the stage's loss takes.

    Args:
        stage: the stage.
        frame: (n rows) the observations (see the module docstring for the columns).
        fixed: constants from earlier stages; must include ``stage.requires_fixed``.

    Returns:
        dict of (n,) arrays (``n_params``, ``n_tokens``, ``bits_*``, ``bits_post``, ``loss_base``,
        ``y`` = the target, ``groups`` = run ids), plus ``fixed`` and ``n_cells``.

    Raises:
        ValueError: a needed column is missing or has NaN/inf; N, D or (log scale) the target or
            ``loss_base`` is ≤ 0; fewer rows than fitted parameters; a fixed constant is missing.
    """
    fixed = dict(fixed or {})
    missing_fixed = [k for k in stage.requires_fixed if k not in fixed]
    if missing_fixed:
        raise ValueError(f"stage {stage.name!r} needs the constants {missing_fixed} from earlier stages "
                         "(pass them as fixed=...)")
    frame = frame.reset_index(drop=True)
    cols = ("n_params", "n_tokens", stage.target) + tuple(stage.needs)
    data: dict = {"fixed": fixed}
    for col in cols:
        if col in frame:
            values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
        elif col.startswith("bits_"):
            values = np.full(len(frame), float(forms.HIGH_PRECISION_BITS))
        else:
            raise ValueError(f"stage {stage.name!r} needs the column {col!r}; the frame has {list(frame.columns)}")
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(f"stage {stage.name!r}: column {col!r} has {int(bad.sum())} NaN/inf value(s) "
                             f"(first at row {int(np.argmax(bad))}); drop diverged runs first")
        data[col] = values
    for col in ("n_params", "n_tokens"):
        if (data[col] <= 0).any():
            raise ValueError(f"stage {stage.name!r}: {col} must be > 0 (a log is taken); "
                             f"min is {data[col].min()}")
    if stage.scale == "log":
        for col in (stage.target, "loss_base"):
            if col in data and (data[col] <= 0).any():
                raise ValueError(f"stage {stage.name!r} fits log-losses, so {col} must be > 0; "
                                 f"min is {data[col].min()}")
    for col in ("bits_w", "bits_a", "bits_kv", "bits_post"):
        data.setdefault(col, np.full(len(frame), float(forms.HIGH_PRECISION_BITS)))
    data["y"] = data[stage.target]
    data["groups"] = (frame["run_id"].astype(str).to_numpy() if "run_id" in frame
                      else np.arange(len(frame)).astype(str))
    data["n_cells"] = int(frame.drop_duplicates([c for c in stage.cell if c in frame]).shape[0]) \
        if all(c in frame for c in ("n_params", "n_tokens")) else len(frame)
    if len(frame) < stage.n_params_fitted:
        raise ValueError(f"stage {stage.name!r} fits {stage.n_params_fitted} parameters "
                         f"({', '.join(stage.param_names)}) but got only {len(frame)} row(s)")
    return data


def _subset(data: dict, idx: np.ndarray) -> dict:
    out = {k: (v[idx] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    return out


# --- objective and optimiser -----------------------------------------------------------------

def _residuals(stage: Stage, data: dict, theta: np.ndarray) -> np.ndarray:
    """(k, n) residuals for k parameter vectors (complex if theta is)."""
    pred = stage.loss(data, stage.natural(theta))
    pred = np.broadcast_to(pred, (np.atleast_2d(theta).shape[0], data["y"].shape[0]))
    if stage.scale == "log":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.log(pred) - np.log(data["y"])
    return pred - data["y"]


def _objective_many(stage: Stage, data: dict, thetas: np.ndarray, delta: float) -> np.ndarray:
    """(G,) summed Huber objective at each row of thetas (inf where undefined), chunked."""
    n = max(1, data["y"].shape[0])
    chunk = max(1, _SCREEN_CELLS // n)
    out = np.empty(thetas.shape[0])
    for start in range(0, thetas.shape[0], chunk):
        with np.errstate(all="ignore"):
            r = _residuals(stage, data, thetas[start:start + chunk])
            val = huber(r.real, delta).sum(axis=1)
        val[~np.isfinite(val) | np.isnan(r).any(axis=1)] = np.inf
        out[start:start + chunk] = val
    return out


def _value_and_grad(stage: Stage, data: dict, delta: float):
    p = stage.n_params_fitted
    eye = np.eye(p) * _STEP

    def fun(theta: np.ndarray):
        with np.errstate(all="ignore"):
            # The value in real arithmetic first: a log of a negative number (N_eff ≤ 0) is NaN
            # here, whereas complex arithmetic would quietly take a branch of it.
            rr = _residuals(stage, data, theta[None, :])[0]
            if not np.all(np.isfinite(rr)):
                return _BAD, np.zeros(p)
            r = _residuals(stage, data, theta[None, :] + 1j * eye)   # (p, n) complex
        if not np.all(np.isfinite(r.imag)):
            return _BAD, np.zeros(p)
        dr = r.imag / _STEP                               # (p, n): ∂r/∂θ_j
        psi = np.clip(rr, -delta, delta)
        return float(huber(rr, delta).sum()), dr @ psi

    return fun


def _lbfgs(stage: Stage, data: dict, start: np.ndarray, delta: float):
    bounds = [stage.bounds[k] for k in stage.param_names]
    start = np.clip(start, [b[0] for b in bounds], [b[1] for b in bounds])
    res = minimize(_value_and_grad(stage, data, delta), start, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 5000, "maxfun": 20000, "ftol": 1e-15, "gtol": 1e-12})
    return res


def _r2_mse(y: np.ndarray, pred: np.ndarray, scale: float | None = None) -> tuple[float, float]:
    resid = y - pred
    mse = float(np.mean(resid**2))
    sst = float(np.sum((y - y.mean()) ** 2))
    # y constant up to rounding: copies of one value leave SS_tot ~ n·(eps·|y|)² from the mean's
    # rounding alone (2e-30 for ten copies of 2.345), which would make any fit look perfect
    scale = float(np.max(np.abs(y))) if scale is None or not len(y) else scale
    undefined = sst <= len(y) * (16 * np.finfo(float).eps * scale) ** 2
    r2 = math.nan if undefined else 1.0 - float(np.sum(resid**2)) / sst
    return r2, mse


def r2_mse(y, pred) -> tuple[float, float]:
    """R² = 1 − SS_res/SS_tot (about the mean of ``y``) and the mean squared error.

    Args:
        y: (n,) observed; pred: (n,) predicted.

    Returns:
        (R², MSE); R² is NaN when ``y`` is constant (to within 16 float64 eps of its largest
        magnitude per point: its variance is then rounding, and R² undefined).
    """
    return _r2_mse(np.asarray(y, dtype=float), np.asarray(pred, dtype=float))


def _fit_data(stage: Stage, data: dict, delta: float, n_refine: int | None,
              extra_starts: np.ndarray | None = None):
    grid = stage.grid_points()
    if extra_starts is not None and len(extra_starts):
        grid = np.vstack([np.atleast_2d(extra_starts), grid])
    values = _objective_many(stage, data, grid, delta)
    order = np.argsort(values, kind="stable")
    order = order[np.isfinite(values[order])]
    if not len(order):
        raise ValueError(f"stage {stage.name!r}: the model is undefined at every grid point "
                         "(check the data's units and the fixed constants)")
    k = len(order) if n_refine is None else min(n_refine, len(order))
    if extra_starts is not None and len(extra_starts):  # always refine from the given starts
        chosen = list(dict.fromkeys([*range(len(np.atleast_2d(extra_starts))), *order[:k].tolist()]))
    else:
        chosen = order[:k].tolist()
    results = [_lbfgs(stage, data, grid[i], delta) for i in chosen]
    objs = np.array([r.fun for r in results])
    best = results[int(np.argmin(objs))]
    n_at_best = int(np.sum(objs <= best.fun * (1 + 1e-6) + 1e-15))
    return best, len(grid), len(chosen), n_at_best


def predict(stage: Stage, frame: pd.DataFrame, params: Mapping[str, float],
            fixed: Mapping[str, float] | None = None) -> np.ndarray:
    """The stage's prediction of its target (loss, or post-PTQ loss) for each row of ``frame``.

    Args:
        stage: the stage.
        frame: (n rows) as for ``fit_stage`` (the target column need not be there).
        params: the stage's natural constants (``FitResult.params``).
        fixed: the earlier stages' constants.

    Returns:
        (n,) predictions.
    """
    frame = frame.copy()
    if stage.target not in frame:
        frame[stage.target] = 1.0
    data = prepare(dataclasses.replace(stage, scale="linear", param_names=()), frame, fixed)
    consts = {k: np.asarray(v, dtype=float) for k, v in params.items()}
    return np.asarray(stage.loss(data, consts), dtype=float).reshape(-1)


def _params_of(stage: Stage, theta: np.ndarray) -> dict[str, float]:
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in stage.natural(theta[None, :]).items()}


@_one_blas_thread
def fit_stage(stage: Stage | str, frame: pd.DataFrame, fixed: Mapping[str, float] | None = None, *,
              delta: float = HUBER_DELTA, n_refine: int | None = -1,
              extra_starts: np.ndarray | None = None) -> FitResult:
    """Fit one stage: Huber (δ = 1e-3) on log-loss residuals, summed; L-BFGS-B from a grid.

    Args:
        stage: a ``Stage`` or a key of ``STAGES``.
        frame: (n rows) the observations (module docstring lists the columns).
        fixed: constants from earlier stages (``stage.requires_fixed``).
        delta: Huber's δ.
        n_refine: L-BFGS-B starts from the best screened grid points; -1 = the stage's default,
            ``None`` = every grid point.
        extra_starts: (s, p) raw starting points refined in addition to the grid's best.

    Returns:
        The fit (``FitResult``), without bootstrap or held-out scores. ``converged`` is False
        when the data have fewer distinct design points (``n_cells``) than fitted constants: the
        optimum is then not unique, whatever L-BFGS-B reports. ``on_bound`` lists the constants on
        a bound of the box and ``identified`` is False with any. ``r2`` is NaN when the target
        does not vary (R² undefined).

    Raises:
        ValueError: an unknown stage name (the message lists the known ones); as ``prepare``;
            or the model is undefined at every start.
    """
    stage = _get_stage(stage)
    data = prepare(stage, frame, fixed)
    best, n_starts, n_refined, n_at_best = _fit_data(
        stage, data, delta, stage.n_refine if n_refine == -1 else n_refine, extra_starts)
    theta = np.asarray(best.x, dtype=float)
    pred = np.asarray(stage.loss(data, stage.natural(theta[None, :])), dtype=float).reshape(-1)
    base = data[stage.baseline] if stage.baseline else 0.0
    r2, mse = _r2_mse(data["y"] - base, pred - base, scale=float(np.max(np.abs(data["y"]))))
    identifiable = int(data["n_cells"]) >= stage.n_params_fitted
    params = _params_of(stage, theta)
    on_bound = _on_bound(stage, params)
    converged = identifiable and _converged(stage, data, delta, theta, float(best.fun), n_refined, n_at_best)
    return FitResult(
        stage=stage.name, params=params, theta=theta.tolist(),
        fixed={k: float(v) for k, v in (fixed or {}).items()}, objective=float(best.fun),
        n_points=int(len(data["y"])), n_cells=int(data["n_cells"]), n_groups=int(len(set(data["groups"]))),
        n_starts=n_starts, n_refined=n_refined, n_at_best=n_at_best,
        converged=converged, r2=r2, mse=mse, on_bound=on_bound, identified=converged and not on_bound,
    )


# A fit has converged when its objective is finite (not the 1e30 of an undefined model), its projected
# gradient is below this relative to max(1, |objective|), and the starts that were refined agree.
GRAD_TOL = 1e-6


def _converged(stage: Stage, data: dict, delta: float, theta: np.ndarray, objective: float, n_refined: int,
               n_at_best: int) -> bool:
    """Objective finite and below ``_BAD``; projected gradient (bound-active components pointing out of
    the box dropped) at most ``GRAD_TOL``·max(1, |objective|); at least two starts at the best objective
    when more than one was refined. L-BFGS-B's own ``success`` is not read: it reports ABNORMAL at real
    optima (a line search that cannot improve in the last bits) and success at an objective of 1e30."""
    if not (math.isfinite(objective) and objective < _BAD):
        return False
    _, grad = _value_and_grad(stage, data, delta)(theta)
    grad = np.asarray(grad, dtype=float)
    lo = np.array([stage.bounds[k][0] for k in stage.param_names])
    hi = np.array([stage.bounds[k][1] for k in stage.param_names])
    span = 1e-9 * np.maximum(1.0, hi - lo)
    grad = np.where((theta <= lo + span) & (grad > 0), 0.0, grad)
    grad = np.where((theta >= hi - span) & (grad < 0), 0.0, grad)
    if not (np.all(np.isfinite(grad)) and float(np.max(np.abs(grad), initial=0.0)) <= GRAD_TOL * max(1.0, abs(objective))):
        return False
    return n_refined <= 1 or n_at_best >= 2


@_one_blas_thread
def bootstrap(stage: Stage | str, frame: pd.DataFrame, result: FitResult, n_boot: int = 200, *,
              seed: int = 0, fixed: Mapping[str, float] | None = None, group: str = "run_id",
              delta: float = HUBER_DELTA) -> np.ndarray:
    """Bootstrap the stage by resampling runs; fills ``result.ci95``, ``se``, ``n_boot(_ok)``.

    Each resample draws as many runs as there are, with replacement, keeps every row of each
    drawn run (repeats included), and refits with L-BFGS-B started at the full-data optimum (as
    Besiroglu et al. start theirs at Hoffmann's values). The earlier stages' constants stay fixed
    (the intervals are conditional on them). A resample with fewer distinct design points than
    parameters is skipped.

    Args:
        stage: the stage (or its name).
        frame: the frame ``result`` was fitted on.
        result: the full-data fit; updated in place.
        n_boot: number of resamples, an int ≥ 0 (0: nothing is drawn, the intervals stay empty).
        seed: seed of numpy's Generator (deterministic intervals).
        fixed: as for ``fit_stage``.
        group: the column whose values are resampled (``run_id``).
        delta: Huber's δ.

    Returns:
        (n_boot_ok, n_constants) the natural constants of each successful resample, in the order
        of ``result.params``.

    Raises:
        ValueError: an unknown stage name; `n_boot` not an int ≥ 0; as ``prepare``.
    """
    stage = _get_stage(stage)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be an int >= 0 (resamples to draw), got {n_boot!r}")
    frame = frame.reset_index(drop=True)
    data = prepare(stage, frame, fixed)
    groups = frame[group].astype(str).to_numpy() if group in frame else np.arange(len(frame)).astype(str)
    uniq = np.unique(groups)
    rows_of = {g: np.flatnonzero(groups == g) for g in uniq}
    cell_cols = [c for c in stage.cell if c in frame]
    cell_id = frame.groupby(cell_cols, sort=False).ngroup().to_numpy() if cell_cols else np.arange(len(frame))
    rng = np.random.default_rng(seed)
    names = list(result.params)
    draws = []
    start = np.asarray(result.theta, dtype=float)
    for _ in range(n_boot):
        pick = rng.choice(uniq, size=len(uniq), replace=True)
        idx = np.concatenate([rows_of[g] for g in pick])
        if len(np.unique(cell_id[idx])) < stage.n_params_fitted:
            continue
        res = _lbfgs(stage, _subset(data, idx), start, delta)
        if not np.isfinite(res.fun) or res.fun >= _BAD:
            continue
        p = _params_of(stage, np.asarray(res.x))
        draws.append([p[k] for k in names])
    arr = np.array(draws, dtype=float).reshape(-1, len(names))
    result.n_boot, result.n_boot_ok = n_boot, int(arr.shape[0])
    if arr.shape[0] >= 2:
        lo, hi = np.percentile(arr, [2.5, 97.5], axis=0)
        result.ci95 = {k: [float(lo[i]), float(hi[i])] for i, k in enumerate(names)}
        result.se = {k: float(arr[:, i].std(ddof=1)) for i, k in enumerate(names)}
    return arr


FoldConstants = Callable[[pd.DataFrame, object], Mapping[str, float]]


@_one_blas_thread
def holdout_predictions(stage: Stage | str, frame: pd.DataFrame, by: str = "n_params", *,
                        fixed: Mapping[str, float] | FoldConstants | None = None, delta: float = HUBER_DELTA,
                        n_refine: int | None = -1, which: str = "each") -> tuple[pd.DataFrame, int]:
    """Leave out one value of ``by`` at a time, fit the stage on the rest, predict the rows left out.

    Args:
        stage: the stage (or its name).
        frame: the observations.
        by: the column whose values are held out in turn (``n_params`` or ``n_tokens``).
        fixed: the earlier stages' constants, either one mapping for every fold (as for
            ``fit_stage``: fitted on all the data, so the held-out value reaches each fold's
            prediction through them) or a callable ``fixed(train, value)`` of the fold's training
            rows and the held-out value that returns the fold's constants (e.g. the earlier stages
            refitted without that value). A ValueError it raises skips the fold.
        delta: Huber's δ.
        n_refine: as for ``fit_stage``.
        which: ``"each"`` (every value in turn) or ``"largest"`` (only the largest value: an
            extrapolation test).

    Returns:
        ``(rows, folds_skipped)``: ``rows`` has one row per held-out row that a fold predicted, in
        fold order, indexed by its position in ``frame``, with columns ``fold`` (the held-out
        value), ``y`` and ``pred`` (the target and its prediction, each less ``stage.baseline``
        where the stage has one, so δ_PTQ or the paired difference); ``folds_skipped`` counts the
        folds with fewer than p + 1 distinct design points to fit on, no rows, or no fit.

    Raises:
        ValueError: an unknown stage name; `which` not ``"each"`` or ``"largest"``.
    """
    stage = _get_stage(stage)
    frame = frame.reset_index(drop=True)
    values = sorted(frame[by].unique())
    if which == "largest":
        values = values[-1:]
    elif which != "each":
        raise ValueError(f"which must be 'each' or 'largest'; got {which!r}")
    parts, skipped = [], 0
    cell_cols = [c for c in stage.cell if c in frame]
    for v in values:
        train, test = frame[frame[by] != v], frame[frame[by] == v]
        if train.drop_duplicates(cell_cols).shape[0] < stage.n_params_fitted + 1 or test.empty:
            skipped += 1
            continue
        try:
            consts = fixed(train, v) if callable(fixed) else fixed
            res = fit_stage(stage, train, consts, delta=delta, n_refine=n_refine)
        except ValueError:
            skipped += 1
            continue
        pred = predict(stage, test, res.params, consts)
        y = pd.to_numeric(test[stage.target]).to_numpy(dtype=float)
        if stage.baseline:
            base = pd.to_numeric(test[stage.baseline]).to_numpy(dtype=float)
            y, pred = y - base, pred - base
        parts.append(pd.DataFrame({"fold": v, "y": y, "pred": pred}, index=test.index))
    rows = pd.concat(parts) if parts else pd.DataFrame({"fold": [], "y": [], "pred": []})
    return rows, skipped


def holdout(stage: Stage | str, frame: pd.DataFrame, by: str = "n_params", *,
            fixed: Mapping[str, float] | FoldConstants | None = None, delta: float = HUBER_DELTA,
            n_refine: int | None = -1, which: str = "each") -> dict[str, float]:
    """Held-out R² and MSE: leave out one value of ``by`` (a model size, a data budget), fit the rest.

    Args:
        stage, frame, by, fixed, delta, n_refine, which: as for ``holdout_predictions`` (``fixed``
            a mapping holds the earlier stages at their fit to all the data; a callable refits
            them per fold).

    Returns:
        ``{"by", "which", "r2", "mse", "n_folds", "n_points", "folds_skipped"}``: R² and MSE of the
        stage's target (δ_PTQ for the PTQ stages, the difference for the paired ones) over the
        pooled held-out rows; NaN when no fold could be fitted (a fold needs at least p + 1
        distinct design points to fit on).

    Raises:
        ValueError: an unknown stage name; `which` not ``"each"`` or ``"largest"``.
    """
    rows, skipped = holdout_predictions(stage, frame, by, fixed=fixed, delta=delta, n_refine=n_refine, which=which)
    folds = int(rows["fold"].nunique())
    if not folds:
        return {"by": by, "which": which, "r2": math.nan, "mse": math.nan, "n_folds": 0,
                "n_points": 0, "folds_skipped": skipped}
    r2, mse = _r2_mse(rows["y"].to_numpy(dtype=float), rows["pred"].to_numpy(dtype=float))
    return {"by": by, "which": which, "r2": r2, "mse": mse, "n_folds": folds, "n_points": int(len(rows)),
            "folds_skipped": skipped}
