"""CLI commands of edgefl/cli/opt_luo.py on fresh Typer apps: `optimize ke`, `estimate a0b0`,
`optimize ccfedavg`, their JSON output and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from edgefl.cli.opt_luo import register
from optimizers.cost_effective import LuoCostParams, solve_acs

KE_ARGS = ["optimize", "ke", "--n", "100", "--tp-s", "0.1", "--tm-s", "2", "--ep-j", "1e-3", "--em-j", "2e-2",
           "--a0-over-b0", "3140", "--gamma", "0.5"]  # fmt: skip


@pytest.fixture()
def app(command_app) -> typer.Typer:
    return command_app(register)


def invoke(app, args):
    return CliRunner().invoke(app, args)


def test_ke_json(app):
    result = invoke(app, [*KE_ARGS, "--json"])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"K", "E", "K_cont", "E_cont", "objective", "K_gp", "E_gp", "objective_gp"}
    expected = solve_acs(
        LuoCostParams(n=100, t_p_s=0.1, t_m_s=2.0, e_p_j=1e-3, e_m_j=2e-2, gamma=0.5, a0_over_b0=3140.0)
    )
    assert (out["K"], out["E"]) == (expected.k, expected.e)
    assert isinstance(out["K"], int) and isinstance(out["E"], int)
    assert out["objective_gp"] == pytest.approx(expected.objective_cont, rel=1e-6)
    assert out["objective"] >= out["objective_gp"] * (1 - 1e-9)


def test_ke_table(app):
    result = invoke(app, KE_ARGS)
    assert result.exit_code == 0, result.stderr
    assert "Algorithm 2 (integer)" in result.stdout and "geometric program" in result.stdout


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--tp-s", "-0.1", "error: --tp-s=-0.1: must be > 0"),
        ("--gamma", "1.5", "error: --gamma=1.5: must be in [0, 1]"),
        ("--n", "0", "error: --n=0: must be >= 1"),
    ],
)
def test_ke_bad_input_is_one_line_exit_2(app, option, value, message):
    args = list(KE_ARGS)
    args[args.index(option) + 1] = value
    result = invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert "Traceback" not in result.stderr + result.stdout


def test_a0b0_json(app, tmp_path):
    csv_path = tmp_path / "samples.csv"
    # exact round counts of bound (15) for A0/B0 = 500 (N = 100, gaps 1 and 0.5)
    rows = ["K,E,R_a,R_b"]
    for k, e in [(10, 10), (20, 40), (50, 5), (100, 30)]:
        f = 1 + (100 - k) / (k * 99)
        h = (500 + f * e * e) / e
        rows.append(f"{k},{e},{h!r},{2 * h!r}")
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = invoke(app, ["estimate", "a0b0", "--n", "100", "--samples", str(csv_path), "--json"])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"a0_over_b0", "pairs"}
    assert out["a0_over_b0"] == pytest.approx(500.0, rel=1e-10)
    assert out["pairs"] == 6
    text = invoke(app, ["estimate", "a0b0", "--n", "100", "--samples", str(csv_path)])
    assert text.exit_code == 0 and "a0_over_b0" in text.stdout


@pytest.mark.parametrize(
    "content, message",
    [
        ("K,E,R_a\n1,2,3\n", "missing column(s) R_b"),
        ("K,E,R_a,R_b\n10,5,abc,20\n20,10,5,9\n", "line 2: R_a='abc': must be a number"),
        ("", "empty file"),
        ("K,E,R_a,R_b\n10,5,10,20\n10,5,11,22\n", "same design"),
        ("K,E,R_a,R_b\n10,5,10,20\n", "at least 2"),
    ],
)
def test_a0b0_bad_csv_is_one_line_exit_2(app, tmp_path, content, message):
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text(content, encoding="utf-8")
    result = invoke(app, ["estimate", "a0b0", "--n", "100", "--samples", str(csv_path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_a0b0_missing_file(app, tmp_path):
    result = invoke(app, ["estimate", "a0b0", "--n", "100", "--samples", str(tmp_path / "nope.csv")])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --samples") and "cannot read" in result.stderr


def test_ccfedavg_json_and_table(app):
    result = invoke(app, ["optimize", "ccfedavg", "--n", "100", "--levels", "4", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == [1.0] * 25 + [0.5] * 25 + [0.25] * 25 + [0.125] * 25
    table = invoke(app, ["optimize", "ccfedavg", "--n", "10", "--levels", "3"])
    assert table.exit_code == 0
    assert "0..3" in table.stdout and "0.25" in table.stdout


def test_ccfedavg_bad_levels(app):
    result = invoke(app, ["optimize", "ccfedavg", "--n", "10", "--levels", "0"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --levels=0: must be >= 1"
