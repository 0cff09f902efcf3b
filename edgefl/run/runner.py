"""Build a run from a scenario and drive it step by step: the run in three parts.

- building (:func:`build_run`): streams, workload, fleet, cost model, radio, method, the per-round rules and
  the driver, from the scenario (the only place a run reads it);
- playing one step (:class:`edgefl.engine.driver.Driver`): ``(run state) -> (run state, record)``, a synchronous round
  (:class:`edgefl.engine.sync_driver.SyncDriver`) or an asynchronous server update (:class:`edgefl.engine.async_driver.AsyncDriver`);
- recording (:class:`edgefl.engine.records.Records`): the rows and device blocks, and the tables built from them.

The run state (:class:`edgefl.engine.run_state.RunState`) is a value; checkpoints (:mod:`edgefl.run.checkpoint`) write and
read it with the records, the method's, the radio's, the clock's and the driver's memory, and never touch the
runner.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgefl.errors import ScenarioError, SimulationError
from edgefl.methods import METHODS, MethodSetup, make_method
from edgefl.engine.async_driver import AsyncDriver
from edgefl.fleet.availability import make_availability
from edgefl.fleet.costs import CostModel
from edgefl.fleet.devices import EnergyBudgets
from edgefl.engine.driver import Driver, RoundRules, Run
from edgefl.fleet.build import FleetBuild, build_fleet, placed_positions
from edgefl.learning.data_sizes import DataSizes
from edgefl.scenario.device_table import DeviceTable, table_of
from edgefl.training.executors import ProcessExecutor, RayExecutor, usable_cores
from edgefl.training.learner import Executor, InlineExecutor, make_learner, training_groups
from edgefl.engine.round_steps import select_devices
from edgefl.fleet.links import Radio
from edgefl.engine.records import Records
from edgefl.engine.selection import check_policy
from edgefl.output.results import RunResult
from edgefl.output.run_info import RunInfo
from edgefl.engine.sync_driver import SyncDriver
from edgefl.scenario.loading import Scenario, cost_mode
from edgefl.seeding import Streams
from edgefl.engine.clock import Clock
from edgefl.engine.run_state import RunState
from edgefl.engine.payloads import PayloadFiles

if TYPE_CHECKING:
    from edgefl.methods.base import Method
    from edgefl.learning.protocol import Learning

__all__ = [
    "run_scenario", "build_run", "build_method", "device_side", "draw_devices", "Devices", "make_executor",
    "resolve_info", "prepare", "select_devices", "Simulation", "RunInterrupted",
]  # fmt: skip


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: ``result`` holds every round completed before it (the round in progress is dropped);
    ``resume_round``: the round of the checkpoint a resume continues from (0: from the start), the last
    completed round unless the interruption fell inside a round (then the last periodic checkpoint's)."""

    def __init__(self, result: RunResult, resume_round: int = 0) -> None:
        super().__init__(f"interrupted after {len(result.rounds)} complete rounds")
        self.result = result
        self.resume_round = resume_round


ProgressFn = Callable[[dict[str, Any]], None]


def data_sizes(table: DeviceTable | None) -> DataSizes | None:
    """The local data sizes a device table sets (its ``n_samples``, ``data_share`` columns), or None."""
    if table is None:
        return None
    return DataSizes(where=table.where, n_samples=table.values.get("n_samples"), share=table.values.get("data_share"))


def make_workload(scenario: Scenario, streams: Streams, table: DeviceTable | None = None) -> Learning:
    """The learning workload the scenario names, built from its own configs and the data sizes its device ``table``
    sets (default: the scenario's own table; torch is imported only for real training)."""
    n, sizes = scenario.fleet.n_devices, data_sizes(table if table is not None else table_of(scenario.fleet))
    if scenario.learning == "surrogate":
        from edgefl.learning.surrogate import SurrogateWorkload

        return SurrogateWorkload(config=scenario.surrogate, train=scenario.train, width=scenario.model.width,
                                 n_devices=n, streams=streams, data_sizes=sizes)  # fmt: skip
    from edgefl.learning.workload import Workload

    return Workload(data=scenario.data, model=scenario.model, train=scenario.train, n_devices=n, streams=streams,
                    data_sizes=sizes)  # fmt: skip


