"""bitlaws: Scaling Laws for Precision (Kumar et al. 2024) and QUIK (Ashkboos et al. 2023), rerun small."""

__version__ = "0.1.0"
