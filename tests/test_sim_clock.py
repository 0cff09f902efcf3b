"""The run-long clock: stragglers carried into later rounds, cancelled jobs and their partial energy, exact
event timelines computed by hand (binary-exact times, so equalities are exact).

Hand set-up of the carried straggler (no downlink, deadline 4 s):
    round 1 at t = 0, devices 0, 1, 2:  t_cmp = 1, 1, 5 s;  t_com = 1, 2, 1 s
        -> arrivals 2, 3, 6 s; the round ends at the deadline, 4 s; device 2 is late: computing until 5 s,
           uploading until 6 s, busy (not selectable) until then
    round 2 at t = 4, devices 0, 1 (wait_all):  t_cmp = 0.25, 0.25;  t_com = 0.25, 0.25  -> ends at 4.5 s
    round 3 at t = 4.5, device 0:  t_cmp = 1, t_com = 0.25  -> ends at 5.75 s (device 2 still uploading)
    round 4 at t = 5.75: device 2 is still busy until 6 s; round 5 at t = 6.5: everyone is free again
"""

from __future__ import annotations

import numpy as np
import pytest

from edgefl.fleet.costs import prorated_energy_j
from edgefl.engine.sync_driver import select_devices
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario
from edgefl.engine.clock import COMPUTING, IDLE, UPLOADING, Clock
from fleets import PAPER_QUICKSTART, SLOW_FLEET


def _play(clock, devices, t_cmp, t_com, **kw):
    return clock.play(devices=np.array(devices), durations=lambda: (np.array(t_cmp), np.array(t_com)), **kw)


def test_straggler_carried_into_next_rounds_and_not_selectable_until_it_ends():
    clock = Clock(3)
    assert clock.begin_round() == 0.0
    r1 = _play(clock, [0, 1, 2], [1.0, 1.0, 5.0], [1.0, 2.0, 1.0], policy="deadline", deadline_s=4.0)
    assert r1.end_s == 4.0
    assert r1.t_arrive_s.tolist() == [2.0, 3.0, 6.0]  # the late device finishes (late = "finish")
    assert r1.t_end_s.tolist() == [2.0, 3.0, 6.0]
    assert r1.kept_mask.tolist() == [True, True, False] and list(r1.status) == ["kept", "kept", "late"]
    assert r1.cmp_done_s.tolist() == [1.0, 1.0, 5.0] and r1.com_done_s.tolist() == [1.0, 2.0, 1.0]

    assert clock.begin_round() == 4.0
    assert clock.available().tolist() == [True, True, False]
    assert clock.state()[2] == COMPUTING and clock.n_busy() == 1
    with pytest.raises(Exception, match="online and idle"):
        _play(clock, [2], [1.0], [1.0])
    r2 = _play(clock, [0, 1], [0.25, 0.25], [0.25, 0.25])
    assert r2.end_s == 4.5 and r2.t_down_s.tolist() == [4.0, 4.0] and r2.t_arrive_s.tolist() == [4.5, 4.5]

    assert clock.begin_round() == 4.5
    assert clock.available().tolist() == [True, True, False] and clock.state()[2] == COMPUTING
    r3 = _play(clock, [0], [1.0], [0.25])
    assert r3.end_s == 5.75

    assert clock.begin_round() == 5.75
    assert clock.state()[2] == UPLOADING and not clock.available()[2]
    r4 = _play(clock, [1], [0.5], [0.25])
    assert r4.end_s == 6.5
    assert clock.begin_round() == 6.5
    assert clock.available().tolist() == [True, True, True] and clock.state()[2] == IDLE and clock.n_busy() == 0


def test_over_select_late_device_stays_busy_until_its_arrival():
    clock = Clock(3)
    clock.begin_round()
    out = _play(clock, [0, 1, 2], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0], policy="over_select", keep=2)
    assert out.end_s == 3.0 and out.kept_index.tolist() == [0, 1] and out.t_end_s.tolist() == [2.0, 3.0, 4.0]
    clock.begin_round()
    assert clock.available().tolist() == [True, True, False]


