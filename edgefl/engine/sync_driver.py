"""The synchronous driver: ``SyncDriver.play(run, state) -> (state, record)``, one round each.

Data flow (docs/architecture.md, "One synchronous round"): the run's clock reaches the round start (:meth:`edgefl.engine.clock.Clock.begin_round`) ->
mobility -> channel gains -> the server selects among the online, idle devices -> energy budgets -> the allocation
step (``channel.allocation`` other than ``"equal"``: each selected device's sub-band, power and CPU frequency,
:func:`edgefl.engine.round_steps.allocation_step`) -> the method plans (with the cost model, at the allocated
powers) -> SimPy round on the run's clock: at dispatch the workload does the jobs' work
(real training, or the surrogate's planned work) and the cost model turns it into durations and energies ->
the workload aggregates the kept updates and assesses the new model -> the round's row and device block.

Nothing here knows which method runs or whether learning is real: the method and the workload implement their
protocols (:mod:`edgefl.methods.base`, :mod:`edgefl.learning.protocol`). The round's rules are the run's
(:class:`edgefl.engine.driver.RoundRules`); the downloads, the charge and the row are :mod:`edgefl.engine.round_steps`'.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any

import numpy as np

from edgefl.methods.base import RoundContext, RoundPlan
from edgefl.engine.driver import Run
from edgefl.engine.round_steps import (
    NO_LINK, allocation_step, charge, downloads, equal_bandwidth_hz, rounds_row, select_devices, without_link,
)  # fmt: skip
from edgefl.errors import SimulationError
from edgefl.engine.records import RoundRecord, device_block
from edgefl.engine.run_state import RunState
from edgefl.engine.selection import Selection, choose
from edgefl.engine.clock import PACKET_ERROR
from edgefl.fleet.devices import draw_budgets_j
from edgefl.fleet.packet_errors import upload_attempts

__all__ = ["SyncDriver", "play_round"]


class SyncDriver:
    """Plays a synchronous run round by round (:func:`play_round`); it keeps no memory between rounds (the
    clock, the radio and the method keep theirs)."""

    def play(self, run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
        return play_round(run, state)

    def playing(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def state_dict(self, run: Run) -> None:
        return None

    def load_state_dict(self, run: Run, meta: dict | None, tensors: dict | None) -> None:
        return None

    def job_ends(self) -> None:
        return None


def upload_order(plan: RoundPlan, schedule: np.ndarray | None = None) -> np.ndarray | None:
    """The plan's TDMA upload order (:attr:`RoundPlan.upload_order`, device ids) as job indices; without one, the
    selection policy's ``schedule`` (FedCS's :attr:`Selection.upload_order`, device ids) less the devices the plan
    left out; else None (first come, first served). Raises :class:`SimulationError` unless the order names each
    of the plan's jobs once."""
    dev = plan.jobs.device
    if plan.upload_order is not None:
        order = np.asarray(plan.upload_order, dtype=np.int64).reshape(-1)
    elif schedule is not None:
        order = schedule[np.isin(schedule, dev)]
    else:
        return None
    pos = np.argsort(dev, kind="stable")
    idx = pos[np.clip(np.searchsorted(dev[pos], order), 0, max(dev.size - 1, 0))] if dev.size else order[:0]
    if order.size != dev.size or not np.array_equal(dev[idx], order) or np.unique(idx).size != idx.size:
        raise SimulationError(f"upload_order={order.tolist()}: must name each job's device once, {sorted(dev.tolist())}")
    return idx


_NO_ENERGY_J = 1e-12
"""What is left of a device's E_max [J] when its download alone spends all of it: so little that the method finds
the device infeasible for energy (planners refuse a budget <= 0)."""


