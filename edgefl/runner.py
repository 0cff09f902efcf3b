"""Build a run from a scenario and drive it round by round: the run in three parts.

- building (:func:`build_run`): streams, workload, fleet, cost model, radio and method from the scenario;
- playing one round (:func:`edgefl.round.play_round`): ``(run state) -> (run state, round record)``;
- recording (:class:`edgefl.record.Records`): the rows and device blocks, and the tables built from them.

The run state (:class:`edgefl.state.RunState`) is a value; checkpoints (:mod:`edgefl.checkpoint`) write and
read it with the records, the method's and the radio's memory, and never touch the runner.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgefl.algorithms import MethodSetup, make_method
from edgefl.availability import make_availability
from edgefl.costs import CostModel
from edgefl.errors import SimulationError
from edgefl.fleet_mix import build_fleet, placed_positions
from edgefl.radio import Radio
from edgefl.record import Records
from edgefl.results import RunResult
from edgefl.round import Run, play_round, select_devices
from edgefl.scenario import Scenario
from edgefl.seeding import Streams
from edgefl.sim import Clock
from edgefl.state import RunState

__all__ = ["run_scenario", "build_run", "prepare", "select_devices", "Simulation", "RunInterrupted"]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: ``result`` holds every round completed before it (the round in progress is dropped)."""

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"interrupted after {len(result.rounds)} complete rounds")
        self.result = result


ProgressFn = Callable[[dict[str, Any]], None]


def _workload(scenario: Scenario, streams: Streams) -> Any:
    """The learning workload the scenario names (torch is imported only for real training)."""
    if scenario.learning == "surrogate":
        from edgefl.learning.surrogate import SurrogateWorkload

        return SurrogateWorkload(scenario, streams)
    from edgefl.learning.workload import Workload

    return Workload(scenario, streams)


def build_run(scenario: Scenario) -> Run:
    """The parts of a run of ``scenario``, ready to play round 1."""
    streams = Streams(scenario.seed)
    workload = _workload(scenario, streams)
    fleet = build_fleet(scenario.fleet, workload.n_samples, streams).fleet  # draws, profiles, device table
    costs = CostModel(fleet)
    radio = Radio(scenario.channel, scenario.fleet.n_devices, streams)
    radio.positions_m = placed_positions(scenario.fleet, radio.positions_m)
    mcfg = scenario.method
    setup = MethodSetup(
        workload=workload, costs=costs, streams=streams, n_devices=fleet.n_devices,
        clients_per_round=mcfg.clients_per_round, rounds=scenario.rounds, width=scenario.model.width,
    )  # fmt: skip
    method = make_method(mcfg.name, settings=mcfg.settings_of(), setup=setup)
    rcfg = scenario.round
    k, n = mcfg.clients_per_round, fleet.n_devices
    n_select = min(n, math.ceil(k * (1 + rcfg.over_select_fraction))) if rcfg.policy == "over_select" else k
    t_max = rcfg.deadline_s if rcfg.policy == "deadline" else None
    clock = Clock(n, availability=make_availability(scenario.fleet.availability, n, streams))
    server = None
    if getattr(method, "asynchronous", False):
        from edgefl.asynchronous import AsyncServer

        server = AsyncServer()
    return Run(scenario=scenario, streams=streams, workload=workload, fleet=fleet, costs=costs, radio=radio,
               method=method, n_select=n_select, t_max_s=t_max, clock=clock, async_server=server)  # fmt: skip


def prepare(scenario: Scenario) -> Simulation:
    """A run of ``scenario`` built and checked before round 1: its data, traces and devices are read, and
    :func:`edgefl.preflight.preflight` raises when no device can ever finish a job (its warnings are kept)."""
    from edgefl.preflight import preflight

    sim = Simulation(scenario)
    sim.warnings = preflight(sim.run)
    return sim


def run_scenario(
    scenario: Scenario,
    *,
    progress: ProgressFn | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    simulation: Simulation | None = None,
) -> RunResult:
    """Run ``scenario`` to completion and return its tables. ``progress`` is called with each round's row.

    With ``checkpoint_dir``, the run's state is written there every ``scenario.checkpoint_every`` rounds (and
    on Ctrl-C); with ``resume=True`` it continues from the checkpoint found there (from round 1 if none).
    Ctrl-C raises :class:`RunInterrupted` carrying every round completed so far. ``simulation``: the run already
    built by :func:`prepare` (default: prepared here).
    """
    sim = simulation if simulation is not None else prepare(scenario)
    every = scenario.checkpoint_every
    if resume and checkpoint_dir is not None:
        sim.restore(checkpoint_dir)
    if sim.run.async_server is not None:
        from edgefl.asynchronous import fewer_collections

        rarer_gc = fewer_collections()
    else:
        rarer_gc = contextlib.nullcontext()
    try:
        with rarer_gc:
            for r in range(sim.rounds_done + 1, scenario.rounds + 1):
                row = sim.step(r)
                if checkpoint_dir is not None and every and r % every == 0 and r < scenario.rounds:
                    sim.save(checkpoint_dir)
                if progress is not None:
                    progress(row)
    except KeyboardInterrupt:
        if checkpoint_dir is not None:
            sim.save(checkpoint_dir)  # the last completed round: `edgefl run --resume` continues from it
        raise RunInterrupted(sim.result()) from None
    return sim.result(final=True)


