"""Resume is exact wherever the interruption falls (issue 35): for several small scenarios, a run is interrupted
at every one of a set of points counted through the run (SimPy events, training jobs, the aggregation, the
evaluation, a checkpoint's file writes, the progress call between rounds), not only at checkpoint boundaries,
then resumed; both tables equal the uninterrupted run's, byte for byte once the wall-clock column is dropped.

The interruption is a ``KeyboardInterrupt`` (what Ctrl-C raises) from a hook wrapped around the run's own
parts; the runs are real (real SimPy, real torch training). A few real signals to a real ``edgefl run``
process follow (SIGINT, SIGTERM; SIGKILL at any instant: ``tests/test_resume.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

import edgefl.run.checkpoint as checkpoint_module
from edgefl.errors import SimulationError
from edgefl.output.results import WALL_CLOCK_COLUMNS
from edgefl.run.checkpoint import checkpoint_round
from edgefl.run.load import load_scenario
from edgefl.run.runner import RunInterrupted, Simulation, prepare, run_scenario
from fleets import PAPER_QUICKSTART, SLOW_FLEET

pytestmark = pytest.mark.slow  # each case starts whole runs

_SMALL = ["fleet.n_devices=8", "method.clients_per_round=3", "model.name=logreg", "rounds=6", "checkpoint_every=2"]
_SURROGATE = ["learning=surrogate", "surrogate.train_flops_per_sample=2e6"]
SCENARIOS = {
    # torch (real training), every device waited for
    "sync-wait_all": _SMALL,
    # torch, a 4 ms deadline on slow CPUs: late devices still computing into the next rounds; devices walk
    "deadline-late-finish": [*_SMALL, *SLOW_FLEET, "round.policy=deadline", "round.deadline_s=0.004",
                             "round.late=finish", "channel.mobility=random_walk"],
    # twice K started, the first K kept, the others finish their jobs busy across rounds
    "over_select-late-finish": [*_SMALL, *_SURROGATE, *SLOW_FLEET, "round.policy=over_select",
                                "round.over_select_fraction=1.0", "round.late=finish"],
    # devices coming and going (jobs lost offline), late jobs, per-device downloads over a shared band
    "markov-availability": [*_SMALL, *_SURROGATE, "round.policy=deadline", "round.deadline_s=12",
                            "fleet.availability.kind=markov", "fleet.availability.online_mean_s=[20.0, 80.0]",
                            "fleet.availability.offline_mean_s=2.0", "channel.downlink.bandwidth_mhz=0.5",
                            "channel.bandwidth_mode=split"],
    # the realistic physics (issue #33) in a 1.5 km cell: downloads, fading, and devices with no link sitting out
    "realistic-no-link": [*_SMALL, *_SURROGATE, "physics=realistic", "channel.cell_radius_m=1500",
                          "round.policy=deadline", "round.deadline_s=60"],
    # TDMA with late uploads holding the channel across rounds, and uploads lost to packet errors then sent again
    "tdma-packet-errors": [*_SMALL, *_SURROGATE, *SLOW_FLEET, "round.policy=over_select",
                           "round.over_select_fraction=1.0", "round.late=finish", "channel.access=tdma",
                           "channel.packet_errors.waterfall=30", "channel.packet_errors.retransmissions=1"],
    # FedBuff, torch: trained updates in the buffer and jobs in flight at every checkpoint, devices going offline
    "fedbuff-in-flight": ["method.name=fedbuff", "method.clients_per_round=4", "method.fedbuff.buffer_size=2",
                          "fleet.n_devices=10", "model.name=logreg", "rounds=8", "checkpoint_every=3",
                          "fleet.availability.kind=markov", "fleet.availability.online_mean_s=[0.005, 0.02]",
                          "fleet.availability.offline_mean_s=0.01"],
    # FedBuff, surrogate: jobs in flight whose uploads packet errors lose or make send again
    "fedbuff-packet-errors": ["method.name=fedbuff", "method.clients_per_round=4", "method.fedbuff.buffer_size=2",
                              "fleet.n_devices=10", "rounds=8", "checkpoint_every=3", *_SURROGATE,
                              "channel.packet_errors.waterfall=30", "channel.packet_errors.retransmissions=1"],
}  # fmt: skip
TORCH_POINTS = 8
"""Interruption points per torch scenario (spread over the run, every kind of point included); a surrogate
scenario is interrupted at every point."""


def _csv(df: pd.DataFrame) -> str:
    return df.drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in df.columns]).to_csv(index=False)


class Interrupter:
    """Counts the points a run passes and raises ``KeyboardInterrupt`` at the ``at``-th (never if 0), or at the
    first point of a kind in a step (``at = (kind, step)``); ``trace`` holds each point's kind and step."""

    def __init__(self, at: int | tuple[str, int] = 0) -> None:
        self.at, self.trace, self.sim = at, [], None

    def point(self, kind: str) -> None:
        sim = self.sim
        self.trace.append((kind, sim.rounds_done + (0 if kind == "progress" else 1) if sim else 0))
        if len(self.trace) == self.at or self.trace[-1] == self.at:
            raise KeyboardInterrupt

    def wrap(self, obj, name: str, kind: str, *, after: bool = False) -> None:
        inner = getattr(obj, name)

        def hooked(*args, **kwargs):
            if not after:
                self.point(kind)
            out = inner(*args, **kwargs)
            if after:
                self.point(kind)
            return out

        setattr(obj, name, hooked)  # on this instance only

    def hook(self, sim: Simulation, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sim = sim
        run = sim.run
        self.wrap(run.clock.env, "step", "simpy-event", after=True)  # after each processed SimPy event
        for name in ("work", "advance", "server_step"):  # before the jobs' work, the aggregation, a server step
            self.wrap(run.learner, name, name)
        self.wrap(run.learner, "assess", "evaluate")  # before and after the evaluation
        self.wrap(run.learner, "assess", "evaluated", after=True)
        self.wrap(run.method, "client_update", "train-job")  # before each job trained alone ...
        self.wrap(run.method, "client_updates", "train-jobs")  # ... or with others
        for name in ("atomic_write_bytes", "atomic_write_text"):  # inside a checkpoint, before each file
            monkeypatch.setattr(checkpoint_module, name, _counted(self, getattr(checkpoint_module, name)))

    def progress(self, _row: dict) -> None:  # between two rounds (after the periodic checkpoint)
        self.point("progress")


def _counted(interrupter: Interrupter, write):
    def counted(*args, **kwargs):
        interrupter.point("checkpoint-write")
        return write(*args, **kwargs)

    return counted


def _interrupted(sc, ckpt: Path, at: int, monkeypatch: pytest.MonkeyPatch) -> Interrupter:
    """Run ``sc`` with checkpoints in ``ckpt``, interrupted at point ``at`` (0: never)."""
    stop = Interrupter(at)
    sim = prepare(sc)
    with monkeypatch.context() as mp:
        stop.hook(sim, mp)
        try:
            run_scenario(sc, checkpoint_dir=ckpt, progress=stop.progress, simulation=sim)
        except RunInterrupted as exc:
            assert at and len(stop.trace) >= at  # the save on Ctrl-C passes further points
            assert exc.resume_round == checkpoint_round(ckpt)
            assert len(exc.result.rounds) >= exc.resume_round
        else:
            assert not at, f"point {at} was never reached"
    return stop


def _points(trace: list[tuple[str, int]], surrogate: bool) -> list[int]:
    """Points to interrupt at (1-based): all of them for a cheap surrogate run, else ``TORCH_POINTS`` spread over
    the run with the first of each kind after round 1 (in a round that is not a checkpoint's)."""
    n = len(trace)
    if surrogate:
        return list(range(1, n + 1))
    spread = {round(1 + i * (n - 1) / (TORCH_POINTS - 1)) for i in range(TORCH_POINTS)}
    first: dict[str, int] = {}
    for i, (kind, step) in enumerate(trace, start=1):
        if step >= 3:
            first.setdefault(kind, i)
    return sorted(spread | set(first.values()))


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_resume_from_any_interruption_equals_uninterrupted(tmp_path, monkeypatch, name):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SCENARIOS[name])
    full = run_scenario(sc)
    if name == "realistic-no-link":  # the case it is there for: devices sitting a round out without a link
        assert full.device_rounds["reason"].str.startswith("no link").any()
    counting = _interrupted(sc, tmp_path / "all", 0, monkeypatch)  # the points of a whole run, and its checkpoints
    kinds = Counter(kind for kind, _ in counting.trace)
    assert kinds["simpy-event"] and kinds["progress"] == sc.rounds and kinds["checkpoint-write"]
    points = _points(counting.trace, sc.learning == "surrogate")
    mid_round = 0
    for at in points:
        ckpt = tmp_path / f"at-{at}"
        _interrupted(sc, ckpt, at, monkeypatch)
        kind, step = counting.trace[at - 1]
        mid_round += kind != "progress"
        where = f"{name}: interrupted at point {at} ({kind} of step {step}), resumed after {checkpoint_round(ckpt)}"
        resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
        assert _csv(resumed.rounds) == _csv(full.rounds), where
        assert _csv(resumed.device_rounds) == _csv(full.device_rounds), where
    assert mid_round >= len(points) // 2  # most points fall inside a step, not between steps
    print(f"{name}: {len(points)} interruption points of {len(counting.trace)}, all identical")


