"""AnycostFL's flexible gradient compression (FGC, Sec. III-C, eqs. (2)-(4)) and the two baselines that share its
wire format 0xA7 (``docs/wire_formats.md``): QSGD (element-wise top-k at L = 7) and FedHQ (every element, the
largest L that fits).

A setting (k, L) keeps the k kernels of largest RMS (eq. (2); a convolution's spatial kernel, else one element),
rounds each kept magnitude stochastically and without bias to one of the L + 1 points between the smallest and
largest kept magnitude (eqs. (3)-(4), :func:`~.ops.stochastic_levels`, one U[0, 1) per element of the update drawn
once per job) and codes Rice gaps of the kernel mask, one sign bit per kept element and the level indices, j at a
time, with a canonical Huffman code. Its size is a function of statistics: the gaps' Rice length and the j-tuples'
histogram (:func:`~.ops.rice_size`, :func:`~.ops.huffman_size`), never a written payload.

- :func:`encode`: one fixed setting; :func:`fit`: the largest k that fits a bit budget at each L of a grid, the
  (k, L) of least expected error (AnycostFL; QSGD with the grid (7,)); :func:`fit_levels`: every element at the
  largest L that fits (FedHQ).
- :func:`to_bytes` / :func:`from_bytes`: the plain byte-exact oracle (:mod:`.wire`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from edgefl.compression import ops, wire
from edgefl.compression.coded import Coded, every, flat_update
from edgefl.errors import EdgeflError

__all__ = ["CODEC", "MAGIC", "VERSION", "MAX_LEVELS", "LEVEL_GRID", "K_TOLERANCE", "FGCError", "BudgetError",
           "group", "encode", "fit", "fit_levels", "to_bytes", "from_bytes"]  # fmt: skip

CODEC = "edgefl.compression.fgc"
MAGIC, VERSION = 0xA7, 2
MAX_LEVELS = 4095
"""Largest number of quantisation intervals L (a 16-bit field; the Huffman alphabet stays <= 4,096)."""
LEVEL_GRID = (1, 2, 3, 5, 7, 11, 15, 23, 31, 63, 127, 255)
"""The L :func:`fit` tries (intervals; L + 1 points)."""
K_TOLERANCE = 1 / 200
""":func:`fit`'s k is within max(1, K_TOLERANCE k) of a k whose exact size does not fit."""
_SAMPLE = 1024
"""Elements in the subsample the size and error estimates of :func:`fit` read (golden-ratio spaced: no stride
aliasing with a tensor's rows)."""
_ROWS = 20
"""Thresholds (kept fractions of the subsample, geometric) at which :class:`_Estimates` estimates."""


class FGCError(EdgeflError, ValueError):
    """An FGC argument is out of range (kept count, levels)."""


class BudgetError(FGCError):
    """The bit budget is below the smallest payload (the header of an update that keeps nothing)."""


def group(levels: int) -> int:
    """Level indices per Huffman symbol: the largest j <= 8 with (L + 1)^j <= 256 (1 when L + 1 > 256)."""
    j = 1
    while j < 8 and (levels + 1) ** (j + 1) <= 256:
        j += 1
    return j


def _small(levels: int) -> torch.dtype:
    """The integer type of level indices in [0, L]: uint8 up to L = 255, else int16."""
    return torch.uint8 if levels <= 255 else torch.int16


