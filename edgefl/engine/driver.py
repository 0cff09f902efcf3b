"""What a driver plays: the built parts of a run (:class:`Run`), its rules (:class:`RoundRules`) and the protocol
both drivers implement (:class:`Driver`); the rules live in :mod:`edgefl.engine.round_rules`, below the drivers' shared
mechanics (:mod:`edgefl.engine.round_steps`).

A driver turns the run state into the next state and the record of one step: a synchronous round
(:class:`edgefl.engine.sync_driver.SyncDriver`) or an asynchronous server update (:class:`edgefl.engine.async_driver.AsyncDriver`).
:func:`edgefl.run.runner.build_run` resolves the scenario into these values once and picks the driver from the
method's declared :class:`~edgefl.methods.base.Needs`; no driver reads the scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from edgefl.engine.round_rules import RoundRules

if TYPE_CHECKING:
    from edgefl.methods.base import Method
    from edgefl.fleet.costs import CostModel
    from edgefl.training.learner import Learner
    from edgefl.learning.protocol import Learning
    from edgefl.fleet.links import Radio
    from edgefl.engine.records import RoundRecord
    from edgefl.scenario.loading import Scenario
    from edgefl.seeding import Streams
    from edgefl.engine.clock import Clock
    from edgefl.engine.payloads import PayloadFiles
    from edgefl.engine.run_state import RunState
    from edgefl.fleet.devices import Fleet

__all__ = ["Driver", "RoundRules", "Run"]


@dataclass(frozen=True, eq=False, kw_only=True)
class Run:
    """The built parts of a run (see :func:`edgefl.run.runner.build_run`).

    ``rules``: the per-round rules; ``workload``: sizes and the trainer (:class:`edgefl.learning.protocol.Learning`);
    ``learner``: the learning steps the driver calls (:mod:`edgefl.training.learner`); ``clock``: the run's SimPy clock (device states and jobs in flight, carried
    from round to round); ``driver``: what plays each round or server update (its memory between them);
    ``scenario``: what the run was built from, for the front ends and the result (drivers do not read it);
    ``payloads``: where the arrived updates' payloads are filed (``output.payloads``; None: nowhere).
    """

    scenario: Scenario
    rules: RoundRules
    streams: Streams
    workload: Learning
    fleet: Fleet
    costs: CostModel
    radio: Radio
    method: Method
    learner: Learner
    clock: Clock
    driver: Driver
    payloads: PayloadFiles | None = None

    @property
    def n_select(self) -> int:
        """Devices the server starts per round (:attr:`RoundRules.n_select`)."""
        return self.rules.n_select

    @property
    def t_max_s(self) -> float | None:
        """The round deadline a method plans for [s] (:attr:`RoundRules.t_max_s`)."""
        return self.rules.t_max_s


class Driver(Protocol):
    """Plays a run one step at a time: a synchronous round or an asynchronous server update."""

    def play(self, run: Run, state: RunState) -> tuple[RunState, RoundRecord]:
        """Play step ``state.rounds_done + 1``; return the state after it and its record."""
        ...

    def playing(self) -> AbstractContextManager[Any]:
        """The context the whole run is played in (e.g. the garbage collector's thresholds)."""
        ...

    def state_dict(self, run: Run) -> tuple[dict, dict | None] | None:
        """The driver's memory between steps, for a checkpoint: (JSON-able part, tensors or None), or None."""
        ...

    def load_state_dict(self, run: Run, meta: dict | None, tensors: dict | None) -> None:
        """Continue from :meth:`state_dict` (then restore the clock with :meth:`job_ends`)."""
        ...

    def job_ends(self) -> Callable[[int], Callable[[int, bool], None]] | None:
        """For the clock's restored jobs: the ``on_end`` of the dispatch with a tag, or None (no such jobs)."""
        ...
