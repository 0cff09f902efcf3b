"""The dependency direction of docs/architecture.md: optimizers/ and channel/ never import edgefl, torch or simpy,
nor each other, so a notebook can use them alone; edgefl's own import graph (tests/imports.py, read from the source)
has no cycle and few floors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from imports import cycle, graph

FORBIDDEN = {"optimizers": ["edgefl", "torch", "simpy", "channel"], "channel": ["edgefl", "torch", "simpy", "optimizers", "scipy", "cvxpy"]}
MODULES = {
    "optimizers": [
        "optimizers",
        "optimizers.anycost",
        "optimizers.cost_effective",
        "optimizers.ccfedavg",
        "optimizers.alloc_min_time",
        "optimizers.alloc_min_energy",
        "optimizers.alloc_weighted",
        "optimizers.fedcs",
        "optimizers.chen_assignment",
    ],
    "channel": ["channel"],
}
# The synchronous and the asynchronous driver: side by side, on the same floor of the module graph.
DRIVERS = ("edgefl.engine.sync_driver", "edgefl.engine.async_driver")
MAX_FLOORS = 11  # floors of the subsystem graph (edgefl/'s root modules and subpackages)


def floor_of(module: str) -> str:
    """The floor a module stands on: a module at the root of ``edgefl/`` itself, any other its subpackage."""
    return ".".join(module.split(".")[:2])


def floors(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of floors: each floor imports the floors its modules import (imports within a floor left out)."""
    out: dict[str, set[str]] = {}
    for module, imported in edges.items():
        here = floor_of(module)
        out.setdefault(here, set()).update(floor_of(m) for m in imported)
        out[here].discard(here)
    return out


def heights(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each node's height in an acyclic graph: 1 for a node importing nothing, else 1 + the highest it imports."""
    height: dict[str, int] = {}

    def of(node: str) -> int:
        if node not in height:
            height[node] = 1 + max((of(m) for m in edges.get(node, ())), default=0)
        return height[node]

    for node in sorted(edges):
        of(node)
    return height


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain of an acyclic graph, importer first (ties: the alphabetically first)."""
    height = heights(edges)
    node = min(edges, key=lambda n: (-height[n], n))
    chain = [node]
    while edges.get(node):
        node = min(edges[node], key=lambda n: (-height[n], n))
        chain.append(node)
    return chain


@pytest.mark.slow  # starts a Python process per package
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
    """edgefl's import graph (every import, type-only and in-function ones too) has no cycle and at most
    MAX_FLOORS floors, with the synchronous and asynchronous drivers side by side."""
    edges = graph()
    assert cycle(edges) is None and cycle(floors(edges)) is None
    chain = longest_chain(floors(edges))
    assert len(chain) <= MAX_FLOORS, " -> ".join(chain)
    height = heights(edges)
    assert DRIVERS[1] not in edges[DRIVERS[0]] and DRIVERS[0] not in edges[DRIVERS[1]]
    assert height[DRIVERS[0]] == height[DRIVERS[1]], {d: height[d] for d in DRIVERS}


def test_import_floors_see_hidden_cycles(tmp_path):
    """An import inside a function, one under ``TYPE_CHECKING`` and a relative one are edges too: together they
    close a cycle."""
    pkg = tmp_path / "edgefl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from edgefl import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from edgefl.sub.c import x\n")
    (pkg / "sub" / "c.py").write_text("from .. import d\n")
    (pkg / "d.py").write_text("")
    edges = graph(tmp_path)
    assert edges["edgefl.a"] == {"edgefl.b"} and edges["edgefl.b"] == {"edgefl.sub.c"}
    assert edges["edgefl.sub.c"] == {"edgefl.d"}
    assert cycle(edges) is None
    assert longest_chain(floors(edges)) == ["edgefl.a", "edgefl.b", "edgefl.sub", "edgefl.d"]
    (pkg / "d.py").write_text("import edgefl.a\n")
    assert cycle(graph(tmp_path)) == ["edgefl.a", "edgefl.b", "edgefl.sub.c", "edgefl.d", "edgefl.a"]
    assert cycle(floors(graph(tmp_path))) == ["edgefl.a", "edgefl.b", "edgefl.sub", "edgefl.d", "edgefl.a"]
