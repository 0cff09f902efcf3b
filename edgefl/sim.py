"""SimPy round engine: one server process and a chain of arrival events, three round-end policies.

Per round (a fresh ``simpy.Environment`` starting at the round's start time; the run's clock is carried from
round to round by the runner, which starts each round where the previous one ended):

    server process: broadcast (a downlink_s timeout) -> the devices start -> wait per policy -> round end
    devices: no process of their own. When the broadcast ends, every job's work is done at once (real training
             takes zero simulated time) and gives its compute and upload durations. A device uploads over its own
             FDMA sub-band, so nothing contends and its arrival is known then: start + t_cmp + t_com. The
             arrivals are sorted and chained: only the next one sits in SimPy's queue as a timeout whose callback
             records it and schedules the one after.

Policies: ``wait_all`` (the straggler sets the round end), ``deadline`` (round ends at the last arrival or
at start + deadline_s, whichever is first; later arrivals are dropped, their energy still charged: a device
does not learn that it is late), ``over_select`` (round ends at the ``keep``-th arrival; the rest are
dropped). The engine knows nothing about FL methods: it calls ``train(job)`` and ``cost(job, update)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import simpy

__all__ = ["DeviceTimeline", "RoundOutcome", "simulate_round"]

Policy = Literal["wait_all", "deadline", "over_select"]

DEADLINE_RTOL = 1e-9
"""Relative slack when judging an arrival against the deadline (floating-point rounding only)."""


@dataclass(frozen=True, kw_only=True)
class DeviceTimeline:
    """Absolute simulated times [s] of one device's round and whether its update was kept."""

    job: Any
    update: Any
    t_start_s: float
    t_cmp_end_s: float
    t_arrive_s: float
    t_cmp_s: float
    t_com_s: float
    kept: bool


