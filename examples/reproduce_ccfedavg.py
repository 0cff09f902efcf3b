"""CC-FedAvg's Table I at laptop scale: accuracy, local steps, compute energy and time of every method.

Laptop scale (NOT the paper's scale): scikit-learn's digits (1,437 training images of 8x8, no download)
instead of CIFAR-10, 8 clients all selected every round (cross-silo), an MLP with one hidden layer of 64,
1 local epoch of batch-32 SGD (lr 0.1) per round, 40 rounds instead of 400, 3 seeds, gamma (IID share)
in {0, 0.5, 1}, beta = 4 resource levels p_i = 1, 1/2, 1/4, 1/8 (clients 0-1, 2-3, 4-5, 6-7), ad-hoc
schedule. Radio: the quickstart cell (3GPP macro path loss, 1 MHz, 0.1 W); devices: f_max in [0.2, 1] GHz, eps in
[5e-27, 1e-26], 1 FLOP per cycle (AnycostFL Sec. V-A's ranges).
About 5-10 minutes on 2 busy cores.

Methods: FedAvg (full); FedAvg (dropout) best and last; Strategy 1; Strategy 2; CC-FedAvg (Strategy 3,
client backup); CC-FedAvg(c) (tau = 10); FedNova with tau_i = p_i K local steps; and, at gamma = 0 only,
CC-FedAvg with server backup (same aggregate as client backup, 1-bit skip uploads).

Writes ``ccfedavg_table.csv`` and ``ccfedavg_accuracy_vs_energy.html`` (plotly, opens offline) to the output
directory.

    .venv/bin/python examples/reproduce_ccfedavg.py [--out runs/ccfedavg_example] [--rounds 40] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

GAMMAS = (0.0, 0.5, 1.0)
SEEDS = (0, 1, 2)
# label -> overrides of the quickstart preset
METHODS: dict[str, list[str]] = {
    "FedAvg (full)": ["method.name=fedavg"],
    "FedAvg (dropout)": ["method.name=fedavg_dropout"],
    "Strategy 1": ["method.name=ccfedavg", "method.ccfedavg.strategy=1"],
    "Strategy 2": ["method.name=ccfedavg", "method.ccfedavg.strategy=2"],
    "CC-FedAvg": ["method.name=ccfedavg", "method.ccfedavg.strategy=3"],
    "CC-FedAvg(c)": ["method.name=ccfedavg", 'method.ccfedavg.strategy="c"', "method.ccfedavg.tau=10"],
    "FedNova": ["method.name=fednova"],
    "CC-FedAvg (server backup)": ["method.name=ccfedavg", "method.ccfedavg.strategy=3", 'method.ccfedavg.backup="server"'],
}


def _base(rounds: int, gamma: float, seed: int) -> list[str]:
    return [
        f"rounds={rounds}", f"seed={seed}", "checkpoint_every=0", "fleet.n_devices=8", "method.clients_per_round=8",
        'data.partition="gamma_mix"', f"data.gamma={gamma}", "train.local_epochs=1", "train.batch_size=32",
        "train.lr=0.1", "method.ccfedavg.beta=4", 'method.ccfedavg.schedule="adhoc"',
        "method.fedavg_dropout.beta=4", "method.fednova.beta=4",  # the same p_i for the baselines
        # the devices of this reproduction (the quickstart preset itself draws catalogue phones)
        "fleet.f_min_ghz=0.1", "fleet.f_max_ghz=[0.2, 1.0]", "fleet.energy_coeff=[5e-27, 1e-26]",
        "fleet.flops_per_cycle=1",
    ]  # fmt: skip


def run_one(job: tuple[str, float, int, int]) -> dict:
    """One run; returns its headline numbers and its accuracy-vs-energy curve."""
    from edgefl.scenario.loading import scenario_to_toml
    from edgefl.run.load import load_scenario
    from edgefl.sweep.executors import compute_run

    label, gamma, seed, rounds = job
    sc = load_scenario("quickstart", _base(rounds, gamma, seed) + METHODS[label])
    res = compute_run(scenario_to_toml(sc), threads=1)  # one torch thread per process: the cores are shared
    r, d, summary = res.rounds, res.device_rounds, res.summary
    return {
        "method": label, "gamma": gamma, "seed": seed,
        "acc_last": _number(summary["final_accuracy"]), "acc_best": _number(summary["best_accuracy"]),
        "local_steps": int(d["local_steps"].sum()), "e_cmp_j": float(d["e_cmp_j"].sum()),
        "e_com_j": float(d["e_com_j"].sum()), "sim_time_s": float(r["sim_time_s"].iloc[-1]),
        "bits_up": float(r["bits_up"].sum()), "trained_rows": int(d["trained"].sum()),
        "curve_energy_j": r["energy_cum_j"].to_numpy().tolist(), "curve_acc": r["test_accuracy"].to_numpy().tolist(),
    }  # fmt: skip


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/ccfedavg_example")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(m, g, s, args.rounds) for m in METHODS for g in GAMMAS for s in SEEDS
            if m != "CC-FedAvg (server backup)" or g == 0.0]  # fmt: skip
    print(f"laptop scale: digits, 8 clients, MLP(64), {args.rounds} rounds, 1 local epoch, beta=4 ad-hoc, "
          f"seeds {SEEDS}; {len(jobs)} runs on {args.workers} processes")  # fmt: skip
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(run_one, jobs))
    df = pd.DataFrame(rows)
    df.drop(columns=["curve_energy_j", "curve_acc"]).to_csv(out / "ccfedavg_table.csv", index=False)
    _print_tables(df)
    _plot(df, out / "ccfedavg_accuracy_vs_energy.html")


def _print_tables(df: pd.DataFrame) -> None:
    print("\nTest accuracy [%] after the last round, mean +- sample std (ddof = 1) over 3 seeds "
          "(gamma = IID share; 0 = totally non-IID)")
    labels = []
    table = {}
    for m in METHODS:
        for kind in (("best", "last") if m == "FedAvg (dropout)" else ("last",)):
            lab = f"{m} ({kind})" if m == "FedAvg (dropout)" else m
            labels.append(lab)
            sub = df[df.method == m]
            table[lab] = {g: sub[sub.gamma == g][f"acc_{kind}"] * 100 for g in GAMMAS}
    print(f"{'method':28s}" + "".join(f"{'gamma=' + str(g):>16s}" for g in GAMMAS))
    for lab in labels:
        cells = "".join(f"{v.mean():9.2f} +-{v.std(ddof=1):4.2f}" if len(v) else f"{'-':>16s}"
                        for v in table[lab].values())  # fmt: skip
        print(f"{lab:28s}{cells}")
    print("\nCost over the run relative to FedAvg (full), same gamma and seed, mean over gammas and seeds "
          "(server backup: gamma = 0 only)")  # fmt: skip
    ref = df[df.method == "FedAvg (full)"].set_index(["gamma", "seed"])
    print(f"{'method':28s}{'local steps':>12s}{'E_cmp':>8s}{'E_total':>9s}{'sim time':>10s}{'bits up':>9s}"
          f"{'E_cmp [J]':>11s}")  # fmt: skip
    for m in METHODS:
        sub = df[df.method == m].set_index(["gamma", "seed"])
        r = ref.loc[sub.index]
        rel = {
            "steps": (sub.local_steps / r.local_steps).mean(), "ecmp": (sub.e_cmp_j / r.e_cmp_j).mean(),
            "etot": ((sub.e_cmp_j + sub.e_com_j) / (r.e_cmp_j + r.e_com_j)).mean(),
            "time": (sub.sim_time_s / r.sim_time_s).mean(), "bits": (sub.bits_up / r.bits_up).mean(),
        }  # fmt: skip
        print(f"{m:28s}{rel['steps']:12.3f}{rel['ecmp']:8.3f}{rel['etot']:9.3f}{rel['time']:10.3f}"
              f"{rel['bits']:9.3f}{sub.e_cmp_j.mean():11.4g}")  # fmt: skip
    g0 = df[df.gamma == 0.0].groupby("method")["acc_last"].mean() * 100
    dl = df[(df.gamma == 0.0) & (df.method == "FedAvg (dropout)")]["acc_last"].mean() * 100
    cc = g0["CC-FedAvg"]
    print(f"\nMost non-IID (gamma = 0): CC-FedAvg {cc:.2f}% vs FedAvg (full) {g0['FedAvg (full)']:.2f}% "
          f"(gap {g0['FedAvg (full)'] - cc:+.2f} points; within 3: {g0['FedAvg (full)'] - cc <= 3}); "
          f"above Strategy 1 ({g0['Strategy 1']:.2f}): {cc > g0['Strategy 1']}, above Strategy 2 "
          f"({g0['Strategy 2']:.2f}): {cc > g0['Strategy 2']}, above FedAvg (dropout, last) ({dl:.2f}): {cc > dl}")  # fmt: skip


def _plot(df: pd.DataFrame, path: Path) -> None:
    """Accuracy vs cumulative energy (compute + upload) at gamma = 0, seed-averaged, one line per method."""
    import plotly.graph_objects as go

    from edgefl.io import atomic_write_text
    from edgefl.output.report import figures_page

    fig = go.Figure()
    for m in METHODS:
        sub = df[(df.method == m) & (df.gamma == 0.0)]
        if sub.empty:
            continue
        e = np.mean(np.stack(sub.curve_energy_j.to_list()), axis=0)
        a = np.mean(np.stack(sub.curve_acc.to_list()), axis=0) * 100
        fig.add_trace(go.Scatter(x=e, y=a, mode="lines", name=m))
    fig.update_layout(title="CC-FedAvg at laptop scale: accuracy vs energy (digits, 8 clients, gamma = 0, 3 seeds)",
                      xaxis_title="cumulative energy, compute + upload [J]", yaxis_title="test accuracy [%]")  # fmt: skip
    atomic_write_text(path, figures_page("CC-FedAvg at laptop scale", {"accuracy_vs_energy": fig}))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
