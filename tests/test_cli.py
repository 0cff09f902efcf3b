"""The command line as a user runs it (a real subprocess): outputs, exit codes and one-line errors."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pandas as pd
import pytest
from cli_process import edgefl

from scenarios import preset_path

pytestmark = pytest.mark.slow  # each test runs `python -m edgefl` in a process


def test_run_writes_run_directory(tmp_path):
    out = tmp_path / "run"
    p = edgefl("run", "quickstart", "--set", "rounds=3", "--set", "channel.bandwidth_hz=2e6", "--out", str(out), "--seed", "3")
    assert p.returncode == 0, p.stderr
    assert f"run directory: {out}" in p.stdout
    for name in ("scenario.toml", "rounds.csv", "device_rounds.csv", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    resolved = tomllib.loads((out / "scenario.toml").read_text())
    assert resolved["seed"] == 3 and resolved["rounds"] == 3 and resolved["channel"]["bandwidth_hz"] == 2e6
    assert len(pd.read_csv(out / "rounds.csv")) == 3
    assert "\x1b[" not in p.stdout  # no progress bar when stdout is not a terminal


def test_unknown_scenario(tmp_path):
    p = edgefl("run", "nope", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "quickstart" in p.stderr and "Traceback" not in p.stderr


def test_scenarios_list_and_show():
    from scenarios import list_presets, preset_description

    p = edgefl("scenarios", "list")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and [line.split()[0] for line in lines] == list_presets()
    for line, name in zip(lines, list_presets()):  # one line each: name, then its one-line description
        assert line.split(None, 1)[1] == preset_description(name)
    bare = edgefl("scenarios")  # `edgefl scenarios` alone lists them too (issue #3)
    assert bare.returncode == 0 and bare.stdout == p.stdout
    shown = edgefl("scenarios", "show", "quickstart")
    assert shown.returncode == 0
    assert tomllib.loads(shown.stdout) == tomllib.loads(preset_path("quickstart").read_text())


def test_ctrl_c_keeps_completed_rounds(tmp_path):
    import json
    import signal
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgefl", "run", "quickstart", "--set", "rounds=100000", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a shell that started the test suite in the background leaves SIGINT ignored, and children inherit
        # that; Ctrl-C in a terminal is delivered with the default disposition, so restore it for the child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    meta = out / "checkpoint" / "meta.json"
    deadline = time.monotonic() + 120
    while not meta.is_file() and time.monotonic() < deadline:  # at least one checkpoint (10 rounds) first
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()  # never leave the run behind if the assertion below fails
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted after" in stdout
    rounds = pd.read_csv(out / "rounds.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False and summary["rounds"] == len(rounds)
    assert list(rounds["round"]) == list(range(1, len(rounds) + 1))  # no half round
    devices = pd.read_csv(out / "device_rounds.csv")
    assert devices["round"].max() == len(rounds) >= 10
    # resumable from the last completed round when Ctrl-C fell between rounds; from the last periodic
    # checkpoint (every 10 rounds) when it fell inside a round, whose clock had moved on (issue 35)
    saved = json.loads(meta.read_text())["round"]
    assert saved == len(rounds) or (saved % 10 == 0 and len(rounds) - 10 < saved < len(rounds))
    assert f"edgefl run --resume {out}" in stdout
    assert saved == len(rounds) or f"(from round {saved + 1}: the last checkpoint)" in stdout


def test_resume_refuses_other_arguments_and_non_run_dirs(tmp_path):
    mixed = edgefl("run", "--resume", str(tmp_path), "--seed", "3")
    assert mixed.returncode == 2 and mixed.stderr.strip().count("\n") == 0
    assert "give no SCENARIO, --set, --out, --seed or --data-dir" in mixed.stderr
    empty = edgefl("run", "--resume", str(tmp_path))
    assert empty.returncode == 2 and "no scenario.toml there" in empty.stderr and "Traceback" not in empty.stderr
