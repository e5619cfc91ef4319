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

import pandas as pd

from ..laws import forms
from .._io import frame_sha256
from .power import N_SIM, mc_interval, p4_power, p5_power, p9_power

__all__ = ["Candidate", "CANDIDATES", "candidate_frames", "candidate_cells", "candidate_p5_design", "candidate_hours",
           "design_power_table", "write_design_power", "load_design_power", "design_power_view", "as_run_agreement",
           "agreement_sentence", "seed_choice", "seed_choice_sentence"]

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


def candidate_frames(c: Candidate) -> dict[str, pd.DataFrame]:
    """P4's simulated design: the ``neff_w``, ``neff_a``, ``neff_kv`` frames of ``c`` (one row per
    run; ``loss_val`` is a placeholder the simulation replaces), as ``law_fits.stage_frames`` gives them."""
    out = {}
    for x in _PARTS:
        rows = [{"run_id": f"{x}-{z}-{d}-{b}-{s}", "n_params": _n_params(z), "n_tokens": float(d), "bits_w": 16,
                 "bits_a": 16, "bits_kv": 16, f"bits_{x}": b, "seed": s, "loss_val": 1.0}
                for z, d, b, s in itertools.product(c.sizes, c.budgets, c.bits, range(c.seeds))]
        out[f"neff_{x}"] = pd.DataFrame(rows)
    return out


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


def candidate_p5_design(c: Candidate, hp_seeds: int) -> pd.DataFrame:
    """P5's simulated design: ``power.p5_design``'s columns for the factorial of ``c`` — one row per
    mixed run (≥ 2 parts below 16 bits) and seed, each marginal averaged over ``c.seeds`` seeds, the
    high-precision mean over ``hp_seeds`` (the base grid's seeds at that cell). Losses are
    placeholders the simulation replaces."""
    hi = forms.HIGH_PRECISION_BITS
    rows = []
    for z, d, combo, s in itertools.product(c.sizes, c.budgets, itertools.product(c.bits, repeat=3), range(c.seeds)):
        low = sum(b < hi for b in combo)
        if low < 2:
            continue
        rows.append({"n_params": _n_params(z), "n_tokens": float(d), "loss_mix": 1.0, "loss_hp": 1.0,
                     "k_hp": float(hp_seeds), **{f"bits_{x}": float(b) for x, b in zip(_PARTS, combo)},
                     **{f"loss_{x}": 1.0 for x in _PARTS},
                     **{f"k_{x}": float(c.seeds if b < hi else 0) for x, b in zip(_PARTS, combo)}, "n_low": float(low)})
    return pd.DataFrame(rows)


def candidate_hours(c: Candidate, profile: str = "cpu", throughput=None) -> float:
    """CPU-hours to train ``c``'s low-precision runs and the high-precision twins beyond seed 0 (seed 0
    is the base grid's), at the measured tokens/s (``budget.default_throughput``), each run timed by
    ``budget.run_seconds`` as ``budget.estimate`` times it, with two evaluations. NaN without a throughput."""
    from .budget import default_throughput, run_seconds
    from .sweep import PROFILES, _model

    prof = PROFILES[profile]
    tp = throughput or default_throughput(profile)
    if tp is None:
        return math.nan
    secs = 0.0
    per_cell = c.qat_runs / (len(c.sizes) * len(c.budgets))
    eval_tokens = prof.train.eval_tokens * 2  # two evaluations of each run
    for z, d in itertools.product(c.sizes, c.budgets):
        m = _model(z, prof)
        secs += per_cell * run_seconds(tp, m, prof.train.seq_len, d, eval_tokens, quantized=True)
        secs += (c.seeds - 1) * run_seconds(tp, m, prof.train.seq_len, d, eval_tokens, quantized=False)
    return secs / 3600


def _hp_seeds(df: pd.DataFrame, c: Candidate) -> int:
    """Seeds of the high-precision runs at ``c``'s (N, D) cells in ``df`` (at least 1)."""
    from .law_fits import stage_frames

    n = {_n_params(z) for z in c.sizes}
    hp = stage_frames(df)["chinchilla"]  # the high-precision runs, as every stage reads them
    hp = hp[hp["n_params"].astype(float).isin(n) & hp["n_tokens"].astype(float).isin([float(d) for d in c.budgets])]
    return max(1, int(hp.groupby(["n_params", "n_tokens"])["seed"].nunique().min())) if len(hp) else 1


