"""The floors of edgefl's import graph: the number of modules on the longest chain of imports between edgefl's own
modules, and that chain. A floor is a module of ``edgefl/`` or a subpackage as a whole (``edgefl.methods``,
``edgefl.design``, ``edgefl.learning``...: the chains inside a subpackage are its own business).

Every ``import edgefl.x`` / ``from edgefl.x import y`` / relative import in a module counts as an edge, wherever
it stands: at the top, under ``if TYPE_CHECKING:`` (a type-only import still ties the two modules' designs) or
inside a function (a runtime import deferred into a function is still an edge; moving an import there does not
lower the count). ``from edgefl.pkg import name`` is an edge to ``edgefl.pkg.name`` when that is a module, else to
the package ``edgefl.pkg``; the implicit import of parent packages does not count (every module would then sit
above ``edgefl/__init__.py``).

    python benchmarks/import_floors.py [ROOT] [--without MODULE ...]

``ROOT``: the folder holding edgefl/ (default: this checkout); ``--without``: leave a module and its edges out,
to measure the rest while it has a cycle.

Prints the floor count, the longest chain (lowest module last) and any import cycle; exits 1 on a cycle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from functools import lru_cache
from pathlib import Path


def modules(root: Path, package: str = "edgefl") -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file (a package is named by its ``__init__``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names or lies in (``edgefl.a.b.func`` -> ``edgefl.a.b``)."""
    parts = name.split(".")
    while parts:
        dotted = ".".join(parts)
        if dotted in known:
            return dotted
        parts.pop()
    return None


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The edgefl modules that module ``name`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem for a in node.names]
        else:
            continue
        for target in targets:
            hit = _resolve(target, known)
            if hit is not None and hit != name:
                out.add(hit)
    return out


def floor_of(module: str) -> str:
    """The floor a module stands on: itself for a module of ``edgefl/``, its subpackage otherwise."""
    return ".".join(module.split(".")[:2])


def graph(root: Path, without: set[str] = frozenset()) -> dict[str, set[str]]:
    """Floor -> the floors it imports (modules of a subpackage merged into one)."""
    known = modules(root)
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        here = floor_of(name)
        if here in without:
            continue
        below = {floor_of(m) for m in imports(name, path, known)}
        edges.setdefault(here, set()).update(below - {here} - without)
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node], _ = 1, stack.append(node)
        for nxt in sorted(edges[node]):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in colour and (found := visit(nxt)):
                return found
        colour[node], _ = 2, stack.pop()
        return None

    for node in sorted(edges):
        if node not in colour and (found := visit(node)):
            return found
    return None


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest import chain of an acyclic graph, importer first (ties: the alphabetically first)."""
    sys.setrecursionlimit(10_000)

    @lru_cache(maxsize=None)
    def chain(node: str) -> tuple[str, ...]:
        best: tuple[str, ...] = ()
        for nxt in sorted(edges[node]):
            below = chain(nxt)
            if len(below) > len(best):
                best = below
        return (node, *best)

    return max((list(chain(n)) for n in sorted(edges)), key=len)


def main(argv: list[str]) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parent.parent)
    args.add_argument("--without", nargs="*", default=[])
    opts = args.parse_args(argv)
    edges = graph(opts.root, {m if m.startswith("edgefl") else f"edgefl.{m}" for m in opts.without})
    loop = cycle(edges)
    if loop:
        print("cycle: " + " -> ".join(loop))
        return 1
    chain = longest_chain(edges)
    print(f"floors: {len(chain)}")
    print("chain: " + " -> ".join(m.removeprefix("edgefl.") for m in chain))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
