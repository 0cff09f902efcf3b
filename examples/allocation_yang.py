"""Yang et al.'s comparison (issue #36, point 7): equal bandwidth, least time, least energy, fixed frequency, TDMA.

    .venv/bin/python examples/allocation_yang.py [--seeds 20] [--multipliers 1.05 1.5 2 3]
        [--paper-totals-s 100 200 300] [--jobs 2] [--out runs/allocation-yang] [--part A|B|AB]

Part A (planning, no training): the preset ``yang_fdma`` (Yang et al., IEEE TWC 2021: 50 users, 20 MHz FDMA
uplink, 28.1 kbit per upload, 10 dBm, 2 GHz, kappa = 1e-28; each value tagged in the preset). For each seed
0..``--seeds``-1 the fleet is drawn as a run of the preset with that seed draws it (positions, FLOPs per cycle,
hence cycles per round, and round 1's gains with its 8 dB shadowing: :func:`edgefl.run.runner.draw_devices`), and
one round is planned under:

- ``EB-FDMA``: the band split equally (B/K each) at f_max and p_max: edgefl's ``bandwidth_mode = "split"``, what a
  run of the preset charges (the script checks it against round 1 of a simulated run, to 1e-9, and stops if not);
- ``min_time``: the least round time T* (Shi et al.; Yang et al.'s completion-time problem at fixed local work),
  f_max and p_max, the band split so that every device finishes together
  (:func:`optimizers.alloc_min_time.min_time_allocation`);
- at each deadline T (``--multipliers`` x T* of the seed, and the paper's completion-time limits
  ``--paper-totals-s`` spread over a / (1 - eta) = 320 rounds [CODE: a = 160, eta = 1/2]):
  - ``min_energy``: Yang et al.'s least energy by T over bandwidth, power and CPU frequency
    (:func:`optimizers.alloc_min_energy.min_energy_allocation`);
  - ``fixed-f``: the same with every CPU fixed at f_max (bandwidth and power only; f_min = f_max);
  - ``EB-FDMA opt``: b = B/K fixed, each device's power and frequency at its least energy by T (the notes' clean
    EB-FDMA, :func:`optimizers.alloc_fixed_band.min_energy_fixed_bandwidth`; infeasible at a T below the equal
    split's round time);
- ``TDMA``: each device alone on the whole band after its computation, at f_max and p_max, uploads in order of
  computation end (the least TDMA round time: :func:`optimizers.tdma_schedule.tdma_max_allocation`). Its least
  energy under T is not computed (K! upload orders); it is listed at each T where its least round time meets T.

Writes ``OUT/seed<k>.json`` per seed (resumable: a seed's file is read back, not recomputed), ``OUT/rows.csv``
(every seed, scheme and deadline), ``OUT/table.csv`` (per scheme and deadline: the mean, standard deviation, least
and largest over seeds of the round time [s] and the energy per round [J], and how many seeds meet the deadline)
and ``OUT/reductions.csv`` (min_energy's energy reduction against each baseline); prints them and the claims'
figures.

Part B (real training, ``--part B``): FedAvg on ``operator_cell`` under ``channel.allocation`` = equal, min_time,
min_energy (with :data:`PART_B_SETS`): simulated time and energy to ``--target`` test accuracy, per seed, written to
``OUT/part_b/table.csv``; an allocation the scenario refuses at load is named and left out.

Measured wall time: Part A with the defaults (20 seeds, 7 deadlines) and ``--jobs 2`` took 2 minutes 57 seconds
and, rerun from scratch, 4 minutes 24 seconds on the shared 2-core machine with other helpers' work running
(2026-11-28; the same table both times); reading the seeds back takes seconds. Part B with its defaults (3
allocations x 2 seeds x 15 rounds of real training, ``--part B --jobs 2``) took about 15 minutes on the same machine
with other work running (2026-11-28).
The table and the verdicts are in examples/README.md, "Yang et al.: energy-efficient allocation (issue #36)".
"""

