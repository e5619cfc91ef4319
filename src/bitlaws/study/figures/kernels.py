"""Chapter 06 (QUIK kernels) figures, each drawn by one named function (the chapter calls it; no plotting in the notebook)."""

from __future__ import annotations

__all__: list[str] = []
