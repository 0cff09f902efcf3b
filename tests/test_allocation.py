"""The allocation step (``channel.allocation``, issue #36): each started device's uplink bandwidth, transmit power and
CPU frequency, planned with the cost model the round charges.

Expected values come from the papers' formulas written out here (Shannon's rate ``b log2(1 + g p / (N0 b))``, the
3GPP macro path loss ``128.1 + 37.6 log10(d / km)``, ``t = c / f``, ``e = eps f^2 c``, ``e = p t``), not from the
code under test; the least-energy claim is checked against the equal split, a feasible point of the same problem.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.errors import ScenarioError
from edgefl.fleet.allocation import allocate
from edgefl.fleet.costs import CostModel
from edgefl.fleet.devices import Fleet
from edgefl.methods import METHODS
from edgefl.run.load import load_scenario
from edgefl.run.runner import build_run, run_scenario
from channel import RadioModel

RTOL = 1e-9  # plan and charge evaluate the same formulas: rounding only
FINISH_RTOL = 1e-9  # min_time's common finish: its bisection stops at a relative bracket of 1e-12
N0 = 4e-21  # noise PSD [W/Hz]

# 3 devices, the papers' physics, Shannon's rate on one 1 MHz band shared by all three
PAPER = ["physics=paper", "channel.link_model=shannon", "channel.bandwidth_mode=split", "fleet.n_devices=3",
         "method.clients_per_round=3", "rounds=2", "checkpoint_every=0", "model.hidden=[16]", "train.local_epochs=1"]  # fmt: skip


def _fleet(n: int, **over) -> Fleet:
    cols = dict(f_min_hz=np.full(n, 1e8), f_max_hz=np.full(n, 2e9), energy_coeff=np.full(n, 1e-28),
                flops_per_cycle=np.ones(n), tx_power_w=np.full(n, 0.2), n_samples=np.full(n, 100))  # fmt: skip
    cols.update(over)
    return Fleet(**cols)


def _rate(b, g, p):
    return b * np.log2(1.0 + g * p / (N0 * b))


def test_min_time_two_equal_devices_split_the_band_in_half():
    """Two identical devices: the common finish is the equal split, T = c / f_max + S / (B/2 log2(1 + g p / (N0 B/2)))."""
    costs, radio = CostModel(_fleet(2)), RadioModel(noise_psd_w_per_hz=N0, band_hz=1e6, bandwidth_mode="split")
    g, c, s = 1e-11, 2e8, 1e6
    a = allocate("min_time", costs=costs, radio=radio, devices=np.array([0, 1]), gain=np.full(2, g),
                 cycles=np.full(2, c), bits=s)  # fmt: skip
    np.testing.assert_allclose(a.bandwidth_hz, [5e5, 5e5], rtol=1e-9)
    t_round = c / 2e9 + s / _rate(5e5, g, 0.2)
    np.testing.assert_allclose(a.t_cmp_s + a.t_com_s, t_round, rtol=1e-9)
    np.testing.assert_array_equal(a.tx_power_w, [0.2, 0.2])
    np.testing.assert_array_equal(a.cpu_hz, [2e9, 2e9])


def test_min_time_three_devices_finish_together_and_the_plan_is_the_papers_formulas():
    costs, radio = CostModel(_fleet(3, f_max_hz=np.array([1e9, 2e9, 1.5e9]))), RadioModel(
        noise_psd_w_per_hz=N0, band_hz=2e6, bandwidth_mode="split")  # fmt: skip
    g, c = np.array([1e-10, 1e-12, 3e-11]), np.array([1e8, 3e8, 2e8])
    a = allocate("min_time", costs=costs, radio=radio, devices=np.array([0, 1, 2]), gain=g, cycles=c, bits=2e6,
                 t_before_s=np.array([0.01, 0.0, 0.02]))  # fmt: skip
    assert a.bandwidth_hz.sum() <= 2e6 * (1 + 1e-12)
    finish = np.array([0.01, 0.0, 0.02]) + c / np.array([1e9, 2e9, 1.5e9]) + 2e6 / _rate(a.bandwidth_hz, g, 0.2)
    np.testing.assert_allclose(finish, finish[0], rtol=FINISH_RTOL)
    np.testing.assert_allclose(a.t_com_s, 2e6 / _rate(a.bandwidth_hz, g, a.tx_power_w), rtol=RTOL)
    np.testing.assert_allclose(a.e_com_j, a.tx_power_w * a.t_com_s, rtol=RTOL)
    np.testing.assert_allclose(a.e_cmp_j, 1e-28 * a.cpu_hz**2 * c, rtol=RTOL)


def test_min_energy_under_a_deadline_spends_no_more_than_the_equal_split():
    """The equal split at p_max with the lowest frequency that meets the deadline is a feasible point of Yang et
    al.'s problem, so the least energy is at most its energy (hand-computed here)."""
    n, deadline, s = 3, 0.5, 1e6
    fleet = _fleet(n, tx_power_w=np.array([0.1, 0.2, 0.15]))
    costs, radio = CostModel(fleet), RadioModel(noise_psd_w_per_hz=N0, band_hz=3e6, bandwidth_mode="split")
    g, c = np.array([1e-10, 2e-12, 3e-11]), np.array([1e8, 3e8, 2e8])
    a = allocate("min_energy", costs=costs, radio=radio, devices=np.arange(n), gain=g, cycles=c, bits=s,
                 deadline_s=deadline)  # fmt: skip
    assert a.note == ""
    assert a.bandwidth_hz.sum() <= 3e6 * (1 + 1e-9)
    assert np.all(a.tx_power_w <= fleet.tx_power_w * (1 + 1e-12)) and np.all(a.tx_power_w > 0)
    assert np.all((a.cpu_hz >= 1e8 * (1 - 1e-12)) & (a.cpu_hz <= 2e9 * (1 + 1e-12)))
    assert np.all(a.t_cmp_s + a.t_com_s <= deadline * (1 + 1e-9))
    t_com_eq = s / _rate(1e6, g, fleet.tx_power_w)
    f_eq = np.maximum(c / (deadline - t_com_eq), 1e8)
    assert np.all(f_eq <= 2e9)  # the equal split meets the deadline: a feasible point
    e_equal = np.sum(1e-28 * f_eq**2 * c + fleet.tx_power_w * t_com_eq)
    assert a.e_cmp_j.sum() + a.e_com_j.sum() <= e_equal * (1 + 1e-9)
    assert a.e_cmp_j.sum() + a.e_com_j.sum() < 0.9 * e_equal  # and by a margin on this instance


