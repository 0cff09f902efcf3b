"""Named exception classes. User mistakes raise these; the CLI prints them in one line and exits with code 2."""

from __future__ import annotations

__all__ = ["EdgeflError", "ScenarioError", "DataError", "SimulationError", "DivergedError"]


class EdgeflError(Exception):
    """Base class of every error edgefl raises on purpose."""


class ScenarioError(EdgeflError, ValueError):
    """A scenario file or override is invalid; the message names the field, the value and the allowed range."""


class DataError(EdgeflError, ValueError):
    """A dataset is missing, truncated or malformed; the message says which file and how to get the data."""


class SimulationError(EdgeflError, RuntimeError):
    """The simulator reached a state it cannot continue from (a bug or an impossible configuration)."""


class DivergedError(SimulationError):
    """A device's local training gave an update with a NaN or an infinity (its model diverged): the run stops
    rather than encode or aggregate it. ``device`` and ``round_index`` name the job."""

    def __init__(self, device: int, round_index: int) -> None:
        self.device, self.round_index = int(device), int(round_index)
        super().__init__(
            f"device {self.device}'s update in round {self.round_index} holds a NaN or an infinity: its local "
            "training diverged (lower train.lr or the local steps)"
        )

    def __reduce__(self):
        return DivergedError, (self.device, self.round_index)  # crosses a process pool as itself
