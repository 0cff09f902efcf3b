"""Reads of a scenario's sections in edgefl's runtime: the source lines that take a field of a
:class:`edgefl.scenario.loading.Scenario` (``scenario.fleet``, ``sc.train``, ``run.scenario.seed``, ...), per file.

    python benchmarks/scenario_reads.py [ROOT ...] [--lines]

``ROOT``: a folder holding edgefl/ (default: this checkout); with several, one block per root. ``--lines``: print
each counted line too.

A read is an attribute access ``X.<field>`` where ``<field>`` is one of the fields the class ``Scenario`` declares
in ``ROOT/edgefl/scenario/loading.py`` (``ROOT/edgefl/scenario.py`` in trees before the layout by subsystem; its sections ``data``, ``model``, ``train``, ``method``, ``round``, ``fleet``,
``channel``, ``surrogate``, ``output`` and its top-level values ``name``, ``seed``, ``rounds``, ``learning``, ...)
and ``X`` names a scenario: the names ``scenario`` and ``sc``, or any ``<expr>.scenario`` (``self.scenario``,
``run.scenario``, ``result.scenario``). A line with several reads counts once.

Files left out, where reading the scenario is their job:

- ``edgefl/scenario/loading.py`` and ``edgefl/scenario/sections.py``: the scenario and its sections themselves;
- ``edgefl/run/runner.py``: the build step (:func:`edgefl.run.runner.build_run` and the values it resolves for the
  run, the learning workload's configs and the run's header among them);
- ``edgefl/cli/``, ``edgefl/sweep/``, ``edgefl/design/``: the front ends, which load and edit scenarios.

Every other module of ``edgefl/`` counts, the check before round 1 (``edgefl/run/preflight.py``) included.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

EXCLUDED_FILES = ("edgefl/scenario/loading.py", "edgefl/scenario/sections.py", "edgefl/run/runner.py")
EXCLUDED_DIRS = ("edgefl/cli/", "edgefl/sweep/", "edgefl/design/")
SCENARIO_NAMES = ("scenario", "sc")


def scenario_fields(root: Path) -> set[str]:
    """The field names the class ``Scenario`` declares in ``root/edgefl/scenario/loading.py`` (or, in an older
    tree, ``root/edgefl/scenario.py``)."""
    path = root / "edgefl" / "scenario" / "loading.py"
    if not path.is_file():
        path = root / "edgefl" / "scenario.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Scenario":
            return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    raise SystemExit(f"{root}: no class Scenario in {path.relative_to(root)}")


def _names_scenario(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in SCENARIO_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "scenario"


def read_lines(path: Path, fields: set[str]) -> list[int]:
    """The numbers of the lines of ``path`` that read a scenario field (sorted, each once)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = {
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in fields and _names_scenario(node.value)
    }
    return sorted(lines)


def counted_files(root: Path) -> list[Path]:
    """The modules of ``root/edgefl`` that count (see the module docstring)."""
    files = []
    for path in sorted((root / "edgefl").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in EXCLUDED_FILES or rel.startswith(EXCLUDED_DIRS):
            continue
        files.append(path)
    return files


def count(root: Path) -> dict[str, list[int]]:
    """Counted file (relative to ``root``) -> its reading lines, for the files with at least one."""
    fields = scenario_fields(root)
    found = {}
    for path in counted_files(root):
        lines = read_lines(path, fields)
        if lines:
            found[path.relative_to(root).as_posix()] = lines
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--lines", action="store_true", help="print each counted line")
    args = parser.parse_args(argv)
    for root in args.roots:
        found = count(root)
        print(f"{root}:")
        for rel, lines in found.items():
            print(f"  {len(lines):3d}  {rel}")
            if args.lines:
                text = (root / rel).read_text(encoding="utf-8").splitlines()
                for n in lines:
                    print(f"         {n:4d}: {text[n - 1].strip()}")
        print(f"  {sum(len(v) for v in found.values()):3d}  total")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
