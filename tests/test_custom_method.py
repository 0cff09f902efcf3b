"""A method defined outside edgefl, in one file (examples/custom_method.py), runs like a shipped one.

With its proximal weight at 0 its local work is FedAvg's, so both runs must reach the same accuracy; with a
large weight the updates must stay closer to the global model (its own ``drift`` column shrinks).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_method.py"
LINE = re.compile(r"^(\w+)\s+final test accuracy ([0-9.]+) after (\d+) rounds(?:, mean drift \|\|w_i - w_t\|\| ([0-9.]+))?$")

pytestmark = pytest.mark.slow  # runs examples/custom_method.py in a process


def _run(mu: float) -> list[tuple[str, float, float | None]]:
    out = subprocess.run([sys.executable, str(EXAMPLE), "--rounds", "2", "--mu", str(mu)], capture_output=True,
                         text=True, check=True, timeout=300).stdout  # fmt: skip
    rows = [LINE.match(line) for line in out.strip().splitlines()]
    assert len(rows) == 2 and all(rows), out
    return [(m.group(1), float(m.group(2)), None if m.group(4) is None else float(m.group(4))) for m in rows]


def test_the_example_method_runs_from_a_scenario_and_reduces_to_fedavg_at_zero_weight():
    (base, acc_base, _), (mine, acc_mine, drift_free) = _run(0.0)
    assert base == "fedavg" and mine != "fedavg" and drift_free is not None
    assert acc_mine == acc_base  # printed to 4 decimals: the same model
    (_, _, _), (_, _, drift_held) = _run(10.0)
    assert drift_held < 0.9 * drift_free  # the proximal term keeps updates near the global model
