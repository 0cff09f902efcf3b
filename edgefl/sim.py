"""SimPy engine: one environment for a whole run, the devices as processes, the server's rounds on its clock.

A :class:`Clock` holds one ``simpy.Environment`` from the first round to the last; simulated time runs across
rounds and every recorded time is absolute [s]. Each device is in one of five states (:data:`STATES`):
offline, idle, downloading, computing, uploading. Whether a device is online is decided by an availability
process (:mod:`edgefl.availability`; without one every device is always online); what an online device does is
decided by its job process, one per job: download ``t_dl``, compute ``t_cmp``, upload ``t_com``.

A round (:meth:`Clock.play`) is the server's wait under its policy, after it has selected among the devices that
are online and idle (:meth:`Clock.begin_round`: when none is, it waits for the next one to become so):

    dispatch at t0 (the round start): every job's work is done at once (real training takes zero simulated
    time, and a job's result does not depend on when in the round it starts), giving its durations;
    job j: download [t0, t_start_j = t0 + t_dl_j), compute [t_start_j, t_start_j + t_cmp_j),
           upload until its arrival  t_arrive_j = t_start_j + (t_cmp_j + t_com_j)  (its own FDMA sub-band: no
           contention, so every arrival is known at dispatch);
    server: ``wait_all`` until every job has ended; ``deadline`` until every job has ended or
           t0 + deadline_s, whichever is first; ``over_select`` until the ``keep``-th arrival (or every job ended).

Arrivals are chained in order of arrival time: only the next one sits in SimPy's queue, as a timeout whose
callback records it, wakes its device's job process and schedules the one after (one event per job at O(1)
queue cost keeps rounds of 10^4 devices cheap). Ties arrive in job order.

Late jobs (``late``): under ``deadline`` and ``over_select`` a job whose update the server no longer waits for
either finishes (``"finish"``, the default: its energy is charged in full, and until its arrival the device is
busy: the server cannot select it, and under ``bandwidth_mode = "split"`` it keeps its sub-band), or is
cancelled at the cut-off (``"cancel"``: it stops at the round end; it has spent ``clip(t_end - t_start, 0,
t_cmp)`` computing and ``clip(t_end - t_cmp_end, 0, t_com)`` uploading, and its energy is charged pro rata of
those, :func:`edgefl.costs.prorated_energy_j`).

Against the engine before the run-long clock (one fresh environment per round), results under ``wait_all`` are
identical. Under ``deadline`` and ``over_select`` with ``late = "finish"`` a dropped device used to be free
again at the next round's start although it was still uploading; now it is busy until its arrival, so the
next round selects among fewer devices (a different draw of the selection stream) and, in ``split`` mode, each
new device's sub-band is narrower. Rounds without a straggler carried over are unchanged.

Availability: a device that goes offline during a job loses it at that instant (``status = "offline"``): energy
is charged up to there, as for a cancelled job. Its loss counts as the end of its job for ``wait_all``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import simpy

from edgefl.errors import SimulationError

if TYPE_CHECKING:
    from edgefl.availability import Availability

__all__ = [
    "Clock", "DeviceTimeline", "RoundOutcome", "simulate_round", "STATES", "OFFLINE", "IDLE", "DOWNLOADING",
    "COMPUTING", "UPLOADING", "LATE_MODES",
]  # fmt: skip

Policy = Literal["wait_all", "deadline", "over_select"]
Late = Literal["finish", "cancel"]
LATE_MODES: tuple[str, ...] = ("finish", "cancel")

OFFLINE, IDLE, DOWNLOADING, COMPUTING, UPLOADING = 0, 1, 2, 3, 4
STATES: tuple[str, ...] = ("offline", "idle", "downloading", "computing", "uploading")
"""Device states, indexed by the codes above."""

DEADLINE_RTOL = 1e-9
"""Relative slack when judging an arrival against the deadline (floating-point rounding only)."""

# how a job ended: arrived in time (kept), arrived after the server stopped waiting, cancelled, lost offline
KEPT, LATE, CANCELLED, LOST = "kept", "late", "cancelled", "offline"


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
class RoundOutcome:
    """A simulated round: start and end [s] and, per job (in job order), its timeline as arrays.

    Absolute [s]: ``t_down_s`` (download start = dispatch), ``t_start_s`` (compute start), ``t_cmp_end_s``,
    ``t_arrive_s`` (upload end; NaN for a job that never arrives: cancelled or lost offline), ``t_end_s`` (when
    the device is free again: its arrival, or the instant it stopped). Durations [s]: ``t_dl_s``, ``t_cmp_s``,
    ``t_com_s`` as planned from the work; ``dl_done_s``, ``cmp_done_s``, ``com_done_s`` what was actually spent
    downloading, computing and uploading (equal to the planned durations unless the job stopped early). ``kept``: the update counts;
    ``status``: kept, late, cancelled or offline; ``arrival_order``: indices of the jobs that arrive, in order
    of arrival. Every array has shape (n_jobs,), ``arrival_order`` (n_arriving,).
    """

    start_s: float
    end_s: float
    jobs: Sequence[Any]
    updates: list[Any]
    t_down_s: np.ndarray
    t_start_s: np.ndarray
    t_cmp_end_s: np.ndarray
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

    ``availability`` (an :class:`edgefl.availability.Availability`) puts each device on- and offline as a
    process of its own; None keeps every device online. :meth:`state` gives every device's state code.
    """

    def __init__(self, n_devices: int, *, start_s: float = 0.0, availability: Availability | None = None) -> None:
        self.env = env = simpy.Environment(initial_time=start_s)
        self.n_devices = n_devices
        self.online = np.ones(n_devices, dtype=bool)
        self.job_state = np.full(n_devices, IDLE, dtype=np.int8)
        self.availability = availability
        self._running: dict[int, list[float]] = {}  # device -> [t_start, t_cmp_end, t_end] of its job [s]
        self._online_s = np.zeros(n_devices)  # time spent online before the current online period [s]
        self._online_since = np.full(n_devices, start_s)
        if availability is not None:
            self.online[:] = availability.online_at(np.arange(n_devices), start_s)
            for dev in range(n_devices):
                env.process(self._presence(dev))

    # ------------------------------------------------------------------ device states
    def state(self) -> np.ndarray:
        """Every device's state code now (:data:`STATES`), shape (n,)."""
        return np.where(self.online, self.job_state, OFFLINE).astype(np.int8)

    def available(self) -> np.ndarray:
        """Devices the server can select now: online and idle, bool shape (n,)."""
        return self.online & (self.job_state == IDLE)

    def n_busy(self) -> int:
        """Devices still working on a job (each holds its uplink sub-band until the job ends)."""
        return int(np.count_nonzero(self.job_state != IDLE))

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
        env.run(until=env.timeout(0.0))  # events already due at this instant come first
        while not self.available().any():
            if env.peek() == float("inf"):  # nothing left that could free a device
                raise SimulationError(f"at t={env.now:g} s no device is online and idle, and none ever will be")
            env.step()
            if self.available().any():
                env.run(until=env.timeout(0.0))  # the rest of this instant's events
        return env.now

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """The clock between rounds: the time [s] and the jobs still in flight (device, compute start, compute
        end and job end [s]), which a resumed run plays out the same way."""
        jobs = [[dev, *times] for dev, times in sorted(self._running.items())]
        return {"clock_s": self.env.now, "in_flight": jobs}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` on a fresh environment (availability restarts from its schedule)."""
        self.__init__(self.n_devices, start_s=float(state["clock_s"]), availability=self.availability)
        for dev, t_start, t_cmp_end, t_end in state["in_flight"]:
            self._running[int(dev)] = [float(t_start), float(t_cmp_end), float(t_end)]
            self.env.process(self._resumed_job(int(dev), float(t_start), float(t_cmp_end), float(t_end)))

    def _resumed_job(self, dev: int, t_start: float, t_cmp_end: float, t_end: float):
        """The rest of a job restored from a checkpoint: its phases up to ``t_end`` (module docstring)."""
        env = self.env
        try:
            for state, until in ((DOWNLOADING, t_start), (COMPUTING, t_cmp_end), (UPLOADING, t_end)):
                self.job_state[dev] = state
                if env.now < min(until, t_end):
                    yield env.timeout(min(until, t_end) - env.now)
        finally:
            self._running.pop(dev, None)
            self.job_state[dev] = IDLE

    # ------------------------------------------------------------------ a round
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
    ) -> RoundOutcome:
        """Play one round from now: dispatch a job to each of ``devices`` (ids, shape (m,), online and idle) and
        wait under ``policy``; return when the server stops waiting (late jobs may still be running then).

        ``durations()`` is called once at dispatch and returns ``(t_cmp_s, t_com_s)``, shape (m,) [s];
        ``down_s`` is the download time [s], one number or shape (m,). ``deadline_s`` [s] is measured from the
        round start (download included); ``keep`` is K for ``over_select``; ``late`` what a job the server no
        longer waits for does (module docstring).
        """
        if policy == "deadline" and (deadline_s is None or deadline_s <= 0):
            raise ValueError(f"deadline_s={deadline_s}: policy 'deadline' needs deadline_s > 0")
        if policy == "over_select" and (keep is None or keep < 1):
            raise ValueError(f"keep={keep}: policy 'over_select' needs keep >= 1")
        if late not in LATE_MODES:
            raise ValueError(f"late={late!r}: must be one of {', '.join(LATE_MODES)}")
        env = self.env
        devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        n = devices.size
        if n and not self.available()[devices].all():
            raise SimulationError("play: every device given a job must be online and idle")
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
        lost = due > off
        # order of arrival: by arrival time, then (a common downlink) by busy time, then job order
        arriving = np.flatnonzero(~lost)
        order = arriving[np.lexsort((arriving, busy[arriving], due[arriving]))]
        t_arrive = np.full(n, np.nan)
        chain_start = float(np.min(t_dl)) if n else float(np.max(np.asarray(down_s, dtype=float), initial=0.0))
        t_arrive[order] = _chain(start + chain_start, due[order])
        t_end = np.where(lost, off, t_arrive)
        done = {"count": 0, "chain_limit": order.size}
        everyone = env.event()
        enough = env.event()
        arrived_ev = [env.event() for _ in range(n)]
        procs: list[Any] = [None] * n

        def job_done() -> None:
            done["count"] += 1
            if done["count"] == n:
                everyone.succeed()

        def arrived(ev: simpy.Timeout) -> None:
            k = ev.value
            arrived_ev[int(order[k])].succeed()
            if k + 1 < done["chain_limit"]:
                schedule(k + 1)
            if policy == "over_select" and k + 1 == keep and not enough.triggered:
                enough.succeed()

        def schedule(k: int) -> None:
            # arrivals are due in a known order: keep only the next one in SimPy's queue
            env.timeout(max(0.0, due[order[k]] - env.now), value=k).callbacks.append(arrived)

        def job(j: int):
            dev = int(devices[j])
            try:
                self.job_state[dev] = DOWNLOADING
                if lost[j] and off[j] <= t_start[j]:
                    yield env.timeout(max(0.0, off[j] - env.now))
                    return
                yield env.timeout(t_dl[j])
                self.job_state[dev] = COMPUTING
                if lost[j] and off[j] <= t_start[j] + t_cmp[j]:
                    yield env.timeout(max(0.0, off[j] - env.now))
                    return
                yield env.timeout(t_cmp[j])
                self.job_state[dev] = UPLOADING
                if lost[j]:
                    yield env.timeout(max(0.0, off[j] - env.now))
                    return
                yield arrived_ev[j]
            except simpy.Interrupt:
                pass  # cancelled at the round's cut-off
            finally:
                self._running.pop(dev, None)
                self.job_state[dev] = IDLE
                job_done()
    
        def chain_start_cb(_ev: Any) -> None:
            if order.size:
                schedule(0)

        def server():
            first = env.timeout(chain_start)  # the first device starts computing (a common downlink: the broadcast)
            first.callbacks.append(chain_start_cb)
            for j in range(n):
                procs[j] = env.process(job(j))
            if n == 0:
                everyone.succeed()
            yield first
            if policy == "wait_all":
                yield everyone
            elif policy == "deadline":
                yield everyone | env.timeout(max(0.0, start + deadline_s - env.now))
            else:
                yield everyone | enough

        for j in range(n):
            self._running[int(devices[j])] = [float(t_start[j]), float(t_start[j] + t_cmp[j]), float(t_end[j])]
        finished = env.process(server())
        env.run(until=finished)
        end = env.now

        if policy == "deadline":
            # relative to the round start, with slack for rounding: a plan that meets T_max exactly (AnycostFL's
            # Lemma 3 makes the deadline tight) must not be dropped because start + busy rounds up by one ulp
            kept = ~lost & (t_arrive - start <= deadline_s * (1 + DEADLINE_RTOL))
        elif policy == "over_select":
            kept = np.zeros(n, dtype=bool)
            kept[order[:keep]] = True
        else:
            kept = ~lost
        status = np.where(kept, KEPT, np.where(lost, LOST, LATE)).astype(object)
        if late == "cancel":
            cut = ~kept & ~lost & (t_end > end)
            done["chain_limit"] = order.size - int(np.count_nonzero(cut))  # the cancelled jobs end the chain
            for j in np.flatnonzero(cut):
                procs[j].interrupt("cancelled")
                self._running[int(devices[j])][2] = end
            t_end = np.where(cut, end, t_end)
            t_arrive = np.where(cut, np.nan, t_arrive)
            status[cut] = CANCELLED
        dl_done = np.clip(t_end - start, 0.0, t_dl)
        cmp_done = np.clip(t_end - t_start, 0.0, t_cmp)
        com_done = np.clip(t_end - (t_start + t_cmp), 0.0, t_com)
        stopped = (status == CANCELLED) | (status == LOST)
        return RoundOutcome(
            start_s=start, end_s=end, jobs=range(n) if jobs is None else jobs,
            updates=[None] * n if updates is None else updates, t_down_s=np.full(n, start), t_start_s=t_start,
            t_cmp_end_s=t_start + t_cmp, t_arrive_s=t_arrive, t_end_s=t_end, t_dl_s=t_dl, t_cmp_s=t_cmp,
            t_com_s=t_com, cmp_done_s=np.where(stopped, cmp_done, t_cmp), com_done_s=np.where(stopped, com_done, t_com),
            dl_done_s=np.where(stopped, dl_done, t_dl),
            kept_mask=kept, status=status, arrival_order=order[~np.isnan(t_arrive[order])],
        )  # fmt: skip


def _chain(first_s: float, due_s: np.ndarray) -> np.ndarray:
    """Arrival times of a chain started at ``first_s`` [s] with each link due at ``due_s`` (sorted): what the
    chained SimPy timeouts produce, ``t_k = t_{k-1} + max(0, due_k - t_{k-1})``, with the same float operations."""
    out = np.empty(due_s.size)
    now = first_s
    for k, due in enumerate(due_s.tolist()):
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
