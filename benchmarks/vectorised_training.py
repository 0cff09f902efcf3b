"""Speed-up of vectorised local training (a round's devices at once, ``torch.func.vmap``,
:func:`~edgefl.learning.train.local_train_many`) over training the devices one by one
(:func:`~edgefl.learning.train.local_train` per device, as :meth:`edgefl.learning.workload.Workload.train` does),
per model of the registry, in one process at one thread.

One round's local training: 60 devices x 100 samples each, one epoch of batch 32 at lr 0.05 (anycostfl_fmnist's
setup: its McMahan CNN on 1x28x28 images; every other model on its registry input shape), samples drawn at random
(the data's values do not change the work). Each repetition times both ways back to back, alternating which goes
first; the headline per model is the median over repetitions of the paired ratio one-by-one / vectorised wall time
(> 1: vectorised is faster). Models with batch norm or buffers cannot be vectorised
(:func:`~edgefl.learning.train.trains_together`) and are listed as excepted. Both ways end at the same parameters up
to float rounding (tests/test_train_many.py).

    OMP_NUM_THREADS=1 python benchmarks/vectorised_training.py [--reps 3] [--devices 60] [--samples 100]
        [--models cnn_mcmahan,mlp] [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from edgefl.learning.config import LocalTrainConfig
from edgefl.learning.models import MODEL_NAMES, MODELS, build_model, init_parameters
from edgefl.learning.train import local_train, local_train_many, trains_together


def _setup(name: str, devices: int, samples: int, on: torch.device):
    entry = MODELS[name]
    model = init_parameters(build_model(name), torch.Generator().manual_seed(0)).to(on)
    gen = torch.Generator().manual_seed(1)
    n = devices * samples
    x = torch.randn(n, *entry.input_shape, generator=gen).to(on)
    y = torch.randint(0, entry.n_classes, (n,), generator=gen).to(on)
    owned = [torch.arange(d * samples, (d + 1) * samples) for d in range(devices)]
    start = {k: v.detach().clone() for k, v in model.named_parameters()}
    return model, start, x, y, owned


def _done(x: torch.Tensor) -> float:
    """Now [s], after the device's queued work has finished (a GPU runs asynchronously)."""
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
    return time.perf_counter()


def _one_by_one(model, start, x, y, owned, cfg) -> float:
    t0 = time.perf_counter()
    for d, rows in enumerate(owned):
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(start[k])
        local_train(model, x[rows], y[rows], cfg, torch.Generator().manual_seed(d))
    return _done(x) - t0


def _vectorised(model, start, x, y, owned, cfg) -> float:
    t0 = time.perf_counter()
    gens = [torch.Generator().manual_seed(d) for d in range(len(owned))]
    local_train_many(model, start, x, y, owned, cfg, gens)
    return _done(x) - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--devices", type=int, default=60)
    ap.add_argument("--samples", type=int, default=100, help="training samples per device")
    ap.add_argument("--models", default=",".join(MODEL_NAMES), help="comma-separated registry names")
    ap.add_argument("--device", default="cpu", help="torch device of the models and data (cpu, cuda)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    on = torch.device(args.device)
    cfg = LocalTrainConfig(epochs=1, batch_size=32, lr=0.05)
    print(f"{args.devices} devices x {args.samples} samples, 1 epoch of batch 32, {args.reps} paired repetitions, "
          f"{torch.get_num_threads()} thread, on {on}")  # fmt: skip
    print(f"{'model':>16} {'one-by-one s':>13} {'vectorised s':>13} {'ratio (median)':>15}  ratios")
    for name in args.models.split(","):
        model, start, x, y, owned = _setup(name, args.devices, args.samples, on)
        if not trains_together(model, cfg):
            print(f"{name:>16} {'excepted: batch norm / buffers':>43}", flush=True)
            continue
        _vectorised(model, start, x, y, owned[:2], cfg)  # warm-up: vmap's first trace
        slow, fast, ratios = [], [], []
        for rep in range(args.reps):
            order = (_one_by_one, _vectorised) if rep % 2 == 0 else (_vectorised, _one_by_one)
            walls = {f: f(model, start, x, y, owned, cfg) for f in order}
            slow.append(walls[_one_by_one])
            fast.append(walls[_vectorised])
            ratios.append(walls[_one_by_one] / walls[_vectorised])
        print(f"{name:>16} {statistics.median(slow):13.2f} {statistics.median(fast):13.2f} "
              f"{statistics.median(ratios):15.2f}  {' '.join(f'{r:.2f}' for r in ratios)}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
