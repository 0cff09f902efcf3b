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
size is a function of the kept indices' gaps and the points' histogram (:meth:`Lattice.size`), so :func:`fit` searches
k by exact sizes (:func:`~.ops.largest_fitting`) after quantising a superset of the kept sub-vectors once. Where that
superset is every sub-vector, the search's model is the exact size of all less the dropped sub-vectors' code lengths
(:meth:`Lattice.model`): its first probe lands near the answer, and usually two probes settle it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from edgefl.compression import ops, wire
from edgefl.compression.coded import Coded, every, flat_update

__all__ = ["CODEC", "MAGIC", "VERSION", "TOLERANCE", "Lattice", "encode", "fit", "to_bytes", "from_bytes"]

CODEC = "edgefl.compression.vq"
MAGIC, VERSION = 0xC7, 2
TOLERANCE = 0.005
""":func:`fit`'s k is the largest fitting to within max(1, floor(0.005 k)) sub-vectors: k + that does not fit."""
_TINY_D = float(np.finfo(np.float32).tiny)  # d of an all-zero update (any d quantises 0; it must be positive)
_F32_MAX = float(np.finfo(np.float32).max)
_CHUNK = 1 << 15  # sub-vectors quantised at a time
_SQRT3 = math.sqrt(3.0)


def _zigzag(v: torch.Tensor) -> torch.Tensor:
    """0, -1, 1, -2, ... -> 0, 1, 2, 3, ... (int64)"""
    return (v << 1) ^ (v >> 63)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    return np.where(z % 2 == 0, z // 2, -(z + 1) // 2)


class Lattice:
    """E1-E3 of one update for any k: the sub-vectors, d, their ranking by norm, the uniforms of the dither, and,
    for a superset of every k sized (every sub-vector, or the ranking's held elements), each one's point as a pair
    id (:meth:`_quantised`) and its dequantised value (:meth:`kept`)."""

    def __init__(self, update: Mapping[str, torch.Tensor], *, step: float, seed: int) -> None:
        if not (step > 0 and math.isfinite(step)):
            raise ValueError(f"uveqfed: step={step!r} must be a finite number > 0")
        self.names, self.shapes, flat = flat_update(update)
        self.n, self.m, self.seed = flat.numel(), (flat.numel() + 1) // 2, int(seed)
        self.x = (torch.cat([flat, flat.new_zeros(1)]) if self.n % 2 else flat).view(self.m, 2)  # float32 rows
        rms = float(torch.linalg.vector_norm(flat, dtype=torch.float64)) / math.sqrt(self.n) if self.n else 0.0
        if not math.isfinite(rms):
            raise ValueError("uveqfed: the update holds NaN or inf; it must be finite")
        self.d = float(np.float32(min(step * rms, _F32_MAX))) or _TINY_D
        self.u = _uniforms(self.seed, self.m).to(flat.device)  # drawn on the CPU wherever the update is (below)
        self.done: int | None = None  # the ranking's held bin E2-E3 ran for (-1: every sub-vector, in order)
        self.header = wire.header_bits(self.shapes, flag=False)
        lo, hi = torch.aminmax(self.x) if self.n else (torch.tensor(0.0), torch.tensor(0.0))  # one pass, no copy
        top = max(-float(lo), float(hi)) / self.d + 1.0  # |x + z| / d <= top per coordinate (|z| <= d / sqrt(3))
        self.ob = math.ceil(2.0 / _SQRT3 * top) + 2  # > |b|: |w1| <= 2 top / sqrt(3), |b| <= |w1| + 1
        self.oa = math.ceil(top + top / _SQRT3) + 2  # > |a|: |w0| <= top + |w1| / 2
        self.pair_base = 2 * self.ob + 1  # a pair id (a + oa) (2 ob + 1) + (b + ob) orders as (a, b)

    def _prepare(self, k: int) -> bool:
        """Run E2-E3 for a superset of the top ``k`` (1 <= k): every sub-vector, in order, when everything is asked
        for or the ranking holds most of them (then True), else the elements the ranking holds
        (:meth:`~.ops.Ranking.hold`; again only for a larger set)."""
        if k < self.m and self.done != -1:
            rank = self.ranking
            rank.hold(rank.bin_of(k))
            if rank.pos is not None:
                if self.done != rank.held_bin:
                    self.pos, self.done = rank.pos, rank.held_bin
                    self.pid, self.values = self._quantised(_rows(self.x, rank.pos), _rows(self.u, rank.pos))
                return False
        if self.done != -1:
            self.pos, self.done = None, -1
            self.pid, self.values = self._quantised(self.x, self.u)
        return True

    def kept(self, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(indices ascending, which held rows they are: indices into :attr:`pid` / :attr:`values`, None for all)
        of the top ``k`` sub-vectors (1 <= k; :meth:`_prepare`)."""
        if not self._prepare(k):
            sel = self.ranking.select(k)
            return self.pos.index_select(0, sel), sel
        if k >= self.m:
            return torch.arange(self.m, device=self.x.device), None
        sel = self.ranking.positions(k)  # the held arrays are in order: sel is also the indices
        return sel, sel

    def _quantised(self, x: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(pair ids int64, values (rows, 2) float32) of the sub-vectors ``x`` with the uniforms ``u``, a chunk at a
        time on the CPU (its temporaries stay in the cache), at once on an accelerator."""
        pid = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        values = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        chunk = _CHUNK if x.device.type == "cpu" else max(1, x.shape[0])
        for c in range(0, x.shape[0], chunk):
            cut = slice(c, c + chunk)
            _quantise(x[cut], u[cut], self, values[cut], pid[cut])
        return pid, values

    @functools.cached_property
    def ranking(self) -> ops.Ranking:
        """The sub-vectors by norm (float32 of the float64 norm: the squares are exact in float64, their sum is
        rounded once; built only when not everything is kept), a chunk at a time."""
        norms = torch.empty(self.m, dtype=torch.float32, device=self.x.device)
        chunk = _CHUNK if self.x.device.type == "cpu" else max(1, self.m)
        for c in range(0, self.m, chunk):
            sq = self.x[c : c + chunk].to(torch.float64).square_()
            torch.add(sq[:, 0], sq[:, 1], out=sq[:, 0]).sqrt_()
            norms[c : c + chunk] = sq[:, 0]
        return ops.Ranking(norms)

    def size(self, k: int) -> int:
        """Exact payload size [bits] keeping the top ``k`` sub-vectors: from their pair ids' histogram (one
        gather), or, when most are kept, from the histogram of all less that of the few dropped (no gathers of
        the kept, the index gaps from the last kept alone where they are dense)."""
        if k == 0:
            return 8 * math.ceil(self.header / 8)
        if k >= self.m:  # every sub-vector: gaps all 0 (6 + m bits), the histogram of all
            self._prepare(k)
            every = self._all_counts()
            every = self._counts(self.pid) if every is None else every
            return _size(self.header, ops.RICE_B_BITS + self.m, *self._symbols(every))
        if 4 * k >= 3 * self.m and self._prepare(k) and self._all_counts() is not None:
            mask = self.ranking.mask(k)
            drop = ops.flatnonzero(~mask)
            every = self._all_counts()
            counts = every - torch.bincount(self.pid.index_select(0, drop), minlength=every.numel())
            tail = int((drop - torch.arange(drop.numel(), device=drop.device) == self.m - drop.numel()).sum())
            last = self.m - 1 - tail  # the last kept: before the run of dropped ones at the end
            gaps = ops.RICE_B_BITS + last + 1 if last + 1 <= 2 * k else ops.positions_rice_size(ops.flatnonzero(mask))
            return _size(self.header, gaps, *self._symbols(counts))
        idx, sel = self.kept(k)
        pid = self.pid if sel is None else self.pid.index_select(0, sel)
        return _size(self.header, ops.positions_rice_size(idx), *self._symbols(self._counts(pid)))

    def _counts(self, pid: torch.Tensor) -> torch.Tensor:
        """The histogram of the pair ids ``pid`` (the distinct ids with their counts where it would be too wide)."""
        top = int(pid.max()) + 1
        if top <= 4 * pid.numel() + (1 << 16):
            return torch.bincount(pid, minlength=top)
        return torch.unique(pid, sorted=True, return_counts=True)

    def _all_counts(self) -> torch.Tensor | None:
        """The histogram of the pair ids of every sub-vector (held in order), None where it would be too wide."""
        if not hasattr(self, "_every_counts"):
            counts = self._counts(self.pid)
            self._every_counts = counts if isinstance(counts, torch.Tensor) else None
        return self._every_counts

    def _symbols(self, counts) -> tuple[int, torch.Tensor, torch.Tensor]:
        """(base, the sorted distinct symbols za base + zb, each one's count) of a pair-id histogram (or of the
        distinct ids and their counts): base is one more than the largest zigzag b of a point counted."""
        if isinstance(counts, torch.Tensor):
            used = ops.flatnonzero(counts > 0)
            counts = counts[used]
        else:
            used, counts = counts
        base, symbols, order = self._sorted(used)
        return base, symbols, counts[order]

    def _sorted(self, used: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
        """(base, the symbols of the distinct pair ids ``used`` sorted, the order that sorts them)."""
        za, zb = _zigzag(used // self.pair_base - self.oa), _zigzag(used % self.pair_base - self.ob)
        base = int(zb.max()) + 1
        symbols, order = torch.sort(za * base + zb)
        return base, symbols, order


def _rows(t: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """The rows ``at`` of the (rows, 2) tensor ``t`` (float32 or float64), each row moved as one element of
    twice the width (one index_select; row indexing of a 2-column tensor is several times slower here)."""
    wide = {torch.float32: torch.int64, torch.float64: torch.complex128}[t.dtype]
    return t.contiguous().view(wide).view(-1).index_select(0, at).view(t.dtype).view(-1, 2)


def _quantise(x: torch.Tensor, u: torch.Tensor, lat: Lattice, values: torch.Tensor, pid: torch.Tensor) -> None:
    """E2-E3 and D2 of the sub-vectors ``x`` (rows of float32) with the uniforms ``u``: writes each one's value
    B (a, b) - z (float32) into ``values`` and the pair id (a + oa) base + (b + ob) of the A2 point (a, b) nearest
    to x + z into ``pid``, z = :func:`~.ops.a2_cell` of u (float64 throughout; the ids exact integers)."""
    zx, zy = ops.a2_cell(u, lat.d)
    a, b = ops.a2_nearest(torch.add(zx, x[:, 0]), torch.add(zy, x[:, 1]), lat.d)
    _values(a, b, zx, zy, lat.d, values)
    pid.copy_(b.add_(a, alpha=lat.pair_base).add_(lat.oa * lat.pair_base + lat.ob))  # exact integers in float64


def _values(a: torch.Tensor, b: torch.Tensor, zx: torch.Tensor, zy: torch.Tensor, d: float,
            out: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
    """D2: the rows B (a, b) - z, computed in float64 and rounded to float32 once (into ``out`` if given)."""
    px, py = ops.a2_points(a, b, d)
    out = torch.empty((px.shape[0], 2), dtype=torch.float32, device=px.device) if out is None else out
    out[:, 0], out[:, 1] = px.sub_(zx), py.sub_(zy)
    return out


def _symbols(za: torch.Tensor, zb: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(base, the sorted distinct symbols za base + zb, each one's count) of the zigzag points (the oracle's)."""
    base = int(zb.max()) + 1
    used, counts = torch.unique(za * base + zb, sorted=True, return_counts=True)
    return base, used, counts


def _size(header: int, gaps: int, base: int, used: torch.Tensor, counts: torch.Tensor) -> int:
    """The payload size [bits] from the kept indices' Rice field size ``gaps`` and the distinct symbols' counts."""
    body = gaps + 96 + ops.positions_rice_size(used) + ops.huffman_size(counts)
    return 8 * math.ceil((header + body) / 8)


def _coded(lat: Lattice, k: int, bits: int | None = None) -> Coded:
    """The kept sub-vectors' values and their element positions."""
    if k == 0:
        idx, values = lat.x.new_zeros(0, dtype=torch.int64), lat.x[:0]
    else:
        idx, sel = lat.kept(k)
        values = lat.values if sel is None else _rows(lat.values, sel)
    return _sent(lat.names, lat.shapes, idx, values, lat.d, lat.seed, lat.size(k) if bits is None else bits)


def _sent(names, shapes, idx: torch.Tensor, values: torch.Tensor, d: float, seed: int, bits: int) -> Coded:
    n = sum(math.prod(s) for s in shapes)
    idx = idx.to(torch.int32)
    if idx.numel() == (n + 1) // 2:  # every sub-vector
        positions = every(2 * idx.numel(), torch.int32, idx.device)
    else:
        positions = torch.empty((idx.numel(), 2), dtype=torch.int32, device=idx.device)
        torch.add(torch.mul(idx, 2, out=positions[:, 0]), 1, out=positions[:, 1])
        positions = positions.view(-1)
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
    every = guess == lat.m or lat.ranking.pos is None  # every sub-vector quantised: is keeping them all the answer?
    if every and size(0) <= budget_bits and size(lat.m) <= budget_bits:
        return _coded(lat, lat.m, size(lat.m))
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
        a, b = (t.to(torch.int64) for t in ops.a2_nearest(v[0::2] + zx, v[1::2] + zy, d))
        base, used, _ = _symbols(_zigzag(a), _zigzag(b))
        w.rice(np.diff(idx, prepend=-1) - 1)
        w.float32(d)
        w.uint(base, 32)
        w.uint(used.numel(), 32)
        w.rice(np.diff(used.numpy(), prepend=-1) - 1)
        w.huffman(np.searchsorted(used.numpy(), (_zigzag(a) * base + _zigzag(b)).numpy()), used.numel())
    return w.to_bytes()


def _uniforms(seed: int, m: int) -> torch.Tensor:
    """E2's uniforms: one pair per sub-vector, float64, from a CPU generator seeded with ``seed``. The server
    draws the dither again from the seed alone (D2), so it is drawn on the CPU wherever the update was trained: a
    CUDA generator's numbers differ from the CPU's for the same seed, and the server's copy would not match."""
    gen = torch.Generator()
    gen.manual_seed(int(seed))
    return torch.rand((m, 2), generator=gen, dtype=torch.float64)


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
