"""UVeQFed's codec (Shlezinger et al., "UVeQFed: Universal Vector Quantization for Federated Learning", IEEE TSP
2021, arXiv 2006.03262): top-k, then subtractive-dithered lattice vector quantisation on the hexagonal
lattice A2 (L = 2, :mod:`.lattice`), with entropy-coded lattice indices.

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

Adding a sub-vector adds one Rice gap (splitting an old one) and one Huffman symbol, so the size grows with k
up to the few bits the Huffman table and block lengths can move; :class:`LatticeSizer` gives the exact size.

Container (MSB first, padded to a whole byte): the header of :mod:`.container` without its kernel-wise flag
(magic, version, tensor count, shapes, k kept sub-vectors); if k > 0: Rice gaps of the kept sub-vector indices,
d (float32), the symbol base (32 bits: one more than the largest zigzag b), the number of distinct symbols (32),
their Rice-coded gaps, and the Huffman-coded symbol indices (:func:`coding.huffman_encode`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgefl.compression import coding, sparsify
from edgefl.compression.container import (
    CodecError, Encoded, decoded, flatten, header_bits, read_header, unflatten, unflatten_mask, write_header,
)  # fmt: skip
from edgefl.compression.lattice import a2_dither, a2_nearest, a2_points

__all__ = ["LatticeCoded", "LatticeSizer", "decode_lattice", "DIM"]

_MAGIC, _VERSION = 0xC7, 1
DIM = 2
"""The lattice dimension L (A2)."""
_TINY_D = float(np.finfo(np.float32).tiny)  # d of an all-zero update (any d quantises 0; keep it positive)


def _zigzag(v: np.ndarray) -> np.ndarray:
    """0, -1, 1, -2, ... -> 0, 1, 2, 3, ...: ``2 v`` for v >= 0, ``-2 v - 1`` below (``(v << 1) ^ (v >> 63)``)."""
    v = np.asarray(v, dtype=np.int64)
    return (v << 1) ^ (v >> 63)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return np.where(z % 2 == 0, z // 2, -(z + 1) // 2).astype(np.int64)


def _reconstruct(a: np.ndarray, b: np.ndarray, dither: np.ndarray, d: float) -> np.ndarray:
    """D2: the lattice points minus the dither, shape (m, 2), float32."""
    return (a2_points(a, b, d) - dither).astype(np.float32)


def _scatter(kept: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """D3: the flat update of n elements with the kept sub-vectors' ``values`` (shape (k, 2)) at their indices,
    and the mask of the elements they carry (the padding element past n is dropped)."""
    m = math.ceil(n / DIM)
    out = np.zeros((m, DIM), dtype=np.float32)
    sent = np.zeros((m, DIM), dtype=bool)
    out[kept] = values
    sent[kept] = True
    return out.reshape(-1)[:n], sent.reshape(-1)[:n]


@dataclass(frozen=True, kw_only=True)
class LatticeCoded(Encoded):
    """One UVeQFed payload (:class:`~edgefl.compression.container.Encoded`: ``payload``, ``bits``, and
    ``update``/``sent``, what the decoder rebuilds with the shared dither) with ``kept`` sub-vectors and the
    lattice's minimum distance ``d`` [update units]."""

    kept: int
    d: float


@dataclass
class _Plan:
    kept: np.ndarray  # sorted indices of the kept sub-vectors
    a: np.ndarray
    b: np.ndarray
    base: int
    distinct: np.ndarray  # sorted distinct symbols
    index: np.ndarray  # each kept sub-vector's symbol as an index into ``distinct``


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


