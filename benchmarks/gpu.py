"""The GPU path (``train.device = "cuda"``) against the CPU path: rounds per second and the paper-scale run.

Two models, each one round after a warm-up round, on the GPU and on the CPU (one torch thread), FedAvg so that
the round is training and evaluation (the codecs run on the CPU on either path):

- the CNN of ``anycostfl_fmnist`` (McMahan's, 1.66 M parameters): 60 devices x ``--images`` Fashion-MNIST images;
- VGG-9 of ``anycostfl_cifar10``: 60 devices on CIFAR-10 batches written here (random pixels in the official
  layout, seeded; the speed of a round does not depend on what the pixels show).

It prints each round's wall time and the GPU's rounds per second over the CPU's, checks that the GPU gives the same
tables twice (deterministic algorithms), and with ``--paper`` runs the paper-scale AnycostFL FMNIST study once on
the GPU (60 devices x 1,000 images, 300 rounds, the preset's method) and prints its wall time.

    .venv/bin/python benchmarks/gpu.py [--images 1000] [--paper]

Needs a CUDA GPU that torch sees; without one it says so and exits 2 (the figures in README.md say on which card
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


def _round(preset: str, sets: list[str], device: str) -> tuple[float, str]:
    """Wall time [s] of round 2 of ``preset`` (FedAvg, 2 rounds) on ``device``, and a hash of its tables."""
    from edgefl.runner import prepare
    from edgefl.scenario import load_scenario

    sc = load_scenario(preset, [*sets, "rounds=2", "checkpoint_every=0", "method.name=fedavg",
                                f"train.device={device}"])  # fmt: skip
    sim = prepare(sc)
    sim.step(1)  # warm-up: kernels, caches, allocator
    t0 = time.perf_counter()
    sim.step(2)
    wall = time.perf_counter() - t0
    result = sim.result()
    text = result.rounds.drop(columns="wall_time_s").to_csv() + result.device_rounds.to_csv()
    return wall, hashlib.sha256(text.encode()).hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1000, help="training images per device (60 devices)")
    ap.add_argument("--paper", action="store_true", help="also the paper-scale AnycostFL FMNIST run on the GPU")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU is visible to torch here: nothing to measure (run it on a machine with one)",
              file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(1)
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    n = 60 * args.images
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "CNN (anycostfl_fmnist)": ("anycostfl_fmnist", [f"data.max_train_samples={n}"]),
            "VGG-9 (anycostfl_cifar10)": ("anycostfl_cifar10", [
                f"data.data_dir='{_cifar(Path(tmp), max(n // 5, 200))}'", f"data.max_train_samples={n}",
            ]),
        }  # fmt: skip
        for label, (preset, sets) in models.items():
            gpu_s, gpu_hash = _round(preset, sets, "cuda")
            again_s, again_hash = _round(preset, sets, "cuda")
            cpu_s, _ = _round(preset, sets, "cpu")
            print(f"{label}, 60 devices x {args.images} images, one round: GPU {min(gpu_s, again_s):.2f} s, CPU "
                  f"{cpu_s:.2f} s: {cpu_s / min(gpu_s, again_s):.1f}x the CPU's rounds per second; the same tables "
                  f"on the GPU twice: {gpu_hash == again_hash}")  # fmt: skip
    if args.paper:
        from edgefl.runner import run_scenario
        from edgefl.scenario import load_scenario

        sc = load_scenario("anycostfl_fmnist", ["rounds=300", "checkpoint_every=0", "data.max_train_samples=60000",
                                                "train.device=cuda"])  # fmt: skip
        t0 = time.perf_counter()
        result = run_scenario(sc)
        wall = time.perf_counter() - t0
        best = float(result.rounds["test_accuracy"].max())
        print(f"paper-scale AnycostFL FMNIST (60 devices x 1,000 images, 300 rounds) on the GPU: {wall / 60:.1f} min "
              f"wall, best test accuracy {best:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