def test_cancel_stops_late_jobs_at_the_cut_off_with_partial_energy():
    # deadline 4 s at t0 = 0: device 0 arrives at 2 s; device 1 computes 5 s (cancelled 4 s into its compute);
    # device 2 computes 3 s then uploads 2 s (cancelled 1 s into its upload)
    clock = Clock(3)
    clock.begin_round()
    out = _play(clock, [0, 1, 2], [1.0, 5.0, 3.0], [1.0, 1.0, 2.0], policy="deadline", deadline_s=4.0, late="cancel")
    assert out.end_s == 4.0
    assert list(out.status) == ["kept", "cancelled", "cancelled"]
    assert out.t_end_s.tolist() == [2.0, 4.0, 4.0]
    assert out.t_arrive_s[0] == 2.0 and np.isnan(out.t_arrive_s[1:]).all()
    assert out.cmp_done_s.tolist() == [1.0, 4.0, 3.0]
    assert out.com_done_s.tolist() == [1.0, 0.0, 1.0]
    # energy pro rata of the time done: compute 2 J and 10 J planned, upload 0.5 J and 0.8 J planned
    e_cmp = prorated_energy_j(np.array([2.0, 10.0, 6.0]), out.t_cmp_s, out.cmp_done_s)
    e_com = prorated_energy_j(np.array([0.5, 0.5, 0.8]), out.t_com_s, out.com_done_s)
    assert e_cmp.tolist() == [2.0, 8.0, 6.0]  # 10 J x 4/5
    assert e_com.tolist() == [0.5, 0.0, 0.4]  # 0.8 J x 1/2
    assert clock.begin_round() == 4.0
    assert clock.available().all() and clock.n_busy() == 0  # cancelled devices are free at the cut-off


def test_cancel_keeps_a_job_that_arrives_within_the_rounding_slack():
    clock = Clock(2)
    clock.begin_round()
    out = _play(clock, [0, 1], [1.0, 1.0], [1.0, 1.0 + 1e-12], policy="deadline", deadline_s=2.0, late="cancel")
    assert out.kept_mask.tolist() == [True, True] and list(out.status) == ["kept", "kept"]


def test_select_devices_draws_among_available_only():
    rng = np.random.default_rng(0)
    avail = np.array([True, False, True, False, True])
    for _ in range(50):
        sel = select_devices(rng, 5, 2, avail)
        assert sel.size == 2 and avail[sel].all()
    assert select_devices(rng, 5, 4, avail).tolist() == [0, 2, 4]  # fewer than K: all of them
    a, b = np.random.default_rng(7), np.random.default_rng(7)  # everyone available: the K-of-N draw of before
    assert select_devices(a, 5, 3, np.ones(5, dtype=bool)).tolist() == np.sort(b.choice(5, 3, replace=False)).tolist()


def _round_start(res):
    rounds = res.rounds
    return res.device_rounds["round"].map(dict(zip(rounds["round"], rounds["sim_time_s"] - rounds["round_time_s"])))


@pytest.mark.slow
def test_run_never_selects_a_busy_device():
    # surrogate jobs of the McMahan CNN take 146 s at best on the slow fleet: a 200 s deadline leaves
    # stragglers running past it
    sc = load_scenario("quickstart", [*SLOW_FLEET, "rounds=6", "learning=surrogate", "round.policy=deadline",
                                      "round.deadline_s=200", "channel.bandwidth_mode=split",
                                      "channel.bandwidth_hz=5e6"])  # fmt: skip
    res = run_scenario(sc)
    dr = res.device_rounds[res.device_rounds["feasible"]].sort_values(["device", "round"])
    for _, g in dr.groupby("device"):
        down, end = g["t_down_s"].to_numpy(), g["t_end_s"].to_numpy()
        assert (down[1:] >= end[:-1]).all()  # a device starts a job only after its previous one ended
    late = dr[~dr["arrived"]]
    round_end = late["round"].map(dict(zip(res.rounds["round"], res.rounds["sim_time_s"])))
    assert (late["t_end_s"] > round_end).any()  # some straggler is carried into the next round
    assert (res.rounds["wanted"] == sc.method.clients_per_round).all()


@pytest.mark.slow
def test_cancel_run_charges_energy_up_to_the_cut_off():
    # surrogate jobs of the McMahan CNN take 146 s at best on the slow fleet: a 150 s deadline cuts some in every round
    sc = load_scenario("quickstart", [*PAPER_QUICKSTART, *SLOW_FLEET, "rounds=3", "learning=surrogate", "round.policy=deadline",
                                      "round.deadline_s=150", "round.late=cancel"])  # fmt: skip
    res = run_scenario(sc)
    dr = res.device_rounds
    cut = dr[dr["reason"] == "cancelled"]
    assert len(cut) > 0
    start = _round_start(res)[cut.index]
    np.testing.assert_allclose(cut["t_end_s"], start + 150, rtol=1e-12)
    np.testing.assert_allclose(cut["t_cmp_s"] + cut["t_com_s"], 150, rtol=1e-9)  # no downlink: busy to the cut
    np.testing.assert_allclose(cut["e_com_j"], 0.1 * cut["t_com_s"], rtol=1e-12)  # P_tx x upload time done
    per_round = (dr["e_cmp_j"] + dr["e_com_j"]).groupby(dr["round"]).sum()
    np.testing.assert_allclose(res.rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(res.rounds["round_time_s"], 150, rtol=1e-12)
