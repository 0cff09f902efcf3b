"""The asynchronous driver: ``AsyncDriver.play(run, state) -> (state, record)``, one server update each.

The server keeps C = ``method.clients_per_round`` jobs in flight: whenever one ends (its arrival, or its loss
when the device goes offline) it dispatches the current global model to another online, idle device (seeded
uniform choice, stream ``selection`` keyed by the server update, :class:`_Selection`). A dispatched job is
planned by the method (FedAvg's plan: CPU policy, local work, energy budget), does its work at once on the model
it downloaded (training takes zero simulated time) and runs on the clock like a synchronous job (download,
compute, upload over its own sub-band; :meth:`edgefl.engine.clock.Clock.dispatch`). Arrivals go to the method's buffer;
when it holds ``buffer_size`` updates (1 for FedAsync, M for FedBuff) the method's server step makes the next global
model (:mod:`edgefl.methods.asynchronous`) and the update is recorded:

- ``rounds.csv``: one row per server update (``round`` = update index, ``sim_time_s`` its time,
  ``round_time_s`` since the previous update, ``selected`` jobs dispatched in between, ``arrived`` updates
  aggregated, ``dropped`` jobs lost offline in between, ``energy_j`` of the jobs that ended in between);
- ``device_rounds.csv``: one row per job that ended in between, with its ``staleness`` (server updates
  between its download and its aggregation; empty for a lost job).

With ``[channel.packet_errors]`` each dispatch draws how many times its jobs' uploads are sent (each device's
stream keyed by the dispatch's tag, :func:`_send`): a job whose every attempt is lost ends on the clock, charged,
and never joins the buffer (``reason = "packet error"``; it counts in ``dropped`` and ``packet_errors``).

Energy is charged when a job ends (pro rata up to a loss); jobs still in flight when the run ends are not
charged. Radio gains and mobility advance per server update; a job keeps the rates of its dispatch.

Checkpoints (``checkpoint_every``) are taken between server updates with jobs in flight: the server's version,
buffer and every live dispatch's job rows, trained updates and downloaded model (:meth:`AsyncServer.state_dict`),
and each dispatch's pending job ends on the clock (:meth:`edgefl.engine.clock.Clock.state_dict`, keyed by the dispatch's
tag); a resumed run writes the tables of an uninterrupted one (``tests/test_resume.py``).

Cost: a dispatch draws its devices by rejection from uniform device ids (:class:`_Selection`, one stream per
server update, so no scan of the fleet). It plans and prices only its selected devices; when the plan cannot
depend on the dispatch (:func:`_plans_per_update`: a method that plans each device alone, surrogate work, fixed
sub-bands, no budget drawn per dispatch) one plan per server update serves every dispatch of the update: it
plans, a batch at a time, only the devices dispatches reach (those drawn and those the selection stream holds
next, :func:`_plan_devices`), and a refill after one arrival is a row copy (:func:`_start_one`). A job ends by
one SimPy event (:meth:`edgefl.engine.clock.Clock.dispatch`), and its numbers are a row of its dispatch's float matrix,
which the update's record gathers at once. A run whose jobs are all lost offline, max(1000, 20 C) in a row,
stops with an error.

A job costs a few microseconds (selection, its row, the clock's event and its end, the record's share); an update
a millisecond or two whatever its number of jobs (the radio state of every device, the record, planning the devices
the update reaches). ``benchmarks/async_scale.py`` measures both.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.methods.base import ClientUpdate, DenseUpdate, JobTable, RoundContext, RoundPlan
from edgefl.engine.driver import Run
from edgefl.errors import SimulationError
from edgefl.learning.protocol import RoundWork
from edgefl.engine.round_steps import NO_LINK, charge, downloads, equal_bandwidth_hz, rounds_row, without_link
from edgefl.engine.records import RoundRecord, device_block
from edgefl.engine.clock import PACKET_ERROR, job_times
from edgefl.engine.run_state import RunState
from edgefl.fleet.devices import draw_budgets_j
from edgefl.fleet.packet_errors import upload_attempts

if TYPE_CHECKING:
    from edgefl.learning.protocol import Learning

__all__ = ["AsyncDriver", "AsyncServer", "fewer_collections", "play_update"]


_JOB_COLUMNS = tuple(f.name for f in fields(JobTable))
_COLUMNS = (
    *_JOB_COLUMNS, "flops", "bits", "steps", "losses", "distance_m", "rate_bps", "e_max_j", "e_cmp_j", "e_com_j",
    "e_down_j", "t_dl_s", "t_cmp_s", "t_com_s", "bandwidth_hz", "q", "t_down_s", "t_end_s", "lost", "version", "uploads",
    "failed",
)  # fmt: skip
_COL = {name: i for i, name in enumerate(_COLUMNS)}
_DISPATCH_COLUMNS = [_COL[c] for c in ("t_down_s", "t_end_s", "lost", "version", "uploads", "failed")]  # at dispatch
"""A job as a row of floats (ids, steps and flags are exact in float64): the columns of its JobTable and of its
work, its distance [m], rate [bit/s], budget and costs [J], durations [s], uplink sub-band [Hz] and its upload's
packet error rate (0 without ``[channel.packet_errors]``); then, set at dispatch, its download start and end [s],
whether it is lost offline, the model version it downloaded and, with ``[channel.packet_errors]`` (else NaN), how
many times its upload is sent and whether every attempt is lost (its ``t_com_s`` and ``e_com_j`` then count every
attempt)."""


@dataclass(eq=False)
class _Batch:
    """Jobs dispatched together: ``rows`` (shape (m, len(_COLUMNS))), their updates (None under surrogate
    learning) and the model they downloaded; the selected devices that sat out, why, and their distance [m] and
    budget [J] (shape (s,) each)."""

    rows: np.ndarray
    updates: Any
    model: Any
    skipped_device: np.ndarray
    skipped_reason: np.ndarray
    skip_distance_m: np.ndarray
    skip_e_max_j: np.ndarray
    tag: int = -1  # its key in AsyncServer.batches and on the clock (checkpoints)

    @classmethod
    def restored(cls, rows: np.ndarray, updates: Any, model: Any, tag: int) -> _Batch:
        """A batch read back from a checkpoint: its jobs, no device sitting out (those were recorded)."""
        empty = np.zeros(0)
        return cls(rows=rows, updates=updates, model=model, skipped_device=np.zeros(0, dtype=np.int64),
                   skipped_reason=np.zeros(0, dtype=object), skip_distance_m=empty, skip_e_max_j=empty, tag=tag)  # fmt: skip


@dataclass(eq=False)
class _FleetPlan:
    """The devices' jobs for server update ``u``, each planned as if selected, for dispatches whose plan does not
    depend on the dispatch (:func:`_plans_per_update`: a device's plan does not depend on the others), filled in
    as dispatches reach devices (:func:`_plan_devices`): ``known`` whether a device is planned, ``feasible``
    whether it has a job (else it sits out, ``reason[device]`` why), ``rows`` its job's row (shape
    (n, len(_COLUMNS)), set for the feasible devices only) and ``updates[device]`` its update; the budgets
    ``e_max_j`` [J] and the uplink rates ``rate_bps`` (set for the planned devices) [bit/s], shape (n,)."""

    u: int
    known: np.ndarray
    feasible: np.ndarray
    rows: np.ndarray
    updates: dict
    reason: dict
    e_max_j: np.ndarray
    rate_bps: np.ndarray


@dataclass(eq=False)
class AsyncServer:
    """An asynchronous run's server between updates: model version, jobs in flight, jobs ended since the last
    update (in order of their end) and the buffer of arrived updates (batch, job index); the current update's
    fleet plan when one plan serves every dispatch (``per_update``: None until decided)."""

    version: int = 0
    in_flight: int = 0
    ended: list[tuple[_Batch, int]] = field(default_factory=list)
    buffer: list[tuple[_Batch, int]] = field(default_factory=list)
    dispatched: int = 0
    skipped: list[tuple[_Batch, int]] = field(default_factory=list)
    per_update: bool | None = None
    fleet_plan: _FleetPlan | None = None
    rate_bps: np.ndarray | None = None  # a dispatch's planning rates, shape (n,): 0 but for its selected devices
    batches: dict[int, _Batch] = field(default_factory=dict)  # dispatches with a job in flight or in the buffer
    next_tag: int = 0
    selection: Any = None  # the current update's _Selection
    lost_in_a_row: int = 0  # jobs lost (offline or to packet errors) since the last arrival
    packet_errors: bool = False  # the run has [channel.packet_errors] (set by each update, read at each job end)

    def state_dict(self, clock: Any, learning: Learning) -> tuple[dict, dict | None]:
        """The server between updates, for a checkpoint: (JSON-able part, tensors or None). The JSON part holds
        the version, the jobs in flight count, the buffer (batch tag, job index) and every live batch's rows
        (:data:`_COLUMNS`) with the version of the model it downloaded; the downloaded models (one per version)
        are saved by ``learning`` (:meth:`~edgefl.learning.protocol.Learning.saved_state`): with the batches'
        trained updates in the tensor part when it trains, else in the JSON part. The jobs' pending ends are the
        clock's (:meth:`edgefl.engine.clock.Clock.state_dict`)."""
        self._prune(clock)
        versions = {int(b.rows[0, _COL["version"]]): b.model for b in self.batches.values()}
        meta = {
            "version": self.version, "in_flight": self.in_flight, "next_tag": self.next_tag,
            "lost_in_a_row": self.lost_in_a_row,
            "buffer": [[b.tag, j] for b, j in self.buffer],
            "batches": {str(t): {"rows": b.rows.tolist(), "version": int(b.rows[0, _COL["version"]])}
                        for t, b in self.batches.items()},
        }  # fmt: skip
        models = {str(v): learning.saved_state(m) for v, m in versions.items()}
        if not learning.trains:
            meta["models"] = models
            return meta, None
        updates = {str(t): [_update_to_saved(up) for up in b.updates] for t, b in self.batches.items()}
        return meta, {"updates": updates, "models": models}

    def load_state_dict(self, meta: dict, tensors: dict | None, learning: Learning) -> None:
        """Continue from :meth:`state_dict` (then restore the clock with :meth:`on_end_of`)."""
        self.version, self.in_flight = int(meta["version"]), int(meta["in_flight"])
        self.next_tag = int(meta["next_tag"])
        self.lost_in_a_row = int(meta.get("lost_in_a_row", 0))
        self.batches = {}
        for key, saved in meta["batches"].items():
            rows = np.array(saved["rows"], dtype=float, order="F").reshape(-1, len(_COLUMNS))
            v = str(saved["version"])
            if tensors is None:
                updates, model = [None] * rows.shape[0], learning.state_from_saved(meta["models"][v])
            else:
                updates = [_update_from_saved(x) for x in tensors["updates"][key]]
                model = learning.state_from_saved(tensors["models"][v])
            self.batches[int(key)] = _Batch.restored(rows, updates, model, int(key))
        self.buffer = [(self.batches[int(t)], int(j)) for t, j in meta["buffer"]]
        self.ended, self.skipped, self.fleet_plan = [], [], None

    def on_end_of(self, tag: int):
        """The ``on_end`` of the dispatch ``tag`` (for the clock's restored jobs)."""
        return _on_end(self, self.batches[int(tag)])

    def _prune(self, clock: Any, *, lazily: bool = False) -> None:
        """Forget batches with no job in flight and none in the buffer; ``lazily``: only once they are more
        than twice as many as could be live (each live batch has a job in flight or in the buffer), so that
        pruning costs O(1) a job."""
        if lazily and len(self.batches) <= 2 * (self.in_flight + len(self.buffer)) + 16:
            return
        live = clock.chain_tags() | {b.tag for b, _ in self.buffer}
        if len(live) != len(self.batches):
            self.batches = {t: b for t, b in self.batches.items() if t in live}


