"""TDMA uploads (``channel.access = "tdma"``) and uploads lost to packet errors (``[channel.packet_errors]``,
Chen et al., TWC 2021, eq. (9)).

Hand-computed TDMA case (no download, binary-exact times, so equalities are exact), 3 devices:
    t_cmp = 3, 1, 2 s; t_com = 2, 4, 1 s
    first come, first served by compute end: device 1 computes until 1 and uploads 1 -> 5; device 2 computes until
    2, waits until 5, uploads 5 -> 6; device 0 computes until 3, waits until 6, uploads 6 -> 8
        -> arrivals 8, 5, 6 s; waits 3, 0, 3 s; the round ends at 8 s (under FDMA: 5, 5, 3, ending at 5 s)
    in the order (0, 1, 2): device 0 uploads 3 -> 5; device 1 waits 1 -> 5, uploads 5 -> 9; device 2 waits
    2 -> 9, uploads 9 -> 10 -> arrivals 5, 9, 10 s; waits 0, 4, 7 s

Packet errors: q = 1 - exp(-m / SINR), with the SINR read back from each recorded Shannon rate (physics =
"paper"): SINR = 2^(r / B) - 1, an independent route to the q the run drew with.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.engine.clock import Clock, tdma_uploads
from edgefl.errors import ScenarioError
from edgefl.fleet.packet_errors import upload_attempts
from edgefl.run.load import load_scenario
from edgefl.run.runner import run_scenario
from edgefl.seeding import Streams
from fleets import PAPER_QUICKSTART

SIGMAS = 5.0  # binomial tolerance of an empirical loss count: |count - mean| <= 5 standard deviations
# (a correct draw fails it with probability below 6e-7)

SURROGATE = ["rounds=3", "checkpoint_every=0", "fleet.n_devices=8", "method.clients_per_round=4",
             "learning=surrogate", "method.name=fedavg", "surrogate.model_parameters=20000"]  # fmt: skip


def _play(clock, t_cmp, t_com, **kw):
    n = len(t_cmp)
    return clock.play(devices=np.arange(n), durations=lambda: (np.array(t_cmp), np.array(t_com)), **kw)


def test_tdma_hand_computed_three_devices_first_come_first_served():
    fdma = _play(Clock(3), [3.0, 1.0, 2.0], [2.0, 4.0, 1.0])
    assert fdma.t_arrive_s.tolist() == [5.0, 5.0, 3.0] and fdma.end_s == 5.0 and fdma.t_wait_s is None
    out = _play(Clock(3), [3.0, 1.0, 2.0], [2.0, 4.0, 1.0], tdma=True)
    assert out.t_arrive_s.tolist() == [8.0, 5.0, 6.0]
    assert out.t_wait_s.tolist() == [3.0, 0.0, 3.0] and out.wait_done_s.tolist() == [3.0, 0.0, 3.0]
    assert out.end_s == 8.0 and out.arrival_order.tolist() == [1, 2, 0]
    assert out.com_done_s.tolist() == [2.0, 4.0, 1.0] and out.cmp_done_s.tolist() == [3.0, 1.0, 2.0]


def test_tdma_in_a_given_upload_order():
    out = _play(Clock(3), [3.0, 1.0, 2.0], [2.0, 4.0, 1.0], tdma=True, upload_order=np.array([0, 1, 2]))
    assert out.t_arrive_s.tolist() == [5.0, 9.0, 10.0] and out.t_wait_s.tolist() == [0.0, 4.0, 7.0]
    assert out.end_s == 10.0


def test_tdma_offline_device_frees_the_channel_when_it_goes():
    # device 0 (1 -> 3) is lost offline at 2 s mid-upload; device 1 (computes until 1.5) takes the channel at 2
    wait, due, lost = tdma_uploads(np.array([1.0, 1.5]), np.array([2.0, 1.0]), np.array([2.0, np.inf]),
                                   np.array([0, 1]), free_s=0.0)  # fmt: skip
    assert lost.tolist() == [True, False] and due.tolist() == [3.0, 3.0] and wait.tolist() == [0.0, 0.5]
    # offline at 0.5 s, before its slot (it would compute until 1): the channel never was its
    wait, due, lost = tdma_uploads(np.array([1.0, 1.5]), np.array([2.0, 1.0]), np.array([0.5, np.inf]),
                                   np.array([0, 1]), free_s=0.0)  # fmt: skip
    assert lost.tolist() == [True, False] and due[1] == 2.5 and wait[1] == 0.0


def test_tdma_cut_off_cancels_the_waiting_jobs_with_their_wait_done():
    # t_cmp = 1, 1, 1; t_com = 2, 2, 2: job 0 uploads 1 -> 3, job 1 waits 1 -> 3, job 2 waits 1 -> 5;
    # over_select keeps the first arrival (3 s) and cancels the others there: 2 s waited, nothing uploaded
    out = _play(Clock(3), [1.0, 1.0, 1.0], [2.0, 2.0, 2.0], tdma=True, policy="over_select", keep=1, late="cancel")
    assert out.end_s == 3.0 and list(out.status) == ["kept", "cancelled", "cancelled"]
    assert out.wait_done_s.tolist() == [0.0, 2.0, 2.0] and out.com_done_s.tolist() == [2.0, 0.0, 0.0]


def test_tdma_late_upload_of_an_earlier_round_holds_the_channel():
    clock = Clock(3)
    r1 = _play(clock, [1.0, 1.0], [2.0, 2.0], tdma=True, policy="over_select", keep=1)  # job 1 late until 5 s
    assert r1.end_s == 3.0 and r1.t_arrive_s.tolist() == [3.0, 5.0]
    clock.begin_round()
    r2 = clock.play(devices=np.array([0, 2]), durations=lambda: (np.array([0.5, 0.5]), np.array([1.0, 1.0])),
                    tdma=True)  # fmt: skip
    assert r2.t_arrive_s.tolist() == [6.0, 7.0]  # after device 1's upload, which ends at 5 s


def test_packet_error_arrivals_are_not_kept_and_over_select_keeps_the_next():
    failed = np.array([True, False, False, False])
    out = _play(Clock(4), [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0], policy="over_select", keep=2, failed=failed)
    assert list(out.status) == ["packet error", "kept", "kept", "late"]
    assert out.end_s == 4.0  # the second useful arrival, not the second arrival (3 s)


# ------------------------------------------------------------------------------- the attempts' draws


def test_empirical_loss_frequency_matches_q_within_binomial_tolerance():
    streams, n, q = Streams(7), 20_000, 0.3
    _, lost = upload_attempts(np.full(n, q), np.arange(n), key=1, retransmissions=0, streams=streams)
    assert abs(lost.sum() - n * q) <= SIGMAS * math.sqrt(n * q * (1 - q))
    # with two retransmissions an upload is lost only when all three attempts fail: q^3
    attempts, lost3 = upload_attempts(np.full(n, q), np.arange(n), key=1, retransmissions=2, streams=streams)
    p3 = q**3
    assert abs(lost3.sum() - n * p3) <= SIGMAS * math.sqrt(n * p3 * (1 - p3))
    # the same uniforms: attempt 1 fails exactly where the upload without retransmissions was lost
    assert np.array_equal(attempts > 1, lost) and np.all(attempts[lost3] == 3)
    mean_tries = 1 + q + q * q  # E[attempts] = sum of P(first k attempts failed), k = 0, 1, 2
    var_tries = float(np.var(attempts))
    assert abs(attempts.mean() - mean_tries) <= SIGMAS * math.sqrt(var_tries / n)


def test_q_zero_and_one_are_certain():
    streams, dev = Streams(0), np.arange(100)
    attempts, lost = upload_attempts(np.zeros(100), dev, key=3, retransmissions=4, streams=streams)
    assert not lost.any() and np.all(attempts == 1)
    attempts, lost = upload_attempts(np.ones(100), dev, key=3, retransmissions=4, streams=streams)
    assert lost.all() and np.all(attempts == 5)


# ------------------------------------------------------------------------------- runs


def _run(*sets):
    return run_scenario(load_scenario("quickstart", [*SURROGATE, *sets]))


def test_tdma_run_uploads_never_overlap_and_wait_in_compute_order():
    res = _run("channel.access=tdma")
    d = res.device_rounds
    for _, rnd in d[d["feasible"]].groupby("round"):
        up_end = rnd["t_arrive_s"].to_numpy()
        up_start = up_end - rnd["t_com_s"].to_numpy()
        cmp_end = (rnd["t_start_s"] + rnd["t_cmp_s"]).to_numpy()
        order = np.lexsort((rnd["device"].to_numpy(), cmp_end))
        free = -np.inf
        for j in order:  # first come, first served: each starts when it has computed and the channel is free
            assert up_start[j] == pytest.approx(max(cmp_end[j], free), rel=1e-12, abs=1e-9)
            free = up_end[j]
        np.testing.assert_allclose(rnd["t_wait_s"], up_start - cmp_end, rtol=1e-12, atol=1e-9)
    assert (d["t_wait_s"] > 0).any(), "nobody waited: the case checks nothing"


def test_tdma_rate_is_the_whole_band_whatever_the_fdma_split():
    tdma = _run("channel.access=tdma", "channel.bandwidth_mode=split", *PAPER_QUICKSTART).device_rounds
    fixed = _run("channel.bandwidth_mode=fixed", *PAPER_QUICKSTART).device_rounds
    split = _run("channel.bandwidth_mode=split", *PAPER_QUICKSTART).device_rounds
    np.testing.assert_allclose(tdma["rate_bps"], fixed["rate_bps"], rtol=1e-12)
    assert (tdma["rate_bps"] > split["rate_bps"]).all()
    # planned = charged: the plan's upload time is the whole band's, and so is the charge
    np.testing.assert_allclose(tdma["t_com_s"], tdma["t_com_planned_s"], rtol=1e-12)
    np.testing.assert_allclose(tdma["e_com_j"], tdma["e_com_planned_j"], rtol=1e-12)


def test_tdma_wait_is_charged_idle_at_static_power_under_realistic_physics():
    res = _run("channel.access=tdma")  # the quickstart's realistic physics: charge_idle, static power
    d = res.device_rounds
    static_w = d["e_static_j"] / d["t_cmp_s"]  # e_static = P_static t_cmp
    np.testing.assert_allclose(d["e_idle_j"], static_w * d["t_wait_s"], rtol=1e-9)
    assert (d["e_idle_j"] > 0).any()
    per_round = d.groupby("round")[["e_cmp_j", "e_com_j", "e_down_j", "e_idle_j"]].sum().sum(axis=1)
    np.testing.assert_allclose(res.rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)
    paper = _run("channel.access=tdma", *PAPER_QUICKSTART).device_rounds
    assert (paper["e_idle_j"] == 0).all() and (paper["t_wait_s"] > 0).any()


def test_packet_errors_vanishing_threshold_loses_nothing_and_moves_no_other_draw():
    base = _run(*PAPER_QUICKSTART)
    res = _run(*PAPER_QUICKSTART, "channel.packet_errors.waterfall=1e-9")
    d = res.device_rounds
    assert (d["uploads"] == 1).all() and d["arrived"].all() and (res.rounds["packet_errors"] == 0).all()
    common = [c for c in base.device_rounds.columns if c != "wall_time_s"]
    assert d[common].equals(base.device_rounds[common])


def test_packet_errors_huge_threshold_loses_every_upload_charged_not_aggregated():
    res = _run(*PAPER_QUICKSTART, "channel.packet_errors.waterfall=1e9")
    d = res.device_rounds
    jobs = d[d["feasible"]]
    assert (jobs["reason"] == "packet error").all() and not jobs["arrived"].any()
    np.testing.assert_allclose(jobs["e_com_j"], jobs["e_com_planned_j"], rtol=1e-12)  # charged in full, once
    assert (res.rounds["arrived"] == 0).all() and (res.rounds["packet_errors"] == 4).all()
    assert (res.rounds["energy_j"] > 0).all()


def test_retransmissions_charged_n_plus_one_times_on_the_clock():
    res = _run(*PAPER_QUICKSTART, "channel.packet_errors.waterfall=1e9", "channel.packet_errors.retransmissions=3")
    jobs = res.device_rounds[res.device_rounds["feasible"]]
    assert (jobs["uploads"] == 4).all()
    np.testing.assert_allclose(jobs["t_com_s"], 4 * jobs["t_com_planned_s"], rtol=1e-12)
    np.testing.assert_allclose(jobs["e_com_j"], 4 * jobs["e_com_planned_j"], rtol=1e-12)
    np.testing.assert_allclose(jobs["t_arrive_s"], jobs["t_start_s"] + jobs["t_cmp_s"] + 4 * jobs["t_com_planned_s"],
                               rtol=1e-12)  # fmt: skip


def test_run_loss_count_matches_chen_q_from_the_recorded_sinr():
    sets = [*PAPER_QUICKSTART, "rounds=12", "fleet.n_devices=40", "method.clients_per_round=40",
            "channel.packet_errors.waterfall=30"]  # fmt: skip
    res = run_scenario(load_scenario("quickstart", [*SURROGATE, *sets]))
    d = res.device_rounds[res.device_rounds["feasible"]]
    band_hz = 1e6  # the quickstart's 1 MHz, "fixed": every upload's band
    sinr = np.expm1(d["rate_bps"].to_numpy() / band_hz * math.log(2.0))  # r = B log2(1 + SINR)
    q = -np.expm1(-30.0 / sinr)
    lost = int((d["reason"] == "packet error").sum())
    mean, sd = q.sum(), math.sqrt(float(np.sum(q * (1 - q))))
    assert 0.1 * len(d) < mean < 0.9 * len(d), "the threshold makes every upload certain: the case checks nothing"
    assert abs(lost - mean) <= SIGMAS * sd, (lost, mean, sd)


def test_packet_error_runs_reproduce_from_the_seed():
    sets = [*PAPER_QUICKSTART, "channel.packet_errors.waterfall=30", "channel.packet_errors.retransmissions=1"]
    a, b = _run(*sets).device_rounds, _run(*sets).device_rounds
    assert a.equals(b)
    assert (a["uploads"] > 1).any(), "no retransmission: the case checks nothing"


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        (["channel.access=tdma", "round.policy=deadline", "round.deadline_s=2", "method.name=stc"],
         "channel.access='tdma' with round.policy='deadline' and method.name='stc'"),
        (["channel.access=tdma", "method.name=fedasync", "learning=torch"],
         "channel.access='tdma' with method.name='fedasync'"),
        (["channel.packet_errors.waterfall=0"], "waterfall=0: outside"),
        (["channel.packet_errors.waterfall=1e12"], "waterfall=1e\\+12: outside"),
        (["channel.packet_errors.retransmissions=101"], "retransmissions"),
        (["channel.access=cdma"], "access"),
    ],
)
def test_refusals_are_one_line(sets, fragment):
    with pytest.raises(ScenarioError, match=fragment) as info:
        load_scenario("quickstart", sets)
    assert "\n" not in str(info.value)


def test_report_timeline_shows_the_waits_and_the_packet_error_losses():
    from edgefl.output.report import build_figures

    res = _run("channel.access=tdma", "channel.packet_errors.waterfall=30", "channel.packet_errors.retransmissions=1")
    d = res.device_rounds
    r = int(d.loc[d["reason"] == "packet error", "round"].iloc[0])
    rnd = d[(d["round"] == r) & d["feasible"]].sort_values("device")
    t0 = rnd["t_down_s"].min()
    traces = {t.name: t for t in build_figures(res.rounds, d, timeline_round=r)["timeline"].data}
    waited = [t for name, t in traces.items() if name.startswith("waiting for the channel")]
    widths = sorted(w for t in waited for w in t.x)
    np.testing.assert_allclose(widths, sorted(rnd["t_wait_s"]), rtol=1e-12, atol=1e-12)
    lost = rnd[rnd["reason"] == "packet error"]
    np.testing.assert_allclose(sorted(traces["packet error"].x), sorted(lost["t_arrive_s"] - t0), rtol=1e-12)


# ------------------------------------------------------------------------------- asynchronous FL

ASYNC = ["rounds=4", "checkpoint_every=0", "fleet.n_devices=50", "method.clients_per_round=10"]


def _run_async(*sets):
    return run_scenario(load_scenario("fedbuff_surrogate_10k", [*ASYNC, *sets]))


def test_async_loss_count_matches_chen_q_and_losses_are_charged_not_aggregated():
    res = _run_async("channel.packet_errors.waterfall=300")
    d = res.device_rounds[res.device_rounds["feasible"]]
    sinr = np.expm1(d["rate_bps"].to_numpy() / 1e6 * math.log(2.0))  # the preset's 1 MHz "fixed" Shannon link
    q = -np.expm1(-300.0 / sinr)
    lost = d["reason"] == "packet error"
    mean, sd = q.sum(), math.sqrt(float(np.sum(q * (1 - q))))
    assert 0.1 * len(d) < mean < 0.9 * len(d), "every upload certain: the case checks nothing"
    assert abs(lost.sum() - mean) <= SIGMAS * sd, (int(lost.sum()), mean, sd)
    assert not d.loc[lost, "arrived"].any() and d.loc[lost, "staleness"].isna().all()
    np.testing.assert_allclose(d["e_com_j"], d["e_com_planned_j"], rtol=1e-12)  # no retransmission: charged once
    assert (res.rounds["packet_errors"] == res.rounds["dropped"]).all()
    per_round = d.groupby("round")[["e_cmp_j", "e_com_j", "e_down_j"]].sum().sum(axis=1)
    np.testing.assert_allclose(res.rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)


def test_async_vanishing_threshold_moves_nothing():
    base = _run_async().device_rounds
    d = _run_async("channel.packet_errors.waterfall=1e-9").device_rounds
    assert (d["uploads"] == 1).all()
    common = [c for c in base.columns if c != "wall_time_s"]
    assert d[common].equals(base[common])


def test_async_retransmissions_charged_each_time():
    d = _run_async("channel.packet_errors.waterfall=300", "channel.packet_errors.retransmissions=2").device_rounds
    d = d[d["feasible"]]
    assert set(d["uploads"].unique()) == {1.0, 2.0, 3.0}
    np.testing.assert_allclose(d["t_com_s"], d["uploads"] * d["t_com_planned_s"], rtol=1e-12)
    np.testing.assert_allclose(d["e_com_j"], d["uploads"] * d["e_com_planned_j"], rtol=1e-12)
    assert (d.loc[d["reason"] == "packet error", "uploads"] == 3).all()


def test_async_every_upload_lost_stops_with_one_line():
    from edgefl.errors import SimulationError

    with pytest.raises(SimulationError, match="lost, to devices going offline or to packet errors") as info:
        _run_async("channel.packet_errors.waterfall=1e9")
    assert "\n" not in str(info.value)


def test_a_plans_upload_order_is_the_tdma_order(monkeypatch):
    """A planner that sets ``RoundPlan.upload_order`` (here: FedAvg's plan, devices in decreasing id) has the
    channel served in that order, each upload starting when the one before it ended or its device has computed."""
    from dataclasses import replace

    from edgefl.methods import METHODS
    from edgefl.methods.fedavg import FedAvg

    class Reversed(FedAvg):
        name = "fedavg_reversed_uploads"

        def plan_round(self, ctx):
            plan = super().plan_round(ctx)
            return replace(plan, upload_order=np.sort(plan.jobs.device)[::-1])

    monkeypatch.setitem(METHODS, Reversed.name, Reversed)
    d = _run("channel.access=tdma", f"method.name={Reversed.name}").device_rounds
    not_fcfs = 0
    for _, rnd in d[d["feasible"]].groupby("round"):
        rnd = rnd.sort_values("device", ascending=False)
        up_end = rnd["t_arrive_s"].to_numpy()
        up_start = up_end - rnd["t_com_s"].to_numpy()
        cmp_end = (rnd["t_start_s"] + rnd["t_cmp_s"]).to_numpy()
        assert np.all(np.diff(up_end) > 0)  # in decreasing device id
        np.testing.assert_allclose(up_start[1:], np.maximum(cmp_end[1:], up_end[:-1]), rtol=1e-12)
        not_fcfs += bool(np.any(np.diff(cmp_end) < 0))  # a device that computed first uploads later
    assert not_fcfs, "the order is first come, first served anyway: the case checks nothing"


def test_an_upload_order_must_name_each_job_once():
    from edgefl.engine.sync_driver import upload_order
    from edgefl.errors import SimulationError
    from edgefl.methods.base import JobTable, RoundPlan

    jobs = JobTable.build(np.array([4, 2, 9]), cpu_hz=1e9, width=1.0, local_steps=np.ones(3, dtype=np.int64),
                          bits_planned=1.0, t_cmp_planned_s=np.ones(3), t_com_planned_s=np.ones(3),
                          e_cmp_planned_j=np.ones(3), e_com_planned_j=np.ones(3))  # fmt: skip
    assert upload_order(RoundPlan(jobs, upload_order=np.array([9, 4, 2]))).tolist() == [2, 0, 1]
    assert upload_order(RoundPlan(jobs)) is None
    for bad in ([9, 4], [9, 4, 4], [9, 4, 7]):
        with pytest.raises(SimulationError, match="upload_order"):
            upload_order(RoundPlan(jobs, upload_order=np.array(bad)))
