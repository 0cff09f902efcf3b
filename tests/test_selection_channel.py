"""Selection policies on the channel they plan for (issue #36, points 2-4): FedCS's upload schedule played by
TDMA under a deadline, and Chen et al.'s RBs in the packet-error draw.

FedCS's hand case runs under Luo et al.'s per-step costs with a device table, so each candidate's compute time
(one SGD step of ``step_time_s``) and upload time (``comm_time_s``, the same on any band) are the table's numbers
and the schedule and its TDMA timeline are worked out by hand.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from edgefl.errors import ScenarioError
from edgefl.run.load import load_scenario
from edgefl.run.runner import run_scenario

STEP_S = [1.0, 2.0, 6.0, 0.5]  # ready times (one step each, no download) [s]
COMM_S = [3.0, 2.0, 1.0, 8.0]  # upload times [s]


def _per_step_table(tmp_path, step_s, comm_s) -> str:
    path = tmp_path / "devices.csv"
    pd.DataFrame({"step_time_s": step_s, "comm_time_s": comm_s, "step_energy_j": 0.01,
                  "comm_energy_j": 0.02}).to_csv(path, index=False)  # fmt: skip
    return str(path)


def _fedcs_tdma(tmp_path, *more, deadline_s=10.5, method="fedavg"):
    sets = [
        "rounds=1", "checkpoint_every=0", f"learning={'surrogate' if method == 'fedavg' else 'torch'}",
        "physics=paper", f"method.name={method}", f"method.clients_per_round={len(STEP_S)}", "train.local_steps=1",
        "fleet.step_costs.kind=normal", f"fleet.devices='{_per_step_table(tmp_path, STEP_S, COMM_S)}'",
        "round.policy=deadline", f"round.deadline_s={deadline_s}", "selection.policy=fedcs", *more,
    ]  # fmt: skip
    return run_scenario(load_scenario("quickstart", sets))


@pytest.mark.parametrize("method", ["fedavg", "fednova"])
def test_tdma_plays_fedcs_schedule_on_a_hand_case(tmp_path, method):
    """Deadline 10.5 s: FedCS schedules devices [1, 2, 0] with uploads ending at 4, 7 and 10 s
    (test_selection_policies works the greedy out). TDMA in that order: device 1 computes to 2 s and uploads
    2-4 s; device 2 computes to 6 s and uploads 6-7 s; device 0 computes to 1 s, waits 6 s while the channel is
    busy or kept for the others, and uploads 7-10 s. Each arrives exactly at its planned end. First come, first
    served would have sent device 0 first (1-4 s), then 1 (4-6 s) and 2 (6-7 s): the order is FedCS's."""
    rows = _fedcs_tdma(tmp_path, "channel.access=tdma", method=method).device_rounds.set_index("device")
    order = [1, 2, 0]
    assert sorted(rows.index) == [0, 1, 2]
    assert rows.loc[order, "t_arrive_s"].tolist() == [4.0, 7.0, 10.0]
    assert rows.loc[order, "t_wait_s"].tolist() == [0.0, 0.0, 6.0]
    assert (rows["t_arrive_s"] == rows["upload_end_planned_s"]).all() and rows["arrived"].all()


def test_tdma_fedcs_under_fdma_the_same_schedule_arrives_earlier(tmp_path):
    """The same case under FDMA: every upload starts when its compute ends, so devices 0, 1 and 2 arrive at 4,
    4 and 7 s, device 0 before its slot's planned end (10 s)."""
    rows = _fedcs_tdma(tmp_path).device_rounds.set_index("device")
    assert rows.loc[[0, 1, 2], "t_arrive_s"].tolist() == [4.0, 4.0, 7.0]


FEDCS_PHYSICAL = [
    "rounds=12", "checkpoint_every=0", "learning=surrogate", "physics=paper", "method.name=fedavg",
    "method.clients_per_round=6", "fleet.n_devices=10", "round.policy=deadline", "round.deadline_s=6",
    "selection.policy=fedcs", "channel.access=tdma", "channel.bandwidth_mhz=10",
]  # fmt: skip


