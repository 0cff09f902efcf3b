"""Physically possible values: every physical field has a range, and a value outside it fails at load in one line
naming the key, the value and the range as the user wrote them (engineer units included)."""

from __future__ import annotations

import math

import pytest

import edgefl.scenario.sections as config
from edgefl.methods.ccfedavg_schedule import TrainingProbabilitySettings
from edgefl.errors import ScenarioError
from edgefl.scenario.did_you_mean import nearest_key
from edgefl.scenario.limits import Limit, limits_of, user_range
from edgefl.methods import METHODS
from edgefl.scenario.loading import Scenario, method_tables
from edgefl.run.load import load_scenario


@pytest.mark.parametrize(
    "override, expected",
    [
        # the absurd values: 1e9 GHz, 1 kW and 90 dBm (1 MW) of transmit power
        ("fleet.f_max_ghz=1e9", "fleet.f_max_ghz=1e+09: outside [0.001, 10] GHz"),
        ("fleet.tx_power_w=1000", "fleet.tx_power_w=1000: outside [1e-08, 1.99526] W"),  # 33 dBm = 10^0.3 W
        ("fleet.tx_power_w='1000'", "fleet.tx_power_w='1000': outside [1e-08, 1.99526] W"),  # text pydantic reads
        ("fleet.tx_power_dbm=90", "fleet.tx_power_dbm=90: outside [-50, 33] dBm"),
        # echoed as written: MHz, not bandwidth_hz=-5000000.0
        ("channel.bandwidth_mhz=-5", "channel.bandwidth_mhz=-5: outside [0.001, 2160] MHz"),
        ("channel.noise_psd_dbm_per_mhz=-200", "channel.noise_psd_dbm_per_mhz=-200: outside [-124, -54] dBm/MHz"),
        ("channel.downlink.tx_power_dbm=70", "channel.downlink.tx_power_dbm=70: outside [0, 60] dBm"),
        ("channel.cell_radius_m=2e5", "channel.cell_radius_m=200000: outside [1, 100000] m"),
        ("fleet.f_min_ghz=[0.0001, 0.2]", "fleet.f_min_ghz=[0.0001, 0.2]: outside [0.001, 10] GHz"),
        ("fleet.flops_per_cycle=1e7", "fleet.flops_per_cycle=1e+07: outside [0.001, 1e+06] FLOP/cycle"),
        ("fleet.budget.value_j=[1, 1e12]", "fleet.budget.value_j=[1, 1e+12]: outside (0, 3.6e+08] J"),
        ("round.deadline_s=1e-12", "round.deadline_s=1e-12: outside [1e-09, 3.15576e+07] s"),
        ("fleet.availability.online_mean_s=1e9", "fleet.availability.online_mean_s=1e+09: outside (0, 3.15576e+07] s"),
        # a list where a number or [low, high] belongs: the key as written, not f_max_hz's pydantic tuple message
        ("fleet.f_max_ghz=[1,2,3,4,5,6,7,8,9,10]", "fleet.f_max_ghz=[1, 2, 3, 4, ...]: give a number (every device"),
        ("channel.cell_radius_m=[100, 200]", "channel.cell_radius_m=[100, 200]: give one number, not a list"),
        ("fleet.f_max_ghz=[2, 1]", "fleet.f_max_ghz=[2, 1]: range has low > high"),
        ("fleet.f_min_ghz=2", "fleet: f_min (up to 2 GHz) exceeds f_max (from 1 GHz)"),  # f_max's default
    ],
)
def test_out_of_range_names_key_value_and_range_as_written(override, expected):
    with pytest.raises(ScenarioError) as info:
        load_scenario("quickstart", [override])
    msg = str(info.value)
    assert expected in msg and "\n" not in msg
    if "_ghz" in override or "_mhz" in override or "_dbm" in override:
        si = {"f_max_ghz": "f_max_hz", "f_min_ghz": "f_min_hz", "bandwidth_mhz": "bandwidth_hz"}
        assert not any(f"{k}=" in msg for k in si.values())


@pytest.mark.parametrize(
    "override, ok",
    [
        ("fleet.tx_power_dbm=33", True),  # GSM power class 4, the top of the range
        ("fleet.tx_power_dbm=33.01", False),
        ("fleet.f_max_ghz=10 fleet.energy_coeff=1e-28", True),  # eps f^3 = 1e-28 * 1e30 = 100 W
        ("fleet.f_max_ghz=10.001 fleet.energy_coeff=1e-28", False),
        ("fleet.f_min_ghz=0.001", True),
        ("channel.bandwidth_mhz=2160", True),  # one 802.11ad channel
        ("channel.bandwidth_mhz=2161", False),
        ("round.deadline_s=1e-6", True),  # possible to write; the pre-flight check judges it
    ],
)
def test_range_ends(override, ok):
    if ok:
        load_scenario("quickstart", override.split())
    else:
        with pytest.raises(ScenarioError, match="outside"):
            load_scenario("quickstart", override.split())


