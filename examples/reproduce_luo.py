"""Both design rules for K and E against the exhaustive (K, E) grid.

    .venv/bin/python examples/reproduce_luo.py [--scenario luo_setup3] [--seeds 5] [--jobs 2]
        [--gammas 0,0.25,0.5,0.75,1] [--refine 0] [--out runs/reproduce-luo] [--set KEY=VALUE ...]

For each gamma: Luo et al.'s Algorithm 2 (``rule paper``: sampled designs run to F_b -> A0/B0 -> alternate
search), the measured rule (``rule measured``: its sampled designs run to the target -> model M
ln R = a + b/E + c K^-p -> least straggler-aware cost, :mod:`edgefl.design.measured`) and the grid optimum,
all averaged over the seeds. Prints per rule the choice, its cost to the target, the optimality error
cost / cost(grid best) - 1 and the overhead (cost of the rule's sampled and confirmation runs over the cost of
its choice), the fit of model M with its leave-one-out error, the rounds measured against bound (15) and
model M, and writes the trade-off (tradeoff.csv, tradeoff.html: both rules and the grid optimum).

Resumable: every run is kept in ``OUT/store`` as it finishes (``--store`` to move it); a rerun reads them and
simulates only what is missing. Defaults come from the scenario's ``[method.luo]`` table (for luo_setup3 the
paper's Setup 3 losses and Table I samples, grid K {1,5,10,20,50,100} x E {20,30,40,60,80}).

Measured wall time on a shared 2-core machine (another user's jobs running), ``--jobs 2``, from an empty store:
luo_setup3, 5 seeds, gammas 0, 0.25, 0.5, 0.75, 1, both rules: 245 runs, 88 minutes (68 for the samples and
the grid, 20 for the chosen designs). luo_physical, 2 seeds, gammas 0, 0.5, 1, ``--rules measured
--grid-k 1,2,5,10,20,50``: 74 runs, 31 minutes.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="luo_setup3")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--gammas", default="0,0.25,0.5,0.75,1", help="comma-separated gammas in [0, 1]")
    ap.add_argument("--rules", default="paper,measured", help="design rules to compare: paper, measured or both")
    ap.add_argument("--refine", type=int, default=0, help="measured rule: confirmation runs at up to N neighbours")
    ap.add_argument("--out", default="runs/reproduce-luo")
    ap.add_argument("--store", help="folder of kept runs (default: OUT/store)")
    ap.add_argument("--f-a", type=float, help="higher estimation loss F_a (default: method.luo.f_a)")
    ap.add_argument("--f-b", type=float, help="lower estimation loss F_b (default: method.luo.f_b)")
    ap.add_argument("--f-target", type=float, help="target loss (default: method.luo.f_target)")
    ap.add_argument("--max-rounds", type=int, help="round limit of a run (default: method.luo.max_rounds)")
    ap.add_argument("--grid-k", help="comma-separated K values of the grid (default: method.luo.grid_k)")
    ap.add_argument("--grid-e", help="comma-separated E values of the grid (default: method.luo.grid_e)")
    ap.add_argument("--samples", help="paper rule's sampled designs KxE,... (default: method.luo.samples)")
    ap.add_argument("--measured-samples", help="measured rule's designs KxE,... (default: method.luo.measured_samples)")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()

    from pathlib import Path

    from edgefl.design import RunCache, estimate_ratio, fit_measured, grid_table, mean_costs, seed_costs
    from edgefl.design import tradeoff_table, write_tradeoff
    from edgefl.run.load import load_scenario

    wall0 = time.perf_counter()
    base = load_scenario(args.scenario, args.set)
    seeds = list(range(base.seed, base.seed + args.seeds))
    luo = base.method.luo
    pairs = lambda text: [tuple(int(v) for v in p.split("x")) for p in text.split(",")]  # noqa: E731
    grid_k = [int(x) for x in args.grid_k.split(",")] if args.grid_k else list(luo.grid_k)
    grid_e = [int(x) for x in args.grid_e.split(",")] if args.grid_e else list(luo.grid_e)
    grid_k = [k for k in grid_k if k <= base.fleet.n_devices]
    samples = pairs(args.samples) if args.samples else [tuple(p) for p in luo.samples]
    msamples = pairs(args.measured_samples) if args.measured_samples else [tuple(p) for p in luo.measured_samples]
    gammas = [float(g) for g in args.gammas.split(",")]
    rules = {r.strip() for r in args.rules.split(",")}
    if not rules or not rules <= {"paper", "measured"}:
        ap.error(f"--rules {args.rules!r}: expected paper, measured or paper,measured")
    if "paper" not in rules:
        samples = []
    if "measured" not in rules:
        msamples = []
    fa = luo.f_a if args.f_a is None else args.f_a
    fb = luo.f_b if args.f_b is None else args.f_b
    ft = luo.f_target if args.f_target is None else args.f_target
    limit = (luo.max_rounds or base.rounds) if args.max_rounds is None else args.max_rounds
    store = Path(args.store) if args.store else Path(args.out) / "store"
    cache = RunCache(base, max_rounds=limit, progress=lambda line: print(line, file=sys.stderr, flush=True), store=store)
    print(f"{args.scenario}: {cache.loaded} runs read from {store}", flush=True)
    # the paper's samples run only to F_b (Algorithm 2 line 3); the measured rule's samples and the grid to the
    # target; one process pool
    cache.prefetch_plan([((k, e, s), (ft,)) for k, e in msamples for s in seeds]
                        + [((k, e, s), (fa, fb)) for k, e in samples for s in seeds]
                        + [((k, e, s), (ft,)) for k in grid_k for e in grid_e for s in seeds], jobs=args.jobs)  # fmt: skip
    per_seed = seed_costs(base, seeds)
    print("device-mean costs:", {k: round(v, 5) for k, v in mean_costs(base, rows=per_seed).means().items()})
    est = fit = None
    if samples:
        est = estimate_ratio(cache, samples, f_a=fa, f_b=fb, seeds=seeds)
        print(f"paper rule: A0/B0 = {est.a0_over_b0:.4g} from {est.pairs} pairs; samples (K, E, R_a, R_b): "
              + ", ".join(f"({r.k}, {r.e}, {r.r_a:.1f}, {r.r_b:.1f})" for r in est.samples))  # fmt: skip
    if msamples:
        fit = fit_measured(cache, msamples, target=ft, seeds=seeds)
        f = fit.fit
        print(f"measured rule: ln R = {f.a:.4g} + {f.b:.4g}/E + {f.c:.4g} K^-{f.p:.4g}; rms of ln(R_fit/R) "
              f"{f.rms_log:.3f}; held-out (leave-one-out) error max {100 * f.holdout_error:.1f}%")  # fmt: skip
        for s, h in zip(fit.samples, f.holdout_errors):
            print(f"  sample (K={s.k}, E={s.e}): R = {s.rounds:.1f}, fit {float(f.rounds(s.k, s.e)):.1f}, "
                  f"held out {100 * h:+.1f}%")  # fmt: skip
    grid = grid_table(cache, grid_k, grid_e, target=ft, seeds=seeds)
    table = tradeoff_table(cache, per_seed, gammas, target=ft, seeds=seeds, paper=est, measured=fit, grid=grid,
                           refine=args.refine, jobs=args.jobs)  # fmt: skip

    print(f"\ntarget loss {ft}, {len(seeds)} seeds {seeds}, grid K={grid_k} x E={grid_e}")
    print(f"{'gamma':>5} {'rule':>8} {'K':>4} {'E':>4} {'cost':>10} {'K_opt':>5} {'E_opt':>5} {'cost_opt':>10} "
          f"{'error':>8} {'overhead':>8}")  # fmt: skip
    for row in table.itertuples(index=False):
        print(f"{row.gamma:5.2f} {row.rule:>8} {row.K:4d} {row.E:4d} {row.cost:10.4g} {row.K_opt:5d} {row.E_opt:5d} "
              f"{row.cost_opt:10.4g} {100 * row.optimality_error:7.2f}% {row.overhead:8.3f}")  # fmt: skip
    _rounds_shape(grid, est, fit, base.fleet.n_devices)
    csv_path, html_path = write_tradeoff(table, args.out, title=f"{args.scenario}: time-energy trade-off")
    runs_path = _save_runs(cache, args.out)
    print(f"\nwrote {csv_path}, {html_path} and {runs_path} (every run's loss trajectory)")
    print(f"simulated runs: {cache.simulated} (read from the store: {cache.loaded}), summed run wall time "
          f"{cache.wall_s:.0f} s, study wall time {time.perf_counter() - wall0:.0f} s")


def _rounds_shape(grid, est, fit, n: int) -> None:
    """Rounds to the target relative to the grid's largest (K, E): measured (seed means) / bound (15) with the
    estimated A0/B0 (eq. 19) / model M (nan for a rule not run). Where a model differs from the measurement,
    its rule misjudges K or E."""
    from optimizers.cost_effective import rounds_for_precision

    done = [o for o in grid if o.reached == o.seeds]
    ref = max(done, key=lambda o: (o.k, o.e))

    def bound(k: int, e: int) -> float:  # eq. (19) in units of B0 / epsilon: only ratios are printed
        return rounds_for_precision(k, e, n=n, a0=est.a0_over_b0, b0=1.0, epsilon=1.0) if est else float("nan")

    def model(k: int, e: int) -> float:
        return float(fit.fit.rounds(k, e)) if fit else float("nan")

    print(f"\nrounds to the target relative to (K={ref.k}, E={ref.e}): measured / bound (15) / model M")
    es = sorted({o.e for o in grid})
    print(f"{'K':>4} " + " ".join(f"{'E=' + str(e):>16}" for e in es))
    for k in sorted({o.k for o in grid}):
        cells = []
        for e in es:
            o = next((x for x in done if x.k == k and x.e == e), None)
            cells.append(f"{'-':>16}" if o is None else
                         f"{o.rounds / ref.rounds:.2f}/{bound(k, e) / bound(ref.k, ref.e):.2f}/{model(k, e) / model(ref.k, ref.e):.2f}".rjust(16))  # fmt: skip
        print(f"{k:4d} " + " ".join(cells))


def _save_runs(cache, out: str):
    """Every simulated run's loss, time and energy per round as ``OUT/runs.csv``."""
    from pathlib import Path

    import pandas as pd

    from edgefl.io import atomic_write_text

    Path(out).mkdir(parents=True, exist_ok=True)
    runs = pd.concat([pd.DataFrame({"K": k, "E": e, "seed": sd, "round": range(1, run.rounds + 1), "loss": run.loss,
                                    "time_s": run.time_s, "energy_j": run.energy_j})
                      for (k, e, sd), run in sorted(cache.runs.items())])  # fmt: skip
    return atomic_write_text(Path(out) / "runs.csv", runs.to_csv(index=False))


if __name__ == "__main__":
    main()
