"""Link models (``channel.link_model``): the papers' Shannon bound, unchanged, and the attenuated, truncated
Shannon bound of 3GPP TR 36.942 Annex A.2 (Table A.2.1: uplink alpha = 0.4, SNR_min = -10 dB, Thr_max = 2.0
bit/s/Hz; downlink alpha = 0.6, SNR_min = -10 dB, Thr_max = 4.4 bit/s/Hz; see channel/link_models.py for which
of these numbers we could check).

Hand values: with b = 1 MHz, N0 = 1e-20 W/Hz (noise 1e-14 W in the band) and p = 0.1 W, a gain g gives
SINR = g * 1e13, so g = SINR * 1e-13.
- SINR = 0.05 (-13.0 dB) < SNR_min = 0.1 (-10 dB): 0 bit/s.
- SINR = 3 (4.77 dB): uplink 0.4 log2(4) = 0.8 bit/s/Hz -> 0.8 Mbit/s; downlink 0.6 log2(4) = 1.2 -> 1.2 Mbit/s.
- SINR = 1000 (30 dB): 0.4 log2(1001) = 3.99 > 2.0, so the uplink gets Thr_max: 2.0 Mbit/s; the downlink
  0.6 log2(1001) = 5.98 > 4.4: 4.4 Mbit/s.
- SINR = 0.1 exactly (the threshold itself): 0.4 log2(1.1) = 0.0550 bit/s/Hz (the bound starts at SNR_min).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channel import (
    TRUNCATED_SHANNON,
    ChannelInputError,
    RadioModel,
    link_rate_bps,
    max_bps_per_hz,
    shannon_rate_bps,
    truncated_shannon_bps_per_hz,
    truncated_shannon_rate_bps,
)
from edgefl.errors import ScenarioError
from edgefl.fleet.links import Radio
from edgefl.run.load import load_scenario
from edgefl.seeding import Streams

B_HZ, N0_W_PER_HZ, P_W = 1e6, 1e-20, 0.1
UL, DL = TRUNCATED_SHANNON["uplink"], TRUNCATED_SHANNON["downlink"]


def _gain_for(sinr: float) -> float:
    return sinr * N0_W_PER_HZ * B_HZ / P_W  # SINR = g p / (N0 b)


def test_cited_parameters():
    """The constant block holds TR 36.942 Table A.2.1's columns (uplink Thr_max an assumption, see the module)."""
    assert (UL.alpha, UL.snr_min_db, UL.max_bps_per_hz) == (0.4, -10.0, 2.0)
    assert (DL.alpha, DL.snr_min_db, DL.max_bps_per_hz) == (0.6, -10.0, 4.4)
    # where alpha log2(1 + SINR) reaches the cap: 10 log10(2^(2.0/0.4) - 1) = 10 log10(31) = 14.91 dB (uplink),
    # 10 log10(2^(4.4/0.6) - 1) = 22.05 dB (downlink)
    assert UL.snr_max_db == pytest.approx(10 * math.log10(31), abs=1e-12)
    assert DL.snr_max_db == pytest.approx(22.0485, abs=1e-4)
    assert max_bps_per_hz("truncated_shannon", "uplink") == 2.0 and max_bps_per_hz("shannon") == math.inf


@pytest.mark.parametrize(
    "sinr, uplink_bps, downlink_bps",
    [
        (0.05, 0.0, 0.0),  # -13 dB: below SNR_min
        (3.0, 0.8e6, 1.2e6),  # 4.77 dB: alpha log2(1 + 3) = 2 alpha
        (1000.0, 2.0e6, 4.4e6),  # 30 dB: above SNR_max, Thr_max * b
    ],
)
def test_truncated_shannon_rate_at_three_sinrs(sinr, uplink_bps, downlink_bps):
    g = _gain_for(sinr)
    up = truncated_shannon_rate_bps(B_HZ, g, P_W, N0_W_PER_HZ, direction="uplink")
    down = truncated_shannon_rate_bps(B_HZ, g, P_W, N0_W_PER_HZ, direction="downlink")
    assert up == pytest.approx(uplink_bps, rel=1e-12, abs=0.0)
    assert down == pytest.approx(downlink_bps, rel=1e-12, abs=0.0)


