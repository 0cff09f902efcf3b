"""New-user mistakes on the command line (``edgefl run``, ``edgefl design ke``): one line and exit 2 with nothing
written (or a warning and exit 0 where the run can still go), and progress on stderr without a terminal."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_process import edgefl
from typer.testing import CliRunner

from edgefl.cli import app
from fleets import PAPER_QUICKSTART, SLOW_FLEET
from test_design_ke import _scenario_file
from test_preflight import _best_times_s, _quickstart

RUN = ["run", "quickstart", "--out", "{out}"]
KE = ["design", "ke", "{luo}"]


@pytest.mark.parametrize(
    "args, expected",
    [
        ([*RUN, "--set", "fleet.f_max_ghz=1e9"], "fleet.f_max_ghz=1e+09: outside [0.001, 10] GHz"),
        ([*RUN, "--set", "fleet.tx_power_w=1000"], "fleet.tx_power_w=1000: outside [1e-08, 1.99526] W"),
        ([*RUN, "--set", "fleet.tx_power_dbm=90"], "fleet.tx_power_dbm=90: outside [-50, 33] dBm"),
        ([*RUN, "--set", "fleet.f_max_ghz=[1,2,3,4,5,6,7,8,9,10]"], "fleet.f_max_ghz=[1, 2, 3, 4, ...]: give a number"),
        ([*RUN, "--set", "chanel.bandwidth_mhz=2"], "chanel: unknown key; did you mean channel?"),
        ([*RUN, "--set", "channel.bandwidth_mhz=-5"], "channel.bandwidth_mhz=-5: outside [0.001, 2160] MHz"),
        ([*RUN, "--set", "channel.bandwidth_hz=0"], "channel.bandwidth_hz"),
        ([*RUN, "--set", "method.clients_per_round=50"], "clients_per_round"),
        ([*RUN, "--set", "fleet.budget.value_j=-1"], "value_j"),
        ([*RUN, "--set", "channel.cell_radius_m=1"], "min_distance_m"),
        ([*RUN, "--set", "nonsense=1"], "nonsense"),
        ([*RUN, "--set", "round.policy=deadline", "--set", "round.deadline_s=1e-6"],
         "no device can ever finish a job under round.deadline_s=1e-06 s, even at its best: the fastest"),
        ([*RUN, "--set", "round.policy=deadline", "--set", "round.deadline_s=1e-6", "--set", "method.name=anycostfl",
          "--set", "fleet.budget.kind=fixed"], "anycostfl plans no device (latency"),
        ([*RUN, "--set", "fleet.budget.kind=fixed", "--set", "fleet.budget.value_j=1e-4"],
         "no device can ever finish a job under fleet.budget (fixed), even at its best"),
        ([*RUN, "--set", "data.dataset=mnist", "--data-dir", "{empty}"], "MNIST not found"),
        ([*RUN, "--set", "fleet.availability.kind=trace", "--set", "fleet.availability.trace_path='{empty}/trace.csv'"],
         "cannot read the trace"),
        ([*RUN, "--target", "1.5"], "error: --target 1.5: must be a test accuracy in (0, 1]"),
        ([*RUN, "--target", "0"], "error: --target 0.0: must be a test accuracy in (0, 1]"),
        ([*RUN, "--threads", "0"], "error: --threads 0: must be in [1, 1024]"),
        ([*RUN, "--set", "train.target_accuracy=2"], "train.target_accuracy=2"),
        ([*KE, "--samples", "10"], "error: --samples '10'"),
        ([*KE, "--rule", "best"], "error: --rule='best'"),
        ([*KE, "--refine", "9"], "error: --refine=9"),
        ([*KE, "--gamma", "1.5"], "error: --gamma=1.5"),
        ([*KE, "--samples", "5x4,5x4"], "two distinct"),
        ([*KE, "--samples", "2x1,5x4", "--f-a", "0.1", "--f-b", "0.25"], "F_a > F_b"),
        ([*KE, "--set", "fleet.n_devices=0"], "fleet.n_devices"),
    ],
    ids=["f_max_ghz=1e9", "tx_power_w=1000", "tx_power_dbm=90", "list-for-scalar", "chanel", "bandwidth_mhz=-5",
         "bandwidth_hz=0", "K>N", "budget<0", "cell<min_distance", "unknown-key", "deadline-fedavg",
         "deadline-anycostfl", "budget-below-cheapest", "missing-dataset", "missing-trace", "target=1.5", "target=0",
         "threads=0", "target_accuracy=2", "ke-samples=10", "ke-rule=best", "ke-refine=9", "ke-gamma=1.5",
         "ke-same-samples", "ke-f_a<f_b", "ke-n_devices=0"],
)
def test_mistake_one_line_exit_2_nothing_written(tmp_path, args, expected):
    """``edgefl ARGS``: exit 2 and one ``error:`` line holding ``expected``, keys echoed as the user wrote them (no
    SI key the user did not write), and no run directory."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "run"
    places = {"{empty}": str(empty), "{out}": str(out)}
    if "{luo}" in args:
        places["{luo}"] = _scenario_file(tmp_path)
    for key, value in places.items():
        args = [a.replace(key, value) for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr
    written = " ".join(args)
    assert all(si not in result.stderr for si in ("bandwidth_hz", "f_max_hz") if si not in written)
    assert not out.exists()


@pytest.mark.slow
def test_some_devices_meet_the_deadline_warning_and_exit_0(tmp_path):
    """Deadline 8.8 ms on slow CPUs: 2 of 20 devices can at their best (tests/test_preflight.py's hand formula); the
    run goes on, warns on stderr and in summary.json, and, since no update then arrives, says so at the end."""
    out = tmp_path / "run"
    # SLOW_FLEET: phones running the 5k-parameter MLP all finish within 5.8 ms, so none would miss this deadline
    assert int(np.sum(_best_times_s(_quickstart(*SLOW_FLEET)) <= 0.0088)) == 2
    slow = [a for s in (*PAPER_QUICKSTART, *SLOW_FLEET) for a in ("--set", s)]  # the hand formula's physics
    p = CliRunner().invoke(app, ["run", "quickstart", *slow, "--set", "rounds=3", "--set", "round.policy=deadline",
                                 "--set", "round.deadline_s=0.0088", "--out", str(out), "--quiet"])  # fmt: skip
    assert p.exit_code == 0, p.output
    warnings = json.loads((out / "summary.json").read_text())["warnings"]
    assert warnings[0].startswith("only 2 of 20 devices can finish a job under round.deadline_s=0.0088 s")
    assert f"warning: {warnings[0]}" in p.stderr
    arrived = int(pd.read_csv(out / "rounds.csv")["arrived"].sum())
    no_arrival = [w for w in warnings if w.startswith("no update arrived")]
    assert (arrived == 0) == bool(no_arrival)
    if no_arrival:
        assert f"warning: {no_arrival[0]}" in p.stderr
        summary_line = next(line for line in p.stdout.splitlines() if line.startswith("quickstart: 3 rounds"))
        assert summary_line.endswith(f"; warning: {no_arrival[0]}")  # not a silent "0.00 s"


@pytest.mark.slow
def test_progress_without_a_terminal_is_one_line_per_tenth(tmp_path):
    p = edgefl("run", "quickstart", "--set", "rounds=20", "--out", str(tmp_path / "run"))  # stdout: a pipe
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("round ")]
    # 20 rounds: a line at rounds 2, 4, ..., 20 (every 10%)
    assert [line.split()[1] for line in lines] == [f"{r}/20" for r in range(2, 21, 2)]
    assert lines[-1].startswith("round 20/20 (100%): sim ")
