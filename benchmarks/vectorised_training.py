"""Speed-up of FedAvg's vectorised local training (all of a round's devices at once, ``torch.func.vmap``) over
training the devices one by one, in one process, on Luo et al.'s Setup 3 (``luo_setup3``: multinomial
logistic regression on Synthetic(1,1), batch 64, global training loss every round).

Each repetition runs the same rounds both ways back to back (alternating which goes first) at one thread;
the headline per (K, E) is the median over repetitions of the paired wall-time ratio one-by-one/vectorised
(> 1: vectorised is faster). Both ways give the same model up to float rounding (tests/test_train_many.py).

    .venv/bin/python benchmarks/vectorised_training.py [--reps 3] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from edgefl.runner import Simulation
from edgefl.scenario import load_scenario

DESIGNS = [(10, 20), (100, 20), (30, 80)]  # (K clients per round, E local steps)


def _wall(k: int, e: int, rounds: int, *, vectorised: bool) -> float:
    sc = load_scenario("luo_setup3", [f"method.clients_per_round={k}", f"train.local_steps={e}", f"rounds={rounds}"])
    sim = Simulation(sc)
    if not vectorised:
        sim.method.client_updates = lambda jobs, state, r: None  # the simulator's per-device path
    t0 = time.perf_counter()
    for r in range(1, rounds + 1):
        sim.step(r)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    _wall(2, 2, 2, vectorised=True)  # warm-up: imports, FLOP count
    print(f"luo_setup3, {args.rounds} rounds per run, {args.reps} paired repetitions, 1 thread")
    print(f"{'K':>4} {'E':>4} {'one-by-one s':>13} {'vectorised s':>13} {'ratio (median)':>15}")
    for k, e in DESIGNS:
        slow, fast, ratios = [], [], []
        for rep in range(args.reps):
            order = (False, True) if rep % 2 == 0 else (True, False)
            walls = {v: _wall(k, e, args.rounds, vectorised=v) for v in order}
            slow.append(walls[False]); fast.append(walls[True]); ratios.append(walls[False] / walls[True])  # fmt: skip
        print(f"{k:4d} {e:4d} {statistics.median(slow):13.2f} {statistics.median(fast):13.2f} "
              f"{statistics.median(ratios):15.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
