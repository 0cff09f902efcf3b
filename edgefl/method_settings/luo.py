"""Scenario settings of Luo et al. cost-effective K and E (INFOCOM 2021): the ``[method.luo]`` table."""

from __future__ import annotations

from edgefl.method_settings._base import Strict

__all__ = ["LuoSettings"]


class LuoSettings(Strict):
    """Settings of Luo et al. cost-effective K and E (INFOCOM 2021)."""
