"""Time and energy to a target accuracy for a single run (train.target_accuracy, `edgefl run --target`): the
summary checked by hand against rounds.csv, the CLI's summary line, the report's target mark and header, the
overlay's, and the one-line errors of the options."""

from __future__ import annotations

import csv
import html
import json
import math

import pandas as pd
import pytest
from cli_process import edgefl

from edgefl.output import comparison as overlay
from edgefl.output import report
from edgefl.output.report_header import run_settings
from edgefl.run.runner import resolve_info
from edgefl.run.load import load_scenario
from edgefl.output.targets import run_target_summary, time_to_target

TARGET = 0.5  # quickstart reaches it after a few rounds of its 8 here (round 1 is ~20%)


def first_crossing(rounds_csv, target: float) -> dict | None:
    """The first row of rounds.csv, in file order, whose test accuracy is >= target, read by hand."""
    with open(rounds_csv, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row["test_accuracy"] != "" and float(row["test_accuracy"]) >= target:
                return row
    return None


@pytest.fixture(scope="module")
def target_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("target") / "run"
    p = edgefl("run", "quickstart", "--set", "rounds=8", "--target", str(TARGET), "--out", str(out))
    assert p.returncode == 0, p.stderr
    return out, p


@pytest.mark.slow
def test_summary_has_time_and_energy_to_target_checked_against_rounds_csv(target_run):
    out, _ = target_run
    summary = json.loads((out / "summary.json").read_text())
    hit = first_crossing(out / "rounds.csv", TARGET)
    assert hit is not None and int(hit["round"]) > 1  # the case is a real crossing, not the first row
    assert summary["target_accuracy"] == TARGET
    assert summary["rounds_to_target"] == int(hit["round"])
    assert summary["time_to_target_s"] == float(hit["sim_time_s"])  # the row's values, exactly
    assert summary["energy_to_target_j"] == float(hit["energy_cum_j"])


@pytest.mark.slow
def test_cli_line_says_where_the_target_was_reached(target_run):
    out, p = target_run
    summary = json.loads((out / "summary.json").read_text())
    assert f"target 50.00% reached at round {summary['rounds_to_target']} " in p.stdout
    assert f"{summary['time_to_target_s']:.4g} s" in p.stdout


@pytest.mark.slow
def test_scenario_toml_records_the_target(target_run):
    import tomllib

    out, _ = target_run
    assert tomllib.loads((out / "scenario.toml").read_text())["train"]["target_accuracy"] == TARGET


@pytest.mark.slow
def test_unreached_target_is_null_and_said_so(tmp_path):
    out = tmp_path / "run"
    p = edgefl("run", "quickstart", "--set", "rounds=2", "--set", "train.target_accuracy=0.99", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert first_crossing(out / "rounds.csv", 0.99) is None
    summary = json.loads((out / "summary.json").read_text())
    assert [summary[k] for k in ("rounds_to_target", "time_to_target_s", "energy_to_target_j")] == [None] * 3
    assert "target 99.00% not reached" in p.stdout


def test_no_target_gives_null_keys():
    rounds = pd.DataFrame({"round": [1, 2], "sim_time_s": [1.0, 2.0], "energy_cum_j": [1.0, 2.0],
                           "test_accuracy": [0.5, 0.9]})  # fmt: skip
    assert run_target_summary(None, rounds) == dict.fromkeys(
        ("target_accuracy", "rounds_to_target", "time_to_target_s", "energy_to_target_j")
    )


def test_unevaluated_rounds_never_reach_the_target():
    # eval_every = 2: round 3 is not evaluated; the target is first met at round 4, not at round 3
    rounds = pd.DataFrame({"round": [1, 2, 3, 4], "sim_time_s": [1.0, 2.0, 3.0, 4.0],
                           "energy_cum_j": [10.0, 20.0, 30.0, 40.0],
                           "test_accuracy": [0.1, 0.6, math.nan, 0.85]})  # fmt: skip
    assert run_target_summary(0.8, rounds) == {
        "target_accuracy": 0.8, "rounds_to_target": 4, "time_to_target_s": 4.0, "energy_to_target_j": 40.0
    }  # fmt: skip
    assert time_to_target(rounds.iloc[::-1], None)["target_metric"] == ""


@pytest.mark.slow
def test_report_marks_the_crossing_and_lists_the_settings(target_run):
    out, _ = target_run
    rounds, hit = pd.read_csv(out / "rounds.csv"), first_crossing(out / "rounds.csv", TARGET)
    figures = report.build_figures(rounds, pd.read_csv(out / "device_rounds.csv"), target_accuracy=TARGET)
    for key, x_col in (("accuracy_vs_time", "sim_time_s"), ("accuracy_vs_energy", "energy_cum_j"),
                       ("accuracy_vs_round", "round")):  # fmt: skip
        fig = figures[key]
        assert [shape.y0 for shape in fig.layout.shapes] == [TARGET]  # the dashed target line
        (mark,) = [t for t in fig.data if t.name == "target reached"]
        assert list(mark.x) == [float(hit[x_col])] and list(mark.y) == [float(hit["test_accuracy"])]
    page = (out / "report.html").read_text()
    scenario = load_scenario(out / "scenario.toml")
    for label, value in run_settings(resolve_info(scenario)):
        assert f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>" in page
    settings = dict(run_settings(resolve_info(scenario)))
    assert (settings["method"], settings["devices (N)"], settings["devices per round (K)"]) == ("fedavg", "20", "5")
    assert settings["uplink bandwidth"] == "1 MHz per device" and settings["round policy"] == "wait_all"
    assert (settings["cost mode"], settings["learning"], settings["data"], settings["seed"]) == (
        "physical", "torch", "digits, iid partition", "0"
    )  # fmt: skip
    assert f"reached at round {int(hit['round'])}: {float(hit['sim_time_s']):.4g} s" in page


def test_reports_of_two_runs_at_different_bandwidths_differ_in_the_header():
    a = dict(run_settings(resolve_info(load_scenario("quickstart", ["channel.bandwidth_mhz=2"]))))
    wide = ["channel.bandwidth_mhz=20", "round.policy='deadline'", "round.deadline_s=0.5"]
    b = dict(run_settings(resolve_info(load_scenario("quickstart", wide))))
    assert (a["uplink bandwidth"], b["uplink bandwidth"]) == ("2 MHz per device", "20 MHz per device")
    assert b["round policy"] == "deadline 0.5 s, late devices finish"


@pytest.mark.slow
def test_overlay_draws_each_runs_crossing(target_run, tmp_path):
    import shutil

    out, _ = target_run
    other = tmp_path / "other"
    shutil.copytree(out, other)
    summary = json.loads((other / "summary.json").read_text())
    (other / "summary.json").write_text(json.dumps({**summary, "seed": 7, "target_accuracy": 0.99}))
    hit = first_crossing(out / "rounds.csv", TARGET)
    figures = overlay.overlay_figures([overlay.read_run(out), overlay.read_run(other)])
    fig = figures["accuracy_vs_round"]
    assert sorted(shape.y0 for shape in fig.layout.shapes) == [TARGET, 0.99]
    (mark,) = [t for t in fig.data if t.name == "target reached"]  # only the run that reached its target
    assert list(mark.x) == [int(hit["round"])]
    notes = [a.text for a in fig.layout.annotations]
    assert "target 99% (not reached)" in notes and "target 50%" in notes
