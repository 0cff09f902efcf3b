"""Where devices stand: uniform placement in a circular cell around a base station at the origin."""

from __future__ import annotations

from typing import Any

import numpy as np

from channel import _checks as check

__all__ = ["uniform_disk", "distances_m"]


def uniform_disk(
    rng: np.random.Generator, n: int, *, radius_m: float, min_distance_m: float = 0.0
) -> np.ndarray:
    """Positions drawn uniformly by area over the annulus ``min_distance_m <= d <= radius_m`` around the origin.

    By inverse CDF: the area inside distance d grows as d^2, so ``d^2`` is uniform on
    ``[min_distance_m^2, radius_m^2]``; the angle is uniform on [0, 2 pi).  Draws ``n`` uniforms for ``d^2``,
    then ``n`` for the angle.  radius_m: [m] > min_distance_m.  min_distance_m: [m] >= 0.
    Returns: positions [m], shape (n, 2), columns x and y.
    """
    rng = check.rng_of(rng)
    n = check.count(n, "n")
    radius, inner = check.annulus(radius_m, min_distance_m)
    d_sq_m2 = inner**2 + rng.random(n) * (radius**2 - inner**2)
    angle_rad = 2.0 * np.pi * rng.random(n)
    d_m = np.clip(np.sqrt(d_sq_m2), inner, radius)
    return np.column_stack((d_m * np.cos(angle_rad), d_m * np.sin(angle_rad)))


def distances_m(positions_m: Any) -> np.ndarray:
    """Distance of each device to the base station at the origin.

    positions_m: [m], shape (n, 2).  Returns: distance [m], shape (n,).
    """
    xy = check.positions(positions_m)
    return np.hypot(xy[:, 0], xy[:, 1])
