"""The yang_fdma preset: Yang et al.'s setup as the implementation notes give it (its values in SI), and one
round whose every device's rate, times and energies are the paper's model computed by hand: the 3GPP macro path
loss 128.1 + 37.6 log10(d/km), the Shannon rate on B / K, compute energy kappa c f^2 and radiated energy p t."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.run.fleet_export import fleet_frame
from edgefl.run.load import load_scenario
from edgefl.run.runner import run_scenario

REL = 1e-12


def test_yang_fdma_holds_the_notes_values():
    sc = load_scenario("yang_fdma")
    assert sc.physics == "paper" and sc.learning == "surrogate"
    ch, fl, sur = sc.channel, sc.fleet, sc.surrogate
    assert ch.pathloss == "3gpp_macro" and ch.link_model == "shannon" and not ch.rayleigh
    assert ch.shadowing_db == 8.0 and ch.bandwidth_mode == "split" and ch.mobility == "static"
    assert ch.bandwidth_hz == pytest.approx(20e6, rel=REL)  # B = 20 MHz
    assert ch.noise_psd_w_per_hz == pytest.approx(10 ** (-174 / 10) * 1e-3, rel=1e-12)  # -174 dBm/Hz
    assert ch.cell_radius_m == pytest.approx(500 / math.sqrt(math.pi), rel=1e-3)  # the 0.5 km square's area
    assert fl.n_devices == 50 and sc.method.clients_per_round == 50
    assert fl.tx_power_w == pytest.approx(0.01, rel=REL)  # 10 dBm
    assert fl.f_max_hz == pytest.approx(2e9, rel=REL) and fl.energy_coeff == 1e-28
    assert sur.model_parameters * 32 == 28_096  # s = 28.1 kbit
    assert sur.samples_per_device == 500.0
    # C_k = FLOPs per sample / FLOPs per cycle spans [1, 3] 10^4 cycles per sample
    lo, hi = fl.flops_per_cycle
    assert (sur.train_flops_per_sample / hi, sur.train_flops_per_sample / lo) == (1e4, 3e4)


def test_yang_fdma_round_is_the_papers_model_by_hand():
    """One round without shadowing (so the gain is the path loss of each device's distance): every device
    gets B / 50 = 400 kHz, rate r = b log2(1 + g p / (N0 b)), t_com = 28,096 / r, e_com = 0.01 t_com; it computes
    4 epochs of 500 samples at C in [1, 3] 10^4 cycles each, at 2 GHz: e_cmp = 1e-28 c (2e9)^2."""
    sc = load_scenario("yang_fdma", ["rounds=1", "channel.shadowing_db=0"])
    rows = run_scenario(sc).device_rounds
    assert len(rows) == 50 and rows["arrived"].all()
    b, n0, p = 20e6 / 50, 10 ** (-174 / 10) * 1e-3, 0.01
    d_km = rows["distance_m"].to_numpy() / 1000
    g = 10 ** (-(128.1 + 37.6 * np.log10(d_km)) / 10)
    rate = b * np.log2(1 + g * p / (n0 * b))
    np.testing.assert_allclose(rows["rate_bps"], rate, rtol=1e-12)
    np.testing.assert_allclose(rows["t_com_s"], 28_096 / rate, rtol=1e-12)
    np.testing.assert_allclose(rows["e_com_j"], p * 28_096 / rate, rtol=1e-12)
    cycles = rows["t_cmp_s"].to_numpy() * 2e9
    assert np.all(rows["cpu_hz"] == 2e9)
    assert np.all((cycles >= 4 * 500 * 1e4 * (1 - 1e-12)) & (cycles <= 4 * 500 * 3e4 * (1 + 1e-12)))
    np.testing.assert_allclose(rows["e_cmp_j"], 1e-28 * cycles * 4e18, rtol=1e-12)
    assert np.all(rows["flops"] == 4 * 500 * 30_000)
    fpc = fleet_frame(sc).set_index("device").loc[rows["device"], "flops_per_cycle"].to_numpy()
    np.testing.assert_allclose(cycles, 4 * 500 * 30_000 / fpc, rtol=1e-12)  # c = FLOPs / (FLOPs per cycle)
    assert np.all(d_km <= 0.282 + 1e-12)
