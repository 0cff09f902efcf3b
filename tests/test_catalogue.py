"""The device catalogue: every number has a source or a stated assumption, eps = P / f^3 holds, and profiles
reach the fleet (a mix drawn on its own stream, table cells over profiles over draws)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from edgefl.scenario.catalogue import catalogue, catalogue_document
from edgefl.errors import ScenarioError
from edgefl.fleet.build import build_fleet
from edgefl.scenario.device_table import table_of
from edgefl.scenario.loading import scenario_to_toml
from edgefl.run.load import load_scenario, scenario_from_dict
from edgefl.seeding import Streams

REL = 1e-12  # eps written in the file vs P / f^3 recomputed: double rounding only


def _numbers(node, path=()):
    """Every number in the catalogue's profiles with its path (a value table counts as its value)."""
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _numbers(child, (*path, key))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


def test_every_number_names_a_listed_source_or_an_assumption():
    doc = catalogue_document()
    sources = doc["sources"]
    assert all(s["url"].startswith("https://") and s["title"] for s in sources.values())
    numbers = list(_numbers(doc["profiles"]))
    assert len(numbers) >= 9 * 8  # 9 profiles x 8 numbers at least (a board has no battery number)
    for path, _ in numbers:
        assert path[-1] == "value", f"{'.'.join(path)}: a bare number; write {{ value = ..., source = ... }}"
        entry = doc["profiles"][path[0]][path[1]]
        cited = entry.get("source") or entry.get("assumption") or entry.get("derivation")
        assert cited and len(cited) > 10, f"{'.'.join(path)} has no source, assumption or derivation"
        if "source" in entry:
            ref = entry["source"].split(":", 1)[0]
            assert ref in sources, f"{'.'.join(path)}: source id {ref!r} is not in [sources]"
    # the string values (battery 'none') also say why
    for key, p in doc["profiles"].items():
        b = p["battery_wh"]
        assert "source" in b or "assumption" in b, key


def test_energy_coefficient_is_power_over_frequency_cubed():
    doc = catalogue_document()["profiles"]
    for key, p in catalogue().items():
        assert p.energy_coeff == pytest.approx(p.power_w / p.power_at_hz**3, rel=REL), key
        derivation = doc[key]["energy_coeff"]["derivation"]
        assert derivation.startswith("eps = P / f^3 = ") and f"{p.power_w:g} W" in derivation, key


def test_catalogue_spans_the_required_devices():
    profiles = catalogue()
    assert len(profiles) >= 9
    assert {"jetson_nano", "jetson_xavier_nx", "jetson_agx_xavier", "raspberry_pi_4", "raspberry_pi_5"} <= set(profiles)
    phone_classes = {p.device_class for p in profiles.values() if p.device_class.startswith("smartphone")}
    assert {"smartphone, flagship", "smartphone, upper-mid", "smartphone, mid", "smartphone, entry"} <= phone_classes
    for p in profiles.values():
        assert 0 < p.f_min_hz <= p.f_max_hz <= 10e9
        # TS 38.101-1: class 3 = 23 dBm, class 2 = 26 dBm
        assert p.tx_power_dbm == {3: 23.0, 2: 26.0}[p.ue_power_class]
        assert p.tx_power_w == pytest.approx(10 ** ((p.tx_power_dbm - 30) / 10), rel=1e-12)


POWER_PARTS = ("static_power_w", "radio", "tx_circuit_power_w", "pa_efficiency", "rx_power_w")


def test_power_parts_are_cited_and_in_range():
    """Every profile has the power-by-parts fields, each with a source, an assumption or a derivation (the radio's
    string too, whose source ids must be listed), in physical ranges; the dynamic coefficient stays positive."""
    doc = catalogue_document()
    for key, entry in doc["profiles"].items():
        for field in POWER_PARTS:
            cell = entry[field]
            assert isinstance(cell, dict) and "value" in cell, f"{key}.{field}: write {{ value = ..., ... }}"
            cited = cell.get("source") or cell.get("assumption") or cell.get("derivation")
            assert cited and len(cited) > 10, f"{key}.{field} has no source, assumption or derivation"
            if "source" in cell:
                assert cell["source"].split(":", 1)[0] in doc["sources"], f"{key}.{field}"
    for key, p in catalogue().items():
        assert 0.05 <= p.static_power_w <= 20, key
        assert 0 <= p.tx_circuit_power_w <= 5, key
        assert 0.05 <= p.pa_efficiency <= 0.6, key
        assert 0.05 <= p.rx_power_w <= 5, key
        assert p.radio in {"cellular modem", "USB LTE dongle"}, key
        assert (p.radio == "cellular modem") == p.device_class.startswith("smartphone"), key
        # the cited total P at f is above the static part: a positive dynamic coefficient, below the papers' eps
        assert 0 < p.dynamic_energy_coeff < p.energy_coeff, key
        assert p.dynamic_energy_coeff == pytest.approx((p.power_w - p.static_power_w) / p.power_at_hz**3, rel=REL)


