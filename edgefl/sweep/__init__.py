"""Sweeps: a grid of scenario overrides x seeds, run through an executor (in-process, process pool or Ray),
summarised in one table (sweep.csv) and band plots over seeds (sweep.html).

    from edgefl.sweep import load_sweep, run_sweep, make_executor
    sweep = load_sweep("scenarios/sweeps/quickstart_bandwidth.toml")   # validates every run's scenario
    result = run_sweep(sweep, "runs/sweep-quickstart_bandwidth", executor=make_executor("local", jobs=2))
"""

from __future__ import annotations

from edgefl.sweep.executors import (
    RAY_INSTALL_HINT,
    LocalExecutor,
    RayExecutor,
    RunJob,
    RunOutcome,
    SweepError,
    compute_run,
    make_executor,
    run_one,
    start_local_cluster,
)
from edgefl.sweep.run import RunEvent, SweepInterrupted, SweepResult, run_sweep
from edgefl.sweep.spec import RunSpec, Sweep, SweepSpec, list_sweep_presets, load_sweep, sweep_from_dict
from edgefl.sweep.table import SWEEP_WALL_CLOCK_COLUMNS, build_table, time_to_target

__all__ = [
    "RAY_INSTALL_HINT",
    "SWEEP_WALL_CLOCK_COLUMNS",
    "LocalExecutor",
    "RayExecutor",
    "RunEvent",
    "RunJob",
    "RunOutcome",
    "RunSpec",
    "Sweep",
    "SweepError",
    "SweepInterrupted",
    "SweepResult",
    "SweepSpec",
    "build_table",
    "compute_run",
    "list_sweep_presets",
    "load_sweep",
    "make_executor",
    "run_one",
    "run_sweep",
    "start_local_cluster",
    "sweep_from_dict",
    "time_to_target",
]
