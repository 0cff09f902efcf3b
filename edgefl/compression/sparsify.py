"""Sparsifiers: kernel-wise (AnycostFL Sec. III-C 1), eq. (2)) and element-wise top-k over a whole update.

An update is a list of float32 tensors flattened into one vector in a fixed order. A **kernel** of a tensor of
shape ``(out, in, *k)`` with ``k`` non-empty (a convolution) is one ``(out, in)`` slice of ``prod(k)`` elements.
A linear layer's weight ``(out, in)`` is a 1x1 convolution on a 1x1 input, so its kernel is **one weight**;
biases and other 1-D/0-D tensors also have one-element kernels. Element-wise top-k (STC, QSGD) is the special
case where every kernel is one element (``kernel_wise=False``).

Kernels are ranked by ``||u[k]||_2 / sqrt(|k|)`` (root mean square): for kernels of one size (every conv of the
paper's CNNs) this is eq. (2)'s L2-norm order; it also makes kernels of different sizes comparable (error removed
per value sent), which a single threshold over conv and fc kernels needs. ``score="l2"`` gives the plain norm.
"""

from __future__ import annotations

import bisect
import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from edgefl.errors import EdgeflError

__all__ = ["SparsifyError", "KernelLayout", "kernel_layout", "kernel_scores", "rank_kernels", "kernel_elements",
           "top_kernels", "top_positions", "top_of", "rank_descending", "TopkSelection"]  # fmt: skip


class SparsifyError(EdgeflError, ValueError):
    """A sparsifier argument is out of range (k outside [0, n_kernels], unknown score)."""


@dataclass(frozen=True)
class KernelLayout:
    """Where the kernels of a flattened update lie.

    ``start``/``size``: first element index and element count of every kernel, shape ``(n_kernels,)``; kernels are
    numbered tensor by tensor, in memory order, so they tile ``[0, n_elements)`` in order.
    """

    shapes: tuple[tuple[int, ...], ...]
    kernel_wise: bool
    start: np.ndarray
    size: np.ndarray

    @property
    def n_kernels(self) -> int:
        return int(self.size.size)

    @property
    def n_elements(self) -> int:
        return int(sum(math.prod(s) for s in self.shapes))


def kernel_layout(shapes: Sequence[Sequence[int]], *, kernel_wise: bool = True) -> KernelLayout:
    """The kernel layout of tensors of ``shapes`` (see the module docstring for what a kernel is); one read-only
    layout per (shapes, kernel_wise), built once (every update of a model has the same)."""
    return _layout(tuple(tuple(int(d) for d in s) for s in shapes), bool(kernel_wise))


