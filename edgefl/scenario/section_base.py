"""The base of every scenario section, and the range check its fields share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict", "check_range"]


class Strict(BaseModel):
    """Unknown keys rejected, frozen, defaults validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def check_range(value: float | tuple[float, float]) -> float | tuple[float, float]:
    """A number, or ``(low, high)`` with ``low <= high`` (else ``ValueError``), for a field's validator."""
    if isinstance(value, tuple) and value[0] > value[1]:
        raise ValueError(f"range [{value[0]}, {value[1]}] has low > high; give [low, high] with low <= high")
    return value
