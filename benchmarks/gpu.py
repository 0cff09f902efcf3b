"""The GPU path (``train.device = "cuda"``) against the CPU path: rounds per second and the paper-scale run.

Two models, FedAvg so that the round is training and evaluation, with T_max and the energy budgets lifted so that
every device trains every round (the presets' budgets let no device train the full model at 1,000 images):

- the CNN of ``anycostfl_fmnist`` (McMahan's, 1.66 M parameters) on Fashion-MNIST;
- VGG-9 of ``anycostfl_cifar10``: CIFAR-10 batches written here (random pixels in the official layout, seeded; the
  speed of a round does not depend on what the pixels show).

At ``--images`` per device (60 devices) it times round 2 on the GPU twice and on the CPU (one torch thread,
inline) and prints the GPU's rounds per second over the CPU's and whether the GPU gave the same tables twice
(deterministic algorithms); at ``--gpu-images`` (default the paper's 1,000) it times a round on the GPU alone;
with ``--paper`` it runs the paper-scale AnycostFL FMNIST study on the GPU (60 devices x 1,000 images, the
preset's method and budgets, ``--paper-rounds`` of the paper's 300) and prints its wall time.

Measured figures, with their dates, cards, loads and commands: ``docs/performance.md``, section "GPU".

    .venv/bin/python benchmarks/gpu.py [--images 100] [--gpu-images 1000] [--models cnn,vgg] [--paper]
        [--paper-rounds 300] [--paper-runs 1] [--paper-images 1000] [--paper-workers 0] [--paper-profile]
        [--vectorise auto|on|off]

Needs a CUDA GPU that torch sees; without one it says so and exits 2 (the figures in docs/performance.md say on which card
they were measured, or that the GPU path is untested on hardware).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _cifar(folder: Path, per_batch: int) -> Path:
    """CIFAR-10 python batches of random pixels (seeded) in the official layout."""
    root = folder / "cifar-10-batches-py"
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in rng.integers(0, 10, size=per_batch)]}  # fmt: skip
        (root / name).write_bytes(pickle.dumps(batch, protocol=2))
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": [str(i).encode() for i in range(10)]}))
    return folder


LIFTED_DEADLINE_S = 600.0
"""T_max of the FedAvg rounds [s]: FedAvg trains the full model, which no device finishes within the presets' T_max
at 1,000 images (the preflight says so); the rounds here time the training, not the radio."""


VECTORISE = "auto"
"""``train.vectorise`` of every round here (``--vectorise``): ``auto`` trains a round's jobs together on the GPU."""


def _round(preset: str, sets: list[str], device: str, method: str = "fedavg", rounds: int = 2) -> tuple[float, str]:
    """Wall time [s] per round of rounds 2..``rounds`` of ``preset`` (``method``) on ``device`` (round 1 is the
    warm-up: kernels, caches, allocator), and a hash of the run's tables."""
    from edgefl.run.runner import prepare
    from edgefl.run.load import load_scenario

    sc = load_scenario(preset, [*sets, f"rounds={rounds}", "checkpoint_every=0", f"method.name={method}",
                                f"train.device={device}", f"round.deadline_s={LIFTED_DEADLINE_S}", "fleet.budget.kind=none",
                                f"train.vectorise={VECTORISE}"])  # fmt: skip
    sim = prepare(sc)
    sim.step(1)
    t0 = time.perf_counter()
    for r in range(2, rounds + 1):
        sim.step(r)
    wall = (time.perf_counter() - t0) / (rounds - 1)
    result = sim.result()
    return wall, _digest(result)


def _digest(result) -> str:
    """A hash of a run's two tables without the host's wall time."""
    text = result.rounds.drop(columns="wall_time_s").to_csv() + result.device_rounds.to_csv()
    return hashlib.sha256(text.encode()).hexdigest()[:12]


PARTS = {
    "codecs (the methods' finish_update: budget search and coding)": r"\(finish_update\)",
    "training, vectorised groups (Workload.train_many)": r"\(train_many\)",
    "training, one by one (Workload.train)": r"workload\.py:.*\(train\)",
    "aggregation (the method's aggregate)": r"\(aggregate\)",
    "evaluation (Workload.evaluate)": r"workload\.py:.*\(evaluate\)",
}
"""The parts of a round :func:`_profile` reports: label -> a pattern of the profiled function's
``file:line(name)``."""


