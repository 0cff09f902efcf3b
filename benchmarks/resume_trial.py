"""Issue 35's trial, by script: a 30-round FedAvg run on a 40-device table, stopped by a real SIGINT inside round 8,
resumed with ``edgefl run --resume``; its tables must equal the uninterrupted run's (``wall_time_s`` dropped).

    python benchmarks/resume_trial.py [OUT_DIR]

The 40-device table is the quickstart's fleet drawn for 40 devices (``fleet.csv`` of a first run). The SIGINT is
sent by the process to itself from a hook at a chosen place in round 8 (``edgefl run`` itself, in a child
process): before the jobs' training, before the aggregation, and during the evaluation (after round 8's clock
has advanced: where the trial's Ctrl-C fell), each with ``checkpoint_every`` 10 (the default: no periodic
checkpoint yet, the run resumes from round 1), 7 (the periodic checkpoint of round 7) and 1. Prints one line per
case and exits 1 if any differs. Before the fix, the "evaluate" cases resumed with round 8 twice as long and every
later ``sim_time_s`` one round late. Takes two to three minutes on 2 cores (each case starts two processes).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

HOOK = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C's KeyboardInterrupt even if started with &
from edgefl.training.learner import TrainingLearner
where, at_round = sys.argv[1], 8
calls = {"n": 0}
def hooked(name):
    inner = getattr(TrainingLearner, name)
    def hook(self, *args, **kwargs):
        if name == "assess":
            calls["n"] += 1  # evaluated every round: the n-th call is round n's
        r = kwargs.get("round_index", calls["n"]) if name != "advance" else calls["n"] + 1
        if name == where and r == at_round:
            os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT: KeyboardInterrupt from Python's own handler
        return inner(self, *args, **kwargs)
    setattr(TrainingLearner, name, hook)
for name in ("work", "advance", "assess"):
    hooked(name)
from edgefl.cli import main
sys.argv = ["edgefl", *sys.argv[2:]]
main()
"""
WHERE = {"work": "before training", "advance": "before aggregation", "assess": "during evaluation"}


def edgefl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgefl", *args], capture_output=True, text=True)


def tables(run_dir: Path) -> dict[str, str]:
    out = {}
    for name in ("rounds.csv", "device_rounds.csv"):
        df = pd.read_csv(run_dir / name)
        out[name] = df.drop(columns=[c for c in ("wall_time_s",) if c in df]).to_csv(index=False)
    return out


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="resume-trial-"))
    drawn = out / "drawn40"
    if not (drawn / "fleet.csv").is_file():
        edgefl("run", "quickstart", "--set", "fleet.n_devices=40", "--set", "rounds=1", "--quiet", "--out", str(drawn))
    table = (drawn / "fleet.csv").resolve()
    base = ["run", "quickstart", "--set", f"fleet.devices={str(table)!r}", "--quiet"]
    ref = out / "reference"
    if not (ref / "summary.json").is_file():
        done = edgefl(*base, "--out", str(ref))
        assert done.returncode == 0, done.stderr
    want = tables(ref)
    rounds = pd.read_csv(ref / "rounds.csv")
    assert len(rounds) == 30 and pd.read_csv(table).shape[0] == 40
    bad = 0
    for every in (10, 7, 1):
        for where, words in WHERE.items():
            run_dir = out / f"every{every}-{where}"
            cut = subprocess.run([sys.executable, "-c", HOOK, where, *base, "--set", f"checkpoint_every={every}",
                                  "--out", str(run_dir)], capture_output=True, text=True)  # fmt: skip
            said = cut.stdout.strip().splitlines()[-1] if cut.stdout.strip() else cut.stderr.strip()
            assert cut.returncode == 130, (cut.returncode, cut.stderr)
            resumed = edgefl("run", "--resume", str(run_dir), "--quiet")
            assert resumed.returncode == 0, resumed.stderr
            same = tables(run_dir) == want
            r8 = pd.read_csv(run_dir / "rounds.csv").set_index("round").loc[8, "round_time_s"]
            print(f"checkpoint_every={every:2d}, SIGINT in round 8 {words:18s}: "
                  f"{'identical' if same else 'DIFFERENT'} (round 8 lasted {r8:.6f} s, uninterrupted "
                  f"{rounds.set_index('round').loc[8, 'round_time_s']:.6f} s); it said: {said[said.find('interrupted'):]}")  # fmt: skip
            bad += not same
    print(f"{9 - bad} of 9 cases identical; run directories in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