from __future__ import annotations

import argparse
import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PRESET = "yang_fdma"
ROUNDS_PER_TRAINING = 320  # [CODE] a / (1 - eta) with a = 160, eta = 1/2: the rounds a completion-time limit spans
SCHEMES = ("EB-FDMA", "min_time", "TDMA", "min_energy", "fixed-f", "EB-FDMA opt")
PART_B_ALLOCATIONS = ("equal", "min_time", "min_energy")
PART_B_SCENARIO = "operator_cell"
PART_B_SETS = ("channel.bandwidth_mode=split", "channel.bandwidth_mhz=10", "round.late=cancel", "train.eval_every=1")
"""What Part B changes in operator_cell for every allocation (before ``--set``): an allocation shares one band, so
the 10 phones of a round share 10 MHz (the preset gives each its own 1 MHz); a job not back by the 60 s deadline
is cancelled (a late job would hold its sub-band into the next round's allocation); the test set every round."""


def draw_seed(seed: int) -> dict:
    """The preset's fleet as a run with ``seed`` draws it: per device (arrays of length K) cycles of one round,
    round 1's linear gain, f_min, f_max [Hz], kappa, p_max [W]; shared: S [bit], B [Hz], N0 [W/Hz]."""
    import numpy as np

    from edgefl.run.load import load_scenario
    from edgefl.run.runner import draw_devices

    sc = load_scenario(PRESET, ["rounds=1"], seed=seed)
    dev = draw_devices(sc)
    fl, wl = dev.fleet.fleet, dev.workload
    _, gain = dev.radio.round_state(1)
    ids = np.arange(fl.n_devices)
    flops = wl.flops_per_sample() * wl.samples_per_round(ids)  # one round's local training (surrogate workload)
    return dict(
        cycles=np.asarray(flops / fl.flops_per_cycle, dtype=float), gain=np.asarray(gain, dtype=float),
        f_min=fl.f_min_hz.astype(float), f_max=fl.f_max_hz.astype(float), kappa=fl.energy_coeff.astype(float),
        p_max=fl.tx_power_w.astype(float), bits=float(wl.update_bits), band=float(sc.channel.bandwidth_hz),
        n0=float(sc.channel.noise_psd_w_per_hz),
    )  # fmt: skip


def simulated_round(seed: int) -> tuple[float, float]:
    """(round time [s], energy [J]) of round 1 of the preset as edgefl runs it (equal split, f_max, p_max)."""
    from edgefl.run.load import load_scenario
    from edgefl.run.runner import run_scenario

    rounds = run_scenario(load_scenario(PRESET, ["rounds=1"], seed=seed)).rounds
    return float(rounds["round_time_s"].iloc[0]), float(rounds["energy_j"].iloc[0])