def test_min_energy_falls_back_to_min_time_when_no_allocation_meets_the_deadline():
    costs, radio = CostModel(_fleet(2)), RadioModel(noise_psd_w_per_hz=N0, band_hz=1e6, bandwidth_mode="split")
    a = allocate("min_energy", costs=costs, radio=radio, devices=np.array([0, 1]), gain=np.full(2, 1e-11),
                 cycles=np.full(2, 4e9), bits=1e6, deadline_s=1.0)  # 2 s of computing at f_max
    assert "min_energy infeasible, min_time used: device" in a.note
    np.testing.assert_array_equal(a.cpu_hz, [2e9, 2e9])


def _scenario_rows(allocation: str, extra: list[str] = ()):
    sc = load_scenario("quickstart", [*PAPER, f"channel.allocation={allocation}", *extra])
    fleet = build_run(sc).fleet
    return sc, fleet, run_scenario(sc).device_rounds


@pytest.mark.slow
@pytest.mark.parametrize("allocation", ["min_time", "min_energy"])
def test_a_round_charges_what_the_papers_formulas_give_at_the_allocation(allocation):
    """A real 3-device run: each job's charged compute and upload time and energy equal the papers' formulas at
    its recorded frequency, sub-band and power (gain from its recorded distance), and equal the plan."""
    extra = ["round.policy=deadline", "round.deadline_s=0.5", "round.late=cancel"]
    sc, fleet, rows = _scenario_rows(allocation, extra)
    jobs = rows[rows["feasible"]]
    assert len(jobs) == 6  # 3 devices, 2 rounds
    dev = jobs["device"].to_numpy()
    g = 10 ** (-(128.1 + 37.6 * np.log10(jobs["distance_m"].to_numpy() / 1000.0)) / 10)  # dB -> linear
    n0 = sc.channel.noise_psd_w_per_hz
    b, p, f = jobs["bandwidth_hz"].to_numpy(), jobs["tx_power_w"].to_numpy(), jobs["cpu_hz"].to_numpy()
    rate = b * np.log2(1.0 + g * p / (n0 * b))
    cycles = jobs["flops"].to_numpy() / fleet.flops_per_cycle[dev]
    np.testing.assert_allclose(jobs["t_com_s"], jobs["bits"] / rate, rtol=1e-9)
    np.testing.assert_allclose(jobs["e_com_j"], p * jobs["bits"] / rate, rtol=1e-9)
    np.testing.assert_allclose(jobs["t_cmp_s"], cycles / f, rtol=1e-9)
    np.testing.assert_allclose(jobs["e_cmp_j"], fleet.energy_coeff[dev] * f**2 * cycles, rtol=1e-9)
    for charged, planned in (("t_cmp_s", "t_cmp_planned_s"), ("t_com_s", "t_com_planned_s"),
                             ("e_cmp_j", "e_cmp_planned_j"), ("e_com_j", "e_com_planned_j")):  # fmt: skip
        np.testing.assert_allclose(jobs[charged], jobs[planned], rtol=RTOL)
    for _, rnd in jobs.groupby("round"):
        assert rnd["bandwidth_hz"].sum() <= sc.channel.bandwidth_hz * (1 + 1e-9)
        assert np.all(rnd["tx_power_w"].to_numpy() <= fleet.tx_power_w[rnd["device"].to_numpy()] * (1 + 1e-12))
        if allocation == "min_time":  # Shi et al.: every scheduled device finishes together
            finish = (rnd["t_arrive_s"] - rnd["t_down_s"]).to_numpy()
            np.testing.assert_allclose(finish, finish[0], rtol=FINISH_RTOL)
        else:
            assert np.all(rnd["t_arrive_s"] - rnd["t_down_s"] <= 0.5 * (1 + 1e-9))


