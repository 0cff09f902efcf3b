"""`edgefl plot` (edgefl/output/comparison.py, edgefl/cli/plot.py) on run directories with hand-made tables.

Run "alpha": written by ``edgefl.output.results.write_run`` (quickstart scenario renamed, method fedavg, seed 3);
4 rounds, round 2 not evaluated, so its traces hold rounds 1, 3 and 4. Run "beta": written by hand like a run
directory (method anycostfl, seed 7), 3 rounds, all evaluated, with values that are not binary fractions
(0.1 + 0.2 = 0.30000000000000004) to check that the figures hold exactly the floats of the CSV.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from edgefl.cli.plot import register
from edgefl.errors import EdgeflError
from edgefl.output.comparison import (
    FIGURE_KEYS,
    OverlayError,
    overlay_figures,
    overlay_page,
    read_run,
    run_labels,
    write_overlay,
)
from edgefl.output.results import DEVICE_COLUMNS, ROUND_COLUMNS, RunResult, write_run
from edgefl.run.runner import resolve_info
from edgefl.run.load import load_scenario

NAN = math.nan
X_COLUMNS = {"accuracy_vs_time": "sim_time_s", "accuracy_vs_energy": "energy_cum_j", "accuracy_vs_round": "round"}

ALPHA = {
    "round": [1, 2, 3, 4],
    "sim_time_s": [0.5, 1.25, 2.0, 3.5],
    "energy_cum_j": [0.25, 0.75, 1.5, 2.0],
    "test_accuracy": [0.125, NAN, 0.375, 0.5],
    "test_loss": [2.0, NAN, 1.5, 1.25],
    "train_loss": [2.25, 2.0, 1.75, 1.5],
}
BETA = {
    "round": [1, 2, 3],
    "sim_time_s": [0.1, 0.1 + 0.2, 1 / 3],
    "energy_cum_j": [0.7, 1.1, 2.2 + 0.1],
    "test_accuracy": [0.3, 0.6 + 0.1, 0.9],
    "test_loss": [1.9, 1.1, 0.7],
    "train_loss": [2.1, 1.3, 0.9],
}


def rounds_table(columns: dict) -> pd.DataFrame:
    """A rounds table with every column of rounds.csv (the ones the overlay ignores filled with zeros)."""
    n = len(columns["round"])
    full = {col: columns.get(col, [0.0] * n) for col in ROUND_COLUMNS}
    full["round_time_s"] = [b - a for a, b in zip([0.0, *columns["sim_time_s"]], columns["sim_time_s"])]
    return pd.DataFrame(full)


def write_alpha(path: Path) -> Path:
    """Run "alpha" through the real writer (no report: the overlay does not read it)."""
    sc = load_scenario("quickstart", ["rounds=4", "seed=3", "name=alpha"])
    result = RunResult(scenario=sc, info=resolve_info(sc), rounds=rounds_table(ALPHA),
                       device_rounds=pd.DataFrame(columns=DEVICE_COLUMNS))
    return write_run(result, path, report=False)


def write_by_hand(path: Path, columns: dict, *, name="beta", method="anycostfl", seed=7, complete=True) -> Path:
    path.mkdir(parents=True)
    (path / "rounds.csv").write_text(pd.DataFrame(columns).to_csv(index=False), encoding="utf-8")
    summary = {"name": name, "method": method, "seed": seed, "complete": complete}
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return path


def evaluated(columns: dict, metric: str = "test_accuracy") -> dict[str, list]:
    keep = [i for i, v in enumerate(columns[metric]) if not math.isnan(v)]
    return {col: [values[i] for i in keep] for col, values in columns.items()}


@pytest.fixture()
def two_runs(tmp_path) -> list[Path]:
    return [write_alpha(tmp_path / "alpha-run"), write_by_hand(tmp_path / "beta-run", BETA)]


# --------------------------------------------------------------------------------------------- figures


def test_one_trace_per_run_with_exactly_the_csv_data(two_runs):
    runs = [read_run(p) for p in two_runs]
    assert [(r.name, r.method, r.seed, r.complete) for r in runs] == [
        ("alpha", "fedavg", 3, True),
        ("beta", "anycostfl", 7, True),
    ]
    figures = overlay_figures(runs)
    assert tuple(figures) == FIGURE_KEYS
    for key, fig in figures.items():
        assert [t.name for t in fig.data] == ["alpha (fedavg, seed 3)", "beta (anycostfl, seed 7)"]
        for trace, columns in zip(fig.data, (ALPHA, BETA)):
            want = evaluated(columns)
            assert list(trace.x) == want[X_COLUMNS[key]]  # exact: the floats as written in the CSV
            assert list(trace.y) == want["test_accuracy"]
        assert fig.layout.yaxis.title.text == "test accuracy [%]"
        assert fig.layout.showlegend is True
    assert list(figures["accuracy_vs_round"].data[0].x) == [1, 3, 4]  # round 2 was not evaluated
    assert figures["accuracy_vs_time"].layout.title.text == "Test accuracy vs simulated time"
    assert figures["accuracy_vs_energy"].layout.xaxis.title.text == "cumulative energy, all devices [J]"


def test_colliding_labels_are_made_distinct(tmp_path):
    a = write_by_hand(tmp_path / "a", BETA)
    b = write_by_hand(tmp_path / "b", BETA)
    c = write_by_hand(tmp_path / "c", BETA, seed=8)
    runs = [read_run(p) for p in (a, b, c)]
    assert run_labels(runs) == [
        "beta (anycostfl, seed 7) [a]",
        "beta (anycostfl, seed 7) [b]",
        "beta (anycostfl, seed 8)",
    ]
    twice = [read_run(a), read_run(a)]
    assert run_labels(twice) == ["beta (anycostfl, seed 7) [a] #1", "beta (anycostfl, seed 7) [a] #2"]
    assert [t.name for t in overlay_figures(twice)["accuracy_vs_round"].data] == run_labels(twice)


def surrogate(columns: dict, *, drop: tuple[str, ...]) -> dict:
    """A run without a test accuracy (as learning = "surrogate" may write): listed columns dropped or empty."""
    out = dict(columns)
    out["test_accuracy"] = [NAN] * len(columns["round"])
    for col in drop:
        out.pop(col)
    return out


def test_loss_is_plotted_when_no_run_has_accuracy(tmp_path):
    a = write_by_hand(tmp_path / "a", surrogate(ALPHA, drop=()), name="a")  # accuracy column empty
    b = write_by_hand(tmp_path / "b", surrogate(BETA, drop=("test_accuracy",)), name="b")  # no accuracy column
    figures = overlay_figures([read_run(a), read_run(b)])
    for key, fig in figures.items():
        assert fig.layout.yaxis.title.text == "test loss"
        assert fig.layout.title.text.startswith("Test loss vs ")
        for trace, columns in zip(fig.data, (ALPHA, BETA)):
            want = evaluated(columns, "test_loss")
            assert (list(trace.x), list(trace.y)) == (want[X_COLUMNS[key]], want["test_loss"])

    c = write_by_hand(tmp_path / "c", surrogate(BETA, drop=("test_accuracy", "test_loss")), name="c")
    fig = overlay_figures([read_run(c)])["accuracy_vs_time"]
    assert fig.layout.yaxis.title.text == "train loss"
    assert list(fig.data[0].y) == BETA["train_loss"]
    assert "No run has a test accuracy, so the figures show the train loss." in overlay_page([read_run(c)])


def test_accuracy_wins_and_a_run_without_it_keeps_an_empty_trace(two_runs, tmp_path):
    lossy = write_by_hand(tmp_path / "lossy", surrogate(BETA, drop=()), name="lossy")
    fig = overlay_figures([read_run(two_runs[0]), read_run(lossy)])["accuracy_vs_time"]
    assert fig.layout.yaxis.title.text == "test accuracy [%]"
    assert [len(t.x) for t in fig.data] == [3, 0]


def test_no_values_at_all_is_an_error(tmp_path):
    empty = surrogate(BETA, drop=())
    empty["test_loss"] = empty["train_loss"] = [NAN] * 3
    with pytest.raises(OverlayError, match="none of the runs has a value of test_accuracy, test_loss, train_loss"):
        overlay_figures([read_run(write_by_hand(tmp_path / "r", empty))])
    with pytest.raises(OverlayError, match="no runs to overlay"):
        overlay_figures([])


# --------------------------------------------------------------------------------------------- bad run dirs


def _break(tmp_path: Path, how: str) -> Path:
    run = write_by_hand(tmp_path / "run", BETA)
    if how == "missing":
        return tmp_path / "nope"
    if how == "file":
        return run / "rounds.csv"
    if how == "empty dir":
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty"
    if how == "no summary":
        (run / "summary.json").unlink()
    elif how == "no rounds":
        (run / "rounds.csv").unlink()
    elif how == "bad json":
        (run / "summary.json").write_text("{not json", encoding="utf-8")
    elif how == "no seed":
        (run / "summary.json").write_text('{"name": "x", "method": "fedavg"}', encoding="utf-8")
    elif how == "no column":
        (run / "rounds.csv").write_text("round,energy_cum_j,test_accuracy\n1,0.5,0.5\n", encoding="utf-8")
    elif how == "no metric":
        (run / "rounds.csv").write_text("round,sim_time_s,energy_cum_j\n1,0.5,0.5\n", encoding="utf-8")
    elif how == "text value":
        (run / "rounds.csv").write_text("round,sim_time_s,energy_cum_j,test_accuracy\n1,0.5,0.5,0.1\n2,soon,1,0.2\n")
    elif how == "infinite":
        (run / "rounds.csv").write_text("round,sim_time_s,energy_cum_j,test_accuracy\n1,0.5,0.5,0.1\n2,1,1,inf\n")
    elif how == "no round":
        (run / "rounds.csv").write_text("round,sim_time_s,energy_cum_j,test_accuracy\n,0.5,0.5,0.1\n")
    elif how == "half round":
        (run / "rounds.csv").write_text("round,sim_time_s,energy_cum_j,test_accuracy\n1.5,0.5,0.5,0.1\n")
    elif how == "empty csv":
        (run / "rounds.csv").write_text("", encoding="utf-8")
    return run


@pytest.mark.parametrize(
    "how, message",
    [
        ("missing", r"run directory '.*nope': no such directory; expected a run directory written by `edgefl run`"),
        ("file", r"run directory '.*rounds\.csv': not a directory"),
        ("empty dir", r"run directory '.*empty': not an edgefl run directory \(no summary\.json, no rounds\.csv\)"),
        ("no summary", r"run directory '.*run': summary\.json is missing"),
        ("no rounds", r"run directory '.*run': rounds\.csv is missing"),
        ("bad json", r"'.*summary\.json': cannot read the run summary"),
        ("no seed", r"'.*summary\.json': missing key\(s\) seed"),
        ("no column", r"'.*rounds\.csv': missing column\(s\) sim_time_s"),
        ("no metric", r"'.*rounds\.csv': no column test_accuracy or test_loss or train_loss"),
        ("text value", r"'.*rounds\.csv' data row 2: sim_time_s='soon': must be a finite number"),
        ("infinite", r"'.*rounds\.csv' data row 2: test_accuracy=inf: must be a finite number"),
        ("no round", r"'.*rounds\.csv' data row 1: round=\(empty\): must be a finite number"),
        ("half round", r"'.*rounds\.csv' data row 1: round=1.5: must be an integer"),
        ("empty csv", r"'.*rounds\.csv': empty file"),
    ],
)
def test_bad_run_dir_names_the_path(tmp_path, how, message):
    with pytest.raises(OverlayError, match=message) as info:
        read_run(_break(tmp_path, how))
    assert isinstance(info.value, EdgeflError) and "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------- page and CLI


def test_write_overlay_page(two_runs, tmp_path):
    out = write_overlay(two_runs, tmp_path / "sub" / "o.html", title="A <b> test")
    page = out.read_text(encoding="utf-8")
    assert out == tmp_path / "sub" / "o.html"
    assert "<title>A &lt;b&gt; test</title>" in page
    assert page.count("plotly.js v") == 1  # inlined once
    for key in FIGURE_KEYS:
        assert f'id="edgefl-{key.replace("_", "-")}"' in page
    assert "alpha (fedavg, seed 3)" in page and "beta (anycostfl, seed 7)" in page
    assert "<title>edgefl overlay of 2 runs</title>" in write_overlay(two_runs, tmp_path / "d.html").read_text()


def test_write_overlay_writes_nothing_on_a_bad_dir(two_runs, tmp_path):
    with pytest.raises(OverlayError, match="no such directory"):
        write_overlay([*two_runs, tmp_path / "nope"], tmp_path / "o.html")
    assert not (tmp_path / "o.html").exists()
    with pytest.raises(OverlayError, match="is a directory"):
        write_overlay(two_runs, tmp_path)


@pytest.fixture()
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _root() -> None:  # a group, so that `plot` stays a sub-command as in the real app
        pass

    register(root)
    return root


def test_cli_writes_the_file_and_prints_its_path(app, two_runs, tmp_path, monkeypatch):
    out = tmp_path / "x.html"
    result = CliRunner().invoke(app, ["plot", *map(str, two_runs), "--out", str(out), "--title", "mine"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == str(out)
    assert "<title>mine</title>" in out.read_text(encoding="utf-8")

    monkeypatch.chdir(tmp_path)  # default --out: overlay.html in the current directory
    result = CliRunner().invoke(app, ["plot", str(two_runs[1])])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "overlay.html" and (tmp_path / "overlay.html").is_file()


def test_cli_bad_dir_is_one_line_exit_2(app, two_runs, tmp_path):
    result = CliRunner().invoke(app, ["plot", str(two_runs[0]), str(tmp_path), "--out", str(tmp_path / "o.html")])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: run directory "), lines
    assert "not an edgefl run directory" in lines[0]
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert not (tmp_path / "o.html").exists()


def test_cli_needs_a_run_dir(app):
    result = CliRunner().invoke(app, ["plot"])
    assert result.exit_code == 2 and "Missing argument" in result.stderr
