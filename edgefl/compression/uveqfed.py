"""UVeQFed's codec (Shlezinger et al., "UVeQFed: Universal Vector Quantization for Federated Learning", IEEE TSP
2021, arXiv 2006.03262): top-k, then subtractive-dithered lattice vector quantisation on the hexagonal lattice A2
(L = 2, :mod:`.lattice`), with entropy-coded lattice indices.

Encoder, for an update h of n elements:

- E1 normalise and partition: h is cut into ``M = ceil(n / 2)`` sub-vectors of L = 2 consecutive elements (the
  last padded with a 0); the lattice's minimum distance is ``d = step ||h|| / sqrt(n)`` [update units] (scaling h
  by ``1 / ||h||`` onto a fixed lattice, as UVeQFed normalises, is the same quantiser). Sparsification keeps the
  ``k`` sub-vectors of largest L2 norm (top-k over sub-vectors, so every kept sub-vector is quantised whole); d
  does not depend on k;
- E2 dither: sub-vector ``j`` gets ``z_j`` uniform over A2's basic cell, from the ``j``-th pair of U[0, 1) that a
  generator both ends can regenerate draws (the run's stream for this round and device: the shared seed);
- E3 quantise: ``(a_j, b_j)``, the integer coordinates of the A2 point nearest to ``h_j + z_j``;
- E4 entropy code: each pair is one symbol (its two zigzag-mapped coordinates joined), the distinct symbols are
  listed once (Rice-coded gaps) and the stream is canonical-Huffman coded over that list.

Decoder: D1 decode the symbols, D2 subtract the regenerated dither, ``h^_j = B (a_j, b_j) - z_j``, D3 put the
kept sub-vectors back at their indices (the others are 0). On a kept sub-vector the error ``h^_j - h_j`` is
uniform over the hexagon, independent of ``h``, with ``E||e||^2 / 2 = G(A2) V = 5 d^2 / 72`` per dimension.

Sources: only the paper's abstract could be read here (arXiv 2006.03262: universal, i.e. subtractive-dithered,
lattice vector quantisation with entropy coding, the server subtracting the dither); the step labels E1-E4 /
D1-D3 name the stages of that scheme, not checked equation by equation against the paper's Sec. III. The
lattice facts (A2's nearest-point rule, cell volume, G = 5 / (36 sqrt(3))) are Conway & Sloane's.

Container (MSB first, padded to a whole byte): the header of :mod:`.codec` without its kernel-wise flag
(magic, version, tensor count, shapes, k kept sub-vectors); if k > 0: Rice gaps of the kept sub-vector indices,
d (float32), the symbol base (32 bits: one more than the largest zigzag b), the number of distinct symbols (32),
their Rice-coded gaps, and the Huffman-coded symbol indices (:func:`coding.huffman_encode`).

Sizes without payloads. :class:`LatticeSizer` runs E1-E3 once for every sub-vector (one compiled pass,
:func:`_quantise`, that also keeps D2's values and the norms) and then sizes any k from counts: the Huffman table and code bits depend only on the
histogram of the kept points (the distinct symbols sort as their coordinate pairs whatever the base); the Rice gaps
of the kept indices take exactly ``last index + 1`` bits when they sum to at most k (the optimal parameter is 0
then); only the Rice-coded lengths of the 512-symbol blocks depend on where the kept points lie. The budget search
(:func:`.search.largest_fitting` through :attr:`LatticeSizer.bits`) settles a probe from bounds when it can (the
histogram's entropy, then the Huffman code with the block lengths' Rice size bounded) and sizes exactly only the
probes near the budget, the block lengths then updated from the last exact size when few sub-vectors changed. The
size grows with k up to the few bits the Huffman table and block lengths can move. The decoder draws the same
uniforms and works out the dither for the kept sub-vectors only (:func:`_rebuild`).

The compiled kernels (:mod:`.jit`) compute what the numpy code they replaced computed, with the same IEEE
operations in the same order (tests/test_jit_lattice.py keeps that code and compares them to the bit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgefl.compression import coding, lattice, sparsify
from edgefl.compression.jit import kernel
from edgefl.compression.container import (
    CodecError, Encoded, check_names, flatten, header_bits, read_header, tensor_views, write_header,
)  # fmt: skip
from edgefl.compression.search import SizeFunction

__all__ = ["LatticeCoded", "LatticeSizer", "decode_lattice", "DIM"]

_MAGIC, _VERSION = 0xC7, 1
DIM = 2
"""The lattice dimension L (A2)."""
_TINY_D = float(np.finfo(np.float32).tiny)  # d of an all-zero update (any d quantises 0; keep it positive)
_BLOCK = 1 << 9  # Huffman symbols per block (coding's layout): the block lengths are part of the size
_MAX_BLOCK_BITS = 14  # bit length of the largest block length, 512 codes of 16 bits
_SQRT3_2 = math.sqrt(3.0) / 2.0
_CHUNK = 512  # sub-vectors per step of the compiled loops (their columns stay in the L1 cache)
_NEAR = 1 << 12  # sub-vectors in one top k and not the other up to which block lengths are updated, not redone


def _zigzag(v: np.ndarray) -> np.ndarray:
    """0, -1, 1, -2, ... -> 0, 1, 2, 3, ...: ``2 v`` for v >= 0, ``-2 v - 1`` below (``(v << 1) ^ (v >> 63)``)."""
    v = np.asarray(v, dtype=np.int64)
    return (v << 1) ^ (v >> 63)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return np.where(z % 2 == 0, z // 2, -(z + 1) // 2).astype(np.int64)


def _distinct(symbols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(symbols, return_inverse=True)`` for non-negative integer symbols: through a presence table when
    the largest symbol is at most a few times the count (linear time, no sort), else by numpy's sort."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    top = int(symbols.max())
    if symbols.min() < 0 or top >= max(4 * symbols.size, 1 << 16):
        distinct, index = np.unique(symbols, return_inverse=True)
        return distinct, index.reshape(-1)
    present = np.zeros(top + 1, dtype=bool)
    present[symbols] = True
    slot = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present), slot[symbols]


def _points(za: np.ndarray, zb: np.ndarray, top_za: int, top_zb: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct joined points ``za (top_zb + 1) + zb`` (ascending: their (za, zb) order) and each one's index
    among them (int64), as :func:`_distinct` gives them, through a presence table (:func:`_point_ids`) when it is
    at most a few times the count."""
    joint_base = top_zb + 1
    size = top_za * joint_base + top_zb + 1
    m = za.size
    if size > max(4 * m, 1 << 16):
        return _distinct(za * joint_base + zb)
    return _point_ids(za, zb, joint_base, size)