def _update_to_saved(up: Any) -> dict:
    """A trained job's :class:`~edgefl.methods.base.ClientUpdate` as plain data and tensors (what
    ``torch.load(weights_only=True)`` reads back); the asynchronous methods send dense updates."""
    if not isinstance(up.payload, DenseUpdate):
        raise SimulationError(f"cannot checkpoint an asynchronous job whose payload is {type(up.payload).__name__}")
    return {"device": up.device, "weight": up.weight, "bits": up.bits, "flops": up.flops, "steps": up.steps,
            "train_loss": up.train_loss, "update": {k: v.detach().clone() for k, v in up.payload.update.items()}}  # fmt: skip


def _update_from_saved(saved: dict) -> ClientUpdate:
    """The inverse of :func:`_update_to_saved`."""
    return ClientUpdate(device=int(saved["device"]), payload=DenseUpdate(saved["update"]), weight=float(saved["weight"]),
                        bits=float(saved["bits"]), flops=float(saved["flops"]), steps=int(saved["steps"]),
                        train_loss=float(saved["train_loss"]))  # fmt: skip


def _on_end(server: AsyncServer, batch: _Batch):
    """What happens when job ``j`` of ``batch`` ends: its slot frees, it is recorded, and it joins the buffer
    unless it was lost."""

    def on_end(j: int, lost: bool) -> None:
        server.in_flight -= 1
        server.ended.append((batch, j))
        if lost or (server.packet_errors and batch.rows[j, _FAILED] == 1.0):  # offline, or lost to packet errors
            server.lost_in_a_row += 1
        else:
            server.lost_in_a_row = 0
            server.buffer.append((batch, j))

    return on_end


