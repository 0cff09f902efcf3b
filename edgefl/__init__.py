"""edgefl: what federated learning over wireless edge devices really costs.

A SimPy simulation of devices (CPU, energy) and radio (FDMA, path loss, fading, mobility) with real PyTorch
training inside, and the per-device knobs of four papers' optimizers. Typical use::

    from edgefl import load_scenario, run_scenario, write_run
    result = run_scenario(load_scenario("quickstart", ["rounds=5"]))
    write_run(result, "runs/my-run")

Shape of a run: :func:`edgefl.run.runner.build_run` turns the scenario into values once (streams, workload, fleet
and cost model, radio, method, the per-round rules :class:`edgefl.engine.round_rules.RoundRules`, the learner of
:mod:`edgefl.training.learner` with its executor, the SimPy clock, and a driver picked from the method's declared needs); a
driver then plays ``play(run, state) -> (state, record)`` step by step, sync and async side by side:

- :class:`edgefl.engine.sync_driver.SyncDriver`, one synchronous round: select -> ``method.plan_round`` (a job table) -> jobs
  on the clock; at dispatch ``learner.work`` turns each job into a :class:`~edgefl.methods.base.TrainJob` value
  (download, knobs, device memory, seed), the executor runs the method's device side on each (shrink, train,
  compress) and returns :class:`~edgefl.methods.base.ClientUpdate` values, the cost model prices what they
  really spent -> wait under the round policy -> charge -> ``method.aggregate`` -> evaluate -> row;
- :class:`edgefl.engine.async_driver.AsyncDriver`, one server update: keep C jobs in flight (each dispatch planned and
  worked like a round's jobs, on the model it downloads), refill a slot when a job ends, and once M updates are
  buffered ``method.server_step`` weights each by its staleness -> charge the jobs that ended -> evaluate -> row.

Both use the shared round mechanics of :mod:`edgefl.engine.round_steps`; :mod:`edgefl.engine.records` (which reads the jobs'
columns and their :class:`edgefl.engine.clock.JobTimes`) and :mod:`edgefl.run.checkpoint` keep what was played; the report
draws from the result.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from edgefl.errors import DataError, EdgeflError, ScenarioError, SimulationError

if TYPE_CHECKING:
    from edgefl.output.results import RunResult, write_run
    from edgefl.run.runner import run_scenario
    from edgefl.scenario.loading import Scenario
    from edgefl.run.load import load_scenario

__all__ = [
    "Scenario",
    "load_scenario",
    "run_scenario",
    "RunResult",
    "write_run",
    "EdgeflError",
    "ScenarioError",
    "DataError",
    "SimulationError",
]

__version__ = "0.1.0"

# torch and pandas load only when a run needs them, so `edgefl optimize ...` and `--help` start fast
_LAZY = {
    "Scenario": "edgefl.scenario.loading",
    "load_scenario": "edgefl.run.load",
    "run_scenario": "edgefl.run.runner",
    "RunResult": "edgefl.output.results",
    "write_run": "edgefl.output.results",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'edgefl' has no attribute {name!r}")
