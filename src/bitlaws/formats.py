"""Number-format specifications, by name.

This module holds the integer formats the foundation needs; the floating-point ExMy formats
(`fp8_e4m3fn`, `fp4_e2m1fn`, the paper's `fp{bits}_e{E}m{M}` sweep) extend it later with the same
`parse_format` entry point.

Integer formats follow the usual two's-complement ranges: a signed `b`-bit integer takes values in
[-2^(b-1), 2^(b-1) - 1] and its unsigned counterpart in [0, 2^b - 1]. Symmetric (absmax)
quantizers use the signed range with scale absmax / (2^(b-1) - 1), as Kumar et al. (App. D) and
QUIK's weights; asymmetric (zero-point) quantizers use the unsigned range, as GPTQ's default.
(GPTQ's own symmetric mode differs: unsigned codes with zero point 2^(b-1) and scale
2·absmax / (2^b - 1).)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["IntFormat", "parse_format", "MIN_INT_BITS", "MAX_INT_BITS"]

MIN_INT_BITS = 2
MAX_INT_BITS = 16


@dataclass(frozen=True)
class IntFormat:
    """A `bits`-bit integer grid.

    Args:
        bits: total bits, 2 to 16.

    Raises:
        ValueError: if `bits` is not an int in [2, 16].
    """

    bits: int

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int):
            raise ValueError(f"IntFormat.bits must be an int in [{MIN_INT_BITS}, {MAX_INT_BITS}], got {self.bits!r}")
        if not MIN_INT_BITS <= self.bits <= MAX_INT_BITS:
            raise ValueError(f"IntFormat.bits must be in [{MIN_INT_BITS}, {MAX_INT_BITS}], got {self.bits}")

    @property
    def name(self) -> str:
        return f"int{self.bits}"

    def qrange(self, symmetric: bool) -> tuple[int, int]:
        """Integer code range (q_min, q_max): signed for symmetric, unsigned for asymmetric."""
        if symmetric:
            return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        return 0, 2**self.bits - 1


_INT_RE = re.compile(r"^int(\d+)$")


def parse_format(fmt: str | IntFormat) -> IntFormat:
    """Return the format named `fmt` (``"int2"`` ... ``"int16"``), or `fmt` itself if already a spec.

    Raises:
        ValueError: unknown name; the message lists the allowed names.
    """
    if isinstance(fmt, IntFormat):
        return fmt
    m = _INT_RE.match(str(fmt))
    if m is None:
        raise ValueError(f"unknown number format {fmt!r}; allowed: 'int{MIN_INT_BITS}' ... 'int{MAX_INT_BITS}'")
    return IntFormat(int(m.group(1)))
