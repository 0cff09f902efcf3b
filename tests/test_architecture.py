"""The folder tree is the architecture: every import between edgefl's subsystems follows the table of allowed
imports in docs/architecture.md ("Allowed imports"), read from that file, so the document and the code cannot drift
apart; at most five modules stay at the root of edgefl/."""

from __future__ import annotations

import re

import pytest

from imports import ROOT, cycle, graph

DOC = ROOT / "docs" / "architecture.md"
ROOT_MODULES = {"edgefl.errors", "edgefl.seeding", "edgefl.io"}
ENTRY = {"edgefl", "edgefl.__main__"}


def subsystem(module: str) -> str:
    """``edgefl.fleet.costs`` -> ``fleet``; the root modules -> ``root``; the package's own entry -> ``entry``."""
    if module in ENTRY:
        return "entry"
    if module in ROOT_MODULES:
        return "root"
    return module.split(".")[1]


def allowed_imports(text: str) -> dict[str, set[str]]:
    """The table under the heading "Allowed imports": subsystem -> the subsystems it may import. A row's first
    backticked word names the subsystem, the backticked words of its second cell what it may import."""
    section = text.split("## Allowed imports", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        table[re.findall(r"`([^`]+)`", cells[0])[0]] = set(re.findall(r"`([^`]+)`", cells[1]))
    return table


@pytest.fixture(scope="module")
def edges():
    return graph()


@pytest.fixture(scope="module")
def table():
    return allowed_imports(DOC.read_text(encoding="utf-8"))


def test_every_subsystem_has_a_row_and_the_rows_name_subsystems(edges, table):
    present = {subsystem(m) for m in edges}
    assert present == set(table), f"rows without code: {set(table) - present}; code without a row: {present - set(table)}"
    for row, may in table.items():
        assert may <= set(table) - {row}, f"{row}: may import unknown or itself: {may - (set(table) - {row})}"


def test_imports_between_subsystems_follow_the_table(edges, table):
    broken = sorted(f"{src} -> {dst}" for src, dsts in edges.items() for dst in dsts
                    if subsystem(src) != subsystem(dst) and subsystem(dst) not in table[subsystem(src)])  # fmt: skip
    assert broken == []


def test_the_table_runs_one_way_and_modules_import_without_circles(edges, table):
    assert cycle(table) is None
    assert cycle(edges) is None


def test_at_most_five_modules_at_the_root():
    root = sorted(p.name for p in (ROOT / "edgefl").glob("*.py"))
    assert len(root) <= 5, root


def test_a_forbidden_arrow_is_caught(table):
    """The check can fail: the scenario importing the method registry (the arrow this layout removed) breaks it."""
    assert "methods" not in table["scenario"]
    edges = {"edgefl.scenario.loading": {"edgefl.methods"}, "edgefl.methods": set()}
    broken = [f"{s} -> {d}" for s, ds in edges.items() for d in ds if subsystem(d) not in table[subsystem(s)]]
    assert broken == ["edgefl.scenario.loading -> edgefl.methods"]
