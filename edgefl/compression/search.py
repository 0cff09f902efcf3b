"""Budget searches over one compression knob: the largest setting whose real encoded size fits a bit budget.

:func:`largest_fitting` bisects any non-decreasing size function; :class:`TopkQuantSizer` gives the exact size of
:func:`edgefl.compression.codec.encode_fixed` (element-wise top-k, ``levels`` intervals) for any (k, L) after one
ranking, with the same uniforms as ``encode_fixed`` given a generator in the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from edgefl.compression import codec, sparsify

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


class TopkQuantSizer:
    """One update ranked once by |value| (element-wise top-k) with its rounding uniforms drawn once.

    ``encode(k, L)`` equals ``encode_fixed(update, kept_kernels=k, levels=L, rng=g, kernel_wise=False,
    score="l2")`` for a generator ``g`` in the state ``rng`` had when this sizer was built.
    """

    def __init__(self, update: Mapping[str, torch.Tensor], rng: np.random.Generator) -> None:
        self.names, self.shapes, self.flat = codec.flatten(update)
        self.layout = sparsify.kernel_layout(self.shapes, kernel_wise=False)
        self.order = sparsify.rank_kernels(sparsify.kernel_scores(self.flat, self.layout, score="l2"))
        self.uniforms = rng.random(self.flat.size)

    @property
    def n(self) -> int:
        return int(self.flat.size)

    def _plan(self, k: int, levels: int):
        if not 0 <= int(k) <= self.n:
            raise codec.CodecError(f"k={k!r}: must be in [0, {self.n}]")
        kept = np.sort(self.order[: int(k)])  # element-wise: kernel index = element index
        return codec._plan(self.flat, self.layout, kept, int(levels), self.uniforms, kept)

    def bits(self, k: int, levels: int) -> int:
        """Exact payload size [bits] (a multiple of 8)."""
        return codec._plan_bits(self._plan(k, levels), self.shapes, self.layout.n_kernels)

    def encode(self, k: int, levels: int) -> codec.Compressed:
        plan = self._plan(k, levels)
        payload = codec._write(plan, self.shapes, self.layout.n_kernels, False)
        return codec.Compressed(payload, 8 * len(payload), int(plan.kept.size), self.layout.n_kernels, int(levels),
                                codec.unflatten(codec._dequantised(plan, self.n), self.names, self.shapes))  # fmt: skip