@dataclass(frozen=True, eq=False)
class Devices:
    """What a scenario's seed draws before its method is built: the run's ``streams``, its learning ``workload``
    (the devices' data), its ``fleet`` with what went into it (:class:`edgefl.fleet.build.FleetBuild`), its
    ``radio`` with the devices placed and the user's device ``table`` (None: none)."""

    streams: Streams
    workload: Learning
    fleet: FleetBuild
    radio: Radio
    table: DeviceTable | None = None


def draw_devices(scenario: Scenario) -> Devices:
    """The devices of a run of ``scenario`` (:class:`Devices`), as :func:`build_run` draws them."""
    streams = Streams(scenario.seed)
    table = table_of(scenario.fleet)  # the user's device table, read once; None without one
    workload = make_workload(scenario, streams, table)
    dl = scenario.channel.downlink
    rx_set = dl is not None and "rx_power_w" in dl.model_fields_set  # one receive power for every device
    built = build_fleet(scenario.fleet, workload.n_samples, streams, table, realistic=scenario.physics == "realistic",
                        downlink_rx_w=dl.rx_power_w if rx_set else None)  # draws, profiles, device table
    radio = Radio(scenario.channel, scenario.fleet.n_devices, streams)
    radio.positions_m = placed_positions(table, radio.positions_m)
    return Devices(streams=streams, workload=workload, fleet=built, radio=radio, table=table)


def build_method(scenario: Scenario, devices: Devices) -> tuple[Method, CostModel]:
    """The method of a run of ``scenario`` on its ``devices``, and the cost model it plans with."""
    fleet = devices.fleet.fleet
    costs = CostModel(fleet)
    mcfg = scenario.method
    setup = MethodSetup(
        workload=devices.workload, costs=costs, streams=devices.streams, n_devices=fleet.n_devices,
        clients_per_round=mcfg.clients_per_round, rounds=scenario.rounds, width=scenario.model.width,
    )  # fmt: skip
    return make_method(mcfg.name, settings=mcfg.settings_of(), setup=setup), costs


def device_side(scenario: Scenario) -> tuple[Method, Learning]:
    """An executor worker's copy of a run's device side (:data:`edgefl.training.executors.DeviceSide`): the method as
    built and the trainer with the devices' data, drawn from ``scenario``'s seed as :func:`build_run` draws them."""
    devices = draw_devices(scenario)
    return build_method(scenario, devices)[0], devices.workload


def make_executor(scenario: Scenario, method: Method, workload: Learning) -> Executor | None:
    """The executor of the run's training jobs (``train.executor``, :mod:`edgefl.training.executors`); None under surrogate
    learning (no job trains)."""
    train = scenario.train
    if not workload.trains:
        return None
    if train.executor == "inline":
        return InlineExecutor(method=method, trainer=workload)
    build = functools.partial(device_side, scenario)
    workers = trainer_info(scenario)["workers"]
    grouping = functools.partial(training_groups, method, workload)  # the same groups as the inline executor's
    if train.executor == "processes":
        return ProcessExecutor(build=build, workers=workers, threads=train.threads, grouping=grouping)
    return RayExecutor(build=build, workers=workers, threads=train.threads, address=train.address, grouping=grouping)


def build_run(scenario: Scenario, payloads_dir: str | Path | None = None) -> Run:
    """The parts of a run of ``scenario``, ready to play round 1. With ``output.payloads``, the arrived updates'
    payloads are written into ``payloads_dir`` (None: kept for the result)."""
    devices = draw_devices(scenario)
    streams, workload, fleet, radio = devices.streams, devices.workload, devices.fleet.fleet, devices.radio
    method, costs = build_method(scenario, devices)
    check_policy(scenario.selection, fleet)
    availability = make_availability(scenario.fleet.availability, fleet.n_devices, streams)
    clock = Clock(fleet.n_devices, availability=availability)
    driver: Driver = AsyncDriver() if method.needs.asynchronous else SyncDriver()
    payloads = _payload_files(scenario, method, workload, payloads_dir)
    learner = make_learner(method=method, workload=workload, executor=make_executor(scenario, method, workload))
    return Run(scenario=scenario, rules=round_rules(scenario, fleet.n_devices), streams=streams, workload=workload,
               fleet=fleet, costs=costs, radio=radio, method=method, learner=learner, clock=clock,
               driver=driver, payloads=payloads)  # fmt: skip