def test_resumed_run_interrupted_again_inside_a_round(tmp_path, monkeypatch):
    """Interrupted inside round 4 after a checkpoint at 3 (saved on a Ctrl-C between rounds), resumed and
    interrupted again inside round 5, resumed again: the uninterrupted tables."""
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SCENARIOS["markov-availability"])
    full = run_scenario(sc)
    trace = _interrupted(sc, tmp_path / "count", 0, monkeypatch).trace
    between_3_4 = trace.index(("progress", 3)) + 1
    ckpt = tmp_path / "ck"
    _interrupted(sc, ckpt, between_3_4, monkeypatch)
    assert checkpoint_round(ckpt) == 3
    stop = Interrupter()
    sim = prepare(sc)
    assert sim.restore(ckpt)  # before hooking: the restored clock is a new SimPy environment

    def progress(row: dict) -> None:
        stop.progress(row)
        if row["round"] == 4:
            stop.at = len(stop.trace) + 5  # five points into round 5

    with monkeypatch.context() as mp:
        stop.hook(sim, mp)
        with pytest.raises(RunInterrupted) as cut:
            run_scenario(sc, checkpoint_dir=ckpt, progress=progress, simulation=sim)
    assert stop.trace[-1][1] == 5 and stop.trace[-1][0] != "progress"
    assert len(cut.value.result.rounds) == 4 and cut.value.resume_round == 4
    assert checkpoint_round(ckpt) == 4  # the periodic checkpoint after round 4; round 5 was cut short
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.rounds) == _csv(full.rounds)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)


