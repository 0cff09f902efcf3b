"""CLI command ``edgefl sweep``: run a grid of scenario overrides x seeds and write sweep.csv and sweep.html.

    edgefl sweep SWEEP.toml [--executor local|ray] [--address ADDR] [--jobs N] [--out DIR]

SWEEP is a sweep file or the name of one shipped in ``scenarios/sweeps/``. The default output directory
``runs/sweep-<name>`` does not change between calls, so running the same command again skips the finished runs
and resumes an interrupted sweep. One line per finished run goes to stderr. Bad input prints one
``error: ...`` line on stderr and exits with code 2; Ctrl-C keeps the finished runs and exits with code 130.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from edgefl.cli._common import fail

__all__ = ["register"]


class ExecutorKind(str, Enum):
    local = "local"
    ray = "ray"


def _print_event(event) -> None:  # noqa: ANN001 - edgefl.sweep.RunEvent, imported lazily
    from edgefl.output.report import format_value

    width = len(str(event.total))
    head = f"[{event.count:>{width}}/{event.total}] {event.run.run_id}"
    if event.status == "skipped":
        line = f"{head}: finished earlier, skipped"
    elif event.status == "failed":
        line = f"{head}: FAILED: {event.error}"
    else:
        s = event.summary or {}
        line = (
            f"{head}: accuracy {format_value(s.get('final_accuracy'), '.4f')}, "
            f"simulated time {format_value(s.get('sim_time_s'), '.4g', ' s')}, "
            f"energy {format_value(s.get('energy_j'), '.4g', ' J')}, "
            f"wall {format_value(s.get('wall_time_s'), '.1f', ' s')}"
        )
    print(line, file=sys.stderr, flush=True)


def register(app: typer.Typer) -> None:
    """Add the top-level ``sweep`` command to ``app``."""

    @app.command("sweep")
    def sweep(
        sweep_file: Annotated[str, typer.Argument(metavar="SWEEP", help="Sweep TOML file, or the name of a shipped sweep (scenarios/sweeps/).")],
        executor: Annotated[ExecutorKind, typer.Option("--executor", help="local: this machine (--jobs processes); ray: a Ray cluster.")] = ExecutorKind.local,
        address: Annotated[Optional[str], typer.Option("--address", help="Ray cluster to join (HOST:PORT or 'auto'); default: start a local one on 127.0.0.1.")] = None,
        jobs: Annotated[Optional[int], typer.Option("--jobs", help="Runs at once. local: processes (default 1 = in this process); ray: CPUs of the local cluster and runs in flight.")] = None,
        out: Annotated[Optional[Path], typer.Option("--out", help="Output directory (default runs/sweep-<name>); re-use it to resume.")] = None,
    ) -> None:  # fmt: skip
        """Run every grid point x seed of a sweep, skipping finished runs; write sweep.csv and sweep.html."""
        from edgefl.errors import EdgeflError
        from edgefl.sweep import SweepInterrupted, load_sweep, make_executor, run_sweep

        try:
            spec = load_sweep(sweep_file)  # every run's scenario is validated before anything is written
            out_dir = out if out is not None else Path("runs") / f"sweep-{spec.spec.name}"
            ex = make_executor(executor.value, jobs=jobs, address=address, threads=spec.spec.threads_per_run)
            print(f"sweep {spec.spec.name}: {len(spec.runs)} runs -> {out_dir}", file=sys.stderr, flush=True)
            result = run_sweep(spec, out_dir, executor=ex, progress=_print_event)
        except SweepInterrupted as stop:
            print(
                f"interrupted: {stop.finished} of {stop.total} runs finished and kept in {stop.out_dir}; "
                "run the same command again to resume",
                file=sys.stderr,
            )
            raise typer.Exit(130) from None
        except EdgeflError as exc:
            raise fail(str(exc)) from None
        typer.echo(f"ran {len(result.ran)}, skipped {len(result.skipped)} finished runs")
        typer.echo(f"table: {result.csv_path}")
        typer.echo(f"plots: {result.html_path}")
