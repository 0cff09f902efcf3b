"""AnycostFL's flexible gradient compression as a real codec (AnycostFL Sec. III-C, eqs. (2)-(4)).

``compress(update, budget_bits=S_i, rng=...)`` sparsifies the update kernel-wise (eq. (2)), quantises the kept
values to L levels between the smallest and largest kept magnitude with unbiased probabilistic rounding
(eqs. (3)-(4)), and codes the result losslessly into bytes (Golomb-Rice gaps of the kernel mask, raw sign bits,
canonical Huffman of the level indices). It picks the number of kept kernels and L so that the **real encoded
size** is at most the budget (AnycostFL's ``alpha * beta * S``); ``decode(payload, names)`` gives back exactly the
quantised sparse update. The pieces (:mod:`.sparsify`, :mod:`.quantize`, :mod:`.coding`) and
:func:`encode_fixed` (given k and L) are what STC / QSGD / FedHQ compose; payloads are written and read with
:mod:`.packed` (the same bytes as :mod:`.coding`'s bit-array coders, in fewer passes).

The budget searches size many (k, L) of one update exactly; what does not depend on the setting is computed once
per update: the kernel ranking and its prefix quantities (:class:`_Ranked`), each element's level index while the
range and L stay the same, and for every element kept the magnitudes sorted once (:class:`_SortedLevels`). FedHQ's
search over L asks :meth:`TopkQuantSizer.fits` instead of sizing every probe: the intervals' entropy rejects the
large L, a histogram counted interval by interval settles all but budgets within one bit per 512-symbol block of
the size, and only those are sized exactly. A plan's Huffman parts (grouped symbols, histogram, code and block
lengths, :class:`~.packed.HuffmanCoded`) are computed once, when it is sized, and writing it reuses them.

Container (MSB first, padded to a whole byte): magic (8 bits), version (4), kernel-wise flag (1), tensor count (8),
per tensor ndim (4) and dims (32 each), kept kernels k (32); if k > 0: mask mode (1: 0 = Rice gaps of the kept
kernel indices, 1 = of the dropped ones), Rice gaps, u_min and u_max (float32), L (16), symbols per Huffman
symbol j (4), one sign bit per kept value (1 = negative), and, when u_max > u_min, the Huffman-coded level indices
grouped j at a time into one symbol of the alphabet (L+1)^j (so that small L do not pay a whole bit per value).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgefl.compression import coding, packed, quantize, sparsify
from edgefl.compression.jit import kernel
from edgefl.compression.container import (
    CodecError, Encoded, check_names, flatten, header_bits, read_header, tensor_views, unflatten, write_header,
)  # fmt: skip

__all__ = ["CodecError", "BudgetError", "Compressed", "TopkQuantSizer", "LEVEL_GRID", "MAX_LEVELS", "flatten",
           "unflatten", "encode_fixed", "encoded_bits", "compress", "decode", "decode_flat", "decode_flat_mask",
           "decode_with_mask"]  # fmt: skip

_MAGIC, _VERSION = 0xA7, 1
#: Largest number of quantisation intervals L the codec accepts.
MAX_LEVELS = 4095
#: The L the budgeted chooser tries (number of intervals; L+1 points).
LEVEL_GRID = (1, 2, 3, 5, 7, 11, 15, 23, 31, 63, 127, 255)
_MAX_GROUP_ALPHABET = 256


class BudgetError(CodecError):
    """The bit budget is smaller than the smallest payload (the header of an all-zero update)."""


@dataclass(frozen=True, kw_only=True)
class Compressed(Encoded):
    """One encoded update (:class:`~edgefl.compression.container.Encoded`: ``payload``, ``bits``, ``update``, the
    quantised sparse update it encodes, what :func:`decode` returns, and ``sent``, what :func:`decode_with_mask`
    returns, the m_{t,i} of eq. (5)) with the knobs used: ``kept_kernels`` of ``n_kernels``, ``levels`` L."""

    kept_kernels: int
    n_kernels: int
    levels: int

    @property
    def kept_fraction(self) -> float:
        """Fraction of kernels kept (1 - AnycostFL's sparsity rho)."""
        return self.kept_kernels / self.n_kernels if self.n_kernels else 0.0


def _group(levels: int) -> int:
    """Level indices per Huffman symbol: the largest j <= 8 with (L+1)^j <= 256 (1 when L+1 > 256)."""
    j = 1
    while j < 8 and (levels + 1) ** (j + 1) <= _MAX_GROUP_ALPHABET:
        j += 1
    return j


def _grouped(indices: np.ndarray, levels: int, j: int) -> tuple[np.ndarray, int]:
    """Level indices j at a time as one symbol ``sum_t d_t (L+1)^t`` of the alphabet (L+1)^j (zero padded)."""
    symbols, counts = _grouped_counts(indices, levels, j)
    return symbols, counts.size


def _grouped_counts(indices: np.ndarray, levels: int, j: int) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`_grouped`'s symbols, their histogram over the alphabet (L+1)^j), in one compiled loop."""
    base = levels + 1
    indices = np.asarray(indices)
    if indices.dtype != np.int64:
        indices = indices.astype(np.int64)
    symbols = np.empty(-(-indices.size // j), dtype=np.int64)
    counts = np.zeros(base**j, dtype=np.int64)
    _group_count(indices, base, j, symbols, counts)
    return symbols, counts


@kernel
def _group_count(indices: np.ndarray, base: int, j: int, symbols: np.ndarray, counts: np.ndarray) -> None:
    """Symbols ``sum_t d_t base^t`` of the indices j at a time (Horner from the last digit; the missing digits of
    the last symbol 0) and their histogram."""
    n = indices.size
    for s in range(symbols.size):
        first = s * j
        symbol = 0
        for t in range(j - 1, -1, -1):
            symbol *= base
            if first + t < n:
                symbol += indices[first + t]
        symbols[s] = symbol
        counts[symbol] += 1


def _mask_gaps(kept: np.ndarray, n_kernels: int) -> tuple[int, np.ndarray]:
    """(mode, gaps): gaps between the kept (mode 0) or dropped (mode 1, when fewer) kernel indices."""
    if kept.size == n_kernels and n_kernels:
        return 1, np.zeros(0, dtype=np.int64)
    if 2 * kept.size > n_kernels:
        mask = np.ones(n_kernels, dtype=bool)
        mask[kept] = False
        return 1, np.diff(np.flatnonzero(mask), prepend=-1) - 1
    return 0, np.diff(kept, prepend=-1) - 1


@dataclass
class _Plan:
    """What a payload carries: the sorted kept kernel indices, their element indices (ascending), each kept
    element's level index (eq. (4)), the range [u_min, u_max] of the kept magnitudes and L."""

    kept: np.ndarray
    elements: np.ndarray
    indices: np.ndarray | None  # None in a plan only sized, or one of every element whose ``coded`` holds them
    u_min: float
    u_max: float
    levels: int
    coded: packed.HuffmanCoded | None = None  # the grouped indices' Huffman parts, kept by the plan's sizing


def _check_levels(levels: int) -> int:
    if not 1 <= int(levels) <= MAX_LEVELS:
        raise CodecError(f"levels={levels!r}: must be in [1, {MAX_LEVELS}]")
    return int(levels)


def _quantised(kept: np.ndarray, elements: np.ndarray, mags: np.ndarray, uniforms: np.ndarray, levels: int,
               u_min: float | None = None, u_max: float | None = None) -> _Plan:  # fmt: skip
    """The plan of the kept ``elements`` whose magnitudes (float64 of the float32 values) and rounding uniforms
    are ``mags`` and ``uniforms``; ``u_min``/``u_max`` are their smallest and largest magnitude (computed when not
    given)."""
    if u_min is None or u_max is None:
        u_min = float(mags.min()) if mags.size else 0.0
        u_max = float(mags.max()) if mags.size else 0.0
    indices, _ = quantize.rounded_levels(mags, levels, u_min, u_max, uniforms)
    return _Plan(kept, elements, indices, u_min, u_max, levels)


def _plan(flat: np.ndarray, layout: sparsify.KernelLayout, kept: np.ndarray, levels: int,
          uniforms: np.ndarray, elements: np.ndarray | None = None) -> _Plan:  # fmt: skip
    levels = _check_levels(levels)
    if elements is None:
        elements = sparsify.kernel_elements(kept, layout)
    mags = np.abs(flat[elements]).astype(np.float64)
    return _quantised(kept, elements, mags, uniforms[elements], levels)


def _bits_before_huffman(plan: _Plan, shapes: Sequence[Sequence[int]], n_kernels: int) -> int:
    """Size [bits] of ``plan``'s payload up to its Huffman stream (header, mask, range, L, group, signs), not
    rounded to a whole byte."""
    bits = header_bits(shapes)
    if plan.kept.size:
        _, gaps = _mask_gaps(plan.kept, n_kernels)
        bits += 1 + 6 + coding.rice_bits(gaps, coding.rice_parameter(gaps)) + 64 + 16 + 4 + plan.elements.size
    return bits


def _plan_bits(plan: _Plan, shapes: Sequence[Sequence[int]], n_kernels: int, huffman_bits: int | None = None) -> int:
    """Exact payload size [bits] of ``plan``; ``huffman_bits``, when given, is the size of its level indices'
    Huffman stream (then ``plan.indices`` is not read)."""
    bits = _bits_before_huffman(plan, shapes, n_kernels)
    if plan.kept.size and plan.u_max > plan.u_min:
        if huffman_bits is None:
            huffman_bits = _coded(plan).bits()
        bits += huffman_bits
    return 8 * math.ceil(bits / 8)


def _coded(plan: _Plan) -> packed.HuffmanCoded:
    """The Huffman parts of ``plan``'s grouped level indices, computed on first use and kept by the plan (its
    sizing and its writing share them)."""
    if plan.coded is None:
        symbols, counts = _grouped_counts(plan.indices, plan.levels, _group(plan.levels))
        plan.coded = packed.HuffmanCoded.of(symbols, counts)
    return plan.coded


def _write(plan: _Plan, negative: np.ndarray, shapes: Sequence[Sequence[int]], n_kernels: int,
           kernel_wise: bool) -> bytes:  # fmt: skip
    w = packed.CodeWriter()
    write_header(w, _MAGIC, _VERSION, shapes, plan.kept.size, kernel_wise)
    if plan.kept.size:
        mode, gaps = _mask_gaps(plan.kept, n_kernels)
        w.uint(mode, 1)
        w.rice(gaps)
        w.float32(plan.u_min)
        w.float32(plan.u_max)
        w.uint(plan.levels, 16)
        j = _group(plan.levels)
        w.uint(j, 4)
        w.bits(negative)
        if plan.u_max > plan.u_min:
            w.huffman_coded(_coded(plan))
    return w.to_bytes()


def _negate(values: np.ndarray, negative: np.ndarray) -> None:
    """``values[negative] = -values[negative]`` in place (float32): the sign bit flipped, as negation does."""
    values.view(np.uint32)[...] ^= negative.view(np.uint8).astype(np.uint32) << np.uint32(31)


@kernel
def _signed_points(flat: np.ndarray, elements: np.ndarray, every: bool, indices: np.ndarray, points: np.ndarray,
                   out: np.ndarray, negative: np.ndarray) -> None:
    """Each kept element's ``Q_l`` (``points``, float32 bits, at its level index) with the sign bit flipped where
    its value is below 0 (``_negate``), and those signs; ``every``: element i is ``i`` (``elements`` not read)."""
    top = np.uint32(1 << 31)
    for i in range(out.size):
        v = flat[i] if every else flat[elements[i]]
        neg = v < 0
        negative[i] = neg
        out[i] = points[indices[i]] ^ (top if neg else np.uint32(0))


def _compressed(plan: _Plan, flat: np.ndarray, names: Sequence[str], shapes: Sequence[Sequence[int]],
                layout: sparsify.KernelLayout, kernel_wise: bool) -> Compressed:  # fmt: skip
    """The payload of ``plan`` (values ``flat``) with the update and element mask it decodes to (built here, not
    decoded)."""
    every = plan.elements.size == layout.n_elements  # then elements is arange(n)
    points = quantize.quantization_points(plan.levels, plan.u_min, plan.u_max)  # Q_l of eq. (3), checked
    kept_values = np.empty(plan.elements.size, dtype=np.float32)
    if plan.indices is None:  # a plan of every element sized from its grouped symbols: the values from them
        negative = flat < 0
        if not _signed_levels(negative.view(np.uint8), plan.coded.symbols, _group(plan.levels), plan.levels + 1,
                              points.view(np.uint32), kept_values.view(np.uint32)):  # fmt: skip
            raise IndexError(f"a symbol outside the alphabet of level groups of L = {plan.levels}")
    else:
        indices = np.asarray(plan.indices)
        negative = np.empty(plan.elements.size, dtype=bool)
        if indices.size and (indices.min() < 0 or indices.max() > plan.levels):
            raise IndexError(f"level indices outside 0..{plan.levels}")
        _signed_points(flat, plan.elements, every, indices, points.view(np.uint32), kept_values.view(np.uint32),
                       negative)  # fmt: skip
    payload = _write(plan, negative, shapes, layout.n_kernels, kernel_wise)
    if every:
        values, sent = kept_values, np.ones(layout.n_elements, dtype=bool)
    else:
        values = np.zeros(layout.n_elements, dtype=np.float32)
        values[plan.elements] = kept_values
        sent = np.zeros(layout.n_elements, dtype=bool)
        sent[plan.elements] = True
    return Compressed(payload=payload, kept_kernels=int(plan.kept.size), n_kernels=layout.n_kernels,
                      levels=plan.levels, update=tensor_views(values, names, shapes),
                      sent=tensor_views(sent, names, shapes))


def encode_fixed(
    update: Mapping[str, torch.Tensor],
    *,
    kept_kernels: int,
    levels: int,
    rng: np.random.Generator,
    kernel_wise: bool = True,
    score: str = "rms",
) -> Compressed:
    """Encode ``update`` keeping the ``kept_kernels`` top kernels (eq. (2)) at ``levels`` intervals (eqs. (3)-(4)).

    ``rng`` draws one U[0, 1) per element (the rounding of eq. (4)). ``kernel_wise=False`` ranks single elements
    (top-k as STC/QSGD use it).
    """
    names, shapes, flat = flatten(update)
    layout = sparsify.kernel_layout(shapes, kernel_wise=kernel_wise)
    scores = sparsify.kernel_scores(flat, layout, score=score)
    kept = sparsify.top_kernels(scores, kept_kernels)
    plan = _plan(flat, layout, kept, levels, rng.random(flat.size))
    return _compressed(plan, flat, names, shapes, layout, kernel_wise)


def encoded_bits(update: Mapping[str, torch.Tensor], *, kept_kernels: int, levels: int,
                 rng: np.random.Generator, kernel_wise: bool = True, score: str = "rms") -> int:  # fmt: skip
    """The exact size [bits] :func:`encode_fixed` gives with the same arguments and ``rng`` state, without
    writing the bits."""
    _, shapes, flat = flatten(update)
    layout = sparsify.kernel_layout(shapes, kernel_wise=kernel_wise)
    kept = sparsify.top_kernels(sparsify.kernel_scores(flat, layout, score=score), kept_kernels)
    return _plan_bits(_plan(flat, layout, kept, levels, rng.random(flat.size)), shapes, layout.n_kernels)


def _entropy_per_symbol(indices: np.ndarray) -> float:
    return coding.entropy_bits(np.bincount(indices)) / indices.size if indices.size else 0.0


def _binary_entropy(p: float) -> float:
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))


def _tensor_kernels(layout: sparsify.KernelLayout) -> list[tuple[int, int, int]]:
    """(first element, element count, kernel size) of every tensor of ``layout`` in order."""
    out, at = [], 0
    for shape in layout.shapes:
        n = math.prod(shape)
        size = math.prod(shape[2:]) if layout.kernel_wise and len(shape) >= 3 else 1
        out.append((at, n, size))
        at += n
    return out


# --- AnycostFL's ranking kernels ------------------------------------------------------------------------------
# A one-element kernel j of element e (a linear weight, a bias) has the key ((0x7FFFFFFF - |bits(v_e)|) << shift)
# | j, shift = the bits of a kernel index: keys ascend as |v_e| descends, ties by index (the ranking of eq. (2)
# among them), and a zero's key is above every other one's. The bits of a finite |v| are below 0x7F800000.

@kernel
def _single_keys(bits: np.ndarray, segments: np.ndarray, shift: int, keys: np.ndarray) -> tuple[int, bool]:
    """Write the keys of the one-element kernels of ``segments`` (rows: first element, first kernel, kernels,
    kernel size 1) into ``keys``: those of non-zero magnitudes first in index order, then those of zeros in index
    order. Returns (number of non-zero magnitudes, whether every magnitude is finite); ``bits``: the update's
    float32 values as uint32."""
    front, back = 0, keys.size
    finite = True
    up = np.uint64(shift)
    for s in range(segments.shape[0]):
        e0, j0, count = segments[s, 0], segments[s, 1], segments[s, 2]
        for t in range(count):
            a = np.int64(bits[e0 + t]) & 0x7FFFFFFF
            if a >= 0x7F800000:
                finite = False
            key = (np.uint64(0x7FFFFFFF - a) << up) | np.uint64(j0 + t)
            keys[front] = key  # both free slots (the same one when one is left): only the counts branch on a
            keys[back - 1] = key
            zero = np.int64(a == 0)
            front += 1 - zero
            back -= zero
    tail = keys[front:]
    for t in range(tail.size // 2):  # the zeros were written from the end backwards
        tail[t], tail[tail.size - 1 - t] = tail[tail.size - 1 - t], tail[t]
    return front, finite


@kernel
def _merged_ranking(keys: np.ndarray, shift: int, scale: np.ndarray, conv_score: np.ndarray,
                    conv_kernel: np.ndarray, conv_energy: np.ndarray, r: int, i: int, c: int, acc: float, stop: int,
                    conv_rank: np.ndarray, block: int, marks: np.ndarray, marked: np.ndarray) -> float:  # fmt: skip
    """Merge the sorted keys of the one-element kernels with the multi-element kernels sorted by (score
    descending, index), from rank r (i one-element and c multi-element kernels ranked before it, ``acc`` the sum of
    squares of those) up to rank ``stop``, adding each kernel's sum of squares to ``acc`` in rank order (as
    ``np.cumsum`` adds them); returns ``acc``. A one-element kernel's score and sum of squares are |v| and |v|^2
    (float64 of the float32 value), |v| rebuilt from the key's bits: ``scale[exponent]`` times the significand
    (exact). With ``marks`` (else empty): the rank of each multi-element kernel into ``conv_rank``, and before
    every rank that is a multiple of ``block`` the state (``acc`` into ``marks``, i and c into ``marked``), from
    which a later call resumes."""
    ns, nc = keys.size, conv_score.size
    record = marks.size > 0
    up = np.uint64(shift)
    low = (np.uint64(1) << up) - np.uint64(1)
    m = 0.0
    j = np.int64(0)
    loaded = -1
    until = (-r) % block  # ranks to the next multiple of block (no division per rank)
    while r < stop:
        if until == 0:
            until = block
            if record:
                marks[r // block] = acc
                marked[r // block, 0] = i
                marked[r // block, 1] = c
        until -= 1
        if i < ns and loaded != i:
            key = keys[i]
            a = np.int64(0x7FFFFFFF) - np.int64(key >> up)
            exponent = a >> 23
            significand = a & 0x7FFFFF
            if exponent:
                significand |= 0x800000
            m = significand * scale[exponent]
            j = np.int64(key & low)
            loaded = i
        conv = c < nc and (i == ns or conv_score[c] > m or (conv_score[c] == m and conv_kernel[c] < j))
        if conv:
            if record:
                conv_rank[c] = r
            acc = acc + conv_energy[c]
            c += 1
        else:
            acc = acc + m * m
            i += 1
        r += 1
    if record and r % block == 0:
        marks[r // block] = acc
        marked[r // block, 0] = i
        marked[r // block, 1] = c
    return acc


#: ``_FLOAT32_SCALE[e]``: the weight of a float32 significand's last bit at biased exponent e (float64, exact).
_FLOAT32_SCALE = np.ldexp(1.0, np.maximum(np.arange(256), 1) - 150)


@kernel
def _quantise(values: np.ndarray, elements: np.ndarray, positions: np.ndarray, uniforms: np.ndarray,
              points: np.ndarray, levels: int, searched: bool, cache: np.ndarray, indices: np.ndarray,
              terms: np.ndarray) -> None:  # fmt: skip
    """:func:`quantize.rounded_levels`' level index (eqs. (3)-(4)) of the magnitudes ``|values[e]|`` (float64) of
    the elements ``e = elements[p]`` at ``positions`` p, with uniforms ``uniforms[e]``, written to ``cache[e]`` and
    ``indices[p]``; with ``terms`` (one per position, else empty), the term of its expected error before its clip
    at 0, ``(Q_{l+1} - m)(m - Q_l)``. ``points``: Q_0..Q_L (float64, Q_L > Q_0).

    The interval l of [Q_l, Q_{l+1}] is the one ``rounded_levels`` finds: with ``searched`` (its binary search)
    the number of Q_1..Q_{L-1} at most m, else its arithmetic estimate clipped to [0, L - 1] and one correction
    each way. m is rounded up when ``u < (m - Q_l) / (Q_{l+1} - Q_l)`` (a zero width: when m > Q_l, as the float
    division's +inf gives). The code is inline (a call per element to another compiled function costs more than
    the arithmetic) and its tests nested rather than joined by ``and`` (fewer branches)."""
    with_terms = terms.size > 0
    step = (points[levels] - points[0]) / levels
    for i in range(positions.size):
        p = positions[i]
        e = elements[p]
        m = abs(np.float64(values[e]))
        if searched:
            lower = 0
            for j in range(1, levels):
                lower += np.int64(points[j] <= m)
        elif levels == 1:
            lower = 0
        else:
            x = (m - points[0]) / step
            if x < 0.0:
                x = 0.0
            if x > levels - 1.0:
                x = levels - 1.0
            lower = np.int64(x)
            if lower > 0:
                if m < points[lower]:
                    lower -= 1
            if lower + 1 < levels:
                if m >= points[lower + 1]:
                    lower += 1
        above = m - points[lower]
        if with_terms:
            terms[i] = (points[lower + 1] - m) * above
        width = points[lower + 1] - points[lower]
        if width == 0.0:
            level = lower + np.int64(above > 0.0)
        else:
            level = lower + np.int64(uniforms[e] < above / width)
        cache[e] = level
        indices[p] = level


@kernel
def _kept_kernels(bits: np.ndarray, segments: np.ndarray, shift: int, k: int, threshold: int,
                  conv_rank: np.ndarray, kept: np.ndarray, elements: np.ndarray, gather: bool, known_k: int,
                  known_threshold: int, cache: np.ndarray, indices: np.ndarray, fresh: np.ndarray) -> int:  # fmt: skip
    """The top k kernels in index order into ``kept`` and their elements ascending into ``elements``: a
    one-element kernel when its key is at most ``threshold`` (0: none), a multi-element one when its rank
    (``conv_rank``, by the segments' order) is below k. ``segments`` rows: first element, first kernel, kernels,
    kernel size, first multi-element kernel's place in ``conv_rank``. One-element kernels are written before
    their test, which only advances the counts (no branch), so ``kept``, ``elements`` and with ``gather``
    ``indices`` and ``fresh`` are one longer than they hold.

    With ``gather``: each kept element's ``cache`` entry into ``indices``, and the positions (in ``elements``) of the
    elements of kernels not among the top ``known_k`` (keys above ``known_threshold``), whose cache entry is not
    known yet, into ``fresh``; returns their number."""
    up = np.uint64(shift)
    limit, known_limit = np.uint64(threshold), np.uint64(known_threshold)
    nk = ne = nf = 0
    for s in range(segments.shape[0]):
        e0, j0, count, size, c0 = segments[s, 0], segments[s, 1], segments[s, 2], segments[s, 3], segments[s, 4]
        if size == 1:
            first = ne
            for t in range(count):
                key = (np.uint64(0x7FFFFFFF - (np.int64(bits[e0 + t]) & 0x7FFFFFFF)) << up) | np.uint64(j0 + t)
                kept[nk] = j0 + t
                elements[ne] = e0 + t
                inside = np.int64(key <= limit)
                nk += inside
                ne += inside
            for q in range(first, ne if gather else first):
                e = elements[q]
                key = (np.uint64(0x7FFFFFFF - (np.int64(bits[e]) & 0x7FFFFFFF)) << up) | np.uint64(j0 + e - e0)
                if key <= known_limit:
                    indices[q] = cache[e]
                else:
                    fresh[nf] = q
                    nf += 1
        else:
            for t in range(count):
                rank = conv_rank[c0 + t]
                if rank < k:
                    kept[nk] = j0 + t
                    nk += 1
                    for q in range(size):
                        e = e0 + t * size + q
                        elements[ne] = e
                        if not gather:
                            pass
                        elif rank < known_k:
                            indices[ne] = cache[e]
                        else:
                            fresh[nf] = ne
                            nf += 1
                        ne += 1
    return nf


@kernel
def _merged_sorted(a: np.ndarray, b: np.ndarray, out: np.ndarray, a_values: np.ndarray, b_values: np.ndarray,
                   out_values: np.ndarray) -> None:  # fmt: skip
    """The ascending arrays ``a`` and ``b`` (no value in both) merged into ``out`` (ascending, their sizes
    together); with ``out_values`` (else empty), the values that go with them (``a_values``, ``b_values``) carried
    along."""
    carry = out_values.size > 0
    i = j = 0
    for o in range(out.size):
        if j >= b.size or (i < a.size and a[i] < b[j]):
            out[o] = a[i]
            if carry:
                out_values[o] = a_values[i]
            i += 1
        else:
            out[o] = b[j]
            if carry:
                out_values[o] = b_values[j]
            j += 1


@kernel
def _without_sorted(a: np.ndarray, drop: np.ndarray, out: np.ndarray, a_values: np.ndarray,
                    out_values: np.ndarray) -> None:  # fmt: skip
    """The ascending array ``a`` less the ascending ``drop`` (all in ``a``) into ``out``; with ``out_values``
    (else empty), the ``a_values`` that go with the ones kept carried along."""
    carry = out_values.size > 0
    j = o = 0
    for i in range(a.size):
        if j < drop.size and a[i] == drop[j]:
            j += 1
            continue
        out[o] = a[i]
        if carry:
            out_values[o] = a_values[i]
        o += 1


class _Ranked:
    """An update's kernels ranked once for :func:`compress`, answering for any number k of top kernels kept (eq.
    (2)) what its estimates and exact sizes read, without arrays over the ranked elements.

    ``order``: kernels by descending score, ties by index; ``energy(k)``: squared norm of the top k kernels (the
    cumulative sum in rank order), ``total_energy`` that of all.

    Most kernels of a CNN update are single elements (linear weights, biases), whose score is their magnitude, so
    among them rank order is magnitude order: they are ranked by one sort of 64-bit keys (the float32 magnitude
    bits and the index, :func:`_single_keys`; zeros, last in index order, are left out of the sort), and merged
    with the few larger kernels (convolutions, ranked by their norms) in one pass that adds up the sums of squares
    and marks its state every :data:`_ENERGY_BLOCK` ranks (:func:`_merged_ranking`), from which ``energy(k)``
    resumes. The larger kernels are tracked one by one: their ranks, sizes and smallest and largest magnitudes.
    Element counts, magnitude ranges and elements at given ranked positions follow from those by binary search,
    and the top k kernels from one pass comparing each one-element kernel's key with the k-th
    (:func:`_kept_kernels`). An update with a NaN or an infinity falls back to arrays over all its ranked
    elements.
    """

    def __init__(self, flat: np.ndarray, layout: sparsify.KernelLayout, score: str) -> None:
        if score not in ("rms", "l2"):
            raise sparsify.SparsifyError(f"score={score!r}: must be 'rms' or 'l2'")
        self.layout = layout
        self.flat = np.ascontiguousarray(flat, dtype=np.float32)
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._fresh: np.ndarray | None = None  # kept_levels' scratch
        tensors = _tensor_kernels(layout)
        n_k = layout.n_kernels
        self.shift = max(1, (n_k - 1).bit_length())
        # per tensor: first element, first kernel, kernels, kernel size, first multi-element kernel's place
        rows, kernel, conv = [], 0, 0
        for a, n, size in tensors:
            count = n // size if size else 0
            rows.append((a, kernel, count, size, conv))
            kernel += count
            conv += count if size > 1 else 0
        self.segments = np.array(rows, dtype=np.int64).reshape(-1, 5)
        # the multi-element kernels in index order: sums of squares (np.add.reduceat over each tensor, as
        # sparsify.kernel_scores sums over the whole update), scores, smallest and largest magnitudes
        parts, sums, scores, kernels = [], [], [], []
        for a, j, count, size, _ in self.segments[(self.segments[:, 3] > 1) & (self.segments[:, 2] > 0)].tolist():
            parts.append(np.abs(self.flat[a : a + count * size].astype(np.float64)).reshape(count, size))
            sums.append(np.add.reduceat(parts[-1].reshape(-1) ** 2, np.arange(0, count * size, size)))
            scores.append(np.sqrt(sums[-1] / size if score == "rms" else sums[-1]))
            kernels.append(np.arange(j, j + count))
        big = bool(parts)
        conv_energy = np.concatenate(sums) if big else np.zeros(0)
        conv_score = np.concatenate(scores) if big else np.zeros(0)
        conv_kernel = np.concatenate(kernels) if big else np.zeros(0, dtype=np.int64)
        single_rows = self.segments[self.segments[:, 3] == 1, :3]
        n_single = int(single_rows[:, 2].sum())
        self.keys = np.empty(n_single, dtype=np.uint64)
        nonzero, finite = _single_keys(self.flat.view(np.uint32), single_rows, self.shift, self.keys)
        if not finite or not np.isfinite(conv_energy).all():
            self._rank_arrays(score)
            return
        self.keys[:nonzero].sort()
        by_rank = np.lexsort((conv_kernel, -conv_score))  # descending score, ties by index
        big_rank = np.empty(conv_kernel.size, dtype=np.int64)
        self._merge = (self.keys, self.shift, _FLOAT32_SCALE, conv_score[by_rank], conv_kernel[by_rank],
                       conv_energy[by_rank])  # the sorted inputs of _merged_ranking
        self._marks = np.empty(n_k // _ENERGY_BLOCK + 1)
        self._marked = np.empty((self._marks.size, 2), dtype=np.int64)
        self.total_energy = _merged_ranking(*self._merge, 0, 0, 0, 0.0, n_k, big_rank, _ENERGY_BLOCK, self._marks,
                                            self._marked)  # fmt: skip
        self.conv_rank = np.empty(conv_kernel.size, dtype=np.int64)  # by index
        self.conv_rank[by_rank] = big_rank
        # the multi-element kernels by rank: rank, kernel, size, running smallest and largest magnitude
        self.big_rank = big_rank
        self.big_kernel = conv_kernel[by_rank]
        self.big_size = layout.size[self.big_kernel]
        self.big_extra = np.concatenate([[0], np.cumsum(self.big_size - 1)])  # extra elements of the first i
        self.big_start = self.big_rank + self.big_extra[:-1]  # ranked position of each one's first element
        lows = np.concatenate([m.min(axis=1) for m in parts]) if big else np.zeros(0)
        highs = np.concatenate([m.max(axis=1) for m in parts]) if big else np.zeros(0)
        self.big_low = np.minimum.accumulate(lows[by_rank]) if big else lows
        self.big_high = np.maximum.accumulate(highs[by_rank]) if big else highs

    @functools.cached_property
    def order(self) -> np.ndarray:
        """Kernels by rank (descending score, ties by index): the multi-element ones at their ranks, the
        one-element ones (their keys' kernel indices, in key order) at the others."""
        order = np.empty(self.layout.n_kernels, dtype=np.int64)
        singles = np.ones(order.size, dtype=bool)
        singles[self.big_rank] = False
        order[singles] = (self.keys & np.uint64((1 << self.shift) - 1)).astype(np.int64)
        order[self.big_rank] = self.big_kernel
        return order

    def _rank_arrays(self, score: str) -> None:
        """The ranking of an update with a NaN or an infinity: ``sparsify.rank_descending`` of
        ``sparsify.kernel_scores``' scores (the packed-key sort's fallback: ``np.argsort``), the cumulative sum of
        squares in rank order, and arrays over every ranked element."""
        mags = np.abs(self.flat.astype(np.float64))
        energy = np.add.reduceat(mags**2, self.layout.start) if self.layout.n_kernels else np.zeros(0)
        scores = np.sqrt(energy / self.layout.size) if score == "rms" else np.sqrt(energy)
        singles = self.layout.size == 1  # a one-element kernel's score is its magnitude
        scores[singles] = mags[self.layout.start[singles]]
        self.__dict__["order"] = sparsify.rank_descending(scores)  # the cached property's value
        self._energy = np.empty(energy.size + 1)
        self._energy[0] = 0.0
        np.cumsum(energy[self.order], out=self._energy[1:])
        self.total_energy = float(self._energy[-1])
        self.rank = np.empty(self.order.size, dtype=np.int64)
        self.rank[self.order] = np.arange(self.order.size)
        self._arrays = self._prefix_arrays()

    def _prefix_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(n_el, ranked elements, running min, running max): element counts of the top k kernels and, over the
        ranked elements, the elements and their running smallest and largest magnitude."""
        sizes = self.layout.size[self.order]
        n_el = np.concatenate([[0], np.cumsum(sizes)])
        rank_el = sparsify.kernel_elements(self.order, self.layout)
        mags = self.magnitudes(rank_el)
        low = np.minimum.accumulate(mags) if mags.size else mags
        high = np.maximum.accumulate(mags) if mags.size else mags
        return n_el, rank_el, low, high

    def energy(self, k: int) -> float:
        """Squared norm of the top k kernels: the sum of their sums of squares added in rank order, as
        ``np.cumsum`` of them in rank order gives it (resumed from the last state :func:`_merged_ranking` marked
        before rank k)."""
        if self._arrays is not None:
            return float(self._energy[k])
        b = k // _ENERGY_BLOCK
        i, c = self._marked[b]
        return _merged_ranking(*self._merge, b * _ENERGY_BLOCK, int(i), int(c), float(self._marks[b]), k, _NO_RANKS,
                               _ENERGY_BLOCK, _NO_TERMS, _NO_MARKED)  # fmt: skip

    def magnitudes(self, elements: np.ndarray) -> np.ndarray:
        """|value| of ``elements`` (float64 of the float32 value)."""
        return np.abs(self.flat[elements]).astype(np.float64)

    def n_elements(self, k: int) -> int:
        """Elements of the top k kernels."""
        if self._arrays is not None:
            return int(self._arrays[0][k])
        return int(k + self.big_extra[np.searchsorted(self.big_rank, k)])

    def _single(self, i: int) -> int:
        """The element of the i-th (from 0) single-element kernel in rank order."""
        return int(self.layout.start[int(self.keys[i]) & ((1 << self.shift) - 1)])

    def magnitude_range(self, k: int) -> tuple[float, float]:
        """(smallest, largest) magnitude among the elements of the top k kernels; (0, 0) for k = 0."""
        n = self.n_elements(k)
        if n == 0:
            return 0.0, 0.0
        if self._arrays is not None:
            return float(self._arrays[2][n - 1]), float(self._arrays[3][n - 1])
        big = int(np.searchsorted(self.big_rank, k))
        lows, highs = [], []
        if big:
            lows.append(self.big_low[big - 1])
            highs.append(self.big_high[big - 1])
        if k > big:  # singles rank by magnitude: the first is the largest, the last the smallest
            lows.append(abs(float(self.flat[self._single(k - big - 1)])))
            highs.append(abs(float(self.flat[self._single(0)])))
        return float(min(lows)), float(max(highs))

    def elements_at(self, positions: np.ndarray) -> np.ndarray:
        """The elements at ``positions`` (ascending) of the ranked element list (kernels in rank order, each
        kernel's elements ascending)."""
        if self._arrays is not None:
            return self._arrays[1][positions]
        low = np.uint64((1 << self.shift) - 1)
        if self.big_rank.size == 0:
            return self.layout.start[(self.keys[positions] & low).astype(np.int64)]
        t = np.searchsorted(self.big_start, positions, side="right")  # big kernels starting at or before
        prev = np.maximum(t - 1, 0)
        inside = (t > 0) & (positions < self.big_start[prev] + self.big_size[prev])
        out = np.empty(positions.size, dtype=np.int64)
        single = positions[~inside] - self.big_extra[t[~inside]] - t[~inside]  # singles ranked before it
        out[~inside] = self.layout.start[(self.keys[single] & low).astype(np.int64)]
        p = prev[inside]
        out[inside] = self.layout.start[self.big_kernel[p]] + positions[inside] - self.big_start[p]
        return out

    def _threshold(self, k: int) -> int:
        """The key of the last one-element kernel among the top k (0 when there is none)."""
        singles = k - int(np.searchsorted(self.big_rank, k))
        return int(self.keys[singles - 1]) if singles > 0 else 0

    def _kept_arrays(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """int64 arrays for the k kept kernels and their elements, one longer (:func:`_kept_kernels`)."""
        return np.empty(k + 1, dtype=np.int64), np.empty(self.n_elements(k) + 1, dtype=np.int64)

    def kept(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(sorted kept kernels, their elements ascending) of the top k kernels."""
        if self._arrays is not None:
            return np.flatnonzero(self.rank < k), np.sort(self._arrays[1][: self._arrays[0][k]])
        kept, elements = self._kept_arrays(k)
        _kept_kernels(self.flat.view(np.uint32), self.segments, self.shift, k, self._threshold(k), self.conv_rank,
                      kept, elements, False, 0, 0, _NO_CACHE, _NO_INDICES, _NO_INDICES)  # fmt: skip
        return kept[:-1], elements[:-1]

    def kept_levels(self, k: int, known: _KnownLevels, buffers: _Buffers | None = None) -> tuple[
            np.ndarray, np.ndarray, np.ndarray, _Buffers | None]:  # fmt: skip
        """(sorted kept kernels, their elements ascending, their level indices, the buffers they view) of the top k
        kernels at the L and range of ``known`` (eq. (4), as :func:`quantize.rounded_levels` gives them), which
        keeps the indices of the elements it quantises for the next k. The three arrays view ``buffers`` (int64,
        n_kernels + 1, n + 1 and n + 1 long; allocated when None), so that a caller can reuse those of a plan it
        dropped: fresh memory costs a page fault per 4 KiB on first use."""
        if self._arrays is not None or known.collapsed:  # (rounded_levels' zeros when collapsed)
            kept, elements = self.kept(k)
            indices, _ = quantize.rounded_levels(self.magnitudes(elements), known.levels, *known.range,
                                                 known.uniforms[elements])  # fmt: skip
            return kept, elements, indices, None
        if buffers is None:
            n = self.flat.size
            buffers = np.empty(self.layout.n_kernels + 1, dtype=np.int64), *np.empty((2, n + 1), dtype=np.int64)
        if self._fresh is None:
            self._fresh = np.empty(self.flat.size + 1, dtype=np.int64)
        n_el = self.n_elements(k)
        kept, elements, indices = buffers[0][: k + 1], buffers[1][: n_el + 1], buffers[2][: n_el + 1]
        done = min(known.known, k)
        n_fresh = _kept_kernels(self.flat.view(np.uint32), self.segments, self.shift, k, self._threshold(k),
                                self.conv_rank, kept, elements, True, done, self._threshold(done), known.cache,
                                indices, self._fresh)  # fmt: skip
        _quantise(self.flat, elements, self._fresh[:n_fresh], known.uniforms, known.points, known.levels,
                  known.searched, known.cache, indices, _NO_TERMS)  # fmt: skip
        known.known = max(known.known, k)
        return kept[:-1], elements[:-1], indices[:-1], buffers


    def _ranked_between(self, k0: int, k1: int) -> np.ndarray:
        """The kernels ranked k0 to k1 - 1 (k0 <= k1), ascending."""
        b0, b1 = (int(b) for b in np.searchsorted(self.big_rank, [k0, k1]))
        singles = (self.keys[k0 - b0 : k1 - b1] & np.uint64((1 << self.shift) - 1)).astype(np.int64)
        return np.sort(np.concatenate([singles, self.big_kernel[b0:b1]]))

    def kept_levels_from(self, k: int, known: _KnownLevels, previous: tuple[int, np.ndarray, np.ndarray, np.ndarray],
                         buffers: _Buffers | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Buffers]:
        """:meth:`kept_levels` of the top k from ``previous``, (k0, kept, elements, level indices) of the top k0 at
        the same L and range (not collapsed; arrays not in ``buffers``): the kernels ranked between k0 and k, few
        when k is near k0, merged in (their elements quantised, :func:`_quantise`) or left out, in one pass over
        the previous arrays instead of one over the whole update."""
        k0, kept0, elements0, indices0 = previous
        delta = self._ranked_between(min(k0, k), max(k0, k))
        delta_elements = sparsify.kernel_elements(delta, self.layout)  # ascending: kernels tile the update in order
        if buffers is None:
            n = self.flat.size
            buffers = np.empty(self.layout.n_kernels + 1, dtype=np.int64), *np.empty((2, n + 1), dtype=np.int64)
        n_el = self.n_elements(k)
        kept, elements, indices = buffers[0][:k], buffers[1][:n_el], buffers[2][:n_el]
        if k > k0:
            delta_indices = np.empty(delta_elements.size, dtype=np.int64)
            _quantise(self.flat, delta_elements, np.arange(delta_elements.size), known.uniforms, known.points,
                      known.levels, known.searched, known.cache, delta_indices, _NO_TERMS)  # fmt: skip
            _merged_sorted(kept0, delta, kept, _NO_INDICES, _NO_INDICES, _NO_INDICES)
            _merged_sorted(elements0, delta_elements, elements, indices0, delta_indices, indices)
        else:
            _without_sorted(kept0, delta, kept, _NO_INDICES, _NO_INDICES)
            _without_sorted(elements0, delta_elements, elements, indices0, indices)
        known.known = max(known.known, k)
        return kept, elements, indices, buffers


_Buffers = tuple[np.ndarray, np.ndarray, np.ndarray]
_NO_CACHE, _NO_INDICES, _NO_TERMS = np.zeros(0, dtype=np.uint16), np.zeros(0, dtype=np.int64), np.zeros(0)
_NO_RANKS, _NO_MARKED = np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64)
#: Ranks between the states of the ranking's merge that _Ranked keeps (its energy of any k resumes from one).
_ENERGY_BLOCK = 256


class _KnownLevels:
    """Level indices (eq. (4)) of an update's elements at one L and range [u_min, u_max]: the elements of the top
    ``known`` kernels have theirs in ``cache`` (by element); ``points``: the quantisation points (float64) and
    ``searched`` which way :func:`quantize.rounded_levels` finds an interval; ``collapsed``: Q_L <= Q_0 (every
    index 0)."""

    def __init__(self, n: int, uniforms: np.ndarray, levels: int, u_min: float, u_max: float) -> None:
        self.uniforms, self.levels, self.range = uniforms, levels, (u_min, u_max)
        self.points = quantize.quantization_points(levels, u_min, u_max).astype(np.float64)
        self.collapsed = not self.points[-1] > self.points[0]
        self.searched = not self.collapsed and quantize._interval_searched(np.zeros(0), self.points, levels) is not None
        self.cache = np.empty(n, dtype=np.uint16)
        self.known = 0
class _Estimates:
    """(estimated bits, estimated squared error) of keeping the top k kernels at L levels, memoised: exact mask and
    sign bits, level bits from the empirical entropy of the level indices of a subsample of about ``sample_size``
    ranked elements, dropped energy plus the subsample's rounding variance scaled to the kept elements."""

    def __init__(self, ranked: _Ranked, uniforms: np.ndarray, minimum: int, sample_size: int) -> None:
        self.ranked = ranked
        self.uniforms = uniforms
        self.minimum = minimum
        self.n_k = ranked.layout.n_kernels
        stride = max(1, uniforms.size // sample_size)
        self.sample = np.arange(0, uniforms.size, stride)
        sampled = ranked.elements_at(self.sample)
        self.u_sample, self.mags_sample = uniforms[sampled], ranked.magnitudes(sampled)
        self.at = np.arange(self.sample.size)  # the sample's own positions, for _quantise
        self.scratch, self.terms = np.empty(self.sample.size, dtype=np.int64), np.empty(self.sample.size)
        self.estimates: dict[tuple[int, int], tuple[float, float]] = {}

    def __call__(self, k: int, levels: int) -> tuple[float, float]:
        """(estimated bits, estimated squared error) of keeping the top k kernels at L = levels."""
        ranked, n_k = self.ranked, self.n_k
        if k == 0:
            return float(self.minimum), ranked.total_energy
        if (k, levels) in self.estimates:
            return self.estimates[k, levels]
        n = ranked.n_elements(k)
        lo, hi = ranked.magnitude_range(k)
        m = int(np.searchsorted(self.sample, n))  # the sample points among the first n ranked elements
        if ranked._arrays is None:
            q, h = self._sampled(m, levels, lo, hi)
        else:
            mags, u = self.mags_sample[:m], self.u_sample[:m]
            idx, q = quantize.rounded_levels(mags, levels, lo, hi, u, with_error=True)
            h = _entropy_per_symbol(idx) if hi > lo else 0.0
        p = k / n_k
        mask = n_k * _binary_entropy(min(p, 1 - p)) * 1.03 + 200
        bits = self.minimum + 150 + mask + n * (1.0 + h) + min(n, 256 * 4 + 2000)
        q_err = q * (n / max(m, 1))
        self.estimates[k, levels] = bits, float(ranked.total_energy - ranked.energy(k)) + q_err
        return self.estimates[k, levels]

    def _sampled(self, m: int, levels: int, lo: float, hi: float) -> tuple[float, float]:
        """(expected rounding error, level index entropy [bits per index]) of the first m sampled magnitudes at L
        = levels and range [lo, hi]: :func:`quantize.rounded_levels`' error (its terms clipped at 0 and summed by
        numpy, as it sums them) and the entropy of its indices' histogram, the terms and indices from one pass
        (:func:`_quantise`)."""
        points = quantize.quantization_points(levels, lo, hi).astype(np.float64)
        if not points[-1] > points[0]:  # collapsed: every index 0
            _, q = quantize.rounded_levels(self.mags_sample[:m], levels, lo, hi, self.u_sample[:m], with_error=True)
            return q, 0.0
        searched = quantize._interval_searched(np.zeros(0), points, levels) is not None
        levels_out, terms = self.scratch[:m], self.terms[:m]
        _quantise(self.mags_sample, self.at, self.at[:m], self.u_sample, points, levels, searched, levels_out,
                  levels_out, terms)  # fmt: skip
        q = float(np.clip(terms, 0.0, None).sum())
        h = coding.entropy_bits(np.bincount(levels_out, minlength=levels + 1)) / m if hi > lo and m else 0.0
        return q, h


def _least_estimated_error(estimate: _Estimates, levels_grid: Sequence[int], budget_bits: float) -> tuple[int, int]:
    """(k, L): for every L in ``levels_grid`` the largest k whose estimated size fits ``budget_bits`` (bisection,
    to within 0.5 % of k), and of those the one of least estimated error (the first L on ties)."""
    n_k = estimate.n_k
    best: tuple[float, int, int] | None = None
    for levels in levels_grid:
        lo_k, hi_k = 0, n_k + 1  # estimate(lo_k) fits, hi_k does not
        if estimate(n_k, levels)[0] <= budget_bits:
            lo_k = n_k
        else:
            while hi_k - lo_k > max(1, lo_k // 200):
                mid = (lo_k + hi_k) // 2
                lo_k, hi_k = (mid, hi_k) if estimate(mid, levels)[0] <= budget_bits else (lo_k, mid)
        err = estimate(lo_k, levels)[1]
        if best is None or err < best[0] * (1 - 1e-9):
            best = (err, lo_k, levels)
    assert best is not None
    _, k, levels = best
    return k, levels


class _ExactSizes:
    """Payload plans of the top k kernels at one L and their exact sizes [bits].

    Level indices by element for the refinement's L and range (:class:`_KnownLevels`). The range is mostly the
    same for every k it tries (a convolution kernel holds the smallest magnitude, the top single weight the
    largest); then an element's index is the same whatever k, and only the elements of kernels not quantised yet
    are quantised. The arrays of a plan given back by :meth:`release` are reused by the next one.
    """

    def __init__(self, ranked: _Ranked, uniforms: np.ndarray, levels: int, shapes: Sequence[Sequence[int]]) -> None:
        self.ranked = ranked
        self.uniforms = uniforms
        self.levels = levels
        self.shapes = shapes
        self.known: _KnownLevels | None = None
        self._spare: list[_Buffers] = []
        self._buffers: dict[int, _Buffers] = {}  # id(plan) -> the buffers its arrays view
        # the last plan's k, kept kernels, elements, level indices and buffers (at the range of self.known)
        self._last: tuple[int, np.ndarray, np.ndarray, np.ndarray, _Buffers] | None = None

    def __call__(self, k: int) -> tuple[int, _Plan]:
        """(exact payload bits, plan) of keeping the top k kernels: from the last plan's arrays when its range is
        the same and its k within a quarter of this one (:meth:`_Ranked.kept_levels_from`), else from a pass over
        the update (:meth:`_Ranked.kept_levels`)."""
        ranked = self.ranked
        lo, hi = ranked.magnitude_range(k)
        if self.known is None or self.known.range != (lo, hi):
            self.known = _KnownLevels(self.uniforms.size, self.uniforms, self.levels, lo, hi)
            self._last = None
        last = self._last
        spare = next((b for b in self._spare if last is None or b is not last[4]), None)  # not the last's arrays
        if spare is not None:
            self._spare.remove(spare)
        if last is not None and last[4] is not None and not self.known.collapsed and 0 < abs(k - last[0]) <= k // 4:
            kept, elements, indices, buffers = ranked.kept_levels_from(k, self.known, last[:4], spare)
        else:
            kept, elements, indices, buffers = ranked.kept_levels(k, self.known, spare)
        self._last = (k, kept, elements, indices, buffers)
        plan = _Plan(kept, elements, indices, lo, hi, self.levels)
        if buffers is not None:
            self._buffers[id(plan)] = buffers
        return _plan_bits(plan, self.shapes, ranked.layout.n_kernels), plan

    def release(self, plan: _Plan) -> None:
        """``plan`` is no longer used: its arrays' memory goes to the next plan."""
        buffers = self._buffers.pop(id(plan), None)
        if buffers is not None:
            self._spare.append(buffers)


def _refined(exact: _ExactSizes, k: int, budget_bits: float, minimum: int, refine_steps: int) -> _Plan:
    """The plan of the largest k found to fit ``budget_bits`` by exact sizes, starting from the estimate's k:
    secant guesses, then bisection, between the largest fitting and the smallest failing k (to within 0.5 % of
    k); steps past ``refine_steps`` continue only until something fits, and k = 0 (header only) is the last
    resort. Plans it drops are released to ``exact``."""
    n_k = exact.ranked.layout.n_kernels
    size, plan = exact(k)
    fits_k, fits_plan = (k, plan) if size <= budget_bits else (0, None)
    bad_k = n_k + 1 if size <= budget_bits else k
    if fits_plan is None:
        exact.release(plan)
    steps = 0
    while bad_k - fits_k > max(1, fits_k // 200) and (steps < refine_steps or fits_plan is None):
        steps += 1
        guess = int(k * (budget_bits - minimum) / max(size - minimum, 1) * (0.995 if size > budget_bits else 1.0))
        k = guess if fits_k < guess < min(bad_k, n_k + 1) and steps <= 3 else (fits_k + bad_k) // 2
        k = min(k, n_k)
        size, plan = exact(k)
        if size <= budget_bits:
            if fits_plan is not None:
                exact.release(fits_plan)
            fits_k, fits_plan = k, plan
        else:
            bad_k = k
            exact.release(plan)
    if fits_plan is None:
        fits_plan = exact(0)[1]
    return fits_plan


def compress(
    update: Mapping[str, torch.Tensor],
    *,
    budget_bits: float,
    rng: np.random.Generator,
    levels_grid: Sequence[int] = LEVEL_GRID,
    kernel_wise: bool = True,
    score: str = "rms",
    sample_size: int = 20_000,
    refine_steps: int = 8,
) -> Compressed:
    """AnycostFL's flexible compressor: the payload of at most ``budget_bits`` (= alpha * beta * S) bits whose
    expected squared error ``E||u - u~||^2`` (dropped kernels + the rounding variance of eq. (4)) is smallest.

    For every L in ``levels_grid`` a bisection on the number of kept kernels k with an *estimated* size (exact
    mask and sign bits, level bits from the empirical entropy of a ``sample_size`` subsample) finds the largest k
    that fits; the (k, L) of least estimated error is then refined with at most ``refine_steps`` exact sizes, and
    the returned payload's real size is <= ``budget_bits``. Raises :class:`BudgetError` when even an empty update
    (header only) does not fit.
    """
    names, shapes, flat = flatten(update)
    layout = sparsify.kernel_layout(shapes, kernel_wise=kernel_wise)
    uniforms = rng.random(flat.size)
    minimum = 8 * math.ceil(header_bits(shapes) / 8)
    if budget_bits < minimum:
        raise BudgetError(f"budget_bits={budget_bits!r}: below the {minimum}-bit header of this update")
    ranked = _Ranked(flat, layout, score)
    estimate = _Estimates(ranked, uniforms, minimum, sample_size)
    k, levels = _least_estimated_error(estimate, levels_grid, budget_bits)
    levels = _check_levels(levels)
    plan = _refined(_ExactSizes(ranked, uniforms, levels, shapes), k, budget_bits, minimum, refine_steps)
    return _compressed(plan, flat, names, shapes, layout, kernel_wise)


@kernel
def _magnitude_keys(bits: np.ndarray, b: int, keys: np.ndarray) -> None:
    """``keys[i] = (|v_i| as float32 bits) << b | i`` for the float32 bits ``bits`` (the sign bit cleared)."""
    for i in range(bits.size):
        keys[i] = (np.uint64(bits[i] & np.uint32(0x7FFFFFFF)) << np.uint64(b)) | np.uint64(i)


@kernel
def _unpack_keys(keys: np.ndarray, b: int, uniforms: np.ndarray, element: np.ndarray, mags: np.ndarray,
                 sorted_uniforms: np.ndarray) -> None:
    """The sorted keys' elements, magnitudes (float32 bits) and the elements' uniforms, in key order."""
    low = np.uint64((1 << b) - 1)
    for i in range(keys.size):
        e = np.int64(keys[i] & low)
        element[i] = e
        mags[i] = np.uint32(keys[i] >> np.uint64(b))
        sorted_uniforms[i] = uniforms[e]


@kernel
def _first_at_or_above(mags: np.ndarray, points: np.ndarray, out: np.ndarray) -> None:
    """``np.searchsorted(mags, points, side="left")`` of the sorted float32 ``mags`` (compared as float64)."""
    for t in range(points.size):
        lo, hi = 0, mags.size
        p = points[t]
        while lo < hi:
            mid = (lo + hi) >> 1
            if np.float64(mags[mid]) < p:
                lo = mid + 1
            else:
                hi = mid
        out[t] = lo


@kernel
def _up(m: float, u: float, point: float, width: float) -> bool:
    """Whether ``|u|`` = ``m`` in the interval from ``point`` of ``width`` rounds up: ``u < (m - point) / width``
    as numpy computes it (a zero width: the IEEE quotient's infinity or NaN)."""
    d = m - point
    if width != 0.0:
        return u < d / width
    if d > 0.0:
        return u < np.inf
    if d < 0.0:
        return u < -np.inf
    return False


@kernel
def _sorted_levels(mags: np.ndarray, uniforms: np.ndarray, points: np.ndarray, starts: np.ndarray,
                   counts: np.ndarray, level: np.ndarray) -> None:
    """The level index histogram ``counts`` (0..L) of the sorted magnitudes whose intervals start at ``starts``
    and, when ``level`` is not empty, each one's level index in sorted order."""
    keep = level.size > 0
    for t in range(starts.size - 1):
        point = points[t]
        width = points[t + 1] - points[t]
        up = 0
        for i in range(starts[t], starts[t + 1]):
            if _up(np.float64(mags[i]), uniforms[i], point, width):
                up += 1
                if keep:
                    level[i] = t + 1
            elif keep:
                level[i] = t
        counts[t] += starts[t + 1] - starts[t] - up
        counts[t + 1] += up


@kernel
def _element_blocks(element: np.ndarray, level: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """Code bits of each block of 512 elements: element ``element[i]``'s symbol ``level[i]`` costs
    ``lengths[level[i]]`` bits."""
    for i in range(element.size):
        out[element[i] >> 9] += lengths[level[i]]


class _SortedLevels:
    """Every element of an update, its magnitudes sorted once, quantised at any L (eqs. (3)-(4)) and sized at an L
    whose level indices are Huffman coded one per symbol (L + 1 > 16) as :func:`_plan_bits` sizes them.

    The sorted magnitudes fall into the L intervals in runs: the interval of each is where ``searchsorted`` puts it
    among the points, which is the interval :func:`quantize.rounded_levels` finds when the points are at least 4
    float32 spacings apart (its estimate is then within one interval, which its two corrections fix), and its
    rounding is the same expression of the same floats. The histogram follows from the counts per interval and of
    roundings up (one compiled loop over the runs), and the code bits of each 512-symbol block from one count over
    the elements' blocks. The magnitudes are kept as float32 and widened where they are compared.
    """

    def __init__(self, flat: np.ndarray, uniforms: np.ndarray) -> None:
        n = flat.size
        b = max(1, (n - 1).bit_length())
        keys = np.empty(n, dtype=np.uint64)
        _magnitude_keys(flat.view(np.uint32), b, keys)  # float32 magnitude bits, ascending, then the index
        keys.sort()
        self.element = np.empty(n, dtype=np.int64)
        self.mags = np.empty(n, dtype=np.float32)
        self.uniforms = np.empty(n, dtype=np.float64)
        _unpack_keys(keys, b, np.ascontiguousarray(uniforms, dtype=np.float64), self.element,
                     self.mags.view(np.uint32), self.uniforms)  # fmt: skip
        self.n_blocks = -(-n // (1 << coding._BLOCK_LOG2))

    @staticmethod
    def applies(levels: int, u_min: float, u_max: float) -> bool:
        """Whether the sorted magnitudes' intervals are :func:`quantize.rounded_levels`' for this L and range
        (``u_min``/``u_max`` the smallest and largest magnitude)."""
        return (u_max - u_min) / levels >= 4 * float(np.spacing(np.float32(u_max)))

    def _starts(self, levels: int, u_min: float, u_max: float) -> tuple[np.ndarray, np.ndarray]:
        """(points Q_0..Q_L as float64, first sorted position of each of the L intervals and n at the end)."""
        points = quantize.quantization_points(levels, u_min, u_max).astype(np.float64)
        starts = np.empty(levels + 1, dtype=np.int64)
        starts[0], starts[-1] = 0, self.mags.size
        _first_at_or_above(self.mags, points[1:levels], starts[1:levels])
        return points, starts

    def interval_entropy_bits(self, levels: int, u_min: float, u_max: float) -> float:
        """n H(I) [bits]: the empirical entropy of the interval each magnitude lies in, times n (no rounding
        drawn: one binary search per point)."""
        return coding.entropy_bits(np.diff(self._starts(levels, u_min, u_max)[1]))

    def _counted(self, levels: int, u_min: float, u_max: float, with_levels: bool) -> tuple[np.ndarray, np.ndarray]:
        points, starts = self._starts(levels, u_min, u_max)
        counts = np.zeros(levels + 1, dtype=np.int64)
        level = np.empty(self.mags.size if with_levels else 0, dtype=np.uint16 if levels < 65535 else np.int64)
        _sorted_levels(self.mags, self.uniforms, points, starts, counts, level)
        return counts, level

    def histogram(self, levels: int, u_min: float, u_max: float) -> np.ndarray:
        """``np.bincount`` of the level indices over 0..L: per interval, its elements (a run of the sorted
        magnitudes) and how many of them round up."""
        return self._counted(levels, u_min, u_max, False)[0]

    def huffman_bits(self, levels: int, u_min: float, u_max: float) -> int:
        """``coding.huffman_bits`` of the indices, for L with one index per symbol (``_group(L) == 1``)."""
        counts, level = self._counted(levels, u_min, u_max, True)
        lengths = coding.huffman_lengths(counts)
        blocks = np.zeros(self.n_blocks, dtype=np.int64)  # symbol i (element i) is in Huffman block i // 512
        _element_blocks(self.element, level, lengths, blocks)
        return packed.huffman_bits_of(counts, lengths, blocks)


def _huffman_bounds(counts: np.ndarray, n_blocks: int) -> tuple[int, int]:
    """(least, largest) size [bits] ``coding.huffman_bits`` can give for symbols of histogram ``counts`` cut into
    ``n_blocks`` blocks whatever their order: all of it is exact but the Rice size of the blocks' bit lengths x_i,
    ``min_b sum floor(x_i / 2^b) + m (b + 1)`` over m blocks, whose sum of floors lies in
    ``[ceil((S - m (2^b - 1)) / 2^b), floor(S / 2^b)]`` for S = sum x_i (the code bits, exact)."""
    lengths = coding.huffman_lengths(counts)
    n_used = int(np.count_nonzero(counts))
    if n_used <= 1:
        exact = 2 * coding.COUNT_BITS + (coding.COUNT_BITS if n_used == 1 else 0)
        return exact, exact
    used, gaps = coding.huffman_table_gaps(lengths)
    code = int(counts @ lengths)
    table = 2 * coding.COUNT_BITS + 2 * coding.RICE_B_BITS + coding.rice_bits(gaps, coding.rice_parameter(gaps))
    table += 4 * used.size + code
    low = min(max(0, -((n_blocks * ((1 << b) - 1) - code) // (1 << b))) + n_blocks * (b + 1) for b in range(63))
    high = min((code >> b) + n_blocks * (b + 1) for b in range(63))
    return table + low, table + high


@kernel
def _abs_range(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.inf, -np.inf
    nan = 0
    for i in range(values.size):
        m = abs(np.float64(values[i]))
        nan += m != m
        lo = min(lo, m)
        hi = max(hi, m)
    return (np.nan, np.nan) if nan else (lo, hi)


def _magnitude_range(values: np.ndarray) -> tuple[float, float]:
    """(smallest, largest) magnitude of the float32 ``values`` (not empty) as float64, NaN for both where one is
    NaN (what ``min`` and ``max`` of the magnitudes give)."""
    lo, hi = _abs_range(values)
    return float(lo), float(hi)


class TopkQuantSizer:
    """One update ranked once by |value| (element-wise top-k) with its rounding uniforms drawn once.

    ``encode(k, L)`` equals ``encode_fixed(update, kept_kernels=k, levels=L, rng=g, kernel_wise=False,
    score="l2")`` for a generator ``g`` in the state ``rng`` had when this sizer was built. The plans of the last
    few (k, L) it sized are kept, so encoding the one a search picked does not quantise again. Keeping every
    element at an L of one index per Huffman symbol (FedHQ's search over L) is sized from the magnitudes sorted
    once (:class:`_SortedLevels`); a plan that keeps every element is quantised from the float32 values in one
    compiled loop (:func:`quantize.rounded_magnitudes`), without the sort.
    """

    _KEEP_PLANS = 4

    def __init__(self, update: Mapping[str, torch.Tensor], rng: np.random.Generator) -> None:
        self.names, self.shapes, self.flat = flatten(update)
        self.layout = sparsify.kernel_layout(self.shapes, kernel_wise=False)
        self.uniforms = rng.random(self.flat.size)
        # the kept elements of the last k (a search over L keeps k): (k, kept, magnitudes, uniforms, min, max)
        self._last: tuple[int, np.ndarray, np.ndarray, np.ndarray, float, float] | None = None
        self._plans: dict[tuple[int, int], _Plan] = {}
        self._sorted: _SortedLevels | None = None

    @functools.cached_property
    def order(self) -> np.ndarray:
        """Element indices by descending |value|, ties by index; ranked on first use, which keeping none or all
        of them never needs. (The l2 score of a one-element kernel, sqrt(v^2) in float64, is |v| exactly.)"""
        return sparsify.rank_descending(np.abs(self.flat))

    @property
    def n(self) -> int:
        return int(self.flat.size)

    def _checked(self, k: int, levels: int) -> tuple[int, int]:
        if not 0 <= int(k) <= self.n:
            raise CodecError(f"k={k!r}: must be in [0, {self.n}]")
        return int(k), _check_levels(levels)

    def _kept(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
        """(kept elements, their magnitudes (None when every element is kept: the plan reads the float32 values),
        their uniforms, smallest and largest magnitude) of the top k."""
        if self._last is None or self._last[0] != k:
            kept = sparsify.top_of(lambda: self.order, self.n, k)  # element-wise: kernel index = element index
            if k == self.n and k:  # every element: the plan quantises the float32 values (no magnitude array)
                mags, u = None, self.uniforms
                lo, hi = _magnitude_range(self.flat)
            else:
                mags = np.abs(self.flat[kept]).astype(np.float64)
                u = self.uniforms[kept]
                lo = float(mags.min()) if mags.size else 0.0
                hi = float(mags.max()) if mags.size else 0.0
            self._last = (k, kept, mags, u, lo, hi)
        return self._last[1:]

    def _plan(self, k: int, levels: int) -> _Plan:
        k, levels = self._checked(k, levels)
        plan = self._plans.pop((k, levels), None)
        if plan is None:
            kept, mags, u, lo, hi = self._kept(k)
            grouped = None
            if k == self.n and k:  # every element: its grouped symbols straight from the float32 values
                grouped = quantize.rounded_groups(self.flat, levels, lo, hi, self.uniforms, _group(levels))
            if grouped is not None:
                plan = _Plan(kept, kept, None, lo, hi, levels, packed.HuffmanCoded.of(*grouped))
            elif k == self.n and k:  # every element: quantised from the float32 values, in element order
                plan = _Plan(kept, kept, quantize.rounded_magnitudes(self.flat, levels, lo, hi, self.uniforms), lo,
                             hi, levels)  # fmt: skip
            else:
                plan = _quantised(kept, kept, mags, u, levels, lo, hi)
        self._plans[k, levels] = plan  # most recent last
        while len(self._plans) > self._KEEP_PLANS:
            del self._plans[next(iter(self._plans))]
        return plan

    def bits(self, k: int, levels: int) -> int:
        """Exact payload size [bits] (a multiple of 8)."""
        k, levels = self._checked(k, levels)
        if k == self.n and k and (k, levels) not in self._plans and _group(levels) == 1:
            kept, _, _, lo, hi = self._kept(k)
            if _SortedLevels.applies(levels, lo, hi):
                if self._sorted is None:
                    self._sorted = _SortedLevels(self.flat, self.uniforms)
                huffman = self._sorted.huffman_bits(levels, lo, hi)
                return _plan_bits(_Plan(kept, kept, None, lo, hi, levels), self.shapes, self.n, huffman)
        return _plan_bits(self._plan(k, levels), self.shapes, self.layout.n_kernels)

    #: Largest L whose histogram :meth:`fits` counts interval by interval (one slice per interval).
    _HISTOGRAM_LEVELS = 512

    def fits(self, k: int, levels: int, budget_bits: float) -> bool:
        """``bits(k, levels) <= budget_bits``, exactly. Keeping every element at an L of one index per symbol
        (FedHQ's search), it is settled from bounds where they suffice, sizing exactly only near the budget:

        - the intervals alone: any prefix code of the level indices takes at least n H(level) bits, and
          ``H(level) >= H(I) - 1`` (an index is its interval I or the one above, so ``H(I) <= H(level, I) <=
          H(level) + 1``), which rejects the large L of a bisection without drawing a rounding;
        - the histogram (:meth:`_SortedLevels.histogram`): the Huffman table and the code bits are exact, and
          only the Rice size of the 512-symbol blocks' bit lengths is bounded, ``sum floor(x / 2^b)`` lying in
          ``[ceil((S - m (2^b - 1)) / 2^b), floor(S / 2^b)]`` for m blocks holding S bits in all (one bit per
          block at most between the two);
        - otherwise :meth:`bits`.
        """
        k, levels = self._checked(k, levels)
        if k == self.n and k and (k, levels) not in self._plans:
            kept, _, _, lo, hi = self._kept(k)
            if self._sorted is None and _SortedLevels.applies(levels, lo, hi):  # then bits() quantises from it too
                self._sorted = _SortedLevels(self.flat, self.uniforms)
        if k == self.n and k and (k, levels) not in self._plans and _group(levels) == 1:
            kept, _, _, lo, hi = self._kept(k)
            if _SortedLevels.applies(levels, lo, hi):
                before = _bits_before_huffman(_Plan(kept, kept, None, lo, hi, levels), self.shapes, self.n)
                within = lambda huffman: 8 * math.ceil((before + huffman) / 8) <= budget_bits  # noqa: E731
                n_blocks = self._sorted.n_blocks
                excess = self._sorted.interval_entropy_bits(levels, lo, hi) - self.n  # n (H(I) - 1)
                if excess > 0 and not within(2 * coding.COUNT_BITS + 2 * coding.RICE_B_BITS + n_blocks
                                             + math.floor(excess * (1 - 1e-9)) - 1):  # fmt: skip
                    return False
                if levels <= self._HISTOGRAM_LEVELS:
                    low, high = _huffman_bounds(self._sorted.histogram(levels, lo, hi), n_blocks)
                    if not within(low):
                        return False
                    if within(high):
                        return True
        return self.bits(k, levels) <= budget_bits

    def encode(self, k: int, levels: int) -> Compressed:
        return _compressed(self._plan(k, levels), self.flat, self.names, self.shapes, self.layout, False)


@kernel
def _signed_levels(negative: np.ndarray, symbols: np.ndarray, j: int, base: int, points: np.ndarray,
                   out: np.ndarray) -> bool:
    """The decoded values (as float32 bits into ``out``): value ``i`` is ``Q_l`` (eq. (3), ``points`` as float32
    bits) of level index digit ``i % j`` of symbol ``i // j`` (``sum_t d_t base^t``), its sign bit set where
    ``negative[i]`` is 1 (the negation :func:`_negate` does). False (``out`` not written in full) when a symbol
    is outside the alphabet ``base^j``."""
    n = out.size
    alphabet = base**j
    for s in range(symbols.size):
        if symbols[s] < 0 or symbols[s] >= alphabet:
            return False
    table = np.empty(alphabet * j, dtype=np.uint32)  # the j float32 magnitudes of every symbol, digit by digit
    for a in range(alphabet):
        rest = a
        for t in range(j):
            table[a * j + t] = points[rest % base]
            rest //= base
    whole = n // j
    if j == 1:
        for s in range(n):
            out[s] = table[symbols[s]]
    elif j == 2:
        for s in range(whole):
            row = symbols[s] * 2
            out[2 * s] = table[row]
            out[2 * s + 1] = table[row + 1]
    else:
        for s in range(whole):
            row = symbols[s] * j
            for t in range(j):
                out[s * j + t] = table[row + t]
    for i in range(whole * j, n):
        out[i] = table[symbols[whole] * j + i - whole * j]
    for i in range(n):
        out[i] |= np.uint32(negative[i]) << np.uint32(31)
    return True


def decode_flat(payload: bytes) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Shapes and flat float32 vector of an encoded update (the quantised sparse update, exactly)."""
    shapes, out, _ = decode_flat_mask(payload)
    return shapes, out


def decode_flat_mask(payload: bytes) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """As :func:`decode_flat`, plus the mask of the elements the payload carries (its kept kernels): the
    ``m_{t,i}`` of AnycostFL's all-in-one aggregation, eq. (5). A kept element may decode to 0."""
    r = coding.BitReader(payload)
    try:
        kernel_wise, shapes, k = read_header(r, _MAGIC, _VERSION, "an edgefl update", flag=True)
        layout = sparsify.kernel_layout(shapes, kernel_wise=kernel_wise)
        out = np.zeros(layout.n_elements, dtype=np.float32)
        sent = np.zeros(layout.n_elements, dtype=bool)
        if k == 0:
            return shapes, out, sent
        if k > layout.n_kernels:
            raise CodecError(f"payload keeps {k} of {layout.n_kernels} kernels")
        mode = r.uint(1)
        n_listed = k if mode == 0 else layout.n_kernels - k
        listed = np.cumsum(packed.read_rice(r, n_listed) + 1) - 1
        if mode == 0:
            kept = listed
        elif n_listed == 0:
            kept = None  # every kernel
        else:
            mask = np.ones(layout.n_kernels, dtype=bool)
            mask[listed] = False
            kept = np.flatnonzero(mask)
        u_min, u_max = r.float32(), r.float32()
        levels = r.uint(16)
        j = r.uint(4)
        single = layout.n_kernels == layout.n_elements  # every kernel one element
        if kept is None:  # every element kept: no index array needed
            elements = np.empty(layout.n_elements, dtype=np.int64)  # a stand-in of the right size, not read
        else:
            elements = kept if single else sparsify.kernel_elements(kept, layout)
        negative = r.take(elements.size)  # one sign bit per kept value (1 = negative)
        if u_max > u_min:
            symbols = packed.read_huffman(r, math.ceil(elements.size / j))
        else:
            symbols, j = np.zeros(elements.size, dtype=np.int64), 1
        points = quantize.quantization_points(levels, u_min, u_max)
        values = np.empty(elements.size, dtype=np.float32)
        if not _signed_levels(negative, symbols, j, levels + 1, points.view(np.uint32), values.view(np.uint32)):
            raise IndexError(f"a Huffman symbol outside the alphabet of {levels + 1}^{j} level groups")
        if elements.size == out.size:  # every element kept: elements is arange
            return shapes, values, np.ones(out.size, dtype=bool)
        out[elements] = values
        sent[elements] = True
        return shapes, out, sent
    except (coding.CodingError, IndexError, quantize.QuantizationError) as err:
        raise CodecError(f"malformed payload: {err}") from err


def decode_with_mask(
    payload: bytes, names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The decoded update and the boolean mask of the elements it carries, both as tensors named ``names``."""
    shapes, flat, sent = decode_flat_mask(payload)
    check_names(names, shapes)
    return tensor_views(flat, names, shapes), tensor_views(sent, names, shapes)


def decode(payload: bytes, names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The quantised sparse update of ``payload`` as float32 tensors named ``names`` (the encoder's order)."""
    shapes, flat = decode_flat(payload)
    check_names(names, shapes)
    return tensor_views(flat, names, shapes)