@dataclass(frozen=True)
class _Layout:
    """Where the kernels of a flat update lie, tensor by tensor: ``size[t]`` elements per kernel (the spatial
    kernel of a tensor of ndim >= 3 when kernel-wise, else 1), ``count[t]`` kernels, their first kernel index
    ``kstart[t]`` and first element ``estart[t]``."""

    size: tuple[int, ...]
    count: tuple[int, ...]
    kstart: tuple[int, ...]
    estart: tuple[int, ...]
    n_kernels: int
    n: int

    def elements(self, kernels: torch.Tensor) -> torch.Tensor:
        """Ascending element positions of the ascending kernel indices ``kernels`` (written in place, tensor by
        tensor, into one output)."""
        if all(s == 1 for s in self.size):
            return kernels
        cuts = torch.searchsorted(kernels, torch.tensor([*self.kstart, self.n_kernels], device=kernels.device))
        cuts = cuts.tolist()
        out = kernels.new_empty(sum((cuts[t + 1] - cuts[t]) * z for t, z in enumerate(self.size)))
        at = 0
        for t, size in enumerate(self.size):
            mine, part = kernels[cuts[t] : cuts[t + 1]], out[at : at + (cuts[t + 1] - cuts[t]) * size]
            if size == 1:
                torch.add(mine, self.estart[t] - self.kstart[t], out=part)
            else:
                first = (mine - self.kstart[t]).mul_(size).add_(self.estart[t])
                torch.add(first[:, None], torch.arange(size, device=kernels.device), out=part.view(-1, size))
            at += part.numel()
        return out

    def kernels(self, positions: torch.Tensor) -> torch.Tensor:
        """Ascending kernel indices of the ascending element ``positions`` of whole kernels."""
        if all(s == 1 for s in self.size):
            return positions
        parts = []
        cuts = torch.searchsorted(positions, torch.tensor([*self.estart, self.n], device=positions.device))
        for t, size in enumerate(self.size):
            local = positions[int(cuts[t]) : int(cuts[t + 1])] - self.estart[t]
            parts.append(self.kstart[t] + local[::size] // size)
        return torch.cat(parts)

    def kernel_of(self, positions: torch.Tensor) -> torch.Tensor:
        """The kernel index of each element position (any order)."""
        t = torch.searchsorted(torch.tensor(self.estart[1:], device=positions.device), positions, right=True)
        size, ks, es = (torch.tensor(v, device=positions.device)[t] for v in (self.size, self.kstart, self.estart))
        return ks + (positions - es) // size

    def scores(self, flat: torch.Tensor, mags: torch.Tensor) -> torch.Tensor:
        """Each kernel's RMS ``||u[k]||_2 / sqrt(|k|)`` (float32; |u| exactly for a one-element kernel, from the
        magnitudes ``mags``): eq. (2)'s L2 order among kernels of one size, comparable across sizes (error removed
        per value sent)."""
        if all(s == 1 for s in self.size):
            return mags
        parts = []
        for t, size in enumerate(self.size):
            seg = flat[self.estart[t] : self.estart[t] + self.count[t] * size]
            if size == 1:
                parts.append(mags[self.estart[t] : self.estart[t] + self.count[t]])
            else:
                parts.append(seg.to(torch.float64).square().reshape(-1, size).mean(1).sqrt().to(torch.float32))
        return torch.cat(parts)


@functools.lru_cache(maxsize=64)
def _layout(shapes: tuple[tuple[int, ...], ...], kernel_wise: bool) -> _Layout:
    size = tuple(math.prod(s[2:]) if kernel_wise and len(s) >= 3 and math.prod(s[2:]) > 0 else 1 for s in shapes)
    count = tuple(math.prod(s) // z for s, z in zip(shapes, size))
    kstart = tuple(int(x) for x in np.cumsum((0, *count))[:-1])
    estart = tuple(int(x) for x in np.cumsum((0, *(math.prod(s) for s in shapes)))[:-1])
    return _Layout(size, count, kstart, estart, sum(count), sum(math.prod(s) for s in shapes))


def _grouped(indices: torch.Tensor, levels: int) -> tuple[torch.Tensor, int]:
    """(symbols, alphabet): the level indices j at a time as one symbol ``sum_t d_t (L+1)^t`` (the last group
    padded with 0 digits, Horner from the last digit), alphabet (L+1)^j <= 4,096 (int32; the indices themselves
    when j = 1)."""
    j, base = group(levels), levels + 1
    if j == 1:
        return indices, base
    m = indices.numel()
    full = m // j
    symbols = torch.empty(-(-m // j), dtype=torch.int32, device=indices.device)
    digits, head = indices[: full * j].reshape(full, j), symbols[:full]
    torch.add(digits[:, j - 2], digits[:, j - 1], alpha=base, out=head)  # < (L+1)^2 <= 256: exact in uint8 too
    for t in range(j - 3, -1, -1):  # Horner, one fused pass per digit
        torch.add(digits[:, t], head, alpha=base, out=head)
    if full < symbols.numel():  # the padded last group
        tail = indices[full * j :].tolist()
        symbols[full] = sum(d * base**t for t, d in enumerate(tail))
    return symbols, base**j


@dataclass
class _Setting:
    """One (k, L) of an update, exact: kept kernels and element positions (None: every element), level indices,
    range, size [bits]."""

    k: int
    levels: int
    positions: torch.Tensor | None
    indices: torch.Tensor | None
    lo: float
    hi: float
    bits: int
    cut: tuple[torch.Tensor, torch.Tensor] | None = None
    """(levels, kernels): positions and indices not built yet; they are the elements of the ascending kept
    ``kernels`` and the level index each has in a larger setting's ``levels`` (one per element of the update;
    :meth:`_Update.setting` sizes a nested setting from the difference)."""


class _Update:
    """An update prepared once for many settings: flat values, magnitudes, the job's uniforms (one per element,
    element order), kernel scores and their ranking (built on first use), and per L the last setting built
    whole, with its kernel mask over the ranking's held kernels, its level histogram and index of each element
    (``_whole``)."""

    def __init__(self, update: Mapping[str, torch.Tensor], gen: torch.Generator, kernel_wise: bool) -> None:
        self.names, self.shapes, self.flat = flat_update(update)
        self.kernel_wise = bool(kernel_wise)
        self.layout = _layout(self.shapes, self.kernel_wise)
        self.uniforms = torch.rand(self.flat.numel(), generator=gen, device=self.flat.device)
        self.mags = self.flat.abs()
        self.header = wire.header_bits(self.shapes, flag=True)
        self._work: dict[int, torch.Tensor] = {}
        self._whole: dict[int, tuple[_Setting, torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    @functools.cached_property
    def scores(self) -> torch.Tensor:
        return self.layout.scores(self.flat, self.mags)

    @functools.cached_property
    def range(self) -> tuple[float, float]:
        """The smallest and largest magnitude of the whole update."""
        return tuple(float(x) for x in torch.aminmax(self.mags))

    @functools.cached_property
    def ranking(self) -> ops.Ranking:
        return ops.Ranking(self.scores)

    def setting(self, k: int, levels: int) -> _Setting:
        """The exact setting keeping the top ``k`` kernels at ``levels`` intervals."""
        lay = self.layout
        if not 0 <= int(k) <= lay.n_kernels:
            raise FGCError(f"kept={k!r}: must be in [0, {lay.n_kernels}] (the update's kernels)")
        if not 1 <= int(levels) <= MAX_LEVELS:
            raise FGCError(f"levels={levels!r}: must be in [1, {MAX_LEVELS}]")
        k, levels = int(k), int(levels)
        device = self.flat.device
        if k == 0:
            empty = torch.zeros(0, dtype=torch.int64, device=device)
            return _Setting(0, levels, empty, empty, 0.0, 0.0, 8 * math.ceil(self.header / 8))
        if k == lay.n_kernels:  # every element: positions None (all of them), no gathers
            positions, mask_bits = None, ops.RICE_B_BITS
            mags, u, work = self.mags, self.uniforms, self._scratch(0, lay.n)
        else:
            held = None
            if 2 * k <= lay.n_kernels:  # the kept kernels are listed
                kernels = listed = self.ranking.positions(k).to(device)
                held = self.ranking.mask(k)
            else:  # the dropped ones are
                mask = self.ranking.top(k)
                kernels, listed = ops.flatnonzero(mask).to(device), ops.flatnonzero(~mask).to(device)
            mask_bits = ops.positions_rice_size(listed)
            nested = self._nested(k, levels, kernels, held, mask_bits)
            if nested is not None:
                return nested
            positions = lay.elements(kernels)
            m = positions.numel()
            mags = work = torch.index_select(self.mags, 0, positions, out=self._scratch(0, m))
            u = torch.index_select(self.uniforms, 0, positions, out=self._scratch(1, m))
        lo, hi = self.range if positions is None else (float(x) for x in torch.aminmax(mags))
        indices = ops.stochastic_levels(mags, lo, hi, levels, u, work, _small(levels))
        bits = self.header + 1 + mask_bits + 64 + 16 + 4 + indices.numel()
        if hi > lo:
            symbols, alphabet = _grouped(indices, levels)
            hist = torch.bincount(symbols, minlength=alphabet)
            bits += ops.huffman_size(hist)
        s = _Setting(k, levels, positions, indices, lo, hi, 8 * math.ceil(bits / 8))
        if positions is not None and held is not None and hi > lo and group(levels) == 1:
            dense = torch.zeros(lay.n, dtype=indices.dtype, device=device).index_copy_(0, positions, indices)
            self._whole[levels] = (s, held.clone(), hist, dense)
        return s

    def _nested(self, k: int, levels: int, kernels: torch.Tensor, held: torch.Tensor | None,
                mask_bits: int) -> _Setting | None:  # fmt: skip
        """The setting of the top ``k`` listed kernels (mask ``held`` over the ranking's held kernels) sized from
        the last whole setting at ``levels`` when it keeps them all and more: the level histogram less that of
        the kernels between, whose magnitudes lie strictly inside its range (which is then also this one's, and
        each element's level index the same); one index per symbol (j = 1) only. None when it does not apply."""
        whole, before, hist, dense = self._whole.get(levels, (None,) * 4)
        if held is None or whole is None or not k < whole.k or before.numel() != held.numel():  # same held set
            return None
        drop = ops.flatnonzero(before ^ held)
        drop = self.layout.elements(drop if self.ranking.pos is None else self.ranking.pos.index_select(0, drop))
        mags = self.mags.index_select(0, drop)
        lo, hi = (float(x) for x in torch.aminmax(mags))
        if not (whole.lo < lo and hi < whole.hi):
            return None
        indices = ops.stochastic_levels(mags, whole.lo, whole.hi, levels, self.uniforms.index_select(0, drop),
                                        mags, _small(levels))  # fmt: skip
        m = whole.indices.numel() - drop.numel()
        bits = self.header + 1 + mask_bits + 64 + 16 + 4 + m
        bits += ops.huffman_size(hist - torch.bincount(indices, minlength=levels + 1))
        return _Setting(k, levels, None, None, whole.lo, whole.hi, 8 * math.ceil(bits / 8), cut=(dense, kernels))

    def _scratch(self, i: int, m: int) -> torch.Tensor:
        """The first ``m`` elements of float32 work space ``i`` (one per update, reused by every setting and by
        :meth:`coded`)."""
        if i not in self._work:
            self._work[i] = torch.empty(self.layout.n, dtype=torch.float32, device=self.flat.device)
        return self._work[i][:m]

    def coded(self, s: _Setting) -> Coded:
        """The :class:`Coded` of setting ``s``: int32 positions, the signed level values, the indices for
        :func:`to_bytes`."""
        if s.cut is not None:  # the kept kernels' elements and their indices in the larger setting
            positions = self.layout.elements(s.cut[1])
            s = _Setting(s.k, s.levels, positions, s.cut[0].index_select(0, positions), s.lo, s.hi, s.bits)
        points = ops.level_values(torch.arange(s.levels + 1, device=s.indices.device), s.lo, s.hi, s.levels)
        at = self._scratch(0, s.indices.numel()).view(torch.int32).copy_(s.indices)  # widened for the gather
        q = points.index_select(0, at)  # Q_l of eq. (3), one float32 per level
        signs = self.flat if s.positions is None else self.flat.index_select(0, s.positions)
        values = torch.copysign(q, signs, out=q)  # the value's sign bit (-0.0 sends a 1)
        wide = torch.int32 if self.layout.n < 2**31 else torch.int64
        if s.positions is None:
            pos = every(self.layout.n, wide, self.flat.device)
        else:
            pos = s.positions.to(wide)
        meta = {"levels": s.levels, "lo": s.lo, "hi": s.hi, "kernel_wise": self.kernel_wise,
                "indices": s.indices.to(_small(s.levels))}  # fmt: skip
        return Coded(positions=pos, values=values, names=self.names, shapes=self.shapes, bits=s.bits, kept=s.k,
                     codec=CODEC, meta=meta, table=points)  # fmt: skip


def encode(update: Mapping[str, torch.Tensor], *, kept: int, levels: int, gen: torch.Generator,
           kernel_wise: bool = True) -> Coded:  # fmt: skip
    """``update`` keeping its top ``kept`` kernels (eq. (2); single elements when not ``kernel_wise``) at
    ``levels`` intervals (eqs. (3)-(4)), the rounding's uniforms drawn from ``gen`` (one per element)."""
    u = _Update(update, gen, kernel_wise)
    return u.coded(u.setting(kept, levels))


# ---------------------------------------------------------------------------------------------- budget search
def _rice_estimate(m: np.ndarray, total: int) -> np.ndarray:
    """Rice size [bits] of m gaps summing to ``total - m`` if they were geometric (a random mask): at each b,
    ``sum floor(g / 2^b) ~ (sum g - m (2^b - 1) / 2) / 2^b``; the least over b."""
    m = np.asarray(m, dtype=float)
    gaps = np.maximum(total - m, 0.0)
    b = np.arange(0, 40, dtype=float)[:, None]
    cost = np.maximum(gaps - m * (2**b - 1) / 2, 0.0) / 2**b + m * (b + 1)
    return ops.RICE_B_BITS + cost.min(0)


class _Estimates:
    """Estimated size [bits] and expected squared error of keeping the kernels whose score is at least each of
    :data:`_ROWS` thresholds, at any L, from :data:`_SAMPLE` golden-ratio spaced elements sorted by their kernel's
    score (numpy: a thousand numbers). For the top m sampled elements: kept elements n_e ~ m n / S, kernels
    k ~ (n / S) sum 1 / |kernel|, range [lo, hi] the sample's (hi the update's largest magnitude once its kernel
    is kept, lo the smallest when everything is), level bits n_e times the entropy of the expected level histogram
    (each magnitude splits its probability between its interval's ends, eq. (4)), mask bits :func:`_rice_estimate`;
    error: the dropped energy plus the rounding variance w^2 f (1 - f) per kept element."""

    def __init__(self, u: _Update) -> None:
        lay = u.layout
        golden = np.unique((np.arange(min(_SAMPLE, lay.n)) * 0.6180339887498949 % 1.0 * lay.n).astype(np.int64))
        pos = torch.from_numpy(golden).to(u.flat.device)
        score = u.scores.index_select(0, lay.kernel_of(pos))
        order = torch.sort(score, descending=True, stable=True).indices
        pos, score = pos[order], score[order].cpu().numpy()
        size = torch.tensor(lay.size, device=pos.device)[
            torch.searchsorted(torch.tensor(lay.estart[1:], device=pos.device), pos, right=True)]
        mags = u.mags.index_select(0, pos).to(torch.float64).cpu().numpy()
        scale = lay.n / pos.numel()
        self.m = np.unique(np.geomspace(8 if mags.size > 8 else 1, mags.size, _ROWS).astype(int))
        self.n_e = self.m * scale
        self.k = np.cumsum(1.0 / size.cpu().numpy())[self.m - 1] * scale
        self.n_e[-1], self.k[-1] = lay.n, lay.n_kernels  # every sampled element kept: call it everything
        energy = np.cumsum(mags**2) * scale
        self.total = float(energy[-1])
        self.dropped = self.total - energy[self.m - 1]
        lo, hi = u.range
        top_score = hi  # the RMS of the kernel holding the largest magnitude: hi itself for a one-element kernel
        for t, size in enumerate(lay.size):
            seg = u.mags[lay.estart[t] : lay.estart[t] + lay.count[t] * size]
            if size > 1 and seg.numel() and float(seg.max()) == hi:
                top_score = float(u.scores[lay.kstart[t] + int(torch.argmax(seg)) // size])
                break
        self.lo = np.minimum.accumulate(mags)[self.m - 1]
        self.hi = np.maximum.accumulate(mags)[self.m - 1]
        self.hi = np.where(score[self.m - 1] <= top_score, hi, self.hi)
        self.lo[-1] = lo
        self.mags = mags
        self.over = mags[None, :] - self.lo[:, None]  # each sampled magnitude above each row's lo
        self.kept = np.arange(mags.size)[None, :] < self.m[:, None]  # each row's sampled elements
        self.fixed = u.header + 1 + 84 + self.n_e + np.minimum(
            _rice_estimate(self.k, lay.n_kernels), _rice_estimate(lay.n_kernels - self.k, lay.n_kernels))

    def at(self, levels: int, rows: slice = slice(None)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(estimated bits, estimated squared error, level distribution of shape (rows, L + 1)) at each threshold
        (those of ``rows``), ``levels`` intervals."""
        m, lo, hi, n_e = self.m[rows], self.lo[rows], self.hi[rows], self.n_e[rows]
        width = np.where(hi > lo, (hi - lo) / levels, 0.0)
        r, c = np.nonzero(self.kept[rows])  # each row's sampled elements, row by row (the others weigh 0)
        x = np.clip(self.over[rows][r, c] / np.where(width > 0, width, 1.0)[r], 0, levels)
        base = np.minimum(np.floor(x), levels - 1)
        f = x - base
        at = (r * (levels + 1) + base).astype(np.int64)
        size = m.size * (levels + 1)
        hist = np.bincount(at, 1 - f, size) + np.bincount(at + 1, f, size)
        p = hist.reshape(m.size, levels + 1) / m[:, None]
        h = np.where(hi > lo, -(p * np.log2(np.where(p > 0, p, 1.0))).sum(1), 0.0)
        var = np.zeros((m.size, self.over.shape[1]))
        var[r, c] = (width[r] ** 2) * f * (1 - f)
        var = var.sum(1) * (n_e / m)  # summed over whole rows, zeros included: the same rounding at any m
        return self.fixed[rows] + n_e * h, self.dropped[rows] + var, p

    @staticmethod
    def huffman_excess(p: np.ndarray, n_e: float, levels: int) -> float:
        """Bits [per kept element] a Huffman stream of the j-tuples of n_e independent level indices of
        distribution ``p`` takes beyond their entropy (the table, and a code's whole bits): the exact stream size
        (:func:`~.ops.huffman_size`) of the tuples' expected histogram, less n_e H(p)."""
        j = group(levels)
        tuples = p
        for _ in range(j - 1):
            tuples = np.outer(tuples, p).ravel()
        n_sym = math.ceil(n_e / j)
        counts = np.round(tuples * n_sym).astype(np.int64)
        h = -(p * np.log2(np.where(p > 0, p, 1.0))).sum()
        if counts.sum() == 0 or not n_e:
            return 0.0
        return (ops.huffman_size(counts) - n_e * h) / n_e


def _crossing(x: np.ndarray, y: np.ndarray, budget: float) -> float:
    """The x where the increasing-ish y(x) (linear between points) reaches ``budget``, clamped to x's range."""
    fits = np.flatnonzero(y <= budget)
    if fits.size == 0:
        return 0.0
    i = int(fits[-1])
    if i + 1 >= x.size:
        return float(x[-1])
    return float(x[i] + (x[i + 1] - x[i]) * (budget - y[i]) / max(y[i + 1] - y[i], 1e-9))


def _largest_k(u: _Update, levels: int, budget: float, curve: tuple[np.ndarray, np.ndarray]) -> _Setting:
    """The setting of the largest k that fits ``budget`` at ``levels`` to within max(1, K_TOLERANCE k) of one that
    does not, by exact sizes (:func:`~.ops.largest_fitting`, guided by the estimated (k, bits) ``curve``)."""
    tried: dict[int, _Setting] = {}

    def size(k: int) -> int:
        tried[k] = u.setting(k, levels)
        return tried[k].bits

    ks, bits = curve
    k = ops.largest_fitting(size, u.layout.n_kernels, budget, lambda k: float(np.interp(k, ks, bits)), K_TOLERANCE)
    return tried[k or 0]


def _check_budget(u: _Update, budget_bits: float) -> None:
    if not budget_bits >= 8 * math.ceil(u.header / 8):
        raise BudgetError(f"budget_bits={budget_bits!r}: below the {8 * math.ceil(u.header / 8)}-bit header of this "
                          "update")  # fmt: skip


def fit(update: Mapping[str, torch.Tensor], budget_bits: float, gen: torch.Generator, *,
        levels_grid: Sequence[int] = LEVEL_GRID, kernel_wise: bool = True) -> Coded:  # fmt: skip
    """AnycostFL's flexible compressor: the payload of at most ``budget_bits`` (= alpha beta S) whose expected
    squared error (dropped kernels + rounding variance of eq. (4)) is least, over L in ``levels_grid`` and the
    largest k that fits at that L. The L and a first k come from :class:`_Estimates`; k is then found from exact
    sizes (:func:`_largest_k`: within max(1, ``K_TOLERANCE`` k) of a k that does not fit). QSGD: ``levels_grid
    = (7,)``, ``kernel_wise=False``. Raises :class:`BudgetError` when not even the header fits."""
    u = _Update(update, gen, kernel_wise)
    _check_budget(u, budget_bits)
    n_k = u.layout.n_kernels
    if n_k == 0:
        return u.coded(u.setting(0, levels_grid[0]))
    est = _Estimates(u)
    best = None
    for levels in levels_grid:
        bits, err, p = est.at(levels)
        k = _crossing(est.k, bits, budget_bits)
        row = int(np.clip(np.searchsorted(est.k, k), 0, est.k.size - 1))
        bits = bits + est.n_e * _Estimates.huffman_excess(p[row], est.n_e[row], levels)
        k = _crossing(est.k, bits, budget_bits)
        e = float(np.interp(k, est.k, err)) if k >= est.k[0] else est.total
        if best is None or e < best[0] * (1 - 1e-9):
            best = (e, levels, bits)
    _, levels, bits = best
    return u.coded(_largest_k(u, levels, budget_bits, (est.k, bits)))


def fit_levels(update: Mapping[str, torch.Tensor], budget_bits: float, gen: torch.Generator) -> Coded:
    """FedHQ: every element at the largest L in [1, MAX_LEVELS] whose exact size fits ``budget_bits`` (L fits and
    L + 1 does not), searched from an estimate (:class:`_Estimates` at every element kept), then its exact
    neighbour and the secant of the last two exact sizes (bisection after four probes). Raises
    :class:`BudgetError` when not even L = 1 fits (the method then sends the header alone)."""
    u = _Update(update, gen, kernel_wise=False)
    _check_budget(u, budget_bits)
    n = u.layout.n
    if n == 0:
        return u.coded(u.setting(0, 1))
    exact = functools.lru_cache(maxsize=None)(lambda L: u.setting(n, L))
    fits = lambda L: exact(L).bits <= budget_bits  # noqa: E731
    est = _Estimates(u)
    lo, hi = 0, MAX_LEVELS + 1  # estimate: L = lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        bits, _, p = est.at(mid, slice(-1, None))
        bits = bits[0] + n * _Estimates.huffman_excess(p[0], n, mid)
        lo, hi = (mid, hi) if bits <= budget_bits else (lo, mid)
    good, bad, seen = 0, MAX_LEVELS + 1, []  # exact: good fits (0: none found), bad does not; (L, bits) probed
    probe = max(lo, 1)
    while bad - good > 1:
        seen.append((probe, exact(probe).bits))
        good, bad = (probe, bad) if fits(probe) else (good, probe)
        (l1, b1), (l2, b2) = seen[-2:] if len(seen) > 1 else seen * 2
        if len(seen) == 1:  # the estimate's neighbour on the far side
            aim = probe + 1 if probe == good else probe - 1
        elif len(seen) <= 4 and (b2 - b1) * (l2 - l1) > 0:  # where the line through the last two sizes meets it
            aim = l2 + math.floor((budget_bits - b2) * (l2 - l1) / (b2 - b1))
        else:  # bisect, or double while nothing above has been probed
            aim = (good + bad) // 2 if bad <= MAX_LEVELS else 2 * good
        probe = min(max(aim, good + 1), bad - 1)
    if good == 0:
        raise BudgetError(f"budget_bits={budget_bits!r}: every element at L = 1 takes {exact(1).bits} bits")
    return u.coded(exact(good))


# ---------------------------------------------------------------------------------------------- the oracle
def to_bytes(coded: Coded) -> bytes:
    """The 0xA7 v2 payload of ``coded`` (``docs/wire_formats.md``), written field by field by :mod:`.wire`;
    ``8 * len(to_bytes(coded)) == coded.bits``."""
    meta = coded.meta
    lay = _layout(coded.shapes, bool(meta["kernel_wise"]))
    w = wire.BitWriter()
    wire.write_header(w, MAGIC, VERSION, coded.shapes, coded.kept, bool(meta["kernel_wise"]))
    if coded.kept:
        positions = coded.positions.long().cpu()
        kernels = lay.kernels(positions)
        mode = int(2 * coded.kept > lay.n_kernels)
        if mode:
            dropped = torch.ones(lay.n_kernels, dtype=torch.bool)
            dropped[kernels] = False
            kernels = torch.nonzero(dropped).reshape(-1)
        w.uint(mode, 1)
        w.rice(np.diff(kernels.numpy(), prepend=-1) - 1)
        w.float32(meta["lo"])
        w.float32(meta["hi"])
        w.uint(meta["levels"], 16)
        w.uint(group(meta["levels"]), 4)
        w.bits(torch.signbit(coded.values).cpu().numpy())
        if meta["hi"] > meta["lo"]:
            symbols, alphabet = _grouped(meta["indices"].cpu().to(torch.int64), meta["levels"])
            w.huffman(symbols.numpy(), alphabet)
    return w.to_bytes()


def from_bytes(payload: bytes, names: Sequence[str]) -> Coded:
    """The :class:`Coded` a 0xA7 v2 payload holds (positions, values, indices), read field by field by
    :mod:`.wire`; the tensors are named ``names`` in order."""
    r = wire.BitReader(payload)
    kernel_wise, shapes, kept = wire.read_header(r, MAGIC, VERSION, flag=True)
    shapes = tuple(shapes)
    if len(names) != len(shapes):
        raise wire.WireError(f"payload holds {len(shapes)} tensors; {len(names)} names given")
    lay = _layout(shapes, bool(kernel_wise))
    meta = {"levels": 1, "lo": 0.0, "hi": 0.0, "kernel_wise": bool(kernel_wise)}
    positions = torch.zeros(0, dtype=torch.int64)
    values = torch.zeros(0, dtype=torch.float32)
    indices = torch.zeros(0, dtype=torch.int64)
    if kept:
        mode = r.uint(1)
        listed = kept if not mode else lay.n_kernels - kept
        kernels = torch.from_numpy(np.cumsum(r.rice(listed) + 1) - 1)
        if kernels.numel() and int(kernels[-1]) >= lay.n_kernels:
            raise wire.WireError(f"kernel index {int(kernels[-1])} outside the update's {lay.n_kernels} kernels")
        if mode:
            keep = torch.ones(lay.n_kernels, dtype=torch.bool)
            keep[kernels] = False
            kernels = torch.nonzero(keep).reshape(-1)
        positions = lay.elements(kernels)
        lo, hi, levels, j = r.float32(), r.float32(), r.uint(16), r.uint(4)
        if not 1 <= levels <= MAX_LEVELS or j != group(levels):
            raise wire.WireError(f"levels {levels} with {j} per symbol: not a 0xA7 setting")
        negative = torch.from_numpy(r.bits(positions.numel()).astype(bool))
        indices = torch.zeros(positions.numel(), dtype=torch.int64)
        if hi > lo:
            symbols = torch.from_numpy(r.huffman(-(-positions.numel() // j)))
            digits = (symbols[:, None] // (levels + 1) ** torch.arange(j)) % (levels + 1)
            indices = digits.reshape(-1)[: positions.numel()]
        q = ops.level_values(indices, lo, hi, levels)
        values = torch.where(negative, -q, q)
        meta.update(levels=levels, lo=lo, hi=hi)
    meta["indices"] = indices.to(_small(meta["levels"]))
    pos = positions.to(torch.int32 if lay.n < 2**31 else torch.int64)
    return Coded(positions=pos, values=values, names=tuple(names), shapes=shapes, bits=8 * len(payload), kept=kept,
                 codec=CODEC, meta=meta)  # fmt: skip
