"""Input validation shared by the ``channel`` modules (private).

Every check raises :class:`ChannelInputError` with ``"<name>=<value>: <rule>"``; for an array the name carries the
index of the first offending element, e.g. ``"distance_m[3]=-5.0: must be > 0"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from channel.errors import ChannelInputError


def _label(name: str, arr: np.ndarray, bad: np.ndarray) -> str:
    if arr.ndim == 0:
        return f"{name}={float(arr)!r}"
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{name}[{', '.join(map(str, index))}]={float(arr[index])!r}"


def require(arr: np.ndarray, name: str, ok: np.ndarray, rule: str) -> np.ndarray:
    """Raise unless every element of ``ok`` is true; return ``arr`` unchanged."""
    bad = ~np.asarray(ok, dtype=bool)
    if bad.any():
        raise ChannelInputError(f"{_label(name, arr, bad)}: {rule}")
    return arr


def to_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float array of finite numbers (any shape, 0-d for a scalar)."""
    if isinstance(value, (str, bytes)):
        raise ChannelInputError(f"{name}={value!r}: must be a number or an array of numbers")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ChannelInputError(f"{name}={value!r}: must be a number or an array of numbers") from None
    return require(arr, name, np.isfinite(arr), "must be finite")


def positive(value: Any, name: str) -> np.ndarray:
    """Finite float array with every element > 0."""
    arr = to_array(value, name)
    return require(arr, name, arr > 0, "must be > 0")


def nonnegative(value: Any, name: str) -> np.ndarray:
    """Finite float array with every element >= 0."""
    arr = to_array(value, name)
    return require(arr, name, arr >= 0, "must be >= 0")


def scalar(value: Any, name: str) -> float:
    """A finite real number as ``float`` (bools and arrays are refused)."""
    if isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0:
        raise ChannelInputError(f"{name}={value!r}: must be a single finite number")
    return float(to_array(value, name))


def positive_scalar(value: Any, name: str) -> float:
    """A finite real number > 0 as ``float``."""
    return float(positive(scalar(value, name), name))


def nonnegative_scalar(value: Any, name: str) -> float:
    """A finite real number >= 0 as ``float``."""
    return float(nonnegative(scalar(value, name), name))


def count(value: Any, name: str, minimum: int = 0) -> int:
    """An integer >= ``minimum`` as ``int``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ChannelInputError(f"{name}={value!r}: must be an integer >= {minimum}")
    if value < minimum:
        raise ChannelInputError(f"{name}={value!r}: must be >= {minimum}")
    return int(value)


def choice(value: Any, name: str, allowed: Iterable[str]) -> str:
    """One of the ``allowed`` strings."""
    allowed = tuple(allowed)
    if value not in allowed:
        raise ChannelInputError(f"{name}={value!r}: must be one of {', '.join(map(repr, allowed))}")
    return value


def annulus(radius_m: Any, min_distance_m: Any) -> tuple[float, float]:
    """Validate a cell annulus ``0 <= min_distance_m < radius_m`` [m]; return both as floats."""
    radius = scalar(radius_m, "radius_m")
    inner = scalar(min_distance_m, "min_distance_m")
    if inner < 0:
        raise ChannelInputError(f"min_distance_m={inner!r}: must be >= 0")
    if radius <= inner:
        raise ChannelInputError(f"radius_m={radius!r}: must be > min_distance_m={inner!r}")
    return radius, inner


def positions(value: Any, name: str = "positions_m") -> np.ndarray:
    """A finite float array of shape (n, 2)."""
    arr = to_array(value, name)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ChannelInputError(f"{name} has shape {arr.shape}: must have shape (n_devices, 2)")
    return arr


def rng_of(rng: Any) -> np.random.Generator:
    """Refuse anything but a ``numpy.random.Generator`` (no global or legacy RNG)."""
    if not isinstance(rng, np.random.Generator):
        raise ChannelInputError(f"rng={rng!r}: must be a numpy.random.Generator")
    return rng


def out(arr: np.ndarray) -> np.ndarray | np.float64:
    """Return a 0-d result as a numpy scalar, any other array unchanged."""
    return arr[()]
