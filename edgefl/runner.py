"""Build a run from a scenario and drive it round by round through the SimPy engine.

Data flow per round (DESIGN.md): mobility -> channel gains -> server selects devices -> energy budgets ->
method plans -> SimPy round (real training inside) -> aggregate kept updates -> evaluate -> record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from edgefl.algorithms import ClientUpdate, DeviceJob, RoundContext, make_method
from edgefl.learning.workload import Workload
from edgefl.radio import Radio
from edgefl.results import DEVICE_COLUMNS, ROUND_COLUMNS, RunResult
from edgefl.scenario import Scenario
from edgefl.seeding import Streams
from edgefl.sim import RoundOutcome, simulate_round
from edgefl.system import Fleet, compute_energy_j, draw_budgets_j, upload_energy_j

__all__ = ["run_scenario", "select_devices", "Simulation", "RunInterrupted"]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: ``result`` holds every round completed before it (the round in progress is dropped)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"interrupted after {len(result.rounds)} complete rounds")
        self.result = result


ProgressFn = Callable[[dict[str, Any]], None]


def select_devices(rng: np.random.Generator, n_devices: int, k: int) -> np.ndarray:
    """Uniform K-of-N sampling without replacement; returns sorted device ids, shape (k,)."""
    return np.sort(rng.choice(n_devices, size=k, replace=False))


def run_scenario(scenario: Scenario, *, progress: ProgressFn | None = None) -> RunResult:
    """Run ``scenario`` to completion and return its tables. ``progress`` is called with each round's row.

    Ctrl-C raises :class:`RunInterrupted` carrying every round completed so far.
    """
    sim = Simulation(scenario)
    try:
        for r in range(1, scenario.rounds + 1):
            row = sim.step(r)
            if progress is not None:
                progress(row)
    except KeyboardInterrupt:
        raise RunInterrupted(sim.result()) from None
    return sim.result()


class Simulation:
    """One run's state between rounds: global model, simulated clock, cumulative energy, recorded rows."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.streams = streams = Streams(scenario.seed)
        self.workload = Workload(scenario, streams)
        self.fleet = Fleet.from_config(scenario.fleet, self.workload.n_samples, streams.numpy("fleet"))
        self.radio = Radio(scenario.channel, scenario.fleet.n_devices, streams)
        self.method = make_method(scenario.method.name, scenario=scenario, workload=self.workload)
        self.state = self.workload.initial_state()
        rcfg = scenario.round
        k, n = scenario.method.clients_per_round, scenario.fleet.n_devices
        self.n_select = min(n, math.ceil(k * (1 + rcfg.over_select_fraction))) if rcfg.policy == "over_select" else k
        self.t_max = rcfg.deadline_s if rcfg.policy == "deadline" else None
        self.sim_time_s = 0.0
        self.energy_cum_j = 0.0
        self.round_rows: list[dict[str, Any]] = []
        self.device_rows: list[dict[str, Any]] = []

    def step(self, r: int) -> dict[str, Any]:
        """Simulate round ``r`` (rounds in order, from 1); record and return its ``rounds`` row.

        Rows are recorded only once the round is complete, so an interruption never leaves half a round.
        """
        sc, fleet, radio, streams = self.scenario, self.fleet, self.radio, self.streams
        rcfg, n = sc.round, fleet.n_devices
        wall0 = time.perf_counter()
        distance_m, gain = radio.round_state(r)
        selected = select_devices(streams.numpy("selection", r), n, self.n_select)
        e_max = draw_budgets_j(sc.fleet.budget, n, streams.numpy("budgets", r))
        sel_mask = np.zeros(n, dtype=bool)
        sel_mask[selected] = True
        ctx = RoundContext(
            round_index=r,
            selected=selected,
            fleet=fleet,
            rate_bps=radio.rates_bps(gain, fleet.tx_power_w, sel_mask),
            e_max_j=e_max,
            t_max_s=self.t_max,
            rng=streams.numpy("method", r),
        )
        plan = self.method.plan_round(ctx)
        tx_mask = np.zeros(n, dtype=bool)
        tx_mask[[j.device for j in plan.jobs]] = True
        rate = radio.rates_bps(gain, fleet.tx_power_w, tx_mask)  # sub-bands of the devices that transmit
        state = self.state

        def train(job: DeviceJob) -> ClientUpdate:
            return self.method.client_update(job, state, r)

        def cost(job: DeviceJob, upd: ClientUpdate) -> tuple[float, float]:
            cycles = upd.flops / fleet.flops_per_cycle[job.device]
            return cycles / job.cpu_hz, upd.bits / rate[job.device]

        outcome = simulate_round(
            start_s=self.sim_time_s,
            jobs=plan.jobs,
            train=train,
            cost=cost,
            policy=rcfg.policy,
            deadline_s=rcfg.deadline_s,
            keep=sc.method.clients_per_round,
            downlink_s=rcfg.downlink_s,
        )
        kept = outcome.kept
        new_state = self.method.aggregate(state, [d.update for d in kept])
        rows = _device_rows(r, outcome, plan.skipped, fleet, distance_m, rate, e_max, self.t_max)
        energy = float(sum(row["e_cmp_j"] + row["e_com_j"] for row in rows if row["trained"]))
        evaluate = r % sc.train.eval_every == 0 or r == sc.rounds
        acc, loss = self.workload.evaluate(new_state) if evaluate else (math.nan, math.nan)
        trained = outcome.devices  # every job trained and transmitted, kept or not
        row = {
            "round": r,
            "sim_time_s": outcome.end_s,
            "round_time_s": outcome.end_s - outcome.start_s,
            "energy_j": energy,
            "energy_cum_j": self.energy_cum_j + energy,
            "selected": int(selected.size),
            "arrived": len(kept),
            "dropped": len(trained) - len(kept),
            "bits_up": float(sum(d.update.bits for d in trained)),
            "test_accuracy": acc,
            "test_loss": loss,
            "train_loss": float(np.mean([d.update.train_loss for d in trained])) if trained else math.nan,
            "wall_time_s": time.perf_counter() - wall0,
            "skipped": len(plan.skipped),
        }
        # commit the round
        self.state, self.sim_time_s, self.energy_cum_j = new_state, outcome.end_s, row["energy_cum_j"]
        self.device_rows.extend(rows)
        self.round_rows.append(row)
        return row

    def result(self) -> RunResult:
        """The tables of every completed round (the summary derives from them)."""
        return RunResult(
            scenario=self.scenario,
            rounds=_frame(self.round_rows, ROUND_COLUMNS),
            device_rounds=_frame(self.device_rows, DEVICE_COLUMNS),
        )


