"""Build a run from a scenario and drive it round by round through the SimPy engine.

Data flow per round (DESIGN.md): mobility -> channel gains -> server selects devices -> energy budgets ->
method plans -> SimPy round (real training inside) -> aggregate kept updates -> evaluate -> record.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from edgefl.algorithms import ClientUpdate, RoundContext, RoundPlan, make_method
from edgefl.learning.surrogate import learning_gain
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


def run_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
) -> RunResult:
    """Run ``scenario`` to completion and return its tables. ``progress`` is called with each round's row.

    With ``checkpoint_dir``, the run's state is written there every ``scenario.checkpoint_every`` rounds (and
    on Ctrl-C); with ``resume=True`` it continues from the checkpoint found there (from round 1 if none).
    Ctrl-C raises :class:`RunInterrupted` carrying every round completed so far.
    """
    sim = Simulation(scenario)
    every = scenario.checkpoint_every
    if resume and checkpoint_dir is not None:
        sim.restore(checkpoint_dir)
    try:
        for r in range(sim.rounds_done + 1, scenario.rounds + 1):
            row = sim.step(r)
            if checkpoint_dir is not None and every and r % every == 0 and r < scenario.rounds:
                sim.save(checkpoint_dir)
            if progress is not None:
                progress(row)
    except KeyboardInterrupt:
        if checkpoint_dir is not None:
            sim.save(checkpoint_dir)  # the last completed round: `edgefl run --resume` continues from it
        raise RunInterrupted(sim.result()) from None
    return sim.result(final=True)


class Simulation:
    """One run's state between rounds: global model, simulated clock, cumulative energy, recorded rows.

    ``learning = "torch"`` trains each job for real inside the SimPy round; ``"surrogate"`` charges the
    planned work of each job and moves the loss with the scenario's convergence bound (no torch import).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.streams = streams = Streams(scenario.seed)
        self.surrogate = scenario.learning == "surrogate"
        if self.surrogate:
            from edgefl.learning.surrogate import SurrogateWorkload

            self.workload: Any = SurrogateWorkload(scenario, streams)
        else:
            from edgefl.learning.workload import Workload

            self.workload = Workload(scenario, streams)
        self.fleet = Fleet.from_config(
            scenario.fleet, self.workload.n_samples, streams.numpy("fleet"), streams.numpy("step_costs")
        )
        self.radio = Radio(scenario.channel, scenario.fleet.n_devices, streams)
        self.method = make_method(scenario.method.name, scenario=scenario, workload=self.workload)
        self.state = self.workload.initial_state()
        rcfg = scenario.round
        k, n = scenario.method.clients_per_round, scenario.fleet.n_devices
        self.n_select = min(n, math.ceil(k * (1 + rcfg.over_select_fraction))) if rcfg.policy == "over_select" else k
        self.t_max = rcfg.deadline_s if rcfg.policy == "deadline" else None
        self.rounds_done = 0
        self.sim_time_s = 0.0
        self.energy_cum_j = 0.0
        self.round_rows: list[dict[str, Any]] = []
        self.device_blocks: list[dict[str, np.ndarray]] = []  # one block of columns per round
        self._saved_blocks = 0  # blocks already in the checkpoint's segment files

    def step(self, r: int) -> dict[str, Any]:
        """Simulate round ``r`` (rounds in order, from 1); record and return its ``rounds`` row.

        Rows are recorded only once the round is complete, so an interruption never leaves half a round.
        """
        if r != self.rounds_done + 1:
            raise ValueError(f"round {r}: the next round to simulate is {self.rounds_done + 1}")
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
        jobs = plan.jobs
        dev = jobs.device
        tx_mask = np.zeros(n, dtype=bool)
        tx_mask[dev] = True
        rate = radio.rates_bps(gain, fleet.tx_power_w, tx_mask)  # sub-bands of the devices that transmit
        fpc = fleet.flops_per_cycle[dev]
        per_step = fleet.has_step_costs  # Luo et al.: time and energy per SGD step and per upload, given

        def times(at, flops, bits, steps):
            """Charged compute and upload time [s] of the jobs ``at`` (an index or all) from what they did."""
            if per_step:
                return steps * fleet.step_time_s[dev[at]], np.where(bits > 0, fleet.comm_time_s[dev[at]], 0.0)
            return flops / fpc[at] / jobs.cpu_hz[at], bits / rate[dev[at]]

        if self.surrogate:  # charge the planned work: FLOPs of the width-w submodel, the planned bits
            wl = self.workload
            flops = wl.flops_per_sample(jobs.width) * wl.samples_per_round(dev)
            bits = np.where(np.isnan(jobs.bits_planned), float(wl.update_bits), jobs.bits_planned)
            steps, losses = jobs.local_steps, np.full(len(jobs), math.nan)
            outcome = simulate_round(
                start_s=self.sim_time_s, jobs=range(len(jobs)), durations=times(slice(None), flops, bits, steps),
                policy=rcfg.policy, deadline_s=rcfg.deadline_s, keep=sc.method.clients_per_round,
                downlink_s=rcfg.downlink_s,
            )  # fmt: skip
        else:
            state, method = self.state, self.method
            together: dict[str, list[ClientUpdate] | None] = {}

            def train(i: int) -> ClientUpdate:  # real torch training, at the device's start
                if not together:  # the round's first start: train every job together if the method can
                    together["updates"] = method.client_updates(jobs, state, r)
                done = together["updates"]
                return method.client_update(jobs[i], state, r) if done is None else done[i]

            def cost(i: int, upd: ClientUpdate) -> tuple[float, float]:
                t_cmp, t_com = times(i, upd.flops, upd.bits, upd.steps)
                return float(t_cmp), float(t_com)

            outcome = simulate_round(
                start_s=self.sim_time_s, jobs=range(len(jobs)), train=train, cost=cost, policy=rcfg.policy,
                deadline_s=rcfg.deadline_s, keep=sc.method.clients_per_round, downlink_s=rcfg.downlink_s,
            )  # fmt: skip
            ups = outcome.updates
            flops = np.array([u.flops for u in ups], dtype=float)
            bits = np.array([u.bits for u in ups], dtype=float)
            steps = np.array([u.steps for u in ups], dtype=np.int64)
            losses = np.array([u.train_loss for u in ups], dtype=float)
        kept = outcome.kept_index  # arrival order
        if self.surrogate:
            new_state = self.workload.advance(
                self.state, n_selected=int(selected.size), alpha=jobs.alpha[kept], beta=jobs.beta[kept],
                local_steps=steps[kept],
            )  # fmt: skip
        else:
            new_state = self.method.aggregate(self.state, [outcome.updates[i] for i in kept])
        if per_step:
            e_cmp = steps * fleet.step_energy_j[dev]
            e_com = np.where(bits > 0, fleet.comm_energy_j[dev], 0.0)
        else:
            e_cmp = compute_energy_j(flops / fpc, jobs.cpu_hz, fleet.energy_coeff[dev])
            e_com = upload_energy_j(fleet.tx_power_w[dev], outcome.t_com_s)
        block = _device_block(
            r, plan, outcome, distance_m, rate, e_max, self.t_max,
            flops=flops, bits=bits, steps=steps, losses=losses, e_cmp=e_cmp, e_com=e_com,
        )  # fmt: skip
        energy = float(np.sum(e_cmp) + np.sum(e_com))  # every job trained and transmitted, kept or not
        evaluate = r % sc.train.eval_every == 0 or r == sc.rounds
        global_loss = math.nan
        if self.surrogate:
            acc, test_loss, train_loss = math.nan, math.nan, self.workload.loss(new_state)
        else:
            acc, test_loss = self.method.evaluate(new_state) if evaluate else (math.nan, math.nan)
            train_loss = float(np.mean(losses[losses == losses])) if np.any(losses == losses) else math.nan
            if evaluate and sc.train.global_loss:
                global_loss = self.workload.global_train_loss(new_state)
        row = {
            "round": r,
            "sim_time_s": outcome.end_s,
            "round_time_s": outcome.end_s - outcome.start_s,
            "energy_j": energy,
            "energy_cum_j": self.energy_cum_j + energy,
            "selected": int(selected.size),
            "arrived": int(kept.size),
            "dropped": len(jobs) - int(kept.size),
            "bits_up": float(np.sum(bits)),
            "test_accuracy": acc,
            "test_loss": test_loss,
            "train_loss": train_loss,
            "wall_time_s": time.perf_counter() - wall0,
            "skipped": int(plan.skipped_device.size),
            "learning_gain": learning_gain(jobs.alpha[kept], jobs.beta[kept], int(selected.size)),
        }
        if sc.train.global_loss:
            row["global_train_loss"] = global_loss
        # commit the round
        self.state, self.sim_time_s, self.energy_cum_j = new_state, outcome.end_s, row["energy_cum_j"]
        self.device_blocks.append(block)
        self.round_rows.append(row)
        self.rounds_done = r
        return row

    def result(self, *, final: bool = False) -> RunResult:
        """The tables of every completed round (the summary derives from them).

        ``final=True`` (the run is over) lets the device table reuse the per-round blocks' memory; the
        simulation cannot be stepped or checkpointed afterwards.
        """
        return RunResult(
            scenario=self.scenario,
            rounds=_frame(self.round_rows, ROUND_COLUMNS),
            device_rounds=_device_frame(self.device_blocks, release=final),
        )

    # ------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | Path) -> None:
        """Write the state after the last completed round to ``checkpoint_dir`` (atomically, see checkpoint.py)."""
        from edgefl.checkpoint import save_checkpoint

        self._saved_blocks = save_checkpoint(self, Path(checkpoint_dir), self._saved_blocks)

    def restore(self, checkpoint_dir: str | Path) -> bool:
        """Continue from the checkpoint in ``checkpoint_dir``; False (and nothing changed) if there is none."""
        from edgefl.checkpoint import load_checkpoint

        found = load_checkpoint(self, Path(checkpoint_dir))
        self._saved_blocks = len(self.device_blocks)
        return found


