"""edgefl's overhead over a bare PyTorch FedAvg loop doing the same work, in one process.

Work: MLP (64-64-10) on scikit-learn digits, 10 devices (IID), all 10 train each round, 3 rounds, lr 0.1,
test evaluation every round, at two local loads: McMahan et al.'s FedAvg defaults (E = 5 epochs, batch 10;
the headline) and the lighter quickstart load (E = 2, batch 16), where edgefl's fixed per-run cost (fleet,
radio, result tables, summary; about 20 ms) weighs more. The bare loop loads and splits the same data,
trains the same model with the same batches and aggregates the same way; it only lacks the simulator
(radio, fleet, SimPy events, cost accounting, result tables). Both sides run back to back in each
repetition (alternating which goes first); the headline is the median over repetitions of the paired ratio edgefl/bare, which cancels slow
drifts of a shared machine and ignores a disturbed repetition. Target: <= 1.10.

    .venv/bin/python benchmarks/overhead.py [--reps 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from edgefl.learning.datasets import load_digits
from edgefl.learning.models import build_model, init_parameters
from edgefl.learning.partition import partition_iid
from edgefl.learning.train import LocalTrainConfig, evaluate, local_train
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario
from edgefl.seeding import Streams

OVERRIDES = [
    "rounds=3", "fleet.n_devices=10", "method.clients_per_round=10", "model.hidden=[64]",
    "train.lr=0.1", "train.eval_every=1",
]  # fmt: skip
LOADS = {  # name: (local epochs, batch size)
    "FedAvg defaults E=5, B=10": (5, 10),
    "quickstart load E=2, B=16": (2, 16),
}


def bare_fedavg(scenario) -> list[float]:
    """The same FedAvg steps with nothing but torch (same seeds, so the same accuracies)."""
    streams = Streams(scenario.seed)
    data = load_digits(test_fraction=scenario.data.test_fraction, rng=streams.numpy("dataset"))
    parts = partition_iid(data.y_train.size, scenario.fleet.n_devices, streams.numpy("partition"))
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xt, yt = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    local = [(x[p], y[p]) for p in parts]
    model = build_model("mlp", in_features=64, n_classes=10, hidden=scenario.model.hidden)
    init_parameters(model, streams.torch("torch_init"))
    glob = {k: v.detach().clone() for k, v in model.named_parameters()}
    t = scenario.train
    cfg = LocalTrainConfig(epochs=t.local_epochs, batch_size=t.batch_size, lr=t.lr)
    accs = []
    for r in range(1, scenario.rounds + 1):
        chosen = np.sort(streams.numpy("selection", r).choice(len(parts), size=scenario.method.clients_per_round, replace=False))
        total = sum(local[d][0].shape[0] for d in chosen)
        new = {k: torch.zeros_like(v) for k, v in glob.items()}
        for d in chosen:
            with torch.no_grad():
                for k, p in model.named_parameters():
                    p.copy_(glob[k])
            local_train(model, *local[d], cfg, streams.torch("torch_batches", r, int(d)))
            with torch.no_grad():
                for k, p in model.named_parameters():
                    new[k].add_(p - glob[k], alpha=local[d][0].shape[0] / total)
        glob = {k: glob[k] + new[k] for k in glob}
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(glob[k])
        accs.append(evaluate(model, xt, yt)[0])
    return accs


def measure(scenario, reps: int) -> tuple[float, list[float], list[float], bool]:
    """Paired timings of edgefl and the bare loop; (median paired ratio, edgefl times, bare times, same result)."""
    ours = run_scenario(scenario).rounds["test_accuracy"].tolist()  # warm-up both sides
    same = np.allclose(ours, bare_fedavg(scenario), atol=1e-12)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn(scenario)
        return time.perf_counter() - t0

    t_edgefl, t_bare = [], []
    for rep in range(reps):  # alternate which side goes first, so neither always runs warmer
        if rep % 2 == 0:
            t_edgefl.append(timed(run_scenario)); t_bare.append(timed(bare_fedavg))  # fmt: skip
        else:
            t_bare.append(timed(bare_fedavg)); t_edgefl.append(timed(run_scenario))  # fmt: skip
    return statistics.median(e / b for e, b in zip(t_edgefl, t_bare)), t_edgefl, t_bare, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    print(f"work: MLP on digits, 10 devices, 3 rounds, {args.reps} paired repetitions (torch threads: {torch.get_num_threads()})")
    for i, (name, (epochs, batch)) in enumerate(LOADS.items()):
        scenario = load_scenario("quickstart", [*OVERRIDES, f"train.local_epochs={epochs}", f"train.batch_size={batch}"])
        paired, t_e, t_b, same = measure(scenario, args.reps)
        print(f"[{name}] same accuracies as the bare loop: {same}; edgefl median {statistics.median(t_e):.4f} s, "
              f"bare torch median {statistics.median(t_b):.4f} s")  # fmt: skip
        label = "overhead ratio edgefl/bare" if i == 0 else "  ratio at the lighter load"
        print(f"{label} (median of paired ratios): {paired:.3f}" + ("  (target <= 1.10)" if i == 0 else ""))


if __name__ == "__main__":
    main()