@pytest.mark.slow
def test_min_energy_spends_no_more_than_equal_under_the_same_deadline():
    """Same seed, same selections, deadline 0.5 s: Yang et al.'s allocation spends at most what the equal split
    does with FedAvg at its lowest frequency meeting the deadline (a feasible point of the same problem)."""
    extra = ["round.policy=deadline", "round.deadline_s=0.5", "round.late=cancel", "method.fedavg.cpu_policy=min_energy"]
    _, _, eq = _scenario_rows("equal", extra)
    _, _, me = _scenario_rows("min_energy", extra)
    assert eq["arrived"].all() and me["arrived"].all()
    e_eq = (eq["e_cmp_j"] + eq["e_com_j"]).groupby(eq["round"]).sum()
    e_me = (me["e_cmp_j"] + me["e_com_j"]).groupby(me["round"]).sum()
    assert (e_me <= e_eq * (1 + 1e-9)).all(), (e_me, e_eq)


@pytest.mark.slow  # 2-3 s: the quick tier keeps this file's other checks
def test_equal_records_the_band_share_and_the_devices_own_power():
    sc = load_scenario("quickstart", [*PAPER, "learning=torch"])
    fleet = build_run(sc).fleet
    rows = run_scenario(sc).device_rounds
    jobs = rows[rows["feasible"]]
    np.testing.assert_array_equal(jobs["bandwidth_hz"], 1e6 / 3)
    np.testing.assert_array_equal(jobs["tx_power_w"], fleet.tx_power_w[jobs["device"].to_numpy()])


