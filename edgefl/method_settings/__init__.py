"""Scenario settings shared outside the methods: ``Strict``, the base of every scenario section (and of each
method's own settings model, defined in its module under :mod:`edgefl.algorithms`), and the ``[method.luo]``
table of ``edgefl design ke``.

Pydantic only (no torch).
"""

from __future__ import annotations

from edgefl.method_settings._base import Strict, check_range
from edgefl.method_settings.luo import LuoSettings

__all__ = ["Strict", "check_range", "LuoSettings"]
