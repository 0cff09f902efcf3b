"""AnycostFL's Table I and Fig. 4 at laptop scale: AnycostFL vs HeteroFL (capability), STC, QSGD, FedHQ under the
same T_max / E_max budgets and cost model, on Fashion-MNIST, IID and 2-class non-IID (shards).

Laptop scale (NOT the paper's): the ``anycostfl_fmnist`` preset (Sec. V-A radio, eps, alpha_min, beta_max, lr 0.01,
batch 32, 1 local epoch, every device every round) with 20 devices, 2,000 training images (100 per device), an MLP
with one hidden layer of 64 instead of the CNN, 40 rounds, seeds 0-2. To keep every budget ratio of the preset
(compute and upload time over T_max, energies over E_max), T_max and E_max are scaled by s = S_mlp / S_cnn (the
update sizes) and FLOPs/cycle so that the MLP's per-device cycles are s times the CNN's (all measured at start).
About 15 minutes on 2 cores. Target accuracy: 75% (IID), 65% (non-IID).

Writes ``anycostfl_table.csv`` (Table I columns: rounds, energy kJ, latency min, compute TFLOPs, communication GB
to the target, best accuracy; mean over seeds, with the ratio to AnycostFL) and ``anycostfl_figures.html``
(accuracy vs simulated time and vs energy, seed 0) to the output directory.

    .venv/bin/python examples/reproduce_anycostfl.py [--out runs/anycostfl_example] [--rounds 40] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from edgefl.results import RunResult

METHODS: dict[str, list[str]] = {
    "AnycostFL": ["method.name=anycostfl"],
    "HeteroFL": ["method.name=heterofl"],  # the preset's [method.heterofl]: levels a..e, assignment capability
    "STC": ["method.name=stc"],
    "QSGD": ["method.name=qsgd"],
    "FedHQ": ["method.name=fedhq"],
}
PARTITIONS = {"IID": ["data.partition=iid"], "non-IID": ["data.partition=shards", "data.classes_per_device=2"]}
TARGET = {"IID": 0.75, "non-IID": 0.65}
HIDDEN = 64
PRESET = "anycostfl_fmnist"


def scaled_overrides(n_devices: int, n_train: int) -> list[str]:
    """Overrides that keep the preset's budget ratios for the MLP at this scale (see the module docstring)."""
    from edgefl.learning.models import model_info
    from edgefl.scenario import load_scenario

    base = load_scenario(PRESET)

    def measure(name, hidden):
        info = model_info(name, input_shape=(1, 28, 28), n_classes=10, hidden=hidden)
        return info["train_flops_per_sample"], info["parameters"]

    f_cnn, p_cnn = measure(base.model.name, base.model.hidden)
    f_mlp, p_mlp = measure("mlp", (HIDDEN,))
    s = p_mlp / p_cnn  # upload size ratio: times and energies scale by s
    work = (f_mlp * n_train / n_devices) / (f_cnn * 60_000 / base.fleet.n_devices)
    lo, hi = base.fleet.flops_per_cycle
    b = base.fleet.budget
    return [
        f"fleet.n_devices={n_devices}", f"method.clients_per_round={n_devices}", f"data.max_train_samples={n_train}",
        "model.name=mlp", f"model.hidden=[{HIDDEN}]", f"round.deadline_s={base.round.deadline_s * s!r}",
        f"fleet.budget.low_j={b.low_j * s!r}", f"fleet.budget.high_j={b.high_j * s!r}",
        f"fleet.flops_per_cycle=[{lo * work / s!r}, {hi * work / s!r}]",
    ]  # fmt: skip


def one_run(args: tuple[str, str, int, list[str]]) -> tuple[str, str, int, RunResult]:
    method, part, seed, overrides = args
    from edgefl.scenario import load_scenario, scenario_to_toml
    from edgefl.sweep.executors import compute_run

    sc = load_scenario(PRESET, [*overrides, *METHODS[method], *PARTITIONS[part], f"seed={seed}"])
    return method, part, seed, compute_run(scenario_to_toml(sc), threads=1)


