"""Sweeps (edgefl/sweep, edgefl/cli/sweep.py): spec validation, grid expansion and run ids, skip/resume of
finished runs, time-to-target against rounds.csv, and the Ray executor against the local one.

The runs are the quickstart preset made small (3 rounds, 10 devices, 3 per round, logistic regression):
2 bandwidths x 2 seeds = 4 runs, about a second each in-process.
"""

from __future__ import annotations

import csv
import math
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import tomli_w
import typer
from typer.testing import CliRunner

from edgefl.errors import ScenarioError
from edgefl.output.results import WALL_CLOCK_COLUMNS
from edgefl.sweep import (
    SWEEP_WALL_CLOCK_COLUMNS,
    LocalExecutor,
    SweepError,
    SweepInterrupted,
    list_sweep_presets,
    load_sweep,
    make_executor,
    run_sweep,
    time_to_target,
)
from edgefl.sweep.spec import Target
from edgefl.cli.sweep import register

SMALL = {
    "name": "small",
    "base": "quickstart",
    "seeds": [0, 1],
    "target_accuracy": 0.8,
    "run_reports": False,
    "set": {"rounds": 3, "fleet": {"n_devices": 10}, "method": {"clients_per_round": 3}, "model": {"name": "logreg"}},
    "grid": {"channel.bandwidth_mhz": [0.5, 2.0]},
}
IDS = ["bandwidth_mhz=0.5-seed0", "bandwidth_mhz=0.5-seed1", "bandwidth_mhz=2.0-seed0", "bandwidth_mhz=2.0-seed1"]


def write_sweep(path: Path, data: dict | None = None, **changes) -> Path:
    spec = {**(SMALL if data is None else data), **changes}
    path.write_text(tomli_w.dumps({k: v for k, v in spec.items() if v is not None}), encoding="utf-8")
    return path


def sweep_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a callback keeps `sweep` a sub-command, as in the edgefl app
        pass

    register(app)
    return app


def invoke(*args: str):
    return CliRunner().invoke(sweep_app(), ["sweep", *args])


