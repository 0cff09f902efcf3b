"""Torch threads of a run (`train.threads`, `edgefl run --threads`): the same seed and the same thread count give
identical tables, the run directory records the count, and the count is restored after the run."""

from __future__ import annotations

import io
import tomllib

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from edgefl.cli import app
from edgefl.learning.threads import torch_threads
from edgefl.output.results import WALL_CLOCK_COLUMNS
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario

SMALL = ["rounds=2", "checkpoint_every=0"]  # quickstart's MLP on digits, 2 rounds


def tables(threads: int) -> tuple[str, str]:
    """rounds and device_rounds of a quickstart run with ``threads`` torch threads, as CSV text (wall times out)."""
    with torch_threads(threads):
        result = run_scenario(load_scenario("quickstart", [*SMALL, f"train.threads={threads}"]))
    drop = lambda df: df.drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in df.columns])  # noqa: E731
    return drop(result.rounds).to_csv(index=False), drop(result.device_rounds).to_csv(index=False)


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_same_seed_and_threads_give_identical_tables(threads):
    first, second = tables(threads), tables(threads)
    assert first[0] == second[0] and first[1] == second[1]
    assert len(pd.read_csv(io.StringIO(first[0]))) == 2


@pytest.mark.slow
def test_cli_threads_recorded_in_the_run_directory_and_restored(tmp_path):
    before = torch.get_num_threads()
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "quickstart", *[a for s in SMALL for a in ("--set", s)], "--threads", "2",
                                      "--quiet", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert tomllib.loads((out / "scenario.toml").read_text())["train"]["threads"] == 2
    assert torch.get_num_threads() == before


def test_default_is_one_thread():
    assert load_scenario("quickstart").train.threads == 1