def design_power_table(profile: str = "cpu", candidates: Sequence[Candidate] = CANDIDATES, n_sim: int = N_SIM,
                       seed: int = 0, progress: bool = False, root: str | None = None) -> pd.DataFrame:
    """The power of P4's, P5's and P9's rules on each candidate design, with its cost.

    Reads the profile's committed rows for the seed noise (``noise.noise_model``, RTN) and the
    fits for the constants the simulations hold (Chinchilla for P4, Eq. 2 of RTN for P9).

    Returns:
        One row per candidate: ``claim``, ``design``, ``sizes``, ``budgets``, ``bits`` (";"-joined),
        ``seeds``, ``qat_runs``, ``cpu_hours``, ``power``, ``power_partly``, ``false_positive``,
        ``n_sim``, ``loss_sd`` (the seed σ used, nats), ``inputs_sha256`` (of the training rows read).

    Raises:
        FileNotFoundError: no rows or no fits for ``profile`` (``python -m bitlaws fit``).
        ValueError: a fit the simulations need is missing.
    """
    from tqdm.auto import tqdm

    from .law_fits import TRAINING_EXPERIMENTS, load_fits, params_of
    from .noise import noise_model
    from .store import load_runs

    df = load_runs(profile, experiment=TRAINING_EXPERIMENTS, root=root)
    fits = load_fits(profile, root)
    chin, eq2 = params_of(fits.get("chinchilla")), params_of(fits.get("ptq"))
    if chin is None or eq2 is None:
        raise ValueError(f"design_power_table needs the chinchilla and ptq fits of {profile!r}; run "
                         f"`python -m bitlaws fit --profile {profile}`")
    noise = noise_model(df, "rtn")
    read = frame_sha256(df)
    out = []
    for c in tqdm(candidates, desc="design power", disable=not progress):
        if c.claim == "P4":
            pw = p4_power(candidate_frames(c), chin, noise, n_sim=n_sim, seed=seed)
        elif c.claim == "P5":
            pw = p5_power(candidate_p5_design(c, _hp_seeds(df, c)), chin, noise, n_sim=n_sim, seed=seed)
        else:
            pw = p9_power(candidate_cells(c, eq2), eq2, noise, n_sim=n_sim, seed=seed)
        out.append({"claim": c.claim, "design": c.name, "sizes": ";".join(c.sizes),
                    "budgets": ";".join(map(str, c.budgets)), "bits": ";".join(map(str, c.bits)), "seeds": c.seeds,
                    "qat_runs": c.qat_runs, "cpu_hours": candidate_hours(c, profile), "power": pw["power"],
                    "power_partly": pw["power_partly"], "false_positive": pw["false_positive"],
                    "n_sim": pw["n_sim"], "loss_sd": noise.loss_sd, "inputs_sha256": read})
    return pd.DataFrame(out)