@pytest.mark.parametrize("cpu_policy", ["max", "min_energy"])
def test_tdma_fedcs_every_chosen_device_ends_by_its_planned_end(cpu_policy):
    """12 rounds on the quickstart's fleet under the papers' physics (Shannon rate on the whole band, Rayleigh
    fading): each device FedCS chose uploads in its slot and arrives by its planned end (to rounding: the planned
    end is the round start plus FedCS's sum of durations, the arrival the clock's chain of the same durations),
    planned = charged for compute and upload, and at least two devices share a round, so the order matters.
    Under ``cpu_policy = "min_energy"`` FedAvg stretches each compute to T_max less its upload, so FedCS schedules
    that plan (fewer devices fit) and it is still played exactly."""
    res = run_scenario(load_scenario("quickstart", [*FEDCS_PHYSICAL, f"method.fedavg.cpu_policy={cpu_policy}"]))
    rows = res.device_rounds
    assert len(rows) > 0 and rows["arrived"].all()
    assert (rows["t_arrive_s"] <= rows["upload_end_planned_s"] * (1 + 1e-12)).all()
    assert (rows["t_cmp_s"] == rows["t_cmp_planned_s"]).all() and (rows["t_com_s"] == rows["t_com_planned_s"]).all()
    assert (rows["bandwidth_hz"] == 10e6).all()  # each upload has the whole band, in turn
    for _, got in rows.groupby("round"):
        slots = got.sort_values("upload_slot")
        upload_start = (slots["t_arrive_s"] - slots["t_com_s"]).to_numpy()
        assert np.all(np.diff(upload_start) > 0)  # one at a time, in FedCS's order
        assert np.all(upload_start[1:] >= slots["t_arrive_s"].to_numpy()[:-1] * (1 - 1e-12))
    if cpu_policy == "max":
        assert rows.groupby("round").size().max() >= 2


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        (["method.fedavg.cpu_policy=min_energy"], "and method.name='fedavg': fedavg plans each device's compute"),
        (["method.name=stc"], "and method.name='stc'"),
        (["method.name=heterofl"], "and method.name='heterofl'"),
        (["method.name=stc", "selection.policy=fedcs"], "and method.name='stc'"),
        (["method.name=heterofl", "method.heterofl.assignment=capability", "selection.policy=fedcs"],
         "and method.name='heterofl'"),
    ],
)
def test_tdma_deadline_refuses_a_plan_that_fills_t_max_naming_the_method(sets, fragment):
    base = ["channel.access=tdma", "round.policy=deadline", "round.deadline_s=2"]
    with pytest.raises(ScenarioError, match=fragment) as info:
        load_scenario("quickstart", [*base, *sets])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "sets",
    [
        [],  # fedavg at cpu_policy = "max"
        ["method.name=fednova"],
        ["method.name=heterofl", "method.heterofl.assignment=fix"],
        ["selection.policy=fedcs", "method.fedavg.cpu_policy=min_energy"],  # FedCS schedules that very plan
    ],
)
def test_tdma_deadline_loads_where_the_plan_is_exact(sets):
    s = load_scenario("quickstart", ["channel.access=tdma", "round.policy=deadline", "round.deadline_s=2", *sets])
    assert s.channel.access == "tdma" and s.round.policy == "deadline"


# --- Chen et al.'s RBs in the packet-error draw ------------------------------------------------------------------

CHEN_LOSS_ROUNDS = 100
CHEN_M = 3.0  # a waterfall m that loses about one upload in six on these RBs
SIGMAS = 5.0  # binomial tolerance of a loss count: |count - mean| <= 5 standard deviations (fails w.p. < 6e-7)
RB_HZ, RB_I_W = 0.5e6, 10 ** ((np.array([-110.0, -100.0, -95.0]) - 30) / 10)  # CHEN_SETS's RBs; dBm -> W


def test_chen_packet_errors_draw_each_rb_interference():
    """100 rounds of Chen et al.'s selection with ``[channel.packet_errors]`` (m = 3, no retransmission): each row's
    ``error_rate_planned`` is eq. (9) at the SINR of its RB rate, ``q = 1 - exp(-m / (2^(r/B) - 1))`` (worked back
    from the row's ``rate_bps`` here), and the count of rows lost to packet errors is the sum of those q within
    5 binomial standard deviations. The RBs' interference (-110 to -95 dBm) is 50 to 1,600 times the noise of an RB,
    so a draw on the noise alone (``q0 = 1 - exp(-m B N0 / (P h))``) would lose far fewer: that sum is more than 5
    standard deviations away."""
    from test_selection_policies import CHEN_SETS

    sets = [s for s in CHEN_SETS if not s.startswith("rounds=")]
    scenario = load_scenario("quickstart", [*sets, f"rounds={CHEN_LOSS_ROUNDS}", f"selection.chen.waterfall={CHEN_M}",
                                            "channel.packet_errors.retransmissions=0"])  # fmt: skip
    rows = run_scenario(scenario).device_rounds
    q = rows["error_rate_planned"].to_numpy()
    sinr = 2.0 ** (rows["rate_bps"].to_numpy() / RB_HZ) - 1.0
    assert q == pytest.approx(1.0 - np.exp(-CHEN_M / sinr), rel=1e-9)
    assert rows["interference_w"].to_numpy() == pytest.approx(RB_I_W[rows["rb"].to_numpy(int)], rel=1e-12)
    lost = int(np.count_nonzero(rows["reason"] == "packet error"))
    assert lost == int(np.count_nonzero(~rows["arrived"]))  # nothing else is lost here
    mean, sd = float(q.sum()), float(np.sqrt(np.sum(q * (1 - q))))
    assert abs(lost - mean) <= SIGMAS * sd, (lost, mean, sd)
    noise_w = RB_HZ * scenario.channel.noise_psd_w_per_hz
    q0 = 1.0 - np.exp(-CHEN_M * noise_w / (sinr * (rows["interference_w"].to_numpy() + noise_w)))
    assert abs(lost - q0.sum()) > SIGMAS * sd, "the interference changes nothing: the case checks nothing"
    assert lost >= 10


