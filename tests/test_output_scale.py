"""Results at any scale: the device table as Parquet (written, read back exactly, resumed, plotted and swept), a
report that stays small at thousands of devices per round and says what it sampled or aggregated, and result
files that get the user's umask."""

from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from edgefl.output import comparison as overlay
from edgefl.output import report
from edgefl.io import atomic_write_text
from edgefl.output.device_rounds_file import read_device_rounds
from edgefl.output.report_scale import CURVE_POINTS, ENERGY_GROUPS, TIMELINE_DEVICES
from edgefl.output.results import WALL_CLOCK_COLUMNS, RunResult, write_run
from edgefl.run.runner import RunInterrupted, resolve_info, run_scenario
from edgefl.run.load import load_scenario

SMALL = ["fleet.n_devices=10", "method.clients_per_round=4", "model.name=logreg", "rounds=5", "checkpoint_every=2"]
PARQUET = 'output.format="parquet"'
REPORT_LIMIT_BYTES = 10 * 1024**2  # report.html stays under 10 MB whatever the fleet
# a surrogate AnycostFL run with a thousand devices in every round (a few seconds)
LARGE = ["fleet.n_devices=2000", "method.clients_per_round=1000", "rounds=2"]


def _stop_at(round_: int):
    def progress(row: dict) -> None:
        if row["round"] == round_:
            raise KeyboardInterrupt  # what Ctrl-C raises, at the end of a round

    return progress


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("parquet")
    result = run_scenario(load_scenario("quickstart", [*SMALL, PARQUET]))
    return result, write_run(result, work / "run")


@pytest.mark.slow
def test_parquet_run_writes_the_device_table_as_parquet_and_reads_back_exactly(parquet_run):
    result, run_dir = parquet_run
    assert (run_dir / "device_rounds.parquet").is_file() and not (run_dir / "device_rounds.csv").exists()
    back = read_device_rounds(run_dir)
    pd.testing.assert_frame_equal(back, result.device_rounds.reset_index(drop=True))  # every value and dtype


@pytest.mark.slow
def test_csv_and_parquet_hold_the_same_table(parquet_run, tmp_path):
    result, _ = parquet_run
    sc = load_scenario("quickstart", SMALL)
    as_csv = RunResult(scenario=sc, info=resolve_info(sc), rounds=result.rounds, device_rounds=result.device_rounds)
    run_dir = write_run(as_csv, tmp_path / "csv", report=False)
    assert (run_dir / "device_rounds.csv").is_file() and not (run_dir / "device_rounds.parquet").exists()
    from_csv = read_device_rounds(run_dir)
    numeric = [c for c in result.device_rounds.columns if result.device_rounds[c].dtype.kind in "biuf"]
    pd.testing.assert_frame_equal(from_csv[numeric], result.device_rounds[numeric], check_dtype=False)


@pytest.mark.slow
def test_edgefl_plot_reads_a_parquet_run(parquet_run, tmp_path):
    result, run_dir = parquet_run
    run = overlay.read_run(run_dir)
    assert list(run.rounds["round"]) == list(result.rounds["round"])
    assert overlay.write_overlay([run_dir], tmp_path / "o.html").is_file()


@pytest.mark.slow
def test_resume_of_a_parquet_run_gives_the_uninterrupted_tables(parquet_run, tmp_path):
    from edgefl.cli import app

    result, _ = parquet_run
    scenario = load_scenario("quickstart", [*SMALL, PARQUET])
    run_dir = tmp_path / "run"
    atomic_write_text(run_dir / "scenario.toml", (parquet_run[1] / "scenario.toml").read_text())
    with pytest.raises(RunInterrupted) as stop:
        run_scenario(scenario, progress=_stop_at(3), checkpoint_dir=run_dir / "checkpoint")
    write_run(stop.value.result, run_dir)  # as `edgefl run` does on Ctrl-C
    assert len(read_device_rounds(run_dir)["round"].unique()) == 3
    cli = CliRunner().invoke(app, ["run", "--resume", str(run_dir), "--quiet"])
    assert cli.exit_code == 0, cli.output
    resumed = read_device_rounds(run_dir)
    pd.testing.assert_frame_equal(resumed, result.device_rounds.reset_index(drop=True))
    drop = list(WALL_CLOCK_COLUMNS)
    pd.testing.assert_frame_equal(pd.read_csv(run_dir / "rounds.csv").drop(columns=drop),
                                  pd.read_csv(parquet_run[1] / "rounds.csv").drop(columns=drop))  # fmt: skip


