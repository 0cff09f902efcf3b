"""Scale of the surrogate path: AnycostFL on 10,000 devices x 100 rounds, and the cost of doubling devices.

Each size runs in a fresh child process (so its peak memory is its own): the full radio model (3GPP path
loss, redraw mobility every round, FDMA rates), per-round AnycostFL optimisation of every device (closed
form), SimPy rounds with a deadline, energy budgets, and the surrogate loss of Theorem 2. The wall time is
the ``run_scenario`` call (tables built in memory); peak memory is the child's maximum resident set size,
imports included. Targets (issue #9): <= 20 s and <= 1 GB on 2 cores; doubling devices costs <= 2.2x.

    .venv/bin/python benchmarks/scale.py            # 10,000 and 20,000 devices, 100 rounds, 3 runs each
    .venv/bin/python benchmarks/scale.py --rounds 20
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


PRESET = "anycostfl_surrogate_10k"


def child(n_devices: int, rounds: int) -> None:
    from edgefl.runner import run_scenario
    from edgefl.scenario import load_scenario

    sc = load_scenario(
        PRESET, [f"fleet.n_devices={n_devices}", f"method.clients_per_round={n_devices}", f"rounds={rounds}"]
    )
    t0 = time.perf_counter()
    result = run_scenario(sc)
    wall = time.perf_counter() - t0
    rows = len(result.device_rounds)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB
    last = result.rounds.iloc[-1]
    print(json.dumps({"wall_s": wall, "peak_mb": peak_mb, "device_rows": rows, "loss": float(last["train_loss"]),
                      "torch_loaded": "torch" in sys.modules}))  # fmt: skip


def measure(n_devices: int, rounds: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n_devices), "--rounds", str(rounds)],
        capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        sys.exit(f"child with {n_devices} devices failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--devices", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each size (medians are printed)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.rounds)
        return
    # alternate the two sizes so both see the same machine; report medians (the machine is shared and noisy)
    bases, doubles = [], []
    for _ in range(args.repeats):
        bases.append(measure(args.devices, args.rounds))
        doubles.append(measure(2 * args.devices, args.rounds))
    base = sorted(bases, key=lambda m: m["wall_s"])[len(bases) // 2]
    double = sorted(doubles, key=lambda m: m["wall_s"])[len(doubles) // 2]
    ratios = sorted(d["wall_s"] / b["wall_s"] for b, d in zip(bases, doubles))
    print(f"{args.devices} devices x {args.rounds} rounds: {base['wall_s']:.1f} s, peak {base['peak_mb']:.0f} MB"
          f"   (median of {args.repeats}; {base['device_rows']} device rows, final surrogate loss "
          f"{base['loss']:.4f}, torch loaded: {base['torch_loaded']})")  # fmt: skip
    print(f"{2 * args.devices} devices x {args.rounds} rounds: {double['wall_s']:.1f} s, peak {double['peak_mb']:.0f} MB")
    print(f"doubling devices: time ratio {ratios[len(ratios) // 2]:.2f}"
          f"   (paired ratios: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
