"""Scenario settings of HeteroFL (Diao et al., ICLR 2021): the ``[method.heterofl]`` table."""

from __future__ import annotations

from edgefl.method_settings._base import Strict

__all__ = ["HeteroFLSettings"]


class HeteroFLSettings(Strict):
    """Settings of HeteroFL (Diao et al., ICLR 2021)."""
