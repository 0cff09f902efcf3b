"""Per-method scenario settings, one module per method (``[method.<name>]`` tables of a scenario).

Pydantic only (no torch): :mod:`edgefl.scenario` composes them into ``MethodConfig``. ``Strict`` is the base of
every scenario section: unknown keys are rejected, instances are frozen, defaults are validated.
"""

from __future__ import annotations

from edgefl.method_settings._base import Strict
from edgefl.method_settings.ccfedavg import CCFedAvgSettings
from edgefl.method_settings.heterofl import HeteroFLSettings
from edgefl.method_settings.luo import LuoSettings

__all__ = ["Strict", "HeteroFLSettings", "CCFedAvgSettings", "LuoSettings"]
