"""Scenario presets shipped with edgefl: TOML files in this folder, loadable by name (``edgefl run quickstart``)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

__all__ = ["list_presets", "preset_path", "preset_description"]


def _root() -> Path:
    return Path(str(resources.files(__name__)))


def list_presets() -> list[str]:
    """Names of the shipped presets, sorted."""
    return sorted(p.stem for p in _root().glob("*.toml"))


def preset_path(name: str) -> Path:
    """Path of preset ``name``; raises ``edgefl.errors.ScenarioError``-compatible ValueError if unknown."""
    path = _root() / f"{name}.toml"
    if not path.is_file():
        from edgefl.errors import ScenarioError  # scenarios is data; edgefl owns the error type

        raise ScenarioError(f"scenario {name!r}: no such preset or file; presets: {', '.join(list_presets())}")
    return path


def preset_description(name: str) -> str:
    """The preset's one-line ``description``."""
    return str(tomllib.loads(preset_path(name).read_text(encoding="utf-8")).get("description", ""))
