"""Synchronous against asynchronous FL on one radio and fleet (issue #17): time and energy to a target accuracy.

    .venv/bin/python examples/sync_vs_async.py [--scenario async_digits] [--seeds 3] [--target 0.85]
        [--rounds 40] [--out runs/sync-vs-async] [--set KEY=VALUE ...]

Runs the scenario (default ``async_digits``: 40 phones with Markov availability and per-step costs) four ways,
over the seeds: FedAvg ``wait_all``; FedAvg with a deadline where late devices finish their work
(``round.late = "finish"``) or stop at the cut-off (``"cancel"``); and FedBuff as the preset sets it. Prints the
mean simulated time [s] and energy [J] at which each first reaches ``--target`` test accuracy (``n/a`` if a
seed never does), and writes every run's directory and the overlay ``OUT/overlay.html`` (accuracy against
simulated time, energy and rounds; ``edgefl plot`` draws the same from the run directories).

FedAvg's rounds and FedBuff's server updates are both ``rounds``: ``--rounds`` sets both, so give FedBuff
enough updates (each aggregates ``buffer_size`` jobs) to compare at equal work.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

CASES = {
    "fedavg-wait_all": ["method.name=fedavg", "round.policy=wait_all"],
    "fedavg-deadline-finish": ["method.name=fedavg", "round.policy=deadline", "round.late=finish"],
    "fedavg-deadline-cancel": ["method.name=fedavg", "round.policy=deadline", "round.late=cancel"],
    "fedbuff": [],
}


def first_reaching(rounds, target: float) -> tuple[float, float]:
    """(simulated time [s], cumulative energy [J]) of the first row with test accuracy >= target (NaN if none)."""
    hit = rounds[rounds["test_accuracy"] >= target]
    if hit.empty:
        return math.nan, math.nan
    row = hit.iloc[0]
    return float(row["sim_time_s"]), float(row["energy_cum_j"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="async_digits")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--deadline-s", type=float, default=3.0, help="the deadline of the two deadline cases [s]")
    ap.add_argument("--out", default="runs/sync-vs-async")
    ap.add_argument("--set", action="append", default=[], help="extra KEY=VALUE overrides for every case")
    args = ap.parse_args()

    from edgefl.overlay import write_overlay
    from edgefl.results import write_run
    from edgefl.runner import run_scenario
    from edgefl.scenario import load_scenario

    out = Path(args.out)
    dirs, table = [], []
    for case, sets in CASES.items():
        if "round.policy=deadline" in sets:
            sets = [*sets, f"round.deadline_s={args.deadline_s}"]
        hits = []
        for seed in range(args.seeds):
            sc = load_scenario(args.scenario, [f"rounds={args.rounds}", *sets, *args.set], seed=seed)
            res = run_scenario(sc)
            dirs.append(write_run(res, out / f"{case}-seed{seed}", report=False))
            hits.append(first_reaching(res.rounds, args.target))
        times = [t for t, _ in hits if t == t]
        energies = [e for _, e in hits if e == e]
        mean = lambda xs: f"{sum(xs) / len(xs):.4g}" if len(xs) == len(hits) else "n/a"  # noqa: E731
        table.append((case, mean(times), mean(energies), f"{len(times)}/{len(hits)}"))
    print(f"target test accuracy {args.target:.0%}, {args.seeds} seed(s)")
    print(f"{'case':26s} {'time [s]':>10s} {'energy [J]':>11s} {'reached':>8s}")
    for case, t, e, n in table:
        print(f"{case:26s} {t:>10s} {e:>11s} {n:>8s}")
    page = write_overlay(dirs, out / "overlay.html", title=f"sync vs async on {args.scenario}")
    print(f"overlay: {page}")


if __name__ == "__main__":
    main()
