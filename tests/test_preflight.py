"""The pre-flight check before round 1, against hand-computed best cases of the quickstart under the papers'
physics (``PAPER_QUICKSTART``: the formulas the hand computations use).

Quickstart by hand: an MLP 64-64-10 on digits trains 20224 FLOPs per sample (forward 2 x (64*64 + 64*10) = 9472,
backward: both layers' weight gradients, 9472, and the second layer's input gradient, 2 x 64*10 = 1280) at the
device's FLOPs per cycle (its catalogue phone's), over 2 epochs of its samples; it uploads 32 x 4810 parameters
= 153,920 bits. Its devices are re-drawn every round, so the best place is the 10 m floor: 3GPP macro path loss
128.1 + 37.6 log10(0.01) = 52.9 dB, 0.1 W, -114 dBm/MHz of noise on 1 MHz, Shannon rate B log2(1 + g P / (N0 B)).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from edgefl.run.preflight import PreflightError
from edgefl.output.results import run_warnings
from edgefl.run.runner import Simulation, prepare
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART

FLOPS_PER_SAMPLE = 2 * (64 * 64 + 64 * 10) * 2 + 2 * 64 * 10  # 20224
UPDATE_BITS = 32 * (64 * 64 + 64 + 64 * 10 + 10)  # 153920
GAIN = 10 ** (-(128.1 + 37.6 * math.log10(10 / 1000)) / 10)  # at the 10 m floor
RATE_BPS = 1e6 * math.log2(1 + GAIN * 0.1 / (10 ** ((-114 - 30) / 10) / 1e6 * 1e6))
T_COM_S = UPDATE_BITS / RATE_BPS


def _quickstart(*overrides: str) -> Simulation:
    sc = load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides])
    assert sc.channel.mobility == "redraw" and sc.train.local_epochs == 2  # the hand model's premises
    return Simulation(sc)


def _best_times_s(sim: Simulation) -> np.ndarray:
    """Each device's best job time [s]: 2 epochs of its samples at f_max, plus the upload at the best rate."""
    cycles = 2 * sim.workload.n_samples * FLOPS_PER_SAMPLE / sim.fleet.flops_per_cycle
    return cycles / sim.fleet.f_max_hz + T_COM_S


def test_hand_model_matches_the_workload():
    sim = _quickstart()
    assert sim.workload.flops_per_sample(1.0) == FLOPS_PER_SAMPLE
    assert sim.workload.update_bits == UPDATE_BITS


@pytest.mark.parametrize("method", ["fedavg", "anycostfl"])
def test_deadline_no_device_meets_stops_with_the_fastest_time(method):
    extra = ["method.name='anycostfl'", "fleet.budget.kind='fixed'"] if method == "anycostfl" else []
    overrides = ["round.policy='deadline'", "round.deadline_s=1e-6", *extra]
    t = _best_times_s(_quickstart(*overrides))
    fastest = int(np.argmin(t))
    assert t[fastest] > 1e-6
    with pytest.raises(PreflightError) as info:
        prepare(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides]))
    msg = str(info.value)
    assert msg.startswith("no device can ever finish a job under round.deadline_s=1e-06 s") and "\n" not in msg
    if method == "fedavg":  # FedAvg plans f_max: its plan is the best time
        assert f"the fastest (device {fastest}, " in msg
        assert f"needs {t[fastest]:.4g} s > round.deadline_s=1e-06 s" in msg
    else:  # AnycostFL plans no device at all: the full model at f_max is the figure given
        assert "anycostfl plans no device (latency" in msg
        assert f"the fastest (device {fastest}) needs {t[fastest]:.4g} s at f_max" in msg


def test_deadline_some_devices_meet_warns_and_counts_them():
    # the phones' best times differ only by their compute, and tie within a profile: a deadline just past the
    # fastest tie, with a round that wants 10
    best = _best_times_s(_quickstart())
    times = np.unique(best)
    deadline = float(f"{(times[0] + times[1]) / 2:.6g}")
    overrides = ["round.policy='deadline'", f"round.deadline_s={deadline}", "method.clients_per_round=10"]
    able = int(np.sum(_best_times_s(_quickstart(*overrides)) <= deadline))
    assert 0 < able < 10  # fewer than the 10 a round wants: the case under test
    sim = prepare(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides]))
    assert sim.warnings == [
        f"only {able} of 20 devices can finish a job under round.deadline_s={deadline:g} s, even at their best; "
        "a round wants 10, so rounds keep fewer updates"
    ]


def test_energy_budget_below_the_cheapest_stops_with_the_cheapest_energy():
    budget = 1e-4
    overrides = ["fleet.budget.kind='fixed'", f"fleet.budget.value_j={budget}"]
    sim = _quickstart(*overrides)
    cycles = 2 * sim.workload.n_samples * FLOPS_PER_SAMPLE / sim.fleet.flops_per_cycle
    # FedAvg skips every device over budget, so the figure is the full job at its f_min: eps f^2 c + P t_com
    e = sim.fleet.energy_coeff * sim.fleet.f_min_hz**2 * cycles + 0.1 * T_COM_S
    cheapest = int(np.argmin(e))
    assert e[cheapest] > budget
    with pytest.raises(PreflightError, match="no device can ever finish a job under fleet.budget \\(fixed\\)") as info:
        prepare(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides]))
    assert f"the cheapest (device {cheapest}) needs {e[cheapest]:.4g} J at f_min (budget 0.0001 J)" in str(info.value)


def test_trace_with_online_periods_shorter_than_any_job_stops(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("device,online_s,offline_s\n" + "".join(f"{d},0,0.001\n" for d in range(20)))
    overrides = ["fleet.availability.kind='trace'", f"fleet.availability.trace_path='{trace}'"]
    t = _best_times_s(_quickstart(*overrides))
    fastest = int(np.argmin(t))
    with pytest.raises(PreflightError, match=r"under fleet.availability \(trace\)") as info:
        prepare(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides]))
    assert f"device {fastest} needs {t[fastest]:.4g} s online, its longest online period is 0.001 s" in str(info.value)


def test_no_deadline_budget_or_window_checks_nothing():
    assert prepare(load_scenario("quickstart", PAPER_QUICKSTART)).warnings == []


def test_planning_in_the_check_leaves_the_method_memory_as_it_was():
    overrides = ["method.name='ccfedavg'", "round.policy='deadline'", "round.deadline_s=1.0"]
    fresh = Simulation(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides])).method.state_dict()
    checked = prepare(load_scenario("quickstart", [*PAPER_QUICKSTART, *overrides])).method.state_dict()
    assert checked["planner"]["participations"].tolist() == fresh["planner"]["participations"].tolist() == [0] * 20


def test_no_arrival_in_any_round_is_a_warning():
    rounds = pd.DataFrame({"round": [1, 2], "arrived": [0, 0]})
    assert run_warnings(rounds) == [
        "no update arrived in any of the 2 rounds: the model never changed (every job missed the deadline, "
        "exceeded its budget or was lost offline)"
    ]
    assert run_warnings(pd.DataFrame({"round": [1, 2], "arrived": [0, 1]})) == []
