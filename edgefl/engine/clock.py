"""SimPy engine: one environment for a whole run, device states driven by its events, the server's rounds on it.

A :class:`Clock` holds one ``simpy.Environment`` from the first round to the last; simulated time runs across
rounds and every recorded time is absolute [s]. Each device is in one of five states (:data:`STATES`):
offline, idle, downloading, computing, uploading. Whether a device is online is decided by its availability
process (one SimPy process per device, :mod:`edgefl.fleet.availability`; without a schedule every device is always
online). What an online device does is its job: download ``t_dl``, compute ``t_cmp``, upload ``t_com``. A job's
phases are known when it is dispatched, so its only event is its end (its arrival, or its loss when the device
goes offline; a cancel happens at the server's cut-off): that event frees the device, and the state between
dispatch and end is read from the job's times (:meth:`Clock.state`). A SimPy process per job would say the same
with three more events per job, which costs more than the rest of a 10^4-device round.

A round (:meth:`Clock.play`) is the server's wait under its policy, after it has selected among the devices that
are online and idle (:meth:`Clock.begin_round`: when none is, it waits for the next one to become so):

    dispatch at t0 (the round start): every job's work is done at once (real training takes zero simulated
    time, and a job's result does not depend on when in the round it starts), giving its durations;
    job j: download [t0, t_start_j = t0 + t_dl_j), compute [t_start_j, t_start_j + t_cmp_j),
           upload until its arrival  t_arrive_j = t_start_j + (t_cmp_j + t_com_j)  (its own FDMA sub-band: no
           contention, so every arrival is known at dispatch);
    under TDMA (``channel.access = "tdma"``) the uploads take turns on one channel instead: job j uploads from
           max(its compute end, the previous upload's end), first come first served or in a planned order
           (:func:`tdma_uploads`), so its arrivals are still known at dispatch; it waits idle in between;
    server: ``wait_all`` until every job has ended; ``deadline`` until every job has ended or
           t0 + deadline_s, whichever is first; ``over_select`` until the ``keep``-th arrival (or every job ended).

Arrivals are chained in order of arrival time: only the next one sits in SimPy's queue, as a timeout whose
callback frees its device and schedules the one after (one event per job at O(1) queue cost keeps rounds of
10^4 devices cheap); the arrival times are those of the chain, ``t_k = t_{k-1} + max(0, due_k - t_{k-1})``.
Ties arrive in job order. Before selecting, the server plays every event due at that instant (:meth:`Clock.begin_round`),
so a job that ends exactly at a round's start frees its device for that round.

Late jobs (``late``): under ``deadline`` and ``over_select`` a job whose update the server no longer waits for
either finishes (``"finish"``, the default: its energy is charged in full, and until its arrival the device is
busy: the server cannot select it, and under ``bandwidth_mode = "split"`` it keeps its sub-band), or is
cancelled at the cut-off (``"cancel"``: it stops at the round end; it has spent ``clip(t_end - t_start, 0,
t_cmp)`` computing and ``clip(t_end - t_cmp_end, 0, t_com)`` uploading, and its energy is charged pro rata of
those, :func:`edgefl.fleet.costs.prorated_energy_j`).

A kept update due within the deadline's rounding slack (``DEADLINE_RTOL``) after the cut-off frees its device at
the cut-off. Availability: a device that goes offline during a job loses it at that instant (``status = "offline"``): energy
is charged up to there, as for a cancelled job. Its loss counts as the end of its job for ``wait_all``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import simpy

from edgefl.errors import SimulationError

if TYPE_CHECKING:
    from edgefl.fleet.availability import Availability

__all__ = [
    "Clock", "DeviceTimeline", "JobTimes", "RoundOutcome", "job_times", "phase_times_done", "simulate_round", "STATES", "OFFLINE", "IDLE",
    "DOWNLOADING", "COMPUTING", "UPLOADING", "LATE_MODES", "PACKET_ERROR", "tdma_uploads",
]  # fmt: skip

Policy = Literal["wait_all", "deadline", "over_select"]
Late = Literal["finish", "cancel"]
LATE_MODES: tuple[str, ...] = ("finish", "cancel")

OFFLINE, IDLE, DOWNLOADING, COMPUTING, UPLOADING = 0, 1, 2, 3, 4
STATES: tuple[str, ...] = ("offline", "idle", "downloading", "computing", "uploading")
"""Device states, indexed by the codes above."""

DEADLINE_RTOL = 1e-9
"""Relative slack when judging an arrival against the deadline (floating-point rounding only)."""

# how a job ended: arrived in time (kept), arrived after the server stopped waiting, cancelled, lost offline,
# its upload lost to packet errors (every attempt failed: it ended on the clock but brought nothing)
KEPT, LATE, CANCELLED, LOST, PACKET_ERROR = "kept", "late", "cancelled", "offline", "packet error"


@dataclass(frozen=True, kw_only=True)
class DeviceTimeline:
    """Absolute simulated times [s] of one job and whether its update was kept."""

    job: Any
    update: Any
    t_down_s: float
    t_start_s: float
    t_cmp_end_s: float
    t_arrive_s: float
    t_end_s: float
    t_cmp_s: float
    t_com_s: float
    kept: bool
    status: str


@dataclass(frozen=True, kw_only=True, eq=False)
class JobTimes:
    """What happened to each of some jobs on the clock, in job order (shape (m,) each): what the record and the
    charge read, from a round (:class:`RoundOutcome`) or from the jobs that ended between two asynchronous
    server updates (:func:`job_times`).

    Absolute [s]: ``t_down_s`` (download start = dispatch), ``t_start_s`` (compute start), ``t_arrive_s``
    (upload end; NaN for a job that never arrives), ``t_end_s`` (the device is free again). Durations [s]:
    ``t_dl_s``, ``t_cmp_s``, ``t_com_s`` as planned from the work; ``dl_done_s``, ``cmp_done_s``, ``com_done_s``
    what was spent. ``kept_mask``: the update counts; ``status``: kept, late, cancelled, offline or packet error.
    Under TDMA (else None): ``t_wait_s`` how long each job waited for the channel between its compute end and its
    upload start [s], and ``wait_done_s`` the part of it spent before the job stopped.
    """

    t_down_s: np.ndarray
    t_start_s: np.ndarray
    t_arrive_s: np.ndarray
    t_end_s: np.ndarray
    t_dl_s: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    cmp_done_s: np.ndarray
    com_done_s: np.ndarray
    dl_done_s: np.ndarray
    kept_mask: np.ndarray
    status: np.ndarray
    t_wait_s: np.ndarray | None = None
    wait_done_s: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class RoundOutcome(JobTimes):
    """A simulated round: start and end [s] and, per job (in job order), its timeline as arrays.

    Absolute [s]: ``t_down_s`` (download start = dispatch), ``t_start_s`` (compute start), ``t_cmp_end_s``,
    ``t_arrive_s`` (upload end; NaN for a job that never arrives: cancelled or lost offline), ``t_end_s`` (when
    the device is free again: its arrival, or the instant it stopped). Durations [s]: ``t_dl_s``, ``t_cmp_s``,
    ``t_com_s`` as planned from the work; ``dl_done_s``, ``cmp_done_s``, ``com_done_s`` what was actually spent
    downloading, computing and uploading (equal to the planned durations unless the job stopped early).
    ``kept``: the update counts; ``status``: kept, late, cancelled or offline; ``arrival_order``: indices of the jobs that arrive, in order
    of arrival. Every array has shape (n_jobs,), ``arrival_order`` (n_arriving,).
    """

    start_s: float
    end_s: float
    jobs: Sequence[Any]
    updates: list[Any]
    t_cmp_end_s: np.ndarray
    arrival_order: np.ndarray

    @cached_property
    def devices(self) -> tuple[DeviceTimeline, ...]:
        """One timeline per job, in job order."""
        return tuple(
            DeviceTimeline(
                job=self.jobs[i], update=self.updates[i], t_down_s=float(self.t_down_s[i]),
                t_start_s=float(self.t_start_s[i]), t_cmp_end_s=float(self.t_cmp_end_s[i]),
                t_arrive_s=float(self.t_arrive_s[i]), t_end_s=float(self.t_end_s[i]), t_cmp_s=float(self.t_cmp_s[i]),
                t_com_s=float(self.t_com_s[i]), kept=bool(self.kept_mask[i]), status=str(self.status[i]),
            )  # fmt: skip
            for i in range(len(self.jobs))
        )

    @property
    def kept_index(self) -> np.ndarray:
        """Indices of the kept jobs, in arrival order."""
        return self.arrival_order[self.kept_mask[self.arrival_order]]

    @property
    def kept(self) -> list[DeviceTimeline]:
        """Timelines of the updates that count, in arrival order."""
        return [self.devices[i] for i in self.kept_index]


Durations = Callable[[], tuple[np.ndarray, np.ndarray]]


class Clock:
    """One SimPy environment for a whole run of ``n_devices`` devices, starting at ``start_s`` [s].

    ``availability`` (an :class:`edgefl.fleet.availability.Availability`) puts each device on- and offline as a
    process of its own; None keeps every device online. :meth:`state` gives every device's state code.
    """

    def __init__(self, n_devices: int, *, start_s: float = 0.0, availability: Availability | None = None) -> None:
        self.n_devices = n_devices
        self.availability = availability
        self._start(start_s)

    def _start(self, start_s: float) -> None:
        """A fresh environment at ``start_s`` [s]: every device idle, online as its schedule says then."""
        n_devices, availability = self.n_devices, self.availability
        self.env = env = simpy.Environment(initial_time=start_s)
        self.online = np.ones(n_devices, dtype=bool)
        # the job each device is on: compute start, compute end, job end [s]; NaN when idle
        self._t_start = np.full(n_devices, np.nan)
        self._t_cmp_end = np.full(n_devices, np.nan)
        self._t_end = np.full(n_devices, np.nan)
        self._busy = np.zeros(n_devices, dtype=bool)
        self._online_s = np.zeros(n_devices)  # time spent online before the current online period [s]
        self._online_since = np.full(n_devices, start_s)
        self._chains: dict[int, _Chain] = {}  # asynchronous dispatches with a job still to end, by id
        self._chain_ids = 0
        self._chain_seq = 0  # counts chain events scheduled: their order at equal times
        if availability is not None:
            self.online[:] = availability.online_at(np.arange(n_devices), start_s)
            for dev in range(n_devices):
                env.process(self._presence(dev))

    # ------------------------------------------------------------------ device states
    def state(self) -> np.ndarray:
        """Every device's state code now (:data:`STATES`), shape (n,): a busy device's phase follows from its
        job's times (downloading before its compute start, computing before its compute end, then uploading)."""
        now = self.env.now
        with np.errstate(invalid="ignore"):
            phase = np.where(now < self._t_start, DOWNLOADING, np.where(now < self._t_cmp_end, COMPUTING, UPLOADING))
        return np.where(~self.online, OFFLINE, np.where(self._busy, phase, IDLE)).astype(np.int8)

    def available(self) -> np.ndarray:
        """Devices the server can select now: online and idle, bool shape (n,)."""
        return self.online & ~self._busy

    @property
    def busy(self) -> np.ndarray:
        """Devices still working on a job, bool shape (n,) (the clock's own array: read, never write)."""
        return self._busy

    def n_busy(self) -> int:
        """Devices still working on a job (each holds its uplink sub-band until the job ends)."""
        return int(np.count_nonzero(self._busy))

    def _start_jobs(self, dev: np.ndarray, t_start: np.ndarray, t_cmp_end: np.ndarray, t_end: np.ndarray) -> None:
        """Devices ``dev`` (shape (m,)) start jobs with these compute starts, compute ends and ends [s]."""
        self._busy[dev] = True
        self._t_start[dev], self._t_cmp_end[dev], self._t_end[dev] = t_start, t_cmp_end, t_end

    def _presence(self, dev: int):
        """Availability process of device ``dev``: it walks the device's online periods from the schedule."""
        env = self.env
        for on, off in self.availability.periods(dev, env.now):
            if on > env.now:
                yield env.timeout(on - env.now)
            self.online[dev] = True
            self._online_since[dev] = env.now
            yield env.timeout(max(0.0, off - env.now))
            self.online[dev] = False
            self._online_s[dev] += env.now - self._online_since[dev]

    def online_time_s(self) -> np.ndarray:
        """Time [s] each device has spent online since the clock started, up to now, shape (n,)."""
        now = self.env.now
        return self._online_s + np.where(self.online, now - self._online_since, 0.0)

    def begin_round(self) -> float:
        """Bring the clock to the next round's start and return it [s]: the events due now are played (jobs
        that end now free their device), and while no device is online and idle the server waits for one.
        Raises :class:`SimulationError` if none ever will be."""
        env = self.env
        self._finish_instant()  # events due at this instant come first (jobs ending now free their device)
        while not self.available().any():
            if env.peek() == float("inf"):  # nothing left that could free a device
                raise SimulationError(f"at t={env.now:g} s no device is online and idle, and none ever will be")
            env.step()
            self._finish_instant()
        return env.now

    def _finish_instant(self) -> None:
        """Process every event due at the current time, including those scheduled meanwhile (a chain of
        arrivals at one instant schedules its links one by one)."""
        env = self.env
        while env.peek() == env.now:
            env.step()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """The clock between rounds: the time [s] and the jobs still in flight (device, compute start, compute
        end and job end [s]), which a resumed run plays out the same way."""
        busy = np.flatnonzero(self._busy)
        jobs = [[int(d), float(self._t_start[d]), float(self._t_cmp_end[d]), float(self._t_end[d])] for d in busy]
        chains = sorted(self._chains.values(), key=lambda c: (c.fire_s, c.seq))
        return {"clock_s": self.env.now, "in_flight": jobs, "chains": [c.state() for c in chains]}

    def chain_tags(self) -> set:
        """The ``tag`` of every asynchronous dispatch with a job still to end."""
        return {c.tag for c in self._chains.values()}

    def load_state_dict(
        self, state: dict, on_end_of: Callable[[Any], Callable[[int, bool], None]] | None = None
    ) -> None:
        """Continue from :meth:`state_dict` on a fresh environment (availability restarts from its schedule).
        Asynchronous jobs (``state["chains"]``) need ``on_end_of(tag)``: the ``on_end`` their dispatch was given
        (:meth:`dispatch`'s ``tag``); their pending ends are scheduled in their saved order, by a process that
        starts after the availability processes, so that at equal times a device still goes offline before its
        lost job ends, as it did when the job was dispatched."""
        self._start(float(state["clock_s"]))
        chains = state.get("chains") or []
        in_chains = {int(d) for c in chains for d in c["devices"]}
        for dev, t_start, t_cmp_end, t_end in state["in_flight"]:
            dev = int(dev)
            self._start_jobs(np.array([dev]), np.array([t_start]), np.array([t_cmp_end]), np.array([t_end]))
            if dev in in_chains:
                continue  # its chain frees it
            ends = self.env.timeout(max(0.0, float(t_end) - self.env.now))
            ends.callbacks.append(lambda _ev, dev=dev: self._busy.__setitem__(dev, False))
        if chains:
            if on_end_of is None:
                raise SimulationError("the checkpoint holds asynchronous jobs in flight: resume needs their server")

            def restore():
                for saved in chains:
                    chain = _Chain.restored(self, saved, on_end_of(saved["tag"]))
                    chain.schedule_at(float(saved["fire_s"]))
                yield self.env.timeout(0)

            self.env.process(restore())

    # ------------------------------------------------------------------ asynchronous jobs
    def _idle_devices(self, devices, caller: str) -> np.ndarray:
        """``devices`` as an int array, shape (m,), after checking that every one is online and idle now."""
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        if devices.size and not (self.online[devices].all() and not self._busy[devices].any()):
            raise SimulationError(f"{caller}: every device given a job must be online and idle")
        return devices

    def dispatch(
        self, devices: np.ndarray, *, down_s: np.ndarray, t_cmp_s: np.ndarray, t_com_s: np.ndarray,
        on_end: Callable[[int, bool], None], tag: Any = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start jobs on ``devices`` (online and idle, shape (m,)) now, without waiting for them (asynchronous
        FL): download ``down_s``, compute ``t_cmp_s``, upload ``t_com_s`` [s], shape (m,) each. When job j ends
        (its arrival, or its loss when the device goes offline first) its device is free and ``on_end(j,
        lost)`` is called. Returns each job's end time [s] (chained as in :meth:`play`) and whether it is lost.
        ``tag`` (JSON-able) names the dispatch in :meth:`state_dict`, for a resumed run to find its ``on_end``."""
        if len(devices) == 1:  # an asynchronous refill after one arrival: one job
            t_end, lost = self.dispatch_one(devices[0], down_s[0], t_cmp_s[0], t_com_s[0], on_end=on_end, tag=tag)
            return np.array([t_end]), np.array([lost])
        env = self.env
        devices = self._idle_devices(devices, "dispatch")
        n = devices.size
        start = env.now
        t_start = start + down_s
        due = t_start + (t_cmp_s + t_com_s)
        if self.availability is None:
            lost, planned = np.zeros(n, dtype=bool), due
        else:
            off = np.array([self.availability.next_offline_s(d, start) for d in devices.tolist()], dtype=float)
            lost = due > off
            planned = np.where(lost, off, due)
        order = np.lexsort((np.arange(n), planned)) if n > 1 else np.zeros(n, dtype=np.int64)
        t_end = np.empty(n)
        planned_list = planned[order].tolist()
        t_end[order] = _chain(start, planned_list)
        self._start_jobs(devices, t_start, t_start + t_cmp_s, t_end)
        if n:
            order_list, lost_list = order.tolist(), lost.tolist()
            chain = _Chain(self, tag, on_end, order_list, devices[order].tolist(), planned_list,
                           [lost_list[j] for j in order_list])  # fmt: skip
            chain.schedule(max(0.0, planned_list[0] - start))
        return t_end, lost

    def dispatch_one(
        self, device: int, down_s: float, t_cmp_s: float, t_com_s: float, *, on_end: Callable[[int, bool], None],
        tag: Any = None,
    ) -> tuple[float, bool]:
        """:meth:`dispatch` of one job (job index 0), with the same float operations on Python numbers (a chain
        of one link); returns its end time [s] and whether it is lost."""
        env, dev = self.env, int(device)
        down_s, t_cmp_s, t_com_s = float(down_s), float(t_cmp_s), float(t_com_s)
        if not (self.online[dev] and not self._busy[dev]):
            raise SimulationError("dispatch: every device given a job must be online and idle")
        start = env.now
        t_start = start + down_s
        due = t_start + (t_cmp_s + t_com_s)
        off = math.inf if self.availability is None else self.availability.next_offline_s(dev, start)
        lost = due > off
        planned = off if lost else due
        t_end = start + max(0.0, planned - start)
        self._busy[dev] = True
        self._t_start[dev], self._t_cmp_end[dev], self._t_end[dev] = t_start, t_start + t_cmp_s, t_end
        _Chain(self, tag, on_end, [0], [dev], [planned], [lost]).schedule(max(0.0, planned - start))
        return t_end, lost

    # ------------------------------------------------------------------ a round
    def _serve(self, jobs: _RoundJobs, *, devices: np.ndarray, t_start: np.ndarray, t_cmp_end: np.ndarray,
               t_end: np.ndarray, lost: np.ndarray, off: np.ndarray, chain_start: float, policy: str,
               deadline_end_s: float | None):  # fmt: skip
        """The server's SimPy process for one round: start the jobs, schedule their losses offline and the first
        arrival, then wait under ``policy`` (every job ended; or that or ``deadline_end_s`` [s]; or that or the
        ``keep``-th arrival)."""
        env = self.env
        first = env.timeout(chain_start)  # the first device starts computing (a common downlink: the broadcast)
        first.callbacks.append(jobs.chain_begins)
        self._start_jobs(devices, t_start, t_cmp_end, t_end)
        for j in np.flatnonzero(lost).tolist():  # the loss frees the device (it is offline then)
            env.timeout(max(0.0, off[j] - env.now)).callbacks.append(lambda _ev, j=j: jobs.end_job(j))
        if jobs.n == 0:
            jobs.everyone.succeed()
        yield first
        if policy == "wait_all":
            yield jobs.everyone
        elif policy == "deadline":
            yield jobs.everyone | env.timeout(max(0.0, deadline_end_s - env.now))
        else:
            yield jobs.everyone | jobs.enough

    def play(
        self,
        *,
        devices: np.ndarray,
        durations: Durations,
        down_s: float | np.ndarray = 0.0,
        policy: Policy = "wait_all",
        deadline_s: float | None = None,
        keep: int | None = None,
        late: Late = "finish",
        jobs: Sequence[Any] | None = None,
        updates: list[Any] | None = None,
        tdma: bool = False,
        upload_order: np.ndarray | None = None,
        failed: np.ndarray | None = None,
        cancel_lost: bool = False,
    ) -> RoundOutcome:
        """Play one round from now: dispatch a job to each of ``devices`` (ids, shape (m,), online and idle) and
        wait under ``policy``; return when the server stops waiting (late jobs may still be running then).

        ``tdma``: the uploads take turns on one channel (:func:`tdma_uploads`), in ``upload_order`` (job indices,
        a permutation of range(m); None: first come, first served by compute end), after every upload of an
        earlier round still in flight; a job waits idle for its turn. ``failed`` (bool, shape (m,)): uploads
        lost to packet errors; they end on the clock like any other (their time spent) but are never kept.

        ``durations()`` is called once at dispatch and returns ``(t_cmp_s, t_com_s)``, shape (m,) [s];
        ``down_s`` is the download time [s], one number or shape (m,). ``deadline_s`` [s] is measured from the
        round start (download included); ``keep`` is K for ``over_select``; ``late`` what a job the server no
        longer waits for does (module docstring). ``cancel_lost``: under ``late = "cancel"`` a job whose device will
        go offline after the cut-off is cancelled at the cut-off too (status cancelled) instead of running on until
        it is lost, so that no job outlives its round (an allocation shares the whole band every round).
        """
        _check_policy(policy, deadline_s, keep, late)
        env = self.env
        devices = self._idle_devices(devices, "play")
        n = devices.size
        start = env.now
        t_dl = np.broadcast_to(np.asarray(down_s, dtype=float), (n,)).copy()
        t_cmp, t_com = (np.asarray(d, dtype=float).reshape(n) for d in durations())
        t_start = start + t_dl
        busy = t_cmp + t_com
        due = t_start + busy
        # a device that goes offline before its job ends loses the job there
        off = (
            np.full(n, np.inf)
            if self.availability is None
            else np.array([self.availability.next_offline_s(int(d), start) for d in devices], dtype=float)
        )
        t_wait = None
        if tdma:
            order_up = np.lexsort((np.arange(n), t_start + t_cmp)) if upload_order is None else upload_order
            t_wait, due, lost = tdma_uploads(t_start + t_cmp, t_com, off, order_up, free_s=self._channel_free_s(start))
            busy = due - t_start
        else:
            lost = due > off
        # order of arrival: by arrival time, then (a common downlink) by busy time, then job order
        arriving = np.flatnonzero(~lost)
        order = arriving[np.lexsort((arriving, busy[arriving], due[arriving]))]
        t_arrive = np.full(n, np.nan)
        chain_start = float(np.min(t_dl)) if n else float(np.max(np.asarray(down_s, dtype=float), initial=0.0))
        t_arrive[order] = _chain(start + chain_start, due[order])
        t_end = np.where(lost, off, t_arrive)
        fails = None if failed is None else failed[order].tolist()
        jobs_on = _RoundJobs(env, self._busy, devices, order, due[order], keep if policy == "over_select" else None,
                             fails)  # fmt: skip
        serve = self._serve(jobs_on, devices=devices, t_start=t_start, t_cmp_end=t_start + t_cmp, t_end=t_end,
                            lost=lost, off=off, chain_start=chain_start, policy=policy,
                            deadline_end_s=None if deadline_s is None else start + deadline_s)  # fmt: skip
        env.run(until=env.process(serve))
        end = env.now

        kept = _kept(policy, lost if failed is None else lost | failed, order, t_arrive - start, deadline_s, keep)
        status = np.where(kept, KEPT, np.where(lost, LOST, LATE)).astype(object)
        if failed is not None:
            status[failed & ~lost] = PACKET_ERROR
        # a kept update due within the deadline's rounding slack after the round end has arrived as far as the
        # server is concerned: its device is free at the round end (its recorded arrival stays as computed)
        running = ~np.array(jobs_on.ended, dtype=bool)
        free_now = kept & running & (t_end > end)
        cut = ~kept & (cancel_lost | ~lost) & running & (t_end > end) if late == "cancel" else np.zeros(n, dtype=bool)
        jobs_on.chain_limit = order.size - int(np.count_nonzero(cut))  # cancelled jobs end the chain
        for j in np.flatnonzero(free_now | cut).tolist():
            jobs_on.end_job(j)
        t_end = np.where(free_now | cut, end, t_end)
        t_arrive = np.where(cut, np.nan, t_arrive)
        status[cut] = CANCELLED
        t_down = np.full(n, start)
        stopped = (status == CANCELLED) | (status == LOST)
        dl_done, cmp_done, com_done = phase_times_done(stopped, t_end, t_down, t_dl, t_cmp, t_com, t_wait)
        wait_done = None if t_wait is None else np.where(stopped, np.clip(t_end - t_start - t_cmp, 0.0, t_wait), t_wait)
        return RoundOutcome(
            start_s=start, end_s=end, jobs=range(n) if jobs is None else jobs,
            updates=[None] * n if updates is None else updates, t_down_s=t_down, t_start_s=t_start,
            t_cmp_end_s=t_start + t_cmp, t_arrive_s=t_arrive, t_end_s=t_end, t_dl_s=t_dl, t_cmp_s=t_cmp,
            t_com_s=t_com, cmp_done_s=cmp_done, com_done_s=com_done, dl_done_s=dl_done,
            kept_mask=kept, status=status, arrival_order=order[~np.isnan(t_arrive[order])], t_wait_s=t_wait,
            wait_done_s=wait_done,
        )  # fmt: skip

    def _channel_free_s(self, now: float) -> float:
        """When the shared TDMA channel is free of earlier rounds' uploads [s]: the last end of a job still in
        flight (a late job keeps the slot it was given), or ``now``."""
        ends = self._t_end[self._busy]
        return max(now, float(np.max(ends))) if ends.size else now


def tdma_uploads(
    cmp_end_s: np.ndarray, t_com_s: np.ndarray, off_s: np.ndarray, order: np.ndarray, *, free_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TDMA on one channel: the jobs upload one at a time, in ``order`` (job indices), each as soon as it has
    computed and the one before it has let go of the channel, which is free from ``free_s`` [s].

    Job j computes until ``cmp_end_s[j]`` [s], uploads for ``t_com_s[j]`` [s] on the whole band and goes offline
    at ``off_s[j]`` [s] (inf: never), shape (m,) each. Its upload starts at ``max(cmp_end_j, channel free)``;
    a job whose device goes offline before its upload ends is lost there, and holds the channel until then only
    if it had started sending. Returns, shape (m,) each: the wait for the channel [s] (upload start - compute
    end), the upload end [s] (the job's due time; for a lost job the end it would have had) and whether it is
    lost offline.
    """
    n = cmp_end_s.size
    wait, due, lost = np.zeros(n), np.empty(n), np.zeros(n, dtype=bool)
    cmp_end, t_com, off = cmp_end_s.tolist(), t_com_s.tolist(), off_s.tolist()
    free = free_s
    for j in np.asarray(order, dtype=np.int64).tolist():
        begin = max(cmp_end[j], free)
        end = begin + t_com[j]
        if end > off[j]:  # offline while waiting (the channel stays free) or while sending (held until then)
            lost[j] = True
            free = max(free, off[j]) if off[j] > begin else free
        else:
            free = end
        wait[j], due[j] = begin - cmp_end[j], end
    return wait, due, lost


class _RoundJobs:
    """The jobs of one round on the clock's environment: which have ended, the chain of their arrivals (only the
    next one sits in SimPy's queue; ``chain_limit`` arrivals are scheduled in all) and the server's two wake-ups,
    ``everyone`` (every job ended) and ``enough`` (the ``keep``-th arrival, under ``over_select``)."""

    __slots__ = ("env", "n", "ended", "done", "chain_limit", "everyone", "enough", "dev_list", "order_list",
                 "due_list", "busy_flags", "keep", "fails", "useful")  # fmt: skip

    def __init__(self, env: simpy.Environment, busy_flags: np.ndarray, devices: np.ndarray, order: np.ndarray,
                 due_in_order: np.ndarray, keep: int | None, fails: list[bool] | None = None) -> None:  # fmt: skip
        self.env, self.n, self.busy_flags, self.keep = env, int(devices.size), busy_flags, keep
        self.fails, self.useful = fails, 0  # arrivals lost to packet errors, in arrival order; arrivals that count
        self.ended = [False] * self.n
        self.done, self.chain_limit = 0, int(order.size)
        self.everyone, self.enough = env.event(), env.event()
        self.dev_list, self.order_list, self.due_list = devices.tolist(), order.tolist(), due_in_order.tolist()

    def end_job(self, j: int) -> None:
        """Job ``j``'s device is free (it arrived, was lost offline, or stopped at the cut-off)."""
        if self.ended[j]:
            return
        self.ended[j] = True
        self.busy_flags[self.dev_list[j]] = False
        self.done += 1
        if self.done == self.n:
            self.everyone.succeed()

    def arrived(self, ev: simpy.Timeout) -> None:
        k = ev.value
        self.end_job(self.order_list[k])
        if k + 1 < self.chain_limit:
            self.schedule(k + 1)
        if self.fails is None:
            self.useful = k + 1
        elif not self.fails[k]:
            self.useful += 1
        if self.useful == self.keep and not self.enough.triggered:
            self.enough.succeed()

    def schedule(self, k: int) -> None:
        """Put the ``k``-th arrival in SimPy's queue (arrivals are due in a known order)."""
        env = self.env
        env.timeout(max(0.0, self.due_list[k] - env.now), value=k).callbacks.append(self.arrived)

    def chain_begins(self, _ev: Any) -> None:
        if self.order_list:
            self.schedule(0)


def _check_policy(policy: str, deadline_s: float | None, keep: int | None, late: str) -> None:
    """Raise ValueError (naming the argument, its value and what is allowed) for round rules that cannot play."""
    if policy == "deadline" and (deadline_s is None or deadline_s <= 0):
        raise ValueError(f"deadline_s={deadline_s}: policy 'deadline' needs deadline_s > 0")
    if policy == "over_select" and (keep is None or keep < 1):
        raise ValueError(f"keep={keep}: policy 'over_select' needs keep >= 1")
    if late not in LATE_MODES:
        raise ValueError(f"late={late!r}: must be one of {', '.join(LATE_MODES)}")


def _kept(policy: str, lost: np.ndarray, order: np.ndarray, since_start_s: np.ndarray, deadline_s: float | None,
          keep: int | None) -> np.ndarray:  # fmt: skip
    """Which jobs' updates the server keeps (bool, shape (m,)): under ``deadline`` those arrived within it
    (``since_start_s``: arrival time from the round start [s]), under ``over_select`` the first ``keep`` arrivals
    not ``lost`` (``order``: job indices in order of arrival), else every job not ``lost`` (offline, or its
    upload lost to packet errors)."""
    if policy == "deadline":
        # relative to the round start, with slack for rounding: a plan that meets T_max exactly (AnycostFL's
        # Lemma 3 makes the deadline tight) must not be dropped because start + busy rounds up by one ulp
        return ~lost & (since_start_s <= deadline_s * (1 + DEADLINE_RTOL))
    if policy == "over_select":
        kept = np.zeros(lost.size, dtype=bool)
        kept[order[~lost[order]][:keep]] = True  # ``lost`` may hold arrivals lost to packet errors
        return kept
    return ~lost


def phase_times_done(
    stopped: np.ndarray, t_end_s: np.ndarray, t_down_s: np.ndarray, t_dl_s: np.ndarray, t_cmp_s: np.ndarray,
    t_com_s: np.ndarray, t_wait_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Time [s] each job spent downloading, computing and uploading, shape (m,) each: the whole phase, or for a
    ``stopped`` job (cancelled at the cut-off, or lost offline) the part of it before ``t_end_s``. A job downloads
    from ``t_down_s`` for ``t_dl_s``, then computes ``t_cmp_s``, waits ``t_wait_s`` for the channel (TDMA; None:
    no wait) and uploads ``t_com_s``; the charge of its energy is pro rata of these
    (:func:`edgefl.fleet.costs.prorated_energy_j`)."""
    t_start = t_down_s + t_dl_s
    dl_done = np.where(stopped, np.clip(t_end_s - t_down_s, 0.0, t_dl_s), t_dl_s)
    cmp_done = np.where(stopped, np.clip(t_end_s - t_start, 0.0, t_cmp_s), t_cmp_s)
    up_start = t_start + t_cmp_s if t_wait_s is None else t_start + t_cmp_s + t_wait_s
    com_done = np.where(stopped, np.clip(t_end_s - up_start, 0.0, t_com_s), t_com_s)
    return dl_done, cmp_done, com_done


def job_times(
    *, lost: np.ndarray, kept: np.ndarray, t_down_s: np.ndarray, t_dl_s: np.ndarray, t_cmp_s: np.ndarray,
    t_com_s: np.ndarray, t_end_s: np.ndarray,
) -> JobTimes:  # fmt: skip
    """The :class:`JobTimes` of asynchronous jobs that ended (shape (m,) each): each downloaded from ``t_down_s``
    for ``t_dl_s``, computed ``t_cmp_s``, uploaded ``t_com_s`` and ended at ``t_end_s`` [s], arriving unless
    ``lost`` offline; ``kept``: its update was aggregated."""
    dl_done, cmp_done, com_done = phase_times_done(lost, t_end_s, t_down_s, t_dl_s, t_cmp_s, t_com_s)
    return JobTimes(
        t_down_s=t_down_s, t_start_s=t_down_s + t_dl_s, t_arrive_s=np.where(lost, np.nan, t_end_s), t_end_s=t_end_s,
        t_dl_s=t_dl_s, t_cmp_s=t_cmp_s, t_com_s=t_com_s, cmp_done_s=cmp_done, com_done_s=com_done,
        dl_done_s=dl_done, kept_mask=kept, status=np.where(lost, LOST, KEPT).astype(object),
    )  # fmt: skip


class _Chain:
    """The jobs of one asynchronous dispatch still to end, in the order they end: job index ``jobs[k]`` on device
    ``devices[k]`` ends at ``planned[k]`` [s] (or just after the link before it), ``lost[k]`` when it is lost.
    One SimPy timeout is pending at a time (at ``fire_s``), for link ``k``; each end schedules the next."""

    __slots__ = ("clock", "id", "tag", "on_end", "jobs", "devices", "planned", "lost", "k", "fire_s", "seq")

    def __init__(self, clock: Clock, tag: Any, on_end: Callable[[int, bool], None], jobs: list[int],
                 devices: list[int], planned: list[float], lost: list[bool]) -> None:  # fmt: skip
        self.clock, self.tag, self.on_end = clock, tag, on_end
        self.jobs, self.devices, self.planned, self.lost = jobs, devices, planned, lost
        self.k, self.fire_s, self.seq = 0, math.nan, 0
        self.id = clock._chain_ids
        clock._chain_ids += 1
        clock._chains[self.id] = self

    @classmethod
    def restored(cls, clock: Clock, saved: dict, on_end: Callable[[int, bool], None]) -> _Chain:
        """The chain :meth:`state` saved, its next link first."""
        return cls(clock, saved["tag"], on_end, [int(j) for j in saved["jobs"]], [int(d) for d in saved["devices"]],
                   [float(t) for t in saved["planned"]], [bool(x) for x in saved["lost"]])  # fmt: skip

    def state(self) -> dict:
        """The links still to end and when the next one fires [s] (JSON-able)."""
        k = self.k
        return {"tag": self.tag, "fire_s": self.fire_s, "jobs": self.jobs[k:], "devices": self.devices[k:],
                "planned": self.planned[k:], "lost": self.lost[k:]}  # fmt: skip

    def schedule(self, delay_s: float) -> None:
        """Fire link ``k`` after ``delay_s`` [s] (>= 0), at ``now + delay_s`` as SimPy computes it."""
        clock = self.clock
        self.fire_s, self.seq = clock.env.now + delay_s, clock._chain_seq
        clock._chain_seq += 1
        clock.env.timeout(delay_s).callbacks.append(self._ends)

    def schedule_at(self, at_s: float) -> None:
        """Fire link ``k`` at exactly ``at_s`` [s] (>= now): the delay is nudged by ulps until ``now + delay``
        rounds to ``at_s`` (a resumed chain fires when the saved one would have)."""
        now = self.clock.env.now
        delay = max(0.0, at_s - now)
        while now + delay < at_s:
            delay = math.nextafter(delay, math.inf)
        while delay > 0.0 and now + delay > at_s:
            delay = math.nextafter(delay, -math.inf)
        self.schedule(delay)

    def _ends(self, _ev: simpy.Timeout) -> None:
        clock, k = self.clock, self.k
        clock._busy[self.devices[k]] = False
        self.k = k + 1
        if self.k < len(self.jobs):
            self.schedule(max(0.0, self.planned[self.k] - clock.env.now))
        else:
            del clock._chains[self.id]
        self.on_end(self.jobs[k], self.lost[k])


def _chain(first_s: float, due_s: np.ndarray | list[float]) -> np.ndarray:
    """Arrival times of a chain started at ``first_s`` [s] with each link due at ``due_s`` (sorted): what the
    chained SimPy timeouts produce, ``t_k = t_{k-1} + max(0, due_k - t_{k-1})``, with the same float operations."""
    due_s = due_s.tolist() if isinstance(due_s, np.ndarray) else due_s
    out = np.empty(len(due_s))
    now = first_s
    for k, due in enumerate(due_s):
        now = now + max(0.0, due - now)
        out[k] = now
    return out


def simulate_round(
    *,
    start_s: float,
    jobs: Sequence[Any],
    train: Callable[[Any], Any] | None = None,
    cost: Callable[[Any, Any], tuple[float, float]] | None = None,
    durations: tuple[np.ndarray, np.ndarray] | Durations | None = None,
    policy: Policy = "wait_all",
    deadline_s: float | None = None,
    keep: int | None = None,
    downlink_s: float | np.ndarray = 0.0,
    late: Late = "finish",
) -> RoundOutcome:
    """One round on a fresh :class:`Clock` starting at ``start_s`` [s], one device per job (job i on device i).

    Either ``train(job) -> update``, called at dispatch to do the real work, with ``cost(job, update) ->
    (t_cmp_s, t_com_s)`` turning what was computed and built into durations [s]; or ``durations = (t_cmp_s,
    t_com_s)``, arrays of shape (n_jobs,), or a callable returning them. Other arguments as :meth:`Clock.play`.
    """
    if (durations is None) == (train is None or cost is None):
        raise ValueError("simulate_round: give either train and cost, or durations")
    n = len(jobs)
    updates: list[Any] = [None] * n

    def work() -> tuple[np.ndarray, np.ndarray]:
        if durations is None:
            t_cmp, t_com = np.zeros(n), np.zeros(n)
            for i, job in enumerate(jobs):
                updates[i] = update = train(job)
                t_cmp[i], t_com[i] = cost(job, update)
            return t_cmp, t_com
        return durations() if callable(durations) else durations

    if policy == "deadline" and (deadline_s is None or deadline_s <= 0):
        raise ValueError(f"deadline_s={deadline_s}: policy 'deadline' needs deadline_s > 0")
    if policy == "over_select" and (keep is None or keep < 1):
        raise ValueError(f"keep={keep}: policy 'over_select' needs keep >= 1")
    clock = Clock(n, start_s=start_s)
    return clock.play(
        devices=np.arange(n), durations=work, down_s=downlink_s, policy=policy, deadline_s=deadline_s, keep=keep,
        late=late, jobs=jobs, updates=updates,
    )  # fmt: skip
