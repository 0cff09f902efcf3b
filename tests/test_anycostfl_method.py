"""AnycostFL with real training: planned vs charged costs, the real encoded bits, and eq. (5) aggregation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgefl.algorithms.anycostfl import all_in_one
from edgefl.runner import run_scenario
from edgefl.scenario import load_scenario

RTOL = 1e-9  # floating-point slack on constraints that the plan makes tight


@pytest.fixture(scope="module")
def run():
    sc = load_scenario("quickstart", [
        "method.name=anycostfl", "round.policy=deadline", "round.deadline_s=0.01", "fleet.budget.kind=uniform",
        "fleet.budget.low_j=0.001", "fleet.budget.high_j=0.004", "fleet.f_min_hz=1e7", "rounds=6",
        "model.hidden=[64, 32]",
    ])  # fmt: skip
    return sc, run_scenario(sc)


def test_every_device_round_meets_t_max_and_e_max_in_charged_values(run):
    sc, res = run
    d = res.device_rounds
    t = d[d["trained"]]
    assert len(t) >= 0.5 * len(d), "scenario should let most devices train"
    assert (t["t_cmp_s"] + t["t_com_s"] <= (sc.round.deadline_s - sc.round.downlink_s) * (1 + RTOL)).all()
    assert (t["e_cmp_j"] + t["e_com_j"] <= t["e_max_j"] * (1 + RTOL)).all()
    assert t["arrived"].all()
    # the simulator charged the real encoded size, never more than planned, and the budget was used
    assert (t["bits"] <= t["bits_planned"]).all() and (t["bits"] % 8 == 0).all()
    assert (t["bits"] >= 0.5 * t["bits_planned"]).mean() > 0.9
    # planned compute is the measured FLOPs of the submodel that trained
    np.testing.assert_allclose(t["t_cmp_s"], t["t_cmp_planned_s"], rtol=1e-9)
    assert (t["alpha"] >= sc.method.anycostfl.alpha_min * (1 - 1e-12)).all() and (t["beta"] <= sc.method.anycostfl.beta_max + 1e-12).all()


def test_compressed_shrunk_updates_still_learn(run):
    _, res = run
    acc = res.rounds["test_accuracy"].to_numpy()
    assert acc[-1] > acc[0] and acc[-1] > 0.15  # 10 classes: chance is 0.1


def test_all_in_one_aggregation_by_hand():
    w = {"a": torch.zeros(3, 2), "b": torch.zeros(3)}
    # client 1: submodel 2x2 / 2, client 2: 3x2 / 3; masks mark what each sent
    u1 = {"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([1.0, 1.0])}
    m1 = {"a": torch.tensor([[True, False], [True, True]]), "b": torch.tensor([True, False])}
    u2 = {"a": torch.tensor([[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]), "b": torch.tensor([2.0, 2.0, 0.0])}
    m2 = {"a": torch.tensor([[True, True], [False, True], [False, False]]), "b": torch.tensor([True, True, False])}
    p = [0.25, 0.75]
    out = all_in_one(w, [u1, u2], [m1, m2], p)
    expect_a = torch.tensor([
        [(0.25 * 1 + 0.75 * 5) / 1.0, 6.0],  # both sent [0,0]; only client 2 sent [0,1]
        [3.0, (0.25 * 4 + 0.75 * 8) / 1.0],  # only client 1 sent [1,0]; both [1,1]
        [0.0, 0.0],  # nobody sent row 2: u~ = 0, the global value stays
    ])  # fmt: skip
    expect_b = torch.tensor([(0.25 * 1 + 0.75 * 2) / 1.0, 2.0, 0.0])
    torch.testing.assert_close(out["a"], expect_a)
    torch.testing.assert_close(out["b"], expect_b)
