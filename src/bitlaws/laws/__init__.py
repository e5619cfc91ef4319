"""Precision scaling laws (Kumar et al. 2024): forms, fitters, compute-optimal analysis.

numpy/scipy only (frames in, numbers out): ``forms`` holds the functional forms and the paper's
published constants, ``fit`` the Besiroglu-style fitters and the piecewise pipeline's stages,
``optimal`` the compute-optimal analysis (P*, N*, D*, D_crit, fixed-N and inference-cost variants).
"""

from . import fit, forms, optimal

__all__ = ["fit", "forms", "optimal"]
