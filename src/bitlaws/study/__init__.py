"""The study: the `bitlaws` library applied to the two papers' claims.

The library (``formats``, ``quant``, ``precision``, ``corpus``, ``model``, ``train``, ``ptq``,
``kernels``, ``laws``, ``_io``) never imports this package. Here sit the profiles and declared
sweeps (``sweep``), the run store (``store``, ``checkpoints``), the claims and their verdicts
(``claims``, ``ledger``), one module per chapter (``number_formats``, ``ptq_degradation``,
``low_precision_training``, ``law_fits``, ``compute_optimal``, ``quik_accuracy``,
``quik_realmodel``, ``quik_kernels``) and the figures' style (``figures``).
"""

# The profiles whose rows the store holds: the keys of ``bitlaws.study.sweep.PROFILES`` (a test checks).
# Here, not in ``sweep``, so the command line lists them without importing torch.
PROFILE_NAMES = ("cpu", "gpu", "smoke")

# The experiment of a single run trained by ``python -m bitlaws train`` (no sweep declares it; ``bitlaws.study.sweep``
# declares the sweeps'): its rows may be copied into a profile's data folder, so the store's readers accept the name.
MANUAL_EXPERIMENT = "manual"

# Every experiment ``bitlaws.study.sweep`` can build (``sweep.EXPERIMENTS``) and those each profile declares
# (``sweep.declared_experiments``): a test checks both. Here, so the store can name them without importing the sweep
# (which imports the store) or torch.
EXPERIMENT_NAMES = ("base_grid", "qat_marginal", "qat_joint", "qat_formats", "compute_matched", "lr_peak",
                    "lr_schedule", "repetition", "qat_seeds", "qat_matched", "qat_factorial", "qat_mechanism")
DECLARED_EXPERIMENTS = {"cpu": EXPERIMENT_NAMES,
                        "gpu": ("base_grid", "qat_marginal", "qat_joint", "qat_formats", "compute_matched"),
                        "smoke": ("base_grid", "qat_marginal", "qat_joint", "qat_formats", "compute_matched", "lr_peak",
                                  "lr_schedule", "repetition")}
