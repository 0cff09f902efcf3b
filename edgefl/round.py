"""Playing one round: ``play_round(run, state) -> (state, record)``.

Data flow (DESIGN.md): mobility -> channel gains -> the server selects devices -> energy budgets -> the method
plans (with the cost model) -> SimPy round: at the devices' start the workload does the jobs' work (real
training, or the surrogate's planned work) and the cost model turns it into durations and energies -> the
workload aggregates the kept updates and assesses the new model -> the round's row and device block.

Nothing here knows which method runs or whether learning is real: the method and the workload implement their
protocols (:mod:`edgefl.algorithms.base`, :mod:`edgefl.learning.protocol`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgefl.algorithms.base import Method, RoundContext
from edgefl.costs import CostModel
from edgefl.radio import Radio
from edgefl.record import RoundRecord, device_block
from edgefl.scenario import Scenario
from edgefl.seeding import Streams
from edgefl.sim import simulate_round
from edgefl.state import RunState
from edgefl.system import Fleet, draw_budgets_j

__all__ = ["Run", "play_round", "select_devices"]


def select_devices(rng: np.random.Generator, n_devices: int, k: int) -> np.ndarray:
    """Uniform K-of-N sampling without replacement; returns sorted device ids, shape (k,)."""
    return np.sort(rng.choice(n_devices, size=k, replace=False))


@dataclass(frozen=True, eq=False)
class Run:
    """The built parts of a run (see :func:`edgefl.runner.build_run`).

    ``n_select``: devices the server starts per round (K, or more under ``over_select``); ``t_max_s``: the round
    deadline [s] (None unless ``round.policy = "deadline"``).
    """

    scenario: Scenario
    streams: Streams
    workload: Any
    fleet: Fleet
    costs: CostModel
    radio: Radio
    method: Method
    n_select: int
    t_max_s: float | None


def play_round(run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
    """Simulate round ``state.rounds_done + 1``; return the state after it and its record.

    The radio and the method advance their own memory (positions, histories) as the round is played.
    """
    sc, fleet, costs, radio, streams, method, wl = (
        run.scenario, run.fleet, run.costs, run.radio, run.streams, run.method, run.workload
    )  # fmt: skip
    r = state.rounds_done + 1
    rcfg, n = sc.round, fleet.n_devices
    wall0 = time.perf_counter()
    distance_m, gain = radio.round_state(r)
    selected = select_devices(streams.numpy("selection", r), n, run.n_select)
    e_max = draw_budgets_j(sc.fleet.budget, n, streams.numpy("budgets", r))
    sel_mask = np.zeros(n, dtype=bool)
    sel_mask[selected] = True
    ctx = RoundContext(
        round_index=r,
        selected=selected,
        rate_bps=radio.rates_bps(gain, fleet.tx_power_w, sel_mask),
        e_max_j=e_max,
        t_budget_s=None if run.t_max_s is None else run.t_max_s - rcfg.downlink_s,
        costs=costs,
        rng=streams.numpy("method", r),
    )
    plan = method.plan_round(ctx)
    jobs = plan.jobs
    dev = jobs.device
    tx_mask = np.zeros(n, dtype=bool)
    tx_mask[dev] = True
    rate = radio.rates_bps(gain, fleet.tx_power_w, tx_mask)  # sub-bands of the devices that transmit
    done: dict[str, Any] = {}

    def start() -> tuple[np.ndarray, np.ndarray]:
        """At the devices' start: the jobs' work, charged by the cost model from what was really done."""
        work = done["work"] = wl.work(method, jobs, state.model, r)
        t_cmp, done["e_cmp"] = costs.compute(dev, cycles=costs.cycles(dev, work.flops), steps=work.steps, f_hz=jobs.cpu_hz)
        t_com, done["e_com"] = costs.upload(dev, bits=work.bits, rate_bps=rate[dev])
        return t_cmp, t_com

    outcome = simulate_round(
        start_s=state.sim_time_s, jobs=range(len(jobs)), durations=start, policy=rcfg.policy,
        deadline_s=rcfg.deadline_s, keep=sc.method.clients_per_round, downlink_s=rcfg.downlink_s,
    )  # fmt: skip
    work, e_cmp, e_com = done["work"], done["e_cmp"], done["e_com"]
    kept = outcome.kept_index  # arrival order
    model = wl.advance(method, state.model, jobs, work, kept, int(selected.size))
    block = device_block(
        r, plan, outcome, work, distance_m, rate, e_max, run.t_max_s, e_cmp=e_cmp, e_com=e_com,
        extra=method.device_values(jobs, work.updates),
    )  # fmt: skip
    energy = float(np.sum(e_cmp) + np.sum(e_com))  # every job trained and transmitted, kept or not
    evaluate = r % sc.train.eval_every == 0 or r == sc.rounds
    seen = wl.assess(method, model, work, evaluate=evaluate, global_loss=sc.train.global_loss)
    row = {
        "round": r,
        "sim_time_s": outcome.end_s,
        "round_time_s": outcome.end_s - outcome.start_s,
        "energy_j": energy,
        "energy_cum_j": state.energy_cum_j + energy,
        "selected": int(selected.size),
        "arrived": int(kept.size),
        "dropped": len(jobs) - int(kept.size),
        "bits_up": float(np.sum(work.bits)),
        "test_accuracy": seen.test_accuracy,
        "test_loss": seen.test_loss,
        "train_loss": seen.train_loss,
        "wall_time_s": time.perf_counter() - wall0,
        "skipped": int(plan.skipped_device.size),
        "learning_gain": method.learning_gain(jobs.take(kept), int(selected.size)),
    }
    if sc.train.global_loss:
        row["global_train_loss"] = seen.global_train_loss
    after = RunState(rounds_done=r, sim_time_s=outcome.end_s, energy_cum_j=row["energy_cum_j"], model=model)
    return after, RoundRecord(row, block)
