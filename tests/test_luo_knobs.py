"""Knobs Luo et al.'s setups need: per-step/per-upload costs drawn per device, w_0 = 0, eta_r = eta_0 / r,
and the global training loss F(w) every round. Expected values are computed here from the drawn constants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgefl.run.runner import Simulation, make_workload, run_scenario
from edgefl.run.load import load_scenario
from edgefl.seeding import Streams
from edgefl.fleet.devices import Fleet

BASE = ["physics=paper", "fleet.n_devices=12", "method.clients_per_round=4", "model.name=logreg", "rounds=4", "train.local_steps=3"]


@pytest.mark.slow
def test_step_costs_are_drawn_per_device_and_charged_per_step():
    sc = load_scenario("quickstart", BASE + ["fleet.step_costs.kind=normal"])
    sim = Simulation(sc)
    fleet = sim.fleet
    for name, mean in (("step_time_s", 0.1), ("comm_time_s", 2.0), ("step_energy_j", 1e-3), ("comm_energy_j", 2e-2)):
        values = getattr(fleet, name)
        assert values.shape == (12,) and (values >= 0.01 * mean).all()
        assert len(np.unique(values)) == 12  # one draw per device
    for r in range(1, 5):
        sim.step(r)
    d = sim.result().device_rounds
    dev = d["device"].to_numpy()
    assert (d["local_steps"] == 3).all()
    np.testing.assert_allclose(d["t_cmp_s"], 3 * fleet.step_time_s[dev], rtol=1e-15)
    np.testing.assert_allclose(d["e_cmp_j"], 3 * fleet.step_energy_j[dev], rtol=1e-15)
    np.testing.assert_allclose(d["t_com_s"], fleet.comm_time_s[dev], rtol=1e-15)
    np.testing.assert_allclose(d["e_com_j"], fleet.comm_energy_j[dev], rtol=1e-15)
    # wait_all: the round lasts as long as its slowest device's E t_p + t_m
    per_round = (d["t_cmp_s"] + d["t_com_s"]).groupby(d["round"]).max().to_numpy()
    np.testing.assert_allclose(sim.result().rounds["round_time_s"], per_round, rtol=1e-12)


def test_step_cost_draws_do_not_move_the_physical_fleet():
    plain = Simulation(load_scenario("quickstart", BASE)).fleet
    drawn = Simulation(load_scenario("quickstart", BASE + ["fleet.step_costs.kind=normal"])).fleet
    np.testing.assert_array_equal(plain.energy_coeff, drawn.energy_coeff)
    assert not plain.has_step_costs and drawn.has_step_costs


def test_zero_init_and_inverse_round_learning_rate():
    sc = load_scenario("quickstart", BASE + ["model.init=zeros", "train.lr_schedule=inverse_round", "train.lr=0.3"])
    wl = make_workload(sc, Streams(sc.seed))
    w0 = wl.initial_state()
    assert all(float(t.abs().sum()) == 0.0 for t in w0.values())
    # round 3 with eta_0 = 0.3 must equal a constant-lr run at 0.1 on the same batches
    const = load_scenario("quickstart", BASE + ["model.init=zeros", "train.lr=0.1"])
    wl_c = make_workload(const, Streams(const.seed))
    a = wl.train(2, w0, round_index=3).update
    b = wl_c.train(2, w0, round_index=3).update
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    first = load_scenario("quickstart", BASE + ["model.init=zeros", "train.lr=0.3"])  # round 1: eta_0 itself
    c = make_workload(first, Streams(first.seed)).train(2, w0, round_index=1).update
    d = wl.train(2, w0, round_index=1).update
    for k in c:
        torch.testing.assert_close(c[k], d[k], rtol=0, atol=0)


@pytest.mark.slow
def test_global_training_loss_is_cross_entropy_over_all_devices_data():
    sc = load_scenario("quickstart", BASE + ["train.global_loss=true", "rounds=2"])
    res = run_scenario(sc)
    assert "global_train_loss" in res.rounds.columns
    # recompute F(w_0) = ln(10) exactly for a zero model: every class equally likely
    z = load_scenario("quickstart", BASE + ["train.global_loss=true", "rounds=1", "model.init=zeros", "train.lr=1e-12"])
    loss = run_scenario(z).rounds["global_train_loss"].iloc[0]
    assert loss == pytest.approx(np.log(10), rel=1e-6)


def test_lognormal_step_costs_have_the_given_mean_and_a_heavy_tail():
    """``kind = "lognormal"``, std_ratio 1.5: sigma^2 = ln(1 + 1.5^2) (sigma = 1.0857), so over 20,000 devices
    the mean is step_time_s within 3 standard errors (SE = 1.5 x mean / sqrt(n)), and the share above 4x the mean
    is P(Z > (ln 4 + sigma^2 / 2) / sigma) = P(Z > 1.819) = 0.0344, within 3 binomial standard errors. Above 6x
    the mean: lognormal P(Z > 2.193) = 0.0142, a normal draw of the same spread P(Z > 5 / 1.5) = 0.0004."""
    import math

    n, ratio = 20_000, 1.5
    over = ["fleet.n_devices=20000", "method.clients_per_round=4", f"fleet.step_costs.std_ratio={ratio}"]

    def fleet_of(kind: str) -> Fleet:
        cfg = load_scenario("quickstart", BASE + over + [f"fleet.step_costs.kind={kind}"]).fleet
        return Fleet.from_config(cfg, np.full(n, 30), np.random.default_rng(0), np.random.default_rng(1))

    fleet = fleet_of("lognormal")
    sigma = math.sqrt(math.log(1 + ratio**2))
    for name, mean in (("step_time_s", 0.1), ("comm_time_s", 2.0), ("step_energy_j", 1e-3), ("comm_energy_j", 2e-2)):
        values = getattr(fleet, name)
        assert (values > 0).all()
        assert abs(values.mean() - mean) <= 3 * ratio * mean / math.sqrt(n)
    p_tail = 0.5 * math.erfc((math.log(4) + sigma**2 / 2) / sigma / math.sqrt(2))
    assert abs(p_tail - 0.0344) < 5e-4  # the docstring's figure
    share = float((fleet.step_time_s > 4 * 0.1).mean())
    assert abs(share - p_tail) <= 3 * math.sqrt(p_tail * (1 - p_tail) / n)
    above_6x = {kind: float((fleet_of(kind).step_time_s > 6 * 0.1).mean()) for kind in ("lognormal", "normal")}
    assert abs(above_6x["lognormal"] - 0.0142) <= 3 * math.sqrt(0.0142 * (1 - 0.0142) / n)
    assert above_6x["normal"] <= 0.0004 + 3 * math.sqrt(0.0004 / n)