def plan_seed(job: tuple[int, list[float], list[float]]) -> dict:
    """Every scheme's round time [s] and energy [J] for one seed (the module docstring's list)."""
    import numpy as np

    from optimizers.alloc_fixed_band import min_energy_fixed_bandwidth
    from optimizers.alloc_min_energy import min_energy_allocation
    from optimizers.alloc_min_time import min_time_allocation, shannon_rate_bps
    from optimizers.errors import InfeasibleError
    from optimizers.tdma_schedule import tdma_max_allocation

    seed, multipliers, totals = job
    d = draw_seed(seed)
    c, g, f_max, kap, p_max = d["cycles"], d["gain"], d["f_max"], d["kappa"], d["p_max"]
    k = c.size
    common = dict(update_bits=d["bits"], gain=g, n0_w_per_hz=d["n0"])
    rows = []

    def row(scheme: str, deadline: str, t_s: float, e_j: float, feasible: bool = True, **extra) -> None:
        rows.append({"scheme": scheme, "deadline": deadline, "round_time_s": t_s, "energy_j": e_j,
                     "feasible": feasible, **extra})  # fmt: skip

    # equal bandwidth at the maxima (today's split) and the simulator's own round 1
    rate = shannon_rate_bps(np.full(k, d["band"] / k), g * p_max / d["n0"])
    t_eb = float(np.max(c / f_max + d["bits"] / rate))
    e_eb = float(np.sum(kap * c * f_max**2 + p_max * d["bits"] / rate))
    sim_t, sim_e = simulated_round(seed)
    if abs(sim_t / t_eb - 1) > 1e-9 or abs(sim_e / e_eb - 1) > 1e-9:
        raise SystemExit(f"seed {seed}: the planned equal split ({t_eb!r} s, {e_eb!r} J) is not what a run of "
                         f"{PRESET} charges ({sim_t!r} s, {sim_e!r} J)")  # fmt: skip
    row("EB-FDMA", "none", t_eb, e_eb, sim_round_time_s=sim_t, sim_energy_j=sim_e)
    fast = min_time_allocation(cycles=c, cpu_hz=f_max, p_tx_w=p_max, bandwidth_hz=d["band"], **common)
    t_star = fast.t_round_s
    row("min_time", "none", t_star, float(np.sum(kap * c * f_max**2 + p_max * fast.t_up_s)))
    tdma = tdma_max_allocation(cycles=c, cpu_hz=f_max, kappa=kap, p_tx_w=p_max, bandwidth_hz=d["band"], **common)
    row("TDMA", "none", tdma.schedule.t_round_s, tdma.energy_j)

    deadlines = [(f"{m:g} T*", m * t_star) for m in multipliers]
    deadlines += [(f"{s:g} s / {ROUNDS_PER_TRAINING}", s / ROUNDS_PER_TRAINING) for s in totals]
    for label, t in deadlines:
        args_eb = dict(cycles=c, kappa=kap, f_max_hz=f_max, p_max_w=p_max, deadline_s=t, **common)
        args = dict(bandwidth_hz=d["band"], **args_eb)
        if t <= t_star:  # a paper's limit below this fleet's least round time: no FDMA allocation meets it
            for scheme in ("min_energy", "fixed-f"):
                row(scheme, label, math.nan, math.nan, feasible=False, deadline_s=t)
        else:
            best = min_energy_allocation(f_min_hz=d["f_min"], **args)
            row("min_energy", label, float(np.max(best.t_cmp_s + best.t_up_s)), best.energy_j, deadline_s=t,
                compute_share=float(best.compute_energy_j.sum() / best.energy_j))  # fmt: skip
            fixed = min_energy_allocation(f_min_hz=f_max, **args)
            row("fixed-f", label, float(np.max(fixed.t_cmp_s + fixed.t_up_s)), fixed.energy_j, deadline_s=t)
        try:  # b = B/K each: power and frequency at each device's least energy by t
            eb = min_energy_fixed_bandwidth(bandwidth_hz=d["band"] / k, f_min_hz=d["f_min"], **args_eb)
            row("EB-FDMA opt", label, float(np.max(eb.t_cmp_s + eb.t_up_s)), eb.energy_j, deadline_s=t)
        except InfeasibleError:
            row("EB-FDMA opt", label, math.nan, math.nan, feasible=False, deadline_s=t)
        row("EB-FDMA", label, t_eb, e_eb, feasible=t_eb <= t, deadline_s=t)
        row("TDMA", label, tdma.schedule.t_round_s, tdma.energy_j, feasible=tdma.schedule.t_round_s <= t,
            deadline_s=t)  # fmt: skip
    return {"seed": seed, "t_star_s": t_star, "rows": rows}