def test_paper_cpu_power_admitted_and_beyond_a_kilowatt_refused():
    # AnycostFL Sec. V-A: eps up to 1e-26 at f_max 2 GHz -> P = 1e-26 * (2e9)^3 = 80 W: a paper value, admitted
    sc = load_scenario("quickstart", ["fleet.energy_coeff=1e-26", "fleet.f_max_ghz=2"])
    assert sc.fleet.energy_coeff * sc.fleet.f_max_hz**3 == pytest.approx(80.0, rel=1e-12)
    # 1e-25 * (5e9)^3 = 12,500 W: each value in its own range, the pair beyond any processor
    with pytest.raises(ScenarioError, match=r"fleet: energy_coeff up to 1e-25 with f_max up to 5 GHz: .* 1.25e\+04 W"):
        load_scenario("quickstart", ["fleet.energy_coeff=1e-25", "fleet.f_max_ghz=[1, 5]"])


def test_method_table_physical_field_has_a_range():
    assert "battery_j" in limits_of(TrainingProbabilitySettings)
    with pytest.raises(ScenarioError, match=r"method\.ccfedavg\.battery_j=\[1, 1e\+10\]: outside \[0, 3.6e\+08\] J"):
        load_scenario("ccfedavg_fmnist", ["method.ccfedavg.battery_j=[1, 1e10]"])


_PHYSICAL_SUFFIXES = ("_hz", "_w", "_m", "_s", "_j", "_db", "_w_per_hz")
_PHYSICAL_NAMES = ("energy_coeff", "flops_per_cycle", "exponent")


def test_every_physical_field_has_a_range_with_a_ground():
    models = [config.FleetConfig, config.BudgetConfig, config.StepCostsConfig, config.AvailabilityConfig,
              config.RoundConfig, config.ChannelConfig, config.DownlinkConfig]  # fmt: skip
    for model in models:
        limits = limits_of(model)
        for name in model.model_fields:
            if name.endswith(_PHYSICAL_SUFFIXES) or name in _PHYSICAL_NAMES:
                assert name in limits, f"{model.__name__}.{name} has no Limit"
                limit = limits[name]
                assert limit.low < limit.high and len(limit.ground) > 20, f"{model.__name__}.{name}"
                default = model.model_fields[name].default
                values = default if isinstance(default, tuple) else (default,)
                assert all(v is None or limit.admits(float(v)) or (v == 0 and limit.low == 0) for v in values)


def test_user_range_converts_si_ends_to_the_unit_written():
    lim = Limit(10.0 ** ((-50 - 30) / 10), 10.0 ** ((33 - 30) / 10), "W", "a device's transmit power")
    assert user_range("tx_power_dbm", lim) == "[-50, 33] dBm"
    assert user_range("tx_power_w", lim) == "[1e-08, 1.99526] W"
    assert user_range("f_max_ghz", Limit(1e6, 1e10, "Hz", "")) == "[0.001, 10] GHz"
    assert not Limit(0.0, 1.0, "s", "", low_open=True).admits(0.0) and Limit(0.0, 1.0, "s", "").admits(0.0)
    assert not Limit(0.0, 1.0, "s", "").admits(math.nan)


@pytest.mark.parametrize(
    "path, near",
    [
        (("chanel",), "channel"),
        (("fleet", "f_max_gz"), "f_max_ghz"),
        (("channel", "downlink", "bandwith_mhz"), "bandwidth_mhz"),
        (("method", "anycostfl", "alpha_mn"), "alpha_min"),
        (("fleet", "budget", "valu_j"), "value_j"),
        (("zzzz",), None),
    ],
)
def test_nearest_key(path, near):
    assert nearest_key(path, Scenario, method_tables(METHODS)) == near


def test_unknown_key_message_suggests_the_nearest():
    with pytest.raises(ScenarioError, match=r"^invalid scenario: chanel: unknown key; did you mean channel\?$"):
        load_scenario("quickstart", ["chanel.bandwidth_mhz=2"])
    with pytest.raises(ScenarioError, match=r"method\.anycostf=1: unknown key \(did you mean anycostfl\?"):
        load_scenario("quickstart", ["method.anycostf=1"])
