"""Input validation shared by the ``optimizers`` modules (private to the package).

Every check raises :class:`OptimizerInputError` with ``"<name>=<value>: <rule>"``; for an array the name
carries the index of the first offending element, e.g. ``"f_min_hz[3]=2000000000.0: must be <=
f_max_hz[3]=1000000000.0"``. Values keep the units the caller's name states (``_s`` [s], ``_j`` [J],
``_hz`` [Hz], ...); nothing here converts units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optimizers.errors import OptimizerInputError


def label(name: str, arr: np.ndarray, bad: np.ndarray) -> str:
    """``name=value`` of the first element where ``bad`` is true (``name[i]=value`` for arrays)."""
    if arr.ndim == 0:
        return f"{name}={arr.item()!r}"
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{name}[{', '.join(map(str, index))}]={arr[index].item()!r}"


def require(
    arr: np.ndarray, name: str, ok: Any, rule: str, *, other: tuple[str, np.ndarray] | None = None
) -> np.ndarray:
    """Raise unless every element of ``ok`` is true; return ``arr`` unchanged.

    With ``other=(other_name, other_arr)`` (an array of the shape of ``arr``) the message ends with that array's
    element at the same index, e.g. ``"f_min_hz[0]=2.0: must be <= f_max_hz[0]=1.0"`` for ``rule="must be <="``.
    """
    bad = ~np.broadcast_to(np.asarray(ok, dtype=bool), arr.shape)
    if bad.any():
        if other is not None:
            rule = f"{rule} {label(other[0], other[1], bad)}"
        raise OptimizerInputError(f"{label(name, arr, bad)}: {rule}")
    return arr


def real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float array of finite numbers (any shape, 0-d for a scalar)."""
    if isinstance(value, (str, bytes)):
        raise OptimizerInputError(f"{name}={value!r}: must be a number or an array of numbers")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise OptimizerInputError(f"{name}={value!r}: must be a number or an array of numbers") from None
    return require(arr, name, np.isfinite(arr), "must be finite")


def real(value: Any, name: str) -> float:
    """A single finite real number as ``float`` (bools and arrays are refused)."""
    if isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0:
        raise OptimizerInputError(f"{name}={value!r}: must be a single finite number")
    return float(real_array(value, name))


def positive(value: Any, name: str) -> float:
    """A finite real number > 0."""
    x = real(value, name)
    if not x > 0:
        raise OptimizerInputError(f"{name}={x!r}: must be > 0")
    return x


def at_least(value: Any, name: str, minimum: float) -> float:
    """A finite real number >= ``minimum``."""
    x = real(value, name)
    if not x >= minimum:
        raise OptimizerInputError(f"{name}={x!r}: must be >= {minimum:g}")
    return x


def in_range(value: Any, name: str, low: float, high: float) -> float:
    """A finite real number in the closed interval [low, high]."""
    x = real(value, name)
    if not low <= x <= high:
        raise OptimizerInputError(f"{name}={x!r}: must be in [{low:g}, {high:g}]")
    return x


def integer(value: Any, name: str, minimum: int, *, integral_float: bool = True) -> int:
    """An integer >= ``minimum`` as ``int``; bools are refused.

    Floats holding an integer value (``3.0``) are accepted as that integer, unless ``integral_float=False``,
    which accepts only ``int`` and numpy integer types.
    """
    if isinstance(value, (bool, np.bool_)):
        raise OptimizerInputError(f"{name}={value!r}: must be an integer >= {minimum}")
    if (
        integral_float
        and isinstance(value, (float, np.floating))
        and np.isfinite(value)
        and float(value).is_integer()
    ):
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise OptimizerInputError(f"{name}={value!r}: must be an integer >= {minimum}")
    if value < minimum:
        raise OptimizerInputError(f"{name}={int(value)}: must be >= {minimum}")
    return int(value)


def k_of_n(value: Any, n: int, name: str = "k") -> int:
    """The number K of devices sampled out of ``n``: an integer in [1, n] (see :func:`integer`)."""
    k = integer(value, name, 1)
    if k > n:
        raise OptimizerInputError(f"{name}={k}: must be in [1, n={n}]")
    return k


def one_dimensional(value: Any, name: str, min_length: int = 1) -> np.ndarray:
    """A 1-D float array of finite numbers with at least ``min_length`` elements."""
    arr = real_array(value, name)
    if arr.ndim != 1 or arr.size < min_length:
        raise OptimizerInputError(
            f"{name}: shape {arr.shape}: must be a 1-D array with at least {min_length} element(s)"
        )
    return arr