REALISTIC = ["physics=realistic", "channel.bandwidth_mode=split", "fleet.n_devices=3", "method.clients_per_round=3",
             "rounds=2", "checkpoint_every=0", "model.hidden=[16]", "train.local_epochs=1",
             "channel.rayleigh=false", "channel.shadowing_db=0"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("allocation", ["min_time", "min_energy"])
def test_realistic_physics_charges_the_truncated_link_and_the_power_parts_as_planned(allocation):
    """A real 3-device run under ``physics = "realistic"`` (truncated Shannon link, interference and noise figure,
    downloads, static power, circuit power and PA efficiency; fading and shadowing off so that the gain is the path
    loss's): each job's charged time and energy equal the formulas written out here (TR 36.942 A.2 uplink: alpha =
    0.4, SINR_min = -10 dB, Thr_max = 2 bit/s/Hz; e_cmp = eps f^2 c + P_static c / f; e_com = (P_c + p / eta) t)
    and the plan; under min_time every device of a round arrives together (Shi et al.'s common finish), under
    min_energy every job ends by the deadline."""
    sets = [*REALISTIC, f"channel.allocation={allocation}", "round.policy=deadline", "round.deadline_s=5",
            "round.late=cancel"]  # fmt: skip
    sc = load_scenario("quickstart", sets)
    fleet = build_run(sc).fleet
    rows = run_scenario(sc).device_rounds
    jobs = rows[rows["feasible"]]
    assert len(jobs) == 6 and sc.channel.link_model == "truncated_shannon" and fleet.has_power_parts
    dev = jobs["device"].to_numpy()
    g = 10 ** (-(128.1 + 37.6 * np.log10(jobs["distance_m"].to_numpy() / 1000.0)) / 10)  # dB -> linear
    n0 = sc.channel.noise_psd_w_per_hz * 10 ** (sc.channel.interference_db / 10)
    b, p, f = jobs["bandwidth_hz"].to_numpy(), jobs["tx_power_w"].to_numpy(), jobs["cpu_hz"].to_numpy()
    sinr = g * p / (n0 * b)
    rate = b * np.where(sinr < 0.1, 0.0, np.minimum(0.4 * np.log2(1.0 + sinr), 2.0))
    cycles = jobs["flops"].to_numpy() / fleet.flops_per_cycle[dev]
    t_com = jobs["bits"].to_numpy() / rate
    np.testing.assert_allclose(jobs["t_com_s"], t_com, rtol=RTOL)
    up_power = fleet.tx_circuit_power_w[dev] + p / fleet.pa_efficiency[dev]
    np.testing.assert_allclose(jobs["e_com_j"], up_power * t_com, rtol=RTOL)
    np.testing.assert_allclose(jobs["t_cmp_s"], cycles / f, rtol=RTOL)
    e_cmp = fleet.energy_coeff[dev] * f**2 * cycles + fleet.static_power_w[dev] * cycles / f
    np.testing.assert_allclose(jobs["e_cmp_j"], e_cmp, rtol=RTOL)
    for charged, planned in (("t_cmp_s", "t_cmp_planned_s"), ("t_com_s", "t_com_planned_s"),
                             ("e_cmp_j", "e_cmp_planned_j"), ("e_com_j", "e_com_planned_j")):  # fmt: skip
        np.testing.assert_allclose(jobs[charged], jobs[planned], rtol=RTOL)
    for _, rnd in jobs.groupby("round"):
        assert rnd["bandwidth_hz"].sum() <= sc.channel.bandwidth_hz * (1 + 1e-9)
        finish = rnd["t_arrive_s"].to_numpy()
        if allocation == "min_time":
            np.testing.assert_allclose(finish, finish[0], rtol=FINISH_RTOL)
        else:
            assert np.all(finish - rnd["t_start_s"].to_numpy() <= 5.0 * (1 + 1e-9))


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        (["channel.allocation=fast"], "channel.allocation='fast': Input should be 'equal', 'min_time' or 'min_energy'"),
        (["channel.allocation_weight=0"], r"allocation_weight=0: outside \(0, 1\]"),
        (["channel.allocation_weight=1.5"], r"allocation_weight=1.5: outside \(0, 1\]"),
        (["channel.allocation=min_time", "channel.bandwidth_mode=fixed"], "set channel.bandwidth_mode = 'split'"),
        (["channel.allocation=min_time", "channel.access=tdma"], "use channel.access = 'fdma'"),
        (["channel.allocation=min_time", "round.policy=deadline", "round.deadline_s=1"], "set round.late = 'cancel'"),
        (["channel.allocation=min_time", "fleet.step_costs.kind=normal"], "per-step costs do not depend"),
    ],
)
def test_bad_allocation_settings_are_refused_in_one_line(sets, fragment):
    with pytest.raises(ScenarioError, match=fragment) as info:
        load_scenario("quickstart", [*PAPER, *sets])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "sets", [["channel.link_model=truncated_shannon"], ["physics=realistic", "channel.link_model=shannon"]]
)
def test_min_energy_without_a_deadline_loads_under_the_realistic_cost_model(sets):
    """The weighted form (optimizers.alloc_weighted.min_weighted_realistic_allocation) plans under the truncated link
    and with static or circuit power, so a round without a deadline is no longer refused."""
    sc = load_scenario("quickstart", [*PAPER, "channel.allocation=min_energy", *sets])
    assert sc.channel.allocation == "min_energy" and sc.round.policy != "deadline"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_method_takes_the_allocation_or_is_refused_at_load(method):
    """fedavg takes bandwidth, power and frequency; anycostfl, heterofl and the compression baselines bandwidth and
    power; the rest (training probabilities, asynchronous dispatch) are refused in one line naming the method."""
    cls = METHODS[method]
    sets = [*PAPER, f"method.name={method}", "channel.allocation=min_time", "round.policy=deadline",
            "round.deadline_s=1", "round.late=cancel", "fleet.budget.kind=fixed", "fleet.budget.value_j=1"]  # fmt: skip
    expected = {"fedavg": "all", "anycostfl": "radio", "heterofl": "radio", "qsgd": "radio", "stc": "radio",
                "uveqfed": "radio", "fedhq": "radio"}  # fmt: skip
    assert cls.takes_allocation == expected.get(method, "none")
    if cls.needs.asynchronous:
        with pytest.raises(ScenarioError, match=rf"channel.allocation='min_time' with method.name='{method}': an asy"):
            load_scenario("quickstart", [*sets[:-5], "checkpoint_every=0"])
    elif cls.takes_allocation == "none":
        with pytest.raises(ScenarioError, match=rf"method.name='{method}': {method} plans its devices without") as info:
            load_scenario("quickstart", sets)
        assert "\n" not in str(info.value)
    else:
        assert load_scenario("quickstart", sets).channel.allocation == "min_time"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["anycostfl", "qsgd", "heterofl"])
