"""Tests of the functional forms (bitlaws.laws.forms) against the paper's constants and identities.

Oracles: the tables of ``book/papers/precision-scaling-laws.md`` §2 ("Sanity numbers", our
algebra on the paper's Table 2, checked there independently), and identities between the forms
(Eq. 9 reduces to Eq. 2 for a high-precision model; Eq. 11 to Eqs. 3–4 without PTQ; every Table 1
form to Chinchilla at high precision).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bitlaws.laws import forms
from bitlaws.laws.forms import PAPER_CONSTANTS as PC

N = np.array([30e6, 220e6])
D = np.array([1.5e9, 3e9, 6e9, 13e9, 26e9])


def test_bf16_loss_table_matches_the_papers_range():
    # §2 "BF16 loss" table (derived from Table 2), to the 2 decimals printed there.
    expected = np.array([[4.10, 3.95, 3.85, 3.77, 3.72], [3.58, 3.43, 3.33, 3.25, 3.20]])
    got = forms.chinchilla_loss(N[:, None], D[None, :], PC)
    np.testing.assert_allclose(got, expected, atol=0.006)


@pytest.mark.parametrize(
    "bits, w, a, kv, product",
    [(4, 0.696, 0.331, 0.828, 0.191), (6, 0.856, 0.730, 0.979, 0.611),
     (8, 0.932, 0.891, 0.997, 0.828), (16, 0.997, 0.997, 1.000, 0.994)],
)
def test_precision_factors_match_the_derived_table(bits, w, a, kv, product):
    got = [forms.precision_factor(bits, PC[f"gamma_{x}"], PC[f"n_{x}"], cutoff=False) for x in ("w", "a", "kv")]
    np.testing.assert_allclose(got, [w, a, kv], atol=6e-4)
    assert forms.tied_precision_factor(bits, PC) == pytest.approx(product, abs=6e-4)


def test_activation_factor_is_negative_at_three_bits_with_offsets():
    # The paper's P_a = 3 runs diverged and were excluded; the offset reading makes f_a(3) < 0.
    assert forms.precision_factor(3, PC["gamma_a"], PC["n_a"]) < 0
    assert forms.precision_factor(3, PC["gamma_a"]) > 0  # without the offset it is not


def test_high_precision_means_unquantized():
    assert forms.precision_factor(16, 0.5, 3.0) == 1.0
    assert forms.precision_factor(np.array([16, 32]), 2.0).tolist() == [1.0, 1.0]
    assert forms.precision_factor(16, 2.0, cutoff=False) == pytest.approx(1 - np.exp(-8.0))
    # a part that is unquantized everywhere needs no γ
    assert forms.n_eff(1e6, 4, 16, 16, {"gamma_w": 2.0}) == pytest.approx(1e6 * (1 - np.exp(-2.0)))


def test_n_eff_is_the_product_of_the_factors():
    bits_w, bits_a, bits_kv = np.array([3, 5, 8]), np.array([4, 6, 8]), np.array([5, 4, 12])
    expected = 1e8 * np.prod([forms.precision_factor(b, PC[f"gamma_{x}"], PC[f"n_{x}"])
                              for b, x in zip((bits_w, bits_a, bits_kv), ("w", "a", "kv"))], axis=0)
    np.testing.assert_allclose(forms.n_eff(1e8, bits_w, bits_a, bits_kv, PC), expected, rtol=1e-14)


def test_qat_loss_at_high_precision_is_chinchilla():
    np.testing.assert_allclose(forms.qat_loss(N[:, None], D, 16, 16, 16, PC),
                               forms.chinchilla_loss(N[:, None], D, PC), rtol=1e-15)


def test_qat_loss_falls_with_precision_and_is_nan_where_n_eff_is_negative():
    bits = np.arange(4, 13)
    loss = forms.qat_loss(1e8, 1e10, bits, bits, bits, PC)
    assert np.all(np.diff(loss) < 0)
    assert np.isnan(forms.qat_loss(1e8, 1e10, 8, 3, 8, PC))


def test_tied_beta_defaults_to_alpha():
    tied = {k: PC[k] for k in ("A", "B", "E", "alpha")}
    np.testing.assert_array_equal(forms.chinchilla_loss(N, 1e10, tied), forms.chinchilla_loss(N, 1e10, PC))


def test_missing_constant_is_a_clear_key_error():
    with pytest.raises(KeyError, match="gamma_w"):
        forms.n_eff(1e6, 4, 16, 16, {})


def test_delta_ptq_scaling_identities():
    base = forms.delta_ptq(30e6, 1e10, 4, PC)
    assert forms.delta_ptq(30e6, 2e10, 4, PC) / base == pytest.approx(2 ** PC["gamma_D"])
    assert forms.delta_ptq(60e6, 1e10, 4, PC) / base == pytest.approx(2 ** -PC["gamma_N"])
    assert forms.delta_ptq(30e6, 1e10, 5, PC) / base == pytest.approx(np.exp(-1 / PC["gamma_post"]))


def test_unified_law_reduces_to_eq2_for_a_high_precision_model():
    np.testing.assert_allclose(forms.unified_delta_ptq(N[:, None], D, 16, 16, 16, 4, PC),
                               forms.delta_ptq(N[:, None], D, 4, PC), rtol=1e-15)


def test_unified_law_robustification():
    params = {**PC, "C_w": 1.0}
    p_w = np.array([4.0, 5.0, 6.0, 8.0])
    delta = forms.unified_delta_ptq(1e8, 1e10, p_w, 16, 16, 4, params)
    assert delta[0] == 0.0                          # P_w = P_post: no degradation (§5)
    assert np.all(np.diff(delta) > 0)               # closer to P_post: less degradation
    # (far above P_post the bracket saturates and the larger N_eff wins: the two effects of §5)
    expected = (forms.delta_ptq(forms.n_eff(1e8, p_w, 16, 16, PC), 1e10, 4, PC)
                * (1 - np.exp(-(p_w - 4.0))))
    np.testing.assert_allclose(delta, expected, rtol=1e-14)
    # with C_w → ∞ the bracket is 1, leaving Eq. 2 with N_eff in place of N
    big = forms.unified_delta_ptq(1e8, 1e10, 8, 16, 16, 4, {**PC, "C_w": 1e6})
    neff = forms.n_eff(1e8, 8, 16, 16, PC)
    assert big == pytest.approx(forms.delta_ptq(neff, 1e10, 4, PC), rel=1e-12)
    # a part trained below P_post has bracket 0 (our reading of "P_train > P_post is assumed")
    assert forms.unified_delta_ptq(1e8, 1e10, 3, 16, 16, 4, params) == 0.0


def test_unified_loss_without_ptq_is_the_qat_loss():
    params = {**PC, "C_w": 1.0, "C_a": 1.0, "C_kv": 1.0}
    np.testing.assert_allclose(forms.unified_loss(1e8, D, 6, 8, 8, 16, params),
                               forms.qat_loss(1e8, D, 6, 8, 8, params), rtol=1e-15)
    with_ptq = forms.unified_loss(1e8, D, 8, 8, 8, 4, params)
    assert np.all(with_ptq > forms.qat_loss(1e8, D, 8, 8, 8, params))


_TABLE1_PARAMS = {"A": 4299.0, "B": 18060.0, "E": 2.76, "alpha": 0.5, "beta": 0.45, "gamma_w": 2.5,
                  "n_w": 0.3, "gamma_d": 3.0, "n_d": 0.5, "c_p": 2.0, "alpha_p": 1.5}


@pytest.mark.parametrize("name", list(forms.TABLE1_FORMS))
def test_table1_forms_reduce_to_chinchilla_at_high_precision_and_fall_with_bits(name):
    spec = forms.TABLE1_FORMS[name]
    n, d = np.array([3e7, 1e8]), np.array([2e9, 1e10])
    np.testing.assert_allclose(spec.loss(n, d, 16, _TABLE1_PARAMS), forms.chinchilla_loss(n, d, _TABLE1_PARAMS),
                               rtol=1e-15)
    loss = spec.loss(1e8, 1e10, np.arange(3, 13), _TABLE1_PARAMS)
    assert np.all(np.diff(loss) < 0), name
    assert len(spec.precision_params) == (4 if name == "n_d_eff_untied" else 3 if name == "n_d_eff_tied" else 2)


def test_forms_accept_complex_constants_for_complex_step_derivatives():
    h = 1e-20
    params = dict(PC)
    params["gamma_w"] = PC["gamma_w"] + 1j * h
    deriv = (forms.qat_loss(1e8, 1e10, 5, 8, 8, params).imag / h)
    eps = 1e-6
    fd = (forms.qat_loss(1e8, 1e10, 5, 8, 8, {**PC, "gamma_w": PC["gamma_w"] + eps})
          - forms.qat_loss(1e8, 1e10, 5, 8, 8, {**PC, "gamma_w": PC["gamma_w"] - eps})) / (2 * eps)
    assert deriv == pytest.approx(fd, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(n=st.floats(1e5, 1e11), d=st.floats(1e6, 1e13), k=st.floats(1.01, 10.0))
def test_chinchilla_loss_falls_in_n_and_d_toward_e(n, d, k):
    loss = forms.chinchilla_loss(n, d, PC)
    assert forms.chinchilla_loss(n * k, d, PC) < loss
    assert forms.chinchilla_loss(n, d * k, PC) < loss
    assert loss > PC["E"]


def test_n_eff_undefined_when_any_factor_is_not_positive():
    """Two negative factors must not multiply into a positive N_eff: with Table 2, P_a = P_kv = 2 bits
    gives f_a < 0 and f_kv < 0 (their product > 0), P = 3 gives f_a < 0 only; both are undefined."""
    p = forms.PAPER_CONSTANTS
    fa, fkv = (float(forms.precision_factor(2.0, p[f"gamma_{x}"], p[f"n_{x}"])) for x in ("a", "kv"))
    assert fa < 0 and fkv < 0 and fa * fkv > 0
    assert np.isnan(forms.n_eff(1e8, 16, 2, 2, p)) and np.isnan(forms.n_eff(1e8, 16, 3, 3, p))
    assert np.isnan(forms.qat_loss(1e8, 1e10, 16, 2, 2, p)) and np.isfinite(forms.qat_loss(1e8, 1e10, 16, 4, 4, p))
    out = forms.n_eff(np.array([1e8, 1e8]), 16, np.array([2.0, 8.0]), 16, p)
    assert np.isnan(out[0]) and out[1] == pytest.approx(1e8 * float(forms.precision_factor(8.0, p["gamma_a"], p["n_a"])))