def test_truncated_shannon_starts_at_snr_min():
    """At SINR_min itself the bound holds (0.4 log2(1.1)); just below it the link carries nothing."""
    assert truncated_shannon_bps_per_hz(0.1, UL) == pytest.approx(0.4 * math.log2(1.1), rel=1e-12)
    assert truncated_shannon_bps_per_hz(np.nextafter(0.1, 0.0), UL) == 0.0


@settings(max_examples=300, deadline=None)
@given(
    snr_db=st.floats(-60.0, 120.0),
    b_hz=st.floats(1e3, 2e9),
    direction=st.sampled_from(["uplink", "downlink"]),
)
def test_truncated_shannon_never_exceeds_its_cap(snr_db, b_hz, direction):
    params = TRUNCATED_SHANNON[direction]
    snr = 10.0 ** (snr_db / 10.0)
    se = float(truncated_shannon_bps_per_hz(snr, params))
    assert 0.0 <= se <= params.max_bps_per_hz
    if snr_db > params.snr_max_db + 1e-9:
        assert se == params.max_bps_per_hz
    g = snr * N0_W_PER_HZ * b_hz / P_W
    rate = float(truncated_shannon_rate_bps(b_hz, g, P_W, N0_W_PER_HZ, direction=direction))
    assert 0.0 <= rate <= b_hz * params.max_bps_per_hz
    assert rate <= float(shannon_rate_bps(b_hz, g, P_W, N0_W_PER_HZ))  # never above the unattenuated bound


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 64))
def test_shannon_is_bit_identical_to_the_old_expression(seed, n):
    """``"shannon"`` (the default) gives the very bits of the expression every paper preset was run with."""
    rng = np.random.default_rng(seed)
    b_hz = float(10.0 ** rng.uniform(3, 9))
    g = 10.0 ** rng.uniform(-16, -4, n)
    p_w = 10.0 ** rng.uniform(-6, 0.3, n)
    n0 = float(10.0 ** rng.uniform(-22, -17))
    snr = g * p_w / (n0 * b_hz)
    old = b_hz * np.log1p(snr) / np.log(2.0)
    assert np.array_equal(shannon_rate_bps(b_hz, g, p_w, n0), old)
    assert np.array_equal(link_rate_bps("shannon", b_hz, g, p_w, n0), old)
    radio = RadioModel(noise_psd_w_per_hz=n0, band_hz=b_hz)
    assert radio.link_model == "shannon"
    assert np.array_equal(radio.rates_bps(g, p_w), old)