def _plans_per_update(run: Run) -> bool:
    """Whether one plan of the fleet per server update gives every dispatch's plan, with the same numbers:
    the method plans each device alone (:attr:`edgefl.methods.base.Method.plans_each_device_alone`), the
    work is the plan's (surrogate learning), a device's uplink and downlink rates do not depend on how many
    devices share the band (:attr:`edgefl.engine.round_rules.RoundRules.fixed_bands`), and the energy budgets are not drawn
    per dispatch (none, or one fixed value)."""
    budget = run.rules.budget
    return (
        run.method.plans_each_device_alone
        and not run.workload.trains
        and run.rules.fixed_bands
        and (budget.kind == "none" or (budget.kind == "fixed" and not isinstance(budget.value_j, tuple)))
    )


def _job_rows(jobs: JobTable, work: RoundWork, **columns: np.ndarray | float) -> np.ndarray:
    """``jobs`` as rows (:data:`_COLUMNS`; the dispatch's columns NaN): their table, their ``work`` and
    ``columns`` (each a number or shape (m,))."""
    rows = np.empty((len(jobs), len(_COLUMNS)), order="F")  # filled a column at a time
    rows[:, _DISPATCH_COLUMNS] = np.nan
    for name in _JOB_COLUMNS:
        rows[:, _COL[name]] = getattr(jobs, name)
    for name, value in (("flops", work.flops), ("bits", work.bits), ("steps", work.steps), ("losses", work.losses),
                        *columns.items()):  # fmt: skip
        rows[:, _COL[name]] = value
    return rows


