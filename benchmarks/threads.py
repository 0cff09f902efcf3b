"""How many torch threads `edgefl run` should use by default: quickstart runs on a machine kept busy by another
CPU-bound process, paired and alternated in one process run.

    .venv/bin/python benchmarks/threads.py [--pairs 5] [--busy 1] [--scenario quickstart] [--arms default,omp1]

Three arms, each `edgefl run SCENARIO --quiet` in its own subprocess, taken in turn (the order rotates every pair):

- ``default``: edgefl's default (``train.threads``), no OMP_NUM_THREADS in the environment;
- ``omp1``: the same with ``OMP_NUM_THREADS=1``, the setting the issue's users found fast;
- ``cores``: ``--threads <os.cpu_count()>``, torch's own default (one thread per core), no OMP_NUM_THREADS.

Meanwhile ``--busy`` child processes spin a CPU each (bounded: they stop on their own after ``--busy-limit-s``
and are ended when the measurement ends). Each run's time is its training loop's wall time (summary.json's
``wall_time_s``; process start and imports excluded) and, beside it, the subprocess's whole wall time. Printed:
the medians, the median of the paired ratios default/omp1 and cores/omp1 (< 1: faster than omp1), and whether
the ``default`` and ``omp1`` runs wrote the same rounds.csv (wall times aside). Tests never time anything; this
script is where the figure in docs/performance.md ("Threads") comes from.

Measured on the shared 2-core machine (load average 13-15 from other work besides the busy child), 2026-11-25:
``--pairs 4``: cores/omp1 median 27.64 (13.13-31.26; loop 187 s against 9.2 s); ``--pairs 6 --arms
default,omp1`` with the pools limited: default/omp1 median 1.07 (1.00-1.56; 11.2 s against 10.7 s), tables
identical. Again with the quickstart on catalogue phones, a two-process study at nice 15 beside the busy child,
``--pairs 5 --arms default,omp1``: default/omp1 median 0.98 (0.95-1.19; 1.50 s against 1.47 s), tables identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pairing import median  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUSY_LOOP = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def _env(omp1: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if omp1:
        env["OMP_NUM_THREADS"] = "1"
    return env


def run_once(arm: str, scenario: str, work: Path, index: int) -> dict:
    """One `edgefl run` of ``arm``; its loop's and its process's wall time [s] and its rounds.csv text."""
    out = work / f"{arm}-{index}"
    cmd = [sys.executable, "-m", "edgefl", "run", scenario, "--quiet", "--out", str(out)]
    if arm == "cores":
        cmd += ["--threads", str(os.cpu_count() or 1)]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=_env(arm == "omp1"), check=True, capture_output=True, cwd=work)
    process_s = time.perf_counter() - t0
    summary = json.loads((out / "summary.json").read_text())
    rounds = (out / "rounds.csv").read_text().splitlines()
    header = rounds[0].split(",")
    wall = header.index("wall_time_s")
    table = [",".join(c for i, c in enumerate(line.split(",")) if i != wall) for line in rounds]
    return {"wall_s": float(summary["wall_time_s"]), "process_s": process_s, "rounds": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--busy", type=int, default=1, help="CPU-bound child processes kept spinning")
    parser.add_argument("--busy-limit-s", type=float, default=900.0, help="each child stops on its own after this")
    parser.add_argument("--scenario", default="quickstart")
    parser.add_argument("--arms", default="default,omp1,cores", help="comma-separated subset of the three arms")
    args = parser.parse_args()

    arms = tuple(a for a in ("default", "omp1", "cores") if a in args.arms.split(","))
    times: dict[str, list[dict]] = {arm: [] for arm in arms}
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(args.busy_limit_s)]) for _ in range(args.busy)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.pairs):
                order = arms[i % len(arms):] + arms[: i % len(arms)]  # rotate which arm goes first
                for arm in order:
                    times[arm].append(run_once(arm, args.scenario, Path(tmp), i))
                    print(f"pair {i + 1}: {arm:<7} loop {times[arm][-1]['wall_s']:.2f} s, "
                          f"process {times[arm][-1]['process_s']:.2f} s", flush=True)  # fmt: skip
    finally:
        for child in busy:
            child.kill()
            child.wait()
    print(f"\n{args.scenario}, {args.pairs} rounds of the arms, {args.busy} busy process(es), "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    for arm in arms:
        loop = median(sorted(r["wall_s"] for r in times[arm]))
        proc = median(sorted(r["process_s"] for r in times[arm]))
        print(f"  {arm:<7}: median loop {loop:.2f} s, median process {proc:.2f} s")
    for arm in [a for a in ("default", "cores") if a in arms and "omp1" in arms]:
        ratios = sorted(a["wall_s"] / b["wall_s"] for a, b in zip(times[arm], times["omp1"]))
        spread = f"range {ratios[0]:.2f}-{ratios[-1]:.2f}"
        print(f"  {arm}/omp1 paired loop-time ratio: median {median(ratios):.2f} ({spread})")
    if "default" in arms and "omp1" in arms:
        same = all(a["rounds"] == b["rounds"] for a, b in zip(times["default"], times["omp1"]))
        print(f"  default and omp1 rounds.csv identical (wall times aside): {same}")


if __name__ == "__main__":
    main()
