"""The invariant that makes comparisons fair (docs/architecture.md, "The cost model"): a device-round that trains as planned is
charged exactly what was planned, for every registered method, in both cost modes, under both round policies, and
under both physics (the realistic one's static and circuit power, and the papers').

Compute time and energy must equal the plan to ``COMPUTE_RTOL``; upload time, energy and bits may only be
lower than planned (a real encoded payload can come out smaller than its budget, and the sub-band of a
device can only widen when fewer devices transmit than were selected). A method that cannot plan in a mode
must refuse the scenario at load, in one line naming the method and the cost mode (or the need it lacks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from edgefl.methods import METHODS
from edgefl.errors import ScenarioError
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario

COMPUTE_RTOL = 1e-9  # floating-point rounding only: plan and charge evaluate the same formula
UPLOAD_SLACK = 1e-12  # relative; "at most the plan" up to rounding

BASE = [
    "rounds=3", "checkpoint_every=0", "fleet.n_devices=12", "method.clients_per_round=6", "model.hidden=[16]",
    "train.local_epochs=1", "fleet.budget.kind=uniform", "fleet.budget.low_j=0.002", "fleet.budget.high_j=0.02",
    "method.heterofl.levels=['a','b','c']", "method.heterofl.assignment=capability",
    "method.ccfedavg.strategy=3", "method.ccfedavg.beta=3", "method.fednova.beta=3", "method.fedavg_dropout.beta=3",
]  # fmt: skip
MODES = {
    # the quickstart's realistic physics (static power, circuit power and PA efficiency, downloads): an upload of
    # the small MLP costs ~0.05 J at 2.6 W, so the budgets are larger than the papers' physics needs
    "physical": ["fleet.budget.low_j=0.05", "fleet.budget.high_j=0.5"],
    "physical-paper": ["physics=paper"],  # the papers' physics: eps f^2 c, P_tx t
    "per_step": ["fleet.step_costs.kind=normal", "fleet.budget.low_j=0.1", "fleet.budget.high_j=0.5"],
}
POLICIES = {"wait_all": ["round.policy=wait_all"], "deadline": ["round.policy=deadline", "round.deadline_s=2.0"]}
PER_STEP_DEADLINE = ["round.deadline_s=30.0"]  # per-step costs: ~0.1 s per step and 2 s per upload


def _overrides(method: str, mode: str, policy: str) -> list[str]:
    sets = [*BASE, f"method.name={method}", *MODES[mode], *POLICIES[policy]]
    if mode == "per_step" and policy == "deadline":
        sets += PER_STEP_DEADLINE
    return sets


def _refusal(method: str, mode: str, policy: str) -> str | None:
    """The fragment of the load-time error a method must give, or None if it must run."""
    needs = METHODS[method].needs
    if METHODS[method].needs.asynchronous and policy != "wait_all":
        return "an asynchronous method has no rounds to cut"
    if needs.deadline and policy != "deadline":
        return "plans for a deadline"
    cost_mode = mode.split("-")[0]
    if cost_mode not in needs.cost_modes:
        return f"plans only under the {' or '.join(needs.cost_modes)} cost model, not '{cost_mode}'"
    return None


def _check(rows: pd.DataFrame) -> int:
    """Assert the invariant on every job row; return how many rows were checked."""
    jobs = rows[rows["feasible"]]
    assert len(jobs) > 0, "no job ran: the case checks nothing"
    np.testing.assert_allclose(jobs["t_cmp_s"], jobs["t_cmp_planned_s"], rtol=COMPUTE_RTOL, atol=0)
    np.testing.assert_allclose(jobs["e_cmp_j"], jobs["e_cmp_planned_j"], rtol=COMPUTE_RTOL, atol=0)
    for charged, planned in (("t_com_s", "t_com_planned_s"), ("e_com_j", "e_com_planned_j"), ("bits", "bits_planned")):
        over = jobs[charged] > jobs[planned] * (1 + UPLOAD_SLACK)
        assert not over.any(), f"{charged} above {planned}:\n{jobs.loc[over, ['device', charged, planned]]}"
    return len(jobs)


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("method", sorted(METHODS))
def test_planned_equals_charged(method, mode, policy):
    sets = _overrides(method, mode, policy)
    refusal = _refusal(method, mode, policy)
    if refusal is not None:
        with pytest.raises(ScenarioError, match=rf"method.name='{method}'.*{refusal}") as info:
            load_scenario("quickstart", sets)
        assert "\n" not in str(info.value)
        return
    rows = run_scenario(load_scenario("quickstart", sets)).device_rounds
    _check(rows)


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(m for m, cls in METHODS.items() if cls.needs.surrogate))
def test_planned_equals_charged_under_surrogate_learning(method):
    sets = ["rounds=2", "fleet.n_devices=40", "method.clients_per_round=40", f"method.name={method}",
            "fleet.budget.low_j=20", "fleet.budget.high_j=40"]  # fmt: skip
    if METHODS[method].needs.asynchronous:  # no rounds to cut, nothing to checkpoint yet
        sets += ["round.policy=wait_all", "checkpoint_every=0"]
    rows = run_scenario(load_scenario("anycostfl_surrogate_10k", sets)).device_rounds
    _check(rows)


ABLATIONS = ["no_ems", "no_fgc", "no_aio"]  # AnycostFL's Fig. 5(a) ablations plan with the same cost model


@pytest.mark.slow
@pytest.mark.parametrize("ablation", ABLATIONS)
def test_planned_equals_charged_for_anycostfl_ablations(ablation):
    sets = [*_overrides("anycostfl", "physical", "deadline"), f'method.anycostfl.ablation="{ablation}"']
    _check(run_scenario(load_scenario("quickstart", sets)).device_rounds)


@pytest.mark.slow
@pytest.mark.parametrize("ablation", ABLATIONS)
def test_planned_equals_charged_for_anycostfl_ablations_under_surrogate_learning(ablation):
    sets = ["rounds=2", "fleet.n_devices=40", "method.clients_per_round=40", "method.name=anycostfl",
            "fleet.budget.low_j=20", "fleet.budget.high_j=40", f'method.anycostfl.ablation="{ablation}"']  # fmt: skip
    _check(run_scenario(load_scenario("anycostfl_surrogate_10k", sets)).device_rounds)


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(m for m, cls in METHODS.items() if not cls.needs.asynchronous))
def test_planned_equals_charged_under_tdma(method):
    """Under ``channel.access = "tdma"`` every method plans with the whole band's rate, the rate each upload gets
    in its slot, so a job that runs as planned is charged its plan (the wait for the channel is idle time, charged
    apart in ``e_idle_j``); a method that needs a deadline is refused (TDMA runs without one)."""
    sets = [*_overrides(method, "physical", "wait_all"), "channel.access=tdma", "channel.bandwidth_mode=split"]
    if METHODS[method].needs.deadline:
        with pytest.raises(ScenarioError, match=rf"method.name='{method}'.*plans for a deadline") as info:
            load_scenario("quickstart", sets)
        assert "\n" not in str(info.value)
        return
    rows = run_scenario(load_scenario("quickstart", sets)).device_rounds
    assert (rows["t_wait_s"] > 0).any(), "nobody waited for the channel: the case checks nothing"
    _check(rows)
