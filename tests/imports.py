"""edgefl's import graph read from the source (nothing imported): every ``import edgefl.x`` and ``from edgefl.x
import y`` in a module is an edge, wherever it stands (at the top, under ``if TYPE_CHECKING:`` or inside a
function: a deferred import still ties the two modules' designs).

``from edgefl.pkg import name`` is an edge to ``edgefl.pkg.name`` when that is a module, else to ``edgefl.pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules(root: Path = ROOT, package: str = "edgefl") -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file (a package is named by its ``__init__``)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names or lies in (``edgefl.a.b.func`` -> ``edgefl.a.b``)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def imports_of(name: str, path: Path, known: dict[str, Path], package: str = "edgefl") -> set[str]:
    """The modules of ``known`` that module ``name`` (file ``path``) imports anywhere in its file."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            if target == package or target.startswith(package + "."):
                hit = _known(target, known)
                if hit is not None and hit != name:
                    out.add(hit)
    return out


def graph(root: Path = ROOT, package: str = "edgefl") -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module of ``package`` under ``root``."""
    known = modules(root, package)
    return {name: imports_of(name, path, known, package) for name, path in known.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None
