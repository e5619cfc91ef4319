"""Slow oracles for the QUIK kernel tests (float64 and int64), imported by tests/test_kernels_*.py,
and checks of the oracles themselves on hand-computed examples."""

from __future__ import annotations

import os

import torch

# Without CUDA, Triton's kernels run only in its interpreter, which must be on before triton is first
# imported in this process (bitlaws.kernels imports it): every kernel test module says so first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from bitlaws.kernels import unpack_int4  # noqa: E402

U32 = 2.0**-24  # unit roundoff of fp32


def codes_int(codes: torch.Tensor, k: int, bits: int) -> torch.Tensor:
    """Signed integer codes (M, k) as int64, unpacked at 4 bits."""
    return (unpack_int4(codes, k) if bits == 4 else codes).long().cpu()


def int64_gemm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``a @ w^T`` in int64 on the CPU: the integer GEMM's oracle."""
    return a.long().cpu() @ w.long().cpu().t()


def dequant_oracle(a, w, s, z, sigma, bits, y=None, bias=None):
    """``x_hat @ W_hat^T + Y + b`` in float64 from the quantized operands, and the error bound.

    x_hat = s_t (a + h - z_t), W_hat = sigma_n w; a, w are (M, K) and (N, K) integer codes.

    Returns:
        (ref, tol): tol is 8 fp32 roundings of the sum of the epilogue terms' magnitudes
        |s sigma A| + |s (h - z) R| + |Y| + |b|, elementwise: the fp32 epilogue rounds each of its
        few operations once, and R itself is stored in fp32.
    """
    h = 2.0 ** (bits - 1)
    s, z, sigma = s.double().cpu(), z.double().cpu(), sigma.double().cpu()
    a, w = a.long().cpu(), w.long().cpu()
    x_hat = s[:, None] * (a.double() + h - z[:, None])
    w_hat = sigma[:, None] * w.double()
    ref = x_hat @ w_hat.t()
    A = (a @ w.t()).double()
    R = w_hat.sum(dim=1)
    mag = (s[:, None] * sigma[None, :] * A).abs() + (s * (h - z))[:, None].abs() * R.abs()[None, :]
    if y is not None:
        ref = ref + y.double().cpu()
        mag = mag + y.double().cpu().abs()
    if bias is not None:
        ref = ref + bias.double().cpu()
        mag = mag + bias.double().cpu().abs()
    return ref, 8 * U32 * mag + 1e-30


def output_rounding(ref: torch.Tensor, dtype: torch.dtype, truncating: bool = False) -> torch.Tensor:
    """One rounding of `ref` to `dtype`: half an ulp (relative), or a whole one where the conversion
    truncates (Triton's interpreter converts fp32 to bf16 by dropping bits; a GPU rounds to nearest)."""
    if dtype == torch.float32:
        return torch.zeros_like(ref)
    return ref.abs() * torch.finfo(dtype).eps * (1.0 if truncating else 0.5)


# --------------------------------------------------------------------------- the oracles' own checks


def test_int64_gemm_on_a_hand_example():
    a = torch.tensor([[1, -2, 3]])
    w = torch.tensor([[4, 5, -6], [-8, 7, 7]])
    assert int64_gemm(a, w).tolist() == [[4 - 10 - 18, -8 - 14 + 21]]


def test_dequant_oracle_is_the_dequantized_product():
    # x_hat = s (a + h - z): with s = 0.5, z = 3, h = 8: codes [-8, 7] -> [-1.5, 6.0]; W_hat = 2 [1, 1].
    a, w = torch.tensor([[-8, 7]]), torch.tensor([[1, 1]])
    ref, tol = dequant_oracle(a, w, torch.tensor([0.5]), torch.tensor([3.0]), torch.tensor([2.0]), bits=4,
                              y=torch.tensor([[0.25]]), bias=torch.tensor([1.0]))
    assert ref.item() == 2 * (-1.5 + 6.0) + 0.25 + 1.0
    assert 0 < tol.item() < 1e-5