def test_a_round_cut_short_cannot_be_saved_or_continued(tmp_path, monkeypatch):
    """The parts of a round cut short are past the last round's rows: saving or stepping them is refused."""
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SCENARIOS["deadline-late-finish"])
    sim = prepare(sc)
    stop = Interrupter(("evaluate", 4))  # round 4 played on the clock, being evaluated
    with monkeypatch.context() as mp:
        stop.hook(sim, mp)
        with pytest.raises(KeyboardInterrupt):
            for r in range(1, sc.rounds + 1):
                sim.step(r)
    assert sim.rounds_done == 3 and not sim.at_boundary
    assert sim.run.clock.env.now > sim.state.sim_time_s  # the clock has played round 4
    with pytest.raises(SimulationError, match="round 4 was cut short"):
        sim.save(tmp_path / "ck")
    with pytest.raises(SimulationError, match="round 4 was cut short"):
        sim.step(4)
    assert not (tmp_path / "ck").exists()


def _meta(ckpt: Path) -> dict:
    return json.loads((ckpt / "meta.json").read_text())


@pytest.mark.parametrize(
    "spoil, message",
    [
        # what the old code wrote on a Ctrl-C inside round 4: the clock of round 4 with the rows of round 3
        (lambda m, d: m["clock"].update(clock_s=m["clock"]["clock_s"] + 0.5), "its clock stands at"),
        (lambda m, d: m.update(radio_round=m["radio_round"] + 1), "its radio stands at round 4"),
        (lambda m, d: m.update(edgefl="0.0.1+000000000000"), "written by edgefl 0.0.1"),
        (lambda m, d: m.update(format=1), "checkpoint of format 1"),
        (lambda m, d: (d / m["model"]).unlink(), "lacks model-0000003.pt"),
        (lambda m, d: (d / m["segments"][0]).unlink(), "lacks devices-0000001-0000002.npz"),
    ],
    ids=["clock-ahead", "radio-ahead", "other-edgefl", "old-format", "model-missing", "segment-missing"],
)
def test_a_checkpoint_that_cannot_resume_exactly_is_refused_in_one_line(tmp_path, spoil, message):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + SCENARIOS["deadline-late-finish"])

    def stop_after_3(row):
        if row["round"] == 3:
            raise KeyboardInterrupt

    ckpt = tmp_path / "ck"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=ckpt, progress=stop_after_3)
    meta = _meta(ckpt)
    spoil(meta, ckpt)
    (ckpt / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SimulationError, match=message) as refused:
        run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert "\n" not in str(refused.value) and "start the run again" in str(refused.value)