def write_design_power(profile: str = "cpu", n_sim: int = 100, progress: bool = True,
                       root: str | None = None) -> Path:
    """``design_power_table`` of the rows and fits under ``root`` (default ``data_dir()``), written to
    ``<root>/runs/<profile>/qat_design_power.csv`` (atomically), each row with ``experiment``
    (``qat_design_power``), ``profile``, ``git_sha`` and ``timestamp``.

    Returns:
        The path written.
    """
    import datetime as dt

    from .._io import git_sha, write_atomic
    from .store import data_dir

    tab = design_power_table(profile, n_sim=n_sim, progress=progress, root=root)
    tab.insert(0, "profile", profile)
    tab.insert(0, "experiment", "qat_design_power")
    tab["git_sha"] = git_sha()
    tab["timestamp"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = (Path(root) if root is not None else data_dir()) / "runs" / profile / "qat_design_power.csv"
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
        Columns ``claim``, ``design``, ``QAT runs``, ``CPU-h``, ``power [95% MC]``,
        ``reproduced or partly``, ``false positive``, ``n_sim`` — one row per candidate, as in ``tab``.
    """
    rate = {c: [_rate_text(r, n) for r, n in zip(tab[c], tab["n_sim"])]
            for c in ("power", "power_partly", "false_positive")}
    return pd.DataFrame({"claim": tab["claim"], "design": tab["design"], "QAT runs": tab["qat_runs"],
                         "CPU-h": tab["cpu_hours"].round(1), "power [95% MC]": rate["power"],
                         "reproduced or partly": rate["power_partly"], "false positive": rate["false_positive"],
                         "n_sim": tab["n_sim"].astype(int)})


def as_run_agreement(tab: pd.DataFrame, p4_power_record: dict | None) -> dict[str, float]:
    """Do two Monte Carlo estimates of P4's power on the design as run agree?

    The design table's "marginal sweeps as run, 1 seed" row and the power stored with the fits
    (``pipeline_boot``'s ``p4_power``, from ``law_fits.pipeline_bootstrap``) simulate the same rule on
    the same rows with different generator seeds and dataset counts. They should differ by Monte Carlo
    error only: ``z`` is their difference over its binomial standard error
    (sqrt(p₁(1 − p₁)/n₁ + p₂(1 − p₂)/n₂)); |z| < 1.96 is agreement at 95 %.

    Args:
        tab: the design-power rows. p4_power_record: the stored ``p4_power`` dict (``power``, ``n_sim``).

    Returns:
        ``table_power``, ``table_n``, ``table_lo``, ``table_hi``, ``fits_power``, ``fits_n``, ``fits_lo``,
        ``fits_hi``, ``z`` (NaN where either estimate is missing), ``fits_refit`` (1.0 if the fits'
        simulation refitted Chinchilla per dataset).
    """
    row = tab[(tab["claim"] == "P4") & (tab["seeds"] == 1) & tab["design"].str.contains("as run")]
    nan = math.nan
    p1, n1 = (float(row["power"].iloc[0]), float(row["n_sim"].iloc[0])) if len(row) else (nan, nan)
    rec = p4_power_record or {}
    p2, n2 = float(rec.get("power", nan)), float(rec.get("n_sim", nan))
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2) if all(map(math.isfinite, (p1, n1, p2, n2))) else nan
    z = (p1 - p2) / se if math.isfinite(se) and se > 0 else nan
    (l1, h1), (l2, h2) = mc_interval(p1, n1), mc_interval(p2, n2)
    return {"table_power": p1, "table_n": n1, "table_lo": l1, "table_hi": h1,
            "fits_power": p2, "fits_n": n2, "fits_lo": l2, "fits_hi": h2, "z": z,
            "fits_refit": float(rec.get("chinchilla_refit", 0.0))}


def agreement_sentence(agree: Mapping[str, float] | None) -> str:
    """``as_run_agreement``'s numbers in a sentence for the chapter (each power with its 95 % MC interval)."""
    if not agree or not all(math.isfinite(agree[k]) for k in ("table_power", "fits_power", "z")):
        return "One of the two estimates is missing, so they cannot be compared yet."
    same = "agree within Monte Carlo error" if abs(agree["z"]) < 1.96 else "differ beyond Monte Carlo error"
    why = (" The fits' simulation refits the Chinchilla constants on each simulated dataset's own high-precision "
           "runs, as the real bootstrap does; the table holds them at their fit, which leaves that spread out, so "
           "the table's P4 powers are optimistic and serve to rank designs, not to promise a power."
           if agree.get("fits_refit", 0.0) == 1.0 else "")
    return (f"The table gives {agree['table_power']:.2f} [{agree['table_lo']:.2f}, {agree['table_hi']:.2f}] from "
            f"{agree['table_n']:.0f} datasets, the fits {agree['fits_power']:.2f} [{agree['fits_lo']:.2f}, "
            f"{agree['fits_hi']:.2f}] from {agree['fits_n']:.0f}: they {same} (z = {agree['z']:.2f}).{why}")


def seed_choice(tab: pd.DataFrame, target: float = 0.8, claim: str = "P4", design: str = "as run") -> dict:
    """The fewest seeds of one family of candidates (``claim``'s designs whose name contains
    ``design``: P4's marginal sweeps as run by default) whose simulated power reaches ``target``.

    Args:
        tab: the design-power rows. target: the power wanted. claim, design: the family.

    Returns:
        ``simulated`` (the seed counts in the table, sorted), ``by_point`` (the fewest whose power ≥
        ``target``), ``by_interval`` (the fewest whose MC interval's lower end ≥ ``target``; the
        stricter reading), each None if no count reaches it, and ``power``: seeds -> (power, lo, hi).
    """
    rows = tab[(tab["claim"] == claim) & tab["design"].str.contains(design, regex=False)].sort_values("seeds")
    power = {int(r.seeds): (float(r.power), *mc_interval(float(r.power), float(r.n_sim))) for r in rows.itertuples()}
    by_point = next((k for k, v in power.items() if v[0] >= target), None)
    by_interval = next((k for k, v in power.items() if v[1] >= target), None)
    return {"simulated": sorted(power), "by_point": by_point, "by_interval": by_interval, "power": power,
            "target": target}


def seed_choice_sentence(choice: Mapping, declared_seeds: int, sweep: str = "qat_seeds") -> str:
    """``seed_choice`` beside the seeds the profile declares (for P4: seed 0 plus
    ``PowerPlan.marginal_seeds``, the ``qat_seeds`` sweep; for P5: ``factorial_seeds``)."""
    sims = ", ".join(map(str, choice["simulated"]))
    k = choice["by_interval"] or choice["by_point"]
    if k is None:
        return (f"No simulated seed count ({sims}) reaches power {choice['target']:.1f}; the profile declares "
                f"{declared_seeds} seeds.")
    p, lo, hi = choice["power"][k]
    how = "whose interval lies above" if choice["by_interval"] == k else "whose point estimate reaches"
    gap = [n for n in range(1, max(choice["simulated"]) + 1) if n not in choice["simulated"]]
    missing = f"; {', '.join(map(str, gap))} not simulated, so fewer might do" if gap and min(gap) < k else ""
    return (f"Of the simulated seed counts {sims}, the fewest {how} {choice['target']:.1f} is {k} "
            f"({p:.2f} [{lo:.2f}, {hi:.2f}]{missing}); the profile declares {declared_seeds} "
            f"({'seed 0 and ' if sweep == 'qat_seeds' else ''}`{sweep}`).")
