"""FedCS selection (optimizers/fedcs.py): the greedy against exhaustive search on small candidate sets, the
serial-upload recursion against an event simulation, and hand cases (issue #36, point 5).

The greedy is a heuristic: it must always return a feasible schedule no larger than the optimum; where it
returns fewer clients than the optimum the instance is a finding (notes, FedCS §9.1), counted and shown here.
"""

from __future__ import annotations

import numpy as np
import pytest

from optimizers.errors import OptimizerInputError
from optimizers.fedcs import fedcs_greedy, fedcs_optimal, upload_finish_times

N_INSTANCES = 300


def random_instance(rng: np.random.Generator) -> dict:
    """2-8 candidates: update 5-120 s, upload 10-100 s (a 147 Mbit model at 1.4-8.6 Mbit/s, notes §6), a
    deadline of 60-300 s, and in half the instances a multicast of 20 Mbit at the slowest selected throughput."""
    n = int(rng.integers(2, 9))
    inst = dict(t_update_s=rng.uniform(5, 120, n), t_upload_s=rng.uniform(10, 100, n),
                deadline_s=float(rng.uniform(60, 300)))  # fmt: skip
    if rng.random() < 0.5:
        inst.update(distribution_bits=2e7, throughput_bps=rng.uniform(1e6, 9e6, n))
    return inst


def round_end(inst: dict, order: list[int]) -> float:
    """Event simulation of one round: a FIFO uplink, each job ready at its client's update time."""
    clock = 0.0
    for k in order:
        start = max(clock, inst["t_update_s"][k])
        clock = start + inst["t_upload_s"][k]
    if order and "distribution_bits" in inst:
        clock += inst["distribution_bits"] / min(inst["throughput_bps"][k] for k in order)
    return clock


def test_greedy_against_exhaustive_search():
    rng = np.random.default_rng(19)
    short = []
    for i in range(N_INSTANCES):
        inst = random_instance(rng)
        greedy, best = fedcs_greedy(**inst), fedcs_optimal(**inst)
        assert len(set(greedy)) == len(greedy)
        assert round_end(inst, greedy) < inst["deadline_s"] and round_end(inst, best) < inst["deadline_s"]
        assert len(greedy) <= len(best)
        if len(greedy) < len(best):
            short.append((i, len(greedy), len(best)))
    # Finding, not a failure: the greedy falls short of the optimum on a few instances (printed with -s).
    print(f"greedy below the optimum on {len(short)} of {N_INSTANCES} instances: {short[:10]}")
    assert len(short) < N_INSTANCES // 4


def test_a_known_instance_where_greedy_is_short():
    """Finding: added times at Theta = 0 are 60, 90 and 70 s, so the greedy takes client 0 (Theta = 60 s); then
    client 1 or 2 would end at 110 s, not before the 110 s deadline, and both are dropped. Client 2 first (ready
    at 20 s, upload until 70 s), then client 0 (70 to 100 s) fits two clients."""
    inst = dict(t_update_s=[30.0, 40.0, 20.0], t_upload_s=[30.0, 50.0, 50.0], deadline_s=110.0)
    assert fedcs_greedy(**inst) == [0]
    assert fedcs_optimal(**inst) == [2, 0]
    # Four clients that all fit: the greedy takes them all, client 0 (least added time) first.
    inst = dict(t_update_s=[0.0, 20.0, 20.0, 20.0], t_upload_s=[21.0, 20.0, 20.0, 20.0], deadline_s=85.0)
    assert fedcs_greedy(**inst) == [0, 1, 2, 3] == fedcs_optimal(**inst)


def test_recursion_matches_event_simulation():
    rng = np.random.default_rng(4)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        inst = dict(t_update_s=rng.uniform(0, 50, n), t_upload_s=rng.uniform(1, 30, n))
        order = list(rng.permutation(n))
        theta = upload_finish_times(inst["t_update_s"], inst["t_upload_s"], order)
        assert theta[-1] == pytest.approx(round_end(inst, order), rel=1e-14)
        assert np.all(np.diff(theta) > 0)


def test_deadline_is_strict_and_empty_when_nothing_fits():
    assert fedcs_greedy([0.0], [10.0], deadline_s=10.0) == []
    assert fedcs_greedy([0.0], [10.0], deadline_s=10.0 + 1e-9) == [0]
    assert fedcs_optimal([50.0, 60.0], [10.0, 10.0], deadline_s=40.0) == []


def test_multicast_time_counts_the_slowest_selected_client():
    # Client 1 is fast to update but its 1 Mbit/s downlink would add 20 s of distribution: it is dropped.
    inst = dict(t_update_s=[5.0, 1.0], t_upload_s=[10.0, 10.0], deadline_s=20.0, distribution_bits=2e7,
                throughput_bps=[1e7, 1e6])  # fmt: skip
    assert fedcs_greedy(**inst) == [0] == fedcs_optimal(**inst)


def test_bad_inputs_are_named():
    with pytest.raises(OptimizerInputError, match=r"t_upload_s\[1\]=0.0: must be > 0"):
        fedcs_greedy([1.0, 2.0], [1.0, 0.0], deadline_s=10.0)
    with pytest.raises(OptimizerInputError, match="together with throughput_bps"):
        fedcs_greedy([1.0], [1.0], deadline_s=10.0, distribution_bits=1e6)