def summarise(results: list[dict]):
    """Per scheme and deadline: mean, standard deviation, min and max over the feasible seeds."""
    import pandas as pd

    frame = pd.DataFrame([{"seed": r["seed"], **row} for r in results for row in r["rows"]])
    ok = frame[frame["feasible"]]
    order = {s: i for i, s in enumerate(SCHEMES)}
    labels = list(dict.fromkeys(frame["deadline"]))
    out = []
    for (label, scheme), grp in frame.groupby(["deadline", "scheme"], sort=False):
        good = ok[(ok["deadline"] == label) & (ok["scheme"] == scheme)]
        rec = {"deadline": label, "scheme": scheme, "feasible": f"{len(good)}/{len(grp)}"}
        for key in ("round_time_s", "energy_j"):
            vals = good[key]
            rec[f"{key}_mean"] = vals.mean() if len(good) == len(grp) else math.nan
            rec[f"{key}_sd"] = vals.std(ddof=1) if len(good) == len(grp) and len(vals) > 1 else math.nan
            rec[f"{key}_min"], rec[f"{key}_max"] = (vals.min(), vals.max()) if len(vals) else (math.nan, math.nan)
        out.append(rec)
    table = pd.DataFrame(out)
    table["_l"] = table["deadline"].map({lab: i for i, lab in enumerate(labels)})
    table["_s"] = table["scheme"].map(order)
    return frame, table.sort_values(["_l", "_s"]).drop(columns=["_l", "_s"]).reset_index(drop=True)


def claims(frame) -> tuple[list[str], "object"]:
    """The figures the README's verdicts rest on: lines, and a table of min_energy's energy reductions
    ``1 - E_min_energy / E_baseline`` per deadline and baseline (of the means over seeds, and the range over seeds;
    a baseline infeasible in some seed at that deadline is marked so)."""
    import pandas as pd

    lines = []
    eb = frame[frame["scheme"] == "EB-FDMA"]
    worst = max((eb["sim_round_time_s"] / eb["round_time_s"] - 1).abs().max(),
                (eb["sim_energy_j"] / eb["energy_j"] - 1).abs().max())  # fmt: skip
    lines.append(f"EB-FDMA planned vs simulated round 1 of the preset: worst relative gap {worst:.2g} "
                 f"(round time and energy, {int(eb['sim_round_time_s'].notna().sum())} seeds)")  # fmt: skip
    none = frame[frame["deadline"] == "none"].pivot(index="seed", columns="scheme", values="round_time_s")
    for base in ("EB-FDMA", "TDMA"):
        red = 1 - none["min_time"] / none[base]
        lines.append(f"round time, min_time vs {base}: {1 - none['min_time'].mean() / none[base].mean():.1%} of the "
                     f"means (seeds {red.min():.1%}-{red.max():.1%})")  # fmt: skip
    slowest = int((none["TDMA"] >= none[["EB-FDMA", "min_time"]].max(axis=1)).sum())
    lines.append(f"TDMA / EB-FDMA round time: {none['TDMA'].mean() / none['EB-FDMA'].mean():.2f}x of the means; "
                 f"TDMA the slowest of the three in {slowest}/{len(none)} seeds")  # fmt: skip
    faster = int((none["TDMA"] > none["min_time"]).sum())
    lines.append(f"TDMA slower than min_time in {faster}/{len(none)} seeds; slower than EB-FDMA in "
                 f"{int((none['TDMA'] > none['EB-FDMA']).sum())}/{len(none)}")  # fmt: skip
    least = frame[frame["scheme"] == "min_energy"].sort_values("deadline_s")
    falls = least.groupby("seed")["energy_j"].apply(lambda e: bool((e.diff().dropna() <= 0).all()))
    lines.append(f"min_energy's energy falls as the deadline grows in {int(falls.sum())}/{len(falls)} seeds")
    rows = []
    for label, grp in frame[frame["deadline"] != "none"].groupby("deadline", sort=False):
        e = grp.pivot(index="seed", columns="scheme", values="energy_j")
        feas = grp.pivot(index="seed", columns="scheme", values="feasible").astype(bool)
        rec = {"deadline": label}
        for base in ("fixed-f", "EB-FDMA opt", "EB-FDMA", "TDMA"):
            if feas[base].all():
                red = 1 - e["min_energy"] / e[base]
                rec[base] = (f"{1 - e['min_energy'].mean() / e[base].mean():.1%} "
                             f"({red.min():.1%}-{red.max():.1%})")  # fmt: skip
            else:
                rec[base] = f"infeasible in {int((~feas[base]).sum())}/{len(feas)}"
        # the order among the seeds where each scheme meets the deadline (min_energy and fixed-f always do)
        order = (e["min_energy"] <= e["fixed-f"] * (1 + 1e-9)) & (e["fixed-f"] <= e["EB-FDMA"])
        rec["min_energy <= fixed-f <= EB-FDMA"] = f"{int(order[feas['EB-FDMA']].sum())}/{int(feas['EB-FDMA'].sum())}"
        fe_eb = feas["EB-FDMA opt"]
        rec["fixed-f <= EB-FDMA opt"] = f"{int((e['fixed-f'] <= e['EB-FDMA opt'])[fe_eb].sum())}/{int(fe_eb.sum())}"
        rows.append(rec)
    return lines, pd.DataFrame(rows)