def test_methods_that_take_bandwidth_and_power_are_charged_their_plan(method):
    sets = [*PAPER, f"method.name={method}", "channel.allocation=min_time", "round.policy=deadline",
            "round.deadline_s=1", "round.late=cancel", "fleet.budget.kind=fixed", "fleet.budget.value_j=1",
            "method.heterofl.levels=['a','b']", "method.heterofl.assignment=capability"]  # fmt: skip
    rows = run_scenario(load_scenario("quickstart", sets)).device_rounds
    jobs = rows[rows["feasible"]]
    assert len(jobs) > 0
    for charged, planned in (("t_cmp_s", "t_cmp_planned_s"), ("e_cmp_j", "e_cmp_planned_j")):
        np.testing.assert_allclose(jobs[charged], jobs[planned], rtol=RTOL)
    for charged, planned in (("t_com_s", "t_com_planned_s"), ("e_com_j", "e_com_planned_j")):
        assert (jobs[charged] <= jobs[planned] * (1 + 1e-12)).all()  # a real payload may come out smaller
    np.testing.assert_allclose(jobs["e_com_j"], jobs["tx_power_w"] * jobs["t_com_s"], rtol=RTOL)
    assert math.isclose(float(jobs.groupby("round")["bandwidth_hz"].sum().max()), 1e6, rel_tol=1e-9)
