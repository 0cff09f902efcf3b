"""Same results before and after a change: run fixed cases, write their tables, compare two such folders.

Cases: every preset cut to 5 rounds (image data cut with ``data.max_train_samples``; CIFAR-10, which this
machine lacks, gets small random batches written in its own format), plus every registered method on the
quickstart under ``round.policy = "deadline"`` with an energy budget, once under the physical cost model and
once under Luo's per-step costs (the issue #10 measurement).

    python benchmarks/identity.py run OUT_DIR [--only SUBSTRING]
    python benchmarks/identity.py compare BEFORE_DIR AFTER_DIR

``compare`` prints one row per case and table: "identical" (bytes equal once ``wall_time_s`` is dropped),
"realistic physics now" (a non-paper preset that moved to ``physics = "realistic"`` since the tables before;
not compared),
"allowed" (only the differences the redesign allows: planned columns under per-step costs, and
``learning_gain`` for methods without (alpha, beta)), or the columns that differ with their row counts.
It exits 1 if any case differs in a way that is not allowed. To compare against an older commit, run the
same script with that commit's tree first on ``PYTHONPATH`` (``git worktree add /tmp/base COMMIT``).
Measured wall time for ``run``: 29 minutes on the shared 2-core machine with other jobs running (the CIFAR-10
preset's VGG-9 alone took about 8 of them).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROUNDS = 5
IMAGE_CUT = {"data.max_train_samples": 3000, "data.max_test_samples": 500}
METHODS = ("fedavg", "anycostfl", "heterofl", "ccfedavg", "fedavg_dropout", "fednova", "stc", "qsgd", "fedhq")
BUDGETED_QUICKSTART = [
    "round.policy=deadline", "round.deadline_s=2.0", "fleet.budget.kind=uniform", "fleet.budget.low_j=0.002",
    "fleet.budget.high_j=0.02", "method.heterofl.levels=['a','b','c']", "method.heterofl.assignment=capability",
]  # fmt: skip
STEP_COSTS = [
    "fleet.step_costs.kind=normal", "fleet.step_costs.step_time_s=0.1", "fleet.step_costs.comm_time_s=2.0",
    "fleet.step_costs.step_energy_j=1e-3", "fleet.step_costs.comm_energy_j=2e-2", "round.deadline_s=30.0",
    "fleet.budget.low_j=0.1", "fleet.budget.high_j=0.5",
]  # fmt: skip
PAPER_QUICKSTART = ["physics=paper", "fleet.tx_power_dbm=20"]
"""The quickstart as it was under the papers' physics (issue #33 moved the preset to the realistic one): the
method cases compare the methods' planning, so they keep the physics of the tables they are compared with."""
NEW_COLUMNS = (
    "wanted", "available", "t_down_s", "t_end_s", "e_down_j", "t_dl_s", "profile", "e_static_j", "e_idle_j",
    "bandwidth_hz", "tx_power_w",
)  # fmt: skip
"""Columns added since the reference trees: by issue #17 (the run-long clock: ``wanted`` to ``t_dl_s``), by
issue #33 (each device's ``profile`` and the energy parts ``e_static_j``, ``e_idle_j`` in ``device_rounds``) and by
issue #36 (each job's allocated ``bandwidth_hz`` and ``tx_power_w``). A table that has them only after the change
is compared without them."""
ABSOLUTE = ("t_start_s", "t_arrive_s")
"""Times that became absolute with issue #17: relative to the round start before (the previous round's end)."""
PLANNED = ("t_cmp_planned_s", "t_com_planned_s", "e_cmp_planned_j", "e_com_planned_j")
WITH_ALPHA_BETA = ("anycostfl", "stc", "qsgd", "fedhq")


def _fake_cifar(folder: Path) -> Path:
    """Small CIFAR-10 python batches (random pixels, seeded) in the official layout."""
    import pickle

    root = folder / "cifar-10-batches-py"
    if root.is_dir():
        return folder
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        n = 200
        batch = {b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in rng.integers(0, 10, size=n)]}  # fmt: skip
        (root / name).write_bytes(pickle.dumps(batch, protocol=2))
    (root / "batches.meta").write_bytes(pickle.dumps({b"label_names": [str(i).encode() for i in range(10)]}, protocol=2))
    return folder


def cases(data_root: Path) -> dict[str, tuple[str, list[str]]]:
    """Case name -> (preset, overrides)."""
    from scenarios import list_presets

    from edgefl.scenario.loading import read_scenario_dict

    out: dict[str, tuple[str, list[str]]] = {}
    for preset in list_presets():
        data = read_scenario_dict(preset)
        sets = [f"rounds={ROUNDS}", "checkpoint_every=0"]
        dataset = data.get("data", {}).get("dataset", "digits")
        if dataset in ("fmnist", "mnist", "cifar10"):
            sets += [f"{k}={v}" for k, v in IMAGE_CUT.items()]
        if dataset == "cifar10":
            sets += [f"data.data_dir='{_fake_cifar(data_root)}'"]
        out[preset] = (preset, sets)
    for method in METHODS:
        base = [f"rounds={ROUNDS}", "checkpoint_every=0", f"method.name={method}", *PAPER_QUICKSTART,
                *BUDGETED_QUICKSTART]
        out[f"quickstart-{method}-physical"] = ("quickstart", base)
        out[f"quickstart-{method}-steps"] = ("quickstart", base + STEP_COSTS)
    return out


