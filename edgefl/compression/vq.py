"""UVeQFed's codec (Shlezinger et al., "UVeQFed: Universal Vector Quantization for Federated Learning", IEEE TSP
2021, arXiv 2006.03262): subtractive-dithered lattice vector quantisation on the hexagonal lattice A2 (L = 2) of the
kept sub-vectors, the lattice points entropy coded. Encoder steps:

- E1 partition and scale: the n elements are cut into M = ceil(n / 2) sub-vectors of 2 consecutive elements (the
  last padded with a 0); the lattice's minimum distance is ``d = step ||h|| / sqrt(n)``, rounded to float32 (it
  is sent), so quantising h on d A2 is quantising h / ||h|| on a fixed lattice. The k sub-vectors of largest
  norm are kept (the norm rounded to float32; ties to the lower index);
- E2 dither: sub-vector j's dither z_j is :func:`~.ops.a2_cell` of the j-th pair of U[0, 1) that a torch
  generator seeded with the job's dither seed draws for all M sub-vectors (so z_j does not depend on k; the
  server draws them again from the seed, which is not sent);
- E3 quantise: (a_j, b_j), the integer coordinates of the A2 point nearest to h_j + z_j (:func:`~.ops.a2_nearest`);
- E4 entropy code: each point is one symbol ``zigzag(a) base + zigzag(b)``; the distinct symbols are listed once
  (Rice gaps) and each kept sub-vector sends its symbol's index in that list, Huffman coded.

Decoder: D1 the symbols, D2 ``h^_j = B (a_j, b_j) - z_j`` (float64, rounded to float32), D3 the kept sub-vectors
at their indices. On a kept sub-vector the error is uniform over the hexagon, E||e||^2 / 2 = 5 d^2 / 72 per
element (Conway & Sloane: G(A2) = 5 / (36 sqrt 3)).

Wire format 0xC7 version 2 (``docs/wire_formats.md``): header without the flag (kept count k sub-vectors); if
k > 0: Rice gaps of the kept indices, d (float32), base (32 bits: one more than the largest zigzag b), u (32: the
distinct points), Rice gaps of the sorted distinct symbols, and the Huffman stream of the k indices over u. The
size is a function of the kept indices' gaps and the points' histogram (:func:`size_bits`), so :func:`fit` searches
k by exact sizes (:func:`~.ops.largest_fitting`) after quantising a superset of the kept sub-vectors once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from edgefl.compression import ops, wire
from edgefl.compression.coded import Coded, flat_update

__all__ = ["CODEC", "MAGIC", "VERSION", "TOLERANCE", "Lattice", "encode", "fit", "to_bytes", "from_bytes"]

CODEC = "edgefl.compression.vq"
MAGIC, VERSION = 0xC7, 2
TOLERANCE = 0.005
""":func:`fit`'s k is the largest fitting to within max(1, floor(0.005 k)) sub-vectors: k + that does not fit."""
_TINY_D = float(np.finfo(np.float32).tiny)  # d of an all-zero update (any d quantises 0; it must be positive)
_F32_MAX = float(np.finfo(np.float32).max)
_CHUNK = 1 << 15  # sub-vectors quantised at a time


