"""Tests of the pure-numpy radio package ``channel``.

Reference values are computed by hand in each test, with the arithmetic written out.  Sources:
3GPP TR 36.814 Annex A macro-cell path loss 128.1 + 37.6 log10(d/km); AnycostFL Sec. V-A (cell radius 550 m,
1 MHz sub-band, -114 dBm/MHz noise, 0.1 W) and eq. (8) for the Shannon rate; Friis free-space loss.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import channel
from channel import (
    ChannelInputError,
    RadioModel,
    RandomWalk,
    Redraw,
    Static,
    db_to_linear,
    dbm_per_mhz_to_w_per_hz,
    dbm_to_w,
    distances_m,
    fdma_bandwidth_hz,
    ghz_to_hz,
    lognormal_shadowing_db,
    linear_to_db,
    mhz_to_hz,
    pathloss_3gpp_macro_db,
    pathloss_free_space_db,
    pathloss_log_distance_db,
    rayleigh_power_gain,
    shannon_rate_bps,
    uniform_disk,
    w_to_dbm,
)

# Named tolerances.
FLOAT_RTOL = 1e-12  # same formula evaluated two ways in float64
HAND_RTOL = 1e-9  # hand-typed decimals below carry about 11 significant digits
BOUNDS_RTOL = 1e-12  # a position's distance is recomputed from x, y: a few ulp of rounding
N_STANDARD_ERRORS = 3.0  # Monte-Carlo checks pass within 3 standard errors (fixed seeds: deterministic)
KS_MIN_P_VALUE = 0.01  # a Kolmogorov-Smirnov test at a fixed seed must not reject at the 1 % level

SEED = 20240601
CELL_RADIUS_M = 550.0  # AnycostFL Sec. V-A
MIN_DISTANCE_M = 10.0
FAST = settings(max_examples=60, deadline=None)


def _in_annulus(d_m: np.ndarray, inner_m: float, radius_m: float) -> bool:
    slack_m = BOUNDS_RTOL * radius_m
    return bool(np.all((d_m >= inner_m - slack_m) & (d_m <= radius_m + slack_m)))


# ----------------------------------------------------------------------------------------------- units


def test_noise_psd_minus_114_dbm_per_mhz_in_w_per_hz() -> None:
    # -114 dBm/MHz = 10^(-114/10) mW/MHz = 10^-11.4 mW/MHz = 10^-14.4 W/MHz = 10^-14.4 / 1e6 W/Hz = 10^-20.4 W/Hz
    expected_w_per_hz = 10.0**-20.4  # = 3.981071705535e-21
    assert dbm_per_mhz_to_w_per_hz(-114.0) == pytest.approx(expected_w_per_hz, rel=FLOAT_RTOL)
    assert dbm_per_mhz_to_w_per_hz(-114.0) == pytest.approx(3.981071705535e-21, rel=HAND_RTOL)


def test_unit_conversions_by_hand() -> None:
    assert dbm_to_w(20.0) == pytest.approx(0.1, rel=FLOAT_RTOL)  # 10^(20/10) mW = 100 mW = 0.1 W
    assert dbm_to_w(0.0) == pytest.approx(1e-3, rel=FLOAT_RTOL)  # 0 dBm = 1 mW
    assert w_to_dbm(1.0) == pytest.approx(30.0, rel=FLOAT_RTOL)  # 10 log10(1 / 1e-3) = 30
    assert db_to_linear(10.0) == pytest.approx(10.0, rel=FLOAT_RTOL)  # 10^(10/10)
    assert db_to_linear(3.0) == pytest.approx(1.99526231497, rel=HAND_RTOL)  # 10^0.3
    assert linear_to_db(100.0) == pytest.approx(20.0, rel=FLOAT_RTOL)  # 10 log10(100)
    assert mhz_to_hz(1.5) == pytest.approx(1.5e6, rel=FLOAT_RTOL)
    assert ghz_to_hz(2.4) == pytest.approx(2.4e9, rel=FLOAT_RTOL)


def test_units_are_vectorised() -> None:
    values_db = np.array([[-10.0, 0.0], [10.0, 20.0]])
    linear = db_to_linear(values_db)
    assert isinstance(linear, np.ndarray) and linear.shape == (2, 2)
    np.testing.assert_allclose(linear, [[0.1, 1.0], [10.0, 100.0]], rtol=FLOAT_RTOL)
    np.testing.assert_allclose(w_to_dbm(np.array([0.001, 0.1, 1.0])), [0.0, 20.0, 30.0], rtol=FLOAT_RTOL)


@FAST
@given(st.floats(min_value=-300.0, max_value=300.0))
def test_db_round_trips(value_db: float) -> None:
    assert linear_to_db(db_to_linear(value_db)) == pytest.approx(value_db, rel=FLOAT_RTOL, abs=1e-12)
    assert w_to_dbm(dbm_to_w(value_db)) == pytest.approx(value_db, rel=FLOAT_RTOL, abs=1e-12)


def test_unit_errors_name_the_argument() -> None:
    with pytest.raises(ChannelInputError, match=r"value_linear=0\.0: must be > 0"):
        linear_to_db(0.0)
    with pytest.raises(ChannelInputError, match=r"power_w\[1\]=-1\.0: must be > 0"):
        w_to_dbm([0.1, -1.0])
    with pytest.raises(ChannelInputError, match="value_db=.*overflows"):
        db_to_linear(4000.0)
    with pytest.raises(ChannelInputError, match="power_dbm=nan: must be finite"):
        dbm_to_w(float("nan"))


# ------------------------------------------------------------------------------------------- path loss


def test_3gpp_macro_pathloss_at_550_m() -> None:
    # 128.1 + 37.6 log10(550 m / 1000 m) = 128.1 + 37.6 * (-0.259637310506) = 128.1 - 9.762362875 = 118.337637125 dB
    expected_db = 128.1 + 37.6 * math.log10(0.55)
    assert pathloss_3gpp_macro_db(550.0) == pytest.approx(expected_db, rel=FLOAT_RTOL)
    assert pathloss_3gpp_macro_db(550.0) == pytest.approx(118.337637125, rel=HAND_RTOL)
    assert pathloss_3gpp_macro_db(1000.0) == pytest.approx(128.1, rel=FLOAT_RTOL)  # log10(1) = 0


def test_log_distance_pathloss_by_hand() -> None:
    # 40 dB at 1 m, exponent 2: at 100 m, 40 + 10 * 2 * log10(100 / 1) = 40 + 20 * 2 = 80 dB
    assert pathloss_log_distance_db(100.0, exponent=2.0, ref_loss_db=40.0) == pytest.approx(80.0, rel=FLOAT_RTOL)
    # The 3GPP macro model is the log-distance model with exponent 3.76, 128.1 dB at 1000 m.
    d_m = np.array([10.0, 100.0, 550.0, 2000.0])
    np.testing.assert_allclose(
        pathloss_log_distance_db(d_m, exponent=3.76, ref_distance_m=1000.0, ref_loss_db=128.1),
        pathloss_3gpp_macro_db(d_m),
        rtol=FLOAT_RTOL,
    )


def test_free_space_pathloss_at_100_m_2_4_ghz() -> None:
    # 4 pi d f / c = 12.566370614 * 100 * 2.4e9 / 299792458 = 12.566370614 * 800.553828476 = 10060.0561054
    # 20 log10(10060.0561054) = 20 * 4.002600403 = 80.052008056 dB
    loss_db = pathloss_free_space_db(100.0, carrier_hz=2.4e9)
    assert loss_db == pytest.approx(80.052008056, rel=HAND_RTOL)
    # Engineers' form: 20 log10(d / km) + 20 log10(f / MHz) + 32.45 = -20 + 67.604 + 32.45 = 80.054 dB;
    # its 32.45 is 32.4478 rounded, so it agrees to within 0.01 dB.
    assert loss_db == pytest.approx(20 * math.log10(0.1) + 20 * math.log10(2400.0) + 32.45, abs=0.01)


@pytest.mark.parametrize("bad_m", [-5.0, 0.0])
def test_pathloss_refuses_non_positive_distance(bad_m: float) -> None:
    with pytest.raises(ChannelInputError, match=r"distance_m\[1\]=.*must be > 0"):
        pathloss_3gpp_macro_db(np.array([100.0, bad_m]))
    with pytest.raises(ChannelInputError, match="distance_m"):
        pathloss_free_space_db(bad_m, carrier_hz=2.4e9)
    with pytest.raises(ChannelInputError, match="distance_m"):
        RadioModel().gain_linear(np.array([bad_m]), np.random.default_rng(SEED))


# ---------------------------------------------------------------------------------------------- fading


def test_rayleigh_power_gain_has_mean_one() -> None:
    n = 20_000
    gain = rayleigh_power_gain(np.random.default_rng(SEED), n)
    assert gain.shape == (n,) and np.all(gain >= 0)
    standard_error = 1.0 / math.sqrt(n)  # Exp(1) has standard deviation 1
    assert abs(gain.mean() - 1.0) < N_STANDARD_ERRORS * standard_error


def test_shadowing_is_zero_mean_normal_with_sigma() -> None:
    n, sigma_db = 20_000, 8.0
    shadow_db = lognormal_shadowing_db(np.random.default_rng(SEED), n, sigma_db)
    assert abs(shadow_db.mean()) < N_STANDARD_ERRORS * sigma_db / math.sqrt(n)
    assert abs(shadow_db.std() - sigma_db) < N_STANDARD_ERRORS * sigma_db / math.sqrt(2 * n)
    np.testing.assert_array_equal(lognormal_shadowing_db(np.random.default_rng(SEED), 5, 0.0), np.zeros(5))


def test_fading_refuses_bad_input() -> None:
    with pytest.raises(ChannelInputError, match="sigma_db=-1.0: must be >= 0"):
        lognormal_shadowing_db(np.random.default_rng(SEED), 3, -1.0)
    with pytest.raises(ChannelInputError, match="rng="):
        rayleigh_power_gain(np.random.RandomState(0), 3)  # legacy global-style RNG is refused
    with pytest.raises(ChannelInputError, match="n=-1"):
        rayleigh_power_gain(np.random.default_rng(SEED), -1)


# ------------------------------------------------------------------------------------------------ rate


def test_rate_at_550_m_by_hand() -> None:
    # AnycostFL Sec. V-A: d = 550 m, b = 1 MHz, p = 0.1 W, N0 = -114 dBm/MHz, 3GPP macro path loss.
    # path loss       PL   = 118.337637125 dB                         (test_3gpp_macro_pathloss_at_550_m)
    # transmit power  p    = 0.1 W = 10 log10(0.1 / 1e-3) dBm = 20 dBm
    # received power  p g  = 20 - 118.337637125 = -98.337637125 dBm
    # noise power     N0 b = -114 dBm/MHz + 10 log10(1 MHz / 1 MHz) = -114 dBm
    # SNR                  = -98.337637125 - (-114) = 15.662362875 dB = 10^1.5662362875 = 36.8329316834
    # rate            r    = b log2(1 + SNR) = 1e6 * log2(37.8329316834) = 1e6 * 5.24157067041
    #                      = 5,241,570.67 bit/s  (about 5.24 Mbit/s)
    expected_bps = 5_241_570.67041
    gain = db_to_linear(-pathloss_3gpp_macro_db(550.0))
    rate_bps = shannon_rate_bps(1e6, gain, 0.1, dbm_per_mhz_to_w_per_hz(-114.0))
    assert rate_bps == pytest.approx(expected_bps, rel=HAND_RTOL)
    # The same through the combined model with its defaults (3GPP, -114 dBm/MHz, fixed 1 MHz, no fading).
    radio = RadioModel()
    radio_bps = radio.rates_bps(radio.gain_linear(np.array([550.0]), np.random.default_rng(SEED)), 0.1)
    np.testing.assert_allclose(radio_bps, [expected_bps], rtol=HAND_RTOL)


def test_rate_is_zero_without_signal() -> None:
    n0_w_per_hz = dbm_per_mhz_to_w_per_hz(-114.0)
    assert shannon_rate_bps(1e6, 0.0, 0.1, n0_w_per_hz) == 0.0  # log2(1 + 0) = 0
    assert shannon_rate_bps(1e6, 1e-10, 0.0, n0_w_per_hz) == 0.0


@FAST
@given(
    gain_db=st.floats(min_value=-160.0, max_value=-40.0),
    extra_gain_db=st.floats(min_value=0.0, max_value=40.0),
    band_hz=st.floats(min_value=1e3, max_value=1e8),
    band_factor=st.floats(min_value=1.0, max_value=100.0),
)
def test_rate_is_monotone_in_gain_and_bandwidth(
    gain_db: float, extra_gain_db: float, band_hz: float, band_factor: float
) -> None:
    n0_w_per_hz, p_w = dbm_per_mhz_to_w_per_hz(-114.0), 0.1
    rate_bps = shannon_rate_bps(band_hz, db_to_linear(gain_db), p_w, n0_w_per_hz)
    more_gain_bps = shannon_rate_bps(band_hz, db_to_linear(gain_db + extra_gain_db), p_w, n0_w_per_hz)
    more_band_bps = shannon_rate_bps(band_hz * band_factor, db_to_linear(gain_db), p_w, n0_w_per_hz)
    assert rate_bps > 0
    assert more_gain_bps >= rate_bps * (1 - FLOAT_RTOL)
    assert more_band_bps >= rate_bps * (1 - FLOAT_RTOL)


def test_fdma_bandwidth_modes() -> None:
    assert fdma_bandwidth_hz("fixed", 4, 1e6) == 1e6  # each device its own 1 MHz
    assert fdma_bandwidth_hz("split", 4, 10e6) == pytest.approx(2.5e6, rel=FLOAT_RTOL)  # 10 MHz / 4
    with pytest.raises(ChannelInputError, match="n_transmitting=0: must be >= 1"):
        fdma_bandwidth_hz("split", 0, 10e6)
    with pytest.raises(ChannelInputError, match="mode='tdma'"):
        fdma_bandwidth_hz("tdma", 2, 10e6)


def test_split_mode_shares_band_among_transmitting_devices_only() -> None:
    band_hz, n0_w_per_hz, p_w = 10e6, dbm_per_mhz_to_w_per_hz(-114.0), 0.1
    gain = db_to_linear(-pathloss_3gpp_macro_db(np.array([100.0, 200.0, 300.0, 400.0, 500.0])))
    mask = np.array([True, False, True, True, False])
    radio = RadioModel(bandwidth_mode="split", band_hz=band_hz, noise_psd_w_per_hz=n0_w_per_hz)
    rates_bps = radio.rates_bps(gain, p_w, mask)
    # three devices transmit: each gets 10 MHz / 3 = 3.333 MHz; the two others get nothing
    expected_bps = np.where(mask, shannon_rate_bps(band_hz / 3, gain, p_w, n0_w_per_hz), 0.0)
    np.testing.assert_allclose(rates_bps, expected_bps, rtol=FLOAT_RTOL)
    assert np.all(rates_bps[mask] > 0) and np.all(rates_bps[~mask] == 0)
    # "fixed": every transmitting device has the whole band_hz to itself
    fixed_bps = RadioModel(band_hz=band_hz).rates_bps(gain, p_w, mask)
    np.testing.assert_allclose(fixed_bps[mask], shannon_rate_bps(band_hz, gain[mask], p_w, n0_w_per_hz))
    # nobody transmits: all zero, no error
    np.testing.assert_array_equal(radio.rates_bps(gain, p_w, np.zeros(5, dtype=bool)), np.zeros(5))


def test_zero_bandwidth_is_refused() -> None:
    with pytest.raises(ChannelInputError, match=r"^bandwidth_hz=0\.0: must be > 0$"):
        shannon_rate_bps(0.0, 1e-12, 0.1, 4e-21)
    with pytest.raises(ChannelInputError, match=r"band_hz=0\.0: must be > 0"):
        RadioModel(band_hz=0.0)
    with pytest.raises(ChannelInputError, match="band_hz"):
        fdma_bandwidth_hz("fixed", 1, 0.0)


# ------------------------------------------------------------------------------------------- placement


def test_placement_within_annulus_and_d_squared_uniform() -> None:
    n = 4000
    d_m = distances_m(uniform_disk(np.random.default_rng(SEED), n, radius_m=CELL_RADIUS_M, min_distance_m=50.0))
    assert d_m.shape == (n,)
    assert _in_annulus(d_m, 50.0, CELL_RADIUS_M)
    # area-uniform over the annulus <=> (d^2 - r0^2) / (R^2 - r0^2) ~ U(0, 1)
    u = (d_m**2 - 50.0**2) / (CELL_RADIUS_M**2 - 50.0**2)
    assert stats.kstest(u, "uniform").pvalue > KS_MIN_P_VALUE


def test_placement_is_area_uniform_not_radius_uniform() -> None:
    n = 4000
    d_m = distances_m(uniform_disk(np.random.default_rng(SEED), n, radius_m=CELL_RADIUS_M))
    # area-uniform: P(d <= R/2) = (R/2)^2 / R^2 = 1/4; radius-uniform would give 1/2
    inner_share = np.mean(d_m <= CELL_RADIUS_M / 2)
    standard_error = math.sqrt(0.25 * 0.75 / n)  # binomial, = 0.00685
    assert abs(inner_share - 0.25) < N_STANDARD_ERRORS * standard_error
    assert stats.kstest(d_m / CELL_RADIUS_M, "uniform").pvalue < 1e-6  # d itself is not uniform


@FAST
@given(
    radius_m=st.floats(min_value=1.0, max_value=1e5),
    inner_share=st.floats(min_value=0.0, max_value=0.999),
    n=st.integers(min_value=0, max_value=50),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_placement_bounds_property(radius_m: float, inner_share: float, n: int, seed: int) -> None:
    inner_m = inner_share * radius_m
    positions_m = uniform_disk(np.random.default_rng(seed), n, radius_m=radius_m, min_distance_m=inner_m)
    assert positions_m.shape == (n, 2)
    assert _in_annulus(distances_m(positions_m), inner_m, radius_m)


def test_placement_refuses_bad_cell() -> None:
    rng = np.random.default_rng(SEED)
    with pytest.raises(ChannelInputError, match="radius_m=5.0: must be > min_distance_m=10.0"):
        uniform_disk(rng, 3, radius_m=5.0, min_distance_m=10.0)
    with pytest.raises(ChannelInputError, match="min_distance_m=-1.0: must be >= 0"):
        uniform_disk(rng, 3, radius_m=550.0, min_distance_m=-1.0)
    with pytest.raises(ChannelInputError, match="radius_m"):
        Redraw(radius_m=10.0, min_distance_m=10.0)
    with pytest.raises(ChannelInputError, match="positions_m has shape"):
        distances_m(np.zeros((3, 3)))


# -------------------------------------------------------------------------------------------- mobility


def test_static_keeps_positions_and_draws_nothing() -> None:
    positions_m = np.array([[100.0, 0.0], [0.0, -300.0]])
    rng = np.random.default_rng(SEED)
    state = rng.bit_generator.state
    np.testing.assert_array_equal(Static().step(positions_m, rng), positions_m)
    assert rng.bit_generator.state == state


def test_redraw_moves_devices_and_is_reproducible() -> None:
    model = Redraw(radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    start_m = uniform_disk(np.random.default_rng(SEED), 50, radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    first_m = model.step(start_m, np.random.default_rng(SEED + 1))
    again_m = model.step(start_m, np.random.default_rng(SEED + 1))
    np.testing.assert_array_equal(first_m, again_m)  # same seed, same positions, bit for bit
    assert np.all(np.any(first_m != start_m, axis=1))  # every device moved
    assert _in_annulus(distances_m(first_m), MIN_DISTANCE_M, CELL_RADIUS_M)


@pytest.mark.parametrize("step_m", [25.0, 700.0])  # a short step, and one longer than the whole cell
def test_random_walk_stays_in_cell_over_many_steps(step_m: float) -> None:
    model = RandomWalk(step_m=step_m, radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    rng = np.random.default_rng(SEED)
    positions_m = uniform_disk(rng, 200, radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    for _ in range(500):
        positions_m = model.step(positions_m, rng)
        assert _in_annulus(distances_m(positions_m), MIN_DISTANCE_M, CELL_RADIUS_M)


def test_random_walk_moves_step_m_and_reflects_at_the_edge() -> None:
    step_m, n = 30.0, 400
    model = RandomWalk(step_m=step_m, radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    start_m = uniform_disk(np.random.default_rng(SEED), n, radius_m=CELL_RADIUS_M, min_distance_m=MIN_DISTANCE_M)
    end_m = model.step(start_m, np.random.default_rng(SEED + 1))
    # the documented draw: n uniforms for the headings, so the unconstrained move can be rebuilt
    heading_rad = 2 * np.pi * np.random.default_rng(SEED + 1).random(n)
    free_m = start_m + step_m * np.column_stack((np.cos(heading_rad), np.sin(heading_rad)))
    free_d_m = distances_m(free_m)
    inside = (free_d_m >= MIN_DISTANCE_M) & (free_d_m <= CELL_RADIUS_M)
    np.testing.assert_allclose(end_m[inside], free_m[inside], rtol=FLOAT_RTOL)
    outside = free_d_m > CELL_RADIUS_M
    assert outside.any(), "seed should push some devices over the edge"
    # reflected at the cell edge: d' = 2 R - d, along the same bearing from the base station
    np.testing.assert_allclose(distances_m(end_m[outside]), 2 * CELL_RADIUS_M - free_d_m[outside], rtol=FLOAT_RTOL)


def test_random_walk_refuses_negative_step() -> None:
    with pytest.raises(ChannelInputError, match="step_m=-1.0: must be >= 0"):
        RandomWalk(step_m=-1.0, radius_m=CELL_RADIUS_M)


# ----------------------------------------------------------------------------------------------- radio


def test_radio_without_randomness_is_path_loss_only_and_draws_nothing() -> None:
    d_m = np.array([50.0, 550.0])
    rng = np.random.default_rng(SEED)
    state = rng.bit_generator.state
    gain = RadioModel().gain_linear(d_m, rng)
    # dB -> linear: gain = 10^(-PL/10)
    np.testing.assert_allclose(gain, 10.0 ** (-pathloss_3gpp_macro_db(d_m) / 10.0), rtol=FLOAT_RTOL)
    assert rng.bit_generator.state == state
    free_space = RadioModel(pathloss="free_space", carrier_hz=2.4e9)
    np.testing.assert_allclose(
        free_space.pathloss_db(d_m), pathloss_free_space_db(d_m, carrier_hz=2.4e9), rtol=FLOAT_RTOL
    )
    log_distance = RadioModel(pathloss="log_distance", exponent=2.0, ref_loss_db=40.0)
    np.testing.assert_allclose(log_distance.pathloss_db(np.array([100.0])), [80.0], rtol=FLOAT_RTOL)


def test_radio_draws_shadowing_then_fading_in_documented_order() -> None:
    d_m = np.array([50.0, 200.0, 550.0])
    radio = RadioModel(shadowing_sigma_db=8.0, rayleigh=True)
    gain = radio.gain_linear(d_m, np.random.default_rng(SEED))
    rng = np.random.default_rng(SEED)
    shadow_db = 8.0 * rng.standard_normal(3)  # first: n normals for the shadowing
    fading = rng.standard_exponential(3)  # then: n exponentials for |h|^2
    # dB -> linear: 10^(-(PL + S)/10)
    expected = 10.0 ** (-(pathloss_3gpp_macro_db(d_m) + shadow_db) / 10.0) * fading
    np.testing.assert_allclose(gain, expected, rtol=FLOAT_RTOL)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("pathloss", "okumura", "pathloss='okumura': must be one of"),
        ("bandwidth_mode", "tdma", "bandwidth_mode='tdma': must be one of"),
        ("shadowing_sigma_db", -2.0, r"shadowing_sigma_db=-2\.0: must be >= 0"),
        ("noise_psd_w_per_hz", 0.0, r"noise_psd_w_per_hz=0\.0: must be > 0"),
        ("carrier_hz", float("inf"), "carrier_hz=inf: must be finite"),
        ("rayleigh", "yes", "rayleigh='yes': must be True or False"),
    ],
)
def test_radio_model_validates_fields(field: str, value: object, message: str) -> None:
    with pytest.raises(ChannelInputError, match=message):
        RadioModel(**{field: value})


def test_radio_rates_refuse_bad_mask() -> None:
    with pytest.raises(ChannelInputError, match="transmitting_mask"):
        RadioModel().rates_bps(np.ones(3), 0.1, np.array([1, 0, 1]))
    with pytest.raises(ChannelInputError, match="tx_power_w has shape"):
        RadioModel().rates_bps(np.ones(3), np.array([0.1, 0.1]))


# ------------------------------------------------------------------------------------------ public API


def test_channel_imports_numpy_only() -> None:
    allowed = {"numpy", "channel", "__future__", "dataclasses", "typing", "collections"}
    for path in Path(channel.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports {roots - allowed}"


def test_public_api_is_curated() -> None:
    assert len(set(channel.__all__)) == len(channel.__all__)
    assert all(hasattr(channel, name) for name in channel.__all__)
    assert not any(name.startswith("_") for name in channel.__all__)
