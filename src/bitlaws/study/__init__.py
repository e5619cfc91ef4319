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
