"""Codec share of a round: encoding + budget search + decoding over local training, per compressing method.

One round of ``anycostfl_fmnist`` (60 devices, 100 images each, the paper's CNN, one torch thread) per method
(AnycostFL's FGC, STC, QSGD, FedHQ, UVeQFed). Each measurement is a child process that plays the round with
``run_scenario`` and times, per device, the workload's ``train`` call (local training [s]) and the rest of the
method's ``client_update`` (what the device does after training: the budget search, the encoding, and building
the update the server applies). Decoders run nowhere in a round (the encoder hands over the update the payload
decodes to), so each child also decodes every payload of its round once after it, with the public decoders, and
times that. The codec share is (client_update - train + decode) / train, summed over the round's devices.

``--baseline PATH`` pairs this tree against another source tree (e.g. the code before the codec work, checked out
with ``git worktree add``): per method the children alternate, this tree and the baseline's (the machine is
shared and noisy; benchmarks/pairing.py), and the median shares of both are printed. Each child imports edgefl
from its own tree.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_speed.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/train_speed.py --baseline /path/to/old/tree --repeats 2
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pairing import alternate

PRESET = "anycostfl_fmnist"
PER_DEVICE = 100
METHODS = ("anycostfl", "stc", "qsgd", "fedhq", "uveqfed")
TARGET_SHARE = 0.25
HERE = Path(__file__).resolve().parents[1]  # the source tree this script belongs to


def _capture(payloads: list) -> None:
    """Wrap the public encoders so that every payload a round makes is kept as (decode function, args)."""
    import edgefl.compression as comp
    from edgefl.compression import codec, stc, uveqfed

    def keep(decoder, make_args):
        def wrapper(inner):
            def run(*args, **kwargs):
                out = inner(*args, **kwargs)
                payloads.append((decoder, make_args(out, args)))
                return out

            return run

        return wrapper

    by_names = lambda out, _: (out.payload, list(out.update))  # noqa: E731
    comp.compress = keep(codec.decode_with_mask, by_names)(comp.compress)
    codec.TopkQuantSizer.encode = keep(codec.decode_with_mask, by_names)(codec.TopkQuantSizer.encode)
    stc.TernarySizer.encode = keep(stc.decode_ternary, by_names)(stc.TernarySizer.encode)
    init = uveqfed.LatticeSizer.__init__

    def lattice_init(self, update, dither_rng, **kwargs):
        self._bench_rng = copy.deepcopy(dither_rng)  # the decoder regenerates the dither from the same state
        init(self, update, dither_rng, **kwargs)

    uveqfed.LatticeSizer.__init__ = lattice_init
    lattice_args = lambda out, args: (out.payload, list(out.update), args[0]._bench_rng)  # noqa: E731
    uveqfed.LatticeSizer.encode = keep(uveqfed.decode_lattice, lattice_args)(uveqfed.LatticeSizer.encode)


def child(method: str) -> None:
    """One round of ``method``; prints the per-round sums [s] as one JSON line."""
    import torch

    torch.set_num_threads(1)
    from edgefl.algorithms import METHODS as REGISTRY
    from edgefl.learning.workload import Workload
    from edgefl.runner import run_scenario
    from edgefl.scenario import load_scenario

    times = {"train_s": 0.0, "update_s": 0.0}

    def timed(inner, key: str):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            times[key] += time.perf_counter() - t0
            return out

        return run

    klass = REGISTRY[method]
    Workload.train = timed(Workload.train, "train_s")
    klass.client_update = timed(klass.client_update, "update_s")
    payloads: list = []
    _capture(payloads)
    sc = load_scenario(PRESET, [
        "rounds=1", "checkpoint_every=0", f"method.name={method}", f"data.max_train_samples={60 * PER_DEVICE}",
        "data.max_test_samples=1000", f"fleet.flops_per_cycle_scale={PER_DEVICE / 1000!r}",
    ])  # fmt: skip
    t0 = time.perf_counter()
    result = run_scenario(sc)
    wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    for decoder, args in payloads:
        decoder(*args)
    decode_s = time.perf_counter() - t0
    codec_s = times["update_s"] - times["train_s"] + decode_s
    bits = [float(b) for b in result.device_rounds["bits"]]
    print(json.dumps({"wall_s": wall, "train_s": times["train_s"], "codec_s": codec_s, "decode_s": decode_s,
                      "share": codec_s / times["train_s"], "payloads": len(payloads), "bits_sum": sum(bits),
                      "bits_sha": hashlib.sha256(json.dumps(bits).encode()).hexdigest()[:12]}))


def measure(method: str, tree: Path = HERE) -> dict:
    """One child round of ``method`` importing edgefl from ``tree``."""
    path = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, __file__, "--child", method], capture_output=True, text=True, env=env,
                         cwd=tree)  # fmt: skip
    if out.returncode != 0:
        sys.exit(f"child {method} ({tree}) failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(label: str, m: dict) -> str:
    return (f"  {label}: codec {m['codec_s']:.2f} s (decode {m['decode_s']:.2f} s) / training {m['train_s']:.2f} s"
            f" = share {m['share']:.3f}; round {m['wall_s']:.1f} s, {m['payloads']} payloads, "
            f"{m['bits_sum']:.0f} bits (sha {m['bits_sha']})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default: all five)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds per method and tree (medians are printed)")
    ap.add_argument("--baseline", type=Path, default=None, help="a source tree to pair against")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        sys.exit(f"--methods: {', '.join(unknown)} not in {', '.join(METHODS)}")
    met = True
    for method in methods:
        print(f"{method}: one round of {PRESET}, 60 devices x {PER_DEVICE} images, one thread")
        if args.baseline is None:
            runs = sorted((measure(method) for _ in range(args.repeats)), key=lambda m: m["share"])
            cur = runs[len(runs) // 2]
        else:
            cur, base, _, pairs = alternate(lambda: measure(method), lambda: measure(method, args.baseline.resolve()),
                                            args.repeats)  # fmt: skip
            cur = sorted((a for a, _ in pairs), key=lambda m: m["share"])[len(pairs) // 2]
            base = sorted((b for _, b in pairs), key=lambda m: m["share"])[len(pairs) // 2]
            print(_row(f"baseline {args.baseline}", base))
        print(_row(f"this tree ({HERE})", cur))
        met &= cur["share"] <= TARGET_SHARE
    print(f"target: codec share <= {TARGET_SHARE} for every method: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