_LONG = [*PAPER_QUICKSTART,
         *(o for o in SCENARIOS["markov-availability"] if not o.startswith(("rounds=", "checkpoint_every=")))]
_LONG += ["rounds=2000", "checkpoint_every=100"]  # about a millisecond a round
_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
_CLI = [sys.executable, "-m", "edgefl", "run", "quickstart", *(a for o in _LONG for a in ("--set", o)), "--quiet"]


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory) -> Path:
    """The uninterrupted run of ``_LONG`` as ``edgefl run`` writes it."""
    ref = tmp_path_factory.mktemp("long") / "ref"
    subprocess.run([*_CLI, "--out", str(ref)], check=True, capture_output=True, env=_ENV)
    return ref


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_real_signal_to_edgefl_run_then_resume(tmp_path, long_reference, sig):
    """A real ``edgefl run`` process stopped by a real signal at a moment the test does not choose (a while after
    its first checkpoint, most likely inside a round), resumed with ``edgefl run --resume``: the tables of the
    uninterrupted run; both write the partial results and exit 130."""
    cut = tmp_path / "cut"
    proc = subprocess.Popen(
        [*_CLI, "--out", str(cut)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_ENV,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal (test_cli.py says why)
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (cut / "checkpoint" / "meta.json").is_file():
        time.sleep(0.002)
    time.sleep(0.05)  # then somewhere in a later round
    assert proc.poll() is None, "the run finished before it could be stopped; make it longer"
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=120)
    saved = checkpoint_round(cut / "checkpoint")
    assert 100 <= saved < 2000
    assert proc.returncode == 130, err
    assert "continue with: edgefl run --resume" in out
    assert len(pd.read_csv(cut / "rounds.csv")) >= saved
    again = subprocess.run([sys.executable, "-m", "edgefl", "run", "--resume", str(cut), "--quiet"],
                           capture_output=True, text=True, env=_ENV)  # fmt: skip
    assert again.returncode == 0, again.stderr
    for table in ("rounds.csv", "device_rounds.csv"):
        assert _csv(pd.read_csv(long_reference / table)) == _csv(pd.read_csv(cut / table)), table
    assert not (cut / "checkpoint").exists()  # the finished run's checkpoint is removed (output.keep_checkpoint)
