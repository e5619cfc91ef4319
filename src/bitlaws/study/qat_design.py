"""The QAT design sized for power (issue 15, item 6): before a sweep of tens of CPU-hours is
declared, the power of the rules it feeds on candidate designs, by the simulations of
:mod:`bitlaws.study.power` on our seed noise and fitted constants, beside each design's cost at the
tokens/s measured here. P4 reads the marginal sweeps (``power.p4_power``), P9 the matched QAT→PTQ
cells with P_post = P_w − 1 (``power.p9_power``); P10's own count of the FP/INT pairs it would need
is in its verdict. ``design_power_table`` is what ``python -m bitlaws design-power`` writes to
``data/runs/<profile>/qat_design_power.csv``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..laws import forms
from .._io import frame_sha256
from .noise import seed_block_anova
from .power import N_SIM, mc_interval, p4_power, p5_factorial_power, p9_power

__all__ = ["Candidate", "CANDIDATES", "candidate_frames", "seed_block_sd", "candidate_cells", "candidate_hours",
           "design_power_table", "write_design_power", "load_design_power", "design_power_view", "as_run_agreement",
           "agreement_sentence", "seed_choice", "seed_choice_sentence", "factorial_overlap",
           "block_sentence", "P4_REPLICATE_RNGS", "p4_replicate_power", "write_p4_replicates",
           "load_p4_replicates", "p4_replicate_summary", "replicate_sentence", "p9_design_sentence",
           "P9_SEED_COUNTS", "P9_REPLICATES", "p9_seed_power", "matched_size_sd", "matched_grid_hours",
           "matched_grid_cost",
           "p9_seed_cost", "p9_seed_sentence", "p9_seed_view"]

_PARTS = ("w", "a", "kv")


@dataclass(frozen=True)
class Candidate:
    """One design a rule could be run on.

    Args:
        claim: ``"P4"`` (the three marginal sweeps: each part alone at each P), ``"P9"`` (weights
            trained at P_w, then RTN to P_post = P_w − 1, beside the high-precision model at P_post)
            or ``"P5"`` (every (P_w, P_a, P_kv) in ``bits``³ but all-16 at each (N, D): the marginals
            and the mixed runs of a full factorial).
        name: a short label. sizes: model sizes (``bitlaws.model`` names). budgets: D [tokens].
        bits: the training widths P. seeds: seeds per (N, D, P) cell (and of the high-precision twins).
    """

    claim: str
    name: str
    sizes: tuple[str, ...]
    budgets: tuple[int, ...]
    bits: tuple[int, ...]
    seeds: int

    def __post_init__(self) -> None:
        if self.claim not in ("P4", "P5", "P9"):
            raise ValueError(f"Candidate.claim must be 'P4', 'P5' or 'P9'; got {self.claim!r}")
        if self.seeds < 1 or not self.sizes or not self.budgets or not self.bits:
            raise ValueError(f"Candidate {self.name!r}: needs ≥ 1 seed and non-empty sizes, budgets and bits")
        if self.claim == "P9" and min(self.bits) < 3:
            raise ValueError(f"Candidate {self.name!r}: P9 needs P_w ≥ 3 (P_post = P_w − 1 ≥ 2); got {self.bits}")

    @property
    def qat_runs(self) -> int:
        """Low-precision training runs of the design (P4: one per part; P5: the factorial's cells)."""
        cells = len(self.sizes) * len(self.budgets) * self.seeds
        if self.claim == "P5":
            return cells * (len(self.bits) ** 3 - (forms.HIGH_PRECISION_BITS in self.bits))
        return (3 if self.claim == "P4" else 1) * cells * len(self.bits)


_AS_RUN = (("n27k", "n83k", "n214k"), (1_048_576, 2_097_152), (3, 4, 5, 6, 8, 12))
_WIDE = (("n27k", "n83k", "n214k", "n554k", "n1.2m"), (2_097_152, 8_388_608), (3, 4, 5, 6))

# The designs the table compares: the marginal sweeps as run (1 seed) and with more seeds, and the
# issue's design (all five sizes, D up to 8.4M, P ∈ 3–6) for P4 and for P9's matched grid.
CANDIDATES: tuple[Candidate, ...] = (
    *(Candidate("P4", f"marginal sweeps as run, {k} seed{'s' * (k > 1)}", *_AS_RUN, k) for k in (1, 2, 3, 5)),
    *(Candidate("P4", f"5 sizes, D 2.1M/8.4M, P 3-6, {k} seed{'s' * (k > 1)}", *_WIDE, k) for k in (1, 2)),
    *(Candidate("P9", f"5 sizes, D 2.1M/8.4M, P_w 3-6, P_post = P_w - 1, {k} seed{'s' * (k > 1)}", *_WIDE, k)
      for k in (1, 2)),
    *(Candidate("P5", f"factorial (w, a, kv) in {{4, 8, 16}}^3 at n83k, D 2.1M, {k} seed{'s' * (k > 1)}",
                ("n83k",), (2_097_152,), (4, 8, 16), k) for k in (1, 2, 3)),
)


def _n_params(size: str) -> float:
    from ..model import get_size, hand_count_n_params

    return float(hand_count_n_params(get_size(size)))


def candidate_frames(c: Candidate, committed_hp: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """P4's simulated design: the ``neff_w``, ``neff_a``, ``neff_kv`` frames of ``c`` and its
    ``chinchilla`` frame (one row per run; ``loss_val`` is a placeholder the simulation replaces), as
    ``law_fits.stage_frames`` gives them.

    The ``chinchilla`` frame holds the high-precision runs the fits would refit Chinchilla on: the
    committed ones (``committed_hp``: ``stage_frames(df)["chinchilla"]``, each (N, D, seed) once) and
    the candidate's twins, one per (size, D, seed) of ``c`` not already among them (``c.seeds``
    seeds: seed 0 and those the ``qat_seeds`` sweep adds).

    Raises:
        ValueError: ``committed_hp`` lacks ``n_params``, ``n_tokens`` or ``seed``.
    """
    out = {}
    for x in _PARTS:
        rows = [{"run_id": f"{x}-{z}-{d}-{b}-{s}", "n_params": _n_params(z), "n_tokens": float(d), "bits_w": 16,
                 "bits_a": 16, "bits_kv": 16, f"bits_{x}": b, "seed": s, "loss_val": 1.0}
                for z, d, b, s in itertools.product(c.sizes, c.budgets, c.bits, range(c.seeds))]
        out[f"neff_{x}"] = pd.DataFrame(rows)
    key = ["n_params", "n_tokens", "seed"]
    have = set()
    if committed_hp is not None and len(committed_hp):
        missing = [k for k in key if k not in committed_hp]
        if missing:
            raise ValueError(f"candidate_frames: committed_hp lacks {missing}; it needs {key} "
                             "(stage_frames(df)['chinchilla'])")
        have = {(float(n), float(d), int(s)) for n, d, s in committed_hp[key].itertuples(index=False)}
    twins = {(_n_params(z), float(d), s) for z, d, s in itertools.product(c.sizes, c.budgets, range(c.seeds))}
    hp = sorted(have | twins)
    out["chinchilla"] = pd.DataFrame([{"run_id": f"hp-{n:.0f}-{d:.0f}-{s}", "n_params": n, "n_tokens": d,
                                       "bits_w": 16, "bits_a": 16, "bits_kv": 16, "seed": s, "loss_val": 1.0,
                                       "committed": (n, d, s) in have} for n, d, s in hp])
    return out


def seed_block_sd(df: pd.DataFrame) -> dict[str, float]:
    """σ_seed of the committed high-precision runs: ``noise.seed_block_anova`` of
    ``law_fits.stage_frames(df)['chinchilla']`` (``df``: training rows, ``load_runs``); its keys and NaNs."""
    from .law_fits import stage_frames

    return seed_block_anova(stage_frames(df)["chinchilla"])


def candidate_cells(c: Candidate, eq2: dict[str, float]) -> pd.DataFrame:
    """P9's simulated design: ``power.p9_cells``' columns for the matched grid of ``c`` (P_post =
    P_w − 1, ``seeds`` runs on each side), with δ_hp from Eq. 2 with ``eq2`` (C_T, γ_D, γ_N, γ_post:
    our RTN fit), which the simulation uses only to set the scale of the paper's C_T."""
    rows = []
    for z, d, b in itertools.product(c.sizes, c.budgets, c.bits):
        n = _n_params(z)
        hp = float(forms.delta_ptq(n, float(d), float(b - 1), eq2))
        rows.append({"n_params": n, "n_tokens": float(d), "bits_post": b - 1, "bits_w": b, "delta_low": hp,
                     "k_low": c.seeds, "delta_hp": hp, "k_hp": c.seeds, "closest": True})
    return pd.DataFrame(rows)


def candidate_hours(c: Candidate, profile: str = "cpu", throughput=None,
                    committed_hp: pd.DataFrame | None = None) -> float:
    """CPU-hours to train ``c``'s low-precision runs and its high-precision twins (P4, P9), at the
    measured tokens/s (``budget.default_throughput``), each run timed by ``budget.run_seconds`` as
    ``budget.estimate`` times it, with two evaluations. NaN without a throughput. The twins are
    those of ``candidate_frames`` not in ``committed_hp`` (``design_power_table`` passes the committed
    runs for P4 and P9, so a twin the base grid's seeds already trained is not priced again; without it:
    every seed beyond 0, seed 0 being the base grid's); P5's factorial trains one all-16 run per seed
    (its seed block's baseline) whatever is committed."""
    from .budget import default_throughput, run_seconds
    from .sweep import PROFILES, _model

    prof = PROFILES[profile]
    tp = throughput or default_throughput(profile)
    if tp is None:
        return math.nan
    secs = 0.0
    per_cell = c.qat_runs / (len(c.sizes) * len(c.budgets))
    eval_tokens = prof.train.eval_tokens * 2  # two evaluations of each run
    if c.claim == "P5":  # each seed's all-16 run (rule v5's seed block needs its own baseline)
        twins = {(z, d): c.seeds for z, d in itertools.product(c.sizes, c.budgets)}
    elif committed_hp is None:
        twins = {(z, d): c.seeds - 1 for z, d in itertools.product(c.sizes, c.budgets)}
    else:
        hp = candidate_frames(c, committed_hp)["chinchilla"]
        new = hp[~hp["committed"]]
        twins = {(z, d): int(((new["n_params"] == _n_params(z)) & (new["n_tokens"] == float(d))).sum())
                 for z, d in itertools.product(c.sizes, c.budgets)}
    for z, d in itertools.product(c.sizes, c.budgets):
        m = _model(z, prof)
        secs += per_cell * run_seconds(tp, m, prof.train.seq_len, d, eval_tokens, quantized=True)
        secs += twins.get((z, d), 0) * run_seconds(tp, m, prof.train.seq_len, d, eval_tokens, quantized=False)
    return secs / 3600


# P4 rule v6's variants, each one's power a column of the table (``power_<variant>``).
_P4_VARIANT_COLUMNS = tuple(f"power_{v}" for v in ("floor_0.02", "floor_0.05", "floor_0.2", "no_pa3"))


def _p4_sim_inputs(df: pd.DataFrame) -> tuple:
    """What P4's design simulations read from the committed training rows ``df``: the RTN noise model,
    ``seed_block_sd``'s record, σ_seed as simulated (its point estimate capped at one run's σ; 0 where
    not estimable), the committed high-precision runs (``stage_frames(df)["chinchilla"]``) and the rows' hash."""
    from .law_fits import stage_frames
    from .noise import noise_model

    noise = noise_model(df, "rtn")
    block = seed_block_sd(df)
    seed_sd = min(block["sd"], noise.loss_sd) if math.isfinite(block["sd"]) else 0.0
    return noise, block, seed_sd, stage_frames(df)["chinchilla"], frame_sha256(df)


def design_power_table(profile: str = "cpu", candidates: Sequence[Candidate] = CANDIDATES, n_sim: int = N_SIM,
                       seed: int = 0, progress: bool = False, root: str | None = None,
                       independent: tuple[tuple[str, int], ...] = (("as run", 1), ("as run", 5)),
                       seed_ends: str = "as run", claims: Sequence[str] | None = None) -> pd.DataFrame:
    """The power of P4's, P5's and P9's rules on each candidate design, with its cost.

    Reads the profile's committed rows for the seed noise (``noise.noise_model``, RTN; σ_seed,
    ``seed_block_sd``) and the fits for the constants the simulations draw from (Chinchilla for P4
    and P5, Eq. 2 of RTN for P9). P4 refits Chinchilla on each simulated dataset's high-precision
    runs (``candidate_frames``' ``chinchilla`` frame: the committed runs and the candidate's twins),
    as the fits' own P4 simulation does, with the seed block σ_seed shared by the runs of one
    (N, seed); ``power_independent`` is the same simulation with σ_seed = 0 (the same draws
    otherwise), on the candidates named in ``independent`` (name part, seeds: the as-run family's
    ends, 1 and 5 seeds).
    P5 simulates rule v5 on the seed-blocked factorial (``power.p5_factorial_power``: the pooled σ, a
    share ρ ∈ ``power.P5_RHOS`` of it a seed block; ``power`` is the least over ρ, the unfavourable
    end) with its constants held; P9 holds its constants and treats runs as independent.

    P4's power is that of its rule version 6 (``power.p4_power``'s ``power``): a simulated dataset
    passes only where the fit on every run and the fit without the P_a ≤ 3 runs both pass it, at the
    least favourable of the three floors (0.02, 0.05, 0.2) the full design's clipped rows are
    generated from. This is how the table meets the full design's misspecification (the paper's
    family, undefined at f ≤ 0, fitted to data generated from its clipped extension, so that at
    P_a = 3 no member of the fitted family is the truth): it is not repaired, since the real N_eff
    fit fits that same family, but no pass is counted that the correctly specified design without
    those rows does not also give, and none that depends on the floor. Each variant's own power is
    a column beside it. (Written before the table was regenerated under this rule.) On the
    candidates whose name contains ``seed_ends`` (the as-run family, whose seed count the
    ``qat_seeds`` sweep declares) the power is also simulated at σ_seed's interval ends
    (``seed_block_sd``: ``lo``, and ``hi`` capped at one run's σ, the whole seed noise then
    shared; the paper's hypothesis alone, ``power_only``), and ``power_seed_min``, the least of the
    three, is what ``seed_choice`` reads: the seed count is chosen at the unfavourable end of
    σ_seed's interval.

    Returns:
        One row per candidate: ``claim``, ``design``, ``sizes``, ``budgets``, ``bits`` (";"-joined),
        ``seeds``, ``qat_runs``, ``hp_twins`` (high-precision runs the candidate adds), ``hp_runs`` (P4:
        the runs Chinchilla is refitted on; 0 elsewhere), ``cpu_hours``, ``power``, ``power_partly``,
        ``false_positive``, ``power_independent`` (NaN where not simulated), ``n_sim``, ``loss_sd``
        (one run's seed σ, nats), ``seed_sd`` (σ_seed used by P4; 0 elsewhere), ``seed_sd_lo``,
        ``seed_sd_hi`` (its 95 % interval), ``chinchilla_refit`` (1.0 or 0.0), ``inputs_sha256`` (of the
        training rows read); P4 rows also ``power_floor_0.02``, ``power_floor_0.05``, ``power_floor_0.2``,
        ``power_no_pa3`` (each variant alone, rule v5's reading), ``power_seed_lo``, ``power_seed_hi``
        (rule v6's power at σ_seed = ``seed_sd_lo`` and min(``seed_sd_hi``, ``loss_sd``); NaN outside
        the ``seed_ends`` family) and ``power_seed_min`` (the least of ``power`` and those two), NaN
        elsewhere. ``claims``: simulate only these claims' candidates (default: all).

    Raises:
        FileNotFoundError: no rows or no fits for ``profile`` (``python -m bitlaws fit``).
        ValueError: a fit the simulations need is missing.
    """
    from tqdm.auto import tqdm

    from .law_fits import TRAINING_EXPERIMENTS, load_fits, params_of
    from .store import load_runs

    df = load_runs(profile, experiment=TRAINING_EXPERIMENTS, root=root)
    fits = load_fits(profile, root)
    chin, eq2 = params_of(fits.get("chinchilla")), params_of(fits.get("ptq"))
    if chin is None or eq2 is None:
        raise ValueError(f"design_power_table needs the chinchilla and ptq fits of {profile!r}; run "
                         f"`python -m bitlaws fit --profile {profile}`")
    noise, block, seed_sd, committed, read = _p4_sim_inputs(df)
    out = []
    ends = {"lo": min(block["lo"], noise.loss_sd), "hi": min(block["hi"], noise.loss_sd)} \
        if math.isfinite(block["lo"]) and math.isfinite(block["hi"]) else {}
    todo = [c for c in candidates if claims is None or c.claim in claims]
    for c in tqdm(todo, desc="design power", disable=not progress):
        indep, hp_runs, twins = math.nan, 0, 0
        extra = {k: math.nan for k in (*_P4_VARIANT_COLUMNS, "power_seed_lo", "power_seed_hi", "power_seed_min")}
        if c.claim == "P4":
            frames = candidate_frames(c, committed)
            hp_runs, twins = len(frames["chinchilla"]), int((~frames["chinchilla"]["committed"]).sum())
            pw = p4_power(frames, chin, noise, n_sim=n_sim, seed=seed, seed_sd=seed_sd)
            extra.update({k: pw[k] for k in _P4_VARIANT_COLUMNS})
            at = {}
            if seed_ends in c.name and ends:
                at = {k: p4_power(frames, chin, noise, n_sim=n_sim, seed=seed, seed_sd=v, power_only=True)["power"]
                      for k, v in ends.items()}
                extra.update({"power_seed_lo": at["lo"], "power_seed_hi": at["hi"]})
            extra["power_seed_min"] = min([pw["power"], *at.values()])
            if ends.get("lo") == 0.0 and "lo" in at:
                indep = at["lo"]
            elif any(name in c.name and c.seeds == k for name, k in independent):
                indep = p4_power(frames, chin, noise, n_sim=n_sim, seed=seed, power_only=True)["power"]
        elif c.claim == "P5":  # rule v5 on the seed-blocked factorial, the least power over ρ (its unfavourable end)
            pw = p5_factorial_power(_n_params(c.sizes[0]), float(c.budgets[0]), chin, noise.loss_sd, c.seeds,
                                    n_sim=n_sim, seed=seed)
            twins = len(c.sizes) * len(c.budgets) * c.seeds  # each seed's all-16 run, its own block's baseline
        else:  # the twins a seed adds: those not among the committed high-precision runs (as P4 counts them)
            pw = p9_power(candidate_cells(c, eq2), eq2, noise, n_sim=n_sim, seed=seed)
            twins = int((~candidate_frames(c, committed)["chinchilla"]["committed"]).sum())
        p4 = c.claim == "P4"
        out.append({"claim": c.claim, "design": c.name, "sizes": ";".join(c.sizes),
                    "budgets": ";".join(map(str, c.budgets)), "bits": ";".join(map(str, c.bits)), "seeds": c.seeds,
                    "qat_runs": c.qat_runs, "hp_twins": twins, "hp_runs": hp_runs,
                    "cpu_hours": candidate_hours(c, profile, committed_hp=None if c.claim == "P5" else committed),
                    "power": pw["power"], "power_partly": pw["power_partly"], "false_positive": pw["false_positive"],
                    "power_independent": indep, "n_sim": pw["n_sim"], "loss_sd": noise.loss_sd,
                    "seed_sd": seed_sd if p4 else 0.0, "seed_sd_lo": block["lo"] if p4 else math.nan,
                    "seed_sd_hi": block["hi"] if p4 else math.nan,
                    "chinchilla_refit": float(pw.get("chinchilla_refit", 0.0)), "inputs_sha256": read, **extra})
    return pd.DataFrame(out)


def write_design_power(profile: str = "cpu", n_sim: int = 100, progress: bool = True,
                       root: str | None = None, claims: Sequence[str] | None = None) -> Path:
    """``design_power_table`` of the rows and fits under ``root`` (default ``data_dir()``), written to
    ``<root>/runs/<profile>/qat_design_power.csv`` (atomically), each row with ``experiment``
    (``qat_design_power``), ``profile``, ``git_sha`` and ``timestamp``. With ``claims``, only those
    claims' rows are simulated; the other claims' rows of the file already there are kept as they
    are (with their own ``git_sha`` and ``timestamp``), in the table's order.

    Returns:
        The path written.
    """
    import datetime as dt

    from .._io import git_sha, write_atomic
    from .store import data_dir

    tab = design_power_table(profile, n_sim=n_sim, progress=progress, root=root, claims=claims)
    tab.insert(0, "profile", profile)
    tab.insert(0, "experiment", "qat_design_power")
    tab["git_sha"] = git_sha()
    tab["timestamp"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = (Path(root) if root is not None else data_dir()) / "runs" / profile / "qat_design_power.csv"
    if claims is not None and path.exists():
        kept = pd.read_csv(path)
        kept = kept[~kept["claim"].isin(list(claims))]
        order = {c.name: i for i, c in enumerate(CANDIDATES)}
        tab = pd.concat([tab, kept], ignore_index=True)
        tab = tab.iloc[sorted(range(len(tab)), key=lambda i: order.get(tab["design"].iloc[i], len(order)))]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, tab.to_csv(index=False))
    return path


def load_design_power(profile: str = "cpu", root: str | None = None) -> pd.DataFrame | None:
    """The committed ``qat_design_power.csv`` of a profile (``write_design_power``), or None if absent."""
    from .store import data_dir

    path = (Path(root) if root is not None else data_dir()) / "runs" / profile / "qat_design_power.csv"
    return pd.read_csv(path) if path.exists() else None


def _rate_text(rate: float, n_sim: float) -> str:
    lo, hi = mc_interval(rate, n_sim)
    return "—" if not math.isfinite(lo) else f"{rate:.2f} [{lo:.2f}, {hi:.2f}]"


def design_power_view(tab: pd.DataFrame) -> pd.DataFrame:
    """The design-power table as a chapter shows it: each simulated rate with its Monte Carlo 95 %
    interval (``power.mc_interval``: Wilson, from ``n_sim`` datasets), so two candidates' powers
    are compared with the simulation's own error in view.

    Args:
        tab: ``design_power_table``'s rows (or the committed CSV, ``load_design_power``).

    Returns:
        Columns ``claim``, ``design``, ``QAT runs``, ``CPU-h``, ``power [95% MC]``, ``power, runs
        independent`` (σ_seed = 0; only where ``tab`` has ``power_independent``, "—" where not
        simulated), ``reproduced or partly``, ``false positive``, ``n_sim`` — one row per candidate.
    """
    cols = ("power", "power_partly", "false_positive") + (("power_independent",) if "power_independent" in tab else ())
    rate = {c: [_rate_text(r, n) for r, n in zip(tab[c], tab["n_sim"])] for c in cols}
    out = pd.DataFrame({"claim": tab["claim"], "design": tab["design"], "QAT runs": tab["qat_runs"],
                        "CPU-h": tab["cpu_hours"].round(1), "power [95% MC]": rate["power"],
                        "reproduced or partly": rate["power_partly"], "false positive": rate["false_positive"],
                        "n_sim": tab["n_sim"].astype(int)})
    if "power_independent" in rate:
        out.insert(5, "power, runs independent", rate["power_independent"])
    return out


def as_run_agreement(tab: pd.DataFrame, p4_power_record: dict | None) -> dict[str, float]:
    """How far apart two Monte Carlo estimates of P4's power on the design as run are.

    The design table's "marginal sweeps as run, 1 seed" row and the power stored with the fits
    (``pipeline_boot``'s ``p4_power``, from ``law_fits.pipeline_bootstrap``) simulate the rule on the
    same rows with different generator seeds and dataset counts (and the table with a seed block,
    ``seed_sd``; its ``power_independent`` is without, as the fits). The difference is reported with its
    95 % interval, ± 1.96·sqrt(p₁(1 − p₁)/n₁ + p₂(1 − p₂)/n₂): an interval that holds 0 says the two
    cannot be told apart at this Monte Carlo precision, not that they agree.

    Args:
        tab: the design-power rows. p4_power_record: the stored ``p4_power`` dict (``power``, ``n_sim``).

    Returns:
        ``table_power``, ``table_n``, ``table_lo``, ``table_hi``, ``fits_power``, ``fits_n``, ``fits_lo``,
        ``fits_hi``, ``diff`` (table − fits), ``diff_lo``, ``diff_hi``, ``z`` (diff over its standard
        error), ``table_independent`` (the table's σ_seed = 0 power, NaN if absent), ``table_seed_sd``,
        ``table_refit`` and ``fits_refit`` (1.0 where that simulation refitted Chinchilla per
        dataset); NaN where either estimate is missing.
    """
    row = tab[(tab["claim"] == "P4") & (tab["seeds"] == 1) & tab["design"].str.contains("as run")]
    nan = math.nan

    def col(name):
        return float(row[name].iloc[0]) if len(row) and name in row else nan

    p1, n1 = col("power"), col("n_sim")
    rec = p4_power_record or {}
    p2, n2 = float(rec.get("power", nan)), float(rec.get("n_sim", nan))
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2) if all(map(math.isfinite, (p1, n1, p2, n2))) else nan
    diff = p1 - p2
    z = diff / se if math.isfinite(se) and se > 0 else nan
    half = 1.959963984540054 * se
    (l1, h1), (l2, h2) = mc_interval(p1, n1), mc_interval(p2, n2)
    return {"table_power": p1, "table_n": n1, "table_lo": l1, "table_hi": h1,
            "fits_power": p2, "fits_n": n2, "fits_lo": l2, "fits_hi": h2, "diff": diff,
            "diff_lo": diff - half, "diff_hi": diff + half, "z": z, "table_independent": col("power_independent"),
            "table_seed_sd": col("seed_sd"), "table_refit": col("chinchilla_refit"),
            "fits_refit": float(rec.get("chinchilla_refit", 0.0))}


def agreement_sentence(agree: Mapping[str, float] | None) -> str:
    """``as_run_agreement``'s numbers in a sentence for the chapter: each power with its 95 % MC
    interval and their difference with its own; "cannot be told apart at this Monte Carlo precision"
    where that interval holds 0 (never "agree")."""
    if not agree or not all(math.isfinite(agree[k]) for k in ("table_power", "fits_power", "diff_lo")):
        return "One of the two estimates is missing, so they cannot be compared yet."
    a = agree
    held = a["diff_lo"] <= 0 <= a["diff_hi"]
    verdict = ("the interval holds 0, so the two cannot be told apart at this Monte Carlo precision (which does "
               "not make them equal), and these binomial brackets understate P4's simulation error (the replicate "
               "and pool simulations below measure it)" if held else
               "the interval excludes 0: they differ beyond binomial Monte Carlo error, which understates P4's "
               "simulation error (the replicate and pool simulations below measure it), so the difference may "
               "still be Monte Carlo error")
    why = ""
    if a.get("table_refit") == 1.0 and a.get("fits_refit") == 1.0:
        why = " Both refit the Chinchilla constants on each simulated dataset's own high-precision runs."
    elif a.get("fits_refit") == 1.0:
        why = (" The fits' simulation refits the Chinchilla constants on each simulated dataset; this table "
               "holds them at their fit, so its P4 powers are optimistic.")
    if math.isfinite(a.get("table_independent", math.nan)) and a.get("table_seed_sd", 0.0) > 0:
        why += (f" The table's row carries the seed block (σ_seed = {a['table_seed_sd']:.4f} nats), the fits' "
                f"simulation does not; without it the table gives {a['table_independent']:.2f}.")
    return (f"The table gives {a['table_power']:.2f} [{a['table_lo']:.2f}, {a['table_hi']:.2f}] from "
            f"{a['table_n']:.0f} datasets, the fits {a['fits_power']:.2f} [{a['fits_lo']:.2f}, "
            f"{a['fits_hi']:.2f}] from {a['fits_n']:.0f}; the difference is {a['diff']:+.2f} "
            f"[{a['diff_lo']:+.2f}, {a['diff_hi']:+.2f}]: {verdict}.{why}")


def seed_choice(tab: pd.DataFrame, target: float = 0.8, claim: str = "P4", design: str = "as run") -> dict:
    """The fewest seeds of one family of candidates (``claim``'s designs whose name contains
    ``design``: P4's marginal sweeps as run by default) whose simulated power reaches ``target``.
    For P4 the power read is ``power_seed_min`` where the table has it (the least over σ_seed's
    interval ends and its point, ``design_power_table``), else ``power``.

    Args:
        tab: the design-power rows. target: the power wanted. claim, design: the family.

    Returns:
        ``simulated`` (the seed counts in the table, sorted), ``by_point`` (the fewest whose power ≥
        ``target``), ``by_interval`` (the fewest whose MC interval's lower end ≥ ``target``; the
        stricter reading), each None if no count reaches it, ``power``: seeds -> (power, lo, hi), and
        ``column`` (the column read).
    """
    rows = tab[(tab["claim"] == claim) & tab["design"].str.contains(design, regex=False)].sort_values("seeds")
    col = "power_seed_min" if claim == "P4" and "power_seed_min" in rows and rows["power_seed_min"].notna().all() \
        and len(rows) else "power"
    power = {int(r.seeds): (float(getattr(r, col)), *mc_interval(float(getattr(r, col)), float(r.n_sim)))
             for r in rows.itertuples()}
    by_point = next((k for k, v in power.items() if v[0] >= target), None)
    by_interval = next((k for k, v in power.items() if v[1] >= target), None)
    return {"simulated": sorted(power), "by_point": by_point, "by_interval": by_interval, "power": power,
            "target": target, "column": col}


def seed_choice_sentence(choice: Mapping, declared_seeds: int, sweep: str = "qat_seeds") -> str:
    """``seed_choice`` beside the seeds the profile declares (for P4: seed 0 plus
    ``PowerPlan.marginal_seeds``, the ``qat_seeds`` sweep; for P5: ``factorial_seeds``), and how the declared
    count compares with the fewest the table asks for (more, as many, fewer). It does not say why the
    counts differ: a declared count is fixed when its sweep is registered, the chapter says so."""
    sims = ", ".join(map(str, choice["simulated"]))
    k = choice["by_interval"] or choice["by_point"]
    if k is None:
        return (f"No simulated seed count ({sims}) reaches power {choice['target']:.1f}; the profile declares "
                f"{declared_seeds} seeds.")
    p, lo, hi = choice["power"][k]
    how = "whose interval lies above" if choice["by_interval"] == k else "whose point estimate reaches"
    gap = [n for n in range(1, max(choice["simulated"]) + 1) if n not in choice["simulated"]]
    missing = f"; {', '.join(map(str, gap))} not simulated, so fewer might do" if gap and min(gap) < k else ""
    than = ("as many as this table asks" if declared_seeds == k else
            f"{'more' if declared_seeds > k else 'fewer'} than the {k} this table asks")
    return (f"Of the simulated seed counts {sims}, the fewest {how} {choice['target']:.1f} is {k} "
            f"({p:.2f} [{lo:.2f}, {hi:.2f}]{missing}); the profile declares {declared_seeds} "
            f"({'seed 0 and ' if sweep == 'qat_seeds' else ''}`{sweep}`), {than}.")


def factorial_overlap(profile: str = "cpu", seeds: Sequence[int] | None = None, root: str | None = None) -> dict:
    """Which of the factorial's runs (``qat_factorial``, at ``seeds``; default the declared
    ``PowerPlan.factorial_seeds``) are runs whose rows other experiments have committed, or runs
    another declared sweep trains: a ``run_id`` leaves the experiment out, so such a run is the same
    model, seen (or to be seen) outside the factorial. A guard of the factorial's registration, it reads
    every row in the CSVs, those written after the data freeze (``store.ROWS_READ_UNTIL``) included: a
    run seen anywhere counts.

    Returns:
        ``runs`` (the factorial's runs at ``seeds``), ``committed`` (of them, with rows committed
        under another experiment), ``committed_by`` (experiment -> count), ``planned_elsewhere`` (of
        them, declared by another sweep), ``seeds`` (the seeds read).

    Raises:
        ValueError: ``profile`` declares no QAT design (``Profile.power_design``).
    """
    import dataclasses

    from .store import data_dir
    from .sweep import PROFILES, _BUILDERS, declared_experiments, qat_factorial

    prof = PROFILES[profile]
    if prof.power_design is None:
        raise ValueError(f"profile {profile!r} declares no QAT design (power_design); allowed: "
                         f"{sorted(p for p, v in PROFILES.items() if v.power_design is not None)}")
    seeds = tuple(prof.power_design.factorial_seeds if seeds is None else seeds)
    fac = {s.run_id for s in qat_factorial(dataclasses.replace(
        prof, power_design=dataclasses.replace(prof.power_design, factorial_seeds=seeds)))}
    elsewhere = {s.run_id for e in declared_experiments(profile) if e != "qat_factorial" for s in _BUILDERS[e](prof)}
    by: dict[str, int] = {}
    committed: set = set()
    folder = (Path(root) if root is not None else data_dir()) / "runs" / profile
    for f in sorted(folder.glob("*.csv")):
        if f.name.endswith("_curves.csv") or f.name.startswith("qat_factorial"):
            continue
        if {"run_id", "experiment"} <= set(pd.read_csv(f, nrows=0).columns):
            rows = pd.read_csv(f, usecols=["run_id", "experiment"])
            rows = rows[rows["run_id"].isin(fac)]
            committed |= set(rows["run_id"])
            for e, g in rows.groupby("experiment"):
                by[str(e)] = by.get(str(e), 0) + int(g["run_id"].nunique())
    return {"runs": len(fac), "committed": len(committed), "committed_by": by,
            "planned_elsewhere": len(fac & elsewhere), "seeds": seeds}


def block_sentence(block: Mapping[str, float], tab: pd.DataFrame) -> str:
    """``seed_block_sd``'s estimate and its effect on P4's power (``power`` against
    ``power_independent`` on the as-run rows that have both), in sentences for the chapter."""
    if not math.isfinite(block.get("sd", math.nan)):
        return ("No size has two cells trained with the same seeds, so the part of the seed noise that runs of one "
                "seed share cannot be estimated; P4's simulation treats runs as independent.")
    text = (f"Within the sizes that have several seeded cells ({block['n_cells']:.0f} cells at {block['n_sizes']:.0f} "
            f"size{'s' * (block['n_sizes'] > 1)}), a two-way analysis of variance of the high-precision loss (D cell × "
            f"seed) puts σ_seed = {block['sd']:.4f} [{block['lo']:.4f}, {block['hi']:.4f}] nats in a part that every "
            f"run of one size and seed shares (F = {block['f']:.2f} on {block['dof_seed']:.0f} and "
            f"{block['dof_resid']:.0f} degrees of freedom, p = {block['p']:.3f}; residual σ {block['resid_sd']:.4f}).")
    if (block["p"] < 0.05) != (block["lo"] > 0):  # the one-sided test and the two-sided interval read differently
        text += (" The F test is one-sided (σ_seed = 0 against σ_seed > 0, at 5 %) and the interval two-sided (2.5 % "
                 "in each tail, its lower end truncated at 0), so " + (
                     "the test rejects σ_seed = 0 while the interval still reaches it: the block is detected at 5 % "
                     "one-sided and no more." if block["p"] < 0.05 else
                     "the interval excludes 0 while the one-sided test does not reject it."))
    if math.isfinite(block.get("cross_size_corr", math.nan)):
        text += (f" Between sizes, which share only the data order, the seed deviations correlate at "
                 f"{block['cross_size_corr']:+.2f} on average, so no block across sizes is drawn.")
    both = tab[(tab["claim"] == "P4") & tab["power_independent"].notna()].sort_values("seeds") \
        if "power_independent" in tab else tab.iloc[0:0]
    if len(both):
        parts = [f"{_rate_text(r.power_independent, r.n_sim)} without the block and {_rate_text(r.power, r.n_sim)} "
                 f"with it at {r.seeds} seed{'s' * (r.seeds > 1)}" for r in both.itertuples()]
        up = all(r.power >= r.power_independent for r in both.itertuples())
        down = all(r.power <= r.power_independent for r in both.itertuples())
        how = (" The block moves a size's high-precision and low-precision runs of one seed together, so what they "
               "share largely cancels between the refitted Chinchilla law and the N_eff fits, and less noise is left "
               "independent: treating runs as independent at the full σ is the conservative reading."
               if up else " The block adds noise that the runs of one seed share, which averaging over runs does not "
               "remove." if down else "")
        text += (f" P4's power on the design as run (binomial brackets, which understate this simulation's error; "
                 f"below): {'; '.join(parts)}.{how}")
    return text


def seed_reading_sentence(tab: pd.DataFrame, target: float = 0.8, claim: str = "P4", design: str = "as run") -> str:
    """Which of the design table's two powers ``seed_choice`` reads, why, and what the other gives.

    On a table of P4 rule v6 (``power_seed_min`` present) the sentence gives the powers at σ_seed's
    interval ends beside the table's (the upper end is not a table column) and the least of the three
    per count, which ``seed_choice`` reads; it does not choose ``qat_seeds``' count, a budget choice
    (:func:`seed_budget_sentence`). Otherwise
    ``seed_choice`` reads ``power`` (the table's ``power [95% MC]``), simulated with the seed block
    ``seed_sd`` that ``seed_block_sd`` estimates from the committed runs; ``power_independent``
    (σ_seed = 0, every run independent) is the conservative reading where the block raises power.
    The same choice is made on that column, on the candidates simulated both ways, and set beside it.

    Args:
        tab: the design-power rows (``load_design_power``). target, claim, design: as ``seed_choice``.

    Returns:
        Sentences for the chapter; every number read from `tab`. "" where `claim` has no candidate.
    """
    rows = tab[(tab["claim"] == claim) & tab["design"].str.contains(design, regex=False)]
    if not len(rows):
        return ""
    blocked = seed_choice(tab, target, claim, design)
    k = blocked["by_interval"] or blocked["by_point"]
    sd, lo, hi = (float(rows[c].iloc[0]) if c in rows else math.nan for c in ("seed_sd", "seed_sd_lo", "seed_sd_hi"))
    cap = float(rows["loss_sd"].iloc[0]) if "loss_sd" in rows else math.nan
    if blocked["column"] == "power_seed_min":  # P4 rule v6's table: also simulated at σ_seed's interval ends
        seeds_of = rows.sort_values("seeds")
        fmt = lambda col: "; ".join(f"{int(r.seeds)} seed{'s' * (r.seeds > 1)}: {getattr(r, col):.2f}"  # noqa: E731
                                    for r in seeds_of.itertuples(index=False))
        ends = (f" ({lo:.4f} and {hi:.4f} nats, the analysis of variance above; "
                + (f"the upper end simulated at one run's whole seed σ, {cap:.4f}, where it is larger)"
                   if math.isfinite(cap) and cap < hi else "simulated as they are)")) if math.isfinite(sd) else ""
        return (f"Each count in the table was also simulated at σ_seed's interval ends{ends}: the lower end, "
                "σ_seed = 0 (every run independent), is the column `power, runs independent`; the upper end, not "
                f"shown in the table (`power_seed_hi` in its CSV), gives {fmt('power_seed_hi')}. The least of the "
                f"three powers per count (`power_seed_min`) is {fmt('power_seed_min')}.")
    text = ("The seed count above is chosen on the `power [95% MC]` column, "
            + (f"simulated with the seed block that the committed runs show (σ_seed = {sd:.4f} [{lo:.4f}, {hi:.4f}] "
               "nats, the analysis of variance above), because that is the noise model fitted to our runs."
               if math.isfinite(sd) and sd > 0 else "simulated with every run independent (no seed block measured)."))
    both = rows[rows["power_independent"].notna()] if "power_independent" in rows else rows.iloc[0:0]
    if not len(both) or not (math.isfinite(sd) and sd > 0):
        return text
    indep = seed_choice(both.assign(power=both["power_independent"]), target, claim, design)
    sims = " and ".join(map(str, indep["simulated"]))
    k_ind = indep["by_interval"] or indep["by_point"]
    parts = "; ".join(f"{n} seed{'s' * (n > 1)}: {p:.2f} [{a:.2f}, {b:.2f}]" for n, (p, a, b) in indep["power"].items())
    if k_ind is None:
        how = f"no count simulated that way reaches {target:.1f}"
    else:
        how = (f"it would choose {k_ind} seeds, " + ("on its interval" if indep["by_interval"] == k_ind else
               f"on its point estimate only (its interval starts below {target:.1f})"))
    if math.isfinite(lo) and lo <= 0:
        text += " The block's interval holds 0, so runs that share nothing are not ruled out:"
    else:
        text += " Beside it:"
    return (text + f" the conservative reading, `power, runs independent` (σ_seed = 0), was simulated at {sims} "
            f"seed{'s' * (len(indep['simulated']) > 1)} ({parts}); {how}"
            + (f", the same count as the choice ({k})" if k_ind is not None and k_ind == k else "") + ".")


def design_table_notes(tab: pd.DataFrame) -> str:
    """What the design table's rate columns hold beside power, and its "—" cells, for the chapter
    (the candidates named are read from `tab`)."""
    text = ("*reproduced or partly* is the share of the datasets simulated from the paper's constants that the rule "
            "grades *partly* or better (so it is at least the power, which counts *reproduced* only); *false "
            "positive* is the share of the null's datasets graded *reproduced*.")
    if "power_independent" in tab:
        done = tab[tab["power_independent"].notna()]
        named = [f"{c} ({d})" for c, d in zip(done["claim"], done["design"])]
        names = ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else "".join(named)
        text += (" *power, runs independent* is the power again with σ_seed = 0, simulated only for "
                 f"{names or 'no candidate'}; \"—\" in that column marks a candidate not simulated that way, not a "
                 "power of zero.")
    return text


# P4's simulated power is not a share of independent datasets: ``power._shift_bootstrap`` gives each
# simulated dataset the pooled deviations of all of them as its bootstrap, so a few wild fits in one
# simulation move every dataset's grade together, and the binomial (Wilson) error of one table understates
# its Monte Carlo error. Its error is measured instead across simulations with independent generators.
P4_REPLICATE_RNGS: tuple[int, ...] = (0, 1, 2, 3)
P4_REPLICATE_COLUMNS = ("power", "power_seed_min", "power_no_pa3")


def p4_replicate_power(profile: str = "cpu", seeds: Sequence[int] = (1, 2, 3, 5), n_sim: int = 200,
                       rngs: Sequence[int] = P4_REPLICATE_RNGS, root: str | None = None,
                       progress: bool = True) -> pd.DataFrame:
    """P4's power on the marginal sweeps as run (the ``CANDIDATES`` named "as run") at each seed count in
    ``seeds``, simulated once per generator seed in ``rngs`` (``design_power_table`` with ``seed=rng``,
    ``n_sim`` datasets per hypothesis each): replicates whose spread is the Monte Carlo error of one
    table, which the binomial error of its ``n_sim`` datasets understates (the datasets of one simulation
    share their bootstrap's deviations, see ``power._shift_bootstrap``).

    Returns:
        One row per (rng, seed count): ``rng``, ``design``, ``seeds``, ``n_sim``, the columns of
        :data:`P4_REPLICATE_COLUMNS`, ``inputs_sha256`` (of the training rows read).

    Raises:
        ValueError: ``seeds`` names a count with no "as run" candidate (the message lists those there
            are), fewer than 2 ``rngs``, or repeated ones; the errors of ``design_power_table``.
    """
    from tqdm.auto import tqdm

    have = {c.seeds: c for c in CANDIDATES if c.claim == "P4" and "as run" in c.name}
    if any(s not in have for s in seeds):
        raise ValueError(f"p4_replicate_power: no 'as run' P4 candidate at seeds {sorted(set(seeds) - set(have))}; "
                         f"there are {sorted(have)}")
    if len(rngs) < 2 or len(set(rngs)) != len(rngs):
        raise ValueError(f"p4_replicate_power: needs at least 2 distinct generator seeds, got {list(rngs)!r}")
    cands = [have[s] for s in seeds]
    out = []
    for r in tqdm(list(rngs), desc="P4 replicates", disable=not progress):
        tab = design_power_table(profile, candidates=cands, n_sim=n_sim, seed=int(r), independent=(), root=root)
        tab = tab[["design", "seeds", "n_sim", *P4_REPLICATE_COLUMNS, "inputs_sha256"]].copy()
        tab.insert(0, "rng", int(r))
        out.append(tab)
    return pd.concat(out, ignore_index=True)


def _stamped(tab: pd.DataFrame, experiment: str, profile: str) -> pd.DataFrame:
    """``tab`` with the provenance columns of a written table: ``experiment`` and ``profile`` first,
    ``git_sha`` and ``timestamp`` (UTC) last."""
    import datetime as dt

    from .._io import git_sha

    tab = tab.copy()
    tab.insert(0, "profile", profile)
    tab.insert(0, "experiment", experiment)
    tab["git_sha"] = git_sha()
    tab["timestamp"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return tab


def write_p4_replicates(profile: str = "cpu", root: str | None = None, **kwargs) -> Path:
    """:func:`p4_replicate_power` written to ``<root>/runs/<profile>/qat_design_p4_replicates.csv``
    (atomically) with ``experiment`` (``qat_design_p4_replicates``), ``profile``, ``git_sha``, ``timestamp``."""
    from .._io import write_atomic
    from .store import data_dir

    tab = _stamped(p4_replicate_power(profile, root=root, **kwargs), "qat_design_p4_replicates", profile)
    path = (Path(root) if root is not None else data_dir()) / "runs" / profile / "qat_design_p4_replicates.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, tab.to_csv(index=False))
    return path


def load_p4_replicates(profile: str = "cpu", root: str | None = None) -> pd.DataFrame | None:
    """The committed ``qat_design_p4_replicates.csv`` of a profile, or None if absent."""
    from .store import data_dir

    path = (Path(root) if root is not None else data_dir()) / "runs" / profile / "qat_design_p4_replicates.csv"
    return pd.read_csv(path) if path.exists() else None


def p4_replicate_summary(rep: pd.DataFrame, column: str = "power") -> pd.DataFrame:
    """Per seed count, the replicates' mean of ``column`` and its Monte Carlo error measured across them.

    Returns:
        One row per ``seeds`` (ascending): ``seeds``, ``replicates`` (R), ``n_sim`` (per replicate),
        ``mean``, ``sd`` (between replicates, ddof 1), ``se`` (sd/√R, the mean's error), ``binomial_se``
        (√(p(1 − p)/n_sim) at the mean: the error one replicate would claim), ``sd_over_binomial``.

    Raises:
        ValueError: ``column`` not in the table, or a seed count with fewer than 2 replicates.
    """
    if column not in rep:
        raise ValueError(f"p4_replicate_summary: no column {column!r}; allowed: {list(P4_REPLICATE_COLUMNS)}")
    rows = []
    for s, g in rep.groupby("seeds", sort=True):
        v = g[column].to_numpy(float)
        if len(v) < 2:
            raise ValueError(f"p4_replicate_summary: {len(v)} replicate at {s} seeds; at least 2 are needed")
        n = float(g["n_sim"].iloc[0])
        mean, sd = float(v.mean()), float(v.std(ddof=1))
        binom = math.sqrt(max(mean * (1 - mean), 0.0) / n)
        rows.append({"seeds": int(s), "replicates": len(v), "n_sim": n, "mean": mean, "sd": sd,
                     "se": sd / math.sqrt(len(v)), "binomial_se": binom,
                     "sd_over_binomial": sd / binom if binom > 0 else math.nan})
    return pd.DataFrame(rows)


def other_rows_sentence(name: str, tab: pd.DataFrame | None, design: pd.DataFrame | None) -> str:
    """"" where ``tab`` (a P4 simulation table) was simulated from the same training rows as ``design``
    (the design-power table; their ``inputs_sha256``), or either lacks the hash; else a sentence saying
    that ``name`` was simulated from other rows and is not read beside the design table."""
    if tab is None or design is None or "inputs_sha256" not in tab or "inputs_sha256" not in design:
        return ""
    mine = set(tab["inputs_sha256"].astype(str))
    theirs = set(design.loc[design["claim"] == "P4", "inputs_sha256"].astype(str))
    if not theirs or mine == theirs:
        return ""
    return (f"`{name}` was simulated from other training rows (inputs {', '.join(sorted(h[:8] for h in mine))}…) "
            f"than the design table above ({', '.join(sorted(h[:8] for h in theirs))}…), so it is not read here; "
            "rerun it on the committed rows (`bitlaws.study.qat_design`'s writer of that table).")


def replicate_sentence(rep: pd.DataFrame | None, tab: pd.DataFrame | None = None) -> str:
    """Chapter 07's reading of :func:`p4_replicate_power`'s table: each seed count's mean power over the
    replicates with its between-replicate spread and the design table's own value beside it, how far
    that value lies from the mean, and what the spread is in units of the binomial error one table
    claims. ``""`` without replicates."""
    if rep is None or not len(rep):
        return ""
    other = other_rows_sentence("qat_design_p4_replicates.csv", rep, tab)
    if other:
        return other
    sm = p4_replicate_summary(rep, "power")
    own, own_n = {}, math.nan
    if tab is not None:
        run = tab[(tab["claim"] == "P4") & tab["design"].str.contains("as run")]
        own = dict(zip(run["seeds"].astype(int), run["power"].astype(float)))
        own_n = float(run["n_sim"].iloc[0]) if len(run) else math.nan
    parts, gaps = [], []
    for r in sm.itertuples(index=False):
        mine = ""
        if r.seeds in own:
            mine = f"; the table's {own[r.seeds]:.2f}"
            gaps.append((abs(own[r.seeds] - r.mean), abs(own[r.seeds] - r.mean) / r.sd if r.sd > 0 else math.inf))
        parts.append(f"{r.seeds} seed{'s' if r.seeds > 1 else ''}: {r.mean:.2f} (spread {r.sd:.2f}{mine})")
    n_rep, n_sim = int(sm["replicates"].iloc[0]), int(sm["n_sim"].iloc[0])
    text = (f"P4's powers in the table above are not shares of independent datasets: every simulated dataset's "
            f"bootstrap is built from the deviations of all of them (`power._shift_bootstrap`), so a few wild fits "
            f"move every grade of one simulation together, and the bracket understates the Monte Carlo error. "
            f"{n_rep} simulations of the as-run designs with independent generators ({n_sim} datasets each, "
            f"`qat_design_p4_replicates.csv`) give mean powers {'; '.join(parts)}; their spread is "
            f"{sm['sd_over_binomial'].min():.1f}–{sm['sd_over_binomial'].max():.1f}× the binomial error, each "
            f"spread on {n_rep - 1} degrees of freedom.")
    from scipy import stats

    if gaps and max(z for _, z in gaps) > stats.t.ppf(0.975, n_rep - 1):
        text += (f" The table's own values ({int(own_n) if math.isfinite(own_n) else '?'} datasets) lie up to "
                 f"{max(g for g, _ in gaps):.2f} from those means, more than the spread allows (beyond the t "
                 f"quantile on {n_rep - 1} degrees of freedom): the estimate also depends on the "
                 f"number of datasets, since they are the bootstrap's draws and the rule thresholds their share at "
                 f"0.95. P4's design powers are therefore rough, and no seed count is chosen from them alone; "
                 f"the next paragraph draws each dataset's bootstrap apart from the graded datasets.")
    return text


# P4's simulation with a separate pool (``power.p4_power(pool=...)``) draws each graded dataset's bootstrap
# from datasets simulated apart, so the graded datasets' grades are independent given the pool.
# ``p4_pool_power`` sets it beside the shared pool of simulation version 6, which the verdict reads, on the
# same graded datasets (common random numbers: only the bootstrap's pool differs).
P4_POOL_SIZE = 200
P4_POOL_COLUMNS = ("power_shared", "power_pool", "power_no_pa3_shared", "power_no_pa3_pool")


def p4_pool_power(profile: str = "cpu", seeds: Sequence[int] = (1, 3, 5), n_sim: int = 100,
                  pool: int = P4_POOL_SIZE, rngs: Sequence[int] = (0, 1, 2), root: str | None = None,
                  progress: bool = True, seed_sd: float | None = None) -> pd.DataFrame:
    """P4's power (rule v6, the paper's hypothesis; ``p4_power(power_only=True)`` at the design table's
    σ_seed, or at ``seed_sd`` [nats] where given: 0 is the verdict's stored simulation, runs
    independent) on the as-run marginal designs at each seed count with the shared pool of simulation
    version 6 (the graded datasets are their own bootstrap pool; what the verdict reads) and with a
    separate pool of ``pool`` datasets simulated apart, the same ``n_sim`` graded datasets in both, once
    per generator seed in ``rngs``.

    Returns:
        One row per (rng, seed count): ``rng``, ``design``, ``seeds``, ``n_sim``, ``pool``, ``seed_sd``
        [nats], the columns of :data:`P4_POOL_COLUMNS` (rule v6's power, and rule v5's on the variant
        without P_a ≤ 3, under each simulation), ``n_failed``, ``pool_failed``, ``inputs_sha256``.

    Raises:
        ValueError: ``seeds`` names a count with no "as run" candidate (the message lists those there
            are), no ``rngs`` or repeated ones, ``n_sim`` < 1, ``pool`` < 2; FileNotFoundError: no rows
            or fits for ``profile``.
    """
    from tqdm.auto import tqdm

    from .law_fits import TRAINING_EXPERIMENTS, load_fits, params_of
    from .store import load_runs

    have = {c.seeds: c for c in CANDIDATES if c.claim == "P4" and "as run" in c.name}
    if any(s not in have for s in seeds):
        raise ValueError(f"p4_pool_power: no 'as run' P4 candidate at seeds {sorted(set(seeds) - set(have))}; "
                         f"there are {sorted(have)}")
    if not rngs or len(set(rngs)) != len(rngs):
        raise ValueError(f"p4_pool_power: needs distinct generator seeds, got {list(rngs)!r}")
    if n_sim < 1 or pool < 2:
        raise ValueError(f"p4_pool_power: n_sim must be >= 1 and pool >= 2; got n_sim={n_sim!r}, pool={pool!r}")
    df = load_runs(profile, experiment=TRAINING_EXPERIMENTS, root=root)
    chin = params_of(load_fits(profile, root).get("chinchilla"))
    if chin is None:
        raise ValueError(f"p4_pool_power needs the chinchilla fit of {profile!r}; run `python -m bitlaws fit`")
    noise, _, design_sd, committed, read = _p4_sim_inputs(df)
    seed_sd = design_sd if seed_sd is None else seed_sd
    rows = []
    for r, k in tqdm(list(itertools.product(rngs, seeds)), desc="P4 pool", disable=not progress):
        frames = candidate_frames(have[k], committed)
        run = {m: p4_power(frames, chin, noise, n_sim=n_sim, seed=int(r), seed_sd=seed_sd, power_only=True, pool=m)
               for m in (0, int(pool))}
        rows.append({"rng": int(r), "design": have[k].name, "seeds": int(k), "n_sim": int(n_sim), "pool": int(pool),
                     "seed_sd": seed_sd, "power_shared": run[0]["power"], "power_pool": run[pool]["power"],
                     "power_no_pa3_shared": run[0]["power_no_pa3"], "power_no_pa3_pool": run[pool]["power_no_pa3"],
                     "n_failed": int(run[pool]["n_failed"]), "pool_failed": int(run[pool]["pool_failed"]),
                     "inputs_sha256": read})
    return pd.DataFrame(rows)


def write_p4_pool_power(profile: str = "cpu", root: str | None = None, **kwargs) -> Path:
    """:func:`p4_pool_power` written to ``<root>/checks/<profile>/p4_pool_power.csv`` (atomically), with
    ``experiment`` (``p4_pool_power``), ``profile``, ``git_sha``, ``timestamp``. Rows already there whose
    (``rng``, ``seeds``, ``n_sim``, ``pool``, ``seed_sd``) the new run does not repeat are kept above them,
    if they were simulated from the same training rows (``inputs_sha256``); rows from other rows (another
    design's noise and σ_seed, e.g. another evaluation version) are dropped, never mixed in."""
    from .._io import write_atomic
    from .store import data_dir

    tab = _stamped(p4_pool_power(profile, root=root, **kwargs), "p4_pool_power", profile)
    path = (Path(root) if root is not None else data_dir()) / "checks" / profile / "p4_pool_power.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        old = pd.read_csv(path)
        if "inputs_sha256" in old and "inputs_sha256" in tab:
            old = old[old["inputs_sha256"].isin(set(tab["inputs_sha256"]))]
        key = ["rng", "seeds", "n_sim", "pool", "seed_sd"]
        new = set(map(tuple, tab[key].astype(float).to_numpy()))
        old = old[[tuple(r) not in new for r in old[key].astype(float).to_numpy()]]
        tab = pd.concat([old, tab], ignore_index=True)
    write_atomic(path, tab.to_csv(index=False))
    return path


def load_p4_pool_power(profile: str = "cpu", root: str | None = None) -> pd.DataFrame | None:
    """The committed ``checks/<profile>/p4_pool_power.csv``, or None if absent."""
    from .store import data_dir

    path = (Path(root) if root is not None else data_dir()) / "checks" / profile / "p4_pool_power.csv"
    return pd.read_csv(path) if path.exists() else None


def p4_pool_summary(tab: pd.DataFrame) -> pd.DataFrame:
    """Per σ_seed and seed count of :func:`p4_pool_power`'s table, the shared and the separate pool side by side.

    Returns:
        One row per (``seed_sd``, ``seeds``, ``n_sim``, ``pool``), ascending: those four, ``replicates`` (R generators),
        ``mean_shared``, ``mean_pool`` (mean power over the generators), ``sd_shared``, ``sd_pool``
        (between generators, ddof 1), ``binomial_pool`` (√(p(1 − p)/n_sim) at ``mean_pool``: the error of
        one run if its datasets were independent), ``diff`` (mean of power_pool − power_shared, paired by
        generator: the same graded datasets), ``diff_lo``, ``diff_hi`` (its 95 % t interval on R − 1
        degrees of freedom).

    Raises:
        ValueError: a column the summary reads missing, or a group with fewer than 2 generators.
    """
    from scipy import stats

    key = ["seed_sd", "seeds", "n_sim", "pool"]
    miss = [c for c in (*key, "power_shared", "power_pool") if c not in tab]
    if miss:
        raise ValueError(f"p4_pool_summary: the table lacks {miss}; it is p4_pool_power's")
    rows = []
    for (sd, k, _, _), g in tab.groupby(key, sort=True):
        if len(g) < 2:
            raise ValueError(f"p4_pool_summary: {len(g)} generator at {k} seeds, σ_seed {sd:g}; at least 2 are needed")
        a, b = g["power_shared"].to_numpy(float), g["power_pool"].to_numpy(float)
        d, r, n = b - a, len(g), float(g["n_sim"].iloc[0])
        half = stats.t.ppf(0.975, r - 1) * d.std(ddof=1) / math.sqrt(r)
        rows.append({"seed_sd": float(sd), "seeds": int(k), "replicates": r, "n_sim": n, "pool": float(g["pool"].iloc[0]),
                     "mean_shared": float(a.mean()), "mean_pool": float(b.mean()), "sd_shared": float(a.std(ddof=1)),
                     "sd_pool": float(b.std(ddof=1)), "binomial_pool": math.sqrt(b.mean() * (1 - b.mean()) / n),
                     "diff": float(d.mean()), "diff_lo": float(d.mean() - half), "diff_hi": float(d.mean() + half)})
    return pd.DataFrame(rows)


def _pool_interval(mean: float, sd: float, binomial: float, r: int) -> tuple[float, float]:
    """A 95 % t interval (R − 1 degrees of freedom) on a mean over R generators, its standard error
    floored at the binomial one (grades independent given the pool: Var ≥ p(1 − p)/n per generator),
    clipped to [0, 1]."""
    from scipy import stats

    half = stats.t.ppf(0.975, r - 1) * max(sd, binomial) / math.sqrt(r)
    return max(mean - half, 0.0), min(mean + half, 1.0)


def seed_budget_sentence(design: pd.DataFrame | None, declared_seeds: int, target: float = 0.8) -> str:
    """Chapter 07's account of ``qat_seeds``' seed count (seed 0 and ``PowerPlan.marginal_seeds``): a budget
    choice, with what P4's design simulation says and why it cannot size the sweep, every number read
    from the design-power table's as-run rows. "" without them.

    It says at which of σ_seed's readings (point ``power``, lower end ``power_independent``, upper end
    ``power_seed_hi``) any simulated count reaches ``target``; whether any count's Wilson interval clears
    the verdict's gate ``claims.POWER_MIN`` at σ_seed = 0, the simulation the verdict's gate reads; and in
    which readings the power falls as seeds are added (from the count with most power to the largest),
    marking a fall whose Wilson intervals are disjoint, and saying that binomial intervals understate a
    shared-pool simulation's error (the replicates measure it), so such a fall is suggestive, not shown.
    """
    from .claims import POWER_MIN

    if design is None:
        return ""
    rows = design[(design["claim"] == "P4") & design["design"].str.contains("as run", regex=False)]
    if not len(rows):
        return ""
    rows = rows.sort_values("seeds")
    plural = lambda k: f"{int(k)} seed{'s' if k > 1 else ''}"  # noqa: E731
    cols = [("power", "σ_seed's point estimate"), ("power_independent", "σ_seed = 0"),
            ("power_seed_hi", "σ_seed's upper end")]
    cols = [(c, w) for c, w in cols if c in rows and rows[c].notna().all()]
    reach = {w: [int(k) for k, v in zip(rows["seeds"], rows[c]) if v >= target] for c, w in cols}
    text = (f"`qat_seeds` is declared so that each marginal run has {declared_seeds} seeds in all (seed 0 and "
            f"`qat_seeds`): a budget choice, not the output of a power rule, because P4's design simulation "
            f"cannot size it. ")
    none = [w for w, ks in reach.items() if not ks]
    some = {w: ks for w, ks in reach.items() if ks}
    if none:
        text += f"No simulated count reaches power {target:g} at {' or at '.join(none)}"
        text += ("; " + "; ".join(f"at {w} {', '.join(plural(k) for k in ks)} "
                                   f"{'does' if len(ks) == 1 else 'do'}" for w, ks in some.items()) + ". ") \
            if some else ". "
    if "power_independent" in rows:
        iv = {int(k): mc_interval(float(v), float(n)) for k, v, n in
              zip(rows["seeds"], rows["power_independent"], rows["n_sim"])}
        best = max(iv, key=lambda k: float(rows.loc[rows["seeds"] == k, "power_independent"].iloc[0]))
        pb = float(rows.loc[rows["seeds"] == best, "power_independent"].iloc[0])
        if all(lo < POWER_MIN for lo, _ in iv.values()):
            text += (f"At σ_seed = 0, the simulation the verdict's gate reads, no count's interval clears "
                     f"{POWER_MIN:g} (best {pb:.2f} [{iv[best][0]:.2f}, {iv[best][1]:.2f}] at {plural(best)}), so a "
                     f"failed P4 grade would be turned inconclusive whatever the seed count. ")
    falls = []
    for c, w in cols:
        v = dict(zip(rows["seeds"].astype(int), rows[c].astype(float)))
        top = max(v, key=v.get)
        last = max(v)
        if top != last and v[last] < v[top]:
            n = float(rows["n_sim"].iloc[0])
            (lo_t, hi_t), (lo_l, hi_l) = mc_interval(v[top], n), mc_interval(v[last], n)
            falls.append(f"{w} {v[top]:.2f} at {plural(top)} → {v[last]:.2f} at {plural(last)}"
                         + (" (Wilson intervals disjoint)" if hi_l < lo_t else ""))
    if falls:
        text += ("From the count with most power to the largest, the table's power does not rise (" + "; ".join(falls)
                 + "; the Wilson intervals are binomial, and this simulation's datasets share one bootstrap pool, "
                 "which makes its error larger than binomial (the replicates above measure it at the point estimate), "
                 "so a drop marked disjoint is suggestive, not shown). ")
        var = {c: dict(zip(rows["seeds"].astype(int), rows[c].astype(float))) for c in _P4_VARIANT_COLUMNS if c in rows}
        ks = sorted(rows["seeds"].astype(int))
        rises = lambda v: all(v[a] <= v[b] for a, b in zip(ks, ks[1:]))  # noqa: E731
        if "power_no_pa3" in var and rises(var["power_no_pa3"]):
            down = [c for c, v in var.items() if c != "power_no_pa3" and v[ks[-1]] < max(v.values())]
            n_of = dict(zip(rows["seeds"].astype(int), rows["n_sim"].astype(float)))
            top_of = {c: max(var[c], key=var[c].get) for c in down}

            def fall(c: str) -> str:  # a variant's drop, each end with its Wilson interval, marked where disjoint
                t, last = top_of[c], ks[-1]
                (lo_t, _), (_, hi_l) = mc_interval(var[c][t], n_of[t]), mc_interval(var[c][last], n_of[last])
                return (f"the fit with the P_a = 3 runs generated at {c.removeprefix('power_').replace('_', ' ')} "
                        f"falls to {_rate_text(var[c][last], n_of[last])} at {plural(last)} from "
                        f"{_rate_text(var[c][t], n_of[t])} at {plural(t)}"
                        + (" (Wilson intervals disjoint)" if hi_l < lo_t else ""))

            text += ("Rule v6 takes the least over its variants, and they part: the fit without the P_a ≤ 3 runs, where "
                     "the paper's law is defined and the fitted family holds the truth, gains power with every seed ("
                     + ", ".join(_rate_text(var["power_no_pa3"][k], n_of[k]) for k in ks)
                     + f" at {', '.join(map(str, ks))} seeds, with Wilson intervals)"
                     + ("; " + "; ".join(fall(c) for c in down)
                        + ". That is what more seeds would do if they resolved the misspecification "
                        "at P_a = 3 (data generated outside the paper's family, which no fit of that family matches), "
                        "so that those runs, not too few seeds, cap the design's power: a reading, not yet tested by a "
                        "simulation of its own" if down else "") + ". ")
        else:
            text += ("A sound test's power does not fall with more data of the same design, so the simulation itself "
                     "needs checking before it sizes any sweep. ")
    cost = rows.set_index("seeds")["cpu_hours"] if "cpu_hours" in rows else None
    if cost is not None and declared_seeds in cost.index and 1 in cost.index:
        text += (f"{declared_seeds} seeds in all is what the noise model asks of the marginal sweep, at about "
                 f"{cost[declared_seeds] - cost[1]:.0f} CPU-hours beyond the committed seed 0.")
    return text.strip()


def pool_sentence(tab: pd.DataFrame | None, stored: Mapping | None = None, design: pd.DataFrame | None = None,
                  verdict: Mapping | None = None, target: float = 0.8) -> str:
    """Chapter 07's reading of :func:`p4_pool_power`'s table; every number and every conclusion is read
    from the arguments. "" without a table.

    Args:
        tab: :func:`p4_pool_power`'s rows (``load_p4_pool_power``), or None.
        stored: the pipeline bootstrap's ``p4_power`` (the verdict's gate), or None.
        design: the design-power table (``load_design_power``), or None: its σ_seed picks the rows read as
            the design's (else the table's most frequent positive ``seed_sd``) and its one-seed powers at
            σ_seed's interval ends are quoted.
        verdict: P4's verdict ``details`` (``p_order``, ``p_a_most``, ``n_draws``), or None.
        target: the design's target power (as ``seed_choice``).
    """
    from scipy import stats

    from .claims import POWER_MIN, rule_p4
    from .power import P4_SIM_VERSION

    if tab is None or not len(tab):
        return ""
    other = other_rows_sentence("p4_pool_power.csv", tab, design)
    if other:
        return other
    sm = p4_pool_summary(tab)
    plural = lambda k: f"{k} seed{'s' if k > 1 else ''}"  # noqa: E731
    text = ("Drawing each dataset's bootstrap from datasets simulated apart (`power.p4_power(pool=...)`) makes the "
            "graded datasets' grades independent given that pool; every graded dataset still reads the same pool, "
            "so a simulation's error is the pool's as well as the binomial error of its datasets. ")
    pos = sm[sm["seed_sd"] > 0]
    d_sd = None
    if design is not None and "seed_sd" in design and (design["claim"] == "P4").any():
        d_sd = float(design.loc[design["claim"] == "P4", "seed_sd"].iloc[0])
    elif len(pos):
        d_sd = float(tab.loc[tab["seed_sd"] > 0, "seed_sd"].mode().iloc[0])
    des = sm[np.isclose(sm["seed_sd"], d_sd, rtol=1e-9, atol=0)] if d_sd is not None else sm.iloc[:0]
    if len(des):
        r0 = des.iloc[0]
        draws = f", the pipeline bootstrap {int(verdict['n_draws'])}" if verdict and "n_draws" in verdict else ""
        reps = sorted(set(des["replicates"].astype(int)))
        parts, ivs = [], {}
        for r in des.itertuples(index=False):
            lo, hi = _pool_interval(r.mean_pool, r.sd_pool, r.binomial_pool, int(r.replicates))
            ivs[int(r.seeds)] = (lo, hi)
            parts.append(f"{plural(int(r.seeds))}: {r.mean_pool:.2f} [{lo:.2f}, {hi:.2f}] with the separate pool, "
                         f"{r.mean_shared:.2f} with the shared one")
        text += (f"At the design table's σ_seed ({d_sd:.4f} nats), {'–'.join(map(str, reps))} generators of "
                 f"{int(r0.n_sim)} graded datasets each (`p4_pool_power.csv`; each dataset's bootstrap has "
                 f"{int(r0.pool)} draws with the separate pool, {int(r0.n_sim)} with the shared one{draws}) give "
                 f"mean powers, with 95 % t intervals over the generators, {'; '.join(parts)}. ")
        zero = (des["diff_lo"] <= 0) & (des["diff_hi"] >= 0)
        if zero.all():
            w = des.loc[(des["diff_hi"] - des["diff_lo"]).idxmax()]
            text += (f"Every paired difference's interval contains 0 (the widest [{w.diff_lo:+.2f}, {w.diff_hi:+.2f}]): "
                     f"no difference between the pools is detectable. ")
        else:
            text += "The pools differ at " + ", ".join(
                f"{plural(int(r.seeds))} ({r.diff:+.2f} [{r.diff_lo:+.2f}, {r.diff_hi:+.2f}])"
                for r in des[~zero].itertuples(index=False)) + ". "
        chi = [(int(r.seeds), r.sd_pool / r.binomial_pool,
                float(stats.chi2.sf((r.replicates - 1) * (r.sd_pool / r.binomial_pool) ** 2, r.replicates - 1)))
               for r in des.itertuples(index=False) if r.binomial_pool > 0]
        over = [(k, q, pv) for k, q, pv in chi if pv < 0.05]
        if over:
            text += ("The separate pool's spread between generators exceeds the binomial error at " + ", ".join(
                f"{plural(k)} ({q:.1f}×, χ² p = {pv:.2g})" for k, q, pv in over)
                + ": there one pool's draws move the grades it serves together. ")
        elif chi:
            text += "The separate pool's spread between generators is within the binomial error at every seed count. "
        if all(hi < target for _, hi in ivs.values()):
            text += f"No seed count reaches the target power {target:g} within its interval"
        elif all(lo >= target for lo, _ in ivs.values()):
            text += f"Every seed count reaches the target power {target:g} within its interval"
        else:
            open_ = [plural(k) for k, (lo, hi) in ivs.items() if lo < target <= hi]
            text += (f"The intervals are too wide to tell whether {', '.join(open_)} "
                     f"{'reaches' if len(open_) == 1 else 'reach'} the target power {target:g}")
        ks = sorted(ivs)
        m = dict(zip(des["seeds"].astype(int), des["mean_pool"]))
        falls = [(a, b) for a, b in zip(ks, ks[1:]) if m[b] < m[a]]
        text += ("" if not falls else "; the mean falls from " + ", ".join(
            f"{plural(a)} to {b} ({m[a]:.2f} to {m[b]:.2f})" for a, b in falls)) + ". "
    one = sm[(sm["seeds"] == 1) & (sm["seed_sd"] == 0)]
    if len(one):
        g = one.iloc[0]
        lo_p, hi_p = _pool_interval(g.mean_pool, g.sd_pool, g.binomial_pool, int(g.replicates))
        b_sh = math.sqrt(g.mean_shared * (1 - g.mean_shared) / g.n_sim)
        lo_s, hi_s = _pool_interval(g.mean_shared, g.sd_shared, b_sh, int(g.replicates))
        own = (f" (stored: {stored['power']:.2f}, {int(stored['n_sim'])} datasets)"
               if stored and math.isfinite(float(stored.get("power", math.nan))) else "")
        side = "both below" if max(hi_p, hi_s) < POWER_MIN else "both above" if min(lo_p, lo_s) >= POWER_MIN else None
        text += (f"At one seed and σ_seed = 0, the simulation behind the verdict's stored power{own}, "
                 f"{int(g.replicates)} generators of {int(g.n_sim)} graded datasets give {g.mean_pool:.2f} "
                 f"[{lo_p:.2f}, {hi_p:.2f}] with a separate pool of {int(g.pool)} and {g.mean_shared:.2f} "
                 f"[{lo_s:.2f}, {hi_s:.2f}] with the shared one, "
                 + (f"{side} the {POWER_MIN:g} under which P4's gate turns a failed grade inconclusive. " if side else
                    f"intervals that reach both sides of the {POWER_MIN:g} P4's gate reads. "))
        if design is not None and {"power_seed_lo", "power_seed_hi", "seed_sd_hi"} <= set(design):
            row = design[(design["claim"] == "P4") & design["design"].str.contains("as run") & (design["seeds"] == 1)]
            if len(row):
                q = row.iloc[0]
                more = abs(q.power_seed_hi - q.power_seed_lo) > abs(g.mean_pool - g.mean_shared)
                hi_sim = min(q.seed_sd_hi, q.loss_sd) if "loss_sd" in design else q.seed_sd_hi
                text += (f"σ_seed moves it {'more than the pool does' if more else 'too'}: the design table's one-seed "
                         f"power is {q.power_seed_lo:.2f}, "
                         f"{q.power:.2f} and {q.power_seed_hi:.2f} at σ_seed {q.seed_sd_lo:.3g}, {q.seed_sd:.3g} and "
                         f"{hi_sim:.3g} nats (its estimate and its 95 % interval's ends, the upper one capped at one "
                         f"run's whole seed σ). ")
    if verdict and {"p_order", "p_a_most"} <= set(verdict):
        if rule_p4(float(verdict["p_order"]), float(verdict["p_a_most"])) == "inconclusive":
            text += (f"P4's grade is inconclusive from its draws alone (p_order {float(verdict['p_order']):.2f}, "
                     f"p_a_most {float(verdict['p_a_most']):.2f}), before its gate reads any power. ")
    if stored and not stored.get("pool") and stored.get("sim_version") == P4_SIM_VERSION:
        text += "The verdict's stored power is the shared pool's, and so is the design table above."
    return text.strip()


def p9_design_sentence(tab: pd.DataFrame | None, power: Mapping[str, float] | None) -> str:
    """The design table's power for P9's declared grid (one seed) beside the power of the rule that grades it.

    The table simulated P9's rule version 2 (a sign test and an F-test over (N, D) cells, every run independent,
    the upstream constants held); versions 5 and 6 read the model sizes as replicates and take their power at the
    least favourable of several noise structures (``p9_matched.P9_SCENARIOS``).

    Args:
        tab: the design-power rows (``load_design_power``), or None.
        power: ``p9_matched.matched_power``'s record on the declared design (``rate__s{i}__paper_c1__reproduced``
            per noise structure, ``power_c1`` their least, ``n_sim``), or None.

    Returns:
        Sentences for chapter 07, every number read from ``tab`` and ``power``; "" where either has no P9 power.
    """
    from .claims import rate_text
    from .p9_matched import P9_SCENARIOS

    if tab is None or power is None or not math.isfinite(float(power.get("power_c1", math.nan))):
        return ""
    rows = tab[(tab["claim"] == "P9") & (tab["seeds"] == 1)]
    if not len(rows):
        return ""
    row = rows.iloc[0]
    table = rate_text({"power": float(row["power"]), "n_sim": float(row["n_sim"])})
    rates = {i: float(power[f"rate__s{i}__paper_c1__reproduced"]) for i in range(len(P9_SCENARIOS))
             if f"rate__s{i}__paper_c1__reproduced" in power}
    indep = [i for i, sc in enumerate(P9_SCENARIOS) if not any(sc[j] for j in (0, 1, 2, 4)) and sc[3] == 1.0]
    worst = min((i for i in rates if P9_SCENARIOS[i][4] == 0), key=rates.get, default=None)
    if worst is None or not indep or indep[0] not in rates:
        return ""
    k, r, t, rel, _ = P9_SCENARIOS[worst]
    label = ", ".join(x for x in (f"a size share κ = {k:g}" if k else "", f"a cell share ρ = {r:g}" if r else "",
                                  f"a per-cell spread τ = {t:g}" if t else "",
                                  f"{rel:g}× the relative noise" if rel != 1 else "") if x)
    return (f"The table gave it power {table} ({int(row['n_sim'])} datasets) under P9's rule version 2, with every "
            "run independent. The rule that grades the grid (version 5's decision) gives "
            f"{rate_text({'power': rates[indep[0]], 'n_sim': power['n_sim']})} against the paper's law at C_w = 1 "
            f"with every run independent too, and {rate_text(power, 'power_c1')} at the least favourable of its "
            f"noise structures ({label}), the power its verdict reports ({int(power['n_sim'])} datasets each; "
            "chapter 03).")


# ---------------------------------------------------------------------------------------------
# P9's matched grid with more seeds: what a new experiment (and a new rule version) would buy.

P9_SEED_COUNTS: tuple[int, ...] = (1, 2, 3)
P9_REPLICATES = ("sizes", "size × seed")


def p9_seed_power(design: pd.DataFrame, noise, seeds: Sequence[int] = P9_SEED_COUNTS, n_sim: int = 1000,
                  seed: int = 0, scenarios=None, tau_size: float = 0.0,
                  replicates: Sequence[str] = P9_REPLICATES) -> pd.DataFrame:
    """Rule v5's decision on P9's matched grid trained at ``k`` seeds, by simulation: the planning question
    "is a second seed worth its CPU-hours?", not a grade (a grid with more seeds would be a new experiment
    under a new rule version, registered before its data).

    Each seed is an independent draw of ``p9_matched``'s noise structures (``p9_matched._draw``): its shares
    common to a size (κ), a cell (ρ) and every run (ω) are redrawn for each seed, as a seed's own data order
    and initial weights would be (ω's evaluation-set part would not be: the ω rates are optimistic). The true
    effect's spread is one draw shared by every seed: per cell (the structure's τ) and per size (``tau_size``).
    Two ways to read the replicates: ``"sizes"`` averages each size's units over its seeds (5 replicates, as
    the present rule); ``"size × seed"`` makes each (size, seed) one replicate (5k replicates; it assumes
    the seeds of one size independent, which a shared spread of the true effect breaks).

    Args:
        design: ``p9_matched.profile_design`` (one unit per (N, D, P_w)).
        noise: the seed-noise model (``noise.noise_model(rows, "rtn")``, as P9's verdict).
        seeds: the seed counts k ≥ 1 to simulate.
        n_sim: simulated datasets per (k, replicates, structure, hypothesis).
        seed: the generator's seed.
        scenarios: (κ, ρ, τ, rel, ω) structures (default ``p9_matched.P9_SCENARIOS``); at least one with ω = 0.
        tau_size: sd of a per-size shift of the true r, the same in every seed (dimensionless, ≥ 0).
        replicates: which of ``P9_REPLICATES`` to simulate.

    Returns:
        One row per (``seeds``, ``replicates``), with ``tau_size``: ``power_c0.5``, ``power_c1``, ``power_c1.5``
        (the least P(reproduced) under the paper's law at that C_w over the structures with ω = 0),
        ``power_not_reproduced`` (the least P(not reproduced) under the law without its bracket),
        ``false_no_effect`` (the most P(reproduced) with no effect), ``size_not_reproduced`` (the most P(not
        reproduced) at the range's weak end); the last two again over the structures with ω > 0
        (``false_no_effect_shared``, ``size_not_reproduced_shared``; NaN without one); ``n_sim``.

    Raises:
        ValueError: an empty design, a seed count < 1, ``n_sim`` < 1, ``tau_size`` < 0, no structure with
            ω = 0, or an unknown ``replicates``.
    """
    from .p9_matched import P9_C_W_RANGE, P9_SCENARIOS, _draw, _grades, detection_floor, paper_r

    scenarios = P9_SCENARIOS if scenarios is None else scenarios
    if not len(design):
        raise ValueError("p9_seed_power: the design has no unit (a profile without the matched grid)")
    if not seeds or min(seeds) < 1 or n_sim < 1 or not tau_size >= 0:
        raise ValueError(f"p9_seed_power: seed counts must be ≥ 1, n_sim ≥ 1 and tau_size ≥ 0; got "
                         f"seeds={tuple(seeds)}, n_sim={n_sim}, tau_size={tau_size}")
    ind = [i for i, sc in enumerate(scenarios) if sc[4] == 0]
    shared = [i for i, sc in enumerate(scenarios) if sc[4] > 0]
    if not ind:
        raise ValueError("p9_seed_power: the rates are read over the structures with ω = 0 (the sizes "
                         f"independent); none among {tuple(scenarios)}")
    bad = [r for r in replicates if r not in P9_REPLICATES]
    if bad:
        raise ValueError(f"p9_seed_power: replicates must be among {P9_REPLICATES}; got {bad}")
    floor = detection_floor(noise)
    rng = np.random.default_rng(seed)
    bw = design["bits_w"].to_numpy(float)
    hyps = {"paper_c0.5": paper_r(bw, 0.5), "paper_c1": paper_r(bw, 1.0), "paper_c1.5": paper_r(bw, 1.5),
            "paper_cmax": paper_r(bw, P9_C_W_RANGE[1]), "no_bracket": paper_r(bw, math.inf),
            "no_effect": np.zeros(len(design))}
    cells = design.groupby(["n_params", "n_tokens"]).ngroup().to_numpy()
    sizes = design.groupby(["n_params"]).ngroup().to_numpy()
    # a size's k seeds as separate replicates: each seed's units get a size label of their own (grouping only)
    step = 0.5 / max(seeds)
    out = []
    for k in seeds:
        stacked = {"sizes": pd.concat([design] * k, ignore_index=True),
                   "size × seed": pd.concat([design.assign(n_params=design["n_params"] + s * step) for s in range(k)],
                                            ignore_index=True)}
        for reps in replicates:
            if k == 1 and reps == "size × seed":
                continue  # the same as "sizes"
            rates: dict[tuple[int, str], float] = {}
            for i, (kappa, rho, tau, rel, omega) in enumerate(scenarios):
                for name, r_true in hyps.items():
                    shift = (tau * rng.standard_normal((n_sim, int(cells.max()) + 1))[:, cells]  # shared by the seeds
                             + tau_size * rng.standard_normal((n_sim, int(sizes.max()) + 1))[:, sizes])
                    draws = [_draw(design, r_true + shift, noise, n_sim, rng, (kappa, rho, 0.0, rel, omega))
                             for _ in range(k)]
                    hp, low = np.concatenate([d[0] for d in draws], axis=1), np.concatenate([d[1] for d in draws], axis=1)
                    g = _grades(stacked[reps], hp, low, floor, P9_C_W_RANGE)
                    for grade in ("reproduced", "not reproduced"):
                        rates[(i, f"{name}__{grade}")] = float(np.mean(g == grade))

            def worst(key: str, fn, which=ind) -> float:
                return fn(rates[(i, key)] for i in which) if which else math.nan

            out.append({"seeds": k, "replicates": reps, "tau_size": float(tau_size),
                        **{f"power_c{c}": worst(f"paper_c{c}__reproduced", min) for c in ("0.5", "1", "1.5")},
                        "power_not_reproduced": worst("no_bracket__not reproduced", min),
                        "false_no_effect": worst("no_effect__reproduced", max),
                        "size_not_reproduced": worst("paper_cmax__not reproduced", max),
                        "false_no_effect_shared": worst("no_effect__reproduced", max, shared),
                        "size_not_reproduced_shared": worst("paper_cmax__not reproduced", max, shared),
                        "n_sim": float(n_sim)})
    return pd.DataFrame(out)


def matched_size_sd(rows: pd.DataFrame, noise) -> float:
    """The sd across model sizes of P9's size means of r on the graded grid (``p9_matched.matched_units`` at
    ``P9_GRADED_BITS``, the rule's replicates; NaN with fewer than 2 sizes): an upper bound on a true per-size
    spread of the effect, since seed noise adds to it."""
    from .p9_matched import P9_GRADED_BITS, P9_GRID, detection_floor, matched_units

    if not len(rows):
        return math.nan
    u = matched_units(rows, detection_floor(noise), P9_GRID)
    means = u[u["included"] & u["bits_w"].isin(P9_GRADED_BITS)].groupby("n_params")["r"].mean()
    return float(means.std(ddof=1)) if len(means) > 1 else math.nan


def matched_grid_cost(profile: str = "cpu", bits_w: Sequence[int] | None = None) -> dict[str, float]:
    """What training P9's matched grid took, measured: the ``train_s`` of its runs (one row per run, at the
    threads it was trained with), split into the low-precision runs and the high-precision twins the grid
    trained beside them (``bits_w`` = 16).

    Reads the rows rule v5 reads (``p9_matched.load_matched``: the data freeze applies), so the measurement
    is of the grid as graded. A further seed need not retrain every twin: some are committed or declared
    base-grid runs already.

    Args:
        profile: the sweep profile.
        bits_w: the P_w of the low-precision runs to count (None: every one); the twins are always counted.

    Returns:
        ``hours`` (all of them), ``qat_hours``, ``hp_hours`` [CPU-hours], ``qat_runs``, ``hp_runs``, ``seeds``
        (how many seeds the rows hold); NaN (0 for a count) where the profile has no ``qat_matched`` rows.
        Beside them, the same twins' first trainings, to show that a timing moves with the machine's load:
        ``hp_s`` (the twins' ``train_s`` here) and ``hp_first_s`` [s], the ``train_s`` of their evaluation-version-1
        rows in ``hp_first_experiment`` (the one other sweep that holds every twin at version 1; NaN and "" where
        none does), with ``hp_threads`` and ``hp_first_threads`` (the threads each was trained at, "1" or "1–2";
        "" where the rows lack them).
    """
    from . import store
    from .p9_matched import load_matched

    out = {"hours": math.nan, "qat_hours": math.nan, "hp_hours": math.nan, "qat_runs": 0, "hp_runs": 0, "seeds": 0,
           "hp_s": math.nan, "hp_first_s": math.nan, "hp_first_experiment": "", "hp_threads": "",
           "hp_first_threads": ""}

    def threads(t: pd.DataFrame) -> str:
        k = sorted({int(x) for x in pd.to_numeric(t["threads"], errors="coerce").dropna()}) if "threads" in t else []
        return "" if not k else str(k[0]) if len(k) == 1 else f"{k[0]}–{k[-1]}"

    rows = load_matched(profile)
    if not len(rows) or "train_s" not in rows:
        return out
    runs = rows.drop_duplicates("run_id")
    if bits_w is not None:
        runs = runs[runs["bits_w"].isin([*bits_w, 16])]
    hp = runs["bits_w"] == 16
    twins = set(runs.loc[hp, "run_id"])
    first, where, first_threads = math.nan, "", ""
    try:
        v1 = store.load_runs(profile, eval_version=1) if twins else pd.DataFrame()
    except FileNotFoundError:
        v1 = pd.DataFrame()
    if len(v1) and {"run_id", "experiment", "train_s"} <= set(v1.columns):
        v1 = v1[v1["run_id"].isin(twins) & (v1["experiment"] != "qat_matched")]
        if "ptq_method" in v1:
            v1 = v1[v1["ptq_method"].fillna("none") == "none"]
        v1 = v1.drop_duplicates("run_id")
        if set(v1["run_id"]) == twins and v1["experiment"].nunique() == 1:
            first, where = float(v1["train_s"].sum()), str(v1["experiment"].iloc[0])
            first_threads = threads(v1)
    return {"hours": float(runs["train_s"].sum()) / 3600, "qat_hours": float(runs.loc[~hp, "train_s"].sum()) / 3600,
            "hp_hours": float(runs.loc[hp, "train_s"].sum()) / 3600, "qat_runs": int((~hp).sum()),
            "hp_runs": int(hp.sum()), "seeds": int(runs["seed"].nunique()),
            "hp_s": float(runs.loc[hp, "train_s"].sum()), "hp_first_s": first, "hp_first_experiment": where,
            "hp_threads": threads(runs[hp]), "hp_first_threads": first_threads}


def matched_grid_hours(profile: str = "cpu", bits_w: Sequence[int] | None = None) -> float:
    """CPU-hours that training P9's matched grid took: the sum over its runs of ``train_s`` (one row per run, at
    the threads it was trained with), over the runs trained at ``bits_w`` and their high-precision twins (every
    run where None); NaN where the profile has no ``qat_matched`` rows (``matched_grid_cost``'s ``hours``)."""
    return matched_grid_cost(profile, bits_w)["hours"]


def p9_seed_cost(design: pd.DataFrame | None) -> dict[str, float]:
    """What a further seed of P9's matched grid costs, read from the design-power table's P9 rows (the
    candidates at 1 and 2 seeds, priced by ``candidate_hours`` at the tokens/s measured here).

    Args:
        design: the design-power rows (``load_design_power``), or None.

    These are estimates (``budget.run_seconds`` at the throughput of the committed rows); what the grid's
    runs took is ``matched_grid_cost``, which ``p9_seed_sentence`` sets beside them.

    Returns:
        ``hours_1``, ``hours_2`` (the table's ``cpu_hours`` at 1 and 2 seeds), ``per_seed`` (their difference:
        a second seed's runs and the high-precision twins it needs) [CPU-hours], ``bits_lo``, ``bits_hi`` (the
        candidate's P_w range), ``qat_runs_1``, ``hp_twins_1`` (the runs the one-seed figure prices: seed 0's
        twins, committed base-grid runs, count as trained); NaN where the table lacks either row (or column).
    """
    nan = math.nan
    out = {"hours_1": nan, "hours_2": nan, "per_seed": nan, "bits_lo": nan, "bits_hi": nan, "qat_runs_1": nan,
           "hp_twins_1": nan}
    if design is None or not {"claim", "seeds", "cpu_hours"} <= set(design.columns):
        return out
    rows = design[design["claim"] == "P9"].set_index("seeds")
    if not {1, 2} <= set(rows.index):
        return out
    h1, h2 = float(rows.loc[1, "cpu_hours"]), float(rows.loc[2, "cpu_hours"])
    bits = [int(b) for b in str(rows.loc[1, "bits"]).split(";")] if "bits" in rows else []

    def col(name: str, k: int) -> float:
        return float(rows.loc[k, name]) if name in rows else nan

    return {"hours_1": h1, "hours_2": h2, "per_seed": h2 - h1, "bits_lo": float(min(bits)) if bits else nan,
            "bits_hi": float(max(bits)) if bits else nan, "qat_runs_1": col("qat_runs", 1),
            "hp_twins_1": col("hp_twins", 1)}


def p9_seed_sentence(tab: pd.DataFrame | None, design: pd.DataFrame | None = None,
                     capped: pd.DataFrame | None = None, size_sd: float = math.nan,
                     measured: dict | None = None) -> str:
    """Chapter 07's reading of ``p9_seed_power``: what one and two more seeds of the matched grid would buy.

    Args:
        tab: ``p9_seed_power``'s rows (k = 1, 2 and 3 seeds, ``tau_size`` = 0), or None.
        design: the design-power table (``load_design_power``): the cost of a seed is read from its P9 rows
            (``p9_seed_cost``), the same numbers its ``CPU-h`` column shows; None: no cost is given.
        capped: ``p9_seed_power``'s "sizes" rows at k = 1 and 3 with ``tau_size`` = ``size_sd``, or None.
        size_sd: ``matched_size_sd``, the observed sd of the size means.
        measured: ``matched_grid_cost``, what the grid's own seed took to train; set beside the estimate (None
            or no runs: the estimate alone).

    Returns:
        Sentences, every number read from the arguments; "" where ``tab`` lacks a seed count.
    """
    if tab is None or not {1, 2, 3} <= set(tab["seeds"]):
        return ""
    from .claims import rate_text

    def pc(frame: pd.DataFrame, k: int, reps: str, col: str) -> str:  # the rate with its 95 % Monte Carlo interval
        row = frame.set_index(["seeds", "replicates"]).loc[(k, reps)]
        return rate_text({"power": float(row[col]), "n_sim": float(row["n_sim"])})

    t = tab
    c = p9_seed_cost(design)
    if math.isfinite(c["per_seed"]):
        span = (f"its P_w = {c['bits_lo']:.0f}–{c['bits_hi']:.0f} runs" if math.isfinite(c["bits_lo"])
                else "its runs")
        per_seed = round(c["hours_2"], 1) - round(c["hours_1"], 1)  # the difference of the two numbers shown
        cost = (f"about {per_seed:.1f} CPU-hours by the design table's estimate ({span} and the high-precision "
                f"twins a second seed needs: the table's {c['hours_2']:.1f} CPU-h for two seeds less its "
                f"{c['hours_1']:.1f} for one, at the tokens/s measured here)")
    else:
        cost = "the grid's CPU-hours again"
    text = f"Each further seed of the grid would cost {cost}."
    m = measured or {}
    if m.get("qat_runs") and math.isfinite(m.get("hours", math.nan)):
        one = m.get("seeds") == 1
        what = f"{m['qat_runs']} low-precision runs" + (
            f" and the {m['hp_runs']} high-precision twins it trained beside them" if m.get("hp_runs") else "")
        text += (f" Measured, {'one seed of the grid' if one else 'the grid'} as trained (its {what}"
                 f"{'' if one else ', ' + str(m.get('seeds')) + ' seeds'}) took {m['hours']:.1f} CPU-hours by "
                 "the `train_s` of its rows")
        text += (f": {m['qat_hours']:.1f} for the low-precision runs, {m['hp_hours']:.1f} for the twins."
                 if m.get("hp_runs") else ".")
        if m.get("hp_runs") and math.isfinite(m.get("hp_first_s", math.nan)) and math.isfinite(m.get("hp_s", math.nan)):
            at_first, at_here = m.get("hp_first_threads", ""), m.get("hp_threads", "")
            shown = at_first and at_here and at_first != at_here  # the threads, where they differ
            text += (f" That is one timing, and timings move with the machine's load: the same {m['hp_runs']} twins "
                     f"took {m['hp_first_s']:,.0f} s as their `{m['hp_first_experiment']}` version-1 trainings"
                     + (f" (at {at_first} threads)" if shown else "") + f" and {m['hp_s']:,.0f} s here"
                     + (f" (at {at_here})" if shown else "") + ".")
        else:
            text += " That is one timing, and timings move with the machine's load."
        if math.isfinite(c["hours_1"]) and c.get("hp_twins_1") == 0:
            text += (f" The table's {c['hours_1']:.1f} for one seed estimates the low-precision runs alone, since it "
                     "counts seed 0's twins as committed base-grid runs.")
    text += (" Simulated "
            "under version 5's decision, with each seed a fresh draw of the noise structures, the power against "
            f"the law at C_w = 1 would rise from {pc(t, 1, 'sizes', 'power_c1')} (the verdict's rate, here from "
            f"other draws) to {pc(t, 2, 'sizes', 'power_c1')} with two seeds and {pc(t, 3, 'sizes', 'power_c1')} "
            "with three, the sizes still the replicates, and no effect would read *reproduced* at most "
            f"{pc(t, 3, 'sizes', 'false_no_effect')} of the time.")
    if capped is not None and {1, 3} <= set(capped["seeds"]) and math.isfinite(size_sd):
        text += (" That gain assumes the sizes differ only by noise, which more seeds average away. Were the "
                 f"whole observed spread of the size means (sd {size_sd:.2f}) a true difference between sizes, "
                 f"the same in every seed, the power would go from {pc(capped, 1, 'sizes', 'power_c1')} to "
                 f"{pc(capped, 3, 'sizes', 'power_c1')} with three seeds.")
    if math.isfinite(float(t["false_no_effect_shared"].iloc[0])):
        text += (" Nor do seeds remove a share of the noise common to every run: under chapter 03's ω structure "
                 f"no effect would read *reproduced* {pc(t, 1, 'sizes', 'false_no_effect_shared')} of the time with "
                 "one seed and "
                 f"{pc(t, 3, 'sizes', 'false_no_effect_shared')} with three (that share redrawn for each seed, so "
                 "optimistic where it comes from the shared evaluation windows).")
    text += (f" Taking each (size, seed) as a replicate would give {pc(t, 2, 'size × seed', 'power_c1')} and "
             f"{pc(t, 3, 'size × seed', 'power_c1')}, but a true effect that varies from cell to cell is the same "
             "in every seed, so those replicates are not independent, and no effect would then read *reproduced* "
             f"up to {pc(t, 3, 'size × seed', 'false_no_effect')} of the time. The law at C_w = 1.5 stays hard "
             f"to see: {pc(t, 3, 'sizes', 'power_c1.5')} with three seeds. A grid with more seeds would be a new "
             "experiment, graded by a rule registered before its data.")
    return text


def p9_seed_view(tab: pd.DataFrame) -> pd.DataFrame:
    """``p9_seed_power``'s rows for the page: rates as whole percentages under short headers ("R": graded
    *reproduced*, "NR": *not reproduced*; "ω": over the structures with a share common to every run)."""
    cols = {"power_c0.5": "law C_w 0.5: R", "power_c1": "C_w 1: R", "power_c1.5": "C_w 1.5: R",
            "power_not_reproduced": "no bracket: NR", "false_no_effect": "no effect: R",
            "false_no_effect_shared": "no effect, ω: R"}
    out = tab[["seeds", "replicates"]].copy()
    for c, name in cols.items():
        out[name] = [f"{100 * v:.0f} %" if math.isfinite(v) else "—" for v in tab[c].astype(float)]
    return out
