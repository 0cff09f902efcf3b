"""What survives realistic physics: FedAvg, AnycostFL and HeteroFL to a target accuracy, papers' and realistic physics.

    .venv/bin/python examples/realistic_physics.py [--seeds 2] [--target 0.75] [--rounds 30] [--deadline-s 30]
        [--budget-j 20 60] [--clients 10] [--train 6000] [--test 2000] [--jobs 2] [--out runs/realistic-physics]
        [--set KEY=VALUE ...]

The cell of issue #33: 40 catalogue devices in a 550 m 3GPP macro cell, 20 Raspberry Pi 4 at 50-200 m, 10 Jetson
Nano at 300-450 m and 10 Snapdragon 7 Gen 1 phones at 50-550 m (distances drawn uniformly over the annulus's area
with a fixed seed, 33, and written as the device table ``OUT/fleet.csv``), a 20 MHz uplink shared by the devices
transmitting (``bandwidth_mode = "split"``), McMahan's CNN on Fashion-MNIST (IID, ``--train`` images over the 40
devices, ``--test`` test images). The three methods run under the same round rules: ``--clients`` devices per
round, the deadline T_max = ``--deadline-s`` (late updates dropped, their energy charged) and a per-round energy
budget E_max ~ U[``--budget-j``] per device, each under ``physics = "paper"`` and ``physics = "realistic"``
(docs/scenarios.md), over seeds 0.. ``--seeds``-1. HeteroFL assigns each device the largest level a..e that
fits T_max and E_max (``assignment = "capability"``); FedAvg runs the CPU at f_max (its default).

Prints and writes ``OUT/table.csv``: per method and physics the simulated time [s], the energy [J] and the rounds
at which the test accuracy first reaches ``--target`` (mean over seeds, ``n/a`` if a seed never does, and per
seed), and the ratios AnycostFL / FedAvg and HeteroFL / FedAvg; and ``OUT/energy_parts.csv``: the energy per
device type and part (compute dynamic, static, upload, download) over all rounds of each realistic run, and why
device-rounds did not train.

Resumable: a finished run's directory (its ``summary.json`` written last) is read back instead of rerun; runs go to
``--jobs`` processes. A run directory is read back whatever its settings: give each setting its own ``--out``.
Measured wall time on the shared 2-core machine (another test suite running beside it): the defaults' 12 runs
(30 rounds each) with ``--jobs 2`` took 8 minutes 14 seconds with nothing else running (2026-11-28); reading them back (e.g. ``--target 0.72``) takes
seconds. The table and the verdict are in examples/README.md, "What survives realistic physics (issue #33)".
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

METHODS = ("fedavg", "anycostfl", "heterofl")
PHYSICS = ("paper", "realistic")
# issue #33's cell: (profile, count, nearest [m], farthest [m])
CELL = (("raspberry_pi_4", 20, 50.0, 200.0), ("jetson_nano", 10, 300.0, 450.0), ("snapdragon_7_gen1", 10, 50.0, 550.0))
FLEET_SEED = 33

SCENARIO = """\
# issue #33's cell, written by examples/realistic_physics.py
name = "realistic_physics"
description = "40 catalogue devices in a 550 m macro cell, 20 MHz shared uplink, McMahan CNN on Fashion-MNIST"
seed = 0
rounds = {rounds}
learning = "torch"

[data]
dataset = "fmnist"
partition = "iid"
max_train_samples = {train}
max_test_samples = {test}

[model]
name = "cnn_mcmahan"

[train]
local_epochs = 1
batch_size = 16
lr = 0.05
eval_every = 1

[method]
name = "fedavg"
clients_per_round = {clients}

[method.anycostfl]
alpha_min = 0.25
beta_max = 0.0666666666666667

[method.heterofl]
levels = ["a", "b", "c", "d", "e"]
assignment = "capability"

[round]
policy = "deadline"
deadline_s = {deadline}

[fleet]
devices = "fleet.csv"

[fleet.budget]
kind = "uniform"
low_j = {low}
high_j = {high}