def _payload_files(scenario: Scenario, method: Method, workload: Learning,
                   payloads_dir: str | Path | None) -> PayloadFiles | None:  # fmt: skip
    """Where ``output.payloads`` files the arrived payloads (None when it is off); refused where no payload is
    built (surrogate learning) or a device row's round is not the server update that aggregates its job
    (asynchronous methods)."""
    if not scenario.output.payloads:
        return None
    if not workload.trains:
        raise ScenarioError('output.payloads = true: a surrogate run (learning = "surrogate") encodes no update; '
                            'use learning = "torch" or leave output.payloads false')  # fmt: skip
    if method.needs.asynchronous:
        raise ScenarioError(f"output.payloads = true is not available for the asynchronous method {method.name!r} "
                            "yet (its device rows are keyed by the update a job ended in, not the one that "
                            "aggregated it); leave output.payloads false")  # fmt: skip
    return PayloadFiles(payloads_dir)


def round_rules(scenario: Scenario, n_devices: int) -> RoundRules:
    """The rules of every round of ``scenario`` on a fleet of ``n_devices`` (:class:`edgefl.engine.driver.RoundRules`)."""
    rcfg, ch, k = scenario.round, scenario.channel, scenario.method.clients_per_round
    dl = ch.downlink
    over = rcfg.policy == "over_select"
    return RoundRules(
        rounds=scenario.rounds,
        n_select=min(n_devices, math.ceil(k * (1 + rcfg.over_select_fraction))) if over else k,
        keep=k,
        policy=rcfg.policy,
        late=rcfg.late,
        deadline_s=rcfg.deadline_s,
        t_max_s=rcfg.deadline_s if rcfg.policy == "deadline" else None,
        downlink_s=rcfg.downlink_s,
        downlink_rx_power_w=None if dl is None else dl.rx_power_w,
        width=scenario.model.width,
        budget=EnergyBudgets.of(scenario.fleet.budget),
        eval_every=scenario.train.eval_every,
        global_loss=scenario.train.global_loss,
        fixed_bands=ch.bandwidth_mode == "fixed" and (dl is None or dl.bandwidth_mode == "fixed"),
        selection=None if scenario.selection.policy == "random" else scenario.selection,
        charge_idle=rcfg.charge_idle,
        waterfall=None if ch.packet_errors is None else ch.packet_errors.waterfall,
        retransmissions=0 if ch.packet_errors is None else ch.packet_errors.retransmissions,
        allocation=ch.allocation,
        allocation_weight=ch.allocation_weight,
    )


def resolve_info(scenario: Scenario) -> RunInfo:
    """What names a run of ``scenario`` and the settings its summary and report show (:class:`RunInfo`)."""
    rcfg, ch, data, mcfg = scenario.round, scenario.channel, scenario.data, scenario.method
    return RunInfo(
        name=scenario.name, method=mcfg.name, seed=scenario.seed, rounds=scenario.rounds,
        asynchronous=METHODS[mcfg.name].needs.asynchronous, n_devices=scenario.fleet.n_devices,
        clients_per_round=mcfg.clients_per_round, bandwidth_hz=ch.bandwidth_hz, bandwidth_mode=ch.bandwidth_mode,
        policy=rcfg.policy, deadline_s=rcfg.deadline_s, late=rcfg.late, over_select_fraction=rcfg.over_select_fraction,
        cost_mode=cost_mode(scenario.fleet), learning=scenario.learning, surrogate_bound=scenario.surrogate.bound,
        model=scenario.model.name, dataset=data.dataset, partition=data.partition,
        target_accuracy=scenario.train.target_accuracy, flops_per_cycle_scale=scenario.fleet.flops_per_cycle_scale,
        output_format=scenario.output.format, physics=physics_of(scenario), **trainer_info(scenario),
        **uplink_info(scenario),
    )  # fmt: skip