def _price(run: Run, state: RunState, u: int, plan: RoundPlan, gain, rate_dev, distance_m, e_max, *,
           held: int = 0, bandwidth_hz: float) -> tuple:  # fmt: skip
    """The work of ``plan``'s jobs and what it costs (uplink at ``rate_dev`` [bit/s], shape (m,), the rate of
    m devices sharing the band with ``held`` more, on sub-bands of ``bandwidth_hz`` [Hz]): their rows and updates;
    with ``[channel.packet_errors]`` each upload's packet error rate on that band
    (:meth:`edgefl.fleet.links.Radio.packet_error_rate`)."""
    costs, jobs = run.costs, plan.jobs
    dev = jobs.device
    waterfall = run.rules.waterfall
    q = 0.0 if waterfall is None else run.radio.packet_error_rate(
        gain[dev], run.fleet.tx_power_w[dev], dev.size, held=held, waterfall=waterfall
    )
    down_s, e_down = downloads(run, jobs, gain)
    work = run.learner.work(jobs, state=state.model, round_index=u)
    t_cmp, e_cmp = costs.compute(dev, cycles=costs.cycles(dev, work.flops), steps=work.steps, f_hz=jobs.cpu_hz)
    t_com, e_com = costs.upload(dev, bits=work.bits, rate_bps=rate_dev)
    rows = _job_rows(
        jobs, work, distance_m=distance_m[dev], rate_bps=rate_dev, e_max_j=e_max[dev], e_cmp_j=e_cmp, e_com_j=e_com,
        e_down_j=e_down, t_dl_s=down_s, t_cmp_s=t_cmp, t_com_s=t_com, q=q, bandwidth_hz=bandwidth_hz,
    )  # fmt: skip
    return rows, work.updates


def _fleet_plan(run: Run, server: AsyncServer, u: int) -> _FleetPlan | None:
    """The fleet plan of update ``u`` (made empty at its first dispatch), or None when dispatches plan one by
    one."""
    if server.per_update is None:
        server.per_update = _plans_per_update(run)
    if not server.per_update:
        return None
    if server.fleet_plan is not None and server.fleet_plan.u == u:
        return server.fleet_plan
    n = run.fleet.n_devices
    server.fleet_plan = _FleetPlan(
        u=u, known=np.zeros(n, dtype=bool), feasible=np.zeros(n, dtype=bool), rows=np.empty((n, len(_COLUMNS))),
        updates={}, reason={}, e_max_j=draw_budgets_j(run.rules.budget, n, None), rate_bps=np.zeros(n),
    )  # fmt: skip  # no budget is drawn: none, or one value
    return server.fleet_plan


def _plan_devices(run: Run, state: RunState, server: AsyncServer, devices: np.ndarray, distance_m, gain) -> bool:
    """Plan and price, in one call of the method's plan, those of ``devices`` the update's fleet plan does not
    know yet (the same numbers for each device as planning the whole fleet: its plan and rate are its own;
    fixed sub-bands). Returns False, discards the plan and turns the per-update plan off if the method drew from
    its stream (a method that plans each device alone does not: each dispatch has a stream of its own)."""
    fp = server.fleet_plan
    todo = np.unique(devices[~fp.known[devices]])
    if not todo.size:
        return True
    dead = without_link(run, todo, gain)
    no_link, todo = todo[dead], todo[~dead]
    fp.known[no_link] = True
    fp.reason.update((int(d), NO_LINK) for d in no_link.tolist())
    if not todo.size:
        return True
    fp.rate_bps[todo] = run.radio.rates_bps(gain[todo], run.fleet.tx_power_w[todo])
    rng = run.streams.lazy_numpy("method", fp.u)
    ctx = RoundContext(round_index=fp.u, selected=todo, rate_bps=fp.rate_bps, e_max_j=fp.e_max_j, t_budget_s=None,
                       costs=run.costs, rng=rng)  # fmt: skip
    plan = run.method.plan_round(ctx)
    if rng.used:
        server.per_update, server.fleet_plan = False, None
        return False
    dev = plan.jobs.device
    rows, updates = _price(run, state, fp.u, plan, gain, fp.rate_bps[dev], distance_m, fp.e_max_j,
                           bandwidth_hz=equal_bandwidth_hz(run, 1))  # fixed sub-bands
    fp.rows[dev] = rows
    fp.feasible[dev] = True
    fp.known[todo] = True
    fp.updates.update(zip(dev.tolist(), updates))
    fp.reason.update(zip(plan.skipped_device.tolist(), plan.skipped_reason.tolist()))
    return True


