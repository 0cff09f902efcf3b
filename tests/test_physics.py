"""The realistic physics (issue #33): its defaults, the power parts of the fleet, and the cost model's formulas
with them, against hand-computed values; and a run of a non-paper preset whose every row obeys that physics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.fleet.build import build_fleet
from edgefl.fleet.costs import CostModel
from edgefl.fleet.devices import Fleet
from edgefl.run.load import load_scenario
from edgefl.scenario.catalogue import catalogue
from edgefl.scenario.device_table import table_of
from edgefl.scenario.physics import REALISTIC_PROFILE
from edgefl.seeding import Streams

REL = 1e-12  # hand values are exact up to floating point


def _fleet(*, static=(2.0,), circuit=(0.5,), pa=(0.25,), rx=None, eps=(1e-27,), f_min=(0.2e9,), f_max=(3e9,),
           tx=(0.2,)) -> Fleet:  # fmt: skip
    a = lambda v: np.asarray(v, dtype=float)  # noqa: E731
    n = len(eps)
    return Fleet(
        f_min_hz=a(f_min), f_max_hz=a(f_max), energy_coeff=a(eps), flops_per_cycle=np.ones(n), tx_power_w=a(tx),
        n_samples=np.full(n, 10), static_power_w=a(static), tx_circuit_power_w=a(circuit), pa_efficiency=a(pa),
        rx_power_w=None if rx is None else a(rx),
    )  # fmt: skip


def test_compute_energy_is_static_plus_dynamic_by_hand():
    """eps = 1e-27, f = 1 GHz, c = 1e9 cycles, P_static = 2 W: t = c / f = 1 s; e = eps f^2 c + P_static t
    = 1e-27 * 1e18 * 1e9 + 2 * 1 = 1 + 2 = 3 J, of which 2 J static."""
    costs = CostModel(_fleet())
    t, e = costs.compute(np.array([0]), cycles=np.array([1e9]), steps=np.array([1]), f_hz=np.array([1e9]))
    assert t[0] == pytest.approx(1.0, rel=REL) and e[0] == pytest.approx(3.0, rel=REL)
    assert costs.static_energy_j(np.array([0]), t)[0] == pytest.approx(2.0, rel=REL)


def test_upload_energy_has_circuit_power_and_pa_efficiency_by_hand():
    """P_tx = 0.2 W radiated, PA efficiency 0.25, circuit 0.5 W, 2 Mbit at 1 Mbit/s: t = 2 s, power = 0.5 +
    0.2 / 0.25 = 1.3 W, e = 2.6 J (Jensen et al.'s split of a UE's transmit power into a constant circuit part and
    the PA's, with the PA's supply power = radiated / efficiency)."""
    t, e = CostModel(_fleet()).upload(np.array([0]), bits=np.array([2e6]), rate_bps=np.array([1e6]))
    assert t[0] == pytest.approx(2.0, rel=REL) and e[0] == pytest.approx(2.6, rel=REL)


def test_download_energy_uses_each_devices_receive_power():
    """Two devices with receive powers 1 W and 0.5 W download 4 Mbit at 2 Mbit/s: 2 s each, 2 J and 1 J (the
    scenario-wide receive power passed in is not used when the fleet has its own)."""
    fleet = _fleet(static=(1, 1), circuit=(0, 0), pa=(1, 1), rx=(1.0, 0.5), eps=(1e-27, 1e-27), f_min=(1e8, 1e8),
                   f_max=(1e9, 1e9), tx=(0.1, 0.1))  # fmt: skip
    t, e = CostModel(fleet).download(np.array([0, 1]), bits=4e6, rate_bps=2e6, rx_power_w=9.0)
    np.testing.assert_allclose(t, [2.0, 2.0], rtol=REL)
    np.testing.assert_allclose(e, [2.0, 1.0], rtol=REL)


def test_energy_optimal_frequency_by_hand():
    """Energy per cycle P_s / f + eps f^2 is least where its derivative -P_s / f^2 + 2 eps f is 0:
    f* = (P_s / (2 eps))^(1/3) = (2 / 2e-27)^(1/3) = 1e9 Hz; clipped to [f_min, f_max]."""
    costs = CostModel(_fleet(static=(2.0, 2.0, 2.0), circuit=(0,) * 3, pa=(1,) * 3, eps=(1e-27,) * 3,
                             f_min=(0.2e9, 1.5e9, 0.1e9), f_max=(3e9, 3e9, 0.5e9), tx=(0.1,) * 3))  # fmt: skip
    np.testing.assert_allclose(costs.energy_optimal_hz(np.arange(3)), [1e9, 1.5e9, 0.5e9], rtol=1e-12)
    # a deadline that a slower CPU would meet still runs at f*: 1e8 cycles in 1 s need only 0.1 GHz
    f, ok = costs.deadline_frequency_hz(np.array([0]), np.array([1e8]), 1.0)
    assert f[0] == pytest.approx(1e9, rel=1e-12) and ok[0]
    # and FedAvg's min_energy rule picks it too
    assert costs.free_frequency_hz(np.array([0]), "min_energy")[0] == pytest.approx(1e9, rel=1e-12)


def test_upload_budget_with_static_power_matches_a_dense_search():
    """The affordable upload bits under T_max and E_max with a static power, against an independent dense search
    over the frequency (10^5 points): the bisection's bits are within 1e-4 of the best on the grid (at or above
    it, up to the grid's spacing: the bisection finds the exact crossing), and they fit T_max and E_max."""
    rng = np.random.default_rng(7)
    n = 40
    fleet = _fleet(static=rng.uniform(0.3, 4.0, n), circuit=rng.uniform(0, 1.5, n), pa=rng.uniform(0.1, 0.5, n),
                   eps=10 ** rng.uniform(-28, -26.5, n), f_min=rng.uniform(0.2e9, 0.8e9, n),
                   f_max=rng.uniform(1.0e9, 3e9, n), tx=rng.uniform(0.1, 0.2, n))  # fmt: skip
    costs = CostModel(fleet)
    dev = np.arange(n)
    c = rng.uniform(1e8, 2e9, n)
    e_max, r, t_max = rng.uniform(2, 12, n), rng.uniform(1e6, 5e6, n), 5.0
    plan = costs.upload_budget(dev, cycles=c, steps=np.ones(n), e_max_j=e_max, rate_bps=r, t_max_s=t_max)
    grid = np.linspace(fleet.f_min_hz, fleet.f_max_hz, 100_001)  # (points, devices)
    e_cmp = fleet.energy_coeff * grid**2 * c + fleet.static_power_w * c / grid
    best = np.max(np.minimum(r * (t_max - c / grid), r * (e_max - e_cmp) / fleet.upload_power_w), axis=0)
    ok = best >= 1.0
    assert ok.sum() > 10 and (~ok).sum() > 0  # both kinds of device are tested
    np.testing.assert_array_equal(plan.feasible, ok)
    got = plan.bits[ok]
    np.testing.assert_allclose(got, np.floor(best[ok]), rtol=1e-4)
    # the plan's costs are what the cost model charges, within the deadline and the budget
    assert np.all(plan.e_cmp_j[ok] + plan.e_com_j[ok] <= e_max[ok] * (1 + 1e-9))
    assert np.all(plan.t_cmp_s[ok] + plan.t_com_s[ok] <= t_max * (1 + 1e-9))