@kernel
def _quantise(flat, u, d, rows, values, norm2, key, za, zb):  # pragma: no cover - compiled
    """:func:`_quantise_with` the dither rule for ``d`` (chosen once: a choice per sub-vector keeps the loop slow)."""
    if 1e-300 < d < 1e300:  # lattice.fast_dither
        return _quantise_with(flat, u, d, rows, values, norm2, key, za, zb, lattice.dither_fast)
    return _quantise_with(flat, u, d, rows, values, norm2, key, za, zb, lattice.dither_near)


@kernel
def _quantise_with(flat, u, d, rows, values, norm2, key, za, zb, dither):  # pragma: no cover - compiled
    """E1-E3 for every sub-vector ``j`` (elements ``2j``, ``2j + 1`` of ``flat``, float32, the missing last one 0):
    its squared norm ``norm2`` (float64 squares added) and ranking bucket ``key`` (:func:`_bucket_keys`), the
    dither ``z`` of uniforms ``u[j]`` (``dither``: :func:`lattice.dither_fast` or ``dither_near``), the nearest
    A2 point of ``h_j + z`` (:func:`lattice.nearest_point`) as zigzag coordinates ``za``, ``zb``, and D2's
    ``values = B (a, b) - z`` (float32). Blocks of ``rows`` sub-vectors whose squared norms are all below
    ``(2^40 d)^2`` take ``B (a, b)`` from the point the rule chose (``+ 0.0``: the same bits), the others compute
    it from ``(a, b)``. Returns whether all squared norms are finite, and the largest ``za`` and ``zb`` (0 when
    there is none).

    Each step runs over a chunk of :data:`_CHUNK` sub-vectors in its own loop of separate columns (the compiler
    then works on several sub-vectors at once; one loop doing every step waits on each one's long chain)."""
    n = flat.size
    m = norm2.size
    pairs = n // 2  # sub-vectors with both elements
    bits = norm2.view(np.uint64)
    near = (2.0**40 * d) ** 2
    c = d * _SQRT3_2
    x0 = np.empty(_CHUNK)
    x1 = np.empty(_CHUNK)
    z0 = np.empty(_CHUNK)
    z1 = np.empty(_CHUNK)
    px = np.empty(_CHUNK)
    py = np.empty(_CHUNK)
    a = np.empty(_CHUNK, dtype=np.int64)
    b = np.empty(_CHUNK, dtype=np.int64)
    finite = True
    top_za = 0
    top_zb = 0
    for s in range(0, m, rows):
        e = min(s + rows, m)
        nan = False
        largest = 0.0
        full = min(e, pairs) - s  # sub-vectors of the block with both elements
        h = flat[2 * s : 2 * (s + full)]
        nb = norm2[s:e]
        for i in range(e - s):
            f0 = np.float64(h[2 * i]) if i < full else np.float64(flat[2 * (s + i)])
            f1 = np.float64(h[2 * i + 1]) if i < full else 0.0
            v = f0 * f0 + f1 * f1
            nb[i] = v
            if v != v:
                nan = True
            elif v > largest:
                largest = v
        kb = key[s:e]
        bb = bits[s:e]
        for i in range(e - s):
            kb[i] = np.uint16(np.uint64(0xFFFF) - (bb[i] >> np.uint64(48)))
        from_point = not nan and largest < near  # numpy's block max is NaN if any is
        finite = finite and not nan and largest < np.inf
        for c0 in range(s, e, _CHUNK):
            size = min(_CHUNK, e - c0)
            full = min(size, pairs - c0)  # sub-vectors of the chunk with both elements
            h = flat[2 * c0 : 2 * (c0 + full)]  # the chunk's views: indices from 0 (no negative-index checks)
            uc = u[c0 : c0 + size]
            vc = values[c0 : c0 + size]
            for i in range(full):
                x0[i] = np.float64(h[2 * i])
                x1[i] = np.float64(h[2 * i + 1])
            for i in range(full, size):  # the last sub-vector of an odd length
                x0[i] = np.float64(flat[2 * (c0 + i)])
                x1[i] = 0.0
            for i in range(size):
                z0[i], z1[i] = dither(uc[i, 0], uc[i, 1], d)  # E2
            for i in range(size):
                a[i], b[i], px[i], py[i] = lattice.nearest_point(x0[i] + z0[i], x1[i] + z1[i], d)  # E3
            if from_point:
                for i in range(size):
                    vc[i, 0] = (px[i] + 0.0) - z0[i]
                    vc[i, 1] = (py[i] + 0.0) - z1[i]
            else:
                for i in range(size):
                    vc[i, 0] = d * (a[i] + 0.5 * b[i]) - z0[i]
                    vc[i, 1] = c * b[i] - z1[i]
            zac = za[c0 : c0 + size]
            zbc = zb[c0 : c0 + size]
            for i in range(size):
                ga = (a[i] << 1) ^ (a[i] >> 63)
                gb = (b[i] << 1) ^ (b[i] >> 63)
                zac[i] = ga
                zbc[i] = gb
                top_za = max(top_za, ga)
                top_zb = max(top_zb, gb)
    return finite, top_za, top_zb


