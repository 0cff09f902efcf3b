"""Run results: the two tables, the summary, and the run directory they are written to (atomically)."""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from edgefl.io import atomic_write_bytes, atomic_write_json, atomic_write_text
from edgefl.output.device_rounds_file import write_device_rounds
from edgefl.engine.records import DEVICE_COLUMNS, ROUND_COLUMNS
from edgefl.output.run_info import RunInfo
from edgefl.scenario.loading import Scenario, scenario_to_toml

if TYPE_CHECKING:
    from edgefl.fleet.availability import Availability

__all__ = [
    "ROUND_COLUMNS", "DEVICE_COLUMNS", "WALL_CLOCK_COLUMNS", "RunInfo", "RunResult", "default_run_dir", "setup_notes",
    "write_run", "read_summary", "is_finished",
]  # fmt: skip

WALL_CLOCK_COLUMNS = ("wall_time_s",)
"""Columns measured on the host clock; everything else is a deterministic function of scenario and seed."""


@dataclass(kw_only=True)
class RunResult:
    """Everything one run produced. ``scenario``: what it was built from (written as ``scenario.toml``);
    ``info``: its name and settings (:class:`RunInfo`); ``rounds``: one row per round; ``device_rounds``: one row
    per selected device per round (the columns of docs/outputs.md first, method-specific ones after); ``summary``: headline
    numbers, derived from ``rounds`` when first read; ``availability``: the schedule that put the devices on- and
    offline (the run clock's, :mod:`edgefl.fleet.availability`; None: always online), from which the report draws
    offline bars; ``payloads``: with ``output.payloads``, the arrived updates' payloads by file name under
    ``payloads/`` when the run kept them (no run folder while it ran; else they are in that folder already)."""

    scenario: Scenario
    info: RunInfo
    rounds: pd.DataFrame
    device_rounds: pd.DataFrame
    availability: Availability | None = None
    warnings: list[str] = field(default_factory=list)
    payloads: dict[str, bytes] = field(default_factory=dict)

    @cached_property
    def summary(self) -> dict[str, Any]:
        return {**summarize(self.info, self.rounds), "warnings": [*self.warnings, *run_warnings(self.rounds)]}


def run_warnings(rounds: pd.DataFrame) -> list[str]:
    """What the tables show went wrong: no update arrived in any round (the model never changed)."""
    if len(rounds) and int(rounds["arrived"].sum()) == 0:
        return [f"no update arrived in any of the {len(rounds)} rounds: the model never changed (every job missed "
                "the deadline, exceeded its budget or was lost offline)"]  # fmt: skip
    return []


def summarize(info: RunInfo, rounds: pd.DataFrame) -> dict[str, Any]:
    """summary.json: the report's headline numbers (accuracies in [0, 1], time [s], energy [J]) plus what
    identifies the run; ``complete`` is true once every round the run asks for is in ``rounds``."""
    from edgefl.output.report import summarize as headline
    from edgefl.output.report_header import uplink_summary
    from edgefl.output.targets import run_target_summary

    return {
        "name": info.name,
        "method": info.method,
        "seed": info.seed,
        **headline(rounds),
        "complete": int(len(rounds)) == info.rounds,
        "bits_up": float(rounds["bits_up"].sum()) if len(rounds) else 0.0,
        "wall_time_s": float(rounds["wall_time_s"].sum()) if len(rounds) else 0.0,
        **run_target_summary(info.target_accuracy, rounds),
        "training_jobs": {"executor": info.executor, "workers": info.workers, "device": info.device},
        **uplink_summary(info),
    }


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    """``runs/<name>-<YYYYmmdd-HHMMSS>`` (a numeric suffix is added if it already exists)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(root) / f"{name}-{stamp}"
    i = 1
    while path.exists():
        path = Path(root) / f"{name}-{stamp}-{i}"
        i += 1
    return path


def setup_notes(info: RunInfo) -> list[str]:
    """Sentences the report shows about how the run departs from the scale it models."""
    notes = []
    s = info.flops_per_cycle_scale
    if s != 1.0:
        notes.append(
            f"Laptop scale: FLOPs per cycle are multiplied by {s:g} (fleet.flops_per_cycle_scale), the fraction "
            "of the modelled per-device samples each device holds here, so every device-round's compute time "
            "and energy are those of the modelled scale; uploads are the real model's size."
        )
    return notes


def offline_periods(
    availability: Availability | None, devices: list[int], end_s: float
) -> dict[int, list[tuple[float, float]]]:
    """Each of ``devices``' offline intervals [s] in [0, ``end_s``] under a run's ``availability`` schedule
    (:attr:`RunResult.availability`); empty when every device is always online."""
    if availability is None or end_s <= 0:
        return {}
    n = availability.n_devices
    return {d: availability.offline_periods(d, end_s) for d in devices if 0 <= d < n}


def _deadline_s(device_rounds: pd.DataFrame) -> float | None:
    """The round deadline T_max [s] the run recorded (``t_max_s``), or None when it had none."""
    if "t_max_s" not in device_rounds:
        return None
    t_max = device_rounds["t_max_s"].dropna()
    return float(t_max.iloc[0]) if len(t_max) else None


def write_run(result: RunResult, out_dir: str | Path, *, report: bool = True) -> Path:
    """Write scenario.toml, rounds.csv, device_rounds.csv (or .parquet, ``output.format``), the payloads the
    result kept (``payloads/``), summary.json (and report.html) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "scenario.toml", scenario_to_toml(result.scenario))
    atomic_write_text(out / "rounds.csv", result.rounds.to_csv(index=False))
    info = result.info
    write_device_rounds(out, result.device_rounds, info.output_format)
    for name, data in result.payloads.items():
        atomic_write_bytes(out / "payloads" / name, data)
    if report:
        from edgefl.output.report import gantt_devices, write_report
        from edgefl.output.report_header import report_header

        t_max = _deadline_s(result.device_rounds)
        end_s = float(result.rounds["sim_time_s"].max()) if len(result.rounds) else 0.0
        write_report(
            out / "report.html",
            result.rounds,
            result.device_rounds,
            title=f"{info.name} ({info.method}, seed {info.seed})",
            t_max_s=t_max,
            notes=setup_notes(info),
            offline=offline_periods(result.availability, gantt_devices(result.device_rounds), end_s),
            **report_header(info),
        )
    atomic_write_json(out / "summary.json", result.summary)  # last: a complete summary marks a finished run
    return out


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary.json, or ``None`` if it is missing or unreadable."""
    try:
        data = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_finished(run_dir: Path) -> bool:
    """A run is finished when its summary.json says ``"complete": true`` (written last by :func:`write_run`)."""
    summary = read_summary(run_dir)
    return bool(summary and summary.get("complete") is True)
