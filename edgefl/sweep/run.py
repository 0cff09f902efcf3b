"""Run a sweep: skip finished runs, execute the others, then write sweep.csv and sweep.html.

Output directory::

    OUT/sweep.toml            the sweep spec with its base resolved (written once every run is validated)
    OUT/runs/<run id>/        one run directory per run (scenario.toml, rounds.csv, ..., summary.json last)
    OUT/sweep.csv             one row per run (edgefl.sweep.table)
    OUT/sweep.html            band plots over seeds (edgefl.sweep.plots)

A run whose summary.json says ``"complete": true`` is finished and skipped on the next call, so a sweep that
was interrupted (Ctrl-C) resumes where it stopped; sweep.csv and sweep.html are written only once every run
is finished.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from edgefl.io import atomic_write_text
from edgefl.output.results import is_finished
from edgefl.sweep.executors import LocalExecutor, RayExecutor, RunJob, SweepError
from edgefl.sweep.plots import build_sweep_page
from edgefl.sweep.spec import RunSpec, Sweep
from edgefl.sweep.table import build_table

__all__ = ["RunEvent", "SweepResult", "SweepInterrupted", "run_sweep", "RUNS_DIR"]

RUNS_DIR = "runs"


@dataclass(frozen=True, kw_only=True)
class RunEvent:
    """Progress: run ``run`` was ``skipped`` (finished earlier), is ``done`` or ``failed``; ``count`` of
    ``total`` runs are accounted for so far."""

    run: RunSpec
    status: Literal["skipped", "done", "failed"]
    count: int
    total: int
    summary: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    """A finished sweep: where its files are, its table, and which runs ran now or were skipped."""

    out_dir: Path
    csv_path: Path
    html_path: Path
    table: pd.DataFrame
    ran: tuple[str, ...]
    skipped: tuple[str, ...]


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: the ``finished`` of ``total`` runs stay on disk; running the sweep again resumes."""

    def __init__(self, finished: int, total: int, out_dir: Path) -> None:
        super().__init__(f"interrupted with {finished} of {total} runs finished")
        self.finished, self.total, self.out_dir = finished, total, out_dir


ProgressFn = Callable[[RunEvent], None]


def run_sweep(
    sweep: Sweep,
    out_dir: str | Path,
    *,
    executor: LocalExecutor | RayExecutor | None = None,
    progress: ProgressFn | None = None,
) -> SweepResult:
    """Run every run of ``sweep`` not finished yet under ``out_dir`` (default executor: in-process, sequential).

    Raises :class:`SweepError` before running anything if a finished run directory holds a different scenario
    than the sweep now asks for, and after running everything else if some runs failed (their error named).
    Ctrl-C raises :class:`SweepInterrupted`.
    """
    out = Path(out_dir)
    runs_root = out / RUNS_DIR
    total = len(sweep.runs)
    finished = [run for run in sweep.runs if is_finished(runs_root / run.run_id)]
    _check_same_scenarios(finished, runs_root)
    done_ids = {run.run_id for run in finished}
    todo = [run for run in sweep.runs if run.run_id not in done_ids]
    atomic_write_text(out / "sweep.toml", sweep.resolved_toml())

    count = 0
    for run in finished:
        count += 1
        if progress is not None:
            progress(RunEvent(run=run, status="skipped", count=count, total=total))
    by_id = {run.run_id: run for run in todo}
    jobs = [
        RunJob(run_id=run.run_id, scenario_toml=run.scenario_toml, run_dir=runs_root / run.run_id,
               threads=sweep.spec.threads_per_run, report=sweep.spec.run_reports)
        for run in todo
    ]  # fmt: skip
    failures: list[tuple[str, str]] = []
    ran: list[str] = []
    if jobs:  # no pool or cluster is started when every run is finished
        try:
            with executor if executor is not None else LocalExecutor(jobs=1) as ex:
                for outcome in ex.imap(jobs):
                    count += 1
                    run = by_id[outcome.job.run_id]
                    if outcome.error is not None:
                        failures.append((run.run_id, outcome.error))
                        event = RunEvent(run=run, status="failed", count=count, total=total, error=outcome.error)
                    else:
                        ran.append(run.run_id)
                        event = RunEvent(run=run, status="done", count=count, total=total, summary=outcome.summary)
                    if progress is not None:
                        progress(event)
        except KeyboardInterrupt:
            raise SweepInterrupted(len(finished) + len(ran), total, out) from None
    if failures:
        first_id, first_error = failures[0]
        raise SweepError(
            f"{len(failures)} of {total} runs failed (first: {first_id}: {first_error}); finished runs are kept "
            f"in {runs_root}, run the sweep again to retry the others"
        )
    return _write_outputs(sweep, out, ran=tuple(ran), skipped=tuple(r.run_id for r in finished))


def _check_same_scenarios(finished: list[RunSpec], runs_root: Path) -> None:
    """A finished run is reused only if its scenario.toml is the scenario the sweep asks for now."""
    stale = []
    for run in finished:
        path = runs_root / run.run_id / "scenario.toml"
        try:
            on_disk = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            on_disk = None
        if on_disk != tomllib.loads(run.scenario_toml):
            stale.append(run.run_id)
    if stale:
        raise SweepError(
            f"run directory {str(runs_root / stale[0])!r} (and {len(stale) - 1} more) holds a finished run of a "
            "different scenario (was the sweep or its base scenario edited?); remove those directories or use "
            "another --out"
        )


def _write_outputs(sweep: Sweep, out: Path, *, ran: tuple[str, ...], skipped: tuple[str, ...]) -> SweepResult:
    runs_root = out / RUNS_DIR
    rounds = {run.run_id: pd.read_csv(runs_root / run.run_id / "rounds.csv") for run in sweep.runs}
    table = build_table(sweep, runs_root, rounds)
    csv_path = atomic_write_text(out / "sweep.csv", table.to_csv(index=False))
    html_path = atomic_write_text(out / "sweep.html", build_sweep_page(sweep, table, rounds))
    return SweepResult(out_dir=out, csv_path=csv_path, html_path=html_path, table=table, ran=ran, skipped=skipped)