def _plan_dispatch(run: Run, state: RunState, server: AsyncServer, u: int, k: int, selected, distance_m, gain):
    """Plan and price one dispatch's ``selected`` devices (those alone: a device's uplink rate depends only on
    its own gain and power and on how many share the band, :meth:`edgefl.fleet.links.Radio.rates_bps`); returns the
    jobs' rows and updates, and the devices that sit out, why, and their budgets [J]. The budget stream is drawn
    only when there are budgets, the method's stream only if the method draws from it."""
    clock, fleet, radio = run.clock, run.fleet, run.radio
    n = fleet.n_devices
    e_max = draw_budgets_j(run.rules.budget, n, run.streams.lazy_numpy("budgets", u, k))
    held = clock.n_busy()
    dead = without_link(run, selected, gain, held=held)
    no_link, selected = selected[dead], selected[~dead]
    rate_sel = radio.rates_bps(gain[selected], fleet.tx_power_w[selected], held=held)
    if server.rate_bps is None:
        server.rate_bps = np.zeros(n)
    rate = server.rate_bps
    rate[selected] = rate_sel
    ctx = RoundContext(round_index=u, selected=selected, rate_bps=rate, e_max_j=e_max, t_budget_s=None,
                       costs=run.costs, rng=run.streams.lazy_numpy("method", u, k))  # fmt: skip
    try:
        plan = run.method.plan_round(ctx)
    finally:
        rate[selected] = 0.0
    if no_link.size:
        plan = plan.with_skipped(no_link, np.full(no_link.size, NO_LINK, dtype=object))
    dev = plan.jobs.device
    if dev.size == selected.size:  # the same number share the band: the same rates
        rate_dev = rate_sel[np.searchsorted(selected, dev)]
    else:
        rate_dev = radio.rates_bps(gain[dev], fleet.tx_power_w[dev], held=held)
    rows, updates = _price(run, state, u, plan, gain, rate_dev, distance_m, e_max, held=held,
                           bandwidth_hz=equal_bandwidth_hz(run, dev.size + held))  # fmt: skip
    skip = plan.skipped_device
    return rows, updates, skip, plan.skipped_reason, e_max[skip]


_LOST_MIN, _LOST_PER_SLOT = 1000, 20
"""A run stops with an error once max(1000, 20 C) jobs in a row were lost offline with no arrival between:
without it, a fleet whose jobs always outlast its online periods would dispatch forever. A fleet where 5% of
jobs arrive loses 1,000 in a row with probability 0.95^1000 ~ 5e-23."""

_NO_DEVICE, _NO_REASON, _NO_FLOAT = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0)


class _Selection:
    """The server's uniform choice of online, idle devices for the dispatches of one server update, from the
    stream ``selection`` keyed by the update: device ids are drawn uniformly from 0..n-1 (a block of
    :data:`BLOCK` at a time) and kept when the device is online, idle and not yet chosen, which is uniform
    sampling without replacement among those devices. After :data:`MAX_TRIES` rejections in a row (few devices
    left to choose from) the rest are drawn directly among them (``Generator.choice``), which is uniform too."""

    BLOCK = 256
    MAX_TRIES = 64
    __slots__ = ("rng", "n", "block", "i")

    def __init__(self, rng: np.random.Generator, n_devices: int) -> None:
        self.rng, self.n, self.block, self.i = rng, int(n_devices), [], 0

    def _next_id(self) -> int:
        """The next uniform device id of the stream."""
        if self.i == len(self.block):
            self.block, self.i = self.rng.integers(0, self.n, size=self.BLOCK).tolist(), 0
        self.i += 1
        return self.block[self.i - 1]

    def draw_one(self, clock: Any) -> int:
        """One online, idle device of ``clock`` (-1: none is); the same draw as ``draw(1, clock)``."""
        online, busy = clock.online, clock.busy
        for _ in range(self.MAX_TRIES):
            d = self._next_id()
            if online[d] and not busy[d]:
                return d
        ids = np.flatnonzero(clock.available())
        return int(ids[self.rng.choice(ids.size, size=1, replace=False)[0]]) if ids.size else -1

    def pending(self) -> list[int]:
        """The device ids the stream has drawn and not yet offered (the rest of its current block)."""
        return self.block[self.i :]

    def draw(self, k: int, clock: Any) -> np.ndarray:
        """Up to ``k`` distinct online, idle devices of ``clock``, sorted, shape (<= k,) (fewer only when fewer
        are online and idle)."""
        if k == 1:
            d = self.draw_one(clock)
            return np.array([d] if d >= 0 else [], dtype=np.int64)
        online, busy = clock.online, clock.busy
        chosen: list[int] = []
        seen: set[int] = set()
        tries = 0
        while len(chosen) < k:
            d = self._next_id()
            if online[d] and not busy[d] and d not in seen:
                chosen.append(d)
                seen.add(d)
                tries = 0
                continue
            tries += 1
            if tries >= self.MAX_TRIES:
                ids = np.flatnonzero(clock.available())
                if chosen:
                    ids = np.setdiff1d(ids, chosen, assume_unique=True)
                take = min(k - len(chosen), ids.size)
                if take:
                    chosen.extend(ids[self.rng.choice(ids.size, size=take, replace=False)].tolist())
                break
        return np.sort(np.array(chosen, dtype=np.int64))