def test_realistic_defaults_fill_only_what_the_scenario_leaves_out():
    sc = load_scenario("quickstart", ["physics=realistic"])
    ch = sc.channel
    assert (ch.link_model, ch.shadowing_db, ch.rayleigh, ch.interference_db) == ("truncated_shannon", 8.0, True, 2.0)
    assert 10 * math.log10(ch.noise_psd_w_per_hz * 1e3 * 1e6) == pytest.approx(-111.5, abs=1e-9)  # dBm/MHz
    assert ch.downlink is not None and sc.round.charge_idle
    own = load_scenario("quickstart", ["physics=realistic", "channel.shadowing_db=4", "channel.rayleigh=false",
                                       "channel.link_model=shannon"])  # fmt: skip
    assert (own.channel.shadowing_db, own.channel.rayleigh, own.channel.link_model) == (4.0, False, "shannon")
    paper = load_scenario("quickstart", ["physics=paper"])
    assert (paper.channel.link_model, paper.channel.shadowing_db, paper.channel.rayleigh) == ("shannon", 0.0, False)
    assert paper.channel.downlink is None and not paper.round.charge_idle and paper.channel.interference_db == 0


def test_a_fixed_download_time_keeps_the_downlink_model_off():
    sc = load_scenario("quickstart", ["physics=realistic", "round.downlink_s=2"])
    assert sc.channel.downlink is None and sc.round.downlink_s == 2.0


