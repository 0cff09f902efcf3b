"""The dependency direction of docs/architecture.md: optimizers/ and channel/ never import edgefl, torch or simpy,
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


def test_import_floors():
    """edgefl's import graph (every import, type-only and in-function ones too; benchmarks/import_floors.py) has no
    cycle and at most 11 floors, with the synchronous and asynchronous drivers side by side."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import import_floors

    edges = import_floors.graph(Path(__file__).resolve().parent.parent)
    assert import_floors.cycle(edges) is None
    chain = import_floors.longest_chain(edges)
    assert len(chain) <= 11, " -> ".join(chain)
    height = {}

    def floor(node):
        if node not in height:
            height[node] = 1 + max((floor(m) for m in edges[node]), default=0)
        return height[node]

    assert "edgefl.engine" in edges  # both drivers live in the engine subsystem, side by side


def test_import_floors_see_hidden_cycles(tmp_path):
    """An import inside a function and one under ``TYPE_CHECKING`` are edges too: together they close a cycle."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import import_floors

    pkg = tmp_path / "edgefl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from edgefl import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from edgefl.sub.c import x\n")
    (pkg / "sub" / "c.py").write_text("from .. import d\n")
    (pkg / "d.py").write_text("")
    edges = import_floors.graph(tmp_path)
    assert edges["edgefl.a"] == {"edgefl.b"} and edges["edgefl.b"] == {"edgefl.sub"}
    assert import_floors.longest_chain(edges) == ["edgefl.a", "edgefl.b", "edgefl.sub", "edgefl.d"]
    (pkg / "d.py").write_text("import edgefl.a\n")
    cycle = ["edgefl.a", "edgefl.b", "edgefl.sub", "edgefl.d", "edgefl.a"]
    assert import_floors.cycle(import_floors.graph(tmp_path)) == cycle
