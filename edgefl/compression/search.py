"""Budget searches over one compression knob: the largest setting whose real encoded size fits a bit budget.

:func:`largest_fitting` bisects any non-decreasing size function; :class:`TopkQuantSizer` gives the exact size of
:func:`edgefl.compression.codec.encode_fixed` (element-wise top-k, ``levels`` intervals) for any (k, L) after one
ranking, with the same uniforms as ``encode_fixed`` given a generator in the same state. A size function that is a
:class:`SizeFunction` also answers "does x fit this budget?" on its own (from bounds, sizing exactly only where they
do not settle it); the bisection then asks that, and takes the same steps to the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgefl.compression.codec import TopkQuantSizer  # sizes the codec computes from its own plans

__all__ = ["largest_fitting", "SizeFunction", "TopkQuantSizer"]


@dataclass(frozen=True)
class SizeFunction:
    """A size function [bits] of one knob, ``f(x)``, with ``f.fits(x, budget_bits)`` answering
    ``f(x) <= budget_bits`` exactly, possibly without computing ``f(x)``."""

    size: Callable[[int], int]
    fits: Callable[[int, float], bool]

    def __call__(self, x: int) -> int:
        return self.size(x)


def largest_fitting(size_bits: Callable[[int], float], lo: int, hi: int, budget_bits: float) -> int | None:
    """The largest x in [lo, hi] with ``size_bits(x) <= budget_bits``, by bisection (``size_bits`` non-decreasing);
    None when even ``lo`` does not fit. A :class:`SizeFunction` answers each probe with its ``fits``."""
    if isinstance(size_bits, SizeFunction):
        fits = size_bits.fits
    else:
        fits = lambda x, budget: size_bits(x) <= budget  # noqa: E731
    if not fits(lo, budget_bits):
        return None
    if fits(hi, budget_bits):
        return hi
    good, bad = lo, hi
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid, budget_bits) else (good, mid)
    return good
