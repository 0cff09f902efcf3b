"""The error class and input checks shared by the model zoo (private to the package).

Every check raises :class:`ModelError` with ``"model.<field>=<value>: <rule>"``, the field named as in a
scenario's ``[model]`` table.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

from edgefl.errors import EdgeflError

__all__ = ["ModelError", "scaled", "check_width", "check_input_shape", "check_n_classes", "check_hidden"]


class ModelError(EdgeflError, ValueError):
    """A model name, shape, width or layer size is invalid; the message names the field, value and allowed range."""


def scaled(units: int, width: float) -> int:
    """Units a hidden layer of ``units`` keeps at width multiplier ``width``: ``ceil(width * units)``.

    This is HeteroFL's rule (official code: local width = ceil(rate * width)); it never rounds a layer to 0.
    """
    return math.ceil(width * units)


def _positive_int(value: object) -> int | None:
    """``value`` as a Python int when it is an integer >= 1 (numpy integers included, bools excluded), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
    return number if number >= 1 else None


def _positive_ints(values: object, key: str, rule: str) -> tuple[int | None, ...]:
    """Each item of the sequence ``values`` as :func:`_positive_int` gives it (None where it is no integer >= 1);
    a ``values`` that is no sequence raises ``model.<key>=<values>: <rule>``."""
    try:
        items = tuple(values)  # type: ignore[arg-type]
    except TypeError:
        raise ModelError(f"model.{key}={values!r}: {rule}") from None
    return tuple(_positive_int(v) for v in items)


def check_width(width: float) -> float:
    """A width multiplier in (0, 1] as a float."""
    try:
        value = float(width)
    except (TypeError, ValueError):
        raise ModelError(f"model.width={width!r}: must be a number in (0, 1]") from None
    if not 0.0 < value <= 1.0:  # also rejects NaN
        raise ModelError(f"model.width={width!r}: must be in (0, 1]")
    return value


def check_input_shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    """An input shape as a tuple of positive ints: ``(features,)`` or ``(channels, height, width)``."""
    dims = _positive_ints(input_shape, "input_shape", "must be (features,) or (C, H, W)")
    if len(dims) not in (1, 3) or None in dims:
        raise ModelError(f"model.input_shape={input_shape!r}: must be (features,) or (C, H, W) of positive ints")
    return dims  # type: ignore[return-value]


def check_n_classes(n_classes: int) -> int:
    """A number of classes >= 2."""
    number = _positive_int(n_classes)
    if number is None or number < 2:
        raise ModelError(f"model.n_classes={n_classes!r}: must be an integer >= 2")
    return number


def check_hidden(hidden: Sequence[int]) -> tuple[int, ...]:
    """Hidden layer sizes as a tuple of positive ints (may be empty)."""
    checked = _positive_ints(hidden, "hidden", "must be a list of positive integers")
    if None in checked:
        raise ModelError(f"model.hidden={hidden!r}: must be a list of positive integers")
    return checked  # type: ignore[return-value]