def _profile(scenario, device: str) -> None:
    """Round 3 of ``scenario`` (after two warm-up rounds) under cProfile, the GPU synchronised at its end: the
    round's wall time and the host time of each part in :data:`PARTS` (cumulative; the GPU's asynchronous work
    lands in the part that waits for it, so on a GPU these are the host's view)."""
    import cProfile
    import pstats
    import re

    import torch

    from edgefl.run.runner import prepare

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sim = prepare(scenario)
    sim.step(1)
    sim.step(2)
    sync()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    sim.step(3)
    sync()
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (calls, primitive calls, tottime, cumtime, callers)
    parts = []
    for label, pattern in PARTS.items():
        rows = [(v[0], v[3]) for (f, ln, name), v in stats.items() if re.search(pattern, f"{f}:{ln}({name})")]
        outer = max(rows, key=lambda r: r[1], default=(0, 0.0))  # the outermost match (nested ones are inside it)
        parts.append(f"{label} {outer[1]:.2f} s in {outer[0]} calls")
    print(f"round 3 under cProfile on {device}: {wall:.2f} s; " + "; ".join(parts), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=100,
                    help="training images per device (60 devices) of the GPU-against-CPU rounds")
    ap.add_argument("--gpu-images", type=int, default=1000,
                    help="training images per device of the GPU-only rounds (the paper's 1,000; 0: none)")
    ap.add_argument("--paper", action="store_true", help="also the paper-scale AnycostFL FMNIST run on the GPU")
    ap.add_argument("--paper-rounds", type=int, default=300,
                    help="rounds of the paper-scale run (the paper's 300; fewer to time a part of it)")
    ap.add_argument("--paper-images", type=int, default=1000,
                    help="training images per device of the paper-scale run (the paper's 1,000; fewer to check this "
                         "script on the CPU)")
    ap.add_argument("--paper-runs", type=int, default=1,
                    help="run the paper-scale study this many times in one process and say whether the tables agree")
    ap.add_argument("--paper-profile", action="store_true",
                    help="profile round 3 of the paper-scale study (after 2 warm-up rounds): where its time goes")
    ap.add_argument("--paper-workers", type=int, default=0,
                    help="the paper-scale run's jobs on this many worker processes (train.executor=processes, each "
                         "with its own CUDA context on the GPU); 0: inline")
    ap.add_argument("--models", default="cnn,vgg", help="comma-separated: cnn (anycostfl_fmnist), vgg (anycostfl_cifar10)")
    ap.add_argument("--cpu-as-gpu", action="store_true",
                    help="run every step with train.device=cpu (checks this script where no GPU is)")
    ap.add_argument("--vectorise", default="auto", choices=("auto", "on", "off"),
                    help="train.vectorise of every round (auto: together on the GPU, one by one on the CPU)")
    args = ap.parse_args()
    global VECTORISE
    VECTORISE = args.vectorise
    import torch

    gpu = "cpu" if args.cpu_as_gpu else "cuda"
    if gpu == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU is visible to torch here: nothing to measure (run it on a machine with one)",
              file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(1)
    name = torch.cuda.get_device_name(0) if gpu == "cuda" else "none (--cpu-as-gpu)"
    print(f"GPU: {name}; torch {torch.__version__}; CPU path: one torch thread, inline; train.vectorise="
          f"{VECTORISE}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cifar = _cifar(Path(tmp), max(60 * max(args.images, args.gpu_images) // 5, 200))

        def sets(preset: str, images: int) -> list[str]:
            data = [f"data.data_dir='{cifar}'"] if preset == "anycostfl_cifar10" else []
            return [*data, f"data.max_train_samples={60 * images}"]

        known = {"cnn": ("CNN (anycostfl_fmnist)", "anycostfl_fmnist"),
                 "vgg": ("VGG-9 (anycostfl_cifar10)", "anycostfl_cifar10")}
        models = dict(known[m] for m in args.models.split(",") if m)
        for label, preset in (models.items() if args.images else ()):
            gpu_s, gpu_hash = _round(preset, sets(preset, args.images), gpu)
            again_s, again_hash = _round(preset, sets(preset, args.images), gpu)
            cpu_s, _ = _round(preset, sets(preset, args.images), "cpu")
            print(f"{label}, FedAvg, 60 devices x {args.images} images, one round: GPU {min(gpu_s, again_s):.2f} s, "
                  f"CPU {cpu_s:.2f} s: {cpu_s / min(gpu_s, again_s):.1f}x the CPU's rounds per second; the same "
                  f"tables on the GPU twice: {gpu_hash == again_hash}", flush=True)  # fmt: skip
        if args.gpu_images:
            for label, preset in models.items():
                gpu_s, _ = _round(preset, sets(preset, args.gpu_images), gpu)
                print(f"{label}, FedAvg, 60 devices x {args.gpu_images} images, one round on the GPU: {gpu_s:.2f} s "
                      f"({1 / gpu_s:.2f} rounds per second)", flush=True)  # fmt: skip
    if args.paper:
        from edgefl.run.load import load_scenario
        from edgefl.run.runner import run_scenario

        pool = ["train.executor=processes", f"train.workers={args.paper_workers}"] if args.paper_workers else []
        sets = [f"rounds={args.paper_rounds}", "checkpoint_every=0", f"data.max_train_samples={60 * args.paper_images}",
                f"train.device={gpu}", f"train.vectorise={VECTORISE}", *pool]  # fmt: skip
        where = f"{args.paper_workers} worker processes" if args.paper_workers else "inline"
        digests = []
        for run in range(1, args.paper_runs + 1):
            t0 = time.perf_counter()
            result = run_scenario(load_scenario("anycostfl_fmnist", sets))
            wall = time.perf_counter() - t0
            rounds = result.rounds
            digests.append(_digest(result))
            later = rounds["wall_time_s"].iloc[1:]  # round 1 holds the warm-up (kernels, allocator)
            print(f"paper-scale AnycostFL FMNIST (60 devices x {args.paper_images} images) on the GPU, jobs {where}, "
                  f"train.vectorise={VECTORISE}, run {run}: {args.paper_rounds} of the paper's 300 rounds in "
                  f"{wall / 60:.2f} min wall ({wall / args.paper_rounds:.2f} s per round with the start; rounds 2.. "
                  f"{later.mean() if len(later) else float('nan'):.2f} s each by wall_time_s, fastest "
                  f"{later.min() if len(later) else float('nan'):.2f} s), best test accuracy "
                  f"{float(rounds['test_accuracy'].max()):.4f}, tables {digests[-1]}", flush=True)  # fmt: skip
        if len(digests) > 1:
            print(f"the same tables in all {len(digests)} runs: {len(set(digests)) == 1}", flush=True)
    if args.paper_profile:
        from edgefl.run.load import load_scenario

        _profile(load_scenario("anycostfl_fmnist", [
            "rounds=3", "checkpoint_every=0", f"data.max_train_samples={60 * args.paper_images}",
            f"train.device={gpu}", f"train.vectorise={VECTORISE}"]), gpu)  # fmt: skip


if __name__ == "__main__":
    main()
