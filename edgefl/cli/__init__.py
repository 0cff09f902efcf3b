"""The ``edgefl`` command line: run scenarios, list presets, call the optimizers.

User mistakes (bad scenario, bad override, bad CSV) print one ``error: ...`` line on stderr and exit 2.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from edgefl.cli._common import fail, user_errors

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="What federated learning over wireless edge devices really costs.")
scenarios_app = typer.Typer(invoke_without_command=True, help="Scenario presets shipped with edgefl (no sub-command: list them).")
optimize_app = typer.Typer(no_args_is_help=True, help="Per-device knobs from the papers' optimizers.")
estimate_app = typer.Typer(no_args_is_help=True, help="Estimate constants the optimizers need.")
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(optimize_app, name="optimize")
app.add_typer(estimate_app, name="estimate")

_out = Console(highlight=False, soft_wrap=True)


def _write_fleet(sc, run_dir: Path) -> None:
    """The run's devices as a device table in its folder (``fleet.csv``, or ``fleet.parquet`` with
    ``output.format = "parquet"``): each device's frequency range, energy coefficient, FLOPs per cycle, transmit
    power, position and data size; running the scenario with it as ``fleet.devices`` gives the same tables."""
    from edgefl.cli.fleet import write_table
    from edgefl.run.fleet_export import fleet_frame

    write_table(fleet_frame(sc), run_dir / ("fleet.parquet" if sc.output.format == "parquet" else "fleet.csv"))


@app.command()
def run(
    scenario: Annotated[Optional[str], typer.Argument(help="Preset name (see `edgefl scenarios list`) or path to a TOML file.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Override KEY=VALUE, dotted keys, repeatable: --set rounds=5 --set channel.bandwidth_hz=2e6")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default runs/<name>-<timestamp>).")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Scenario seed (overrides the file).")] = None,
    data_dir: Annotated[Optional[Path], typer.Option("--data-dir", help="Folder with dataset files (else $EDGEFL_DATA; Fashion-MNIST also from Debian's dataset-fashion-mnist).")] = None,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue an interrupted run in this run directory from its last checkpoint.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    target: Annotated[Optional[float], typer.Option("--target", help="Target test accuracy in (0, 1] (train.target_accuracy): time and energy to reach it.")] = None,
    threads: Annotated[Optional[int], typer.Option("--threads", help="Torch threads of the run (train.threads; default 1; docs/executors.md).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Refuse a device table that gives positions in some rows only (fleet.devices_strict; else a warning).")] = False,
) -> None:
    """Run one scenario and write its tables, summary and report (checkpoints go to RUN_DIR/checkpoint)."""
    import json

    from edgefl.io import atomic_write_text
    from edgefl.cli.run_options import resume_without_options, run_option_overrides
    from edgefl.learning.threads import run_threads
    from edgefl.output.results import default_run_dir, write_run
    from edgefl.run.runner import RunInterrupted, prepare, run_scenario
    from edgefl.scenario.loading import scenario_to_toml
    from edgefl.run.load import load_scenario
    from edgefl.output.targets import target_sentence

    with user_errors():
        if resume is not None:
            if scenario is not None or set_ or out is not None or seed is not None or data_dir is not None:
                raise fail("--resume RUN_DIR continues that run as it was: "
                           "give no SCENARIO, --set, --out, --seed or --data-dir")  # fmt: skip
            resume_without_options(target=target, threads=threads, strict=strict)
            sc, run_dir = _resumable(resume)
            sim = prepare(sc, run_dir / "payloads")
        else:
            if scenario is None:
                raise fail("missing SCENARIO: give a preset name or a TOML path (or --resume RUN_DIR)")
            overrides = list(set_ or []) + ([f"data.data_dir={json.dumps(str(data_dir))}"] if data_dir else [])
            overrides += run_option_overrides(target=target, threads=threads, strict=strict)
            sc = load_scenario(scenario, overrides, seed=seed)  # validated before anything is written
            run_dir = out if out is not None else default_run_dir(sc.name)
            if run_dir.exists() and any(run_dir.iterdir()):
                raise fail(f"--out {str(run_dir)!r}: directory exists and is not empty; choose a new one")
            # data, traces and devices read, pre-flight checked: nothing written if it fails
            sim = prepare(sc, run_dir / "payloads")
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run_dir / "scenario.toml", scenario_to_toml(sc))  # what --resume reads back
            _write_fleet(sc, run_dir)
        for warning in sim.warnings:
            typer.echo(f"warning: {warning}", err=True)
        try:
            with _terminate_as_interrupt(), _progress(sc.rounds, enabled=not quiet) as on_round, \
                    run_threads(sc.train.threads):
                result = run_scenario(sc, progress=on_round, checkpoint_dir=run_dir / "checkpoint",
                                      resume=resume is not None, simulation=sim)  # fmt: skip
        except RunInterrupted as stop:  # Ctrl-C or SIGTERM: keep every completed round, and a checkpoint
            write_run(stop.result, run_dir)
            done = len(stop.result.rounds)
            since = "" if stop.resume_round == done else (
                f" (from round {stop.resume_round + 1}: the last checkpoint)" if stop.resume_round
                else " (from round 1: no checkpoint yet)")  # fmt: skip
            _out.print(f"interrupted after {done} of {sc.rounds} rounds; "
                       f"partial results in {run_dir}; continue with: edgefl run --resume {run_dir}{since}",
                       markup=False)  # fmt: skip
            raise typer.Exit(130) from None
        write_run(result, run_dir)
        if not sc.output.keep_checkpoint:  # the run is complete (summary.json says so): nothing to resume
            from edgefl.run.checkpoint import remove_checkpoint

            remove_checkpoint(run_dir / "checkpoint")
    s = result.summary
    acc = "n/a" if s["final_accuracy"] is None else f"{s['final_accuracy']:.4f}"
    late = s.get("warnings", [])[len(sim.warnings):]  # what the run showed (the pre-flight's were printed at the start)
    steps = "server updates" if result.info.asynchronous else "rounds"
    _out.print(
        f"{sc.name}: {s['rounds']} {steps}, final accuracy {acc}, "
        f"simulated time {s['sim_time_s']:.2f} s, energy {s['energy_j']:.3f} J, wall {s['wall_time_s']:.1f} s"
        + (f"; {target_sentence(s)}" if target_sentence(s) else "") + "".join(f"; warning: {w}" for w in late),
        markup=False,
    )
    for warning in late:
        typer.echo(f"warning: {warning}", err=True)
    _out.print(f"run directory: {run_dir}", markup=False)
    _out.print(f"report: {run_dir / 'report.html'}", markup=False)


def _resumable(run_dir: Path):
    """The scenario of an unfinished run directory, checked for --resume."""
    from edgefl.output.results import is_finished
    from edgefl.run.load import load_scenario

    if not (run_dir / "scenario.toml").is_file():
        raise fail(f"--resume {str(run_dir)!r}: no scenario.toml there; not an edgefl run directory")
    if is_finished(run_dir):
        raise fail(f"--resume {str(run_dir)!r}: the run is already complete")
    return load_scenario(run_dir / "scenario.toml"), run_dir


@contextmanager
def _terminate_as_interrupt():
    """SIGTERM (a scheduler's or ``kill``'s stop) is handled as Ctrl-C while a run plays: the completed rounds
    and a checkpoint are written, and the run can be resumed."""
    import signal

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _progress(total: int, *, enabled: bool):
    """A rich progress bar (round, simulated time, accuracy); when stdout is not a terminal, one line on stderr
    per tenth of the run instead."""
    if not enabled:
        yield None
        return
    if not _out.is_terminal:
        yield _progress_lines(total)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("round"), MofNCompleteColumn(), BarColumn(), TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(), console=_out, transient=False,
    ) as bar:  # fmt: skip
        task = bar.add_task("run", total=total, info="")
        state = {"acc": float("nan")}

        def on_round(row: dict) -> None:
            if row["test_accuracy"] == row["test_accuracy"]:
                state["acc"] = row["test_accuracy"]
            bar.update(task, advance=1, info=f"sim {row['sim_time_s']:.1f} s  acc {state['acc']:.3f}")

        yield on_round


def _progress_lines(total: int):
    """A progress callback writing ``round r/total (p%): sim ... s, acc ...`` to stderr each time the run passes
    another tenth of its rounds (every round when there are fewer than 10)."""
    state = {"acc": float("nan"), "tenths": 0}

    def on_round(row: dict) -> None:
        if row["test_accuracy"] == row["test_accuracy"]:
            state["acc"] = row["test_accuracy"]
        tenths = 10 * row["round"] // total
        if tenths > state["tenths"]:
            state["tenths"] = tenths
            typer.echo(f"round {row['round']}/{total} ({100 * row['round'] // total}%): "
                       f"sim {row['sim_time_s']:.3g} s, acc {state['acc']:.3f}", err=True)  # fmt: skip

    return on_round


@scenarios_app.callback()
def _scenarios(ctx: typer.Context) -> None:
    """`edgefl scenarios` alone lists the presets, like `edgefl scenarios list`."""
    if ctx.invoked_subcommand is None:
        scenarios_list()


@scenarios_app.command("list")
def scenarios_list() -> None:
    """List presets with their one-line description."""
    from scenarios import list_presets, preset_description

    for name in list_presets():
        _out.print(f"{name:<24} {preset_description(name)}", markup=False)


@scenarios_app.command("show")
def scenarios_show(name: Annotated[str, typer.Argument(help="Preset name.")]) -> None:
    """Print a preset's TOML, ready to copy and edit."""
    from scenarios import preset_path

    with user_errors():
        sys.stdout.write(preset_path(name).read_text(encoding="utf-8"))


def _register_optimizer_commands() -> None:
    # each optimizer family owns its command module; they add `optimize ...` / `estimate ...` sub-commands
    from edgefl.cli import opt_allocation, opt_anycost, opt_luo

    for module in (opt_anycost, opt_luo, opt_allocation):
        module.register(optimize_app, estimate_app)


_register_optimizer_commands()


def _register_commands() -> None:
    # top-level commands that live in their own modules
    from edgefl.cli import design, fleet, models, plot, sweep

    for module in (design, fleet, models, plot, sweep):
        module.register(app)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    app()
