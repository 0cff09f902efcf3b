"""The error class the radio package raises for bad input."""

from __future__ import annotations

__all__ = ["ChannelInputError"]


class ChannelInputError(ValueError):
    """An argument to a ``channel`` function is out of range.

    The message names the argument, the value and the allowed range, e.g. ``"bandwidth_hz=0.0: must be > 0"``.
    """