@pytest.mark.slow
def test_a_sweep_of_parquet_runs(tmp_path):
    import tomli_w

    from edgefl.sweep import load_sweep, run_sweep

    spec = {"base": "quickstart", "seeds": [0], "target_accuracy": 0.3, "run_reports": False,
            "set": {"fleet.n_devices": 10, "method.clients_per_round": 4, "model.name": "logreg", "rounds": 3,
                    "output.format": "parquet"}}  # fmt: skip
    (tmp_path / "s.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    done = run_sweep(load_sweep(tmp_path / "s.toml"), tmp_path / "out")
    (run_id,) = done.ran
    run_dir = tmp_path / "out" / "runs" / run_id
    rounds = pd.read_csv(run_dir / "rounds.csv")
    assert len(read_device_rounds(run_dir)) > 0 and not (run_dir / "device_rounds.csv").exists()
    reached = rounds[rounds["test_accuracy"] >= 0.3]
    row = done.table.iloc[0]
    if reached.empty:
        assert pd.isna(row["target_round"])
    else:
        assert row["target_round"] == reached["round"].iloc[0]


@pytest.fixture(scope="module")
def large_run():
    return run_scenario(load_scenario("anycostfl_surrogate_10k", LARGE))


@pytest.mark.slow
def test_report_samples_the_timeline_and_says_so(large_run):
    dr = large_run.device_rounds
    fig = report.build_figures(large_run.rounds, dr)["timeline"]
    shown = {y for trace in fig.data for y in trace.y}
    round_ = report.default_timeline_round(large_run.rounds, dr)
    in_round = int((dr["round"] == round_).sum())
    assert in_round == 1000 and len(shown) == TIMELINE_DEVICES
    straggler = report.find_straggler(dr, round_)
    assert f"device {straggler}" in shown  # the straggler is always drawn
    assert f"{TIMELINE_DEVICES} of 1,000 devices shown" in fig.layout.title.text


@pytest.mark.slow
def test_report_aggregates_per_device_energy_into_groups_and_says_so(large_run):
    dr = large_run.device_rounds
    fig = report.build_figures(large_run.rounds, dr)["device_energy"]
    compute = next(t for t in fig.data if t.name == "compute")
    assert len(compute.x) == ENERGY_GROUPS
    # by hand: each device's total over the run (devices with a row), sorted; 100 groups, sizes differing by at
    # most one with the larger first (n = 100 q + r: r groups of q + 1, then q)
    per_device = dr.groupby("device")[["e_cmp_j", "e_com_j"]].sum()
    n = len(per_device)
    assert n > 2 * ENERGY_GROUPS and f"{n:,} devices sorted by energy in 100 groups" in fig.layout.title.text
    order = np.argsort((per_device["e_cmp_j"] + per_device["e_com_j"]).to_numpy(), kind="stable")
    q, r = divmod(n, ENERGY_GROUPS)
    first, last = order[: q + (r > 0)], order[n - q :]
    assert compute.y[0] == pytest.approx(per_device.iloc[first]["e_cmp_j"].mean(), rel=1e-12)
    assert compute.y[-1] == pytest.approx(per_device.iloc[last]["e_cmp_j"].mean(), rel=1e-12)


@pytest.mark.slow
def test_report_stays_small_at_thousands_of_devices(large_run, tmp_path):
    run_dir = write_run(large_run, tmp_path / "large")
    size = (run_dir / "report.html").stat().st_size
    assert size < REPORT_LIMIT_BYTES


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_result_files_get_the_users_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = atomic_write_text(tmp_path / "f.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


@pytest.mark.slow
def test_run_directory_files_get_the_users_umask(parquet_run, tmp_path):
    result, _ = parquet_run
    old = os.umask(0o022)
    try:
        run_dir = write_run(result, tmp_path / "run")
    finally:
        os.umask(old)
    for name in ("scenario.toml", "rounds.csv", "device_rounds.parquet", "summary.json", "report.html"):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o644, name


def test_accuracy_curves_of_many_evaluations_are_thinned_keeping_the_last_and_the_crossing():
    n = 9_001  # e.g. an asynchronous run's server updates
    rounds = pd.DataFrame({"round": np.arange(1, n + 1), "sim_time_s": np.arange(1, n + 1) * 0.5,
                           "round_time_s": 0.5, "energy_cum_j": np.arange(1, n + 1) * 2.0,
                           "test_accuracy": np.where(np.arange(1, n + 1) >= 4_567, 0.9, 0.5)})  # fmt: skip
    fig = report.build_figures(rounds, pd.DataFrame(), target_accuracy=0.8)["accuracy_vs_round"]
    curve = next(t for t in fig.data if t.name == "test accuracy")
    step = -(-n // CURVE_POINTS)  # ceil: every step-th evaluation
    assert step == 5 and f"every {step}th of 9,001 evaluations shown" in fig.layout.title.text
    kept = list(curve.x)
    assert kept == sorted({*range(1, n + 1, step), n, 4_567})  # every 5th from the first, the last, the crossing
    (mark,) = [t for t in fig.data if t.name == "target reached"]
    assert list(mark.x) == [4_567]
