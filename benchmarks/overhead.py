"""edgefl's overhead over a bare PyTorch FedAvg loop doing the same work, in one process.

Work: MLP (64-64-10) on scikit-learn digits, 10 devices (IID), all 10 train each round, 3 rounds,
2 local epochs, batch 16, lr 0.1, test evaluation every round. The bare loop loads and splits the same data,
trains the same model with the same batches and aggregates the same way; it only lacks the simulator
(radio, fleet, SimPy events, cost accounting, result tables). Both sides are timed alternately, several
repetitions. The ratio of the fastest repetitions is the headline (the least disturbed by other load on a
shared machine, as timeit recommends); the ratio of medians is printed too. Target: <= 1.10.

    .venv/bin/python benchmarks/overhead.py [--reps 7]
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
from edgefl.runner import run_scenario
from edgefl.scenario import load_scenario
from edgefl.seeding import Streams

OVERRIDES = [
    "rounds=3", "fleet.n_devices=10", "method.clients_per_round=10", "model.hidden=[64]",
    "train.local_epochs=2", "train.batch_size=16", "train.lr=0.1", "train.eval_every=1",
]  # fmt: skip


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    scenario = load_scenario("quickstart", OVERRIDES)
    ours = run_scenario(scenario).rounds["test_accuracy"].tolist()  # warm-up both sides
    bare = bare_fedavg(scenario)
    same = np.allclose(ours, bare, atol=1e-12)
    t_edgefl, t_bare = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter(); run_scenario(scenario); t_edgefl.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); bare_fedavg(scenario); t_bare.append(time.perf_counter() - t0)
    me, mb = statistics.median(t_edgefl), statistics.median(t_bare)
    fe, fb = min(t_edgefl), min(t_bare)
    print(f"work: MLP on digits, 10 devices, 3 rounds, {args.reps} repetitions (torch threads: {torch.get_num_threads()})")
    print(f"same accuracies as the bare loop: {same} (edgefl {ours[-1]:.4f}, bare {bare[-1]:.4f})")
    print(f"edgefl: fastest {fe:.4f} s, median {me:.4f} s   bare torch: fastest {fb:.4f} s, median {mb:.4f} s")
    print(f"median ratio edgefl/bare: {me / mb:.3f}")
    print(f"overhead ratio edgefl/bare: {fe / fb:.3f}  (target <= 1.10)")


if __name__ == "__main__":
    main()
