"""Named exception classes. User mistakes raise these; the CLI prints them in one line and exits with code 2."""

from __future__ import annotations

__all__ = ["EdgeflError", "ScenarioError", "DataError", "SimulationError"]


class EdgeflError(Exception):
    """Base class of every error edgefl raises on purpose."""


class ScenarioError(EdgeflError, ValueError):
    """A scenario file or override is invalid; the message names the field, the value and the allowed range."""


class DataError(EdgeflError, ValueError):
    """A dataset is missing, truncated or malformed; the message says which file and how to get the data."""


class SimulationError(EdgeflError, RuntimeError):
    """The simulator reached a state it cannot continue from (a bug or an impossible configuration)."""