def part_a(args: argparse.Namespace) -> None:
    import pandas as pd

    from edgefl.io import atomic_write_text

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"multipliers": args.multipliers, "paper_totals_s": args.paper_totals_s}
    marker = out / "settings.json"
    if marker.exists() and json.loads(marker.read_text()) != settings:
        raise SystemExit(f"{marker} differs from these settings: give them their own --out")
    atomic_write_text(marker, json.dumps(settings))
    todo = [s for s in range(args.seeds) if not (out / f"seed{s}.json").exists()]
    print(f"{args.seeds - len(todo)} seeds read back, {len(todo)} to plan on {args.jobs} processes", flush=True)
    jobs = [(s, args.multipliers, args.paper_totals_s) for s in todo]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for res in pool.map(plan_seed, jobs):
            atomic_write_text(out / f"seed{res['seed']}.json", json.dumps(res))
            print(f"seed {res['seed']}: T* = {res['t_star_s'] * 1e3:.2f} ms", flush=True)
    results = [json.loads((out / f"seed{s}.json").read_text()) for s in range(args.seeds)]
    frame, table = summarise(results)
    atomic_write_text(out / "table.csv", table.to_csv(index=False))
    atomic_write_text(out / "rows.csv", frame.to_csv(index=False))
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.max_rows", 200):
        show = table.copy()
        for key in ("round_time_s", "energy_j"):
            for stat in ("mean", "sd", "min", "max"):
                show[f"{key}_{stat}"] = show[f"{key}_{stat}"] * (1e3 if key == "round_time_s" else 1e3)
        show.columns = [c.replace("round_time_s", "t_ms").replace("energy_j", "E_mJ") for c in show.columns]
        print(show.round(3).to_string(index=False))
    lines, reductions = claims(frame)
    atomic_write_text(out / "reductions.csv", reductions.to_csv(index=False))
    for line in lines:
        print(line)
    print("min_energy's energy reduction against each baseline, of the means over seeds (range over seeds):")
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        print(reductions.to_string(index=False))


def allocation_key_missing() -> str | None:
    """None when the scenario loader accepts ``channel.allocation``; else the loader's one line."""
    from edgefl.errors import ScenarioError
    from edgefl.run.load import load_scenario

    try:
        load_scenario(PART_B_SCENARIO, ["channel.allocation=equal"])
    except ScenarioError as exc:
        return str(exc)
    return None


def one_run(job: tuple[list[str], int, str]) -> str:
    """Train one allocation and seed of Part B; write its run directory (tables only) and return it."""
    import torch

    torch.set_num_threads(1)
    from edgefl.output.results import write_run
    from edgefl.run.load import load_scenario
    from edgefl.run.runner import run_scenario

    sets, seed, out = job
    return str(write_run(run_scenario(load_scenario(PART_B_SCENARIO, sets, seed=seed)), out, report=False))