[channel]
pathloss = "3gpp_macro"
bandwidth_mhz = 20.0
bandwidth_mode = "split"
cell_radius_m = 550.0
"""


def write_cell(out: Path, args: argparse.Namespace) -> Path:
    """Write the device table and the scenario into ``out`` (unchanged if already there); return the scenario."""
    import numpy as np

    from edgefl.io import atomic_write_text

    rng = np.random.default_rng(FLEET_SEED)
    rows, i = ["device,profile,distance_m"], 0
    for profile, count, near, far in CELL:
        for d in np.sqrt(rng.uniform(near**2, far**2, count)):  # uniform over the annulus's area
            rows.append(f"{i},{profile},{d:.1f}")
            i += 1
    out.mkdir(parents=True, exist_ok=True)
    text = {
        "fleet.csv": "\n".join(rows) + "\n",
        "scenario.toml": SCENARIO.format(rounds=args.rounds, train=args.train, test=args.test, clients=args.clients,
                                         deadline=args.deadline_s, low=args.budget_j[0], high=args.budget_j[1]),
    }  # fmt: skip
    for name, body in text.items():
        path = out / name
        if path.exists() and path.read_text() != body:
            raise SystemExit(f"{path} differs from these settings: give them their own --out")
        if not path.exists():
            atomic_write_text(path, body)
    return out / "scenario.toml"


def one_run(job: tuple[str, list[str], int, str]) -> str:
    """Simulate one case and seed; write its run directory (tables only) and return it."""
    import torch

    torch.set_num_threads(1)
    from edgefl.output.results import write_run
    from edgefl.run.load import load_scenario
    from edgefl.run.runner import run_scenario

    scenario, sets, seed, out = job
    return str(write_run(run_scenario(load_scenario(scenario, sets, seed=seed)), out, report=False))


def first_reaching(rounds, target: float) -> tuple[float, float, float]:
    """(simulated time [s], cumulative energy [J], round) of the first row with test accuracy >= target."""
    hit = rounds[rounds["test_accuracy"] >= target]
    if hit.empty:
        return math.nan, math.nan, math.nan
    row = hit.iloc[0]
    return float(row["sim_time_s"]), float(row["energy_cum_j"]), float(row["round"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.75)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--deadline-s", type=float, default=30.0, help="T_max [s] of every method and physics")
    ap.add_argument("--budget-j", type=float, nargs=2, default=(20.0, 60.0), help="E_max ~ U[low, high] [J]")
    ap.add_argument("--clients", type=int, default=10, help="devices per round")
    ap.add_argument("--train", type=int, default=6000, help="training images over the 40 devices")
    ap.add_argument("--test", type=int, default=2000, help="test images")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="runs/realistic-physics")
    ap.add_argument("--set", action="append", default=[], help="extra KEY=VALUE overrides for every run")
    args = ap.parse_args(argv)

    import pandas as pd

    from edgefl.io import atomic_write_text
    from edgefl.output.results import is_finished

    out = Path(args.out)
    scenario = str(write_cell(out, args))
    methods = args.methods.split(",")
    cases = [(m, p) for m in methods for p in PHYSICS]
    jobs = [(scenario, [f"method.name={m}", f"physics={p}", *args.set], seed, str(out / f"{m}-{p}-seed{seed}"))
            for seed in range(args.seeds) for m, p in cases]  # fmt: skip
    todo = [j for j in jobs if not is_finished(Path(j[3]))]
    print(f"{len(jobs) - len(todo)} runs read back, {len(todo)} to run on {args.jobs} processes", flush=True)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, path in enumerate(pool.map(one_run, todo), 1):
            print(f"[{i}/{len(todo)}] {path}", flush=True)

    rows, parts = [], []
    for m, p in cases:
        hits = []
        for s in range(args.seeds):
            run = out / f"{m}-{p}-seed{s}"
            hits.append(first_reaching(pd.read_csv(run / "rounds.csv"), args.target))
            dev = pd.read_csv(run / "device_rounds.csv")
            for (profile, trained), g in dev.groupby(["profile", "trained"]):
                parts.append({"method": m, "physics": p, "seed": s, "profile": profile, "trained": trained,
                              "device_rounds": len(g), **{c: g[c].sum() for c in
                              ("e_cmp_j", "e_static_j", "e_com_j", "e_down_j", "energy_j") if c in g},
                              "reasons": "; ".join(sorted({str(r).split(":")[0] for r in g["reason"].dropna()}))
                              if "reason" in g else ""})  # fmt: skip
        full = all(h[0] == h[0] for h in hits)
        row = {"method": m, "physics": p, "reached": f"{sum(h[0] == h[0] for h in hits)}/{len(hits)}"}
        for i, key in enumerate(("time_s", "energy_j", "rounds")):
            row[key] = sum(h[i] for h in hits) / len(hits) if full else math.nan
            for s, h in enumerate(hits):
                row[f"{key}_seed{s}"] = h[i]
        rows.append(row)
    table = pd.DataFrame(rows)
    for key in ("time_s", "energy_j"):
        base = table[table["method"] == "fedavg"].set_index("physics")[key]
        table[f"{key}_vs_fedavg"] = [r[key] / base.get(r["physics"], math.nan) for _, r in table.iterrows()]
    atomic_write_text(out / "table.csv", table.to_csv(index=False))
    atomic_write_text(out / "energy_parts.csv", pd.DataFrame(parts).to_csv(index=False))
    print(f"target test accuracy {args.target:.0%}, {args.seeds} seed(s)")
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print(table.round(3).to_string(index=False))
        print(pd.DataFrame(parts).round(1).to_string(index=False))


if __name__ == "__main__":
    main()
