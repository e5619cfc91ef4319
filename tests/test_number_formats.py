"""Chapter 00's computations (bitlaws.study.number_formats): the formats table against the formats'
known constants, the SNR against hand-computed oracles and the closed form of integers on uniform
data, and the per-channel comparison on a matrix whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from bitlaws.study import number_formats as nf


def test_short_name():
    assert nf.short_name("fp6_e3m2fn") == "E3M2"
    assert nf.short_name("fp4_e2m1fn") == "E2M1"
    assert nf.short_name("int4") == "INT4"
    with pytest.raises(ValueError):
        nf.short_name("int0.5")


def test_formats_table_rows_match_the_formats_constants():
    t = nf.formats_table().set_index("name")
    # E2M1 (OCP): magnitudes 0, 0.5 (subnormal), 1, 1.5, 2, 3, 4, 6 -> 15 values with signs, log2(6/0.5) binades
    e2m1 = t.loc["fp4_e2m1fn"]
    assert (e2m1["E"], e2m1["M"], e2m1["bias"], e2m1["values"]) == (2, 1, 1, 15)
    assert (e2m1["max"], e2m1["min normal"], e2m1["min subnormal"]) == ("6", "1", "0.5")
    assert e2m1["range [binades]"] == f"{math.log2(12):.1f}"
    assert t.loc["fp8_e4m3fn", "max"] == "448"
    # INT4 symmetric absmax: codes -7..7
    assert (t.loc["int4", "max"], t.loc["int4", "values"], t.loc["int4", "range [binades]"]) == (7, 15, "2.8")
    assert t.loc["int8", "values"] == 255
    assert list(t["bits"].iloc[:7]) == [3, 4, 5, 6, 7, 8, 12]


def test_paper_table_flags_the_five_bit_entry():
    t = nf.paper_table().set_index("bits")
    assert t.loc[5, "paper (App. D.2)"] == "E4M1" and t.loc[5, "here"] == "fp5_e3m1fn"
    assert t.loc[6, "here"] == "fp6_e3m2fn" and t.loc[6, "note"] == ""
    assert "6 bits" in t.loc[5, "note"]


def test_snr_db_against_a_hand_computed_oracle():
    # int3 absmax: step 3/3 = 1; 0.4 rounds to 0, 3 stays 3: SNR = 10 log10(9.16 / 0.16)
    x = torch.tensor([3.0, 0.4])
    assert nf.snr_db([x], "int3") == pytest.approx(10 * math.log10(9.16 / 0.16), rel=1e-6)
    # pooled over two tensors: the sums add before the ratio
    y = torch.tensor([3.0, 1.4])  # 1.4 -> 1, error 0.16
    assert nf.snr_db([x, y], "int3") == pytest.approx(10 * math.log10((9.16 + 10.96) / 0.32), rel=1e-6)


def test_integer_snr_on_uniform_data_follows_the_closed_form():
    draws = {"uniform": nf.sample_draws()["uniform"]}
    snr = nf.snr_table(draws)
    u = snr[snr["family"] == "int"].set_index("bits")["snr_db"]
    for b in nf.BITS:  # step max/(2^(b-1)-1), noise step^2/12 against signal 1/3: 20 log10(2^b - 2) dB
        assert abs(u[b] - 20 * math.log10(2.0**b - 2)) < 0.1
    assert set(snr["family"]) == {"int", "fp", "ocp"} and len(snr) == 2 * len(nf.BITS) + len(nf.OCP_AT)


def test_gain_per_bit_and_prose_values_on_a_constructed_table():
    rows = []
    for data in ("uniform", "Gaussian", "Student-t, ν = 3"):
        for b, s in zip(range(3, 9), (10.0, 17.0, 23.0, 29.5, 35.5, 41.5)):
            rows.append({"data": data, "family": "int", "bits": b, "fmt": f"int{b}", "snr_db": s})
            rows.append({"data": data, "family": "fp", "bits": b, "fmt": "x", "snr_db": s + 1})
    snr = pd.DataFrame(rows)
    gain = nf.uniform_int_gain_per_bit(snr)
    assert list(gain.index) == [4, 5, 6, 7, 8] and list(gain) == [7.0, 6.0, 6.5, 6.0, 6.0]
    v = nf.snr_prose_values(snr)
    assert v["snr_gain_per_bit"] == "7.00, 6.00, 6.50, 6.00, 6.00"
    assert v["snr_fp4_name"] == "E3M0" and v["snr_t3_fp4"] == 18.0 and v["snr_t3_int4"] == 17.0
    assert (v["snr_gauss_fp6"], v["snr_gauss_fp7"], v["snr_gauss_fp8"]) == (30.5, 36.5, 42.5)


def test_row_snr_counts_a_row_rounded_to_zero_as_zero_db():
    W = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    W_hat = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert nf.row_snr_db(W, W_hat) == pytest.approx((10 * math.log10(5.0) + 0.0) / 2)


def test_per_channel_rescues_a_small_row_that_per_tensor_rounds_to_zero():
    # Row 2 is row 1 times 0.01: with one int3 scale (step 1/3 of row 1's max) it rounds to zero
    # (0 dB); with one scale per row it has row 1's SNR. So INT's per-channel gain is half row 1's SNR.
    row = torch.tensor([1.0, 0.5, 0.25, 0.8])
    W = torch.stack([row, 0.01 * row])
    gran = nf.granularity_table(W, bits=[3])
    t = gran[gran["family"] == "int"].set_index("granularity")["row_snr_db"]
    s1 = 2 * float(t["per tensor"])  # the mean of row 1's SNR and 0 dB
    assert float(t["per channel"]) == pytest.approx(s1, rel=1e-5)
    assert nf.granularity_gain(gran)["int"][3] == pytest.approx(s1 / 2, rel=1e-5)
    v = nf.granularity_prose_values(gran, np.array([[1.0], [0.01]]))
    assert v["gran_int_min"] == v["gran_int_max"] == pytest.approx(s1 / 2, rel=1e-5)
    assert v["gran_fp_best_bits"] == 3 and v["gran_row_spread"] == pytest.approx(100.0)


def test_uneven_rows_matrix_is_seeded_and_spread_as_declared():
    W, scale = nf.uneven_rows_matrix()
    W2, _ = nf.uneven_rows_matrix()
    assert W.shape == (256, 1024) and W.dtype == torch.float32 and scale.shape == (256, 1)
    assert torch.equal(W, W2)
    assert np.exp(-2) <= scale.min() and scale.max() <= np.exp(2)