def _budget(e_max_j: np.ndarray) -> np.ndarray:
    """E_max as recorded: empty (NaN) when the scenario sets no budget."""
    return np.where(np.isfinite(e_max_j), e_max_j, math.nan)


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(columns))
    extra = [c for c in df.columns if c not in columns]
    return df[list(columns) + extra]


def _device_frame(blocks: list[dict[str, np.ndarray]], *, release: bool = False) -> pd.DataFrame:
    """All rounds' device blocks as one table.

    The float columns are copied once into one preallocated 2-D array that becomes the frame's single float
    block (no second copy when pandas consolidates); other columns are inserted beside it. With ``release``
    each block's float columns are dropped as soon as they are copied, so peak memory stays near one copy of
    the table (10^6 rows at 10^4 devices x 100 rounds).
    """
    if not blocks:
        return pd.DataFrame(columns=list(DEVICE_COLUMNS))
    names = list(blocks[0])
    floats = [k for k in names if blocks[0][k].dtype == np.float64]
    rows = sum(len(b["device"]) for b in blocks)
    data = np.empty((len(floats), rows))
    for j, name in enumerate(floats):
        at = 0
        for b in blocks:
            col = b.pop(name) if release else b[name]
            data[j, at : at + col.size] = col
            at += col.size
    frame = pd.DataFrame(data.T, columns=floats, copy=False)
    for pos, name in enumerate(names):
        if name not in floats:
            frame.insert(pos, name, np.concatenate([b[name] for b in blocks]))
    return frame