def _dispatch(run: Run, state: RunState, server: AsyncServer, u: int, k: int, distance_m, gain) -> int:
    """Dispatch up to the free slots to online, idle devices; return how many jobs started or sat out."""
    clock = run.clock
    free = run.n_select - server.in_flight
    if free <= 0:
        return 0
    fleet_plan = server.fleet_plan
    if fleet_plan is None or fleet_plan.u != u:
        fleet_plan = _fleet_plan(run, server, u)
    selection = server.selection
    if free == 1:  # a refill after one arrival
        d = selection.draw_one(clock)
        if d < 0:
            return 0
        if fleet_plan is not None and fleet_plan.known[d] and fleet_plan.feasible[d]:
            return _start_one(run, server, fleet_plan, d, state.model)
        selected = np.array([d], dtype=np.int64)
    else:
        selected = selection.draw(free, clock)
        if not selected.size:
            return 0
    if fleet_plan is not None and not fleet_plan.known[selected].all():
        # plan these devices and the ones the selection stream holds next (the likely next dispatches)
        ahead = np.concatenate([selected, np.array(selection.pending(), dtype=np.int64)])
        if not _plan_devices(run, state, server, ahead, distance_m, gain):
            fleet_plan = None
    if fleet_plan is not None:
        if selected.size == 1 and fleet_plan.feasible[selected[0]]:
            return _start_one(run, server, fleet_plan, int(selected[0]), state.model)
        feasible = fleet_plan.feasible[selected]
        dev, skip = (selected, selected[:0]) if feasible.all() else (selected[feasible], selected[~feasible])
        skip_list = skip.tolist()
        reason = np.array([fleet_plan.reason[i] for i in skip_list], dtype=object)
        skip_e_max = fleet_plan.e_max_j[skip]
        rows = fleet_plan.rows[dev]
        updates = [fleet_plan.updates[i] for i in dev.tolist()]
    else:
        rows, updates, skip, reason, skip_e_max = _plan_dispatch(run, state, server, u, k, selected, distance_m, gain)
        dev = rows[:, _COL["device"]].astype(np.int64)
    batch = _Batch(rows=rows, updates=updates, model=state.model, skipped_device=skip, skipped_reason=reason,
                   skip_distance_m=distance_m[skip], skip_e_max_j=skip_e_max, tag=server.next_tag)  # fmt: skip
    for i in range(skip.size):
        server.skipped.append((batch, i))
    if dev.size:
        server.batches[batch.tag] = batch
        server.next_tag += 1
    rows[:, _COL["t_down_s"]] = clock.env.now
    rows[:, _COL["version"]] = server.version
    _send(run, rows, batch.tag)
    t_end, lost = clock.dispatch(
        dev, down_s=rows[:, _COL["t_dl_s"]], t_cmp_s=rows[:, _COL["t_cmp_s"]], t_com_s=rows[:, _COL["t_com_s"]],
        on_end=_on_end(server, batch), tag=batch.tag,
    )  # fmt: skip
    rows[:, _COL["t_end_s"]] = t_end
    rows[:, _COL["lost"]] = lost
    m = dev.size
    server.in_flight += m
    server.dispatched += m
    return m + int(skip.size)


_T_DL, _T_CMP, _T_COM, _T_DOWN, _T_END, _LOST, _VERSION, _UPLOADS, _FAILED = (
    _COL[c] for c in ("t_dl_s", "t_cmp_s", "t_com_s", "t_down_s", "t_end_s", "lost", "version", "uploads", "failed")
)


def _send(run: Run, rows: np.ndarray, tag: int) -> None:
    """At dispatch, the jobs' uploads (``rows``, changed in place): once each, or with ``[channel.packet_errors]``
    until an attempt gets through (:func:`edgefl.fleet.packet_errors.upload_attempts`, each device's stream keyed
    by the dispatch's ``tag``), every attempt charged its time and energy."""
    rules = run.rules
    if rules.waterfall is None:  # the columns stay NaN: nothing reads them
        return
    dev = rows[:, _COL["device"]].astype(np.int64)
    attempts, failed = upload_attempts(rows[:, _COL["q"]], dev, key=tag, retransmissions=rules.retransmissions,
                                       streams=run.streams)  # fmt: skip
    empty = rows[:, _COL["bits"]] <= 0  # nothing sent, nothing lost
    failed[empty], attempts[empty] = False, 1
    rows[:, _UPLOADS], rows[:, _FAILED] = attempts, failed
    rows[:, _T_COM] *= attempts
    rows[:, _COL["e_com_j"]] *= attempts