def _zigzag(v: torch.Tensor) -> torch.Tensor:
    """0, -1, 1, -2, ... -> 0, 1, 2, 3, ..."""
    return (v << 1) ^ (v >> 63)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return np.where(z % 2 == 0, z // 2, -(z + 1) // 2)


class Lattice:
    """E1-E3 of one update for any k: the sub-vectors, d, their ranking by norm, the uniforms of the dither, and,
    for a superset of every k sized (the ranking's held elements), each one's zigzag point coordinates and its
    dequantised value (:meth:`kept`)."""

    def __init__(self, update: Mapping[str, torch.Tensor], *, step: float, seed: int) -> None:
        if not (step > 0 and math.isfinite(step)):
            raise ValueError(f"uveqfed: step={step!r} must be a finite number > 0")
        self.names, self.shapes, flat = flat_update(update)
        self.n, self.m, self.seed = flat.numel(), (flat.numel() + 1) // 2, int(seed)
        self.x = (torch.cat([flat, flat.new_zeros(1)]) if self.n % 2 else flat).view(self.m, 2)  # float32 rows
        rms = float(torch.linalg.vector_norm(flat, dtype=torch.float64)) / math.sqrt(self.n) if self.n else 0.0
        self.d = float(np.float32(min(step * rms, _F32_MAX))) or _TINY_D
        self.u = _uniforms(self.seed, self.m, flat.device)
        self.done: int | None = None  # the ranking's held bin E2-E3 ran for
        self.header = wire.header_bits(self.shapes, flag=False)

    def _prepare(self, k: int) -> bool:
        """Run E2-E3 for a superset of the top ``k`` (1 <= k): every sub-vector, in order, when everything is asked
        for or the ranking holds most of them (then True), else the elements the ranking holds
        (:meth:`~.ops.Ranking.hold`; again only for a larger set)."""
        if k < self.m and self.done != -1:  # -1: every sub-vector held, in order
            rank = self.ranking
            rank.hold(rank.bin_of(k))
            if rank.pos is not None:
                if self.done != rank.held_bin:
                    self.held, self.done = self._quantised(self.x[rank.pos], self.u[rank.pos], rank.pos), rank.held_bin
                return False
        if self.done != -1:
            self.held, self.done = self._quantised(self.x, self.u, torch.arange(self.m, device=self.x.device)), -1
        return True

    def kept(self, k: int, parts: tuple[int, ...] = (0, 1, 2, 3)) -> tuple[torch.Tensor, ...]:
        """``parts`` of (indices ascending, zigzag a, zigzag b, values (k, 2) float32, pair ids) of the top ``k``
        sub-vectors (:meth:`_prepare`)."""
        if k == 0:
            i64, i32 = (self.x.new_zeros(0, dtype=t) for t in (torch.int64, torch.int32))
            return tuple((i64, i32, i32, self.x[:0], i64)[i] for i in parts)
        if not self._prepare(k):
            sel = self.ranking.select(k)
            return tuple(self.held[i][sel] for i in parts)
        if k >= self.m:
            return tuple(self.held[i] for i in parts)
        sel = self.ranking.positions(k)  # the held arrays are in order: sel is also the indices
        return tuple(sel if i == 0 else self.held[i][sel] for i in parts)

    def _quantised(self, x: torch.Tensor, u: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(pos, zigzag a, zigzag b, values, pair ids) of the sub-vectors ``x`` at ``pos`` with the uniforms ``u``;
        a pair id is ``za B + zb`` with B one more than the largest zb held, so it orders as (za, zb)."""
        za, zb = torch.empty((2, x.shape[0]), dtype=torch.int32, device=x.device)
        values = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        for c in range(0, x.shape[0], _CHUNK):  # a chunk at a time: its temporaries stay in the cache
            cut = slice(c, c + _CHUNK)
            za[cut], zb[cut], values[cut] = _quantise(x[cut], u[cut], self.d)
        self.pair_base = int(zb.max()) + 1 if zb.numel() else 1
        return pos, za, zb, values, za.to(torch.int64) * self.pair_base + zb

    @functools.cached_property
    def ranking(self) -> ops.Ranking:
        """The sub-vectors by norm (float32 of the float64 norm; built only when not everything is kept)."""
        x = self.x.to(torch.float64)
        return ops.Ranking((x[:, 0] * x[:, 0] + x[:, 1] * x[:, 1]).sqrt_().to(torch.float32))

    def size(self, k: int) -> int:
        """Exact payload size [bits] keeping the top ``k`` sub-vectors: from their pair ids' histogram (one
        gather), or, when most are kept, from the histogram of all less that of the few dropped (no gathers of
        the kept, the index gaps from the last kept alone where they are dense)."""
        if k == 0:
            return 8 * math.ceil(self.header / 8)
        if k < self.m and 4 * k >= 3 * self.m and self._prepare(k) and self._all_counts() is not None:
            mask = self.ranking.mask(k)
            drop = ops.flatnonzero(~mask)
            pid, every = self.held[4], self._all_counts()
            counts = every - torch.bincount(pid[drop], minlength=every.numel())
            used = ops.flatnonzero(counts > 0)
            tail = int((drop - torch.arange(drop.numel(), device=drop.device) == self.m - drop.numel()).sum())
            last = self.m - 1 - tail  # the last kept: before the run of dropped ones at the end
            gaps = ops.RICE_B_BITS + last + 1 if last + 1 <= 2 * k else ops.positions_rice_size(ops.flatnonzero(mask))
            return _size(self.header, gaps, *_joined(used, self.pair_base), counts[used])
        idx, pid = self.kept(k, parts=(0, 4))
        return _size(self.header, ops.positions_rice_size(idx), *_distinct_pairs(pid, self.pair_base))

    def _all_counts(self) -> torch.Tensor | None:
        """The histogram of the pair ids of every sub-vector (held in order), None where it would be too wide."""
        if not hasattr(self, "_every_counts"):
            pid = self.held[4]
            top = int(pid.max()) + 1
            self._every_counts = torch.bincount(pid, minlength=top) if top <= 4 * pid.numel() + (1 << 16) else None
        return self._every_counts


def _quantise(x: torch.Tensor, u: torch.Tensor, d: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E2-E3 and D2 of the sub-vectors ``x`` (rows of float32) with the uniforms ``u``: the zigzag coordinates of
    the A2 point nearest to x + z (int32) and its value B (a, b) - z (float32), z = :func:`~.ops.a2_cell` of u."""
    zx, zy = ops.a2_cell(u, d)
    a, b = ops.a2_nearest(x[:, 0].to(torch.float64) + zx, x[:, 1].to(torch.float64) + zy, d)
    return _zigzag(a).to(torch.int32), _zigzag(b).to(torch.int32), _values(a, b, zx, zy, d)


def _values(a: torch.Tensor, b: torch.Tensor, zx: torch.Tensor, zy: torch.Tensor, d: float) -> torch.Tensor:
    """D2: the rows B (a, b) - z, computed in float64 and rounded to float32 once."""
    px, py = ops.a2_points(a, b, d)
    return torch.stack([px - zx, py - zy], dim=1).to(torch.float32)


def _distinct_pairs(pid: torch.Tensor, pair_base: int) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(base, the sorted distinct symbols za base + zb, each one's count) of points given as pair ids
    ``za pair_base + zb`` (any pair_base above every zb: the distinct pairs sort the same under any such base)."""
    top = int(pid.max()) + 1
    if top <= 4 * pid.numel() + (1 << 16):
        counts = torch.bincount(pid, minlength=top)
        used = ops.flatnonzero(counts > 0)
        counts = counts[used]
    else:
        used, counts = torch.unique(pid, sorted=True, return_counts=True)
    return (*_joined(used, pair_base), counts)


def _joined(used: torch.Tensor, pair_base: int) -> tuple[int, torch.Tensor]:
    """(base, the symbols za base + zb) of the sorted distinct pair ids ``used``: base one more than their zb."""
    za, zb = used // pair_base, used % pair_base
    base = int(zb.max()) + 1
    return base, za * base + zb


def _symbols(za: torch.Tensor, zb: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(base, the sorted distinct symbols za base + zb, each one's count) of the zigzag points."""
    pair_base = int(zb.max()) + 1
    return _distinct_pairs(za.to(torch.int64) * pair_base + zb, pair_base)


def _size(header: int, gaps: int, base: int, used: torch.Tensor, counts: torch.Tensor) -> int:
    """The payload size [bits] from the kept indices' Rice field size ``gaps`` and the distinct symbols' counts."""
    body = gaps + 96 + ops.positions_rice_size(used) + ops.huffman_size(counts)
    return 8 * math.ceil((header + body) / 8)


def size_bits(header: int, idx: torch.Tensor, za: torch.Tensor, zb: torch.Tensor) -> int:
    """Exact size [bits] of the payload keeping the sub-vectors ``idx`` (ascending) at the zigzag points."""
    return _size(header, ops.positions_rice_size(idx), *_symbols(za, zb)) if idx.numel() else 8 * math.ceil(header / 8)


def _coded(lat: Lattice, k: int, bits: int | None = None) -> Coded:
    """The kept sub-vectors' values and their element positions."""
    idx, za, zb, values = lat.kept(k)
    return _sent(lat.names, lat.shapes, idx, values, lat.d, lat.seed,
                 size_bits(lat.header, idx, za, zb) if bits is None else bits)  # fmt: skip


def _sent(names, shapes, idx: torch.Tensor, values: torch.Tensor, d: float, seed: int, bits: int) -> Coded:
    n = sum(math.prod(s) for s in shapes)
    idx = idx.to(torch.int32)
    if idx.numel() == (n + 1) // 2:  # every sub-vector
        positions = torch.arange(2 * idx.numel(), dtype=torch.int32, device=idx.device)
    else:
        positions = torch.stack([2 * idx, 2 * idx + 1], dim=1).reshape(-1)
    values = values.reshape(-1)
    if n % 2 and idx.numel() and int(idx[-1]) == n // 2:  # the last sub-vector's padding is not sent
        values, positions = values[:-1], positions[:-1]
    return Coded(positions=positions, values=values, names=tuple(names), shapes=tuple(shapes), bits=bits,
                 kept=idx.numel(), codec=CODEC, meta={"d": d, "seed": seed})  # fmt: skip


def encode(update: Mapping[str, torch.Tensor], k: int, *, step: float, seed: int) -> Coded:
    """UVeQFed of ``update`` keeping its ``k`` sub-vectors of largest norm; ``seed``: the dither's (shared)."""
    lat = Lattice(update, step=step, seed=seed)
    if not 0 <= int(k) <= lat.m:
        raise ValueError(f"uveqfed: k={k!r} must be in [0, {lat.m}]")
    return _coded(lat, int(k))


def fit(update: Mapping[str, torch.Tensor], budget_bits: float, *, step: float, seed: int,
        tol: float = TOLERANCE) -> Coded:  # fmt: skip
    """UVeQFed of ``update`` keeping the most sub-vectors whose exact size fits ``budget_bits``, to within ``tol``
    k (:data:`TOLERANCE`); k = 0 (the header alone) when nothing fits."""
    lat = Lattice(update, step=step, seed=seed)
    sizes: dict[int, int] = {}

    def size(k: int) -> int:
        if k not in sizes:
            sizes[k] = lat.size(k)
        return sizes[k]

    model = lambda k: lat.header + 102 + ops.uniform_gaps_bits(k, lat.m) + 3 * k  # noqa: E731 (~3 bits a point)
    guess = next((k for k in range(lat.m, 0, -max(1, lat.m // 64)) if model(k) <= 1.25 * budget_bits), 1)
    if guess < lat.m:  # one superset quantised for the probes near the budget
        lat.ranking.hold(lat.ranking.bin_of(guess))
    k = ops.largest_fitting(size, lat.m, budget_bits, model, tol) or 0
    return _coded(lat, k, size(k))


def to_bytes(coded: Coded) -> bytes:
    """The 0xC7 payload of ``coded`` (the oracle: plain :class:`~.wire.BitWriter` fields); the points are found
    again from the sent values and the dither of ``coded.meta["seed"]``: value + z is B (a, b) up to the value's
    float32 rounding, |x| 2^-24 <= sqrt(n) / step 2^-24 d (d = step ||h|| / sqrt(n)), far inside the point's cell
    (inradius d / 2) for step >= 0.01 and any model here."""
    w = wire.BitWriter()
    wire.write_header(w, MAGIC, VERSION, coded.shapes, coded.kept, None)
    if coded.kept:
        d, pos = coded.meta["d"], coded.positions.cpu().numpy().astype(np.int64)
        idx = pos[pos % 2 == 0] // 2
        zx, zy = ops.a2_cell(_uniforms(coded.meta["seed"], (coded.n + 1) // 2)[torch.from_numpy(idx)], d)
        v = torch.zeros(2 * idx.size, dtype=torch.float64)
        v[: pos.size] = coded.values.cpu().to(torch.float64)
        a, b = ops.a2_nearest(v[0::2] + zx, v[1::2] + zy, d)
        base, used, _ = _symbols(_zigzag(a), _zigzag(b))
        w.rice(np.diff(idx, prepend=-1) - 1)
        w.float32(d)
        w.uint(base, 32)
        w.uint(used.numel(), 32)
        w.rice(np.diff(used.numpy(), prepend=-1) - 1)
        w.huffman(np.searchsorted(used.numpy(), (_zigzag(a) * base + _zigzag(b)).numpy()), used.numel())
    return w.to_bytes()


def _uniforms(seed: int, m: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """E2's uniforms: one pair per sub-vector from a generator seeded with ``seed`` on ``device``, float64."""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return torch.rand((m, 2), generator=gen, dtype=torch.float64, device=device)


def from_bytes(payload: bytes, names: Sequence[str], *, seed: int) -> Coded:
    """The :class:`Coded` a 0xC7 payload holds, the dither drawn again from ``seed`` (D1-D3)."""
    r = wire.BitReader(payload)
    _, shapes, k = wire.read_header(r, MAGIC, VERSION, flag=False)
    if len(names) != len(shapes):
        raise wire.WireError(f"payload holds {len(shapes)} tensors; {len(names)} names given")
    n = sum(math.prod(s) for s in shapes)
    m = (n + 1) // 2
    idx, d, values = np.zeros(0, dtype=np.int64), 0.0, torch.zeros((0, 2), dtype=torch.float32)
    if k:
        idx = np.cumsum(r.rice(k) + 1) - 1
        if k > m or idx[-1] >= m:
            raise wire.WireError(f"payload keeps sub-vectors up to {int(idx[-1])} of {m}")
        d = r.float32()
        base, u = r.uint(32), r.uint(32)
        used = np.cumsum(r.rice(u) + 1) - 1
        joined = used[r.huffman(k)]
        a, b = torch.from_numpy(_unzigzag(joined // base)), torch.from_numpy(_unzigzag(joined % base))
        zx, zy = ops.a2_cell(_uniforms(seed, m)[torch.from_numpy(idx)], d)
        values = _values(a, b, zx, zy, d)
    return _sent(names, shapes, torch.from_numpy(idx), values, d, seed, 8 * len(payload))