@kernel
def _point_ids(za, zb, joint_base, size):  # pragma: no cover - compiled
    """:func:`_points` through its presence table of ``size`` entries: the distinct ``za joint_base + zb``,
    ascending, and each one's index among them."""
    present = np.zeros(size, dtype=np.bool_)
    m = za.size
    index = np.empty(m, dtype=np.int64)
    for j in range(m):
        joint = za[j] * joint_base + zb[j]
        index[j] = joint
        present[joint] = True
    slot = np.empty(size, dtype=np.int64)
    count = 0
    for i in range(size):
        slot[i] = count
        if present[i]:
            count += 1
    points = np.empty(count, dtype=np.int64)
    for i in range(size):
        if present[i]:
            points[slot[i]] = i
    for j in range(m):
        index[j] = slot[index[j]]
    return points, index


@kernel
def _stable_order(key, sym, n_keys):  # pragma: no cover - compiled
    """``np.argsort(key, kind="stable")`` of keys in ``[0, n_keys)`` by a counting sort, ``sym`` in that order, and
    the count of each key (``np.bincount(key, minlength=n_keys)``)."""
    counts = np.zeros(n_keys, dtype=np.int64)
    for j in range(key.size):
        counts[key[j]] += 1
    at = np.empty(n_keys, dtype=np.int64)
    total = 0
    for i in range(n_keys):
        at[i] = total
        total += counts[i]
    order = np.empty(key.size, dtype=np.int64)
    sorted_sym = np.empty(key.size, dtype=sym.dtype)
    for j in range(key.size):
        i = at[key[j]]
        order[i] = j
        sorted_sym[i] = sym[j]
        at[key[j]] = i + 1
    return order, sorted_sym, counts


@kernel
def _masks(kept, m, n):  # pragma: no cover - compiled
    """The mask of the kept sub-vectors (``m``) and of their elements (``n``: ``np.repeat(mask, 2)[:n]``)."""
    mask = np.zeros(m, dtype=np.bool_)
    sent = np.zeros(n, dtype=np.bool_)
    for i in range(kept.size):
        j = kept[i]
        mask[j] = True
        sent[2 * j] = True
        if 2 * j + 1 < n:
            sent[2 * j + 1] = True
    return mask, sent


@kernel
def _kept_symbols(kept, sym, n_points):  # pragma: no cover - compiled
    """For the kept sub-vectors' points ``sym[kept]``: the histogram over the ``n_points`` point ids and each one's
    index among the used ids (ascending): ``np.bincount`` and ``index_of[sym[kept]]``."""
    counts = np.zeros(n_points, dtype=np.int64)
    for i in range(kept.size):
        counts[sym[kept[i]]] += 1
    index_of = np.zeros(n_points, dtype=np.int64)
    used = 0
    for p in range(n_points):
        if counts[p]:
            index_of[p] = used
            used += 1
    index = np.empty(kept.size, dtype=np.int64)
    for i in range(kept.size):
        index[i] = index_of[sym[kept[i]]]
    return counts, index


@kernel
def _rebuild(out, kept, index, first, second, u, d):  # pragma: no cover - compiled
    """D2-D3: ``out[kept[i]] = (first, second)[index[i]] - z`` (float64 differences stored as float32), ``z`` the
    dither of the uniforms ``u[kept[i]]`` (:func:`lattice.dither_fast`, or ``dither_near`` for ``d`` outside its
    range)."""
    if 1e-300 < d < 1e300:  # lattice.fast_dither
        _rebuild_with(out, kept, index, first, second, u, d, lattice.dither_fast)
    else:
        _rebuild_with(out, kept, index, first, second, u, d, lattice.dither_near)


@kernel
def _rebuild_with(out, kept, index, first, second, u, d, dither):  # pragma: no cover - compiled
    u0 = np.empty(_CHUNK)
    u1 = np.empty(_CHUNK)
    z0 = np.empty(_CHUNK)
    z1 = np.empty(_CHUNK)
    for c0 in range(0, kept.size, _CHUNK):  # each step over a chunk in its own loop (see _quantise_with)
        size = min(_CHUNK, kept.size - c0)
        for i in range(size):
            j = kept[c0 + i]
            u0[i] = u[j, 0]
            u1[i] = u[j, 1]
        for i in range(size):
            z0[i], z1[i] = dither(u0[i], u1[i], d)
        for i in range(size):
            j = kept[c0 + i]
            t = index[c0 + i]
            out[j, 0] = first[t] - z0[i]
            out[j, 1] = second[t] - z1[i]