@functools.lru_cache(maxsize=64)
def _layout(shapes: tuple[tuple[int, ...], ...], kernel_wise: bool) -> KernelLayout:
    sizes = []
    for shape in shapes:
        n = math.prod(shape)
        k = math.prod(shape[2:]) if kernel_wise and len(shape) >= 3 else 1
        sizes.append(np.full(n // k if k else 0, k, dtype=np.int64))
    size = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    start = np.cumsum(size) - size
    start.flags.writeable = size.flags.writeable = False
    return KernelLayout(shapes=shapes, kernel_wise=kernel_wise, start=start, size=size)


def kernel_scores(flat: np.ndarray, layout: KernelLayout, *, score: str = "rms") -> np.ndarray:
    """Importance of every kernel: ``||u[k]||_2`` (``"l2"``, eq. (2)) or ``||u[k]||_2 / sqrt(|k|)`` (``"rms"``)."""
    if score not in ("rms", "l2"):
        raise SparsifyError(f"score={score!r}: must be 'rms' or 'l2'")
    sq = np.asarray(flat, dtype=np.float64) ** 2
    energy = np.add.reduceat(sq, layout.start) if layout.n_kernels else np.zeros(0)
    return np.sqrt(energy / layout.size) if score == "rms" else np.sqrt(energy)


def rank_kernels(scores: np.ndarray) -> np.ndarray:
    """Kernel indices by descending score, ties by index (the top-k rule of eq. (2) with an exact count).

    Scores are non-negative (norms). The order is ``np.argsort(-scores, kind="stable")``'s, computed as a
    least-significant-digit radix sort of the float64 bit patterns (which order like the values for non-negative
    floats) in 16-bit digits, each pass numpy's stable radix sort of ``uint16``; a digit that is the same for every
    kernel (the low bits of float32 magnitudes widened to float64) is skipped. About 1.5x faster than the
    comparison sort at 1.7 million kernels: every AnycostFL and UVeQFed upload of the paper's CNN, and every QSGD
    search that keeps some but not all of its elements, ranks them (STC selects with :class:`TopkSelection`).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size and not float(scores.min()) >= 0.0:  # a negative or NaN score (a diverged update)
        return np.argsort(-scores, kind="stable")
    key = ~(scores + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0; ~ makes descending ascending
    order = np.arange(scores.size, dtype=np.int64)
    for shift in (0, 16, 32, 48):
        digits = ((key >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.uint16)
        if digits.size and digits.min() == digits.max():
            continue
        order = order[np.argsort(digits[order], kind="stable")]
    return order


def top_positions(order: np.ndarray, k: int) -> np.ndarray:
    """``np.sort(order[:k])`` for a permutation ``order`` of ``range(n)``, in linear time (a mask, not a sort)."""
    mask = np.zeros(order.size, dtype=bool)
    mask[order[: int(k)]] = True
    return np.flatnonzero(mask)


def top_of(order: Callable[[], np.ndarray], n: int, k: int) -> np.ndarray:
    """``top_positions(order(), k)`` for a permutation of ``range(n)`` that ``order`` computes, called only when
    ``0 < k < n`` (keeping none or all of them needs no ranking)."""
    if int(k) <= 0:
        return np.zeros(0, dtype=np.int64)
    if int(k) >= n:
        return np.arange(n, dtype=np.int64)
    return top_positions(order(), k)


def kernel_elements(kernels: np.ndarray, layout: KernelLayout) -> np.ndarray:
    """Element indices covered by ``kernels`` (in the given kernel order, each kernel's elements ascending)."""
    kernels = np.asarray(kernels, dtype=np.int64)
    sizes = layout.size[kernels]
    offsets = np.cumsum(sizes) - sizes
    return np.repeat(layout.start[kernels] - offsets, sizes) + np.arange(int(sizes.sum()), dtype=np.int64)


def top_kernels(scores: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` highest-scoring kernels (the mask m of eq. (2))."""
    if not 0 <= int(k) <= scores.size:
        raise SparsifyError(f"k={k!r}: must be in [0, {scores.size}]")
    return top_positions(rank_kernels(scores), k)


_LOW, _HIGH = (0, 1) if sys.byteorder == "little" else (1, 0)  # the uint32 halves of a uint64, low word first


@functools.lru_cache(maxsize=8)
def _indices(n: int) -> np.ndarray:
    """``arange(n)`` as uint32, read-only (one per update size)."""
    out = np.arange(n, dtype=np.uint32)
    out.flags.writeable = False
    return out


class TopkSelection:
    """Positions of the ``k`` largest |values| (float32) for any ``k``, ties by index: ``np.sort(order[:k])`` for
    ``order = rank_kernels(np.abs(values))``, without ranking all of them.

    Every element gets a distinct 64-bit key: the bit pattern of its magnitude (its float32 bits less the sign bit,
    which order like the magnitudes) complemented in the high word, so larger magnitudes come first, and its index
    in the low word (ties by index). The top k are then the k least keys, whatever algorithm selects them. A query
    for ``k`` places the k-th least key with ``ndarray.partition`` on the stretch between the two nearest keys
    already placed, so the queries of a bisection partition about 2n keys in all.

    ``values``: shape ``(n,)``, no NaN, n < 2**32.
    """

    def __init__(self, values: np.ndarray) -> None:
        vals = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
        self.n = n = int(vals.size)
        if n >= 1 << 32:
            raise SparsifyError(f"{n} values: at most 2**32 - 1 can be selected from")
        if n and np.isnan(vals.min()):
            raise SparsifyError("values must not be NaN")
        keys = np.empty(n, dtype=np.uint64)
        halves = keys.view(np.uint32).reshape(n, 2)
        halves[:, _LOW] = _indices(n)
        high = halves[:, _HIGH]
        np.bitwise_and(vals.view(np.uint32), np.uint32(0x7FFFFFFF), out=high)  # |v|
        np.invert(high, out=high)
        self._keys = keys  # by element index
        self._work = keys.copy()  # partitioned in place: work[i] is the i-th least key for every placed i
        self._placed: list[int] = []  # sorted
        self._last: dict[int, int] = {}  # placed i -> largest element index among work[: i + 1]

    def _index_of(self, keys: np.ndarray) -> np.ndarray:
        return keys.view(np.uint32)[_LOW::2]

    def _place(self, i: int) -> None:
        """Put the i-th least key at ``work[i]``, the lesser keys before it and the greater after."""
        at = bisect.bisect_left(self._placed, i)
        if at < len(self._placed) and self._placed[at] == i:
            return
        lo = self._placed[at - 1] + 1 if at else 0
        hi = self._placed[at] if at < len(self._placed) else self.n
        self._work[lo:hi].partition(i - lo)
        before = self._last[self._placed[at - 1]] if at else -1
        self._last[i] = max(before, int(self._index_of(self._work[lo : i + 1]).max()))
        self._placed.insert(at, i)

    def last(self, k: int) -> int:
        """The largest position among the top ``k`` (``0 < k <= n``)."""
        k = self._check(k, 1)
        self._place(k - 1)
        return self._last[k - 1]

    def positions(self, k: int) -> np.ndarray:
        """The positions of the top ``k``, ascending (int64, shape ``(k,)``)."""
        k = self._check(k, 0)
        if k == 0 or k == self.n:
            return np.arange(k, dtype=np.int64)
        self._place(k - 1)
        if 4 * k < self.n:  # few: sort their indices; many: one pass over all keys gives them in order
            return np.sort(self._index_of(self._work[:k])).astype(np.int64)
        return np.flatnonzero(self.mask(k))

    def mask(self, k: int) -> np.ndarray:
        """The top ``k`` as a boolean mask, shape ``(n,)``."""
        k = self._check(k, 0)
        if k == self.n:
            return np.ones(self.n, dtype=bool)
        out = np.zeros(self.n, dtype=bool)
        if k:
            self._place(k - 1)
            if 4 * k < self.n:
                out[self._index_of(self._work[:k])] = True
            else:
                np.less_equal(self._keys, self._work[k - 1], out=out)
        return out

    def ranked(self, k0: int, k1: int) -> np.ndarray:
        """The positions ranked ``k0`` to ``k1 - 1`` (the top ``k1`` less the top ``k0``), in no particular order."""
        k0, k1 = self._check(k0, 0), self._check(k1, 0)
        for k in (k0, k1):
            if 0 < k < self.n:
                self._place(k - 1)
        return self._index_of(self._work[k0:k1]).astype(np.int64) if k1 > k0 else np.zeros(0, dtype=np.int64)

    def _check(self, k: int, least: int) -> int:
        if not least <= int(k) <= self.n:
            raise SparsifyError(f"k={k!r}: must be in [{least}, {self.n}]")
        return int(k)



def rank_descending(scores: np.ndarray) -> np.ndarray:
    """:func:`rank_kernels`' order (indices by descending score, ties by index) from one sort of unique 64-bit keys.

    A score ``s`` gets the key ``(~bits32(f) << (b + 1)) | (exact << b) | index``, ``b`` bits for the index, where
    ``f`` is the largest float32 <= s and ``exact`` says ``f == s`` (the magnitude of a float32 element, every
    one-element kernel, is exact). numpy's (SIMD) sort of the keys orders them by ``f`` descending; within one
    ``f`` the inexact scores (norms of several elements: larger than ``f``) come first, then the exact ones by
    index. Only the inexact scores of one ``f`` can be out of order among themselves: they are re-sorted by
    (score descending, index). Falls back to :func:`rank_kernels` when the index needs more than 31 bits or a score
    is negative or NaN.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.size
    b = max(1, (n - 1).bit_length())
    if n == 0 or b > 31 or not float(scores.min()) >= 0.0:
        return rank_kernels(scores)
    with np.errstate(over="ignore"):
        narrow = scores.astype(np.float32)  # beyond float32: inf
    inexact = np.flatnonzero(narrow != scores)
    if inexact.size:  # round down where the nearest float32 is above the score
        above = narrow[inexact] > scores[inexact]
        narrow[inexact[above]] = np.nextafter(narrow[inexact[above]], np.float32(0))
    flag = np.uint64(1 << b)
    keys = (~narrow.view(np.uint32)).astype(np.uint64)
    keys <<= np.uint64(b + 1)
    # the index, the exact flag and the top bit in one: ~bits of -0.0 lacks the top bit that every other score's has
    keys |= np.arange(n, dtype=np.uint64) + (flag | np.uint64(1 << (b + 32)))
    keys[inexact] &= ~flag
    keys.sort()
    if inexact.size > 1:  # the inexact scores' places and float32 buckets, before the keys become indices
        slots = np.flatnonzero((keys & flag) == 0)
        bucket = keys[slots] >> np.uint64(b + 1)
    keys &= np.uint64((1 << b) - 1)
    order = keys.view(np.int64)
    if inexact.size > 1:
        kept = order[slots]
        order[slots] = kept[np.lexsort((kept, -scores[kept], bucket))]
    return order