class LatticeSizer:
    """One update partitioned, ranked and dithered once (E1-E3 for every sub-vector): :meth:`bits` and
    :meth:`encode` for any number ``k`` of kept sub-vectors.

    ``dither_rng``: the shared-seed generator; sub-vector ``j``'s dither comes from the ``j``-th pair of doubles
    it draws, so :func:`decode_lattice` with a generator in the same state regenerates it. ``step``: the lattice's
    minimum distance in units of the update's RMS ``||h|| / sqrt(n)`` (> 0).
    """

    def __init__(self, update: Mapping[str, torch.Tensor], dither_rng: np.random.Generator, *, step: float) -> None:
        if not step > 0 or not math.isfinite(step):
            raise CodecError(f"step={step!r}: must be a finite number > 0")
        self.names, self.shapes, self.flat = flatten(update)
        n = self.n
        m = math.ceil(n / DIM)
        h = np.concatenate([self.flat.astype(np.float64), np.zeros(m * DIM - n)]).reshape(m, DIM)  # E1
        rms = math.sqrt(float(np.mean(self.flat.astype(np.float64) ** 2))) if n else 0.0
        d = float(np.float32(step * rms))  # sent as float32: both ends use this value
        self.d = d if d > 0 else _TINY_D
        self.order = sparsify.rank_kernels((h**2).sum(axis=1))  # sub-vectors by norm, ties by index
        self.dither = a2_dither(dither_rng.random((m, DIM)), self.d)  # E2
        self.a, self.b = a2_nearest(h + self.dither, self.d)  # E3
        self._za, self._zb = _zigzag(self.a), _zigzag(self.b)  # E4's coordinates, mapped once for every k

    @property
    def n(self) -> int:
        """Elements of the update."""
        return int(self.flat.size)

    @property
    def m(self) -> int:
        """Sub-vectors of the update (the largest k)."""
        return math.ceil(self.n / DIM)

    def _plan(self, k: int) -> _Plan:
        if not 0 <= int(k) <= self.m:
            raise CodecError(f"k={k!r}: must be in [0, {self.m}]")
        kept = sparsify.top_positions(self.order, k)
        a, b, zb = self.a[kept], self.b[kept], self._zb[kept]
        base = int(zb.max()) + 1 if kept.size else 1
        distinct, index = _distinct(self._za[kept] * base + zb)  # E4: one symbol per point
        return _Plan(kept, a, b, base, distinct, index)

    def bits(self, k: int) -> int:
        """Exact payload size [bits] keeping the top ``k`` sub-vectors (a multiple of 8)."""
        plan = self._plan(k)
        bits = header_bits(self.shapes, flag=False)
        if plan.kept.size:
            gaps = np.diff(plan.kept, prepend=-1) - 1
            sym_gaps = np.diff(plan.distinct, prepend=-1) - 1
            bits += 6 + coding.rice_bits(gaps, coding.rice_parameter(gaps)) + 32 + 32 + 32
            bits += 6 + coding.rice_bits(sym_gaps, coding.rice_parameter(sym_gaps))
            bits += coding.huffman_bits(plan.index, plan.distinct.size)
        return 8 * math.ceil(bits / 8)

    def encode(self, k: int) -> LatticeCoded:
        """The payload keeping the top ``k`` sub-vectors; ``update`` is what :func:`decode_lattice` rebuilds."""
        plan = self._plan(k)
        w = coding.BitWriter()
        write_header(w, _MAGIC, _VERSION, self.shapes, plan.kept.size, None)
        if plan.kept.size:
            coding.rice_encode(w, np.diff(plan.kept, prepend=-1) - 1)
            w.float32(self.d)
            w.uint(plan.base, 32)
            w.uint(plan.distinct.size, 32)
            coding.rice_encode(w, np.diff(plan.distinct, prepend=-1) - 1)
            coding.huffman_encode(w, plan.index, plan.distinct.size)
        payload = w.to_bytes()
        values = _reconstruct(plan.a, plan.b, self.dither[plan.kept], self.d)
        out, sent = _scatter(plan.kept, values, self.n)
        return LatticeCoded(
            payload=payload, update=unflatten(out, self.names, self.shapes),
            sent=unflatten_mask(sent, self.names, self.shapes), kept=int(plan.kept.size), d=self.d,
        )  # fmt: skip


def decode_lattice(
    payload: bytes, names: Sequence[str], dither_rng: np.random.Generator
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The server's side (D1-D3): the decoded update and the mask of the elements it carries, as tensors named
    ``names``; ``dither_rng`` must be in the state the encoder's generator had (the shared seed)."""
    r = coding.BitReader(payload)
    try:
        _, shapes, k = read_header(r, _MAGIC, _VERSION, "a UVeQFed update", flag=False)
        n = sum(math.prod(s) for s in shapes)
        m = math.ceil(n / DIM)
        if k > m:
            raise CodecError(f"payload keeps {k} of {m} sub-vectors")
        out, sent = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=bool)
        if k:
            kept = np.cumsum(coding.rice_decode(r, k) + 1) - 1
            if kept[-1] >= m:
                raise CodecError(f"payload sub-vector {int(kept[-1])} outside {m}")
            d = r.float32()
            base = r.uint(32)
            if base == 0:
                raise CodecError("payload symbol base is 0")
            n_distinct = r.uint(32)
            distinct = np.cumsum(coding.rice_decode(r, n_distinct) + 1) - 1
            symbols = distinct[coding.huffman_decode(r, k)]  # D1
            a, b = _unzigzag(symbols // base), _unzigzag(symbols % base)
            dither = a2_dither(dither_rng.random((m, DIM)), d)[kept]  # regenerated from the shared seed
            out, sent = _scatter(kept, _reconstruct(a, b, dither, d), n)  # D2, D3
    except (coding.CodingError, IndexError) as err:
        raise CodecError(f"malformed payload: {err}") from err
    return decoded(out, sent, names, shapes)