class Simulation:
    """One run driven round by round: its built parts (:attr:`run`), its state and its records.

    ``learning = "torch"`` trains each job for real inside the SimPy round; ``"surrogate"`` charges the
    planned work of each job and moves the loss with the scenario's convergence bound (no torch import).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.run = run = build_run(scenario)
        self.state = RunState(rounds_done=0, sim_time_s=0.0, energy_cum_j=0.0, model=run.workload.initial_state())
        self.records = Records()
        self.warnings: list[str] = []  # for summary.json (the pre-flight check's, :func:`prepare`)
        self._saved_blocks = 0  # blocks already in the checkpoint's segment files

    # the parts, for callers that inspect a run (design, tests)
    scenario = property(lambda self: self.run.scenario)
    streams = property(lambda self: self.run.streams)
    workload = property(lambda self: self.run.workload)
    fleet = property(lambda self: self.run.fleet)
    costs = property(lambda self: self.run.costs)
    radio = property(lambda self: self.run.radio)
    method = property(lambda self: self.run.method)
    t_max = property(lambda self: self.run.t_max_s)
    rounds_done = property(lambda self: self.state.rounds_done)

    def step(self, r: int) -> dict[str, Any]:
        """Simulate round ``r`` (rounds in order, from 1; for an asynchronous method the ``r``-th server update);
        record and return its ``rounds`` row.

        Rows are recorded only once the round is complete, so an interruption never leaves half a round.
        """
        if r != self.state.rounds_done + 1:
            raise ValueError(f"round {r}: the next round to simulate is {self.state.rounds_done + 1}")
        if self.run.async_server is not None:
            from edgefl.asynchronous import play_update

            self.state, record = play_update(self.run, self.state)
        else:
            self.state, record = play_round(self.run, self.state)
        self.records.append(record)
        return record.row

    def result(self, *, final: bool = False) -> RunResult:
        """The tables of every completed round (the summary derives from them).

        ``final=True`` (the run is over) lets the device table reuse the per-round blocks' memory; the
        simulation cannot be stepped or checkpointed afterwards.
        """
        return replace(self.records.result(self.run.scenario, release=final), warnings=list(self.warnings))

    # ------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | Path) -> None:
        """Write the state after the last completed round to ``checkpoint_dir`` (atomically, see checkpoint.py);
        an asynchronous run also writes its server and its jobs in flight."""
        from edgefl.checkpoint import save_checkpoint

        run = self.run
        server = run.async_server
        self._saved_blocks = save_checkpoint(
            Path(checkpoint_dir), run.scenario, self.state, self.records, self._saved_blocks,
            method_state=run.method.state_dict(), radio_state=run.radio.state_dict(), trains=run.workload.trains,
            clock_state=run.clock.state_dict(),
            async_state=None if server is None else server.state_dict(run.clock, run.workload.trains),
        )  # fmt: skip

    def restore(self, checkpoint_dir: str | Path) -> bool:
        """Continue from the checkpoint in ``checkpoint_dir``; False (and nothing changed) if there is none."""
        from edgefl.checkpoint import load_checkpoint

        run = self.run
        found = load_checkpoint(Path(checkpoint_dir), run.scenario, like=self.state.model, trains=run.workload.trains)
        if found is None:
            return False
        self.state, self.records = found.state, found.records
        run.radio.load_state_dict(found.radio_state)
        run.method.load_state_dict(found.method_state)
        server = run.async_server
        if server is not None:
            if found.async_state is None:
                raise SimulationError(f"{checkpoint_dir}: the checkpoint has no asynchronous server state")
            server.load_state_dict(found.async_state, found.async_tensors)
        run.clock.load_state_dict(found.clock_state or {"clock_s": found.state.sim_time_s, "in_flight": []},
                                  on_end_of=None if server is None else server.on_end_of)  # fmt: skip
        self._saved_blocks = len(self.records.device_blocks)
        return True

