"""Surrogate learning: the loss follows the papers' bounds exactly, AnycostFL plans meet their budgets, no torch."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from edgefl.methods import METHODS
from edgefl.errors import ScenarioError
from edgefl.learning.surrogate import anycost_contraction, luo_round_progress
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario

REL = 1e-12  # the surrogate is a product/sum of a few floats per round


def _fedavg(*extra: str):
    return load_scenario(
        "quickstart",
        ["physics=paper", "learning=surrogate", "rounds=12", "fleet.n_devices=20", "method.clients_per_round=5",
         *extra],
    )


def test_anycost_contraction_by_hand():
    # Z = 1 - (nu/lambda)(1 - eps(1 - g)): nu/lambda = 0.1, eps = 0.5, g = 0.2 -> 1 - 0.1 * (1 - 0.4) = 0.94
    assert anycost_contraction(0.2, 0.1, 0.5) == pytest.approx(0.94, rel=REL)
    assert anycost_contraction(1.0, 0.1, 0.5) == pytest.approx(0.9, rel=REL)  # full gain: plain GD rate


def test_luo_round_progress_by_hand():
    # N = 100, K = 10, E = 5, A0 = 100, B0 = 1: spread = 1 + 90/(10*99) = 1.0909..., q = 5 / (100 + 1.0909*25)
    q = luo_round_progress(10, 5.0, 100, 100.0, 1.0)
    assert q == pytest.approx(5 / (100 + (1 + 90 / 990) * 25), rel=REL)
    assert luo_round_progress(0, 5.0, 100, 100.0, 1.0) == 0.0


@pytest.mark.slow
def test_fedavg_surrogate_follows_theorem_2_with_full_gain():
    # every selected device arrives with a full update: g_t = 1, so gap_R = gap_0 (1 - nu/lambda)^R
    sc = _fedavg("surrogate.nu_over_lambda=0.1", "surrogate.epsilon=0.3", "surrogate.initial_loss=2.0",
                 "surrogate.loss_floor=0.5")  # fmt: skip
    res = run_scenario(sc)
    r = res.rounds["round"].to_numpy()
    expected = 0.5 + 1.5 * 0.9**r
    np.testing.assert_allclose(res.rounds["train_loss"].to_numpy(), expected, rtol=REL)
    assert res.rounds["learning_gain"].isna().all()  # FedAvg has no (alpha, beta): the column is empty
    assert res.rounds["test_accuracy"].isna().all()


@pytest.mark.slow
def test_deadline_drops_lower_the_gain_and_slow_the_loss():
    # with a deadline some updates arrive late: g_t = arrived / selected and Z_t follows it round by round
    free = run_scenario(_fedavg()).device_rounds  # same seed: same devices, rates and times without a deadline
    deadline = float(np.median(free["t_cmp_s"] + free["t_com_s"]))
    sc = _fedavg("round.policy=deadline", f"round.deadline_s={deadline!r}", "surrogate.nu_over_lambda=0.2",
                 "surrogate.epsilon=0.5")  # fmt: skip
    res = run_scenario(sc)
    rows = res.rounds
    assert 0 < rows["dropped"].sum() < rows["selected"].sum(), "scenario should drop some but not all updates"
    gain = rows["arrived"] / rows["selected"]  # a full update counts 1 in the bound, a late one 0
    gap = (sc.surrogate.initial_loss - sc.surrogate.loss_floor) * np.cumprod(1 - 0.2 * (1 - 0.5 * (1 - gain)))
    np.testing.assert_allclose(rows["train_loss"], sc.surrogate.loss_floor + gap, rtol=1e-10)


@pytest.mark.slow
def test_luo_surrogate_equals_bound_15_for_fixed_k_and_e():
    sc = _fedavg("surrogate.bound=luo", "surrogate.a0=50.0", "surrogate.b0=2.0", "surrogate.initial_loss=3.0",
                 "surrogate.loss_floor=0.1", "train.local_steps=4")  # fmt: skip
    res = run_scenario(sc)
    n, k, e = 20, 5, 4
    R = res.rounds["round"].to_numpy()
    bound = (50.0 + 2.0 * (1 + (n - k) / (k * (n - 1))) * e**2) / (e * R)  # Luo eq. (15)
    np.testing.assert_allclose(res.rounds["train_loss"], 0.1 + np.minimum(2.9, bound), rtol=REL)


@pytest.mark.slow
def test_surrogate_charges_planned_work():
    sc = _fedavg("surrogate.samples_per_device=100.0", "train.batch_size=10", "train.local_epochs=2",
                 "surrogate.train_flops_per_sample=1e6", "surrogate.model_parameters=1000")  # fmt: skip
    d = run_scenario(sc).device_rounds
    assert (d["flops"] == 2 * 100 * 1e6).all()  # epochs x samples x FLOPs/sample at width 1
    assert (d["bits"] == 32 * 1000).all()
    assert (d["local_steps"] == 2 * 10).all()  # 2 epochs x ceil(100 / 10)


@pytest.fixture(scope="module")
def anycost_run():
    sc = load_scenario("anycostfl_surrogate_10k", ["fleet.n_devices=300", "method.clients_per_round=300", "rounds=4"])
    return sc, run_scenario(sc)


@pytest.mark.slow
def test_anycostfl_every_device_round_meets_t_max_and_e_max(anycost_run):
    sc, res = anycost_run
    d = res.device_rounds
    trained = d[d["trained"]]
    assert len(trained) > 0.9 * len(d), "calibrated preset: most devices should be feasible"
    busy = trained["t_cmp_s"] + trained["t_com_s"]
    assert (busy <= sc.round.deadline_s * (1 + 1e-9)).all()
    assert (trained["e_cmp_j"] + trained["e_com_j"] <= trained["e_max_j"] * (1 + 1e-9)).all()
    assert (trained["bits"] <= trained["bits_planned"] * (1 + 1e-12)).all()
    assert trained["arrived"].all()  # nothing misses the deadline it was planned for
    # alpha spreads over [alpha_min, 1] and beta never exceeds beta_max
    assert trained["alpha"].min() < 0.6 and trained["alpha"].max() == pytest.approx(1.0)
    assert (trained["alpha"] >= 0.25 - 1e-12).all() and (trained["beta"] <= 1 / 15 + 1e-12).all()
    skipped = d[~d["trained"]]
    assert (skipped["reason"] != "").all() and (skipped["e_cmp_j"] == 0).all()


@pytest.mark.slow
def test_anycostfl_learning_gain_is_definition_3(anycost_run):
    sc, res = anycost_run
    d = res.device_rounds
    for r, rows in d.groupby("round"):
        arrived = rows[rows["arrived"]]
        g = float((arrived["alpha"] ** 4 * arrived["beta"]).sum() / len(rows))
        assert res.rounds.set_index("round").loc[r, "learning_gain"] == pytest.approx(g, rel=1e-12)


@pytest.mark.slow
def test_surrogate_run_never_imports_torch(tmp_path):
    code = (
        "import sys\n"
        "from edgefl.run.load import load_scenario\nfrom edgefl.run.runner import run_scenario\n"
        "from edgefl.output.results import write_run\n"
        "sc = load_scenario('anycostfl_surrogate_10k', ['fleet.n_devices=50', 'method.clients_per_round=50', 'rounds=2'])\n"
        f"write_run(run_scenario(sc), {str(tmp_path)!r})\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert math.isfinite(float((tmp_path / "rounds.csv").read_text().splitlines()[-1].split(",")[11]))


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(METHODS))
def test_surrogate_runs_the_methods_it_supports_and_rejects_the_others_in_one_line(method):
    overrides = [f"method.name={method}", "fleet.n_devices=40", "method.clients_per_round=8", "rounds=2"]
    if METHODS[method].needs.asynchronous:  # no rounds to cut, nothing to checkpoint yet
        overrides += ["round.policy=wait_all", "checkpoint_every=0", "fleet.budget.kind=none"]
    if method == "fedavg":  # the full model at f_max costs ~100 J per job here, above every E_max (<= 4.5 J)
        overrides += ["fleet.budget.kind=none"]
    if METHODS[method].needs.surrogate:
        rows = run_scenario(load_scenario("anycostfl_surrogate_10k", overrides)).rounds
        assert len(rows) == 2 and rows["train_loss"].notna().all()
    else:
        with pytest.raises(ScenarioError, match=rf"learning='surrogate' with method.name='{method}'.*learning='torch'"):
            load_scenario("anycostfl_surrogate_10k", overrides)