def run(out_dir: Path, only: str | None) -> None:
    from edgefl.errors import EdgeflError
    from edgefl.run.runner import run_scenario
    from edgefl.run.load import load_scenario

    out_dir.mkdir(parents=True, exist_ok=True)
    for name, (preset, sets) in cases(out_dir / "_data").items():
        if only and only not in name:
            continue
        folder = out_dir / name
        folder.mkdir(exist_ok=True)
        try:
            scenario = load_scenario(preset, sets)
            (folder / "physics.txt").write_text(scenario.physics + "\n")
            result = run_scenario(scenario)
        except EdgeflError as exc:  # a method refused in a mode at load: recorded, compared as text
            (folder / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
            print(f"{name}: refused ({exc})", flush=True)
            continue
        (folder / "rounds.csv").write_text(result.rounds.to_csv(index=False))
        (folder / "device_rounds.csv").write_text(result.device_rounds.to_csv(index=False))
        print(f"{name}: {len(result.rounds)} rounds, {len(result.device_rounds)} device rows", flush=True)


def _diff(name: str, before: Path, after: Path) -> tuple[str, bool]:
    """(verdict text, acceptable?) for one table."""
    if not before.is_file() or not after.is_file():
        return (f"missing ({'before' if not before.is_file() else 'after'})", False)
    a = pd.read_csv(io.StringIO(before.read_text()), keep_default_na=False, dtype=str)
    b = pd.read_csv(io.StringIO(after.read_text()), keep_default_na=False, dtype=str)
    a, b = a.drop(columns=["wall_time_s"], errors="ignore"), b.drop(columns=["wall_time_s"], errors="ignore")
    b = b.drop(columns=[c for c in NEW_COLUMNS if c in b.columns and c not in a.columns])
    if "t_down_s" not in pd.read_csv(before, nrows=0).columns and "t_down_s" in pd.read_csv(after, nrows=0).columns:
        b = _relative_times(b, after.parent / "rounds.csv")
    if list(a.columns) == list(b.columns) and a.equals(b):
        return ("identical", True)
    allowed: set[str] = set()
    if name.endswith("-steps") or name.startswith("luo_"):
        allowed |= set(PLANNED)
    method = next((m for m in METHODS if f"-{m}-" in name), None)
    if method not in WITH_ALPHA_BETA:
        allowed.add("learning_gain")
    if list(a.columns) != list(b.columns):
        return (f"columns differ: before {list(a.columns)} after {list(b.columns)}", False)
    if len(a) != len(b):
        return (f"rows differ: {len(a)} before, {len(b)} after", False)
    changed = {c: int((a[c] != b[c]).sum()) for c in a.columns if not a[c].equals(b[c])}
    text = ", ".join(f"{c} ({n} rows{_max_rel(a[c], b[c])})" for c, n in changed.items())
    ok = set(changed) <= allowed
    return (("allowed: " if ok else "DIFFERS: ") + text, ok)


def _relative_times(b: pd.DataFrame, rounds_csv: Path) -> pd.DataFrame:
    """``b`` with its absolute ``t_start_s`` and ``t_arrive_s`` made relative to the round start, the previous
    round's ``sim_time_s`` (0 for round 1), with the float subtraction the engine used to do, as text."""
    if not any(c in b.columns for c in ABSOLUTE):
        return b
    rounds = pd.read_csv(rounds_csv, dtype=str, keep_default_na=False)
    ends = [float(v) for v in rounds["sim_time_s"]]
    start = {int(r): (0.0 if i == 0 else ends[i - 1]) for i, r in enumerate(rounds["round"])}
    b = b.copy()
    for col in ABSOLUTE:
        if col in b.columns:
            b[col] = [
                "" if text == "" else repr(float(text) - start[int(r)]) for text, r in zip(b[col], b["round"])
            ]
    return b


def _max_rel(a: pd.Series, b: pd.Series) -> str:
    """", max relative difference X" of two text columns that hold numbers (empty when they do not)."""
    x, y = pd.to_numeric(a, errors="coerce"), pd.to_numeric(b, errors="coerce")
    both = x.notna() & y.notna() & (x != y)
    if not both.any():
        return ""
    rel = ((x[both] - y[both]).abs() / np.maximum(x[both].abs(), y[both].abs())).max()
    return f", max relative difference {rel:.2g}"


def compare(before: Path, after: Path) -> int:
    bad = 0
    names = sorted(p.name for p in before.iterdir() if p.is_dir() and not p.name.startswith("_"))
    print("| case | rounds.csv | device_rounds.csv |\n|---|---|---|")
    for name in names:
        cells = []
        physics = after / name / "physics.txt"
        if physics.is_file() and physics.read_text().strip() == "realistic":
            old = before / name / "physics.txt"
            if not old.is_file() or old.read_text().strip() != "realistic":
                print(f"| {name} | realistic physics now (issue #33): not compared | |")
                continue
        for table in ("rounds.csv", "device_rounds.csv"):
            err_a, err_b = before / name / "error.txt", after / name / "error.txt"
            if err_a.is_file() or err_b.is_file():
                same = err_a.is_file() and err_b.is_file() and err_a.read_text() == err_b.read_text()
                text = (err_b if err_b.is_file() else err_a).read_text().strip()
                cells.append(("same refusal: " if same else "refused: ") + text)
                bad += 0 if same or (err_b.is_file() and not err_a.is_file()) else 1
                continue
            verdict, ok = _diff(name, before / name / table, after / name / table)
            cells.append(verdict)
            bad += not ok
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    print(f"\n{len(names)} cases, {bad} unexpected differences")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--only", default=None)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.out, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
