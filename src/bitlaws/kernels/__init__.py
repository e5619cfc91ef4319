"""QUIK's kernels in Triton, each with a pure-torch ``*_ref`` twin (Ashkboos et al. 2023).

One file per family:

* :mod:`~bitlaws.kernels.quik_act` — fused split of the outlier features and asymmetric per-token
  quantization of the rest to int8 or packed int4 (`quik_act`, `quik_act_ref`, `pack_int4`);
* :mod:`~bitlaws.kernels.int_gemm` — int8 x int8 -> int32 GEMM, and its int4 variant unpacked in
  registers, with the fused dequantization epilogue (`int_gemm`, `int_gemm_dequant` and refs);
* :mod:`~bitlaws.kernels.quik_linear` — `QuikLinear`, the layer that strings them together;
* :mod:`~bitlaws.kernels.benchmark` — Llama-2 layer shapes and tidy timing rows (the Q4 verdict is the study's, `bitlaws.study.quik_kernels`).

Triton is optional: without it the ``*_ref`` functions and `QuikLinear`'s reference path work
(on the CPU the integer GEMM is ``torch._int_mm``). With it, CUDA tensors run the compiled
kernels and CPU tensors run them in Triton's interpreter (for tests).
"""

from ._triton import HAS_TRITON
from .int_gemm import int_gemm, int_gemm_dequant, int_gemm_dequant_ref, int_gemm_ref
from .quik_act import QuantizedAct, pack_int4, quik_act, quik_act_ref, unpack_int4
from .quik_linear import QuikLinear

__all__ = [
    "HAS_TRITON",
    "QuantizedAct",
    "quik_act",
    "quik_act_ref",
    "pack_int4",
    "unpack_int4",
    "int_gemm",
    "int_gemm_ref",
    "int_gemm_dequant",
    "int_gemm_dequant_ref",
    "QuikLinear",
]
