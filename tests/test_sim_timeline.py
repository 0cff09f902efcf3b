"""The SimPy round engine's exact event timeline for a 3-device round, against hand computation.

Hand set-up (numbers chosen so every time is easy to recompute):
    device:            0        1        2
    distance [m]:      100      300      550
    CPU f [Hz]:        1e9      0.5e9    2e9
    samples:           100      200      400
    cycles/sample:     1e6  ->  cycles = 1e8, 2e8, 4e8  ->  t_cmp = cycles / f = 0.1 s, 0.4 s, 0.2 s
    update: 2e6 bits;  rate = b log2(1 + g P / (N0 b)) with b = 1 MHz, P = 0.1 W, N0 = -114 dBm/MHz,
    g = 10^(-PL/10), PL = 128.1 + 37.6 log10(d / 1 km)  (3GPP macro, AnycostFL Sec. V-A).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from edgefl.engine.clock import simulate_round

TIME_TOL = 1e-12  # [s]; the engine adds the same floats the hand computation adds

DIST = [100.0, 300.0, 550.0]
F_HZ = [1e9, 0.5e9, 2e9]
CYCLES = [1e8, 2e8, 4e8]
BITS = 2e6


def hand_rate(d_m: float) -> float:
    pl_db = 128.1 + 37.6 * math.log10(d_m / 1000.0)
    g = 10 ** (-pl_db / 10)  # dB -> linear
    n0_w_per_hz = 10 ** ((-114 - 30) / 10) / 1e6  # dBm/MHz -> W/Hz
    b = 1e6
    return b * math.log2(1 + g * 0.1 / (n0_w_per_hz * b))


T_CMP = [c / f for c, f in zip(CYCLES, F_HZ)]  # 0.1, 0.4, 0.2
T_COM = [BITS / hand_rate(d) for d in DIST]
START = 5.0
DOWN = 0.25
ARRIVE = [START + DOWN + a + b for a, b in zip(T_CMP, T_COM)]
CMP_END = [START + DOWN + a for a in T_CMP]


def _jobs():
    return [SimpleNamespace(device=i, cpu_hz=F_HZ[i]) for i in range(3)]


def _train(job):
    return SimpleNamespace(cycles=CYCLES[job.device], bits=BITS)


def _cost(job, upd):
    return upd.cycles / job.cpu_hz, upd.bits / hand_rate(DIST[job.device])


def _run(**kw):
    return simulate_round(start_s=START, jobs=_jobs(), train=_train, cost=_cost, downlink_s=DOWN, **kw)


def test_hand_numbers_are_what_the_docstring_says():
    assert T_CMP == pytest.approx([0.1, 0.4, 0.2], rel=1e-15)
    # the farther device has the lower rate: order of arrival is decided by both compute and upload
    assert hand_rate(100) > hand_rate(300) > hand_rate(550)


def _assert_device_times(out):
    for i, tl in enumerate(out.devices):
        assert tl.t_start_s == pytest.approx(START + DOWN, abs=TIME_TOL)
        assert tl.t_cmp_end_s == pytest.approx(CMP_END[i], abs=TIME_TOL)
        assert tl.t_arrive_s == pytest.approx(ARRIVE[i], abs=TIME_TOL)


def test_wait_all_straggler_sets_round_end():
    out = _run(policy="wait_all")
    _assert_device_times(out)
    assert out.end_s == pytest.approx(max(ARRIVE), abs=TIME_TOL)
    assert [tl.kept for tl in out.devices] == [True, True, True]


def test_deadline_drops_late_update_and_ends_at_deadline():
    order = sorted(range(3), key=lambda i: ARRIVE[i])
    # deadline halfway between the second and the last arrival (relative to the round start)
    deadline = (ARRIVE[order[1]] + ARRIVE[order[2]]) / 2 - START
    out = _run(policy="deadline", deadline_s=deadline)
    _assert_device_times(out)  # the late device still computes and uploads (its energy is charged)
    assert out.end_s == pytest.approx(START + deadline, abs=TIME_TOL)
    kept = [tl.kept for tl in out.devices]
    assert kept[order[2]] is False and kept[order[0]] and kept[order[1]]


def test_deadline_not_binding_ends_at_last_arrival():
    out = _run(policy="deadline", deadline_s=100.0)
    assert out.end_s == pytest.approx(max(ARRIVE), abs=TIME_TOL)
    assert all(tl.kept for tl in out.devices)


def test_over_select_keeps_first_k_arrivals():
    order = sorted(range(3), key=lambda i: ARRIVE[i])
    out = _run(policy="over_select", keep=2)
    _assert_device_times(out)
    assert out.end_s == pytest.approx(ARRIVE[order[1]], abs=TIME_TOL)
    assert [tl.job.device for tl in out.kept] == order[:2]
    assert not out.devices[order[2]].kept


def test_empty_round_ends_after_downlink():
    out = simulate_round(start_s=1.0, jobs=[], train=_train, cost=_cost, downlink_s=0.5)
    assert out.end_s == pytest.approx(1.5) and out.devices == ()


@pytest.mark.parametrize(
    "kw, match",
    [({"policy": "deadline"}, "deadline_s"), ({"policy": "deadline", "deadline_s": 0.0}, "deadline_s"),
     ({"policy": "over_select"}, "keep")],
)  # fmt: skip
def test_bad_policy_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        _run(**kw)
