"""What fits AnycostFL's budgets on ``anycostfl_fmnist``, from the plans alone (no training): which widths of the
McMahan CNN a device can train and upload densely within T_max and E_max (HeteroFL's levels), and each method's
planned upload and energy per device-round at a ``beta_max`` cap (Table I's communication column).

Setup: the study's scale (examples/reproduce_anycostfl.py: 50 images per device, FLOPs/cycle x 0.05, so a
device-round costs what it costs at the paper's scale), IID, the given seed; rounds 1-``--rounds`` of the real
radio draws (positions, fading) and E_max draws, every device selected. Widths are costed as HeteroFL's
capability assignment costs them (the model ``heterofl_mcmahan``: the CNN with Scaler and static BN): compute at
the lowest frequency meeting T_max after the dense upload, and energy within E_max.

    .venv/bin/python examples/anycostfl_planning.py --widths            # share of device-rounds each width fits
    .venv/bin/python examples/anycostfl_planning.py --beta-max 0.0049 --methods AnycostFL,STC,QSGD,UVeQFed,FedHQ

Measured wall time on the shared 2-core machine under load: about 12 s for ``--widths`` (two seeds), about 45 s
for three methods at two caps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from reproduce_anycostfl import overrides  # noqa: E402

WIDTHS = (1.0, 0.875, 0.75, 0.625, 0.5, 0.25, 0.125, 0.0625)


def contexts(method: str, seed: int, rounds: int, extra: list[str]):
    """The simulation's method and each round's planning context (every device selected)."""
    from edgefl.methods import RoundContext
    from edgefl.run.runner import Simulation
    from edgefl.run.load import load_scenario
    from edgefl.fleet.devices import draw_budgets_j

    sim = Simulation(load_scenario("anycostfl_fmnist", overrides(method, "IID", seed, rounds, 50, 1000) + extra))
    run = sim.run
    n = run.fleet.n_devices
    everyone = np.ones(n, dtype=bool)
    for r in range(1, rounds + 1):
        _, gain = run.radio.round_state(r)
        yield run.method, RoundContext(
            round_index=r, selected=np.arange(n), rate_bps=run.radio.rates_bps(gain, run.fleet.tx_power_w, everyone),
            e_max_j=draw_budgets_j(run.rules.budget, n, run.streams.numpy("budgets", r)),
            t_budget_s=run.t_max_s - run.scenario.round.downlink_s, costs=run.costs,
            rng=run.streams.lazy_numpy("method", r),
        )  # fmt: skip


def widths(seeds: list[int], rounds: int) -> None:
    for seed in seeds:
        fit = {w: [] for w in WIDTHS}
        for method, ctx in contexts("HeteroFL", seed, rounds, ["model.hidden=[32,64,512]"]):
            for w in WIDTHS:
                fit[w].append(method._costs(ctx, ctx.selected, w, None)[-1])
        print(f"seed {seed}: share of {rounds * ctx.selected.size} device-rounds where a width of the McMahan CNN "
              "fits T_max and E_max: " + ", ".join(f"{w:g} {np.mean(np.concatenate(v)):.3f}" for w, v in fit.items()))


def uploads(methods: list[str], caps: list[float], seed: int, rounds: int) -> None:
    for m in methods:
        key = "anycostfl" if m == "AnycostFL" else m.lower()
        for cap in caps:
            bits, energy, n_jobs, n_all = [], [], 0, 0
            for method, ctx in contexts(m, seed, rounds, [f"method.{key}.beta_max={cap!r}"]):
                jobs = method.plan_round(ctx).jobs
                n_jobs, n_all = n_jobs + len(jobs.device), n_all + ctx.selected.size
                bits.append(jobs.bits_planned)
                energy.append(jobs.e_cmp_planned_j + jobs.e_com_planned_j)
            print(f"{m:9s} beta_max {cap:.5f}: planned upload {np.concatenate(bits).mean() / 1e6:.3f} Mb and energy "
                  f"{np.concatenate(energy).mean():.3f} J per planned device-round; {n_jobs}/{n_all} planned",
                  flush=True)  # fmt: skip


def main() -> None:
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", action="store_true", help="HeteroFL: the share of device-rounds each width fits")
    ap.add_argument("--beta-max", type=float, help="planned uploads at 1/15 and at this cap")
    ap.add_argument("--methods", default="AnycostFL,STC")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    if a.widths:
        widths(a.seeds, a.rounds)
    if a.beta_max is not None:
        uploads([m for m in a.methods.split(",") if m], [1 / 15, a.beta_max], a.seeds[0], a.rounds)


if __name__ == "__main__":
    main()
