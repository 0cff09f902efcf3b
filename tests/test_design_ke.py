"""Luo et al.'s design loop in the simulator (edgefl.design, `edgefl design ke`).

Expected values: Lemma 1 (eq. 10) and Lemma 2 (eq. 13) for the mean per-round energy and time of a fixed (K, E),
checked against many simulated rounds within 3 standard errors; the surrogate's rounds to a loss follow bound
(15) exactly, R = ceil((A0 + B0 F(K) E^2) / (E (F - floor))), so eqs. (23)-(25) must give back A0/B0.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from edgefl.cli.design import register
from edgefl.design import (
    RunCache,
    design_ke,
    design_scenario,
    estimate_ratio,
    grid_optimum,
    grid_table,
    measure_device_costs,
    run_until_loss,
)
from edgefl.errors import ScenarioError
from edgefl.run.runner import Simulation
from edgefl.run.load import load_scenario
from optimizers.cost_effective import participation_factor

SURROGATE = [
    "learning=surrogate", "surrogate.bound=luo", "surrogate.a0=20", "surrogate.b0=1", "surrogate.initial_loss=10",
    "surrogate.loss_floor=0", "fleet.n_devices=20", "surrogate.samples_per_device=[30, 100]",
]  # fmt: skip
ROUNDS = 800
SE_TOL = 3.0  # standard errors


def _mean_and_se(x: np.ndarray) -> tuple[float, float]:
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(x.size))


def simulated_round_means(sim: Simulation, rounds: int, t_pred: float, e_pred: float) -> tuple[float, float]:
    """Play ``rounds`` rounds of ``sim`` and check that the mean round time [s] and energy [J] lie within
    ``SE_TOL`` standard errors of ``t_pred`` and ``e_pred``; return the round time's (mean, standard error)."""
    for r in range(1, rounds + 1):
        sim.step(r)
    table = sim.result().rounds
    t_mean, t_se = _mean_and_se(table["round_time_s"].to_numpy())
    e_mean, e_se = _mean_and_se(table["energy_j"].to_numpy())
    assert abs(t_mean - t_pred) < SE_TOL * t_se, (t_mean, t_pred, t_se)
    assert abs(e_mean - e_pred) < SE_TOL * e_se, (e_mean, e_pred, e_se)
    return t_mean, t_se


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        ["fleet.step_costs.kind=normal"],  # the paper's simulation setups: normal per-device draws
        [  # the physical cost model: FLOPs / (flops_per_cycle f), eps f^2 cycles, bits / rate, P t
            "fleet.step_costs.kind=none", "fleet.f_max_hz=[0.2e9, 1e9]", "fleet.energy_coeff=[5e-27, 1e-26]",
            "fleet.flops_per_cycle=1.0", "channel.mobility=static", "channel.rayleigh=false",
            "surrogate.train_flops_per_sample=2e6", "surrogate.model_parameters=100000",
        ],
    ],
    ids=["step_costs", "cost_model"],
)
def test_lemma_1_2_predict_simulated_round_time_and_energy(extra):
    k, e = 5, 3
    sc = load_scenario("luo_setup3", SURROGATE + extra + [f"method.clients_per_round={k}", f"train.local_steps={e}",
                                                         f"rounds={ROUNDS}"])  # fmt: skip
    sim = Simulation(sc)
    costs = measure_device_costs(sim)
    t_pred, e_pred = costs.expected_round(k, e)
    # heterogeneous devices: the straggler mean lies well above the mean device (the test can fail)
    assert t_pred > 1.05 * (costs.means()["t_p_s"] * e + costs.means()["t_m_s"])
    simulated_round_means(sim, ROUNDS, t_pred, e_pred)


