"""Scale of the surrogate path: AnycostFL on 10,000 devices x 100 rounds, and the cost of doubling devices.

Each size runs in a fresh child process (so its peak memory is its own): the full radio model (3GPP path
loss, redraw mobility every round, FDMA rates), per-round AnycostFL optimisation of every device (closed
form), SimPy rounds with a deadline, energy budgets, and the surrogate loss of Theorem 2. The wall time is
the ``run_scenario`` call (tables built in memory); peak memory is the child's maximum resident set size,
imports included. Targets (issue #9): <= 20 s and <= 1 GB on 2 cores; doubling devices costs <= 2.2x.

Paired against a baseline (issue #17: at most 1.5x the time of the code before the run-long clock, commit
35c1018): ``--baseline-ref REF`` exports that commit of this repository (``git archive``) to a temporary folder,
``--baseline PATH`` takes a source tree as it is; the children then alternate, this tree and the baseline's, at
10,000 devices only, and the medians of both and the paired ratios are printed. Each child imports edgefl from
its own tree (the folder above ``benchmarks/`` for this one).

    .venv/bin/python benchmarks/scale.py            # 10,000 and 20,000 devices, 100 rounds, 3 runs each
    .venv/bin/python benchmarks/scale.py --rounds 20
    .venv/bin/python benchmarks/scale.py --baseline-ref 35c1018 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from pairing import alternate, median

PRESET = "anycostfl_surrogate_10k"
TARGET_BASELINE_RATIO = 1.5
HERE = Path(__file__).resolve().parents[1]  # the source tree this script belongs to


def child(n_devices: int, rounds: int) -> None:
    from edgefl.run.runner import run_scenario
    from edgefl.run.load import load_scenario

    sc = load_scenario(
        PRESET, [f"fleet.n_devices={n_devices}", f"method.clients_per_round={n_devices}", f"rounds={rounds}"]
    )
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_scenario(sc)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = len(result.device_rounds)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kB
    last = result.rounds.iloc[-1]
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_mb": peak_mb, "device_rows": rows, "loss": float(last["train_loss"]),
                      "torch_loaded": "torch" in sys.modules}))  # fmt: skip


def measure(n_devices: int, rounds: int, tree: Path = HERE) -> dict:
    """One child run of ``n_devices`` x ``rounds`` importing edgefl (and the presets) from ``tree``."""
    path = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n_devices), "--rounds", str(rounds)],
        capture_output=True, text=True, env=env, cwd=tree,
    )  # fmt: skip
    if out.returncode != 0:
        sys.exit(f"child with {n_devices} devices ({tree}) failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def export(ref: str, into: Path) -> Path:
    """The files of commit ``ref`` of this repository, written under ``into`` (``git archive``)."""
    archive = into / "tree.tar"
    with archive.open("wb") as fh:
        done = subprocess.run(["git", "-C", str(HERE), "archive", ref], stdout=fh, stderr=subprocess.PIPE)
    if done.returncode != 0:
        sys.exit(f"--baseline-ref {ref}: git archive failed: {done.stderr.decode().strip()}")
    tree = into / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def paired(tree: Path, label: str, args: argparse.Namespace) -> None:
    """This tree against the baseline ``tree``, alternating, at ``args.devices`` devices."""
    cur, base, _, pairs = alternate(lambda: measure(args.devices, args.rounds),
                                    lambda: measure(args.devices, args.rounds, tree), args.repeats)  # fmt: skip
    ratios = sorted(c["wall_s"] / b["wall_s"] for c, b in pairs)
    ratio = median(ratios)
    times = ", ".join(f"{c['wall_s']:.1f}/{b['wall_s']:.1f}" for c, b in pairs)
    print(f"{args.devices} devices x {args.rounds} rounds, median of {args.repeats}, alternating:")
    for name, m in ((f"this tree ({HERE})", cur), (f"baseline {label}", base)):
        print(f"  {name}: {m['wall_s']:.1f} s, peak {m['peak_mb']:.0f} MB, {m['device_rows']} device rows, "
              f"final surrogate loss {m['loss']:.6f}")  # fmt: skip
    print(f"this tree / baseline: {ratio:.2f}   (paired ratios: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"times this/baseline: {times} s)")  # fmt: skip
    cpu = sorted(c["cpu_s"] / b["cpu_s"] for c, b in pairs)
    print(f"CPU time this tree / baseline: {median(cpu):.2f}   (paired: {', '.join(f'{r:.2f}' for r in cpu)}; the "
          "process's own CPU time, less sensitive than wall time to what else runs on the machine)")  # fmt: skip
    met = "met" if ratio <= TARGET_BASELINE_RATIO else "NOT met"
    print(f"target: <= {TARGET_BASELINE_RATIO}x the baseline: {met}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--devices", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each size (medians are printed)")
    ap.add_argument("--baseline-ref", default=None, help="a commit to pair against (exported with git archive)")
    ap.add_argument("--baseline", type=Path, default=None, help="a source tree to pair against")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.rounds)
        return
    if args.baseline is not None:
        paired(args.baseline.resolve(), str(args.baseline), args)
        return
    if args.baseline_ref is not None:
        with tempfile.TemporaryDirectory(prefix="edgefl-baseline-") as tmp:
            paired(export(args.baseline_ref, Path(tmp)), f"commit {args.baseline_ref}", args)
        return
    # alternate the two sizes so both see the same machine; report medians (the machine is shared and noisy)
    base, double, ratios, _ = alternate(lambda: measure(args.devices, args.rounds),
                                        lambda: measure(2 * args.devices, args.rounds), args.repeats)  # fmt: skip
    print(f"{args.devices} devices x {args.rounds} rounds: {base['wall_s']:.1f} s, peak {base['peak_mb']:.0f} MB"
          f"   (median of {args.repeats}; {base['device_rows']} device rows, final surrogate loss "
          f"{base['loss']:.4f}, torch loaded: {base['torch_loaded']})")  # fmt: skip
    print(f"{2 * args.devices} devices x {args.rounds} rounds: {double['wall_s']:.1f} s, peak {double['peak_mb']:.0f} MB")
    print(f"doubling devices: time ratio {median(ratios):.2f}"
          f"   (paired ratios: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