def part_b(args: argparse.Namespace) -> None:
    missing = allocation_key_missing()
    if missing is not None:
        print(f"Part B needs channel.allocation (issue #36, point 1), which this edgefl does not accept yet: {missing}")
        return
    import pandas as pd

    from edgefl.io import atomic_write_text
    from edgefl.output.results import is_finished

    from edgefl.errors import ScenarioError
    from edgefl.run.load import load_scenario

    out = Path(args.out) / "part_b"
    allocations = []
    for a in PART_B_ALLOCATIONS:  # an allocator the scenario's physics cannot plan under is refused at load
        try:
            load_scenario(PART_B_SCENARIO,
                          [f"channel.allocation={a}", f"rounds={args.rounds}", *PART_B_SETS, *args.set])  # fmt: skip
            allocations.append(a)
        except ScenarioError as exc:
            print(f"channel.allocation={a}: refused on {PART_B_SCENARIO}, not run: {exc}")
    jobs = [([f"channel.allocation={a}", f"rounds={args.rounds}", *PART_B_SETS, *args.set], seed,
             str(out / f"{a}-seed{seed}"))
            for seed in range(args.train_seeds) for a in allocations]  # fmt: skip
    todo = [j for j in jobs if not is_finished(Path(j[2]))]
    print(f"{len(jobs) - len(todo)} runs read back, {len(todo)} to run on {args.jobs} processes", flush=True)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for i, path in enumerate(pool.map(one_run, todo), 1):
            print(f"[{i}/{len(todo)}] {path}", flush=True)
    rows = []
    for a in allocations:
        for seed in range(args.train_seeds):
            rounds = pd.read_csv(out / f"{a}-seed{seed}" / "rounds.csv")
            hit = rounds[rounds["test_accuracy"] >= args.target]
            first = hit.iloc[0] if not hit.empty else None
            rows.append({"allocation": a, "seed": seed,
                         "time_to_target_s": math.nan if first is None else float(first["sim_time_s"]),
                         "energy_to_target_j": math.nan if first is None else float(first["energy_cum_j"]),
                         "rounds_to_target": math.nan if first is None else int(first["round"]),
                         "best_accuracy": float(rounds["test_accuracy"].max())})  # fmt: skip
    table = pd.DataFrame(rows)
    atomic_write_text(out / "table.csv", table.to_csv(index=False))
    print(f"{PART_B_SCENARIO}: time and energy to {args.target:.0%} test accuracy")
    print(table.round(3).to_string(index=False))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("A", "B", "AB"), default="A")
    ap.add_argument("--seeds", type=int, default=20, help="Part A: fleets drawn with seeds 0..N-1")
    ap.add_argument("--multipliers", type=float, nargs="+", default=[1.05, 1.5, 2.0, 3.0],
                    help="Part A: deadlines as multiples of each seed's least round time T*")  # fmt: skip
    ap.add_argument("--paper-totals-s", type=float, nargs="*", default=[100.0, 200.0, 300.0],
                    help=f"Part A: the paper's completion-time limits [s], over {ROUNDS_PER_TRAINING} "
                         "rounds")  # fmt: skip
    ap.add_argument("--train-seeds", type=int, default=2, help="Part B: seeds")
    ap.add_argument("--rounds", type=int, default=15, help="Part B: rounds per run")
    ap.add_argument("--target", type=float, default=0.8, help="Part B: test accuracy")
    ap.add_argument("--set", action="append", default=[], help="Part B: extra KEY=VALUE for every run")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="runs/allocation-yang")
    args = ap.parse_args(argv)
    if "A" in args.part:
        part_a(args)
    if "B" in args.part:
        part_b(args)


if __name__ == "__main__":
    main()