def uplink_info(scenario: Scenario) -> dict[str, Any]:
    """How the scenario shares and schedules the uplink, for :class:`RunInfo`: access, selection policy (Chen et
    al.'s RBs), allocation and packet errors."""
    ch, chen, lost = scenario.channel, scenario.selection.chen, scenario.channel.packet_errors
    return {
        "access": ch.access, "selection": scenario.selection.policy, "chen_rbs": chen.resource_blocks,
        "chen_rb_hz": chen.rb_bandwidth_hz, "chen_waterfall": chen.waterfall, "allocation": ch.allocation,
        "allocation_weight": ch.allocation_weight, "waterfall": None if lost is None else lost.waterfall,
        "retransmissions": 0 if lost is None else lost.retransmissions,
    }  # fmt: skip


def physics_of(scenario: Scenario) -> str:
    """The scenario's ``physics`` (``"paper"`` or ``"realistic"``), read defensively: ``"paper"`` when the scenario
    has no such field or leaves it empty."""
    value = getattr(scenario, "physics", None)
    return str(value) if value else "paper"


def trainer_info(scenario: Scenario) -> dict[str, Any]:
    """Where a run's training jobs run: ``executor``, ``workers`` (what :func:`make_executor` starts) and
    ``device``; ``"none"`` and 0 workers under surrogate learning."""
    train = scenario.train
    if scenario.learning != "torch":
        return {"executor": "none", "workers": 0, "device": "none"}
    from edgefl.learning.workload import torch_device

    workers = {"inline": 1, "processes": train.workers or usable_cores(), "ray": train.workers or 2}[train.executor]
    return {"executor": train.executor, "workers": workers, "device": torch_device(train.device).type}


def prepare(scenario: Scenario, payloads_dir: str | Path | None = None) -> Simulation:
    """A run of ``scenario`` built and checked before round 1: its data, traces and devices are read, and
    :func:`edgefl.run.preflight.preflight` raises when no device can ever finish a job (its warnings are kept,
    after those of the device table). ``payloads_dir``: where ``output.payloads`` writes (:func:`build_run`)."""
    from edgefl.run.preflight import preflight

    sim = Simulation(scenario, payloads_dir)
    sim.warnings = [*_table_warnings(scenario), *preflight(sim.run, availability=scenario.fleet.availability)]
    return sim