def test_upload_power_of_a_raspberry_pi_4_by_hand():
    """Upload power = circuit + radiated / PA efficiency. For the Raspberry Pi 4 (its USB LTE dongle, class 3):
    radiated 23 dBm = 10^(-0.7) W = 0.19952623 W; / 0.12 = 1.66271858 W; + 0.912 W circuit = 2.57471858 W.
    Its dynamic coefficient: (5.4 W - 2.2 W static) / (1.5e9 Hz)^3 = 3.2 / 3.375e27 = 9.48148e-28 J/(cycle Hz^2)."""
    pi4 = catalogue()["raspberry_pi_4"]
    assert pi4.upload_power_w == pytest.approx(2.57471858, rel=1e-8)
    assert pi4.dynamic_energy_coeff == pytest.approx(9.48148148e-28, rel=1e-8)


@pytest.mark.slow
def test_edgefl_devices_lists_every_profile_and_its_sources():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    text = subprocess.run([sys.executable, "-m", "edgefl", "devices"], capture_output=True, text=True, env=env,
                          check=True).stdout  # fmt: skip
    rows = [line.split()[0] for line in text.splitlines()[1:] if line and not line.startswith("sources")]
    assert rows == list(catalogue())
    doc = json.loads(subprocess.run([sys.executable, "-m", "edgefl", "devices", "--json"], capture_output=True,
                                    text=True, env=env, check=True).stdout)  # fmt: skip
    assert set(doc["profiles"]) == set(catalogue()) and doc["sources"]


def test_profile_mix_draws_on_its_own_stream_and_table_cells_win(tmp_path):
    # operator_cell sets none of the profile quantities itself, so the profiles give all of them
    sc = load_scenario("operator_cell", ["fleet.profiles={jetson_nano=1, helio_p23=3}"])
    n = sc.fleet.n_devices
    built = build_fleet(sc.fleet, np.full(n, 10), Streams(sc.seed), table_of(sc.fleet))
    # the mix: the 'profiles' stream picks p = (1/4, 3/4)
    want = Streams(sc.seed).numpy("profiles").choice(2, size=n, p=[0.25, 0.75])
    assert built.profiles == [("jetson_nano", "helio_p23")[i] for i in want]
    nano, p23 = catalogue()["jetson_nano"], catalogue()["helio_p23"]
    for i, name in enumerate(built.profiles):
        p = nano if name == "jetson_nano" else p23
        assert built.fleet.f_max_hz[i] == p.f_max_hz and built.fleet.energy_coeff[i] == p.energy_coeff
        assert built.fleet.tx_power_w[i] == pytest.approx(0.19952623, rel=1e-6)  # class 3: 23 dBm
    # a table cell overrides the profile: device 0 a Pi 5 clocked at 2.0 GHz
    rows = "profile,f_max_ghz\nraspberry_pi_5,2.0\n" + "".join("jetson_nano,\n" for _ in range(n - 1))
    (tmp_path / "t.csv").write_text(rows)
    sc2 = load_scenario("quickstart", [f'fleet.devices="{tmp_path / "t.csv"}"'])
    b2 = build_fleet(sc2.fleet, np.full(n, 10), Streams(sc2.seed), table_of(sc2.fleet))
    pi5 = catalogue()["raspberry_pi_5"]
    assert b2.fleet.f_max_hz[0] == 2.0e9 and b2.fleet.energy_coeff[0] == pi5.energy_coeff
    assert b2.fleet.f_min_hz[0] == pi5.f_min_hz
    assert np.all(b2.fleet.f_max_hz[1:] == nano.f_max_hz)