def play_round(run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
    """Simulate round ``state.rounds_done + 1``; return the state after it and its record.

    The radio and the method advance their own memory (positions, histories) as the round is played.
    """
    fleet, costs, radio, streams, method, wl, learner, rules = (
        run.fleet, run.costs, run.radio, run.streams, run.method, run.workload, run.learner, run.rules
    )  # fmt: skip
    r = state.rounds_done + 1
    n, clock = fleet.n_devices, run.clock
    wall0 = time.perf_counter()
    start_s = clock.begin_round()  # waits (in simulated time) while no device is online and idle
    held = clock.n_busy()  # late devices still on an earlier round's job keep their sub-bands
    distance_m, gain = radio.round_state(r)
    available = clock.available()
    selected = select_devices(streams.numpy("selection", r), n, rules.n_select, available)
    dead = without_link(run, selected, gain, held=held)
    no_link, selected = selected[dead], selected[~dead]
    e_max = draw_budgets_j(rules.budget, n, streams.numpy("budgets", r))
    ctx, down_s = _context(run, r, selected, gain=gain, e_max=e_max, held=held)
    choice = None
    if rules.selection is not None:  # a policy chooses among the candidates (edgefl.engine.selection)
        choice = choose(run, ctx, gain=gain, down_s=down_s, held=held, start_s=start_s)
        costs = choice.costs(costs)
        ctx, _ = _context(run, r, choice.devices, gain=gain, e_max=e_max, held=held, choice=choice)
    n_selected = int(ctx.selected.size + no_link.size)  # a device without a link was selected and sits out
    alloc = None
    if rules.allocation != "equal" and ctx.selected.size:  # the allocation step (channel.allocation)
        if held:
            raise SimulationError(f"round {r}: {held} late job(s) hold sub-bands the allocation cannot share")
        alloc = allocation_step(run, ctx.selected, gain, t_budget_s=ctx.t_budget_s, t_before_s=down_s)
        costs = alloc.costs  # the allocated powers: what the round plans and charges with
        alloc_rate, alloc_cpu = np.zeros(n), np.full(n, np.nan)
        alloc_rate[ctx.selected], alloc_cpu[ctx.selected] = alloc.rate_bps, alloc.cpu_hz
        ctx = replace(ctx, rate_bps=alloc_rate, costs=costs,
                      cpu_hz=alloc_cpu if method.takes_allocation == "all" else None)  # fmt: skip
    plan = method.plan_round(ctx)
    if no_link.size:
        plan = plan.with_skipped(no_link, np.full(no_link.size, NO_LINK, dtype=object))
    jobs = plan.jobs
    dev = jobs.device
    interference_w: np.ndarray | float = 0.0  # received on each upload's band beyond the noise (Chen's I_n)
    own_band = None  # each upload's own band [Hz], where an allocation or Chen's RBs set it
    if alloc is not None:  # each device keeps its allocated sub-band, whoever sits out
        rate = alloc_rate
        at = np.searchsorted(ctx.selected, dev)
        bandwidth_hz, tx_power_w = alloc.bandwidth_hz[at], alloc.tx_power_w[at]
        own_band = bandwidth_hz
    else:
        tx_mask = np.zeros(n, dtype=bool)
        tx_mask[dev] = True
        rate = radio.rates_bps(gain, fleet.tx_power_w, tx_mask, held=held)  # sub-bands of the devices that transmit
        band = radio.model.band_hz if radio.tdma else equal_bandwidth_hz(run, dev.size + held)  # TDMA: all, in turn
        bandwidth_hz = np.full(dev.size, band)
        tx_power_w = fleet.tx_power_w[dev]
        if choice is not None:  # Chen et al.'s RB rates and powers
            rate = choice.rates(rate)
            own = choice.values_of(dev)
            own_band = own.get("bandwidth_hz")
            bandwidth_hz = bandwidth_hz if own_band is None else own_band
            tx_power_w = own.get("tx_power_w", tx_power_w)
            interference_w = own.get("interference_w", interference_w)
    down_s, e_down = downloads(run, jobs, gain)
    attempts = failed = None
    if rules.waterfall is not None:  # [channel.packet_errors]: each upload's attempts, from its device's stream
        q = radio.packet_error_rate(gain[dev], tx_power_w, dev.size, held=held, waterfall=rules.waterfall,
                                    band_hz=own_band, interference_w=interference_w)  # fmt: skip
        attempts, failed = upload_attempts(q, dev, key=r, retransmissions=rules.retransmissions,
                                           streams=streams)  # fmt: skip
    done: dict[str, Any] = {}

    def start() -> tuple[np.ndarray, np.ndarray]:
        """At dispatch: the jobs' work, charged by the cost model from what was really done (every attempt of
        an upload that packet errors make send again)."""
        work = done["work"] = learner.work(jobs, state=state.model, round_index=r)
        t_cmp, done["e_cmp"] = costs.compute(dev, cycles=costs.cycles(dev, work.flops), steps=work.steps, f_hz=jobs.cpu_hz)
        t_com, done["e_com"] = costs.upload(dev, bits=work.bits, rate_bps=rate[dev])
        if attempts is not None:
            empty = work.bits <= 0  # nothing sent, nothing lost
            failed[empty], attempts[empty] = False, 1
            t_com, done["e_com"] = t_com * attempts, done["e_com"] * attempts
        return t_cmp, t_com

    outcome = clock.play(
        devices=dev, durations=start, policy=rules.policy, deadline_s=rules.deadline_s,
        keep=rules.keep, down_s=down_s, late=rules.late, tdma=radio.tdma,
        upload_order=upload_order(plan, None if choice is None or not radio.tdma else choice.upload_order),
        failed=failed, cancel_lost=alloc is not None,
    )  # fmt: skip
    work = done["work"]
    charges = charge(run, outcome, dev=dev, e_cmp_j=done["e_cmp"], e_com_j=done["e_com"], e_down_j=e_down)
    kept = outcome.kept_index  # arrival order
    if run.payloads is not None:
        run.payloads.arrived(r, method, [work.updates[i] for i in kept])
    model = learner.advance(state.model, jobs=jobs, work=work, kept=kept, n_selected=n_selected)
    rows = np.concatenate([dev, plan.skipped_device])  # the block's rows: jobs, then the devices that sat out
    extra = _extra(method.device_values(jobs, updates=work.updates), choice, dev)
    more: dict[str, float] = {}
    if outcome.wait_done_s is not None:
        extra = {**extra, "t_wait_s": outcome.wait_done_s}
    if attempts is not None:
        extra = {**extra, "uploads": attempts.astype(float)}
        more["packet_errors"] = int(np.count_nonzero(outcome.status == PACKET_ERROR))
    block = device_block(
        r=r, jobs=jobs.columns(), skipped_device=plan.skipped_device, skipped_reason=plan.skipped_reason,
        times=outcome, work=work, distance_m=distance_m[rows], rate_bps=rate[dev],
        e_max_j=e_max[rows], t_max_s=rules.t_max_s, e_cmp_j=charges.e_cmp_j, e_com_j=charges.e_com_j,
        e_down_j=charges.e_down_j, extra=extra, profiles=fleet.profiles, e_static_j=charges.e_static_j,
        e_idle_j=charges.e_idle_j, bandwidth_hz=bandwidth_hz, tx_power_w=tx_power_w,
    )  # fmt: skip
    seen = learner.assess(model, work, evaluate=rules.evaluates(r), global_loss=rules.global_loss)
    row = rounds_row(
        run=run, r=r, start_s=state.sim_time_s, end_s=outcome.end_s, energy_before_j=state.energy_cum_j,
        charges=charges, selected=n_selected, arrived=int(kept.size), dropped=len(jobs) - int(kept.size),
        bits_up=float(np.sum(work.bits)), seen=seen, skipped=int(plan.skipped_device.size),
        learning_gain=method.learning_gain(jobs.take(kept), n_selected=n_selected),
        available=int(np.count_nonzero(available)), wall0=wall0, **more,
    )  # fmt: skip
    after = RunState(rounds_done=r, sim_time_s=outcome.end_s, energy_cum_j=row["energy_cum_j"], model=model)
    return after, RoundRecord(row, block)


def _context(
    run: Run, r: int, selected: np.ndarray, *, gain: np.ndarray, e_max: np.ndarray, held: int,
    choice: Selection | None = None,
) -> tuple[RoundContext, np.ndarray | float]:  # fmt: skip
    """The method's context of round ``r`` with ``selected`` (ids, shape (k,)) selected, and each one's planned
    download time [s] (shape (k,); ``round.downlink_s`` without a downlink model): their uplink rates as if all
    transmit (a policy's ``choice``: its planned rates and its transmit powers), their budgets less their planned
    download's energy, and T_max less the slowest planned download of the full model."""
    fleet, costs, radio, rules, wl = run.fleet, run.costs, run.radio, run.rules, run.workload
    sel_mask = np.zeros(fleet.n_devices, dtype=bool)
    sel_mask[selected] = True
    down_budget_s, e_plan, down_s = rules.downlink_s, e_max, np.full(selected.size, rules.downlink_s)
    if rules.downlink_rx_power_w is not None and selected.size:  # plan for the slowest download of the full model
        dl_rate = radio.downlink_rates_bps(gain, sel_mask)[selected]
        bits = float(wl.update_bits_at(rules.width))
        down_s, e_down_plan = costs.download(selected, bits=bits, rate_bps=dl_rate,
                                             rx_power_w=rules.downlink_rx_power_w)  # fmt: skip
        down_budget_s = float(np.max(down_s))
        if np.any(e_down_plan > 0):  # the budget pays for the download first (0 J in the papers' model)
            e_plan = e_max.copy()
            e_plan[selected] = np.maximum(e_max[selected] - e_down_plan, _NO_ENERGY_J)
    rate = radio.rates_bps(gain, fleet.tx_power_w, sel_mask, held=held)
    if choice is not None:
        rate, costs = choice.rates(rate), choice.costs(costs)
    ctx = RoundContext(
        round_index=r,
        selected=selected,
        rate_bps=rate,
        e_max_j=e_plan,
        t_budget_s=None if rules.t_max_s is None else rules.t_max_s - down_budget_s,
        costs=costs,
        rng=run.streams.lazy_numpy("method", r),
    )
    return ctx, down_s


def _extra(values: dict[str, np.ndarray], choice: Selection | None, dev: np.ndarray) -> dict[str, np.ndarray]:
    """The method's own ``device_rounds`` columns of the jobs ``dev``, then the selection policy's."""
    return values if choice is None else {**values, **choice.values_of(dev)}