def _device_block(
    r: int,
    plan: RoundPlan,
    outcome: RoundOutcome,
    distance_m: np.ndarray,
    rate: np.ndarray,
    e_max: np.ndarray,
    t_max: float | None,
    *,
    flops: np.ndarray,
    bits: np.ndarray,
    steps: np.ndarray,
    losses: np.ndarray,
    e_cmp: np.ndarray,
    e_com: np.ndarray,
) -> dict[str, np.ndarray]:
    """One round's device rows as columns (jobs, then skipped devices), sorted by device id."""
    jobs, skip = plan.jobs, plan.skipped_device
    m, s = len(jobs), skip.size
    nan_s, zero_s = np.full(s, math.nan), np.zeros(s)
    start = outcome.start_s
    dev = np.concatenate([jobs.device, skip])
    cols: dict[str, np.ndarray] = {
        "round": np.full(m + s, r, dtype=np.int64),
        "device": dev,
        "selected": np.ones(m + s, dtype=bool),
        "trained": np.concatenate([flops > 0, np.zeros(s, dtype=bool)]),  # an estimating job computes nothing
        "feasible": np.arange(m + s) < m,
        "reason": np.concatenate([np.full(m, "", dtype=object), plan.skipped_reason.astype(object)]),
        "arrived": np.concatenate([outcome.kept_mask, np.zeros(s, dtype=bool)]),
        "distance_m": distance_m[dev],
        "rate_bps": np.concatenate([rate[jobs.device], nan_s]),
        "cpu_hz": np.concatenate([jobs.cpu_hz, nan_s]),
        "width": np.concatenate([jobs.width, nan_s]),
        "alpha": np.concatenate([jobs.alpha, nan_s]),
        "beta": np.concatenate([jobs.beta, nan_s]),
        "local_steps": np.concatenate([steps, np.zeros(s, dtype=np.int64)]),
        "t_cmp_s": np.concatenate([outcome.t_cmp_s, zero_s]),
        "t_com_s": np.concatenate([outcome.t_com_s, zero_s]),
        "e_cmp_j": np.concatenate([e_cmp, zero_s]),
        "e_com_j": np.concatenate([e_com, zero_s]),
        "bits_planned": np.concatenate([jobs.bits_planned, nan_s]),
        "bits": np.concatenate([bits, zero_s]),
        "t_max_s": np.full(m + s, math.nan if t_max is None else t_max),
        "e_max_j": _budget(e_max[dev]),
        "t_start_s": np.concatenate([outcome.t_start_s - start, nan_s]),
        "t_arrive_s": np.concatenate([outcome.t_arrive_s - start, nan_s]),
        "flops": np.concatenate([flops, zero_s]),
        "train_loss": np.concatenate([losses, nan_s]),
        "t_cmp_planned_s": np.concatenate([jobs.t_cmp_planned_s, nan_s]),
        "t_com_planned_s": np.concatenate([jobs.t_com_planned_s, nan_s]),
        "e_cmp_planned_j": np.concatenate([jobs.e_cmp_planned_j, nan_s]),
        "e_com_planned_j": np.concatenate([jobs.e_com_planned_j, nan_s]),
    }
    order = np.argsort(dev, kind="stable")
    return {name: col[order] for name, col in cols.items()}