@pytest.mark.slow
def test_cost_model_source_matches_charged_device_rows():
    sc = load_scenario("luo_setup3", SURROGATE + ["fleet.step_costs.kind=none", "channel.mobility=static",
                                                 "train.local_steps=4", "rounds=3"])  # fmt: skip
    sim = Simulation(sc)
    costs = measure_device_costs(sim)
    assert costs.source == "cost_model"
    for r in range(1, 4):
        sim.step(r)
    d = sim.result().device_rounds
    dev = d["device"].to_numpy()
    np.testing.assert_allclose(d["t_cmp_s"], 4 * costs.t_p_s[dev], rtol=1e-12)
    np.testing.assert_allclose(d["e_cmp_j"], 4 * costs.e_p_j[dev], rtol=1e-12)
    np.testing.assert_allclose(d["t_com_s"], costs.t_m_s[dev], rtol=1e-12)
    np.testing.assert_allclose(d["e_com_j"], costs.e_m_j[dev], rtol=1e-12)


def _bound_rounds(k: int, e: int, loss: float, *, n: int = 20, a0: float = 20.0, b0: float = 1.0) -> int:
    """Surrogate rounds to reach ``loss``: gap_R = (A0 + B0 F(K) E^2) / (E R) <= loss (floor 0), bound (15)."""
    return math.ceil((a0 + b0 * participation_factor(k, n) * e * e) / (e * loss) - 1e-9)


@pytest.mark.slow
def test_a0_over_b0_is_recovered_from_recorded_round_counts():
    base = load_scenario("luo_setup3", SURROGATE + ["rounds=400"])
    cache = RunCache(base, max_rounds=400)
    samples = [(2, 1), (5, 4), (20, 8), (10, 2), (4, 10)]
    est = estimate_ratio(cache, samples, f_a=0.5, f_b=0.25, seeds=[0])
    for rec, (k, e) in zip(est.samples, samples):
        assert (rec.r_a, rec.r_b) == (_bound_rounds(k, e, 0.5), _bound_rounds(k, e, 0.25))
    assert est.a0_over_b0 == pytest.approx(20.0, rel=0.05)  # ceil() of R is the only error
    assert est.iterations == sum(r.r_b * r.e for r in est.samples)  # numerator of eq. (26)
    assert cache.simulated == len(samples)
    est2 = estimate_ratio(cache, samples, f_a=0.5, f_b=0.25, seeds=[0])  # every run read back, none repeated
    assert cache.simulated == len(samples) and est2 == est


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_prefetch_plan_runs_each_design_once_to_the_lowest_of_its_targets(jobs):
    base = load_scenario("luo_setup3", SURROGATE + ["rounds=400"])
    cache = RunCache(base, max_rounds=400)
    # (5, 4) is both a sample (to F_b = 0.25) and a grid design (to 0.2): one run, to 0.2
    cache.prefetch_plan([((2, 1, 0), (0.5, 0.25)), ((5, 4, 0), (0.5, 0.25)), ((5, 4, 0), (0.2,)), ((20, 8, 0), (0.2,))],
                        jobs=jobs)  # fmt: skip
    assert cache.simulated == 3
    assert cache.runs[(2, 1, 0)].rounds == _bound_rounds(2, 1, 0.25)  # a sample stops at F_b
    assert cache.runs[(5, 4, 0)].rounds == _bound_rounds(5, 4, 0.2)
    assert cache.runs[(20, 8, 0)].rounds == _bound_rounds(20, 8, 0.2)
    cache.prefetch([(2, 1, 0), (20, 8, 0)], (0.25,), jobs=jobs)  # already settled: nothing is simulated again
    assert cache.simulated == 3


@pytest.mark.slow
def test_design_k_is_non_increasing_in_gamma_and_grid_optimum_is_cheapest():
    base = load_scenario("luo_setup3", SURROGATE + ["rounds=400", "fleet.step_costs.kind=normal"])
    cache = RunCache(base, max_rounds=400)
    from edgefl.design import mean_costs

    costs = mean_costs(base, [0])
    est = estimate_ratio(cache, [(2, 1), (5, 4), (20, 8), (10, 2)], f_a=0.5, f_b=0.25, seeds=[0])
    designs = [design_ke(cache, costs, est, gamma=g, target=0.2, seeds=[0]) for g in (0.0, 0.5, 1.0)]
    ks = [d.k for d in designs]
    assert ks[0] == 20 and ks[-1] == 1 and ks == sorted(ks, reverse=True)  # Theorems 2 and 3
    grid = grid_table(cache, [1, 5, 20], [1, 4, 8], target=0.2, seeds=[0])
    for g in (0.0, 1.0):
        best = grid_optimum(grid, g)
        assert best.cost(g) == min(o.cost(g) for o in grid)
    d0 = designs[0]
    assert d0.overhead_iterations == pytest.approx(est.iterations / (d0.outcome.rounds * d0.e))