def _start_one(run: Run, server: AsyncServer, plan: _FleetPlan, device: int, model: Any) -> int:
    """Start ``device``'s job of ``plan`` now, a dispatch of its own (what :func:`_dispatch` does for one
    selected device that can train, with Python numbers); returns 1."""
    clock = run.clock
    rows = plan.rows[device : device + 1].copy()
    row = rows[0]
    row[_T_DOWN] = clock.env.now
    row[_VERSION] = server.version
    tag = server.next_tag
    _send(run, rows, tag)
    batch = _Batch(rows=rows, updates=[plan.updates[device]], model=model, skipped_device=_NO_DEVICE,
                   skipped_reason=_NO_REASON, skip_distance_m=_NO_FLOAT, skip_e_max_j=_NO_FLOAT, tag=tag)  # fmt: skip
    server.batches[tag] = batch
    server.next_tag = tag + 1
    t_end, lost = clock.dispatch_one(device, row[_T_DL], row[_T_CMP], row[_T_COM], on_end=_on_end(server, batch),
                                     tag=tag)  # fmt: skip
    row[_T_END] = t_end
    row[_LOST] = lost
    server.in_flight += 1
    server.dispatched += 1
    return 1


_GC_YOUNG = 10_000
"""Allocations between the garbage collector's young-generation passes while an asynchronous run plays
(Python's default is 700): every job in flight is a few small objects that outlive several passes, and at
10^4 devices with 1,000 jobs in flight the default passes cost about a tenth of the run
(``benchmarks/async_scale.py``)."""


