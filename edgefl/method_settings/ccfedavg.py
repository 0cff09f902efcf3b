"""Scenario settings of CC-FedAvg (Zhang et al.): the ``[method.ccfedavg]`` table."""

from __future__ import annotations

from edgefl.method_settings._base import Strict

__all__ = ["CCFedAvgSettings"]


class CCFedAvgSettings(Strict):
    """Settings of CC-FedAvg (Zhang et al.)."""
