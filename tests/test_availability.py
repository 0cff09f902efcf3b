"""Availability (``[fleet.availability]``): devices going offline mid-job, the server waiting for a device,
trace files, and the Markov process's online fraction.

Hand timeline (trace, binary-exact times): device 0 online [0, 10); device 1 online [0, 3.5) and [5, 20).
    round 1 at 0, wait_all: device 0 computes 1 s, uploads 1 s -> arrives 2; device 1 computes 1 s then uploads
        3 s (due 4) but goes offline at 3.5, 2.5 s into its upload: lost, upload energy 1.5 J x 2.5/3 = 1.25 J;
        the round ends at the loss, 3.5
    round 2 at 3.5: only device 0 is online and idle; it computes 1 s, uploads 1 s -> ends 5.5
    round 3 at 5.5: both online; device 0 computes 10 s but goes offline at 10 (lost mid-compute); device 1
        arrives at 7.5; the round ends at 10
    round 4 at 10: only device 1; it computes 15 s and is lost at 20; afterwards no device ever comes online
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.fleet.availability import DAY_S, TraceAvailability, read_trace
from edgefl.fleet.costs import prorated_energy_j
from edgefl.errors import ScenarioError, SimulationError
from edgefl.run.runner import Simulation, build_run, run_scenario
from edgefl.run.load import load_scenario
from edgefl.engine.clock import OFFLINE, UPLOADING, Clock


def _play(clock, devices, t_cmp, t_com, **kw):
    return clock.play(devices=np.array(devices), durations=lambda: (np.array(t_cmp), np.array(t_com)), **kw)


def test_device_dropping_offline_mid_upload_loses_its_job():
    clock = Clock(2, availability=TraceAvailability(2, [[(0.0, 10.0)], [(0.0, 3.5), (5.0, 20.0)]]))
    assert clock.begin_round() == 0.0
    r1 = _play(clock, [0, 1], [1.0, 1.0], [1.0, 3.0])
    assert r1.end_s == 3.5
    assert list(r1.status) == ["kept", "offline"] and r1.kept_mask.tolist() == [True, False]
    assert r1.t_arrive_s[0] == 2.0 and math.isnan(r1.t_arrive_s[1])
    assert r1.t_end_s.tolist() == [2.0, 3.5]
    assert r1.cmp_done_s.tolist() == [1.0, 1.0] and r1.com_done_s.tolist() == [1.0, 2.5]
    assert prorated_energy_j(np.array([1.5]), r1.t_com_s[1:], r1.com_done_s[1:]).tolist() == [1.25]

    assert clock.begin_round() == 3.5
    assert clock.available().tolist() == [True, False] and clock.state()[1] == OFFLINE
    assert _play(clock, [0], [1.0], [1.0]).end_s == 5.5

    assert clock.begin_round() == 5.5
    assert clock.available().tolist() == [True, True]
    r3 = _play(clock, [0, 1], [10.0, 1.0], [1.0, 1.0])
    assert list(r3.status) == ["offline", "kept"] and r3.end_s == 10.0
    assert r3.cmp_done_s.tolist() == [4.5, 1.0] and r3.com_done_s.tolist() == [0.0, 1.0]

    assert clock.begin_round() == 10.0
    assert clock.available().tolist() == [False, True]
    r4 = _play(clock, [1], [15.0], [1.0])
    assert r4.end_s == 20.0 and list(r4.status) == ["offline"]
    with pytest.raises(SimulationError, match="none ever will be"):
        clock.begin_round()
    np.testing.assert_array_equal(clock.online_time_s(), [10.0, 18.5])


def test_server_waits_for_the_next_device_to_come_online():
    clock = Clock(2, availability=TraceAvailability(2, [[(2.0, 4.0)], [(3.0, 6.0)]]))
    assert clock.begin_round() == 2.0
    assert clock.available().tolist() == [True, False]
    out = _play(clock, [0], [0.25], [0.25], policy="deadline", deadline_s=1.0)
    assert out.end_s == 2.5
    assert clock.begin_round() == 2.5 and clock.available().tolist() == [True, False]
    _play(clock, [0], [0.5], [1.0], policy="deadline", deadline_s=0.75)  # late: still uploading at 3.25
    assert clock.begin_round() == 3.25
    assert clock.available().tolist() == [False, True] and clock.state()[0] == UPLOADING


def _write(tmp_path, text):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_read_trace_and_its_one_line_errors(tmp_path):
    good = _write(tmp_path, "device,online_s,offline_s\n1,5,7\n0,0,2\n1,0,3\n\n")
    assert read_trace(good, 3) == [[(0.0, 2.0)], [(0.0, 3.0), (5.0, 7.0)], []]
    cases = [
        ("device,online_s,offline_s\n0,1,2\n0,x,3\n", r"trace.csv:3: .*times numbers"),
        ("device,online_s,offline_s\n0,1,2\n5,1,2\n", r"trace.csv:3: device=5: must be in \[0, 2\]"),
        ("device,online_s,offline_s\n0,4,2\n", r"trace.csv:2: offline_s=2.0 <= online_s=4.0"),
        ("device,online_s,offline_s\n0,-1,2\n", r"trace.csv:2: .*online_s >= 0"),
        ("device,online_s,offline_s\n0,1\n", r"trace.csv:2: expected 3 fields"),
        ("dev,on,off\n0,1,2\n", r"trace.csv:1: the header"),
        ("device,online_s,offline_s\n0,1,5\n0,4,6\n", r"device 0: intervals .* overlap"),
    ]
    for text, match in cases:
        with pytest.raises(ScenarioError, match=match) as err:
            read_trace(_write(tmp_path, text), 3)
        assert "\n" not in str(err.value)


@pytest.mark.slow
def test_trace_run_and_config_errors(tmp_path):
    path = _write(tmp_path, "device,online_s,offline_s\n" + "".join(f"{d},0,1e9\n" for d in range(3)))
    sc = load_scenario("quickstart", ["learning=surrogate", "rounds=3", "fleet.n_devices=6", "method.clients_per_round=4",
                                      "fleet.availability.kind=trace", f"fleet.availability.trace_path='{path}'"])  # fmt: skip
    res = run_scenario(sc)
    assert (res.rounds["selected"] == 3).all() and (res.rounds["wanted"] == 4).all()
    assert set(res.device_rounds["device"]) == {0, 1, 2}  # devices 3-5 are never online
    with pytest.raises(ScenarioError, match="trace_path"):
        load_scenario("quickstart", ["fleet.availability.kind=trace"])
    with pytest.raises(ScenarioError, match=r"fleet.availability.online_mean_s=-1: outside \(0, 3.15576e\+07\] s"):
        load_scenario("quickstart", ["fleet.availability.kind=markov", "fleet.availability.online_mean_s=-1"])
    with pytest.raises(ScenarioError, match=r"fleet.availability.window_length_h\S*=30: Input should be less than or equal to 24"):
        load_scenario("quickstart", ["fleet.availability.kind=diurnal", "fleet.availability.window_length_h=30"])


def test_diurnal_window_crosses_midnight():
    from edgefl.fleet.availability import DiurnalAvailability
    from edgefl.seeding import Streams

    avail = DiurnalAvailability(1, Streams(0), 22.0, 4.0)  # 22:00 to 02:00
    hours = np.array([0.0, 1.99, 2.0, 12.0, 21.99, 22.0, 23.5, 24.0 + 1.0, 48.0 + 3.0]) * 3600.0
    assert [bool(avail.online_at(np.array([0]), t)[0]) for t in hours] == [
        True, True, False, False, False, True, True, True, False]  # fmt: skip
    assert avail.next_offline_s(0, 23.0 * 3600.0) == DAY_S + 2.0 * 3600.0


# long Markov run: online mean 3 s, offline mean 2 s -> p = 0.6; the online fraction of an alternating
# renewal process with exponential periods over a time T has variance ~ 2 p (1 - p) tau / T, tau = on off / (on + off)
ON_S, OFF_S = 3.0, 2.0


@pytest.mark.slow
def test_markov_online_fraction_and_selection_never_exceeds_available():
    sc = load_scenario("quickstart", [
        "physics=paper", "learning=surrogate", "rounds=1500", "fleet.n_devices=20", "method.clients_per_round=8",
        "fleet.availability.kind=markov", f"fleet.availability.online_mean_s={ON_S}",
        f"fleet.availability.offline_mean_s={OFF_S}", "surrogate.train_flops_per_sample=2e6",
        "round.policy=deadline", "round.deadline_s=0.3",
    ])  # fmt: skip
    sim = Simulation(sc)
    for r in range(1, sc.rounds + 1):
        sim.step(r)
    clock = sim.run.clock
    t = clock.env.now
    p = ON_S / (ON_S + OFF_S)
    tau = ON_S * OFF_S / (ON_S + OFF_S)
    se = math.sqrt(2 * p * (1 - p) * tau / t)
    assert t > 400 * tau, "the run must be long against the correlation time"
    frac = clock.online_time_s() / t
    assert np.all(np.abs(frac - p) < 3 * se), (frac, p, se)
    rounds = sim.result().rounds
    assert (rounds["selected"] <= rounds["available"]).all()
    assert (rounds["selected"] == np.minimum(rounds["wanted"], rounds["available"])).all()
    assert (rounds["available"] < 20).any()  # availability and busy stragglers really bite
    dr = sim.result().device_rounds
    assert (dr["reason"] == "offline").any()
    avail = clock.availability
    online = [avail.online_at(np.array([d]), t0)[0] for d, t0 in zip(dr["device"], dr["t_down_s"])]
    assert all(online)  # every job was dispatched to an online device


@pytest.mark.slow
def test_the_report_draws_each_gantt_devices_offline_periods(tmp_path):
    """A trace run written with its report: device 0 online [0, 2) and [5, 1e9), device 1 [1, 1e9), device 2 never.
    Offline by hand up to the run's end T: device 0 [2, 5); device 1 [0, 1); device 2 [0, T); and the
    Gantt's offline bars are those of the devices with jobs (0 and 1), drawn from the result's schedule."""
    from edgefl.output.report import build_figures, gantt_devices
    from edgefl.output.results import offline_periods, write_run

    path = _write(tmp_path, "device,online_s,offline_s\n0,0,2\n0,5,1e9\n1,1,1e9\n")
    sc = load_scenario("quickstart", ["learning=surrogate", "rounds=4", "fleet.n_devices=3", "method.clients_per_round=2",
                                      "fleet.availability.kind=trace", f"fleet.availability.trace_path='{path}'"])  # fmt: skip
    res = run_scenario(sc)
    end = float(res.rounds["sim_time_s"].max())
    assert end > 5.0
    assert offline_periods(res.availability, [0, 1, 2], end) == {0: [(2.0, 5.0)], 1: [(0.0, 1.0)], 2: [(0.0, end)]}
    assert gantt_devices(res.device_rounds) == [0, 1]
    always = build_run(load_scenario("quickstart", ["learning=surrogate"])).clock.availability
    assert offline_periods(always, [0, 1], end) == {}
    fig = build_figures(res.rounds, res.device_rounds, offline=offline_periods(res.availability, [0, 1], end))["device_states"]
    bars = {t.name: t for t in fig.data}
    assert list(bars["offline"].y) == ["device 0", "device 1"]
    assert list(bars["offline"].base) == [2.0, 0.0] and list(bars["offline"].x) == [3.0, 1.0]
    page = (write_run(res, tmp_path / "run") / "report.html").read_text(encoding="utf-8")
    assert "device 0: offline 2 s to 5 s" in page


@pytest.mark.parametrize("cancel_lost", [False, True])
def test_a_job_lost_after_the_cut_off_runs_on_unless_cancel_lost(cancel_lost):
    """Hand timeline: device 0 online [0, 10), device 1 online [0, 30). Round at 0 with a 5 s deadline and
    late = "cancel": device 0 computes 9.5 s and uploads 1 s (due 10.5, so it is lost when it goes offline at 10,
after the cut-off), device 1 computes 20 s.
    Without ``cancel_lost`` device 0's job is lost at 10 and holds the device (and its sub-band) past the round end
    at 5, while device 1's is cancelled at 5; with it (an allocation's rounds) both are cancelled at 5."""
    clock = Clock(2, availability=TraceAvailability(2, [[(0.0, 10.0)], [(0.0, 30.0)]]))
    assert clock.begin_round() == 0.0
    r = _play(clock, [0, 1], [9.5, 20.0], [1.0, 1.0], policy="deadline", deadline_s=5.0, late="cancel",
              cancel_lost=cancel_lost)  # fmt: skip
    assert r.end_s == 5.0
    if cancel_lost:
        assert list(r.status) == ["cancelled", "cancelled"] and r.t_end_s.tolist() == [5.0, 5.0]
        assert clock.n_busy() == 0
        assert r.cmp_done_s.tolist() == [5.0, 5.0]
    else:
        assert list(r.status) == ["offline", "cancelled"] and r.t_end_s.tolist() == [10.0, 5.0]
        assert clock.n_busy() == 1
