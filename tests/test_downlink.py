"""Per-device downlink (``[channel.downlink]``): each device's download time is the model's bits over its own
downlink rate, computed here by hand from the recorded distance (3GPP macro path loss, as the uplink).

Hand timeline on the clock (binary-exact): three devices dispatched at t0 = 8 s with downloads 0.5, 2, 0.25 s,
compute 1, 0.25, 1 s and uploads 0.5, 0.25, 2 s:
    compute starts 8.5, 10, 8.25; compute ends 9.5, 10.25, 9.25; arrivals 10, 10.5, 11.25
so device 0 arrives first although device 1 computes least; with a deadline of 2.75 s (t0 + 2.75 = 10.75)
device 2 is late.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgefl.errors import ScenarioError
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART
from edgefl.engine.clock import Clock

PARAMS = 1000  # surrogate model parameters -> 32,000 bits per download
BS_DBM = 30.0  # base station power 1 W


def test_per_device_download_times_on_the_clock():
    clock = Clock(3, start_s=8.0)
    clock.begin_round()
    out = clock.play(
        devices=np.arange(3), durations=lambda: (np.array([1.0, 0.25, 1.0]), np.array([0.5, 0.25, 2.0])),
        down_s=np.array([0.5, 2.0, 0.25]), policy="deadline", deadline_s=2.75,
    )  # fmt: skip
    assert out.t_down_s.tolist() == [8.0, 8.0, 8.0]
    assert out.t_start_s.tolist() == [8.5, 10.0, 8.25]
    assert out.t_cmp_end_s.tolist() == [9.5, 10.25, 9.25]
    assert out.t_arrive_s.tolist() == [10.0, 10.5, 11.25]
    assert out.arrival_order.tolist() == [0, 1, 2]
    assert out.end_s == 10.75 and out.kept_mask.tolist() == [True, True, False]


def _hand_downlink_rate(d_m: np.ndarray, band_hz: float) -> np.ndarray:
    pl_db = 128.1 + 37.6 * np.log10(d_m / 1000.0)
    g = 10 ** (-pl_db / 10)  # dB -> linear
    n0_w_per_hz = 10 ** ((-114 - 30) / 10) / 1e6  # dBm/MHz -> W/Hz
    p_w = 10 ** ((BS_DBM - 30) / 10)  # dBm -> W
    return band_hz * np.log2(1 + g * p_w / (n0_w_per_hz * band_hz))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fixed", "split"])
def test_run_download_time_is_model_bits_over_own_downlink_rate(mode):
    sc = load_scenario("quickstart", [*PAPER_QUICKSTART,
        "learning=surrogate", "rounds=2", "fleet.n_devices=4", "method.clients_per_round=3",
        f"surrogate.model_parameters={PARAMS}", f"channel.downlink.tx_power_dbm={BS_DBM}",
        "channel.downlink.bandwidth_mhz=0.2", f"channel.downlink.bandwidth_mode='{mode}'",
        "channel.downlink.rx_power_w=0.05",
    ])  # fmt: skip
    res = run_scenario(sc)
    dr = res.device_rounds
    band = 0.2e6 if mode == "fixed" else 0.2e6 / 3  # split: shared by the round's 3 downloading devices
    t_down = 32 * PARAMS / _hand_downlink_rate(dr["distance_m"].to_numpy(), band)
    np.testing.assert_allclose(dr["t_start_s"] - dr["t_down_s"], t_down, rtol=1e-9)
    np.testing.assert_allclose(dr["e_down_j"], 0.05 * t_down, rtol=1e-9)
    np.testing.assert_allclose(dr["t_arrive_s"], dr["t_start_s"] + dr["t_cmp_s"] + dr["t_com_s"], rtol=1e-12)
    np.testing.assert_allclose(res.rounds["round_time_s"], (dr["t_arrive_s"] - dr["t_down_s"]).groupby(dr["round"]).max(),
                               rtol=1e-12)  # fmt: skip
    per_round = (dr["e_cmp_j"] + dr["e_com_j"] + dr["e_down_j"]).groupby(dr["round"]).sum()
    np.testing.assert_allclose(res.rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)


def test_downlink_and_constant_downlink_together_is_an_error():
    with pytest.raises(ScenarioError, match="round.downlink_s"):
        load_scenario("quickstart", [*PAPER_QUICKSTART, "round.downlink_s=0.5", "channel.downlink.bandwidth_mhz=1"])
    with pytest.raises(ScenarioError, match=r"channel.downlink.tx_power_w=-1: outside \[0.001, 1000\] W"):
        load_scenario("quickstart", [*PAPER_QUICKSTART, "channel.downlink.tx_power_w=-1"])