def test_an_explicit_scenario_key_overrides_the_mix_profiles_value(tmp_path):
    """Precedence: a key the scenario sets itself (here with --set, in GHz) beats the mix's profiles for that
    quantity; the profiles still give the rest; the resolved scenario written with the results keeps it so."""
    mix = "fleet.profiles={jetson_nano=1, helio_p23=3}"
    sc = load_scenario("operator_cell", [mix, "fleet.f_max_ghz=1.5"])
    n = sc.fleet.n_devices
    built = build_fleet(sc.fleet, np.full(n, 10), Streams(sc.seed), table_of(sc.fleet))
    assert set(built.profiles) == {"jetson_nano", "helio_p23"}
    np.testing.assert_array_equal(built.fleet.f_max_hz, np.full(n, 1.5e9))  # every device: the explicit value
    for i, name in enumerate(built.profiles):
        p = catalogue()[name]
        assert built.fleet.f_min_hz[i] == p.f_min_hz and built.fleet.energy_coeff[i] == p.energy_coeff
        assert built.fleet.flops_per_cycle[i] == p.flops_per_cycle
    # an explicit f_max below a profile's f_min lowers that f_min: a Helio P23 (0.575-2.3 GHz) at 0.5 GHz
    low = load_scenario("operator_cell", ["fleet.profiles={helio_p23=1}", "fleet.f_max_ghz=0.5"])
    b_low = build_fleet(low.fleet, np.full(n, 10), Streams(low.seed), table_of(low.fleet))
    assert np.all(b_low.fleet.f_min_hz == 0.5e9) and np.all(b_low.fleet.f_max_hz == 0.5e9)
    # keys in the scenario file count as set: a tx_power_dbm = 20 (0.1 W) of its own beats the mix's 23 dBm, which
    # still gives each device its f_max
    qs_fleet = load_scenario("quickstart", [mix, "fleet.tx_power_dbm=20"]).fleet
    qs = build_fleet(qs_fleet, np.full(20, 10), Streams(0), table_of(qs_fleet))
    np.testing.assert_allclose(qs.fleet.tx_power_w, np.full(20, 0.1), rtol=1e-12)
    np.testing.assert_array_equal(qs.fleet.f_max_hz, [catalogue()[name].f_max_hz for name in qs.profiles])
    # the resolved scenario keeps what was set and leaves out what was not: reloading gives the same fleet
    again = scenario_from_dict(tomllib.loads(scenario_to_toml(sc)))
    assert "f_max_hz" in again.fleet.model_fields_set and "f_min_hz" not in again.fleet.model_fields_set
    b_again = build_fleet(again.fleet, np.full(n, 10), Streams(again.seed), table_of(again.fleet))
    for key in ("f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle", "tx_power_w"):
        np.testing.assert_array_equal(getattr(b_again.fleet, key), getattr(built.fleet, key))


def test_unknown_profile_names_the_key():
    with pytest.raises(ScenarioError, match=r"fleet\.profiles\.iphone='iphone': not in the device catalogue; one of "):
        load_scenario("quickstart", ["fleet.profiles={iphone=1}"])


PAPER_PRESETS = {  # reproduce a paper's setup: they keep the paper's devices (their comments say where unreal)
    "anycostfl_cifar10", "anycostfl_fmnist", "anycostfl_surrogate_10k", "ccfedavg_crosssilo", "ccfedavg_fmnist",
    "heterofl_fmnist", "luo_physical", "luo_setup1", "luo_setup2", "luo_setup3", "yang_fdma",
}


def _non_paper_presets():
    from scenarios import list_presets

    return [name for name in list_presets() if name not in PAPER_PRESETS]


@pytest.mark.parametrize("name", _non_paper_presets())
def test_non_paper_presets_draw_real_devices(name):
    """Median compute power eps f_max^3 of a non-paper preset's fleet is within its profiles' cited maximum
    (a preset without profiles: within the highest cited power of any catalogue phone)."""
    sc = load_scenario(name)
    n = sc.fleet.n_devices
    built = build_fleet(sc.fleet, np.full(n, 10), Streams(sc.seed), table_of(sc.fleet))
    power = built.fleet.energy_coeff * built.fleet.f_max_hz**3
    names = sc.fleet.profiles or [k for k, p in catalogue().items() if p.device_class.startswith("smartphone")]
    cited_max = max(catalogue()[k].power_w for k in names)
    assert np.median(power) <= cited_max * (1 + 1e-9), f"{name}: median {np.median(power):.3g} W > {cited_max} W"


@pytest.mark.slow
def test_operator_cell_has_operator_time_scales_and_availability_that_matters():
    """The operator preset (surrogate learning, so no training: the same fleet, radio, availability and rounds):
    rounds last seconds (upload of the 53.23 Mb CNN update at a few Mb/s), and with phones online 2 min of
    every 12 on average (1/6 of 40 = 6.7 online) fewer than the 10 wanted are often available."""
    from edgefl.run.runner import run_scenario

    rounds = run_scenario(load_scenario("operator_cell", ['learning="surrogate"', "rounds=12"])).rounds
    assert rounds["round_time_s"].median() >= 1.0
    assert (rounds["selected"] < 10).any() and (rounds["selected"] <= 10).all()
