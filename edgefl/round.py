"""Playing one round: ``play_round(run, state) -> (state, record)``.

Data flow (DESIGN.md): the run's clock reaches the round start (:meth:`edgefl.sim.Clock.begin_round`) ->
mobility -> channel gains -> the server selects among the online, idle devices -> energy budgets -> the method
plans (with the cost model) -> SimPy round on the run's clock: at dispatch the workload does the jobs' work
(real training, or the surrogate's planned work) and the cost model turns it into durations and energies ->
the workload aggregates the kept updates and assesses the new model -> the round's row and device block.

Nothing here knows which method runs or whether learning is real: the method and the workload implement their
protocols (:mod:`edgefl.algorithms.base`, :mod:`edgefl.learning.protocol`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgefl.algorithms.base import Method, RoundContext
from edgefl.costs import CostModel, prorated_energy_j
from edgefl.radio import Radio
from edgefl.record import RoundRecord, device_block
from edgefl.scenario import Scenario
from edgefl.seeding import Streams
from edgefl.sim import Clock
from edgefl.state import RunState
from edgefl.system import Fleet, draw_budgets_j

__all__ = ["Run", "play_round", "select_devices"]


def select_devices(
    rng: np.random.Generator, n_devices: int, k: int, available: np.ndarray | None = None
) -> np.ndarray:
    """Uniform K-of-N sampling without replacement among the ``available`` devices (bool, shape (n,); None:
    all); returns sorted device ids, shape (min(k, available),). With every device available this is the
    same draw as sampling K of N."""
    if available is None or available.all():
        return np.sort(rng.choice(n_devices, size=k, replace=False))
    ids = np.flatnonzero(available)
    return np.sort(ids[rng.choice(ids.size, size=min(k, ids.size), replace=False)])


@dataclass(frozen=True, eq=False)
class Run:
    """The built parts of a run (see :func:`edgefl.runner.build_run`).

    ``n_select``: devices the server starts per round (K, or more under ``over_select``); ``t_max_s``: the round
    deadline [s] (None unless ``round.policy = "deadline"``); ``clock``: the run's SimPy clock (device states
    and jobs in flight, carried from round to round); ``async_server``: the asynchronous server's memory
    (:class:`edgefl.asynchronous.AsyncServer`) for asynchronous methods, else None.
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
    clock: Clock
    async_server: Any = None