def _table_warnings(scenario: Scenario) -> list[str]:
    """What the scenario's device table leaves to chance: rows without a position in a table whose other rows
    give one (refused at load under ``fleet.devices_strict``)."""
    from edgefl.scenario.device_table import position_gaps, table_of

    gaps = None if scenario.fleet.devices is None else position_gaps(table_of(scenario.fleet))
    if gaps is None:
        return []
    return [f"{gaps}: those devices are placed at drawn positions (fill in their cells; fleet.devices_strict = true "
            "or `edgefl run --strict` refuses such a table)"]  # fmt: skip


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
    on a Ctrl-C that falls between rounds: one inside a round leaves the last checkpoint); with ``resume=True`` it continues from the checkpoint found there (from round 1 if none).
    Ctrl-C raises :class:`RunInterrupted` carrying every round completed so far. ``simulation``: the run already
    built by :func:`prepare` (default: prepared here).
    """
    sim = simulation if simulation is not None else prepare(scenario)
    every = scenario.checkpoint_every
    if resume and checkpoint_dir is not None:
        sim.restore(checkpoint_dir)
    try:
        with sim.run.driver.playing():
            for r in range(sim.rounds_done + 1, scenario.rounds + 1):
                row = sim.step(r)
                if checkpoint_dir is not None and every and r % every == 0 and r < scenario.rounds:
                    sim.save(checkpoint_dir)
                if progress is not None:
                    progress(row)
    except KeyboardInterrupt:
        resume_round = 0
        if checkpoint_dir is not None:
            from edgefl.run.checkpoint import checkpoint_round

            if sim.at_boundary:  # between rounds: `edgefl run --resume` continues from the last completed one
                sim.save(checkpoint_dir)
            # else inside a round, whose clock, radio and method have moved on: the last checkpoint stands
            resume_round = checkpoint_round(checkpoint_dir)
        raise RunInterrupted(sim.result(), resume_round) from None
    finally:
        sim.run.learner.close()  # the executor's workers, if any
    return sim.result(final=True)


class Simulation:
    """One run driven round by round: its built parts (:attr:`run`), its settings (:attr:`info`), its state and
    its records.

    ``learning = "torch"`` trains each job for real inside the SimPy round; ``"surrogate"`` charges the
    planned work of each job and moves the loss with the scenario's convergence bound (no torch import).
    """

    def __init__(self, scenario: Scenario, payloads_dir: str | Path | None = None) -> None:
        self.run = run = build_run(scenario, payloads_dir)
        self.info = resolve_info(scenario)  # what the result names and reports
        self.state = RunState(rounds_done=0, sim_time_s=0.0, energy_cum_j=0.0, model=run.workload.initial_state())
        self.records = Records()
        self.warnings: list[str] = []  # for summary.json (the pre-flight check's, :func:`prepare`)
        self._saved_blocks = 0  # blocks already in the checkpoint's segment files
        self._cut: int | None = None  # the round a step was playing when it raised (its parts are past state)

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
        if self._cut is not None:
            raise SimulationError(f"round {self._cut} was cut short: this simulation cannot go on (resume it from "
                                  "its last checkpoint)")  # fmt: skip
        if r != self.state.rounds_done + 1:
            raise ValueError(f"round {r}: the next round to simulate is {self.state.rounds_done + 1}")
        self._cut = r  # until the round is recorded: the clock, radio and method move as it is played
        state, record = self.run.driver.play(self.run, self.state)
        self.records.append(record)
        self.state, self._cut = state, None
        return record.row

    @property
    def at_boundary(self) -> bool:
        """Whether the run's parts (clock, radio, method, driver) stand where :attr:`state` says: between two
        rounds. False once a round raised part-way (Ctrl-C inside it): then nothing can be saved or played."""
        return self._cut is None

    def result(self, *, final: bool = False) -> RunResult:
        """The tables of every completed round (the summary derives from them).

        ``final=True`` (the run is over) lets the device table reuse the per-round blocks' memory; the
        simulation cannot be stepped or checkpointed afterwards.
        """
        rounds, device_rounds = self.records.tables(release=final)
        payloads = {} if self.run.payloads is None else dict(self.run.payloads.kept)
        return RunResult(scenario=self.run.scenario, info=self.info, rounds=rounds, device_rounds=device_rounds,
                         availability=self.run.clock.availability, warnings=list(self.warnings),
                         payloads=payloads)  # fmt: skip

    # ------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | Path) -> None:
        """Write the state after the last completed round to ``checkpoint_dir`` (atomically, see checkpoint.py),
        with the driver's memory (an asynchronous run's server and its jobs in flight). Only between rounds
        (:attr:`at_boundary`): a round cut short has moved the clock, the radio and the method past the rows."""
        from edgefl.run.checkpoint import save_checkpoint

        if self._cut is not None:
            raise SimulationError(f"round {self._cut} was cut short: its clock, radio and method are part-way "
                                  f"through it, so a checkpoint of round {self._cut - 1} cannot be taken now")  # fmt: skip
        run = self.run
        self._saved_blocks = save_checkpoint(
            Path(checkpoint_dir), run.scenario, self.state, self.records, self._saved_blocks,
            method_state=run.method.state_dict(), radio_state=run.radio.state_dict(), learning=run.workload,
            clock_state=run.clock.state_dict(),
            driver_state=run.driver.state_dict(run),
        )  # fmt: skip

    def restore(self, checkpoint_dir: str | Path) -> bool:
        """Continue from the checkpoint in ``checkpoint_dir``; False (and nothing changed) if there is none."""
        from edgefl.run.checkpoint import load_checkpoint

        run = self.run
        found = load_checkpoint(Path(checkpoint_dir), run.scenario, like=self.state.model, learning=run.workload)
        if found is None:
            return False
        self.state, self.records = found.state, found.records
        run.radio.load_state_dict(found.radio_state)
        run.method.load_state_dict(found.method_state)
        run.driver.load_state_dict(run, found.driver_state, found.driver_tensors)
        run.clock.load_state_dict(found.clock_state or {"clock_s": found.state.sim_time_s, "in_flight": []},
                                  on_end_of=run.driver.job_ends())  # fmt: skip
        self._saved_blocks = len(self.records.device_blocks)
        return True

