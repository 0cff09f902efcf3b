"""Budget searches over one compression knob: the largest setting whose real encoded size fits a bit budget.

:func:`largest_fitting` bisects any non-decreasing size function; :class:`TopkQuantSizer` gives the exact size of
:func:`edgefl.compression.codec.encode_fixed` (element-wise top-k, ``levels`` intervals) for any (k, L) after one
ranking, with the same uniforms as ``encode_fixed`` given a generator in the same state.
"""

from __future__ import annotations

from collections.abc import Callable

from edgefl.compression.codec import TopkQuantSizer  # sizes the codec computes from its own plans

__all__ = ["largest_fitting", "TopkQuantSizer"]


def largest_fitting(size_bits: Callable[[int], float], lo: int, hi: int, budget_bits: float) -> int | None:
    """The largest x in [lo, hi] with ``size_bits(x) <= budget_bits``, by bisection (``size_bits`` non-decreasing);
    None when even ``lo`` does not fit."""
    if size_bits(lo) > budget_bits:
        return None
    if size_bits(hi) <= budget_bits:
        return hi
    good, bad = lo, hi
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if size_bits(mid) <= budget_bits else (good, mid)
    return good
