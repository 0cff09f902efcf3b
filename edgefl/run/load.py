"""Loading a scenario for a run: :mod:`edgefl.scenario.loading`'s loaders with the method registry handed in.

The scenario does not import the methods; these two functions hand it every registered method
(:data:`edgefl.methods.METHODS`, read at each call, so a method registered later counts too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgefl.methods import METHODS
import edgefl.scenario.loading as loading
from edgefl.scenario.loading import Scenario

__all__ = ["load_scenario", "scenario_from_dict"]


def load_scenario(source: str | Path, overrides: list[str] | None = None, *, seed: int | None = None) -> Scenario:
    """Load a preset name or TOML path, apply ``--set`` overrides and ``--seed``, and validate; raise
    :class:`~edgefl.errors.ScenarioError` in one line if invalid."""
    return loading.load_scenario(source, overrides, seed=seed, methods=METHODS)


def scenario_from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a scenario given as a dict (as parsed from TOML); raise :class:`~edgefl.errors.ScenarioError`
    if invalid."""
    return loading.scenario_from_dict(data, methods=METHODS)
