"""Mobility models: how device positions change from one round to the next.

Each model is a small frozen dataclass with ``step(positions_m, rng) -> positions_m`` taking and returning
positions [m] of shape (n, 2) around a base station at the origin.  Models that move devices keep them inside
the cell annulus ``min_distance_m <= d <= radius_m``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from channel import _checks as check
from channel.placement import distances_m, uniform_disk

__all__ = ["Mobility", "Static", "Redraw", "RandomWalk"]


class Mobility(Protocol):
    """What every mobility model provides."""

    def step(self, positions_m: Any, rng: np.random.Generator) -> np.ndarray:
        """Positions [m] one round later, shape (n, 2)."""
        ...


@dataclass(frozen=True)
class Static:
    """Devices never move; ``step`` draws nothing and returns a copy."""

    def step(self, positions_m: Any, rng: np.random.Generator) -> np.ndarray:
        """Unchanged positions [m], shape (n, 2)."""
        return check.positions(positions_m).copy()


@dataclass(frozen=True, kw_only=True)
class Redraw:
    """Every round each device is placed anew, uniformly over the cell (AnycostFL Sec. V-A).

    radius_m: cell radius [m] > min_distance_m.  min_distance_m: closest distance to the base station [m] >= 0.
    """

    radius_m: float
    min_distance_m: float = 0.0

    def __post_init__(self) -> None:
        check.annulus(self.radius_m, self.min_distance_m)

    def step(self, positions_m: Any, rng: np.random.Generator) -> np.ndarray:
        """Fresh positions [m], shape (n, 2); draws as :func:`channel.placement.uniform_disk`."""
        n = check.positions(positions_m).shape[0]
        return uniform_disk(rng, n, radius_m=self.radius_m, min_distance_m=self.min_distance_m)


@dataclass(frozen=True, kw_only=True)
class RandomWalk:
    """Each round each device moves ``step_m`` in a uniformly random direction.

    A move that would leave the annulus is reflected at the boundary it crosses (radially, as often as needed),
    so every device stays in ``min_distance_m <= d <= radius_m``.  Draws ``n`` uniforms for the directions.
    step_m: distance moved per round [m] >= 0.  radius_m: [m] > min_distance_m.  min_distance_m: [m] >= 0.
    """

    step_m: float
    radius_m: float
    min_distance_m: float = 0.0

    def __post_init__(self) -> None:
        check.nonnegative_scalar(self.step_m, "step_m")
        check.annulus(self.radius_m, self.min_distance_m)

    def step(self, positions_m: Any, rng: np.random.Generator) -> np.ndarray:
        """Positions [m] after one move, shape (n, 2)."""
        xy = check.positions(positions_m)
        rng = check.rng_of(rng)
        heading_rad = 2.0 * np.pi * rng.random(xy.shape[0])
        heading = np.column_stack((np.cos(heading_rad), np.sin(heading_rad)))
        moved = xy + self.step_m * heading
        d_m = distances_m(moved)
        # unit vector from the base station; a device landing exactly on it keeps its heading
        safe_d_m = np.where(d_m > 0, d_m, 1.0)[:, None]
        direction = np.where(d_m[:, None] > 0, moved / safe_d_m, heading)
        return _reflect(d_m, self.min_distance_m, self.radius_m)[:, None] * direction


def _reflect(d_m: np.ndarray, low_m: float, high_m: float) -> np.ndarray:
    """Fold distances [m] into ``[low_m, high_m]`` by mirror reflection at both ends (a triangle wave)."""
    width_m = high_m - low_m
    phase_m = np.mod(d_m - low_m, 2.0 * width_m)
    folded_m = low_m + np.where(phase_m <= width_m, phase_m, 2.0 * width_m - phase_m)
    return np.clip(folded_m, low_m, high_m)