@dataclass(frozen=True, kw_only=True, eq=False)
class RoundOutcome:
    """A simulated round: start and end [s] and, per job (in job order), its timeline as arrays.

    ``t_start_s``, ``t_cmp_end_s``, ``t_arrive_s`` are absolute [s]; ``t_cmp_s``, ``t_com_s`` durations [s];
    ``kept`` whether the update counts; ``arrival_order`` the job indices in order of arrival. Every array has
    shape (n_jobs,). :attr:`devices` gives the same as one :class:`DeviceTimeline` per job.
    """

    start_s: float
    end_s: float
    jobs: Sequence[Any]
    updates: list[Any]
    t_start_s: np.ndarray
    t_cmp_end_s: np.ndarray
    t_arrive_s: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    kept_mask: np.ndarray
    arrival_order: np.ndarray

    @cached_property
    def devices(self) -> tuple[DeviceTimeline, ...]:
        """One timeline per job, in job order."""
        return tuple(
            DeviceTimeline(
                job=self.jobs[i], update=self.updates[i], t_start_s=float(self.t_start_s[i]),
                t_cmp_end_s=float(self.t_cmp_end_s[i]), t_arrive_s=float(self.t_arrive_s[i]),
                t_cmp_s=float(self.t_cmp_s[i]), t_com_s=float(self.t_com_s[i]), kept=bool(self.kept_mask[i]),
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


def simulate_round(
    *,
    start_s: float,
    jobs: Sequence[Any],
    train: Callable[[Any], Any] | None = None,
    cost: Callable[[Any, Any], tuple[float, float]] | None = None,
    durations: tuple[np.ndarray, np.ndarray] | Callable[[], tuple[np.ndarray, np.ndarray]] | None = None,
    policy: Policy = "wait_all",
    deadline_s: float | None = None,
    keep: int | None = None,
    downlink_s: float = 0.0,
) -> RoundOutcome:
    """Run one round as SimPy events.

    Either ``train(job) -> update``, called when the device starts (after the downlink) to do the real work,
    with ``cost(job, update) -> (t_cmp_s, t_com_s)`` turning what was computed and built into durations [s];
    or ``durations = (t_cmp_s, t_com_s)``, arrays of shape (n_jobs,), or a callable returning them, called
    once when the devices start (the runner does the round's work there). ``deadline_s`` [s] is measured from ``start_s`` (downlink included); ``keep`` is K
    for ``over_select``.

    A device computes, then uploads over its own FDMA sub-band (no contention), so its arrival is one SimPy
    event ``t_cmp + t_com`` after its start; its compute end ``t_start + t_cmp`` is recorded with it. Since
    every arrival time is known once the devices have started, only the next arrival sits in SimPy's queue:
    one event per device at O(1) queue cost keeps rounds of 10^4 devices cheap and linear in the devices.
    """
    if policy == "deadline" and (deadline_s is None or deadline_s <= 0):
        raise ValueError(f"deadline_s={deadline_s}: policy 'deadline' needs deadline_s > 0")
    if policy == "over_select" and (keep is None or keep < 1):
        raise ValueError(f"keep={keep}: policy 'over_select' needs keep >= 1")
    if (durations is None) == (train is None or cost is None):
        raise ValueError("simulate_round: give either train and cost, or durations")
    n = len(jobs)
    env = simpy.Environment(initial_time=start_s)
    t_start, t_arrive = np.zeros(n), np.zeros(n)
    if durations is not None and not callable(durations):
        t_cmp, t_com = (np.asarray(d, dtype=float).reshape(n) for d in durations)
    else:
        t_cmp, t_com = np.zeros(n), np.zeros(n)
    updates: list[Any] = [None] * n
    everyone = env.event()
    enough = env.event()
    end: dict[str, float] = {}

    order = np.zeros(0, dtype=np.int64)
    due = np.zeros(n)

    def arrived(ev: simpy.Timeout) -> None:
        k = ev.value
        i = int(order[k])
        t_arrive[i] = env.now  # the (k+1)-th arrival: arrivals follow ``order``
        if k + 1 < n:
            schedule(k + 1)
        if k + 1 == n:
            everyone.succeed()
        if policy == "over_select" and k + 1 == keep:
            enough.succeed()

    def schedule(k: int) -> None:
        # arrivals are due in a known order: keep only the next one in SimPy's queue (O(1) per event
        # instead of O(log n)); ties keep job order, as SimPy's own insertion order would
        env.timeout(max(0.0, due[order[k]] - env.now), value=k).callbacks.append(arrived)

    def start_devices(_ev: Any) -> None:
        nonlocal order, due
        t_start[:] = env.now
        if durations is None:
            for i, job in enumerate(jobs):
                updates[i] = update = train(job)
                t_cmp[i], t_com[i] = cost(job, update)
        elif callable(durations):
            t_cmp[:], t_com[:] = (np.asarray(d, dtype=float).reshape(n) for d in durations())
        busy = t_cmp + t_com
        due = env.now + busy
        order = np.argsort(busy, kind="stable")
        if n == 0:
            everyone.succeed()
        else:
            schedule(0)

    def server():
        broadcast = env.timeout(downlink_s)
        broadcast.callbacks.append(start_devices)
        yield broadcast
        if policy == "wait_all":
            yield everyone
        elif policy == "deadline":
            yield everyone | env.timeout(max(0.0, start_s + deadline_s - env.now))
        else:
            yield everyone | enough
        end["t"] = env.now

    env.process(server())
    env.run()  # late devices finish too: their energy is charged

    if policy == "deadline":
        # relative to the round start, with slack for rounding: a plan that meets T_max exactly (AnycostFL's
        # Lemma 3 makes the deadline tight) must not be dropped because start_s + busy rounds up by one ulp
        kept = t_arrive - start_s <= deadline_s * (1 + DEADLINE_RTOL)
    elif policy == "over_select":
        kept = np.zeros(n, dtype=bool)
        kept[order[:keep]] = True
    else:
        kept = np.ones(n, dtype=bool)
    return RoundOutcome(
        start_s=start_s, end_s=end["t"], jobs=jobs, updates=updates, t_start_s=t_start, t_cmp_end_s=t_start + t_cmp,
        t_arrive_s=t_arrive, t_cmp_s=t_cmp, t_com_s=t_com, kept_mask=kept, arrival_order=order,
    )  # fmt: skip
