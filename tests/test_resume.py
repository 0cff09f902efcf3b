"""Checkpoint and resume: a run stopped after a checkpoint (Ctrl-C or SIGKILL) and resumed writes the same
tables as an uninterrupted run, apart from the host wall-clock column."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from edgefl.run.checkpoint import checkpoint_round
from edgefl.errors import SimulationError
from edgefl.output.results import WALL_CLOCK_COLUMNS
from edgefl.run.runner import RunInterrupted, run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART, SLOW_FLEET

SMALL = ["fleet.n_devices=10", "method.clients_per_round=4", "model.name=logreg", "rounds=9", "checkpoint_every=2"]

pytestmark = pytest.mark.slow  # whole runs, interrupted and resumed (some in processes)


def _csv(df: pd.DataFrame) -> str:
    return df.drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in df.columns]).to_csv(index=False)


def _stop_at(round_: int):
    def progress(row: dict) -> None:
        if row["round"] == round_:
            raise KeyboardInterrupt  # what Ctrl-C raises, at the end of a round

    return progress


@pytest.mark.parametrize(
    "extra",
    [
        [],  # torch: global model, radio positions under mobility, all rows
        # SLOW_FLEET: the deadlines leave stragglers only on slow CPUs, not on phones running a 5k-parameter MLP
        [*SLOW_FLEET, "round.policy=deadline", "round.deadline_s=0.004", "channel.mobility=random_walk"],
        [*SLOW_FLEET, "learning=surrogate", "round.policy=deadline", "round.deadline_s=200"],
        # late devices still uploading at the checkpoint, devices coming and going, per-device downloads
        ["learning=surrogate", "round.policy=deadline", "round.deadline_s=12", "surrogate.train_flops_per_sample=2e6",
         "fleet.availability.kind=markov", "fleet.availability.online_mean_s=[20.0, 80.0]",
         "fleet.availability.offline_mean_s=2.0", "channel.downlink.bandwidth_mhz=0.5",
         "channel.bandwidth_mode=split"],
    ],
    ids=["torch", "torch-deadline-walk", "surrogate", "surrogate-markov-in-flight"],
)
def test_interrupted_and_resumed_equals_uninterrupted(tmp_path, extra):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SMALL + extra)
    full = run_scenario(sc)
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(RunInterrupted) as stop:
        run_scenario(sc, checkpoint_dir=ckpt, progress=_stop_at(5))
    assert len(stop.value.result.rounds) == 5
    assert checkpoint_round(ckpt) == 5  # Ctrl-C saved the last completed round, not only round 4
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.rounds) == _csv(full.rounds)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)
    dr = full.device_rounds
    if "round.policy=deadline" in extra:  # a late job of round 5 still ran when the checkpoint was taken
        end5 = full.rounds.loc[full.rounds["round"] == 5, "sim_time_s"].item()
        assert (dr[dr["round"] <= 5]["t_end_s"] > end5).any()


def test_a_pools_residuals_are_checkpointed_from_its_workers_and_resume_exactly(tmp_path):
    """STC on 2 worker processes keeps its residuals in the workers (``executors.Held``); each checkpoint fetches
    them (and the workers keep them for the next round), and a run stopped at round 5 and resumed on a fresh pool
    writes the tables of an uninterrupted inline run."""
    sets = PAPER_QUICKSTART + SMALL + ["method.name=stc", "round.policy=deadline", "round.deadline_s=2.0",
                                       "model.hidden=[16]", "model.name=mlp"]  # fmt: skip
    full = run_scenario(load_scenario("quickstart", sets))
    sc = load_scenario("quickstart", [*sets, "train.executor=processes", "train.workers=2"])
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=ckpt, progress=_stop_at(5))
    assert checkpoint_round(ckpt) == 5
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.rounds) == _csv(full.rounds)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)


def test_resume_twice_and_without_checkpoint(tmp_path):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SMALL)
    full = run_scenario(sc)
    ckpt = tmp_path / "ck"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=ckpt, progress=_stop_at(3))
    with pytest.raises(RunInterrupted):  # a resumed run interrupted again appends new segments
        run_scenario(sc, checkpoint_dir=ckpt, resume=True, progress=_stop_at(7))
    assert checkpoint_round(ckpt) == 7
    assert sorted(p.name for p in ckpt.glob("*.pt")) == ["model-0000007.pt"]  # older models cleaned up
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)
    fresh = run_scenario(sc, checkpoint_dir=tmp_path / "none", resume=True)  # nothing saved yet: from round 1
    assert _csv(fresh.rounds) == _csv(full.rounds)


def test_checkpoint_of_another_scenario_is_refused(tmp_path):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SMALL)
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=tmp_path, progress=_stop_at(2))
    other = load_scenario("quickstart", PAPER_QUICKSTART + SMALL + ["seed=1"])
    with pytest.raises(SimulationError, match="different scenario"):
        run_scenario(other, checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize(
    "overrides",
    [
        ["fleet.n_devices=10", "method.clients_per_round=4", "rounds=40", "checkpoint_every=3"],
        # FedBuff (C = 5, M = 2) on a logistic regression, devices coming and going: every checkpoint holds
        # jobs in flight, trained updates in the buffer and the models they downloaded
        ["method.name=fedbuff", "method.clients_per_round=5", "method.fedbuff.buffer_size=2", "fleet.n_devices=12",
         "rounds=40", "checkpoint_every=3", "model.name=logreg", "fleet.availability.kind=markov",
         "fleet.availability.online_mean_s=[0.005, 0.02]", "fleet.availability.offline_mean_s=0.01"],
    ],
    ids=["sync", "fedbuff-in-flight"],
)  # fmt: skip
def test_sigkill_after_checkpoint_then_resume_is_identical(tmp_path, overrides):
    """A real process killed with SIGKILL right after a checkpoint, resumed with `edgefl run --resume`."""
    sets = [a for o in overrides for a in ("--set", o)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cli = [sys.executable, "-m", "edgefl", "run", "quickstart", *sets, "--quiet"]
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    subprocess.run([*cli, "--out", str(ref)], check=True, capture_output=True, env=env)

    proc = subprocess.Popen([*cli, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    meta = killed / "checkpoint" / "meta.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if meta.is_file() and json.loads(meta.read_text())["round"] >= 6:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed; make it longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    saved = checkpoint_round(killed / "checkpoint")
    assert 6 <= saved < 40 and not (killed / "summary.json").exists()
    if "method.name=fedbuff" in overrides:  # jobs were running at the checkpoint the resumed run starts from
        meta = json.loads((killed / "checkpoint" / "meta.json").read_text())
        assert meta["async"]["in_flight"] >= 1 and meta["clock"]["chains"]

    out = subprocess.run([sys.executable, "-m", "edgefl", "run", "--resume", str(killed), "--quiet"],
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    for table in ("rounds.csv", "device_rounds.csv"):
        a, b = pd.read_csv(ref / table), pd.read_csv(killed / table)
        assert _csv(a) == _csv(b), table
    assert json.loads((killed / "summary.json").read_text())["complete"] is True
    assert not (killed / "checkpoint").exists()  # removed once the run is complete

    again = subprocess.run([sys.executable, "-m", "edgefl", "run", "--resume", str(killed)],
                           capture_output=True, text=True, env=env)  # fmt: skip
    assert again.returncode == 2 and again.stderr.strip().startswith("error:") and "already complete" in again.stderr


ASYNC = ["method.name=fedbuff", "method.clients_per_round=5", "method.fedbuff.buffer_size=2", "rounds=12",
         "checkpoint_every=3", "fleet.n_devices=12"]  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        # surrogate, devices coming and going (jobs lost offline), per-device downloads, shared band
        # (jobs of 22-53 s, online periods of 50-200 s on average)
        ["learning=surrogate", "surrogate.train_flops_per_sample=2e6", "fleet.availability.kind=markov",
         "fleet.availability.online_mean_s=[50.0, 200.0]", "fleet.availability.offline_mean_s=30.0",
         "channel.downlink.bandwidth_mhz=0.5", "channel.bandwidth_mode=split"],
        # torch: trained updates and the model versions they downloaded cross the checkpoint (jobs of 2-6 ms)
        ["model.name=logreg", "fleet.availability.kind=markov", "fleet.availability.online_mean_s=[0.005, 0.02]",
         "fleet.availability.offline_mean_s=0.01"],
    ],
    ids=["fedbuff-surrogate-markov", "fedbuff-torch-markov"],
)
def test_async_resume_with_jobs_in_flight_equals_uninterrupted(tmp_path, extra):
    """FedBuff (C = 5, M = 2) stopped after server update 5 with jobs in flight and updates in its buffer, then
    resumed: the same tables as an uninterrupted run."""
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ASYNC + extra)
    full = run_scenario(sc)
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=ckpt, progress=_stop_at(5))
    assert checkpoint_round(ckpt) == 5
    meta = json.loads((ckpt / "meta.json").read_text())
    assert meta["async"]["in_flight"] >= 1 and meta["clock"]["chains"]  # jobs were running at the checkpoint
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.rounds) == _csv(full.rounds)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)
    assert (full.device_rounds["reason"] == "offline").any()  # some job was lost to a device going offline


def test_finished_run_removes_its_checkpoint_unless_kept(tmp_path):
    """`edgefl run` removes a finished run's checkpoint/ (a run stopped early keeps it, test_cli.py), unless
    ``output.keep_checkpoint = true``."""
    from cli_process import edgefl

    sets = ["--set", "rounds=3", "--set", "checkpoint_every=1", "--set", "model.name=logreg", "--quiet"]
    done = edgefl("run", "quickstart", *sets, "--out", str(tmp_path / "done"))
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "done" / "checkpoint").exists() and (tmp_path / "done" / "rounds.csv").is_file()
    kept = edgefl("run", "quickstart", *sets, "--set", "output.keep_checkpoint=true", "--out", str(tmp_path / "kept"))
    assert kept.returncode == 0, kept.stderr
    assert checkpoint_round(tmp_path / "kept" / "checkpoint") == 2  # the last one taken (after round 2 of 3)