def without_wall_clock(path: Path) -> pd.DataFrame:
    """A CSV as text cells (exact comparison), host-clock columns dropped."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return df.drop(columns=[c for c in (*SWEEP_WALL_CLOCK_COLUMNS, *WALL_CLOCK_COLUMNS) if c in df.columns])


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> Path:
    """The 4-run sweep run once in-process (sequential); tests that change it work on a copy."""
    root = tmp_path_factory.mktemp("local")
    sweep = load_sweep(write_sweep(root / "small.toml"))
    result = run_sweep(sweep, root / "out", executor=LocalExecutor(jobs=1))
    assert result.ran == tuple(IDS) and result.skipped == ()
    return root / "out"


# ------------------------------------------------------------------------------------- spec validation


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"bandwidth": 1}, r"bandwidth: unknown key"),
        ({"grid": {"channel.bandwidth_mhz": []}}, r"grid: channel\.bandwidth_mhz=\[\]: give at least one value"),
        ({"grid": {"channel.bandwidth_mhz": [1.0, 1.0]}}, r"value 1\.0 appears more than once"),
        ({"grid": {"channel": {"bandwidth_mhz": 1.0}}}, r"channel\.bandwidth_mhz=1\.0: give a list of values"),
        ({"target_accuracy": 1.5}, r"target_accuracy=1\.5: .*less than or equal to 1"),
        ({"target_accuracy": 0.0}, r"target_accuracy=0\.0: .*greater than 0"),
        ({"target_loss": -1.0, "target_accuracy": None}, r"target_loss=-1\.0: .*greater than 0"),
        ({"target_loss": 0.5}, r"either target_accuracy or target_loss, not both"),
        ({"target_loss_column": "train_loss"}, r"target_loss_column needs target_loss"),
        ({"seeds": []}, r"seeds=\[\]: .*at least 1"),
        ({"seeds": [1, 1]}, r"seed 1 appears more than once"),
        ({"seeds": [-1]}, r"seeds\.0=-1: .*greater than or equal to 0"),
        ({"grid": {"seed": [1, 2]}}, r"key 'seed' cannot be set here"),
        ({"set": {"rounds": 3}, "grid": {"rounds": [1, 2]}}, r"rounds is in both \[set\] and \[grid\]"),
        ({"base": None}, r"base: missing"),
        ({"base": "no_such_preset"}, r"scenario 'no_such_preset': no such preset"),
        ({"base": "missing.toml"}, r"base='missing\.toml': no file"),
        # every run's scenario is validated at load: a bad grid value or key names the field and the run
        ({"grid": {"channel.bandwidth_mhz": [1.0, -2.0]}}, r"bandwidth_mhz=-2\.0.*channel\.bandwidth_mhz=-2: outside"),
        ({"grid": {"channel.bandwith_mhz": [1.0]}}, r"channel\.bandwith_mhz: unknown key"),
        (
            {"set": {"fleet.n_devices": 10}, "grid": {"method.clients_per_round": [3, 50]}},
            r"clients_per_round=50.*exceeds fleet\.n_devices=10",
        ),
    ],
)
def test_spec_errors_are_one_line(tmp_path, changes, match):
    with pytest.raises(ScenarioError, match=match) as info:
        load_sweep(write_sweep(tmp_path / "s.toml", **changes))
    assert "\n" not in str(info.value)
    assert str(tmp_path / "s.toml") in str(info.value)  # the message names the sweep file


def test_cli_bad_grid_value_fails_fast_and_writes_nothing(tmp_path):
    path = write_sweep(tmp_path / "s.toml", grid={"channel.bandwidth_mhz": [1.0, 0.0]})
    result = invoke(str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "bandwidth_mhz=0.0" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, match",
    [
        (["--jobs", "0"], r"--jobs 0: must be an integer >= 1"),
        (["--address", "127.0.0.1:6379"], r"--address '127\.0\.0\.1:6379': only used with --executor ray"),
    ],
)
def test_cli_bad_options(tmp_path, args, match):
    result = invoke(str(write_sweep(tmp_path / "s.toml")), "--out", str(tmp_path / "out"), *args)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(match, result.stderr)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------- grid expansion


def test_grid_expansion_count_and_ids(tmp_path):
    grid = {"channel.bandwidth_mhz": [0.5, 1.0, 2.0], "fleet.tx_power_dbm": [10, 20]}
    spec = {**SMALL, "seeds": [3, 7], "grid": grid}
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", spec))
    assert len(sweep.runs) == 3 * 2 * 2
    ids = [run.run_id for run in sweep.runs]
    assert len(set(ids)) == len(ids)
    assert ids[:3] == [
        "bandwidth_mhz=0.5,tx_power_dbm=10-seed3",
        "bandwidth_mhz=0.5,tx_power_dbm=10-seed7",
        "bandwidth_mhz=0.5,tx_power_dbm=20-seed3",
    ]
    first = sweep.runs[0].scenario
    assert (first.channel.bandwidth_hz, first.seed, first.rounds, first.model.name) == (0.5e6, 3, 3, "logreg")
    assert math.isclose(first.fleet.tx_power_w, 0.01)  # 10 dBm
    # ids depend only on the run's grid values and seed: a grid grown by one value keeps the others' ids
    grown = {**spec, "grid": {"channel.bandwidth_mhz": [0.25, 0.5, 1.0, 2.0], "fleet.tx_power_dbm": [10, 20]}}
    grown_ids = [run.run_id for run in load_sweep(write_sweep(tmp_path / "g.toml", grown)).runs]
    assert set(ids) < set(grown_ids)
    # nested tables mean the same as dotted keys; keys sharing a last component keep their full name
    nested = {**spec, "grid": {"channel": {"bandwidth_mhz": [0.5, 1.0, 2.0]}, "fleet": {"tx_power_dbm": [10, 20]}}}
    assert [r.run_id for r in load_sweep(write_sweep(tmp_path / "n.toml", nested)).runs] == ids
    clash = {**spec, "grid": {"data.test_fraction": [0.2], "train.lr": [0.1], "model.width": [0.5, 1.0]}}
    assert load_sweep(write_sweep(tmp_path / "c.toml", clash)).runs[0].run_id == (
        "test_fraction=0.2,lr=0.1,width=0.5-seed3"
    )


def test_empty_grid_and_base_path_relative_to_sweep_file(tmp_path):
    (tmp_path / "scen").mkdir()
    shutil.copy(Path(__file__).parents[1] / "scenarios" / "quickstart.toml", tmp_path / "scen" / "mine.toml")
    (tmp_path / "sweeps").mkdir()
    spec = {**SMALL, "base": "../scen/mine.toml", "grid": {}}
    sweep = load_sweep(write_sweep(tmp_path / "sweeps" / "s.toml", spec))
    assert [r.run_id for r in sweep.runs] == ["seed0", "seed1"]
    assert sweep.base_source == str((tmp_path / "scen" / "mine.toml").resolve())


def test_shipped_sweeps_load():
    assert "quickstart_bandwidth" in list_sweep_presets()
    sweep = load_sweep("quickstart_bandwidth")  # by name, like a scenario preset
    assert len(sweep.runs) == 3 * 3
    assert {r.scenario.channel.bandwidth_hz for r in sweep.runs} == {0.5e6, 1e6, 2e6}


# ------------------------------------------------------------------------------------- running


@pytest.mark.slow
def test_sweep_outputs(local_sweep):
    table = pd.read_csv(local_sweep / "sweep.csv")
    assert list(table["run"]) == IDS
    assert list(table.columns[:3]) == ["run", "channel.bandwidth_mhz", "seed"]
    assert list(table["channel.bandwidth_mhz"]) == [0.5, 0.5, 2.0, 2.0] and list(table["seed"]) == [0, 1, 0, 1]
    assert list(table.columns[3:]) == [
        "final_accuracy", "best_accuracy", "final_test_loss", "final_train_loss", "sim_time_s", "energy_j",
        "target_metric", "target_round", "sim_time_to_target_s", "energy_to_target_j", "wall_time_s",
    ]  # fmt: skip
    # same seed, more bandwidth: the same training, a shorter upload
    assert (table["final_accuracy"][:2].to_numpy() == table["final_accuracy"][2:].to_numpy()).all()
    assert (table["sim_time_s"][2:].to_numpy() < table["sim_time_s"][:2].to_numpy()).all()
    page = (local_sweep / "sweep.html").read_text(encoding="utf-8")
    for div in ("edgefl-test-accuracy-vs-time", "edgefl-test-accuracy-vs-energy", "edgefl-final-metrics"):
        assert f'id="{div}"' in page
    assert "min..max" in page
    spec = (local_sweep / "sweep.toml").read_text(encoding="utf-8")
    assert 'base = "quickstart"' in spec and "target_accuracy = 0.8" in spec
    for run_id in IDS:
        assert (local_sweep / "runs" / run_id / "summary.json").is_file()


@pytest.mark.slow
def test_time_to_target_equals_rounds_csv(local_sweep):
    table = pd.read_csv(local_sweep / "sweep.csv", keep_default_na=True)
    for _, row in table.iterrows():
        with open(local_sweep / "runs" / row["run"] / "rounds.csv", newline="") as fh:
            rounds = list(csv.DictReader(fh))
        hit = next((r for r in rounds if r["test_accuracy"] and float(r["test_accuracy"]) >= 0.8), None)
        assert row["target_metric"] == "test_accuracy"
        if hit is None:
            assert math.isnan(row["sim_time_to_target_s"]) and math.isnan(row["energy_to_target_j"])
        else:
            assert row["target_round"] == int(hit["round"])
            assert row["sim_time_to_target_s"] == float(hit["sim_time_s"])
            assert row["energy_to_target_j"] == float(hit["energy_cum_j"])
    assert table["target_round"].notna().any()


def test_time_to_target_rules():
    nan = math.nan
    rounds = pd.DataFrame(
        {
            "round": [1, 2, 3, 4],
            "sim_time_s": [1.0, 2.0, 3.0, 4.0],
            "energy_cum_j": [10.0, 20.0, 30.0, 40.0],
            "test_accuracy": [0.5, nan, 0.9, 0.95],  # round 2 not evaluated
            "test_loss": [2.0, nan, 0.4, 0.3],
            "train_loss": [1.0, 0.5, 0.45, 0.2],
        }
    )
    accuracy = Target(columns=("test_accuracy",), value=0.9, sense="max")
    assert time_to_target(rounds, accuracy) == {
        "target_metric": "test_accuracy", "target_round": 3, "sim_time_to_target_s": 3.0, "energy_to_target_j": 30.0
    }  # fmt: skip
    loss = Target(columns=("test_loss", "train_loss"), value=0.5, sense="min")  # target_loss's default
    assert time_to_target(rounds, loss)["target_round"] == 3  # the test loss when the run has one
    surrogate = rounds.assign(test_accuracy=nan, test_loss=nan)  # learning = "surrogate": training loss only
    reached = time_to_target(surrogate, loss)
    assert (reached["target_metric"], reached["target_round"], reached["sim_time_to_target_s"]) == (
        "train_loss", 2, 2.0
    )  # fmt: skip
    never = time_to_target(rounds, Target(columns=("test_accuracy",), value=0.99, sense="max"))
    assert never["target_metric"] == "test_accuracy" and math.isnan(never["target_round"])
    assert time_to_target(surrogate, accuracy)["target_metric"] == ""  # no accuracy at all
    assert math.isnan(time_to_target(rounds, None)["sim_time_to_target_s"])


@pytest.mark.slow
def test_surrogate_sweep_times_target_loss_on_training_loss(tmp_path):
    surrogate = {**SMALL["set"], "learning": "surrogate", "rounds": 4}
    spec = {**SMALL, "target_accuracy": None, "target_loss": 2.0, "set": surrogate}
    result = run_sweep(load_sweep(write_sweep(tmp_path / "s.toml", spec)), tmp_path / "out")
    table = pd.read_csv(tmp_path / "out" / "sweep.csv")
    assert table["final_accuracy"].isna().all() and (table["target_metric"] == "train_loss").all()
    for _, row in table.iterrows():
        rounds = pd.read_csv(tmp_path / "out" / "runs" / row["run"] / "rounds.csv")
        hit = rounds[rounds["train_loss"] <= 2.0].iloc[0]
        assert (row["target_round"], row["sim_time_to_target_s"], row["energy_to_target_j"]) == (
            hit["round"], hit["sim_time_s"], hit["energy_cum_j"]
        )
    assert 'id="edgefl-train-loss-vs-time"' in result.html_path.read_text(encoding="utf-8")


@pytest.mark.slow
def test_rerun_skips_finished_runs_and_rebuilds_table(local_sweep, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(local_sweep, out)
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*")}
    # a new target reuses every run: only the table changes
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", target_accuracy=None, target_loss=1.55))
    events = []
    result = run_sweep(sweep, out, executor=LocalExecutor(jobs=1), progress=events.append)
    assert result.ran == () and result.skipped == tuple(IDS)
    assert [e.status for e in events] == ["skipped"] * 4
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/*")} == stamps
    table = pd.read_csv(out / "sweep.csv")
    for _, row in table.iterrows():
        losses = pd.read_csv(out / "runs" / row["run"] / "rounds.csv")["test_loss"]
        reached = losses[losses <= 1.55]
        assert (row["target_round"] == reached.index[0] + 1) if len(reached) else math.isnan(row["target_round"])
    # a run without a complete summary is redone, the others are not
    (out / "runs" / IDS[1] / "summary.json").unlink()
    result = run_sweep(sweep, out, executor=LocalExecutor(jobs=1))
    assert result.ran == (IDS[1],) and set(result.skipped) == set(IDS) - {IDS[1]}
    assert without_wall_clock(out / "runs" / IDS[1] / "rounds.csv").equals(
        without_wall_clock(local_sweep / "runs" / IDS[1] / "rounds.csv")
    )


@pytest.mark.slow
def test_finished_run_of_another_scenario_is_not_reused(local_sweep, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(local_sweep, out)
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", set={**SMALL["set"], "rounds": 4}))
    with pytest.raises(SweepError, match=r"holds a finished run of a different scenario") as info:
        run_sweep(sweep, out)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_ctrl_c_keeps_finished_runs_and_resumes(tmp_path):
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", seeds=[0], grid={"channel.bandwidth_mhz": [0.5, 2.0]}))

    def stop_after_first(event):
        if event.status == "done":
            raise KeyboardInterrupt

    with pytest.raises(SweepInterrupted) as info:
        run_sweep(sweep, tmp_path / "out", progress=stop_after_first)
    assert (info.value.finished, info.value.total) == (1, 2)
    assert not (tmp_path / "out" / "sweep.csv").exists()
    result = run_sweep(sweep, tmp_path / "out")
    assert result.skipped == ("bandwidth_mhz=0.5-seed0",) and result.ran == ("bandwidth_mhz=2.0-seed0",)


@pytest.mark.slow
def test_failed_run_is_reported_and_others_kept(tmp_path, monkeypatch):
    import edgefl.sweep.executors as executors

    real = executors.compute_run

    def flaky(scenario_toml, threads=1):
        if "bandwidth_hz = 2000000.0" in scenario_toml:
            raise RuntimeError("boom\nsecond line")
        return real(scenario_toml, threads)

    monkeypatch.setattr(executors, "compute_run", flaky)
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", seeds=[0], set={**SMALL["set"], "rounds": 1}))
    failed = r"1 of 2 runs failed \(first: bandwidth_mhz=2\.0-seed0: RuntimeError: boom second line\)"
    with pytest.raises(SweepError, match=failed):
        run_sweep(sweep, tmp_path / "out")
    assert (tmp_path / "out" / "runs" / "bandwidth_mhz=0.5-seed0" / "summary.json").is_file()
    assert not (tmp_path / "out" / "sweep.csv").exists()


@pytest.mark.slow
def test_cli_runs_and_resumes(local_sweep, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(local_sweep, out)
    (out / "sweep.csv").unlink()
    result = invoke(str(write_sweep(tmp_path / "s.toml")), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert f"table: {out / 'sweep.csv'}" in result.stdout and "ran 0, skipped 4" in result.stdout
    progress = result.stderr.strip().splitlines()
    assert progress[0] == f"sweep small: 4 runs -> {out}"
    assert progress[1:] == [f"[{i}/4] {run_id}: finished earlier, skipped" for i, run_id in enumerate(IDS, 1)]
    assert without_wall_clock(out / "sweep.csv").equals(without_wall_clock(local_sweep / "sweep.csv"))


# ------------------------------------------------------------------------------------- Ray


def test_ray_missing_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(SweepError, match=r"pip install 'edgefl\[ray\]'") as info:
        make_executor("ray")
    assert "\n" not in str(info.value)
    result = invoke(str(write_sweep(tmp_path / "s.toml")), "--executor", "ray", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --executor ray needs Ray, which is not installed; install it with: pip install 'edgefl[ray]'"
    ]
    assert not (tmp_path / "out").exists()


_DRIVER = """
import sys
import typer
from edgefl.cli.sweep import register

