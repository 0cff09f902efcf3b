"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

import math

from hypothesis import strategies as st

__all__ = ["log_uniform"]


def log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    """Floats spread evenly in log10 between ``lo`` and ``hi`` (> 0): wide ranges without bias to the top."""
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda u: float(10.0**u))