def test_radio_model_rates_follow_the_link_model_and_direction():
    g = np.array([_gain_for(0.05), _gain_for(3.0), _gain_for(1000.0)])
    up = RadioModel(noise_psd_w_per_hz=N0_W_PER_HZ, band_hz=B_HZ, link_model="truncated_shannon")
    down = replace(up, link_direction="downlink")
    np.testing.assert_allclose(up.rates_bps(g, P_W), [0.0, 0.8e6, 2.0e6], rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(down.rates_bps(g, P_W), [0.0, 1.2e6, 4.4e6], rtol=1e-12, atol=0.0)
    # "split" shares the band first, then the model applies on each sub-band: 2 devices get b/2 each
    split = replace(up, bandwidth_mode="split")
    snr_half = np.array([3.0, 1000.0]) * 2  # the noise halves with the band
    np.testing.assert_allclose(
        split.rates_bps(g[1:], P_W), 0.5e6 * np.minimum(0.4 * np.log2(1 + snr_half), 2.0), rtol=1e-12
    )
    with pytest.raises(ChannelInputError, match=r"link_model='nr_mcs': must be one of 'shannon', 'truncated_shannon'"):
        RadioModel(link_model="nr_mcs")


def test_scenario_key_reaches_uplink_and_downlink():
    """``channel.link_model`` builds both links of the run's radio with it, each with its own direction."""
    sc = load_scenario("quickstart", ["channel.link_model=truncated_shannon", "channel.downlink.tx_power_dbm=30"])
    radio = Radio(sc.channel, 4, Streams(0))
    assert (radio.model.link_model, radio.model.link_direction) == ("truncated_shannon", "uplink")
    assert (radio.downlink.link_model, radio.downlink.link_direction) == ("truncated_shannon", "downlink")
    _, gain = radio.round_state(1)
    b_up, b_down = sc.channel.bandwidth_hz, sc.channel.downlink.bandwidth_hz
    assert np.all(radio.rates_bps(gain, np.full(4, 0.1)) <= 2.0 * b_up)
    assert np.all(radio.downlink_rates_bps(gain) <= 4.4 * b_down)
    default = load_scenario("quickstart", ["physics=paper"])  # the papers' physics keeps Shannon's bound
    assert default.channel.link_model == "shannon" and Radio(default.channel, 4, Streams(0)).model.link_model == "shannon"


def test_bad_link_model_is_one_line_naming_field_and_values():
    with pytest.raises(ScenarioError) as info:
        load_scenario("quickstart", ["channel.link_model=nr_mcs"])
    msg = str(info.value)
    assert "channel.link_model='nr_mcs'" in msg and "'shannon' or 'truncated_shannon'" in msg
    assert "\n" not in msg.strip()


def test_preflight_plans_with_the_same_capped_rate():
    """The pre-flight check's best rate (alone in the band at the 10 m floor, SINR 81 dB) is Thr_max * b."""
    from edgefl.run.preflight import best_rates_bps
    from edgefl.run.runner import Simulation

    sim = Simulation(load_scenario("quickstart", ["channel.link_model=truncated_shannon"]))
    rate, _ = best_rates_bps(sim.run)
    assert np.all(rate == 2.0 * sim.scenario.channel.bandwidth_hz)


def _hand_uplink_bps(d_m: np.ndarray, p_w: float, b_hz: float) -> np.ndarray:
    """TR 36.942 A.2 uplink rate from a device's distance: 3GPP macro path loss, -114 dBm/MHz, no fading."""
    g = 10 ** (-(128.1 + 37.6 * np.log10(d_m / 1000.0)) / 10)  # dB -> linear
    snr = g * p_w / (10 ** ((-114 - 30) / 10) / 1e6 * b_hz)  # dBm/MHz -> W/Hz
    se = np.where(snr < 0.1, 0.0, np.minimum(0.4 * np.log2(1 + snr), 2.0))
    return b_hz * se


@pytest.mark.slow
def test_run_rates_stay_under_the_cap_and_are_the_ones_charged():
    """Quickstart, 2 rounds, ``channel.link_model = "truncated_shannon"``, at 10 dBm so that far devices sit on the
    slope (550 m: SINR 5.7 dB) and those within about 310 m on the cap (15 dB); with a downlink (1 W, 1 MHz)."""
    from edgefl.run.runner import run_scenario

    sc = load_scenario("quickstart", [
        "physics=paper", "rounds=2", "channel.link_model=truncated_shannon", "fleet.tx_power_dbm=10",
        "channel.downlink.tx_power_dbm=30", "channel.downlink.rx_power_w=0.05",
    ])  # fmt: skip
    dr = run_scenario(sc).device_rounds
    b_hz = sc.channel.bandwidth_hz
    assert sc.channel.bandwidth_mode == "fixed" and len(dr) == 10
    se = dr["rate_bps"].to_numpy() / b_hz
    assert np.all(se <= 2.0) and np.any(se == 2.0) and np.any((se > 0) & (se < 2.0))
    np.testing.assert_allclose(dr["rate_bps"], _hand_uplink_bps(dr["distance_m"].to_numpy(), 1e-2, b_hz), rtol=1e-9)
    # the cost model charged, and the method planned, the upload at that rate
    np.testing.assert_allclose(dr["t_com_s"], dr["bits"] / dr["rate_bps"], rtol=1e-12)
    np.testing.assert_allclose(dr["t_com_planned_s"], dr["bits_planned"] / dr["rate_bps"], rtol=1e-12)
    # downloads: the full model (FedAvg, = the upload's bits) at the downlink's cap, 4.4 bit/s/Hz
    down_s = (dr["t_start_s"] - dr["t_down_s"]).to_numpy()
    down_se = dr["bits"].to_numpy() / down_s / sc.channel.downlink.bandwidth_hz
    assert np.all(down_se <= 4.4 * (1 + 1e-12))