@pytest.fixture()
def one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny logreg: threads only contend on a shared machine
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_run_until_loss_stops_at_first_hit_with_real_training(one_torch_thread):
    base = load_scenario("luo_setup3", ["fleet.n_devices=10", "rounds=40"])
    sc = design_scenario(base, k=4, e=4)
    run = run_until_loss(sc, [2.25, 2.15])
    assert run.rounds >= 2 and run.loss[-1] <= 2.15 and np.all(run.loss[:-1] > 2.15)  # stops at the first hit
    hit = run.hit(2.25)
    assert hit is not None and np.all(run.loss[: hit.rounds - 1] > 2.25) and run.loss[hit.rounds - 1] <= 2.25
    # the same scenario run by the plain runner records the same trajectory, time and energy
    sim = Simulation(sc)
    rows = [sim.step(r) for r in range(1, run.rounds + 1)]
    np.testing.assert_array_equal(run.loss, [row["global_train_loss"] for row in rows])
    assert hit.time_s == rows[hit.rounds - 1]["sim_time_s"] and hit.energy_j == rows[hit.rounds - 1]["energy_cum_j"]


def test_run_until_loss_needs_the_global_loss():
    sc = load_scenario("luo_setup3", ["train.global_loss=false"])
    with pytest.raises(ScenarioError, match="train.global_loss"):
        run_until_loss(sc, [1.0])


# ---------------------------------------------------------------------------------------------- CLI


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("placeholder")
    def _placeholder() -> None:  # a Typer app with one sub-app needs a sibling to keep the group name
        pass

    return app


def _scenario_file(tmp_path) -> str:
    from edgefl.scenario.loading import scenario_to_toml

    sc = load_scenario("luo_setup3", SURROGATE + ["rounds=400", "fleet.step_costs.kind=normal",
                                                 "method.luo.measured_samples=[[1, 1], [1, 4], [3, 2], [3, 4], [20, 1], [20, 3]]"])  # fmt: skip
    path = tmp_path / "surrogate.toml"
    path.write_text(scenario_to_toml(sc), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_cli_design_ke_json(tmp_path):
    args = ["design", "ke", _scenario_file(tmp_path), "--rule", "paper", "--gamma", "0.5", "--samples", "2x1,5x4,20x8,10x2",
            "--f-a", "0.5", "--f-b", "0.25", "--f-target", "0.2", "--exhaustive", "--grid-k", "1,5,20",
            "--grid-e", "1,4,8", "--tradeoff", str(tmp_path / "trade"), "--json"]  # fmt: skip
    res = CliRunner().invoke(_app(), args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in ("rule", "K", "E", "a0_over_b0", "overhead", "overhead_iterations", "cost", "K_opt", "E_opt", "cost_opt",
                "optimality_error", "samples", "grid", "rounds", "time_s", "energy_j"):  # fmt: skip
        assert key in out
    assert out["rule"] == "paper"
    assert out["a0_over_b0"] == pytest.approx(20.0, rel=0.05)
    assert out["cost"] == pytest.approx(0.5 * out["time_s"] + 0.5 * out["energy_j"])
    assert out["optimality_error"] == pytest.approx(out["cost"] / out["cost_opt"] - 1.0)
    assert (tmp_path / "trade" / "tradeoff.csv").is_file() and (tmp_path / "trade" / "tradeoff.html").is_file()
    import pandas as pd

    trade = pd.read_csv(tmp_path / "trade" / "tradeoff.csv")  # both rules at every gamma, with the grid optimum
    assert set(trade["rule"]) == {"paper", "measured"} and len(trade) == 2 * 11 and trade["cost_opt"].notna().all()
    html = (tmp_path / "trade" / "tradeoff.html").read_text()
    assert "measured rule" in html and "Algorithm 2 (paper rule)" in html and "grid optimum" in html
    assert res.stderr.count("run K=") == out["simulated_runs"]  # one progress line per simulated run
