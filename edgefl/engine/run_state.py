"""The state of a run between rounds, as a value: what a checkpoint writes and a resume starts from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunState"]


@dataclass(frozen=True)
class RunState:
    """A run after ``rounds_done`` complete rounds.

    ``sim_time_s``: simulated clock at the end of the last round [s]; ``energy_cum_j``: energy charged so far
    [J]; ``model``: the workload's global state (a torch state dict, or the surrogate's
    :class:`~edgefl.learning.surrogate.SurrogateState`). The method's memory between rounds and the radio's
    device positions live in those parts and are saved with their ``state_dict()`` beside this value.
    """

    rounds_done: int
    sim_time_s: float
    energy_cum_j: float
    model: Any