def test_realistic_fleet_takes_each_profiles_power_parts():
    """Profiles give static, circuit, PA and receive power and their dynamic coefficient (P - P_static) / f^3;
    an explicit scenario key holds for every device; under the papers' physics none of it applies."""
    sc = load_scenario("quickstart", ["physics=realistic", "fleet.profiles={raspberry_pi_4=1, helio_p23=1}"])
    built = build_fleet(sc.fleet, np.full(20, 10), Streams(0), table_of(sc.fleet), realistic=True)
    fl, cat = built.fleet, catalogue()
    for i, name in enumerate(built.profiles):
        p = cat[name]
        assert fl.static_power_w[i] == p.static_power_w and fl.tx_circuit_power_w[i] == p.tx_circuit_power_w
        assert fl.pa_efficiency[i] == p.pa_efficiency and fl.rx_power_w[i] == p.rx_power_w
        assert fl.energy_coeff[i] == pytest.approx((p.power_w - p.static_power_w) / p.power_at_hz**3, rel=REL)
    own = load_scenario("quickstart", ["physics=realistic", "fleet.static_power_w=0.7"])
    fl_own = build_fleet(own.fleet, np.full(20, 10), Streams(0), table_of(own.fleet), realistic=True).fleet
    np.testing.assert_array_equal(fl_own.static_power_w, np.full(20, 0.7))
    paper = load_scenario("quickstart", ["physics=paper"])
    fl_paper = build_fleet(paper.fleet, np.full(20, 10), Streams(0), table_of(paper.fleet)).fleet
    assert fl_paper.static_power_w is None and fl_paper.rx_power_w is None
    assert np.array_equal(fl_paper.upload_power_w, fl_paper.tx_power_w)


def test_a_device_without_profile_takes_the_default_profiles_power():
    sc = load_scenario("quickstart", ["physics=realistic", "fleet.profiles={}"])
    fl = build_fleet(sc.fleet, np.full(20, 10), Streams(0), table_of(sc.fleet), realistic=True).fleet
    p = catalogue()[REALISTIC_PROFILE]
    np.testing.assert_array_equal(fl.static_power_w, np.full(20, p.static_power_w))
    np.testing.assert_array_equal(fl.rx_power_w, np.full(20, p.rx_power_w))


@pytest.mark.slow
def test_a_realistic_preset_run_obeys_its_physics():
    """A run of the quickstart (physics = "realistic"): every uplink at most 2.0 bit/s/Hz (TR 36.942 A.2's uplink
    Thr_max), compute power at or above the device's static power, upload power above its radiated power,
    downloads taking time."""
    from edgefl.run.runner import Simulation, run_scenario

    sc = load_scenario("quickstart", ["rounds=3"])
    assert sc.physics == "realistic"
    fleet = Simulation(sc).run.fleet
    d = run_scenario(sc).device_rounds
    jobs = d[d["t_com_s"] > 0]
    dev = jobs["device"].to_numpy()
    assert np.all(jobs["rate_bps"] / sc.channel.bandwidth_hz <= 2.0 * (1 + 1e-12))
    assert np.all(jobs["e_cmp_j"] / jobs["t_cmp_s"] >= fleet.static_power_w[dev] * (1 - 1e-12))
    assert np.all(jobs["e_com_j"] / jobs["t_com_s"] > fleet.tx_power_w[dev])
    assert np.all(jobs["t_start_s"] - jobs["t_down_s"] > 0) and np.all(jobs["e_down_j"] > 0)  # download start -> compute


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["quickstart", "async_digits"])
def test_devices_without_a_link_sit_the_round_out(preset):
    """In a 3 km cell the truncated Shannon bound gives many devices 0 bit/s (SINR below -10 dB): they sit out
    with the reason NO_LINK instead of holding the round forever; every device with a job has a positive rate."""
    from edgefl.engine.round_steps import NO_LINK
    from edgefl.run.runner import run_scenario

    sets = ["rounds=3", "channel.cell_radius_m=3000", "checkpoint_every=0"]
    d = run_scenario(load_scenario(preset, sets)).device_rounds
    out = d[d["reason"] == NO_LINK]
    assert len(out) > 0 and not out["feasible"].any() and not out["arrived"].any()
    jobs = d[d["feasible"]]
    assert len(jobs) > 0 and np.all(jobs["rate_bps"] > 0)


