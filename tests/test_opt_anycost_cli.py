"""`edgefl optimize anycost` (edgefl/cli/opt_anycost.py) on fresh Typer apps: JSON equals the library's
closed form, the table renders, bad CSVs and settings give one `error:` line and exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from edgefl.cli.opt_anycost import CSV_COLUMNS, register
from optimizers.anycost import AnycostDevices, solve_anycost

ROWS = [
    # samples, eps, f_min_hz, f_max_hz, e_max_j, rate_bps, p_tx_w
    (1000, 1e-27, 1e8, 2e9, 3.0, 2e5, 0.1),  # paper's regime
    (10, 1e-27, 1e8, 2e9, 3.0, 2e5, 0.1),  # alpha = 1
    (1000, 1e-27, 1e8, 2e9, 3.0, 1e8, 0.1),  # beta = beta_max
    (100000, 1e-30, 1e8, 2e9, 3.0, 2e5, 0.1),  # infeasible: latency
]
SETTINGS = ["--t-max-s", "10", "--cycles-per-sample", "1e7", "--update-bits", "53.23e6"]


@pytest.fixture()
def app(command_app) -> typer.Typer:
    return command_app(register)


def write_csv(path, rows=ROWS, header=",".join(CSV_COLUMNS)):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n", encoding="utf-8")
    return path


def invoke(app, *args):
    return CliRunner().invoke(app, ["optimize", "anycost", *args])


def library(rows=ROWS, **settings):
    cols = np.array(rows, dtype=float).T
    dev = AnycostDevices(**dict(zip(CSV_COLUMNS, cols)))
    return solve_anycost(dev, **{"t_max_s": 10.0, "cycles_per_sample": 1e7, "update_bits": 53.23e6, **settings})


def test_json_matches_library(app, tmp_path):
    result = invoke(app, "--devices", str(write_csv(tmp_path / "d.csv")), *SETTINGS, "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    sol = library()
    assert len(out) == len(ROWS)
    for i, rec in enumerate(out):
        assert set(rec) == {"alpha", "beta", "f_hz", "gain", "feasible", "reason", "t_s", "e_j"}
        assert (rec["alpha"], rec["beta"], rec["f_hz"], rec["gain"]) == (
            sol.alpha[i], sol.beta[i], sol.f_hz[i], sol.gain[i]
        )
        assert rec["feasible"] is bool(sol.feasible[i])
        assert rec["reason"] == (str(sol.reason[i]) or None)
    assert [r["reason"] for r in out] == [None, None, None, "latency"]
    assert out[1]["alpha"] == 1.0


def test_json_with_options_and_column_order(app, tmp_path):
    order = list(reversed(CSV_COLUMNS)) + ["name"]
    rows = [tuple(reversed(r)) + (f"dev{i}",) for i, r in enumerate(ROWS)]
    path = write_csv(tmp_path / "d.csv", rows, header=" , ".join(order))
    args = ["--devices", str(path), *SETTINGS, "--epochs", "2", "--alpha-min", "0.5", "--beta-max", "0.1", "--json"]
    result = invoke(app, *args)
    assert result.exit_code == 0, result.stderr
    sol = library(epochs=2, alpha_min=0.5, beta_max=0.1)
    assert [r["gain"] for r in json.loads(result.stdout)] == sol.gain.tolist()


def test_table(app, tmp_path):
    result = invoke(app, "--devices", str(write_csv(tmp_path / "d.csv")), *SETTINGS)
    assert result.exit_code == 0, result.stderr
    assert "AnycostFL" in result.stdout and "no (latency)" in result.stdout
    assert "1.0000" in result.stdout  # alpha = 1 row


HEADER = ",".join(CSV_COLUMNS) + "\n"
GOOD = "1000,1e-27,1e8,2e9,3,2e5,0.1\n"


@pytest.mark.parametrize(
    "content, message",
    [
        ("samples,eps,f_min_hz,f_max_hz,e_max_j,rate_bps\n1,1,1,1,1,1\n", "missing column(s) p_tx_w"),
        (HEADER + "1000,abc,1e8,2e9,3,2e5,0.1\n", "line 2: eps='abc': must be a number"),
        (HEADER + "1000,1e-27,1e8,2e9,3,2e5\n", "line 2: p_tx_w='': must be a number"),
        (HEADER + GOOD + "\n1,1e-27,1e8,2e9,3,nan,0.1\n", "line 4: rate_bps='nan': must be finite"),
        (HEADER + GOOD + "1,1e-27,1e8,2e9,3,-1,0.1\n", "line 3: rate_bps=-1.0: must be finite and > 0"),
        (HEADER + "1000,1e-27,3e9,2e9,3,2e5,0.1\n", "line 2: f_min_hz=3000000000.0: must be <= f_max_hz[0]=2000000000.0"),
        (HEADER, "no device rows"),
        ("", "empty file"),
    ],
)
def test_bad_csv_is_one_line_exit_2(app, tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    result = invoke(app, "--devices", str(path), *SETTINGS, "--json")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --devices ") and message in lines[0], lines
    assert "Traceback" not in result.stderr + result.stdout and result.stdout == ""


def test_missing_file_is_one_line_exit_2(app, tmp_path):
    result = invoke(app, "--devices", str(tmp_path / "nope.csv"), *SETTINGS)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot read" in result.stderr


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--t-max-s", "-1", "error: --t-max-s=-1.0: must be finite and > 0"),
        ("--alpha-min", "0", "error: --alpha-min=0.0: must be in (0, 1]"),
        ("--beta-max", "1.5", "error: --beta-max=1.5: must be in (0, 1]"),
    ],
)
def test_bad_setting_is_one_line_exit_2(app, tmp_path, option, value, message):
    args = ["--devices", str(write_csv(tmp_path / "d.csv")), *SETTINGS, option, value]
    if option in args[:-2]:
        i = args.index(option)
        args = args[:i] + args[i + 2 :]
    result = invoke(app, *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
