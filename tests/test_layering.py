"""The dependency direction of DESIGN.md: optimizers/ and channel/ never import edgefl, torch or simpy,
nor each other, so a notebook can use them alone."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = {"optimizers": ["edgefl", "torch", "simpy", "channel"], "channel": ["edgefl", "torch", "simpy", "optimizers", "scipy", "cvxpy"]}
MODULES = {
    "optimizers": ["optimizers", "optimizers.anycost", "optimizers.cost_effective", "optimizers.ccfedavg"],
    "channel": ["channel"],
}


@pytest.mark.parametrize("package", sorted(MODULES))
def test_package_imports_stay_one_way(package):
    code = (
        "import importlib, json, sys\n"
        f"for m in {MODULES[package]!r}: importlib.import_module(m)\n"
        f"print(json.dumps(sorted(k for k in {FORBIDDEN[package]!r} if k in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