def test_every_preset_says_which_physics_it_runs_under():
    """Each preset file names its physics; the papers' presets (and the system-scale ones on AnycostFL's radio)
    keep the papers' model, the others run under the realistic one (issue #33)."""
    import tomllib

    from scenarios import list_presets, preset_path

    physics = {p: tomllib.loads(preset_path(p).read_text())["physics"] for p in list_presets()}
    assert {p for p, v in physics.items() if v == "realistic"} == {"quickstart", "operator_cell", "async_digits",
                                                                    "async_fmnist"}  # fmt: skip
    assert all(v in ("paper", "realistic") for v in physics.values())


def test_the_resolved_scenario_gives_the_same_realistic_fleet_again(tmp_path):
    """The run folder's scenario.toml (what a resume loads) keeps the power parts and the receive power a profile
    sets as the profile's: written at their defaults they would read back as set for every device."""
    from edgefl.scenario.loading import scenario_to_toml

    sc = load_scenario("quickstart", ["physics=realistic"])
    path = tmp_path / "scenario.toml"
    path.write_text(scenario_to_toml(sc))
    again = load_scenario(str(path))
    assert again.fleet.explicit_power_fields() == set() and "rx_power_w" not in again.channel.downlink.model_fields_set

    def fleet_of(s):
        dl = s.channel.downlink
        rx = dl.rx_power_w if "rx_power_w" in dl.model_fields_set else None
        return build_fleet(s.fleet, np.full(20, 10), Streams(0), table_of(s.fleet), realistic=True,
                           downlink_rx_w=rx).fleet  # fmt: skip

    a, b = fleet_of(sc), fleet_of(again)
    for name in ("static_power_w", "tx_circuit_power_w", "pa_efficiency", "rx_power_w", "energy_coeff"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fedavg", "stc", "anycostfl"])
def test_the_energy_budget_pays_for_the_download_too(method):
    """Under the realistic physics a device's E_max covers its download as well: every device that trains plans
    compute + upload within E_max less its download's energy, so what it is charged in all stays within E_max;
    a device whose download and work do not fit sits out."""
    from edgefl.run.runner import run_scenario

    low, high = (0.06, 0.3) if method == "fedavg" else (0.045, 0.07)  # the compressors' payloads are smaller
    sets = ["rounds=3", f"method.name={method}", "round.policy=deadline", "round.deadline_s=2",
            "fleet.budget.kind=uniform", f"fleet.budget.low_j={low}", f"fleet.budget.high_j={high}"]  # fmt: skip
    d = run_scenario(load_scenario("quickstart", sets)).device_rounds
    jobs = d[d["feasible"]]
    planned = jobs["e_cmp_planned_j"] + jobs["e_com_planned_j"] + jobs["e_down_j"]
    assert len(jobs) > 0 and np.all(planned <= jobs["e_max_j"] * (1 + 1e-9))
    if method == "fedavg":  # the budgets bind: FedAvg's devices that cannot afford the full model sit out
        assert (~d["feasible"]).any()
    else:  # the budgeted methods shrink their payload until download, compute and upload fill the budget
        assert np.any(planned >= jobs["e_max_j"] * (1 - 1e-3))
    charged = jobs["e_cmp_j"] + jobs["e_com_j"] + jobs["e_down_j"]
    assert np.all(charged <= jobs["e_max_j"] * (1 + 1e-9))


def test_interference_raises_the_noise_both_links_see():
    """channel.interference_db = 3: the noise PSD is N0 10^(3/10), so a Shannon rate at gain g, power p and band
    b is b log2(1 + g p / (N0 10^0.3 b)), checked by hand against the radio's uplink and downlink rates."""
    from edgefl.fleet.links import Radio

    sc = load_scenario("quickstart", ["physics=paper", "channel.interference_db=3", "channel.downlink.tx_power_w=10"])
    radio = Radio(sc.channel, 4, Streams(0))
    _, gain = radio.round_state(1)
    n0 = sc.channel.noise_psd_w_per_hz * 10 ** 0.3
    b, p = sc.channel.bandwidth_hz, np.full(4, 0.1)
    np.testing.assert_allclose(radio.rates_bps(gain, p), b * np.log2(1 + gain * p / (n0 * b)), rtol=1e-12)
    b_dl = sc.channel.downlink.bandwidth_hz
    np.testing.assert_allclose(radio.downlink_rates_bps(gain), b_dl * np.log2(1 + gain * 10.0 / (n0 * b_dl)),
                               rtol=1e-12)  # fmt: skip