def play_round(run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
    """Simulate round ``state.rounds_done + 1``; return the state after it and its record.

    The radio and the method advance their own memory (positions, histories) as the round is played.
    """
    sc, fleet, costs, radio, streams, method, wl = (
        run.scenario, run.fleet, run.costs, run.radio, run.streams, run.method, run.workload
    )  # fmt: skip
    r = state.rounds_done + 1
    rcfg, n, clock = sc.round, fleet.n_devices, run.clock
    wall0 = time.perf_counter()
    clock.begin_round()  # waits (in simulated time) while no device is online and idle
    held = clock.n_busy()  # late devices still on an earlier round's job keep their sub-bands
    distance_m, gain = radio.round_state(r)
    available = clock.available()
    selected = select_devices(streams.numpy("selection", r), n, run.n_select, available)
    e_max = draw_budgets_j(sc.fleet.budget, n, streams.numpy("budgets", r))
    sel_mask = np.zeros(n, dtype=bool)
    sel_mask[selected] = True
    down_budget_s = rcfg.downlink_s
    if sc.channel.downlink is not None and selected.size:  # plan for the slowest download of the full model
        dl_rate = radio.downlink_rates_bps(gain, sel_mask)[selected]
        bits = float(wl.update_bits_at(sc.model.width))
        t_down = costs.download(selected, bits=bits, rate_bps=dl_rate, rx_power_w=sc.channel.downlink.rx_power_w)[0]
        down_budget_s = float(np.max(t_down))
    ctx = RoundContext(
        round_index=r,
        selected=selected,
        rate_bps=radio.rates_bps(gain, fleet.tx_power_w, sel_mask, held=held),
        e_max_j=e_max,
        t_budget_s=None if run.t_max_s is None else run.t_max_s - down_budget_s,
        costs=costs,
        rng=streams.lazy_numpy("method", r),
    )
    plan = method.plan_round(ctx)
    jobs = plan.jobs
    dev = jobs.device
    tx_mask = np.zeros(n, dtype=bool)
    tx_mask[dev] = True
    rate = radio.rates_bps(gain, fleet.tx_power_w, tx_mask, held=held)  # sub-bands of the devices that transmit
    down_s, e_down = _downloads(run, jobs, gain)
    done: dict[str, Any] = {}

    def start() -> tuple[np.ndarray, np.ndarray]:
        """At dispatch: the jobs' work, charged by the cost model from what was really done."""
        work = done["work"] = wl.work(method, jobs, state.model, r)
        t_cmp, done["e_cmp"] = costs.compute(dev, cycles=costs.cycles(dev, work.flops), steps=work.steps, f_hz=jobs.cpu_hz)
        t_com, done["e_com"] = costs.upload(dev, bits=work.bits, rate_bps=rate[dev])
        return t_cmp, t_com

    outcome = clock.play(
        devices=dev, durations=start, policy=rcfg.policy, deadline_s=rcfg.deadline_s,
        keep=sc.method.clients_per_round, down_s=down_s, late=rcfg.late,
    )  # fmt: skip
    work = done["work"]
    # a job that stopped early (cancelled at the cut-off, or lost offline) is charged up to where it stopped
    e_cmp = prorated_energy_j(done["e_cmp"], outcome.t_cmp_s, outcome.cmp_done_s)
    e_com = prorated_energy_j(done["e_com"], outcome.t_com_s, outcome.com_done_s)
    e_down = prorated_energy_j(e_down, outcome.t_dl_s, outcome.dl_done_s)
    kept = outcome.kept_index  # arrival order
    model = wl.advance(method, state.model, jobs, work, kept, int(selected.size))
    block = device_block(
        r, plan, outcome, work, distance_m, rate, e_max, run.t_max_s, e_cmp=e_cmp, e_com=e_com, e_down=e_down,
        extra=method.device_values(jobs, work.updates),
    )  # fmt: skip
    energy = float(np.sum(e_cmp) + np.sum(e_com))  # every job, kept or not, up to where it stopped
    if sc.channel.downlink is not None:
        energy += float(np.sum(e_down))
    evaluate = r % sc.train.eval_every == 0 or r == sc.rounds
    seen = wl.assess(method, model, work, evaluate=evaluate, global_loss=sc.train.global_loss)
    row = {
        "round": r,
        "sim_time_s": outcome.end_s,
        "round_time_s": outcome.end_s - state.sim_time_s,  # a wait for an online device included
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
        "wanted": run.n_select,  # fewer are selected when fewer are online and idle
        "available": int(np.count_nonzero(available)),  # online and idle at the selection
    }
    if sc.train.global_loss:
        row["global_train_loss"] = seen.global_train_loss
    after = RunState(rounds_done=r, sim_time_s=outcome.end_s, energy_cum_j=row["energy_cum_j"], model=model)
    return after, RoundRecord(row, block)


def _downloads(run: Run, jobs: Any, gain: np.ndarray) -> tuple[float | np.ndarray, np.ndarray]:
    """Each job's download time [s] and energy [J]: ``round.downlink_s`` and no energy, or, with
    ``[channel.downlink]``, its (sub)model's bits over its own downlink rate (:meth:`CostModel.download`; the
    jobs' devices share the downlink band). A job downloads the width it trains (``min(job width,
    model.width)``: a submodel for width-shrinking methods). ``gain``: every device's channel gain, shape (n,)."""
    sc, dev = run.scenario, jobs.device
    dl = sc.channel.downlink
    if dl is None:
        return sc.round.downlink_s, np.zeros(len(jobs))
    width = np.minimum(jobs.width, sc.model.width)
    sizes = {w: float(run.workload.update_bits_at(w)) for w in np.unique(width).tolist()}
    bits = np.array([sizes[w] for w in width.tolist()], dtype=float)
    rate = run.radio.downlink_rates_bps(gain[dev])  # only the jobs' devices receive: their rates alone
    return run.costs.download(dev, bits=bits, rate_bps=rate, rx_power_w=dl.rx_power_w)