def _bytes(bits: int) -> int:
    """Whole-byte size [bits] of ``bits`` bits (the container is padded to a byte)."""
    return 8 * ((bits + 7) // 8)


def _rice_bounds(total: int, count: int, top: int) -> tuple[int, int]:
    """Least and greatest possible :func:`coding.rice_bits` at the optimal parameter of ``count`` non-negative
    values summing to ``total`` whose largest has at most ``top`` bits: ``sum floor(v / 2^b)`` lies in
    ``[(total - count (2^b - 1)) / 2^b, total / 2^b]`` for each b, and the optimum is at most ``top``."""
    if count == 0:
        return 0, 0
    lo = hi = None
    for b in range(max(top, 1) + 1):
        fixed = count * (b + 1)
        low = fixed + max(0, -((count * ((1 << b) - 1) - total) >> b))  # ceil((total - count (2^b - 1)) / 2^b)
        high = fixed + (total >> b)
        lo = low if lo is None else min(lo, low)
        hi = high if hi is None else min(hi, high)
    return lo, hi


def _rice_size(values: np.ndarray) -> int:
    """:func:`coding.rice_bits` at :func:`coding.rice_parameter` (without the parameter's 6 bits)."""
    return coding.rice_bits(values, coding.rice_parameter(values))


@dataclass(frozen=True, kw_only=True)
class LatticeCoded(Encoded):
    """One UVeQFed payload (:class:`~edgefl.compression.container.Encoded`: ``payload``, ``bits``, and
    ``update``/``sent``, what the decoder rebuilds with the shared dither) with ``kept`` sub-vectors and the
    lattice's minimum distance ``d`` [update units]."""

    kept: int
    d: float


def _bucket_keys(norm2: np.ndarray) -> np.ndarray:
    """:class:`_Ranking`'s bucket of each squared norm (uint16, ascending = descending norm): 0xFFFF less the top
    16 bits of its float64 pattern."""
    return (0xFFFF - (norm2.view(np.uint64) >> np.uint64(48))).astype(np.uint16)


class _Ranking:
    """The sub-vectors by descending squared norm, ties by index (``np.argsort(-norm2, kind="stable")``'s
    order), resolved only where asked, and the histogram of the points of any top k.

    One stable counting sort (:func:`_stable_order`) over the top 16 bits of each norm's float64 pattern (sign, exponent and
    4 mantissa bits: buckets of a sixteenth of a binade, which order like the values) gives the buckets in order,
    each bucket's members by index. A bucket whose members tie (the zero norms) is in order already; another is
    sorted the second time a top k cuts it (the search's last probes cut one bucket again and again), and the
    first time its members above the cut are found by selecting the cut's value. ``order`` holds the buckets in
    order, each sorted one in rank order; ``sym`` the points in the same order.
    """

    def __init__(self, norm2: np.ndarray, sym: np.ndarray, n_points: int, key: np.ndarray | None = None) -> None:
        self.norm2 = norm2
        self.key = _bucket_keys(norm2) if key is None else key  # ascending key = bucket
        self.order, self.sym, counts = _stable_order(self.key, sym, 1 << 16)
        self.sym_of = sym
        self.bucket_key = np.flatnonzero(counts)
        sizes = counts[self.bucket_key]
        self.end = np.cumsum(sizes)
        self.start = self.end - sizes
        self.prefix_last = np.maximum.accumulate(self.order[self.end - 1])  # a bucket's last member: its largest
        self.exact = sizes == 1  # buckets whose stretch of ``order`` is in rank order
        self._values: dict[int, tuple[np.ndarray, int]] = {}  # bucket -> (its norms by index, first cut)
        self._last: dict[int, np.ndarray] = {}  # exact bucket -> running largest index over its stretch
        self._cursor = (0, np.zeros(n_points, dtype=np.int64))  # (rank r, histogram of order[:r]'s points)

    def locate(self, k: int) -> tuple[int, int]:
        """The bucket holding rank ``k - 1`` (k >= 1) and how many of its members the top k hold."""
        i = int(np.searchsorted(self.end, k))
        return i, k - int(self.start[i])

    def _resolve(self, i: int, r: int) -> bool:
        """Whether bucket ``i`` is in rank order, sorting it when a second cut (``r`` members) falls in it."""
        if self.exact[i]:
            return True
        s, e = int(self.start[i]), int(self.end[i])
        seen = self._values.get(i)
        if seen is None:
            values = self.norm2[self.order[s:e]]
            self._values[i] = (values, r)
            if values.min() == values.max():  # all tie: by index is in order
                self.exact[i] = True
            return bool(self.exact[i])
        if r != seen[1]:
            self._sort(i)
        return bool(self.exact[i])

    def _sort(self, i: int) -> None:
        """Put bucket ``i``'s stretch of ``order`` (and ``sym``) in rank order."""
        if self.exact[i]:
            return
        s, e = int(self.start[i]), int(self.end[i])
        seen = self._values.get(i)
        values = self.norm2[self.order[s:e]] if seen is None else seen[0]
        at, hist = self._cursor
        if s < at < e:  # the histogram at a rank inside the bucket changes with its order
            self._cursor = (s, hist - np.bincount(self.sym[s:at], minlength=hist.size))
        perm = np.argsort(-values, kind="stable")
        self.order[s:e] = self.order[s:e][perm]
        self.sym[s:e] = self.sym[s:e][perm]
        self.exact[i] = True

    def _part(self, i: int, r: int) -> np.ndarray:
        """Mask over bucket ``i``'s stretch (its members by index) of its top ``r``, for an unsorted bucket."""
        values = self._values[i][0]
        size = values.size
        cut = np.partition(values, size - r)[size - r]
        above = values > cut
        tie = values == cut
        return above | (tie & (np.cumsum(tie) <= r - int(np.count_nonzero(above))))

    def _move(self, r: int) -> np.ndarray:
        at, hist = self._cursor
        if r > at:
            hist = hist + np.bincount(self.sym[at:r], minlength=hist.size)
        elif r < at:
            hist = hist - np.bincount(self.sym[r:at], minlength=hist.size)
        self._cursor = (r, hist)
        return hist

    def cut(self, k: int) -> tuple[np.ndarray, int]:
        """For the top ``k`` (k >= 1): the histogram of their points (read only) and their largest index."""
        i, r = self.locate(k)
        before = int(self.prefix_last[i - 1]) if i else -1
        s = int(self.start[i])
        if s + r == self.end[i]:  # the whole bucket
            return self._move(s + r), int(self.prefix_last[i])
        if self._resolve(i, r):
            last = self._last.get(i)
            if last is None:
                last = self._last[i] = np.maximum.accumulate(self.order[s : self.end[i]])
            return self._move(s + r), max(before, int(last[r - 1]))
        part = self.order[s : self.end[i]][self._part(i, r)]
        hist = self._move(s)
        hist = hist + np.bincount(self.sym_of[part], minlength=hist.size)
        return hist, max(before, int(part.max()))

    def top(self, k: int) -> np.ndarray:
        """Indices (unsorted) of the top ``k``."""
        return self.between(0, k)

    def between(self, k0: int, k1: int) -> np.ndarray:
        """Indices (unsorted) of ranks ``k0 <= rank < k1``."""
        if k1 <= k0:
            return np.zeros(0, dtype=np.int64)
        i1, r1 = self.locate(k1)
        i0, r0 = self.locate(k0) if k0 > 0 else (-1, 0)
        if i0 == i1:  # two cuts in one bucket: sort it (before either cut reads its order)
            self._sort(i1)
        s1, e1 = int(self.start[i1]), int(self.end[i1])
        if s1 + r1 == e1 or self._resolve(i1, r1):
            upper, hi = None, s1 + r1  # ranks below hi are order[:hi]'s
        else:
            upper, hi = self._part(i1, r1), s1
        parts = []
        if k0 <= 0:
            lo = 0
        else:
            s0, e0 = int(self.start[i0]), int(self.end[i0])
            if s0 + r0 == e0 or self._resolve(i0, r0):
                lo = s0 + r0
            else:
                parts.append(self.order[s0:e0][~self._part(i0, r0)])
                lo = e0
        parts.append(self.order[lo:hi])
        if upper is not None:
            parts.append(self.order[s1:e1][upper])
        return np.concatenate(parts)

    def mask(self, k: int) -> np.ndarray:
        """Boolean mask of the top ``k`` over the indices."""
        if k <= 0:
            return np.zeros(self.key.size, dtype=bool)
        i, r = self.locate(k)
        out = self.key < self.bucket_key[i]
        out[self.between(int(self.start[i]), k)] = True
        return out


@dataclass
class _Probe:
    """What sizing the top k needs, short of where they lie: the histogram of their points (``used`` dense point
    ids, ascending, and ``counts``), the largest kept index, the exact bits of everything else but the Rice gaps of
    the kept indices, the Rice-coded block lengths and the code bits, and once computed the Huffman code lengths."""

    k: int
    used: np.ndarray
    counts: np.ndarray
    last: int
    fixed: int
    lengths: np.ndarray | None = None

    @property
    def positions_exact(self) -> int | None:
        """The Rice gaps of the kept indices [bits] when their optimal parameter is 0 (their sum, ``last + 1 -
        k``, is at most k: then ``f(0) <= f(1)``, and the size is convex in the parameter), else None."""
        return self.last + 1 if self.last + 1 - self.k <= self.k else None

    def positions_bounds(self) -> tuple[int, int]:
        exact = self.positions_exact
        if exact is not None:
            return exact, exact
        total = self.last + 1 - self.k
        return _rice_bounds(total, self.k, total.bit_length())

    @property
    def n_blocks(self) -> int:
        return -(-self.k // _BLOCK)


class _Reference:
    """An exactly sized top k: its sorted indices, their code lengths (uint8), the code length of every point id
    then (0 if unused) and the ids used; the prefix sums of the code lengths are made on first use."""

    def __init__(self, k: int, kept: np.ndarray, lengths: np.ndarray, length_of: np.ndarray, used: np.ndarray):
        self.k, self.kept, self.lengths, self.length_of, self.used = k, kept, lengths, length_of, used
        self._prefix: np.ndarray | None = None

    @property
    def prefix(self) -> np.ndarray:
        if self._prefix is None:
            self._prefix = np.zeros(self.k + 1, dtype=np.int64)
            np.cumsum(self.lengths, out=self._prefix[1:])
        return self._prefix


class LatticeSizer:
    """One update partitioned, dithered and quantised once (E1-E3 for every sub-vector): :attr:`bits` and
    :meth:`encode` for any number ``k`` of kept sub-vectors.

    ``dither_rng``: the shared-seed generator; sub-vector ``j``'s dither comes from the ``j``-th pair of doubles
    it draws, so :func:`decode_lattice` with a generator in the same state regenerates it. ``step``: the lattice's
    minimum distance in units of the update's RMS ``||h|| / sqrt(n)`` (> 0).
    """

    def __init__(self, update: Mapping[str, torch.Tensor], dither_rng: np.random.Generator, *, step: float) -> None:
        if not step > 0 or not math.isfinite(step):
            raise CodecError(f"step={step!r}: must be a finite number > 0")
        self.names, self.shapes, self.flat = flatten(update)
        n, m = self.n, self.m
        squares = np.square(self.flat, dtype=np.float64)  # each element's, in float64
        rms = math.sqrt(float(np.mean(squares))) if n else 0.0
        d = float(np.float32(step * rms))  # sent as float32: both ends use this value
        self.d = d = d if d > 0 else _TINY_D
        self._values = np.empty((m, DIM), dtype=np.float32)  # D2 for every sub-vector: B (a, b) - z
        self._lent: tuple[np.ndarray, np.ndarray] | None = None  # rows zeroed in _values since it was handed over
        norm2 = np.empty(m)
        key = np.empty(m, dtype=np.uint16)
        za, zb = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
        u = dither_rng.random((m, DIM))  # the shared seed's draws (one draw is the blocks' draws in order)
        finite, top_za, top_zb = _quantise(self.flat, u, d, lattice.ROWS, self._values, norm2, key, za, zb)
        finite, top_za, top_zb = bool(finite), int(top_za), int(top_zb)
        self._norm2, self._key = norm2, key
        self._header = header_bits(self.shapes, flag=False)
        self._rank: _Ranking | None = None
        self._order: np.ndarray | None = None  # the full ranking, for norms that are not all finite
        self._finite = finite
        if self._finite:  # points as dense ids in the order of (zigzag a, zigzag b): the symbols' order, any base
            points, self._sym = _points(za, zb, top_za, top_zb)
            self._point_za, self._point_zb = points // (top_zb + 1), points % (top_zb + 1)
            self._n_points = int(points.size)
        else:  # a diverged update: the plain stable ranking (NaN last) and symbols joined per k
            self._za, self._zb = za, zb
            self._order = sparsify.rank_kernels(norm2)
        self._ref: _Reference | None = None
        self._huffman = coding.HuffmanMemo()  # huffman_lengths by a compiled merge

    @property
    def n(self) -> int:
        """Elements of the update."""
        return int(self.flat.size)

    @property
    def m(self) -> int:
        """Sub-vectors of the update (the largest k)."""
        return math.ceil(self.n / DIM)

    @property
    def bits(self) -> SizeFunction:
        """Exact payload size [bits] keeping the top ``k`` sub-vectors (a multiple of 8): ``bits(k)``; and
        ``bits.fits(k, budget_bits)``, whether that size is at most the budget, from bounds where they settle it."""
        return SizeFunction(self._bits, self._fits)

    # --- ranking ---------------------------------------------------------------------------------------------

    def _check(self, k: int) -> int:
        if not 0 <= int(k) <= self.m:
            raise CodecError(f"k={k!r}: must be in [0, {self.m}]")
        return int(k)

    def _ranking(self) -> _Ranking | None:
        if self._rank is None and self._finite:
            self._rank = _Ranking(self._norm2, self._sym, self._n_points, self._key)
        return self._rank

    def _kept(self, k: int) -> np.ndarray:
        """Sorted indices of the top ``k`` sub-vectors."""
        if k >= self.m:
            return np.arange(self.m, dtype=np.int64)
        if self._ref is not None and self._ref.k == k:
            return self._ref.kept
        rank = self._ranking()
        if rank is None:
            return sparsify.top_positions(self._order, k)
        if k <= self.m // 16:
            return np.sort(rank.top(k))
        return np.flatnonzero(rank.mask(k))

    # --- sizes ------------------------------------------------------------------------------------------------

    def _fixed_bits(self, k: int, used: np.ndarray) -> int:
        """Header, d, base, count, the distinct symbols' Rice gaps, and the Huffman stream's header and table."""
        if k == 0:
            return self._header
        za, zb = self._point_za[used], self._point_zb[used]
        symbols = za * (int(zb.max()) + 1) + zb
        bits = self._header + 6 + 32 + 32 + 32 + 6 + _rice_size(np.diff(symbols, prepend=-1) - 1) + 64
        u = int(used.size)
        return bits + (32 if u == 1 else 6 + u + 4 * u + 6)  # table: Rice gaps (all 0), 4-bit lengths; blocks' b

    def _probe(self, k: int) -> _Probe:
        if k in (0, self.m):
            counts = np.bincount(self._sym, minlength=self._n_points) if k else np.zeros(0, dtype=np.int64)
            used = np.flatnonzero(counts) if k else np.zeros(0, dtype=np.int64)
            return _Probe(k, used, counts[used], self.m - 1 if k else -1, self._fixed_bits(k, used))
        counts, last = self._ranking().cut(k)
        used = np.flatnonzero(counts)
        return _Probe(k, used, counts[used], last, self._fixed_bits(k, used))

    def _lengths(self, probe: _Probe) -> np.ndarray:
        if probe.lengths is None:
            probe.lengths = self._huffman.lengths(probe.counts)
        return probe.lengths

    def _block_sums(self, probe: _Probe) -> np.ndarray:
        """Code bits of each block of 512 kept symbols (in index order), from the last exact size when at most
        :data:`_NEAR` sub-vectors are in one and not the other and the shared points kept their code lengths, else
        afresh (and that becomes the reference)."""
        k = probe.k
        length_of = np.zeros(self._n_points, dtype=np.int64)
        length_of[probe.used] = self._lengths(probe)
        bounds = np.minimum(np.arange(probe.n_blocks + 1, dtype=np.int64) * _BLOCK, k)
        ref = self._ref
        rank = self._rank
        if ref is not None and rank is not None and 0 < abs(k - ref.k) <= _NEAR:
            shared = probe.used if k < ref.k else ref.used
            if np.array_equal(length_of[shared], ref.length_of[shared]):
                return np.diff(self._prefix_from(ref, k, length_of, bounds))
        kept = self._kept(k)
        lengths = length_of.astype(np.uint8)[self._sym[kept] if k < self.m else self._sym]
        self._ref = _Reference(k, kept, lengths, length_of, probe.used)
        return np.add.reduceat(lengths, bounds[:-1], dtype=np.int64)

    def _prefix_from(self, ref: _Reference, k: int, length_of: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Prefix sums of the code lengths of the top k at the kept positions ``bounds``, from ``ref``'s."""
        if k < ref.k:  # survivors: t of them end at ref index t + r(t), r(t) = removed ones before them
            gone = np.sort(self._rank.between(k, ref.k))
            at = np.searchsorted(ref.kept, gone)
            removed = np.concatenate([[0], np.cumsum(ref.length_of[self._sym[gone]])])
            r = np.searchsorted(at - np.arange(at.size), bounds, side="right")
            return ref.prefix[bounds + r] - removed[r]
        new = np.sort(self._rank.between(ref.k, k))  # t kept hold a(t) new ones and t - a(t) of ref's
        at = np.searchsorted(ref.kept, new) + np.arange(new.size)
        added = np.concatenate([[0], np.cumsum(length_of[self._sym[new]])])
        a = np.searchsorted(at, bounds)
        return ref.prefix[bounds - a] + added[a]

    def _exact(self, probe: _Probe) -> int:
        bits = probe.fixed
        if probe.k == 0:
            return _bytes(bits)
        if probe.used.size > 1:
            blocks = self._block_sums(probe)
            bits += _rice_size(blocks) + int(blocks.sum())
        positions = probe.positions_exact
        if positions is None:
            positions = _rice_size(np.diff(self._kept(probe.k), prepend=-1) - 1)
        return _bytes(bits + positions)

    def _bits(self, k: int) -> int:
        k = self._check(k)
        return self._exact(self._probe(k)) if self._finite else self._plain_bits(k)

    def _plain_symbols(self, kept: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
        """Base, distinct symbols and each kept sub-vector's symbol index, joined for these kept ones."""
        zb = self._zb[kept]
        base = int(zb.max()) + 1 if kept.size else 1
        distinct, index = _distinct(self._za[kept] * base + zb)
        return base, distinct, index

    def _plain_bits(self, k: int) -> int:
        kept = self._kept(k)
        bits = self._header
        if k:
            _, distinct, index = self._plain_symbols(kept)
            bits += 6 + _rice_size(np.diff(kept, prepend=-1) - 1) + 32 + 32 + 32
            bits += 6 + _rice_size(np.diff(distinct, prepend=-1) - 1) + coding.huffman_bits(index, distinct.size)
        return _bytes(bits)

    def _fits(self, k: int, budget_bits: float) -> bool:
        """``bits(k) <= budget_bits``: first with the code bits at least the histogram's entropy, then with the
        Huffman code's exact bits and the block lengths' Rice size bounded, then exactly."""
        k = self._check(k)
        if not self._finite:
            return self._plain_bits(k) <= budget_bits
        probe = self._probe(k)
        if k == 0:
            return self._exact(probe) <= budget_bits
        pos_lo, pos_hi = probe.positions_bounds()
        if probe.used.size > 1:
            counts = probe.counts.astype(np.float64)
            entropy = k * math.log2(k) - float((counts * np.log2(counts)).sum())
            code_lo = max(k, math.floor(entropy * (1 - 1e-9)) - 1)
            block_lo = _rice_bounds(code_lo, probe.n_blocks, _MAX_BLOCK_BITS)[0]
            if _bytes(probe.fixed + pos_lo + block_lo + code_lo) > budget_bits:
                return False
            code = int((probe.counts * self._lengths(probe)).sum())
            block_lo, block_hi = _rice_bounds(code, probe.n_blocks, _MAX_BLOCK_BITS)
            pos_lo, pos_hi = pos_lo + block_lo + code, pos_hi + block_hi + code
        if _bytes(probe.fixed + pos_hi) <= budget_bits:
            return True
        if _bytes(probe.fixed + pos_lo) > budget_bits:
            return False
        return self._exact(probe) <= budget_bits

    # --- payload ----------------------------------------------------------------------------------------------

    def _kept_values(self, k: int, kept: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """D2's values of the kept sub-vectors, 0 elsewhere, shape (m, 2), an array handed over to the caller.

        When at least half are kept, the sizer's own array is handed over with the dropped rows zeroed (no copy of
        6.6 MB per update); their values are kept aside, and a later call first rebuilds the full array from a
        copy (the handed-over array is never written again)."""
        base = self._values
        if self._lent is not None:
            rows, saved = self._lent
            base = base.copy()
            base[rows] = saved
            self._values, self._lent = base, None
        if 2 * k >= self.m:
            rows = np.flatnonzero(~mask)
            self._lent = (rows, base[rows])
            base[rows] = 0
            return base
        values = np.zeros_like(base)
        values[kept] = base[kept]
        return values

    def encode(self, k: int) -> LatticeCoded:
        """The payload keeping the top ``k`` sub-vectors; ``update`` is what :func:`decode_lattice` rebuilds (it views
        the sizer's own array when at least half are kept: :meth:`_kept_values`)."""
        k = self._check(k)
        kept = self._kept(k)
        mask, sent = _masks(kept, self.m, self.n)
        w = coding.BitWriter()
        write_header(w, _MAGIC, _VERSION, self.shapes, k, None)
        if k and not self._finite:
            coding.rice_encode(w, np.diff(kept, prepend=-1) - 1)
            w.float32(self.d)
            base, distinct, index = self._plain_symbols(kept)
            w.uint(base, 32)
            w.uint(distinct.size, 32)
            coding.rice_encode(w, np.diff(distinct, prepend=-1) - 1)
            coding.huffman_encode(w, index, distinct.size)
        elif k:
            counts, index = _kept_symbols(kept, self._sym, self._n_points)
            used = np.flatnonzero(counts)
            last = int(kept[-1])
            if last + 1 - k <= k:  # Rice parameter 0 (see _Probe.positions_exact): one unary run per gap
                w.uint(0, 6)
                w.bits(np.logical_not(mask[: last + 1]).view(np.uint8))
            else:
                coding.rice_encode(w, np.diff(kept, prepend=-1) - 1)
            w.float32(self.d)
            za, zb = self._point_za[used], self._point_zb[used]
            base = int(zb.max()) + 1
            w.uint(base, 32)
            w.uint(used.size, 32)
            coding.rice_encode(w, np.diff(za * base + zb, prepend=-1) - 1)
            coding.huffman_encode_counted(w, index, counts[used], self._huffman.lengths(counts[used]))
        payload = w.to_bytes()
        values = self._kept_values(k, kept, mask)
        update = tensor_views(values.reshape(-1)[: self.n], self.names, self.shapes)
        sent_mask = tensor_views(sent, self.names, self.shapes)
        return LatticeCoded(payload=payload, kept=k, d=self.d, update=update, sent=sent_mask)


def decode_lattice(
    payload: bytes, names: Sequence[str], dither_rng: np.random.Generator
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The server's side (D1-D3): the decoded update and the mask of the elements it carries, as tensors named
    ``names``; ``dither_rng`` must be in the state the encoder's generator had (the shared seed). The same uniforms
    are drawn (one pair per sub-vector) and the dither is worked out for the kept sub-vectors only."""
    r = coding.BitReader(payload)
    try:
        _, shapes, k = read_header(r, _MAGIC, _VERSION, "a UVeQFed update", flag=False)
        n = sum(math.prod(s) for s in shapes)
        m = math.ceil(n / DIM)
        if k > m:
            raise CodecError(f"payload keeps {k} of {m} sub-vectors")
        out = np.zeros((m, DIM), dtype=np.float32)
        kept = np.zeros(0, dtype=np.int64)
        if k:
            kept = coding.rice_decode_positions(r, k, m)  # k indices below m take at most m unary bits
            if kept[-1] >= m:
                raise CodecError(f"payload sub-vector {int(kept[-1])} outside {m}")
            d = r.float32()
            base = r.uint(32)
            if base == 0:
                raise CodecError("payload symbol base is 0")
            n_distinct = r.uint(32)
            distinct = np.cumsum(coding.rice_decode_fast(r, n_distinct) + 1) - 1
            index = coding.huffman_decode_fast(r, k)  # D1
            a, b = _unzigzag(distinct // base), _unzigzag(distinct % base)
            first, second = d * (a + 0.5 * b), d * _SQRT3_2 * b  # D2: B (a, b) - z, B (a, b) per symbol ...
            if index.size and not 0 <= int(index.min()) <= int(index.max()) < distinct.size:
                raise CodecError("payload symbol index outside its distinct symbols")
            u = dither_rng.random((m, DIM))  # the shared seed's draws (the encoder's, whatever is kept)
            if d == 0:  # a malformed d: the kernels' division by 0 raises, numpy's gives what it always gave
                with np.errstate(all="ignore"):
                    z = lattice.a2_dither(u[kept], d)
                    out[kept, 0] = first[index] - z[:, 0]
                    out[kept, 1] = second[index] - z[:, 1]
            else:
                _rebuild(out, kept, index, first, second, u, d)  # ... less the dither, D3: at its index
    except (coding.CodingError, IndexError) as err:
        raise CodecError(f"malformed payload: {err}") from err
    check_names(names, shapes)
    _, sent = _masks(kept, m, n)
    return tensor_views(out.reshape(-1)[:n], names, shapes), tensor_views(sent, names, shapes)