app = typer.Typer()

@app.callback()
def _root():
    pass

register(app)
if __name__ == "__main__":
    app()
"""


@pytest.mark.slow
def test_ray_sweep_matches_local(local_sweep, tmp_path):
    """Acceptance: the test starts a local 2-CPU Ray cluster (bound to 127.0.0.1); `edgefl sweep --executor ray
    --address` joins it from another process and runs the 4-run sweep; its sweep.csv (and every rounds.csv)
    equals the local executor's apart from wall-clock columns. The cluster stops when the test's executor exits."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    t0 = time.perf_counter()
    with make_executor("ray", jobs=2):  # no address, not connected: starts a local cluster
        print(f"Ray cluster start: {time.perf_counter() - t0:.1f} s")
        assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
        assert ray.cluster_resources()["CPU"] == 2
        with make_executor("ray"):  # already connected: uses that cluster and leaves it running
            pass
        assert ray.is_initialized()
        address = ray.get_runtime_context().gcs_address
        assert address.startswith("127.0.0.1:")
        driver = tmp_path / "driver.py"
        driver.write_text(textwrap.dedent(_DRIVER), encoding="utf-8")
        out = tmp_path / "ray"
        t1 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(driver), "sweep", str(write_sweep(tmp_path / "s.toml")), "--executor", "ray",
             "--address", address, "--out", str(out)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        print(f"Ray sweep (4 runs, 2 CPUs, driver process included): {time.perf_counter() - t1:.1f} s")
        assert proc.returncode == 0, proc.stderr
        assert ray.is_initialized()  # the CLI joined the cluster; it did not shut it down
        t2 = time.perf_counter()
    assert not ray.is_initialized()  # the executor started it, so the executor stopped it
    print(f"Ray cluster stop: {time.perf_counter() - t2:.1f} s")
    assert "ran 4, skipped 0" in proc.stdout
    assert sorted(line.split()[1].rstrip(":") for line in proc.stderr.splitlines() if line.startswith("[")) == IDS
    ray_table, local_table = without_wall_clock(out / "sweep.csv"), without_wall_clock(local_sweep / "sweep.csv")
    assert list(ray_table.columns) == list(local_table.columns)
    pd.testing.assert_frame_equal(ray_table, local_table)
    for run_id in IDS:
        pd.testing.assert_frame_equal(
            without_wall_clock(out / "runs" / run_id / "rounds.csv"),
            without_wall_clock(local_sweep / "runs" / run_id / "rounds.csv"),
        )