def to_target(result: RunResult, target: float) -> dict[str, float]:
    """Table I's costs at the end of the first round reaching ``target`` accuracy (NaN if never), and the best
    accuracy of the run."""
    from edgefl.sweep.spec import Target
    from edgefl.sweep.table import time_to_target

    reached = time_to_target(result.rounds, Target(columns=("test_accuracy",), value=target, sense="max"))
    best = result.summary["best_accuracy"]
    best = np.nan if best is None else best
    if np.isnan(reached["target_round"]):
        return {"rounds": np.nan, "energy_kj": np.nan, "latency_min": np.nan, "comp_tflops": np.nan,
                "comm_gb": np.nan, "best_acc": best}  # fmt: skip
    r = reached["target_round"]
    upto = result.device_rounds[result.device_rounds["round"] <= r]
    return {
        "rounds": r, "energy_kj": reached["energy_to_target_j"] / 1e3,
        "latency_min": reached["sim_time_to_target_s"] / 60,
        "comp_tflops": float(upto["flops"].sum()) / 1e12, "comm_gb": float(upto["bits"].sum()) / 8e9, "best_acc": best,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/anycostfl_example")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--train-samples", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    overrides = [*scaled_overrides(a.devices, a.train_samples), f"rounds={a.rounds}", "checkpoint_every=0"]
    print("overrides of", PRESET, ":", " ".join(overrides))
    jobs = [(m, p, s, overrides) for p in PARTITIONS for m in METHODS for s in range(a.seeds)]
    with ProcessPoolExecutor(max_workers=a.workers) as pool:
        results = list(pool.map(one_run, jobs))

    rows = [{"partition": p, "method": m, "seed": s, **to_target(res, TARGET[p])} for m, p, s, res in results]
    per_seed = pd.DataFrame(rows)
    table = per_seed.groupby(["partition", "method"], sort=False).agg(
        **{c: (c, "mean") for c in ("rounds", "energy_kj", "latency_min", "comp_tflops", "comm_gb")},
        best_acc=("best_acc", "mean"), best_acc_std=("best_acc", "std"),
        reached=("rounds", lambda x: int(x.notna().sum())),
    ).reset_index()  # fmt: skip
    table.insert(2, "target_acc", table["partition"].map(TARGET))
    for c in ("latency_min", "energy_kj"):  # Table I's "(1.7x)": baseline cost over AnycostFL's
        ref = table[table["method"] == "AnycostFL"].set_index("partition")[c]
        table[f"{c}_vs_anycostfl"] = table[c] / table["partition"].map(ref)
    from edgefl.io import atomic_write_text
    from edgefl.report import figures_page

    atomic_write_text(out / "anycostfl_table.csv", table.to_csv(index=False))
    atomic_write_text(out / "anycostfl_per_seed.csv", per_seed.to_csv(index=False))  # the means' inputs
    pd.set_option("display.width", 200)
    print(table.round(4).to_string(index=False))

    import plotly.graph_objects as go

    figs = {}
    for p in PARTITIONS:
        for key, col, scale, label in (("time", "sim_time_s", 60, "simulated time [min]"),
                                        ("energy", "energy_cum_j", 1e3, "energy [kJ]")):  # fmt: skip
            fig = go.Figure()
            for m, pp, s, res in results:
                if pp == p and s == 0:
                    r = res.rounds
                    fig.add_scatter(x=r[col] / scale, y=r["test_accuracy"], mode="lines", name=m)
            fig.update_layout(title=f"{p}: accuracy vs {label} (seed 0)", xaxis_title=label, yaxis_title="test accuracy")
            figs[f"{p}_{key}".replace("-", "_")] = fig
    atomic_write_text(out / "anycostfl_figures.html", figures_page("AnycostFL vs baselines (laptop scale)", figs))
    print("wrote", out / "anycostfl_table.csv", "and", out / "anycostfl_figures.html")


if __name__ == "__main__":
    main()