def test_one_waterfall_under_chen_with_packet_errors():
    """The m given in either key fills the other; both given must agree; without Chen's policy they are apart."""
    chen = ["selection.policy=chen", "channel.link_model=shannon"]
    s = load_scenario("quickstart", [*chen, "channel.packet_errors.waterfall=30"])
    assert s.selection.chen.waterfall == 30.0 and s.channel.packet_errors.waterfall == 30.0
    s = load_scenario("quickstart", [*chen, "selection.chen.waterfall=2", "channel.packet_errors.retransmissions=1"])
    assert s.channel.packet_errors.waterfall == 2.0
    s = load_scenario("quickstart", [*chen, "selection.chen.waterfall=2", "channel.packet_errors.waterfall=2"])
    assert s.selection.chen.waterfall == s.channel.packet_errors.waterfall == 2.0
    with pytest.raises(ScenarioError, match=r"selection.chen.waterfall=2 with channel.packet_errors.waterfall=30") as e:
        load_scenario("quickstart", [*chen, "selection.chen.waterfall=2", "channel.packet_errors.waterfall=30"])
    assert "\n" not in str(e.value)
    s = load_scenario("quickstart", ["selection.chen.waterfall=2", "channel.packet_errors.waterfall=30"])
    assert s.selection.chen.waterfall == 2.0 and s.channel.packet_errors.waterfall == 30.0


def test_packet_error_rate_with_a_band_per_upload():
    """An allocation's or Chen's band per upload: the radio's q equals eq. (9) evaluated upload by upload with
    each one's own scalar B and I (optimizers.chen_assignment.packet_error_rate), and an allocation run with
    packet errors plays (each upload sent once at least)."""
    from edgefl.fleet.links import Radio
    from edgefl.seeding import Streams
    from optimizers.chen_assignment import packet_error_rate

    scenario = load_scenario("quickstart", ["channel.link_model=shannon", "physics=paper"])
    radio = Radio(scenario.channel, 4, Streams(0))
    n0 = scenario.channel.noise_psd_w_per_hz
    gain, power = np.array([1e-10, 3e-11, 2e-12, 5e-13]), np.array([0.2, 0.1, 0.05, 0.2])
    band, i_w = np.array([1e6, 2.5e5, 1.8e5, 4e5]), np.array([0.0, 1e-13, 3e-14, 0.0])
    got = radio.packet_error_rate(gain, power, 4, waterfall=1.08, band_hz=band, interference_w=i_w)
    ref = [packet_error_rate(p, h, i, rb_bandwidth_hz=b, noise_psd_w_per_hz=n0, waterfall=1.08)
           for p, h, i, b in zip(power, gain, i_w, band)]  # fmt: skip
    assert got == pytest.approx(np.array(ref, dtype=float).ravel(), rel=1e-12)
    alloc = ["channel.allocation=min_time", "channel.bandwidth_mode=split", "channel.link_model=shannon",
             "physics=paper", "rounds=2", "checkpoint_every=0", "learning=surrogate",
             "channel.packet_errors.waterfall=1.08"]  # fmt: skip
    rows = run_scenario(load_scenario("quickstart", alloc)).device_rounds
    assert len(rows) > 0 and (rows["uploads"] >= 1).all()


def test_tdma_fedcs_with_packet_errors_loses_uploads_at_the_whole_band_rate():
    """FedCS under TDMA with packet errors (m = 10, no retransmission): each upload's q is eq. (9) at the SINR of
    its whole-band rate, ``1 - exp(-m / (2^(r/B) - 1))`` with B = 10 MHz (worked back from its ``rate_bps``), and
    the uploads lost number that sum of q within 5 binomial standard deviations. Under ``bandwidth_mode = "split"``
TDMA still gives each upload the whole band (not a K-th of it), in its rows and in its q."""
    sets = [*FEDCS_PHYSICAL, "rounds=40", "channel.packet_errors.waterfall=10", "channel.bandwidth_mode=split"]
    rows = run_scenario(load_scenario("quickstart", [s for s in sets if s != "rounds=12"])).device_rounds
    q = 1.0 - np.exp(-10.0 / (2.0 ** (rows["rate_bps"].to_numpy() / 10e6) - 1.0))
    lost = int(np.count_nonzero(rows["reason"] == "packet error"))
    mean, sd = float(q.sum()), float(np.sqrt(np.sum(q * (1 - q))))
    assert abs(lost - mean) <= SIGMAS * sd, (lost, mean, sd)
    assert lost >= 5 and (rows["bandwidth_hz"] == 10e6).all()
