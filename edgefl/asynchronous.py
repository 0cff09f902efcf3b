"""Asynchronous FL on the run's clock: ``play_update(run, state) -> (state, record)``, one server update each.

The server keeps C = ``method.clients_per_round`` jobs in flight: whenever one ends (its arrival, or its loss
when the device goes offline) it dispatches the current global model to another online, idle device (seeded
uniform choice, stream ``selection`` keyed by (update, dispatch)). A dispatched job is planned by the method
(FedAvg's plan: CPU policy, local work, energy budget), does its work at once on the model it downloaded
(training takes zero simulated time) and runs on the clock like a synchronous job (download, compute,
upload over its own sub-band; :meth:`edgefl.sim.Clock.dispatch`). Arrivals go to the method's buffer; when it
holds ``buffer_size`` updates (1 for FedAsync, M for FedBuff) the method's server step makes the next global
model (:mod:`edgefl.algorithms.asynchronous`) and the update is recorded:

- ``rounds.csv``: one row per server update (``round`` = update index, ``sim_time_s`` its time,
  ``round_time_s`` since the previous update, ``selected`` jobs dispatched in between, ``arrived`` updates
  aggregated, ``dropped`` jobs lost offline in between, ``energy_j`` of the jobs that ended in between);
- ``device_rounds.csv``: one row per job that ended in between, with its ``staleness`` (server updates
  between its download and its aggregation; empty for a lost job).

Energy is charged when a job ends (pro rata up to a loss); jobs still in flight when the run ends are not
charged. Radio gains and mobility advance per server update; a job keeps the rates of its dispatch.

Cost: each refill plans, draws and prices its jobs over the whole fleet, about 2-3 ms per dispatch at 10^4
devices (measured: FedBuff, surrogate, 10^4 devices, C = 1000, M = 100: about 450 jobs/s on the shared 2-core
machine). Batching the refills of an instant, and pricing only the dispatched devices, is what the issue's
30,000 jobs/s will need.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgefl.algorithms.base import JobTable, RoundContext, RoundPlan
from edgefl.costs import prorated_energy_j
from edgefl.errors import SimulationError
from edgefl.learning.protocol import RoundWork
from edgefl.record import RoundRecord, device_block
from edgefl.sim import KEPT, LOST, RoundOutcome
from edgefl.state import RunState
from edgefl.system import draw_budgets_j

__all__ = ["AsyncServer", "play_update"]


@dataclass(eq=False)
class _Batch:
    """Jobs dispatched together: their plan, work, costs and clock times (each array shape (m,))."""

    plan: RoundPlan
    work: RoundWork
    version: int
    model: Any
    distance_m: np.ndarray
    rate_bps: np.ndarray
    e_max_j: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    e_down_j: np.ndarray
    t_down_s: float
    t_dl_s: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    t_end_s: np.ndarray
    lost: np.ndarray
    skip_distance_m: np.ndarray
    skip_e_max_j: np.ndarray


@dataclass(eq=False)
class AsyncServer:
    """An asynchronous run's server between updates: model version, jobs in flight, jobs ended since the last
    update (in order of their end) and the buffer of arrived updates (batch, job index)."""

    version: int = 0
    in_flight: int = 0
    ended: list[tuple[_Batch, int]] = field(default_factory=list)
    buffer: list[tuple[_Batch, int]] = field(default_factory=list)
    dispatched: int = 0
    skipped: list[tuple[_Batch, int]] = field(default_factory=list)


def _dispatch(run: Any, state: RunState, server: AsyncServer, u: int, k: int, distance_m, gain) -> int:
    """Dispatch up to the free slots to online, idle devices; return how many jobs started."""
    from edgefl.round import _downloads, select_devices

    sc, clock, method, wl, costs, radio, fleet = (
        run.scenario, run.clock, run.method, run.workload, run.costs, run.radio, run.fleet
    )  # fmt: skip
    free = run.n_select - server.in_flight
    available = clock.available()
    if free <= 0 or not available.any():
        return 0
    n = fleet.n_devices
    selected = select_devices(run.streams.numpy("selection", u, k), n, free, available)
    e_max = draw_budgets_j(sc.fleet.budget, n, run.streams.numpy("budgets", u, k))
    mask = np.zeros(n, dtype=bool)
    mask[selected] = True
    held = clock.n_busy()
    rate = radio.rates_bps(gain, fleet.tx_power_w, mask, held=held)
    ctx = RoundContext(round_index=u, selected=selected, rate_bps=rate, e_max_j=e_max, t_budget_s=None,
                       costs=costs, rng=run.streams.numpy("method", u, k))  # fmt: skip
    plan = method.plan_round(ctx)
    jobs, dev = plan.jobs, plan.jobs.device
    tx = np.zeros(n, dtype=bool)
    tx[dev] = True
    rate = radio.rates_bps(gain, fleet.tx_power_w, tx, held=held)
    down_s, e_down = _downloads(run, jobs, gain, tx)
    work = wl.work(method, jobs, state.model, u)
    t_cmp, e_cmp = costs.compute(dev, cycles=costs.cycles(dev, work.flops), steps=work.steps, f_hz=jobs.cpu_hz)
    t_com, e_com = costs.upload(dev, bits=work.bits, rate_bps=rate[dev])
    t_dl = np.broadcast_to(np.asarray(down_s, dtype=float), (len(jobs),)).copy()
    batch = _Batch(
        plan=plan, work=work, version=server.version, model=state.model, distance_m=distance_m[dev],
        rate_bps=rate[dev], e_max_j=e_max[dev], e_cmp_j=e_cmp, e_com_j=e_com, e_down_j=np.asarray(e_down, float),
        t_down_s=clock.env.now, t_dl_s=t_dl, t_cmp_s=t_cmp, t_com_s=t_com, t_end_s=np.zeros(len(jobs)),
        lost=np.zeros(len(jobs), dtype=bool), skip_distance_m=distance_m[plan.skipped_device],
        skip_e_max_j=e_max[plan.skipped_device],
    )  # fmt: skip
    for i in range(plan.skipped_device.size):
        server.skipped.append((batch, i))

    def ended(j: int, lost: bool) -> None:
        server.in_flight -= 1
        server.ended.append((batch, j))
        if not lost:
            server.buffer.append((batch, j))

    t_end, lost = clock.dispatch(dev, down_s=t_dl, t_cmp_s=t_cmp, t_com_s=t_com, on_end=ended)
    batch.t_end_s, batch.lost = t_end, lost
    server.in_flight += len(jobs)
    server.dispatched += len(jobs)
    return len(jobs) + int(plan.skipped_device.size)


def play_update(run: Any, state: RunState) -> tuple[RunState, RoundRecord]:
    """Play until the server's next model update (update ``state.rounds_done + 1``); return the state after it
    and its record (module docstring)."""
    sc, clock, method, wl, server = run.scenario, run.clock, run.method, run.workload, run.async_server
    u = state.rounds_done + 1
    wall0 = time.perf_counter()
    distance_m, gain = run.radio.round_state(u)
    env, m_needed = clock.env, method.buffer_size
    k = 0
    server.dispatched = 0
    while len(server.buffer) < m_needed:
        if _dispatch(run, state, server, u, k, distance_m, gain):
            k += 1
        if env.peek() == math.inf:
            why = ""
            if server.skipped:
                batch, i = server.skipped[-1]
                why = f" (the last device to sit out: {batch.plan.skipped_reason[i]})"
            raise SimulationError(f"at t={env.now:g} s no job is in flight and no device can take one{why}")
        env.step()
    taken, server.buffer = server.buffer[:m_needed], server.buffer[m_needed:]
    tau = np.array([server.version - b.version for b, _ in taken], dtype=float)
    if wl.trains:
        updates = [b.work.updates[j] for b, j in taken]
        model = method.server_step(state.model, updates, [b.model for b, _ in taken], tau)
    else:
        alpha = np.array([b.plan.jobs.alpha[j] for b, j in taken])
        beta = np.array([b.plan.jobs.beta[j] for b, j in taken])
        model = wl.async_step(state.model, omega=method.weights(tau), alpha=alpha, beta=beta)
    server.version += 1
    record = _record(run, state, server, u, taken, tau, model, wall0)
    return RunState(rounds_done=u, sim_time_s=env.now, energy_cum_j=record.row["energy_cum_j"], model=model), record


def _record(run, state, server, u, taken, tau, model, wall0) -> RoundRecord:
    """The update's row and the device rows of the jobs that ended since the previous update."""
    sc, wl, method, env = run.scenario, run.workload, run.method, run.clock.env
    ended, server.ended = server.ended, []
    skipped, server.skipped = server.skipped, []
    aggregated = {(id(b), j): t for (b, j), t in zip(taken, tau.tolist())}
    take = lambda name: np.array([getattr(b, name)[j] for b, j in ended])  # noqa: E731
    jobs = JobTable.concat(*[b.plan.jobs.take(np.array([j])) for b, j in ended]) if ended else JobTable.build(
        np.zeros(0, dtype=np.int64), cpu_hz=0.0)  # fmt: skip
    order = np.argsort(np.array([b.plan.jobs.device[j] for b, j in ended], dtype=np.int64), kind="stable")
    ended = [ended[i] for i in order]  # JobTable.concat sorted the jobs by device (stable): follow it
    lost = take("lost").astype(bool) if ended else np.zeros(0, dtype=bool)
    t_dl, t_cmp, t_com, t_end = (take(c) if ended else np.zeros(0) for c in ("t_dl_s", "t_cmp_s", "t_com_s", "t_end_s"))
    t_down = np.array([b.t_down_s for b, _ in ended])
    t_start = t_down + t_dl
    dl_done = np.where(lost, np.clip(t_end - t_down, 0.0, t_dl), t_dl)
    cmp_done = np.where(lost, np.clip(t_end - t_start, 0.0, t_cmp), t_cmp)
    com_done = np.where(lost, np.clip(t_end - (t_start + t_cmp), 0.0, t_com), t_com)
    kept = np.array([(id(b), j) in aggregated for b, j in ended], dtype=bool)
    staleness = np.array([aggregated.get((id(b), j), math.nan) for b, j in ended], dtype=float)
    e_cmp = prorated_energy_j(take("e_cmp_j") if ended else np.zeros(0), t_cmp, cmp_done)
    e_com = prorated_energy_j(take("e_com_j") if ended else np.zeros(0), t_com, com_done)
    e_down = prorated_energy_j(take("e_down_j") if ended else np.zeros(0), t_dl, dl_done)
    works = [b.work for b, _ in ended]
    work = RoundWork(
        flops=np.array([w.flops[j] for w, (_, j) in zip(works, ended)], dtype=float),
        bits=np.array([w.bits[j] for w, (_, j) in zip(works, ended)], dtype=float),
        steps=np.array([w.steps[j] for w, (_, j) in zip(works, ended)], dtype=np.int64),
        losses=np.array([w.losses[j] for w, (_, j) in zip(works, ended)], dtype=float),
        updates=[w.updates[j] for w, (_, j) in zip(works, ended)],
    )
    m = len(ended)
    arrival = np.argsort(np.where(lost, np.inf, t_end), kind="stable")
    outcome = RoundOutcome(
        start_s=state.sim_time_s, end_s=env.now, jobs=range(m), updates=work.updates, t_down_s=t_down,
        t_start_s=t_start, t_cmp_end_s=t_start + t_cmp, t_arrive_s=np.where(lost, np.nan, t_end), t_end_s=t_end,
        t_dl_s=t_dl, t_cmp_s=t_cmp, t_com_s=t_com, cmp_done_s=cmp_done, com_done_s=com_done, dl_done_s=dl_done,
        kept_mask=kept, status=np.where(lost, LOST, KEPT).astype(object), arrival_order=arrival[~lost[arrival]],
    )  # fmt: skip
    skip_dev = np.array([b.plan.skipped_device[i] for b, i in skipped], dtype=np.int64)
    skip_reason = np.array([b.plan.skipped_reason[i] for b, i in skipped], dtype=object)
    plan = RoundPlan(jobs, skip_dev, skip_reason)
    per_job = {
        "distance_m": np.concatenate([take("distance_m") if ended else np.zeros(0),
                                      np.array([b.skip_distance_m[i] for b, i in skipped], dtype=float)]),
        "rate_bps": take("rate_bps") if ended else np.zeros(0),
        "e_max_j": np.concatenate([take("e_max_j") if ended else np.zeros(0),
                                   np.array([b.skip_e_max_j[i] for b, i in skipped], dtype=float)]),
    }  # fmt: skip
    block = device_block(
        u, plan, outcome, work, None, None, None, None, e_cmp=e_cmp, e_com=e_com, e_down=e_down,
        extra={"staleness": staleness}, per_job=per_job,
    )  # fmt: skip
    energy = float(np.sum(e_cmp) + np.sum(e_com))
    if sc.channel.downlink is not None:
        energy += float(np.sum(e_down))
    evaluate = u % sc.train.eval_every == 0 or u == sc.rounds
    kept_idx = np.flatnonzero(kept)
    seen_work = RoundWork(flops=work.flops[kept_idx], bits=work.bits[kept_idx], steps=work.steps[kept_idx],
                          losses=work.losses[kept_idx], updates=[work.updates[i] for i in kept_idx])  # fmt: skip
    seen = wl.assess(method, model, seen_work, evaluate=evaluate, global_loss=sc.train.global_loss)
    row = {
        "round": u,
        "sim_time_s": env.now,
        "round_time_s": env.now - state.sim_time_s,
        "energy_j": energy,
        "energy_cum_j": state.energy_cum_j + energy,
        "selected": server.dispatched,
        "arrived": len(taken),
        "dropped": int(np.count_nonzero(lost)),
        "bits_up": float(np.sum(work.bits)),
        "test_accuracy": seen.test_accuracy,
        "test_loss": seen.test_loss,
        "train_loss": seen.train_loss,
        "wall_time_s": time.perf_counter() - wall0,
        "skipped": len(skipped),
        "learning_gain": math.nan,
        "wanted": run.n_select,
        "available": int(np.count_nonzero(run.clock.available())),
        "staleness_mean": float(np.mean(tau)) if tau.size else math.nan,
    }
    if sc.train.global_loss:
        row["global_train_loss"] = seen.global_train_loss
    return RoundRecord(row, block)
