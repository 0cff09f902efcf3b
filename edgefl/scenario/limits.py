"""Physically possible values: the allowed range of each physical scenario field, checked in the user's key and unit.

A field declares its range by carrying a :class:`Limit` in its type (``Annotated[float, Limit(...)]``) next to
its physical ground, in :mod:`edgefl.scenario.sections`. :func:`check_limits` runs before engineer units are converted
(``f_max_ghz`` to ``f_max_hz``), so a value outside its range is reported as the user wrote it:

    fleet.f_max_ghz=1e+09: outside [0.001, 10] GHz: ...

A quantity drawn per device (a number or ``[low, high]``) has both ends checked, and a list of any other
length is refused in one line naming the key.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any

from channel.units import w_to_dbm

__all__ = ["Limit", "check_limits", "limits_of", "require", "user_range"]


@dataclass(frozen=True)
class Limit:
    """The allowed range ``[low, high]`` of a physical field, in its SI unit ``unit``, and why (``ground``: which
    real device, cell or standard sets each end). ``low_open``: ``low`` itself is not allowed."""

    low: float
    high: float
    unit: str
    ground: str
    low_open: bool = False

    def admits(self, value: float) -> bool:
        """Whether the SI ``value`` lies in the range."""
        above = value > self.low if self.low_open else value >= self.low
        return math.isfinite(value) and above and value <= self.high


def _fmt(x: float) -> str:
    return format(x, ".6g")


def _user_unit(key: str, limit: Limit) -> tuple[str, Any]:
    """(unit label, SI -> user-unit function) for the key the user wrote (its suffix names the unit)."""
    for suffix, label, back in (
        ("_dbm_per_mhz", "dBm/MHz", lambda v: float(w_to_dbm(v * 1e6))),  # W/Hz -> W per MHz -> dBm per MHz
        ("_dbm", "dBm", lambda v: float(w_to_dbm(v))),
        ("_ghz", "GHz", lambda v: v / 1e9),
        ("_mhz", "MHz", lambda v: v / 1e6),
    ):
        if key.endswith(suffix):
            return label, back
    return limit.unit, lambda v: v


def user_range(key: str, limit: Limit) -> str:
    """The range of ``limit`` in the unit of ``key`` as the user wrote it, e.g. ``[0.001, 10] GHz``."""
    label, back = _user_unit(key, limit)
    low = "0" if limit.low == 0 else _fmt(back(limit.low))
    return f"{'(' if limit.low_open else '['}{low}, {_fmt(back(limit.high))}] {label}".rstrip()


def limits_of(model: type) -> dict[str, Limit]:
    """Field name -> :class:`Limit` of a pydantic model class (fields without one are left out)."""
    out = {}
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Limit):
                out[name] = meta
    return out


def _takes_pair(model: type, name: str) -> bool:
    """Whether the field accepts ``[low, high]`` (its type contains a tuple)."""

    def has_tuple(tp: Any) -> bool:
        return typing.get_origin(tp) is tuple or any(has_tuple(a) for a in typing.get_args(tp))

    return has_tuple(model.model_fields[name].annotation)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return _fmt(value)
    if isinstance(value, list):
        shown = ", ".join(_show(v) for v in value[:4])
        return f"[{shown}{', ...' if len(value) > 4 else ''}]"
    return repr(value)


def check_limits(model: type, data: Any, aliases: dict[str, tuple[str, Any]] | None = None) -> Any:
    """Check the raw section ``data`` (a dict as written, before unit conversion) of pydantic ``model`` against
    its fields' :class:`Limit`; ``aliases`` maps an engineer-unit key to (SI field, conversion). Returns ``data``
    unchanged; raises ``ValueError("key=value: ...")`` with the key, value and range as the user wrote them.
    Values that are not numbers are left to the field's own validation."""
    if not isinstance(data, dict):
        return data
    limits = limits_of(model)
    for key, value in data.items():
        si, convert = (aliases or {}).get(key, (key, lambda v: v))
        limit = limits.get(si)
        if limit is None:
            continue
        pair = _takes_pair(model, si)
        if isinstance(value, (list, tuple)):
            if not pair:
                raise ValueError(f"{key}={_show(list(value))}: give one number, not a list")
            if len(value) != 2:
                raise ValueError(
                    f"{key}={_show(list(value))}: give a number (every device the same) or [low, high] (drawn per "
                    f"device), not a list of {len(value)} values"
                )
            values = list(value)
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and values[0] > values[1]:
                raise ValueError(f"{key}={_show(values)}: range has low > high; give [low, high] with low <= high")
        else:
            values = [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                continue
            try:
                number = float(v)  # a number given as text ("1000") is one to the field's validation too
            except ValueError:
                continue
            try:
                ok = limit.admits(float(convert(number)))
            except (ValueError, OverflowError):
                ok = False
            if not ok:
                shown = _show(list(value)) if isinstance(value, (list, tuple)) else _show(value)
                raise ValueError(f"{key}={shown}: outside {user_range(key, limit)}: {limit.ground}")
    return data


def require(model: Any, *, key: str, value: Any, field: str, what: str) -> Any:
    """``model`` as it is, unless its ``key`` is ``value`` and the ``field`` that setting needs is not given (None
    or empty): then a ValueError "key='value' needs what", for a validator of ``model`` to raise."""
    if getattr(model, key) == value and getattr(model, field) in (None, ()):
        raise ValueError(f"{key}={value!r} needs {what}")
    return model
