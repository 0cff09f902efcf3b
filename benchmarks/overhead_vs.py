"""Has a change made edgefl's overhead worse? ``benchmarks/overhead.py`` of two source trees, paired in one run.

Each pair runs the overhead benchmark once with the other tree first on ``PYTHONPATH`` (the "before", e.g. a
``git worktree add /tmp/before COMMIT``) and once with this tree, alternating which goes first. Each run already
prints a ratio normalised by a bare PyTorch loop in the same process (edgefl / bare), so a shared machine's
drift cancels within a run; this script prints, per pair, after / before of that headline ratio and their
median. Target for a refactor: the median within 2% (<= 1.02).

    .venv/bin/python benchmarks/overhead_vs.py /tmp/before [--pairs 5] [--reps 9]

Measured wall time: about 3.5 minutes on a quiet 2-core machine with the defaults (1 min 54 s for 3 pairs of 7).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADLINE = re.compile(r"overhead ratio edgefl/bare \(median of paired ratios\): ([0-9.]+)")
LIGHT = re.compile(r"ratio at the lighter load \(median of paired ratios\): ([0-9.]+)")


def overhead(tree: Path, reps: int) -> tuple[float, float]:
    """(headline ratio, lighter-load ratio) of ``tree``'s edgefl, timed by this tree's overhead script."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(HERE / "overhead.py"), "--reps", str(reps)], env=env, cwd=tree, text=True,
        capture_output=True, check=True,
    ).stdout  # fmt: skip
    return float(HEADLINE.search(out).group(1)), float(LIGHT.search(out).group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="source tree of the code before the change")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    after = HERE.parent
    heavy, light = [], []
    for i in range(a.pairs):
        order = [("before", a.before), ("after", after)]
        if i % 2:
            order.reverse()
        got = {label: overhead(tree.resolve(), a.reps) for label, tree in order}
        heavy.append(got["after"][0] / got["before"][0])
        light.append(got["after"][1] / got["before"][1])
        print(f"pair {i + 1}: before {got['before'][0]:.3f} / {got['before'][1]:.3f}, "
              f"after {got['after'][0]:.3f} / {got['after'][1]:.3f} (edgefl/bare, FedAvg load / lighter load)",
              flush=True)  # fmt: skip
    print(f"after/before, median of {a.pairs} pairs: {statistics.median(heavy):.4f} at the FedAvg load, "
          f"{statistics.median(light):.4f} at the lighter load (target <= 1.02)")


if __name__ == "__main__":
    main()
