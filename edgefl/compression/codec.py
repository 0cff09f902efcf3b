"""AnycostFL's flexible gradient compression as a real codec (AnycostFL Sec. III-C, eqs. (2)-(4)).

``compress(update, budget_bits=S_i, rng=...)`` sparsifies the update kernel-wise (eq. (2)), quantises the kept
values to L levels between the smallest and largest kept magnitude with unbiased probabilistic rounding
(eqs. (3)-(4)), and codes the result losslessly into bytes (Golomb-Rice gaps of the kernel mask, raw sign bits,
canonical Huffman of the level indices). It picks the number of kept kernels and L so that the **real encoded
size** is at most the budget (AnycostFL's ``alpha * beta * S``); ``decode(payload, names)`` gives back exactly the
quantised sparse update. The pieces (:mod:`.sparsify`, :mod:`.quantize`, :mod:`.coding`) and
:func:`encode_fixed` (given k and L) are what STC / QSGD / FedHQ compose.

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

from edgefl.compression import coding, quantize, sparsify
from edgefl.compression.container import (
    CodecError, Encoded, check_names, decoded, flatten, header_bits, read_header, unflatten, unflatten_mask,
    write_header,
)  # fmt: skip

__all__ = ["CodecError", "BudgetError", "Compressed", "TopkQuantSizer", "LEVEL_GRID", "MAX_LEVELS", "flatten", "unflatten",
           "encode_fixed", "encoded_bits", "compress", "decode", "decode_flat", "decode_flat_mask", "decode_with_mask"]  # fmt: skip

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
    base = levels + 1
    pad = (-indices.size) % j
    digits = np.concatenate([indices, np.zeros(pad, dtype=np.int64)]).reshape(-1, j)
    return digits @ (base ** np.arange(j, dtype=np.int64)), base**j


def _mask_gaps(kept: np.ndarray, n_kernels: int) -> tuple[int, np.ndarray]:
    """(mode, gaps): gaps between the kept (mode 0) or dropped (mode 1, when fewer) kernel indices."""
    if 2 * kept.size > n_kernels:
        mask = np.ones(n_kernels, dtype=bool)
        mask[kept] = False
        return 1, np.diff(np.flatnonzero(mask), prepend=-1) - 1
    return 0, np.diff(kept, prepend=-1) - 1


@dataclass
class _Plan:
    kept: np.ndarray  # sorted kept kernel indices
    elements: np.ndarray  # their element indices, ascending
    negative: np.ndarray
    indices: np.ndarray
    u_min: float
    u_max: float
    levels: int


@dataclass
class _Kept:
    """What a plan takes from its kept elements whatever L: magnitudes (float64 of the float32 values), their
    smallest and largest, signs and rounding uniforms."""

    kept: np.ndarray
    elements: np.ndarray
    mags: np.ndarray
    u_min: float
    u_max: float
    negative: np.ndarray
    uniforms: np.ndarray


def _kept(flat: np.ndarray, layout: sparsify.KernelLayout, kept: np.ndarray, uniforms: np.ndarray,
          elements: np.ndarray | None = None) -> _Kept:  # fmt: skip
    if elements is None:
        elements = sparsify.kernel_elements(kept, layout)
    values = flat[elements]
    mags = np.abs(values)
    u_min = float(mags.min()) if mags.size else 0.0
    u_max = float(mags.max()) if mags.size else 0.0
    return _Kept(kept, elements, mags.astype(np.float64), u_min, u_max, values < 0, uniforms[elements])


def _plan_levels(kv: _Kept, levels: int) -> _Plan:
    if not 1 <= int(levels) <= MAX_LEVELS:
        raise CodecError(f"levels={levels!r}: must be in [1, {MAX_LEVELS}]")
    indices = quantize.stochastic_levels(kv.mags, int(levels), kv.u_min, kv.u_max, kv.uniforms)
    return _Plan(kv.kept, kv.elements, kv.negative, indices, kv.u_min, kv.u_max, int(levels))


def _plan(flat: np.ndarray, layout: sparsify.KernelLayout, kept: np.ndarray, levels: int,
          uniforms: np.ndarray, elements: np.ndarray | None = None) -> _Plan:  # fmt: skip
    if not 1 <= int(levels) <= MAX_LEVELS:
        raise CodecError(f"levels={levels!r}: must be in [1, {MAX_LEVELS}]")
    return _plan_levels(_kept(flat, layout, kept, uniforms, elements), levels)


def _plan_bits(plan: _Plan, shapes: Sequence[Sequence[int]], n_kernels: int) -> int:
    bits = header_bits(shapes)
    if plan.kept.size:
        _, gaps = _mask_gaps(plan.kept, n_kernels)
        bits += 1 + 6 + coding.rice_bits(gaps, coding.rice_parameter(gaps)) + 64 + 16 + 4 + plan.elements.size
        if plan.u_max > plan.u_min:
            j = _group(plan.levels)
            symbols, alphabet = _grouped(plan.indices, plan.levels, j)
            bits += coding.huffman_bits(symbols, alphabet)
    return 8 * math.ceil(bits / 8)


def _write(plan: _Plan, shapes: Sequence[Sequence[int]], n_kernels: int, kernel_wise: bool) -> bytes:
    w = coding.BitWriter()
    write_header(w, _MAGIC, _VERSION, shapes, plan.kept.size, kernel_wise)
    if plan.kept.size:
        mode, gaps = _mask_gaps(plan.kept, n_kernels)
        w.uint(mode, 1)
        coding.rice_encode(w, gaps)
        w.float32(plan.u_min)
        w.float32(plan.u_max)
        w.uint(plan.levels, 16)
        j = _group(plan.levels)
        w.uint(j, 4)
        w.bits(plan.negative.astype(np.uint8))
        if plan.u_max > plan.u_min:
            symbols, alphabet = _grouped(plan.indices, plan.levels, j)
            coding.huffman_encode(w, symbols, alphabet)
    return w.to_bytes()


def _dequantised(plan: _Plan, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.float32)
    if plan.elements.size:
        mags = quantize.level_magnitudes(plan.indices, plan.levels, plan.u_min, plan.u_max)
        out[plan.elements] = np.where(plan.negative, -mags, mags)
    return out


def _compressed(plan: _Plan, names: Sequence[str], shapes: Sequence[Sequence[int]], layout: sparsify.KernelLayout,
                kernel_wise: bool) -> Compressed:  # fmt: skip
    """The payload of ``plan`` with the update and element mask it decodes to (built here, not decoded)."""
    payload = _write(plan, shapes, layout.n_kernels, kernel_wise)
    sent = np.zeros(layout.n_elements, dtype=bool)
    sent[plan.elements] = True
    update = unflatten(_dequantised(plan, sent.size), names, shapes)
    return Compressed(payload=payload, update=update, sent=unflatten_mask(sent, names, shapes),
                      kept_kernels=int(plan.kept.size), n_kernels=layout.n_kernels, levels=plan.levels)  # fmt: skip


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
    return _compressed(plan, names, shapes, layout, kernel_wise)


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
    n_k = layout.n_kernels
    uniforms = rng.random(flat.size)
    minimum = 8 * math.ceil(header_bits(shapes) / 8)
    if budget_bits < minimum:
        raise BudgetError(f"budget_bits={budget_bits!r}: below the {minimum}-bit header of this update")
    scores = sparsify.kernel_scores(flat, layout, score=score)
    order = sparsify.rank_kernels(scores)
    rank_el = sparsify.kernel_elements(order, layout)
    mags_rank = np.abs(flat[rank_el]).astype(np.float64)
    n_el_prefix = np.concatenate([[0], np.cumsum(layout.size[order])])
    energy = np.concatenate([[0.0], np.cumsum(np.add.reduceat(flat.astype(np.float64) ** 2, layout.start)[order])])
    pre_min = np.minimum.accumulate(mags_rank) if mags_rank.size else mags_rank
    pre_max = np.maximum.accumulate(mags_rank) if mags_rank.size else mags_rank
    stride = max(1, flat.size // sample_size)
    sample = np.arange(0, flat.size, stride)
    u_sample = uniforms[rank_el[sample]]

    def estimate(k: int, levels: int) -> tuple[float, float]:
        """(estimated bits, estimated squared error) of keeping the top k kernels at L = levels."""
        if k == 0:
            return float(minimum), float(energy[-1])
        n = int(n_el_prefix[k])
        lo, hi = float(pre_min[n - 1]), float(pre_max[n - 1])
        sub = sample[sample < n]
        mags = mags_rank[sub]
        idx = quantize.stochastic_levels(mags, levels, lo, hi, u_sample[: sub.size])
        h = _entropy_per_symbol(idx) if hi > lo else 0.0
        p = k / n_k
        mask = n_k * _binary_entropy(min(p, 1 - p)) * 1.03 + 200
        bits = minimum + 150 + mask + n * (1.0 + h) + min(n, 256 * 4 + 2000)
        q_err = quantize.expected_error(mags, levels, lo, hi) * (n / max(sub.size, 1))
        return bits, float(energy[-1] - energy[k]) + q_err

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

    def exact(k: int) -> tuple[int, _Plan]:
        kernel_mask = np.zeros(n_k, dtype=bool)
        kernel_mask[order[:k]] = True
        element_mask = np.zeros(flat.size, dtype=bool)
        element_mask[rank_el[: n_el_prefix[k]]] = True
        plan = _plan(flat, layout, np.flatnonzero(kernel_mask), levels, uniforms, np.flatnonzero(element_mask))
        return _plan_bits(plan, shapes, n_k), plan

    size, plan = exact(k)
    fits_k, fits_plan = (k, plan) if size <= budget_bits else (0, None)
    bad_k = n_k + 1 if size <= budget_bits else k
    steps = 0
    # secant guesses, then bisection, between the largest fitting and the smallest failing k; steps past
    # refine_steps continue only until something fits
    while bad_k - fits_k > max(1, fits_k // 200) and (steps < refine_steps or fits_plan is None):
        steps += 1
        guess = int(k * (budget_bits - minimum) / max(size - minimum, 1) * (0.995 if size > budget_bits else 1.0))
        k = guess if fits_k < guess < min(bad_k, n_k + 1) and steps <= 3 else (fits_k + bad_k) // 2
        k = min(k, n_k)
        size, plan = exact(k)
        if size <= budget_bits:
            fits_k, fits_plan = k, plan
        else:
            bad_k = k
    if fits_plan is None:
        fits_plan = exact(0)[1]
    return _compressed(fits_plan, names, shapes, layout, kernel_wise)


class TopkQuantSizer:
    """One update ranked once by |value| (element-wise top-k) with its rounding uniforms drawn once.

    ``encode(k, L)`` equals ``encode_fixed(update, kept_kernels=k, levels=L, rng=g, kernel_wise=False,
    score="l2")`` for a generator ``g`` in the state ``rng`` had when this sizer was built.
    """

    def __init__(self, update: Mapping[str, torch.Tensor], rng: np.random.Generator) -> None:
        self.names, self.shapes, self.flat = flatten(update)
        self.layout = sparsify.kernel_layout(self.shapes, kernel_wise=False)
        self.uniforms = rng.random(self.flat.size)
        self._last: tuple[int, _Kept] | None = None  # the kept values of the last k (a search over L keeps k)

    @functools.cached_property
    def order(self) -> np.ndarray:
        """Element indices by descending |value|, ties by index; ranked on first use, which keeping none or all
        of them never needs."""
        return sparsify.rank_kernels(sparsify.kernel_scores(self.flat, self.layout, score="l2"))

    @property
    def n(self) -> int:
        return int(self.flat.size)

    def _plan(self, k: int, levels: int):
        if not 0 <= int(k) <= self.n:
            raise CodecError(f"k={k!r}: must be in [0, {self.n}]")
        if not 1 <= int(levels) <= MAX_LEVELS:
            raise CodecError(f"levels={levels!r}: must be in [1, {MAX_LEVELS}]")
        if self._last is None or self._last[0] != int(k):
            kept = sparsify.top_of(lambda: self.order, self.n, k)  # element-wise: kernel index = element index
            self._last = (int(k), _kept(self.flat, self.layout, kept, self.uniforms, kept))
        return _plan_levels(self._last[1], int(levels))

    def bits(self, k: int, levels: int) -> int:
        """Exact payload size [bits] (a multiple of 8)."""
        return _plan_bits(self._plan(k, levels), self.shapes, self.layout.n_kernels)

    def encode(self, k: int, levels: int) -> Compressed:
        return _compressed(self._plan(k, levels), self.names, self.shapes, self.layout, False)


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
        listed = np.cumsum(coding.rice_decode(r, n_listed) + 1) - 1
        if mode == 0:
            kept = listed
        else:
            mask = np.ones(layout.n_kernels, dtype=bool)
            mask[listed] = False
            kept = np.flatnonzero(mask)
        u_min, u_max = r.float32(), r.float32()
        levels = r.uint(16)
        j = r.uint(4)
        elements = sparsify.kernel_elements(kept, layout)
        negative = r.take(elements.size).astype(bool)
        if u_max > u_min:
            base = levels + 1
            symbols = coding.huffman_decode(r, math.ceil(elements.size / j))
            digits = (symbols[:, None] // base ** np.arange(j, dtype=np.int64)) % base
            indices = digits.reshape(-1)[: elements.size]
        else:
            indices = np.zeros(elements.size, dtype=np.int64)
        mags = quantize.level_magnitudes(indices, levels, u_min, u_max)
        out[elements] = np.where(negative, -mags, mags)
        sent[elements] = True
        return shapes, out, sent
    except (coding.CodingError, IndexError, quantize.QuantizationError) as err:
        raise CodecError(f"malformed payload: {err}") from err


def decode_with_mask(
    payload: bytes, names: Sequence[str]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The decoded update and the boolean mask of the elements it carries, both as tensors named ``names``."""
    shapes, flat, sent = decode_flat_mask(payload)
    return decoded(flat, sent, names, shapes)


def decode(payload: bytes, names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The quantised sparse update of ``payload`` as float32 tensors named ``names`` (the encoder's order)."""
    shapes, flat = decode_flat(payload)
    check_names(names, shapes)
    return unflatten(flat, names, shapes)
