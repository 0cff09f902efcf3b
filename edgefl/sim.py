"""SimPy round engine: one server process, one process per device job, three round-end policies.

Per round (a fresh ``simpy.Environment`` starting at the round's start time):

    server: broadcast (downlink_s) -> start one process per job -> wait per policy -> round end
    device: train for real (zero simulated time) -> hold t_cmp -> upload over its sub-band (hold t_com) -> arrive

Policies: ``wait_all`` (the straggler sets the round end), ``deadline`` (round ends at the last arrival or
at start + deadline_s, whichever is first; later arrivals are dropped, their energy still charged: a device
does not learn that it is late), ``over_select`` (round ends at the ``keep``-th arrival; the rest are
dropped). The engine knows nothing about FL methods: it calls ``train(job)`` and ``cost(job, update)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import simpy

__all__ = ["DeviceTimeline", "RoundOutcome", "simulate_round"]

Policy = Literal["wait_all", "deadline", "over_select"]


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


@dataclass(frozen=True, kw_only=True)
class RoundOutcome:
    """A simulated round: start and end [s] and each device's timeline (in job order)."""

    start_s: float
    end_s: float
    devices: tuple[DeviceTimeline, ...]

    @property
    def kept(self) -> list[DeviceTimeline]:
        """Timelines of the updates that count, in arrival order."""
        return sorted((d for d in self.devices if d.kept), key=lambda d: d.t_arrive_s)


def simulate_round(
    *,
    start_s: float,
    jobs: Sequence[Any],
    train: Callable[[Any], Any],
    cost: Callable[[Any, Any], tuple[float, float]],
    policy: Policy = "wait_all",
    deadline_s: float | None = None,
    keep: int | None = None,
    downlink_s: float = 0.0,
) -> RoundOutcome:
    """Run one round as SimPy events.

    ``train(job) -> update`` does the real work; ``cost(job, update) -> (t_cmp_s, t_com_s)`` turns what was
    computed and built into durations [s]. ``deadline_s`` [s] is measured from ``start_s`` (downlink
    included); ``keep`` is K for ``over_select``.
    """
    if policy == "deadline" and (deadline_s is None or deadline_s <= 0):
        raise ValueError(f"deadline_s={deadline_s}: policy 'deadline' needs deadline_s > 0")
    if policy == "over_select" and (keep is None or keep < 1):
        raise ValueError(f"keep={keep}: policy 'over_select' needs keep >= 1")
    env = simpy.Environment(initial_time=start_s)
    records: dict[int, dict[str, Any]] = {}
    arrival_order: list[int] = []
    enough = env.event()
    end: dict[str, float] = {}

    def device(i: int, job: Any):
        t0 = env.now
        update = train(job)
        t_cmp, t_com = cost(job, update)
        yield env.timeout(t_cmp)
        t1 = env.now
        yield env.timeout(t_com)
        records[i] = dict(job=job, update=update, t_start_s=t0, t_cmp_end_s=t1, t_arrive_s=env.now,
                          t_cmp_s=t_cmp, t_com_s=t_com)
        arrival_order.append(i)
        if policy == "over_select" and len(arrival_order) == keep:
            enough.succeed()

    def server():
        yield env.timeout(downlink_s)
        procs = [env.process(device(i, job)) for i, job in enumerate(jobs)]
        everyone = env.all_of(procs)
        if policy == "wait_all":
            yield everyone
        elif policy == "deadline":
            yield everyone | env.timeout(max(0.0, start_s + deadline_s - env.now))
        else:
            yield everyone | enough
        end["t"] = env.now

    env.process(server())
    env.run()  # late devices finish too: their energy is charged

    end_s = end["t"]
    if policy == "deadline":
        kept_ids = {i for i, r in records.items() if r["t_arrive_s"] <= start_s + deadline_s}
    elif policy == "over_select":
        kept_ids = set(arrival_order[:keep])
    else:
        kept_ids = set(records)
    timelines = tuple(DeviceTimeline(**records[i], kept=i in kept_ids) for i in range(len(jobs)))
    return RoundOutcome(start_s=start_s, end_s=end_s, devices=timelines)
