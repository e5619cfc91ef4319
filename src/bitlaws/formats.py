"""Number-format specifications, by name: integer grids and floating-point ExMy formats.

``IntFormat(bits)`` (``int2`` ... ``int16``) is a `b`-bit integer grid: signed codes
``[-2^(b-1), 2^(b-1) - 1]`` for symmetric (absmax) quantizers, unsigned ``[0, 2^b - 1]`` for
asymmetric (zero-point) ones. ``FloatFormat(E, M)`` has one sign bit, `E` exponent bits and `M`
stored mantissa bits (``bits = 1 + E + M``, bias ``2^(E-1) - 1``); it is finite-only ("fn", no Inf
or NaN) by default, except E4M3, which is the OCP ``fp8_e4m3fn`` of Micikevicius et al. 2022 (max
448), and IEEE-like with ``finite_only=False``. :func:`parse_format` reads the names:
``fp{bits}_e{E}m{M}fn``, the OCP names of ml_dtypes, and the IEEE-like ``fp8_e5m2``, ``fp8_e4m3``,
``fp8_e3m4`` only. :data:`PAPER_FP_FORMATS` is the table of Kumar et al. 2024, App. D.2.

The value of each code, the special codes of each family, the names, rounding and saturation, and
the paper's formats are written out in the book's methods page, section "Number formats".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Union

import numpy as np

__all__ = [
    "IntFormat",
    "FloatFormat",
    "Format",
    "parse_format",
    "PAPER_FP_FORMATS",
    "OCP_FP_FORMATS",
    "MIN_INT_BITS",
    "MAX_INT_BITS",
    "MIN_EXP_BITS",
    "MAX_EXP_BITS",
    "MAX_MAN_BITS",
]

MIN_INT_BITS = 2
MAX_INT_BITS = 16

MIN_EXP_BITS = 1
MAX_EXP_BITS = 8
MAX_MAN_BITS = 23  # the cast works from float32, which has 23 stored mantissa bits
_MAX_ENUM_BITS = 16  # `values()` lists at most 2^16 codes


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


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class FloatFormat:
    """A sign–exponent–mantissa floating-point format ExMy (the book's methods page, "Number formats").

    Args:
        exp_bits: E, exponent bits, 1 to 8 (2 to 8 for IEEE-like formats).
        man_bits: M, stored mantissa bits, 0 to 23.
        finite_only: True (default) for the "fn" family — every code a number, except E4M3,
            which is OCP ``fp8_e4m3fn`` (all-ones code NaN); False for IEEE-like formats whose
            top exponent field holds Inf/NaN.

    Raises:
        ValueError: a field outside its range, or a format whose largest value overflows
            float32 (E = 8 finite-only), naming the field.

    Examples:
        ``FloatFormat(2, 1)`` is ``fp4_e2m1fn`` (max 6); ``FloatFormat(5, 2, finite_only=False)``
        is ``fp8_e5m2`` (max 57344).
    """

    exp_bits: int
    man_bits: int
    finite_only: bool = True

    def __post_init__(self) -> None:
        if not _is_int(self.exp_bits) or not MIN_EXP_BITS <= self.exp_bits <= MAX_EXP_BITS:
            raise ValueError(
                f"FloatFormat.exp_bits must be an int in [{MIN_EXP_BITS}, {MAX_EXP_BITS}], got {self.exp_bits!r}"
            )
        if not _is_int(self.man_bits) or not 0 <= self.man_bits <= MAX_MAN_BITS:
            raise ValueError(f"FloatFormat.man_bits must be an int in [0, {MAX_MAN_BITS}], got {self.man_bits!r}")
        if not isinstance(self.finite_only, bool):
            raise ValueError(f"FloatFormat.finite_only must be a bool, got {self.finite_only!r}")
        if not self.finite_only and self.exp_bits < 2:
            raise ValueError("FloatFormat.exp_bits must be >= 2 for an IEEE-like format (finite_only=False)")
        if self.max > float(np.finfo(np.float32).max):
            raise ValueError(
                f"FloatFormat(exp_bits={self.exp_bits}, man_bits={self.man_bits}, finite_only={self.finite_only}): "
                f"its max {self.max:.4g} overflows float32; use exp_bits <= 7 or finite_only=False"
            )

    # ------------------------------------------------------------------ layout

    @property
    def bits(self) -> int:
        """Total bits, 1 + E + M (the sign bit is always there)."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        """Exponent bias, 2^(E-1) - 1."""
        return 2 ** (self.exp_bits - 1) - 1

    @property
    def nan_all_ones(self) -> bool:
        """True for OCP E4M3 (``fp8_e4m3fn``): the code with every exponent and mantissa bit set is NaN."""
        return self.finite_only and (self.exp_bits, self.man_bits) == (4, 3)

    @property
    def name(self) -> str:
        """``fp{bits}_e{E}m{M}fn`` (finite-only, and OCP E4M3) or ``fp{bits}_e{E}m{M}`` (IEEE-like)."""
        return f"fp{self.bits}_e{self.exp_bits}m{self.man_bits}" + ("fn" if self.finite_only else "")

    # ------------------------------------------------------------------ range

    @property
    def _top_exp_field(self) -> int:
        """The largest exponent field that holds finite numbers."""
        return 2**self.exp_bits - 1 - (0 if self.finite_only else 1)

    @property
    def max(self) -> float:
        """The largest finite value (448 for fp8_e4m3fn, 57344 for fp8_e5m2, 6 for fp4_e2m1fn)."""
        e = self._top_exp_field
        m_top = 2**self.man_bits - 1 - (1 if self.nan_all_ones else 0)
        return math.ldexp(1.0 + m_top / 2**self.man_bits, e - self.bias)

    @property
    def min_normal(self) -> float:
        """The smallest positive normal value, 2^(1 - bias)."""
        return math.ldexp(1.0, 1 - self.bias)

    @property
    def min_subnormal(self) -> float | None:
        """The smallest positive subnormal, 2^(1 - bias - M); None when M = 0 (no subnormals but 0)."""
        if self.man_bits == 0:
            return None
        return math.ldexp(1.0, 1 - self.bias - self.man_bits)

    def qrange(self, symmetric: bool = True) -> tuple[float, float]:
        """Value range (-max, max) of the scaled quantizer; FP formats are symmetric only.

        Raises:
            ValueError: `symmetric` is False.
        """
        if not symmetric:
            raise ValueError(
                f"{self.name} is a floating-point format: only symmetric (absmax) quantization is supported"
            )
        return -self.max, self.max

    # ------------------------------------------------------------------ values

    def value_of(self, exp_field: int, man_field: int) -> float:
        """The magnitude a (exponent field, mantissa field) pair stands for, or NaN/Inf for special codes.

        Raises:
            ValueError: a field out of range.
        """
        if not 0 <= exp_field < 2**self.exp_bits or not 0 <= man_field < 2**self.man_bits:
            raise ValueError(f"code fields ({exp_field}, {man_field}) out of range for {self.name}")
        if not self.finite_only and exp_field == 2**self.exp_bits - 1:
            return math.inf if man_field == 0 else math.nan
        if self.nan_all_ones and exp_field == 2**self.exp_bits - 1 and man_field == 2**self.man_bits - 1:
            return math.nan
        frac = man_field / 2**self.man_bits
        if exp_field == 0:
            return math.ldexp(frac, 1 - self.bias)
        return math.ldexp(1.0 + frac, exp_field - self.bias)

    def values(self, positive: bool = False) -> np.ndarray:
        """Every finite value of the format, sorted ascending, zero once (float64).

        Args:
            positive: only zero and the positive values.

        Returns:
            (2·K - 1,) float64, or (K,) with `positive` — K distinct magnitudes including 0.

        Raises:
            ValueError: more than 2^16 codes (E + M > 16) would be listed.
        """
        if self.exp_bits + self.man_bits > _MAX_ENUM_BITS:
            raise ValueError(f"{self.name} has 2^{self.exp_bits + self.man_bits} magnitudes; too many to enumerate")
        mags = np.array(
            [self.value_of(e, m) for e in range(2**self.exp_bits) for m in range(2**self.man_bits)], dtype=np.float64
        )
        mags = np.unique(mags[np.isfinite(mags)])
        if positive:
            return mags
        return np.concatenate([-mags[:0:-1], mags])


Format = Union[IntFormat, FloatFormat]

#: OCP formats by name (ml_dtypes semantics).
OCP_FP_FORMATS: dict[str, FloatFormat] = {
    "fp8_e4m3fn": FloatFormat(4, 3),
    "fp8_e5m2": FloatFormat(5, 2, finite_only=False),
    "fp6_e2m3fn": FloatFormat(2, 3),
    "fp6_e3m2fn": FloatFormat(3, 2),
    "fp4_e2m1fn": FloatFormat(2, 1),
}

# IEEE-like names accepted by `parse_format` (ml_dtypes' float8_e5m2, float8_e4m3, float8_e3m4).
_IEEE_NAMES = ("fp8_e5m2", "fp8_e4m3", "fp8_e3m4")

#: The paper's floating-point training formats by total bits (Kumar et al., App. D.2).
#:
#: Bits 3, 4, 6, 7, 12 are the finite-only ExMy formats of its table (E2M0, E3M0, E3M2, E4M2,
#: E5M6). Bits 8 is E5M2 and the paper takes its rules from Micikevicius et al. 2022, so it is
#: the OCP/IEEE-like ``fp8_e5m2`` (top exponent field reserved, max 57344). Bits 5: the paper's
#: table says E4M1, which with the sign bit is 6 bits, not 5; we use E3M1 instead — a true 5-bit
#: format that keeps the E = 3 exponent of the 4- and 6-bit entries, so 4 → 5 → 6 bits adds
#: mantissa bits only (E3M0 → E3M1 → E3M2), the smooth path the neighbouring entries suggest.
PAPER_FP_FORMATS: dict[int, str] = {
    3: "fp3_e2m0fn",
    4: "fp4_e3m0fn",
    5: "fp5_e3m1fn",
    6: "fp6_e3m2fn",
    7: "fp7_e4m2fn",
    8: "fp8_e5m2",
    12: "fp12_e5m6fn",
}

_INT_RE = re.compile(r"^int(\d+)$")
_FP_RE = re.compile(r"^fp(\d+)_e(\d+)m(\d+)(fn)?$")

_ALLOWED = (
    f"'int{MIN_INT_BITS}' ... 'int{MAX_INT_BITS}'; "
    + ", ".join(repr(n) for n in OCP_FP_FORMATS)
    + ", "
    + ", ".join(repr(n) for n in _IEEE_NAMES[1:])
    + f"; and finite-only 'fp{{bits}}_e{{E}}m{{M}}fn' with bits = 1 + E + M, E in [{MIN_EXP_BITS}, 7], "
    f"M in [0, {MAX_MAN_BITS}] (e.g. " + ", ".join(repr(n) for n in PAPER_FP_FORMATS.values() if n.endswith("fn")) + ")"
)


def parse_format(fmt: str | IntFormat | FloatFormat) -> IntFormat | FloatFormat:
    """Return the format named `fmt`, or `fmt` itself if already a spec.

    Names: ``int2`` ... ``int16``; ``fp8_e4m3fn``, ``fp8_e5m2``, ``fp6_e2m3fn``, ``fp6_e3m2fn``,
    ``fp4_e2m1fn`` (OCP); ``fp8_e4m3``, ``fp8_e3m4`` (IEEE-like, as ml_dtypes); and any
    finite-only ``fp{bits}_e{E}m{M}fn`` (``fp3_e2m0fn``, ``fp12_e5m6fn``, ...).

    Raises:
        ValueError: unknown name (the message lists the allowed names), a bit count that is not
            1 + E + M, or fields out of range.
    """
    if isinstance(fmt, (IntFormat, FloatFormat)):
        return fmt
    text = str(fmt)
    m = _INT_RE.match(text)
    if m is not None:
        return IntFormat(int(m.group(1)))
    m = _FP_RE.match(text)
    if m is not None:
        bits, e, man, fn = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        if bits != 1 + e + man:
            raise ValueError(f"format {text!r}: {bits} bits but 1 + E + M = {1 + e + man}")
        if fn:
            return FloatFormat(e, man, finite_only=True)
        if text in _IEEE_NAMES:
            return FloatFormat(e, man, finite_only=False)
        raise ValueError(
            f"unknown number format {text!r}: finite-only formats end in 'fn' (did you mean {text + 'fn'!r}?); "
            f"IEEE-like names are only {', '.join(map(repr, _IEEE_NAMES))} (others: "
            f"FloatFormat(E, M, finite_only=False)); allowed: {_ALLOWED}"
        )
    raise ValueError(f"unknown number format {fmt!r}; allowed: {_ALLOWED}")
