"""Synchronous against asynchronous FL on one radio and fleet: time and energy to a target accuracy.

    .venv/bin/python examples/sync_vs_async.py [--scenario async_digits] [--seeds 3] [--target 0.85]
        [--rounds 40] [--updates N] [--deadline-s 3] [--jobs 2] [--out runs/sync-vs-async] [--set KEY=VALUE ...]

Runs the scenario (default ``async_digits``: 40 phones with Markov availability and heavy-tailed per-step costs)
four ways, over the seeds: FedAvg ``wait_all``; FedAvg with a deadline where late devices finish their work
(``round.late = "finish"``) or stop at the cut-off (``"cancel"``); and FedBuff as the preset sets it. Prints the
mean simulated time [s] and energy [J] at which each first reaches ``--target`` test accuracy (``n/a`` if a
seed never does) and each policy's ratio to the best, and writes every run's directory, ``OUT/table.csv`` and the
overlay ``OUT/overlay.html`` (accuracy against simulated time, energy and rounds; ``edgefl plot`` draws the same
from the run directories).

FedAvg runs ``--rounds`` rounds of K = ``method.clients_per_round`` jobs; FedBuff runs ``--updates`` server
updates of M = ``buffer_size`` jobs each (default ``rounds x K / M``: the same number of aggregated jobs).

Resumable: a finished run's directory (its ``summary.json`` written last) is read back instead of rerun; runs go to
``--jobs`` processes. Measured wall time on the shared 2-core machine (load ~4): ``--scenario async_fmnist --rounds
24 --seeds 1 --deadline-s 6 --target 0.80 --set train.eval_every=2 --set data.max_test_samples=2000 --jobs 1`` (4
runs of McMahan's CNN on Fashion-MNIST) 38 minutes, each further seed's 4 runs with ``--jobs 2`` 17-20 minutes;
``async_digits`` with the defaults (3 seeds) 30 seconds. The table is in examples/README.md. A run directory is read
back whatever its settings: give each setting its own ``--out``.
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor
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


def case_overrides(case: str, args: argparse.Namespace) -> list[str]:
    """The scenario overrides of one case: its method and policy, its length, then the user's ``--set``."""
    from edgefl.run.load import load_scenario

    sets = list(CASES[case])
    if "round.policy=deadline" in sets:
        sets.append(f"round.deadline_s={args.deadline_s}")
    if case == "fedbuff":
        base = load_scenario(args.scenario, list(args.set))
        m = base.method.settings_of().buffer_size
        updates = args.updates or math.ceil(args.rounds * base.method.clients_per_round / m)
        return [f"rounds={updates}", *sets, *args.set]
    return [f"rounds={args.rounds}", *sets, *args.set]


def one_run(job: tuple[str, list[str], int, str]) -> str:
    """Simulate one case and seed; write its run directory (tables only) and return it."""
    import torch

    torch.set_num_threads(1)
    from edgefl.output.results import write_run
    from edgefl.run.runner import run_scenario
    from edgefl.run.load import load_scenario

    scenario, sets, seed, out = job
    return str(write_run(run_scenario(load_scenario(scenario, sets, seed=seed)), out, report=False))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="async_digits")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--rounds", type=int, default=40, help="FedAvg's rounds")
    ap.add_argument("--updates", type=int, default=0, help="FedBuff's server updates (default: equal jobs)")
    ap.add_argument("--deadline-s", type=float, default=3.0, help="the deadline of the two deadline cases [s]")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="runs/sync-vs-async")
    ap.add_argument("--set", action="append", default=[], help="extra KEY=VALUE overrides for every case")
    args = ap.parse_args(argv)

    import pandas as pd

    from edgefl.io import atomic_write_text
    from edgefl.output.comparison import write_overlay
    from edgefl.output.results import is_finished

    out = Path(args.out)
    jobs = [(args.scenario, case_overrides(case, args), seed, str(out / f"{case}-seed{seed}"))
            for case in CASES for seed in range(args.seeds)]  # fmt: skip
    todo = [j for j in jobs if not is_finished(Path(j[3]))]
    print(f"{args.scenario}: {len(jobs) - len(todo)} runs read back, {len(todo)} to run on {args.jobs} processes",
          flush=True)  # fmt: skip
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, path in enumerate(pool.map(one_run, todo), 1):
            print(f"[{i}/{len(todo)}] {path}", flush=True)
    rows = []
    for case in CASES:
        hits = [first_reaching(pd.read_csv(out / f"{case}-seed{s}" / "rounds.csv"), args.target)
                for s in range(args.seeds)]  # fmt: skip
        reached = [h for h in hits if h[0] == h[0]]
        mean = (lambda i: sum(h[i] for h in hits) / len(hits)) if len(reached) == len(hits) else (lambda i: math.nan)
        rows.append({"case": case, "time_s": mean(0), "energy_j": mean(1), "reached": f"{len(reached)}/{len(hits)}"})
    table = pd.DataFrame(rows)
    for col in ("time_s", "energy_j"):
        table[f"{col}_vs_best"] = table[col] / table[col].min()
    atomic_write_text(out / "table.csv", table.to_csv(index=False))
    print(f"target test accuracy {args.target:.0%}, {args.seeds} seed(s)")
    with pd.option_context("display.width", 160):
        print(table.round(3).to_string(index=False))
    page = write_overlay([Path(j[3]) for j in jobs], out / "overlay.html", title=f"sync vs async on {args.scenario}")
    print(f"overlay: {page}")


if __name__ == "__main__":
    main()