@contextmanager
def fewer_collections():
    """Raise the garbage collector's young-generation threshold to :data:`_GC_YOUNG` (unless the collector is
    off or already rarer) for the ``with`` block, and restore the caller's thresholds on the way out
    (:meth:`AsyncDriver.playing`: :func:`edgefl.run.runner.run_scenario` plays the run inside it). Results do not
    depend on it."""
    saved = gc.get_threshold()
    if 0 < saved[0] < _GC_YOUNG:
        gc.set_threshold(_GC_YOUNG, *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


class AsyncDriver:
    """Plays an asynchronous run server update by server update (:func:`play_update`); its memory between
    updates is its :attr:`server` (checkpointed with :meth:`state_dict`)."""

    def __init__(self) -> None:
        self.server = AsyncServer()

    def play(self, run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
        return play_update(run, state, self.server)

    def playing(self) -> AbstractContextManager[Any]:
        return fewer_collections()

    def state_dict(self, run: Run) -> tuple[dict, dict | None]:
        return self.server.state_dict(run.clock, run.workload)

    def load_state_dict(self, run: Run, meta: dict | None, tensors: dict | None) -> None:
        if meta is None:
            raise SimulationError("the checkpoint has no asynchronous server state")
        self.server.load_state_dict(meta, tensors, run.workload)

    def job_ends(self) -> Callable[[int], Callable[[int, bool], None]]:
        return self.server.on_end_of


def play_update(run: Run, state: RunState, server: AsyncServer) -> tuple[RunState, RoundRecord]:
    """Play until ``server``'s next model update (update ``state.rounds_done + 1``); return the state after it
    and its record (module docstring)."""
    clock, method = run.clock, run.method
    u = state.rounds_done + 1
    wall0 = time.perf_counter()
    distance_m, gain = run.radio.round_state(u)
    env, m_needed = clock.env, method.buffer_size
    k = 0
    server.dispatched = 0
    server.packet_errors = run.rules.waterfall is not None
    server.selection = _Selection(run.streams.numpy("selection", u), run.fleet.n_devices)
    lost_limit = max(_LOST_MIN, _LOST_PER_SLOT * run.n_select)
    while len(server.buffer) < m_needed:
        if _dispatch(run, state, server, u, k, distance_m, gain):
            k += 1
        if env.peek() == math.inf:
            why = ""
            if server.skipped:
                batch, i = server.skipped[-1]
                why = f" (the last device to sit out: {batch.skipped_reason[i]})"
            raise SimulationError(f"at t={env.now:g} s no job is in flight and no device can take one{why}")
        if server.lost_in_a_row >= lost_limit:
            if run.rules.waterfall is not None:
                raise SimulationError(
                    f"at t={env.now:g} s the last {server.lost_in_a_row} jobs were all lost, to devices going "
                    "offline or to packet errors: no update gets through (lower channel.packet_errors.waterfall, "
                    "allow more retransmissions, or lengthen fleet.availability's online periods)"
                )  # fmt: skip
            raise SimulationError(
                f"at t={env.now:g} s the last {server.lost_in_a_row} jobs were all lost to devices going "
                "offline before they ended: the jobs outlast the online periods (lengthen "
                "fleet.availability's online periods or shorten the jobs)"
            )  # fmt: skip
        env.step()
    taken, server.buffer = server.buffer[:m_needed], server.buffer[m_needed:]
    taken_rows = _rows(taken)
    tau = server.version - taken_rows[:, _COL["version"]]
    model = run.learner.server_step(
        state.model, updates=[b.updates[j] for b, j in taken], bases=[b.model for b, _ in taken], tau=tau,
        alpha=taken_rows[:, _COL["alpha"]], beta=taken_rows[:, _COL["beta"]],
    )  # fmt: skip
    server.version += 1
    server._prune(clock, lazily=True)
    record = _record(run, state, server, u, taken, tau, model, wall0)
    return RunState(rounds_done=u, sim_time_s=env.now, energy_cum_j=record.row["energy_cum_j"], model=model), record


def _rows(jobs: list[tuple[_Batch, int]]) -> np.ndarray:
    """The rows of ``jobs`` (batch, job index), shape (len(jobs), len(_COLUMNS))."""
    if not jobs:
        return np.zeros((0, len(_COLUMNS)))
    return np.array([b.rows[j] for b, j in jobs])


def _record(run: Run, state: RunState, server: AsyncServer, u: int, taken: list[tuple[_Batch, int]], tau: np.ndarray,
            model: Any, wall0: float) -> RoundRecord:
    """The update's row and the device rows of the jobs that ended since the previous update (sorted by device,
    stably: in order of their end for a device's several jobs)."""
    env, rules = run.clock.env, run.rules
    ended, server.ended = server.ended, []
    skipped, server.skipped = server.skipped, []
    rows = _rows(ended)
    order = np.argsort(rows[:, _COL["device"]], kind="stable")
    rows, ended = rows[order], [ended[i] for i in order.tolist()]
    col = lambda name: rows[:, _COL[name]]  # noqa: E731
    jobs = {name: col(name) for name in _JOB_COLUMNS}  # the jobs' planned columns, as the record reads them
    jobs["device"] = jobs["device"].astype(np.int64)
    aggregated = {(id(b), j): t for (b, j), t in zip(taken, tau.tolist())}
    lost = col("lost").astype(bool)
    kept = np.array([(id(b), j) in aggregated for b, j in ended], dtype=bool)
    staleness = np.array([aggregated.get((id(b), j), math.nan) for b, j in ended], dtype=float)
    work = RoundWork(flops=col("flops"), bits=col("bits"), steps=col("steps").astype(np.int64), losses=col("losses"),
                     updates=[b.updates[j] for b, j in ended])  # fmt: skip
    times = job_times(lost=lost, kept=kept, t_down_s=col("t_down_s"), t_dl_s=col("t_dl_s"), t_cmp_s=col("t_cmp_s"),
                      t_com_s=col("t_com_s"), t_end_s=col("t_end_s"))  # fmt: skip
    extra: dict[str, np.ndarray] = {"staleness": staleness}
    more: dict[str, float] = {}
    if rules.waterfall is not None:  # [channel.packet_errors]: the uploads lost to them, and every job's attempts
        failed = (col("failed") == 1.0) & ~lost
        times.status[failed] = PACKET_ERROR
        extra["uploads"] = col("uploads")
        more["packet_errors"] = int(np.count_nonzero(failed))
    charges = charge(run, times, dev=jobs["device"], e_cmp_j=col("e_cmp_j"), e_com_j=col("e_com_j"),
                     e_down_j=col("e_down_j"))
    skip_dev = np.array([b.skipped_device[i] for b, i in skipped], dtype=np.int64)
    skip_reason = np.array([b.skipped_reason[i] for b, i in skipped], dtype=object)
    skip_distance = np.array([b.skip_distance_m[i] for b, i in skipped], dtype=float)
    skip_e_max = np.array([b.skip_e_max_j[i] for b, i in skipped], dtype=float)
    block = device_block(
        r=u, jobs=jobs, skipped_device=skip_dev, skipped_reason=skip_reason, times=times, work=work,
        distance_m=np.concatenate([col("distance_m"), skip_distance]),
        rate_bps=col("rate_bps"), e_max_j=np.concatenate([col("e_max_j"), skip_e_max]), t_max_s=None,
        e_cmp_j=charges.e_cmp_j, e_com_j=charges.e_com_j, e_down_j=charges.e_down_j, extra=extra,
        profiles=run.fleet.profiles, e_static_j=charges.e_static_j, bandwidth_hz=col("bandwidth_hz"),
        tx_power_w=run.fleet.tx_power_w[jobs["device"]],
    )  # fmt: skip
    kept_idx = np.flatnonzero(kept)
    seen_work = RoundWork(flops=work.flops[kept_idx], bits=work.bits[kept_idx], steps=work.steps[kept_idx],
                          losses=work.losses[kept_idx], updates=[work.updates[i] for i in kept_idx])  # fmt: skip
    seen = run.learner.assess(model, seen_work, evaluate=rules.evaluates(u), global_loss=rules.global_loss)
    row = rounds_row(
        run=run, r=u, start_s=state.sim_time_s, end_s=env.now, energy_before_j=state.energy_cum_j, charges=charges,
        selected=server.dispatched, arrived=len(taken), dropped=int(np.count_nonzero(lost)) + int(more.get("packet_errors", 0)),
        bits_up=float(np.sum(work.bits)), seen=seen, skipped=len(skipped), learning_gain=math.nan,
        available=int(np.count_nonzero(run.clock.available())), wall0=wall0,
        staleness_mean=float(np.mean(tau)) if tau.size else math.nan, **more,
    )  # fmt: skip
    return RoundRecord(row, block)
