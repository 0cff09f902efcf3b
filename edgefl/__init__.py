"""edgefl: what federated learning over wireless edge devices really costs.

A SimPy simulation of devices (CPU, energy) and radio (FDMA, path loss, fading, mobility) with real PyTorch
training inside, and the per-device knobs of four papers' optimizers. Typical use::

    from edgefl import load_scenario, run_scenario, write_run
    result = run_scenario(load_scenario("quickstart", ["rounds=5"]))
    write_run(result, "runs/my-run")
"""

from __future__ import annotations

from edgefl.errors import DataError, EdgeflError, ScenarioError, SimulationError
from edgefl.results import RunResult, write_run
from edgefl.runner import run_scenario
from edgefl.scenario import Scenario, load_scenario

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