def _budget(e_max_j: float) -> float:
    """E_max as recorded: empty (NaN) when the scenario sets no budget."""
    return float(e_max_j) if np.isfinite(e_max_j) else math.nan


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(columns))
    extra = [c for c in df.columns if c not in columns]
    return df[list(columns) + extra]


def _device_rows(
    r: int,
    outcome: RoundOutcome,
    skipped,
    fleet: Fleet,
    distance_m: np.ndarray,
    rate: np.ndarray,
    e_max: np.ndarray,
    t_max: float | None,
) -> list[dict[str, Any]]:
    nan = math.nan
    rows = []
    for tl in outcome.devices:
        job: DeviceJob = tl.job
        upd: ClientUpdate = tl.update
        d = job.device
        cycles = upd.flops / fleet.flops_per_cycle[d]
        rows.append(
            {
                "round": r, "device": d, "selected": True, "trained": True, "feasible": True, "reason": "",
                "arrived": tl.kept, "distance_m": float(distance_m[d]), "rate_bps": float(rate[d]),
                "cpu_hz": job.cpu_hz, "width": job.width, "alpha": job.alpha, "beta": job.beta,
                "local_steps": upd.steps, "t_cmp_s": tl.t_cmp_s, "t_com_s": tl.t_com_s,
                "e_cmp_j": float(compute_energy_j(cycles, job.cpu_hz, fleet.energy_coeff[d])),
                "e_com_j": float(upload_energy_j(fleet.tx_power_w[d], tl.t_com_s)),
                "bits_planned": job.bits_planned, "bits": upd.bits,
                "t_max_s": nan if t_max is None else t_max, "e_max_j": _budget(e_max[d]),
                "t_start_s": tl.t_start_s - outcome.start_s, "t_arrive_s": tl.t_arrive_s - outcome.start_s,
                "flops": upd.flops, "train_loss": upd.train_loss,
                "t_cmp_planned_s": job.t_cmp_planned_s, "t_com_planned_s": job.t_com_planned_s,
                "e_cmp_planned_j": job.e_cmp_planned_j, "e_com_planned_j": job.e_com_planned_j,
            }
        )  # fmt: skip
    for s in skipped:
        d = s.device
        rows.append(
            {
                "round": r, "device": d, "selected": True, "trained": False, "feasible": False, "reason": s.reason,
                "arrived": False, "distance_m": float(distance_m[d]), "rate_bps": nan, "cpu_hz": nan,
                "width": nan, "alpha": nan, "beta": nan, "local_steps": 0, "t_cmp_s": 0.0, "t_com_s": 0.0,
                "e_cmp_j": 0.0, "e_com_j": 0.0, "bits_planned": nan, "bits": 0.0,
                "t_max_s": nan if t_max is None else t_max, "e_max_j": _budget(e_max[d]),
                "t_start_s": nan, "t_arrive_s": nan, "flops": 0.0, "train_loss": nan,
                "t_cmp_planned_s": nan, "t_com_planned_s": nan, "e_cmp_planned_j": nan, "e_com_planned_j": nan,
            }
        )  # fmt: skip
    rows.sort(key=lambda row: row["device"])
    return rows
