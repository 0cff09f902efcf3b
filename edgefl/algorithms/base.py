"""The small protocol every FL method implements: plan a round, produce one device's update, aggregate.

The simulator (edgefl.sim) only sees :class:`DeviceJob` and :class:`ClientUpdate`; it never knows which
method produced them. Plans carry the paper's *planned* costs; the simulator charges the *measured* ones
(FLOPs of what trained, bits of what was built) and both are recorded side by side.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from edgefl.learning.workload import State, Workload
    from edgefl.scenario import Scenario
    from edgefl.system import Fleet

__all__ = ["RoundContext", "DeviceJob", "Skip", "RoundPlan", "ClientUpdate", "Method"]


@dataclass(frozen=True, kw_only=True)
class RoundContext:
    """What a method knows when it plans round ``round_index`` (1-based).

    ``selected``: device ids chosen by the server, shape (k,). ``rate_bps``, ``e_max_j``: this round's uplink
    rate [bit/s] (assuming every selected device transmits) and energy budget [J] (inf = none), shape (n,).
    ``t_max_s``: the round deadline [s] or None.
    """

    round_index: int
    selected: np.ndarray
    fleet: Fleet
    rate_bps: np.ndarray
    e_max_j: np.ndarray
    t_max_s: float | None
    rng: np.random.Generator


@dataclass(frozen=True, kw_only=True)
class DeviceJob:
    """One device's work in a round, with the knobs the method chose and the costs it planned."""

    device: int
    cpu_hz: float
    width: float = 1.0
    alpha: float = math.nan
    beta: float = math.nan
    local_steps: int = 0
    bits_planned: float = math.nan
    t_cmp_planned_s: float = math.nan
    t_com_planned_s: float = math.nan
    e_cmp_planned_j: float = math.nan
    e_com_planned_j: float = math.nan


@dataclass(frozen=True)
class Skip:
    """A selected device that does not train this round, and why (e.g. its energy budget is too small)."""

    device: int
    reason: str


@dataclass(frozen=True)
class RoundPlan:
    """The jobs to run this round and the selected devices that sit it out."""

    jobs: tuple[DeviceJob, ...]
    skipped: tuple[Skip, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ClientUpdate:
    """What a device built: the payload, its aggregation weight, and what it cost (measured).

    ``bits``: encoded payload size [bits]; ``flops``: training FLOPs actually computed.
    """

    device: int
    payload: State
    weight: float
    bits: float
    flops: float
    steps: int
    train_loss: float


class Method(ABC):
    """An FL method. Subclasses are constructed with keyword arguments only."""

    name: ClassVar[str]

    def __init__(self, *, scenario: Scenario, workload: Workload) -> None:
        self.scenario = scenario
        self.workload = workload

    @abstractmethod
    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        """Choose which selected devices train and with which knobs."""

    @abstractmethod
    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        """Run the device's local work for real and build its payload."""

    @abstractmethod
    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        """The next global state from the updates that arrived in time (may be empty)."""
