"""Writing a run's results at 10^6 devices: AnycostFL's surrogate preset with 10^6 devices, 10^4 per round, 100
rounds (10^6 device rows), written as a run directory with ``output.format = "parquet"``.

    .venv/bin/python benchmarks/report_scale.py [--devices 1000000] [--per-round 10000] [--rounds 100] [--csv]

Prints the run's time (``run_scenario``, tables built in memory), the time to write the run directory
(``write_run``: scenario, rounds.csv, device_rounds.parquet, report.html, summary.json), the sizes of report.html
and of the device table, and the process's peak resident memory (``resource.getrusage``, imports included) after
the run and after the writing. ``--csv`` then also writes the same result with ``device_rounds.csv`` into a second
directory and prints that write time and size. Target: writing takes at most as long as the run,
report.html stays under 10 MB.

Measured once with ``--csv`` on the shared 2-core machine under a load average above 10, 2026-11-25: run 38.0 s
(peak 0.82 GB); parquet write 11.0 s (write / run 0.29), report.html 4.93 MB, device_rounds.parquet 144.1 MB,
peak 1.21 GB; CSV write 101.7 s, device_rounds.csv 405.1 MB, peak 1.30 GB. Again without ``--csv``, a two-process
study at nice 15 beside it: run 14.2 s (peak 0.78 GB), parquet write 3.8 s (write / run 0.26), report.html 4.93 MB,
peak 1.21 GB.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgefl.output.device_rounds_file import DEVICE_ROUNDS_FILES  # noqa: E402
from edgefl.output.results import write_run  # noqa: E402
from edgefl.run.runner import run_scenario  # noqa: E402
from edgefl.run.load import load_scenario  # noqa: E402

PRESET = "anycostfl_surrogate_10k"
REPORT_LIMIT_BYTES = 10 * 1024**2


def peak_rss_gb() -> float:
    """This process's peak resident set size [GB] (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def write(result, folder: Path, fmt: str) -> tuple[float, int, int]:
    """Write ``result`` as a run directory with the device table in ``fmt``: seconds, report bytes, table bytes."""
    output = result.scenario.output.model_copy(update={"format": fmt})
    as_fmt = dataclasses.replace(result, scenario=result.scenario.model_copy(update={"output": output}))
    t0 = time.perf_counter()
    write_run(as_fmt, folder)
    seconds = time.perf_counter() - t0
    return seconds, (folder / "report.html").stat().st_size, (folder / DEVICE_ROUNDS_FILES[fmt]).stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=1_000_000)
    parser.add_argument("--per-round", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--csv", action="store_true", help="also write the device table as CSV and time it")
    args = parser.parse_args()

    scenario = load_scenario(PRESET, [
        f"fleet.n_devices={args.devices}", f"method.clients_per_round={args.per_round}", f"rounds={args.rounds}",
        'output.format="parquet"',
    ])  # fmt: skip
    t0 = time.perf_counter()
    result = run_scenario(scenario)
    run_s = time.perf_counter() - t0
    rows = len(result.device_rounds)
    print(f"{PRESET}: {args.devices:,} devices, {args.per_round:,} per round, {args.rounds} rounds, "
          f"{rows:,} device rows", flush=True)  # fmt: skip
    print(f"run (run_scenario):   {run_s:7.1f} s   peak memory {peak_rss_gb():.2f} GB", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        write_s, report_b, table_b = write(result, Path(tmp) / "parquet", "parquet")
        print(f"write (parquet):      {write_s:7.1f} s   peak memory {peak_rss_gb():.2f} GB   "
              f"report.html {report_b / 1e6:.2f} MB   device_rounds.parquet {table_b / 1e6:.1f} MB", flush=True)
        print(f"write / run = {write_s / run_s:.2f} (target <= 1); report.html under 10 MB: "
              f"{report_b < REPORT_LIMIT_BYTES}", flush=True)  # fmt: skip
        if args.csv:
            csv_s, _, csv_b = write(result, Path(tmp) / "csv", "csv")
            print(f"write (csv):          {csv_s:7.1f} s   peak memory {peak_rss_gb():.2f} GB   "
                  f"device_rounds.csv {csv_b / 1e6:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
