"""The book's figures: one style (:mod:`.style`: colours, markers, labels, units) and one module of
named figure functions per chapter, so a chapter draws a figure in one line.

``from bitlaws.study import figures`` gives the style names directly (``figures.apply_style()``,
``figures.label("n_tokens")``) and each chapter's module as an attribute (``figures.ptq``,
``figures.quik``, ...). Figures carry no titles: the caption in the book is the title.
"""

from __future__ import annotations

from . import compute, confounds, formats, kernels, laws, ptq, quik, training
from .quik import smol_k_figure, smol_methods_figure, smol_outlier_figure
from .style import (BITS_RANGE, COLORS, MARKERS, apply_style, bits_color, human, label, log_axis, size_color,
                    token_unit, use_units)

__all__ = ["COLORS", "MARKERS", "BITS_RANGE", "apply_style", "bits_color", "label", "log_axis", "size_color", "human",
           "use_units", "token_unit", "smol_methods_figure", "smol_k_figure", "smol_outlier_figure",
           "formats", "ptq", "training", "laws", "compute", "quik", "kernels", "confounds"]
