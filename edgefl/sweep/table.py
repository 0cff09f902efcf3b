"""sweep.csv: one row per run, built from the run directories (summary.json and rounds.csv).

Columns: ``run``, one column per grid key (dotted, as in the sweep file), ``seed``, ``final_accuracy``,
``best_accuracy``, ``final_test_loss``, ``final_train_loss``, ``sim_time_s`` [s] and ``energy_j`` [J] at the end
of the last round, ``target_metric`` (the rounds.csv column the target was checked on), ``target_round``,
``sim_time_to_target_s`` [s] and ``energy_to_target_j`` [J] at the end of the first round that reached the
sweep's target (empty if never reached or no target), ``wall_time_s``.
Only ``wall_time_s`` depends on the host (see :data:`SWEEP_WALL_CLOCK_COLUMNS`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from edgefl.output.results import is_finished, read_summary
from edgefl.output.targets import time_to_target

if TYPE_CHECKING:
    from edgefl.sweep.spec import RunSpec, Sweep
    from edgefl.output.targets import Target

__all__ = ["METRIC_COLUMNS", "SWEEP_WALL_CLOCK_COLUMNS", "build_table", "time_to_target", "read_summary", "is_finished"]

METRIC_COLUMNS = (
    "final_accuracy", "best_accuracy", "final_test_loss", "final_train_loss", "sim_time_s", "energy_j",
    "target_metric", "target_round", "sim_time_to_target_s", "energy_to_target_j",
)  # fmt: skip
SWEEP_WALL_CLOCK_COLUMNS = ("wall_time_s",)
"""Columns of sweep.csv measured on the host clock; every other column is a function of the sweep file."""


def _last(rounds: pd.DataFrame, column: str) -> float:
    if column not in rounds.columns:
        return math.nan
    values = pd.to_numeric(rounds.sort_values("round", kind="stable")[column], errors="coerce").dropna()
    return float(values.iloc[-1]) if len(values) else math.nan


def _cell(value: Any) -> Any:
    """A grid value as a CSV cell: scalars as they are, arrays as JSON (``[0.2, 1.0]``)."""
    return json.dumps(value) if isinstance(value, list) else value


def _num(value: Any) -> float:
    return math.nan if value is None else float(value)


def run_row(run: RunSpec, run_dir: Path, target: Target | None, rounds: pd.DataFrame | None = None) -> dict[str, Any]:
    """The sweep.csv row of one finished run (``rounds``: its rounds.csv if already read, else read here)."""
    summary = read_summary(run_dir) or {}
    if rounds is None:
        rounds = pd.read_csv(run_dir / "rounds.csv")
    return {
        "run": run.run_id,
        **{key: _cell(value) for key, value in run.params.items()},
        "seed": run.seed,
        "final_accuracy": _num(summary.get("final_accuracy")),
        "best_accuracy": _num(summary.get("best_accuracy")),
        "final_test_loss": _last(rounds, "test_loss"),
        "final_train_loss": _last(rounds, "train_loss"),
        "sim_time_s": _num(summary.get("sim_time_s")),
        "energy_j": _num(summary.get("energy_j")),
        **time_to_target(rounds, target),
        "wall_time_s": _num(summary.get("wall_time_s")),
    }


def build_table(sweep: Sweep, runs_root: Path, rounds: Mapping[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """sweep.csv as a DataFrame, one row per run in grid order (``runs_root / <run id>`` are the run dirs;
    ``rounds``: the runs' rounds.csv by run id if already read, else each is read here)."""
    rounds = rounds or {}
    rows = [run_row(run, runs_root / run.run_id, sweep.spec.target, rounds.get(run.run_id)) for run in sweep.runs]
    columns = ["run", *sweep.grid_keys, "seed", *METRIC_COLUMNS, *SWEEP_WALL_CLOCK_COLUMNS]
    table = pd.DataFrame(rows, columns=columns)
    table["target_round"] = table["target_round"].astype("Int64")  # an integer, empty when never reached
    return table
