"""The operations every codec shares, each written once, in torch on the device that holds the update.

- :func:`job_generator`: a job's own torch generator on its device, seeded from its numpy stream.
- :func:`top_k` / :class:`Ranking`: the mask of the k largest magnitudes (ties: the lower index first), for many
  k from one histogram of their float32 bit patterns; :func:`flatnonzero`: the indices of a mask.
- :func:`stochastic_levels` / :func:`level_values`: the unbiased stochastic rounding of AnycostFL eqs. (3)-(4)
  (QSGD's and FedHQ's quantiser too) and its L + 1 points.
- :func:`rice_size`: the size of a Golomb-Rice field of non-negative integers (6-bit parameter, unary quotients,
  b-bit remainders) at its smallest optimal parameter.
- :func:`huffman_lengths`, :func:`canonical_codes`, :func:`huffman_size`: a canonical Huffman code from a histogram
  and the exact size of a Huffman stream (:mod:`.wire` writes it), a function of the histogram alone.
- :func:`a2_nearest`, :func:`a2_cell`: the hexagonal lattice A2's nearest point and its subtractive dither from
  two uniforms (UVeQFed).
- :func:`largest_fitting`: the budget search over one knob from exact sizes (every codec's).

The field layouts these sizes count are written down in ``docs/wire_formats.md``; :mod:`.wire` is the plain
byte-exact writer and reader the tests hold the sizes to.
"""

from __future__ import annotations

import bisect
import math

import numpy as np
import torch

__all__ = [
    "RICE_B_BITS", "COUNT_BITS", "MAX_CODE_BITS", "job_generator", "top_k", "Ranking", "flatnonzero",
    "stochastic_levels", "level_values", "rice_size", "positions_rice_size", "huffman_lengths", "canonical_codes",
    "huffman_size", "a2_nearest", "a2_points", "a2_corner", "a2_cell", "uniform_gaps_bits",
    "largest_fitting",
]  # fmt: skip

RICE_B_BITS = 6
"""Bits of a Rice field's parameter b."""
_HI = 16
"""A :class:`Ranking` bins by ``bits >> 16``."""
COUNT_BITS = 32
"""Bits of a Huffman stream's alphabet size, used-symbol count and single symbol."""
MAX_CODE_BITS = 16
"""Longest Huffman code; each used symbol's length - 1 is written in 4 bits."""


def job_generator(rng: np.random.Generator, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator on ``device`` seeded by one draw from the job's numpy stream ``rng``: the job's draws
    (rounding uniforms, dither) depend on its own seed only, not on where or after what it runs."""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(rng.integers(0, 2**63 - 1)))
    return gen


def top_k(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean mask of the ``k`` largest magnitudes |s| of the 1-D float32 ``scores`` (NaN above everything),
    ties broken towards the lower index, so the set does not depend on how a sort orders equal values
    (:class:`Ranking`)."""
    return Ranking(scores).top(k)


def stochastic_levels(mags: torch.Tensor, lo: float, hi: float, levels: int, uniforms: torch.Tensor,
                      work: torch.Tensor | None = None, dtype: torch.dtype = torch.int32) -> torch.Tensor:  # fmt: skip
    """Level index of each magnitude under AnycostFL's unbiased stochastic rounding (eqs. (3)-(4)): with the L + 1
    points Q_l = lo + l (hi - lo) / L, x = (m - lo) L / (hi - lo) and the element's uniform u in [0, 1), the index
    is floor(x + u) clamped to [0, L]: floor(x) + 1 with probability x - floor(x), else floor(x), for x in
    [0, L] (0 below, L above); all 0 when hi <= lo. Float32 arithmetic in five passes (x + u is clamped before
    the conversion truncates it, which then equals the floor); indices in [0, L] of the integer ``dtype`` (one
    that holds L: uint8 up to 255 halves the conversion and the histogram after it). ``work``: a float32 tensor
    of the magnitudes' shape to compute x in (it may be ``mags`` itself, which is then overwritten)."""
    if not hi > lo:
        return torch.zeros(mags.shape, dtype=dtype, device=mags.device)
    x = torch.sub(mags.to(torch.float32), lo, out=work) if work is not None else mags.to(torch.float32) - lo
    return x.mul_(levels / (hi - lo)).add_(uniforms).clamp_(0.0, float(levels)).to(dtype)


def level_values(indices: torch.Tensor, lo: float, hi: float, levels: int) -> torch.Tensor:
    """The magnitudes Q_l (eq. (3)) of level indices ``indices``, float32 (computed in float64, rounded once)."""
    if not hi > lo:
        return torch.full(indices.shape, lo, dtype=torch.float32, device=indices.device)
    return (lo + indices.to(torch.float64) * ((hi - lo) / levels)).to(torch.float32)


def _host(values: torch.Tensor | np.ndarray):
    """A CPU tensor as its numpy view (integer shifts and sums take half the time there), an array as an array, a
    tensor on another device as it is: the Rice sizes below use only the operators both share."""
    if isinstance(values, torch.Tensor):
        return values.numpy() if values.device.type == "cpu" else values
    return np.asarray(values)


def _rice_walk(cost, mean: float) -> tuple[int, int]:
    """(least cost, smallest b reaching it) of a Rice field whose cost at parameter b is ``cost(b)`` (convex in b),
    walking from b = floor(log2(mean)) of the values' mean."""
    b = max(0, int(math.floor(math.log2(mean))) if mean >= 1 else 0)
    best = cost(b)
    while b > 0:
        lower = cost(b - 1)
        if lower > best:
            break
        b, best = b - 1, lower
    while b < 62:
        higher = cost(b + 1)
        if higher >= best:
            break
        b, best = b + 1, higher
    return RICE_B_BITS + best, b


def rice_size(values: torch.Tensor | np.ndarray) -> tuple[int, int]:
    """(bits, b) of a Rice field of the non-negative integers ``values``: ``6 + sum_i (v_i >> b) + m (b + 1)`` at
    the smallest b minimising it (``docs/wire_formats.md``, "Rice field").

    The cost f(b) is convex in b: f(b) - f(b + 1) = sum_i ceil((v_i >> b) / 2) - m, which does not increase with b.
    So a walk from b near log2 of the mean reaches the smallest minimiser in a few evaluations."""
    v = _host(values).reshape(-1)
    m = len(v)
    if m == 0:
        return RICE_B_BITS, 0
    return _rice_walk(lambda b: int((v >> b).sum()) + m * (b + 1), float(v.sum()) / m)


def positions_rice_size(positions: torch.Tensor) -> int:
    """Size [bits] of the Rice field of the gaps before the ascending ``positions`` (``g_1 = p_1``,
    ``g_i = p_i - p_(i-1) - 1``). When they sum to at most k (last + 1 <= 2k) the smallest best parameter is b = 0
    (f(b) - f(0) >= k (b - 2 + 2^(1 - b)) >= 0 for b >= 1, from g >> b >= (g - 2^b + 1) / 2^b) and the field is
    6 + last + 1 bits, from the last position alone. Otherwise the gaps after the first, in one pass (int32 where
    the positions fit); their sum (the cost at b = 0) is last + 1 - k without a pass."""
    k = positions.numel()
    if k == 0:
        return RICE_B_BITS
    first, last = int(positions[0]), int(positions[-1])
    if last + 1 <= 2 * k:
        return RICE_B_BITS + last + 1
    p = _host(positions.to(torch.int32) if last < 2**31 else positions)
    gaps = p[1:] - p[:-1]
    gaps -= 1

    def cost(b: int) -> int:  # at b = 0 the gaps' known sum; else summed in their own type (they add up to <= last)
        return (last + 1 - k if b == 0 else int((gaps >> b).sum(dtype=gaps.dtype)) + (first >> b)) + k * (b + 1)

    return _rice_walk(cost, (last + 1 - k) / k)[0]


def huffman_lengths(counts: np.ndarray) -> np.ndarray:
    """Code length of each symbol of the histogram ``counts`` (0 for an unused symbol, and for the only used one),
    at most :data:`MAX_CODE_BITS`.

    Textbook Huffman: merge the two least counts until one node is left; ties go to a leaf before a merged node,
    leaves by symbol, merged nodes in the order they were made (two sorted queues: the leaves, and the merged
    nodes, whose counts never decrease). Where a code would be longer than 16 bits the
    counts are halved (a used symbol keeps at least 1) and the code built again.

    Depths without a tree: merge q takes both its children from the queues' heads, so the numbers of the merges
    that take the leaves, in queue order (``up_leaf``), and the merged nodes, in order (``up_made``), never
    decrease, and by induction from the root (the last merge) neither does depth increase along either queue. So
    the merged nodes of depth >= d are the first e_d of them (e_0 = n - 1, all), a node has depth >= d + 1
    exactly where the merge that takes it is < e_d, and the leaves of depth >= d + 1 and e_(d + 1) are bisections
    of ``up_leaf`` and ``up_made`` at e_d: a build whose longest code exceeds 16 bits stops after 17 of them."""
    counts = np.asarray(counts, dtype=np.int64)
    lengths = np.zeros(counts.size, dtype=np.int64)
    used = np.flatnonzero(counts)
    n = used.size
    if n <= 1:
        return lengths
    work = counts[used]
    while True:
        order = np.argsort(work, kind="stable")  # the leaves by (count, symbol)
        leaf = work[order].tolist()
        end = sum(leaf) + 1  # above every count: an exhausted queue's head, and a merged node not made yet
        leaf.append(end)
        made, up_leaf, up_made = [end] * n, [], []  # made[q]: merge q's count
        i = j = 0
        for q in range(n - 1):  # the lesser head of the two queues, twice (a leaf on a tie)
            if leaf[i] <= made[j]:
                c, i = leaf[i], i + 1
                up_leaf.append(q)
            else:
                c, j = made[j], j + 1
                up_made.append(q)
            if leaf[i] <= made[j]:
                c, i = c + leaf[i], i + 1
                up_leaf.append(q)
            else:
                c, j = c + made[j], j + 1
                up_made.append(q)
            made[q] = c
        deeper, e = [], n - 1  # deeper[d]: how many leaves have depth >= d + 1
        while len(deeper) <= MAX_CODE_BITS and (f := bisect.bisect_left(up_leaf, e)):
            deeper.append(f)
            e = bisect.bisect_left(up_made, e)
        if len(deeper) <= MAX_CODE_BITS:  # depth d: deeper[d - 1] - deeper[d] leaves, the first the deepest
            deeper.append(0)
            lengths[used[order]] = sum(([d] * (deeper[d - 1] - deeper[d]) for d in range(len(deeper) - 1, 0, -1)), [])
            return lengths
        work = (work >> 1) | 1


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """Canonical codes of the code ``lengths``: used symbols sorted by (length, symbol) take consecutive codes."""
    lengths = np.asarray(lengths, dtype=np.int64)
    codes = np.zeros(lengths.size, dtype=np.int64)
    code, prev = 0, 0
    for s in np.lexsort((np.arange(lengths.size), lengths)):
        if lengths[s] == 0:
            continue
        code <<= int(lengths[s]) - prev
        prev = int(lengths[s])
        codes[s] = code
        code += 1
    return codes


def huffman_size(counts: np.ndarray | torch.Tensor) -> int:
    """Exact size [bits] of a Huffman stream of the symbols whose histogram over the alphabet is ``counts``:
    alphabet size and used count (32 + 32); one used symbol: that symbol (32) and no code bits; two or more: the
    Rice gaps between the used symbols, 4 bits per used symbol, and sum_s c_s l_s code bits."""
    counts = np.asarray(torch.as_tensor(counts).cpu(), dtype=np.int64)
    used = np.flatnonzero(counts)
    if used.size <= 1:
        return 2 * COUNT_BITS + COUNT_BITS * used.size
    lengths = huffman_lengths(counts)
    gaps, _ = rice_size(np.diff(used, prepend=-1) - 1)
    return 2 * COUNT_BITS + gaps + 4 * used.size + int((counts * lengths).sum())


_SQRT3 = math.sqrt(3.0)


def a2_points(a: torch.Tensor, b: torch.Tensor, d: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The A2 lattice points d (a + b / 2, b sqrt(3) / 2) of integer coordinates (a, b) (any dtype), float64:
    ``d (a + 0.5 b)`` and ``(d sqrt(3) / 2) b``, each rounded once after the exact ``0.5 b``."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    return torch.add(a, b, alpha=0.5).mul_(d), b.mul(d * (_SQRT3 / 2.0))


def a2_corner(r0: torch.Tensor, r1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The vertex (c0, c1) in {0, 1}^2 of the rhombus {0, g1, g2, g1 + g2} nearest to the point r0 g1 + r1 g2,
    (r0, r1) in [0, 1]^2 (A2's basis g1 = (1, 0), g2 = (1/2, sqrt(3)/2)); 0.0 / 1.0 tensors of r0's dtype. The
    rhombus is two equilateral triangles split at r0 + r1 = 1, and in an equilateral triangle the nearest vertex is
    the one of largest barycentric coordinate: (1 - r0 - r1, r0, r1) for 0, g1, g2 below the split, (r0 + r1 - 1,
    1 - r1, 1 - r0) for g1 + g2, g1, g2 above. With A = 2 r0 + r1 and B = r0 + 2 r1 that is: c0 = 1 where A > 1
    and (r0 >= r1 or A >= 2), c1 = 1 where B > 1 and (r1 > r0 or B >= 2) (a tie between g1 and g2 goes to g1).

    In comparisons that write 0.0 / 1.0 (no boolean tensors): with F = [r0 >= r1] and p2 the largest float below
    2 (``A >= 2`` is ``A > p2``), c0 = [A > t0] and c1 = [B > t1] for the thresholds t0 = p2 - F (1 - eps) (1
    where F, else p2) and t1 = 1 + F (1 - eps) (p2 where F, else 1), both exact."""
    gap = 1.0 - torch.finfo(r0.dtype).eps  # p2 - 1
    first = torch.ge(r0, r1, out=torch.empty(r0.shape, dtype=r0.dtype, device=r0.device))
    t1 = torch.mul(first, gap).add_(1.0)
    t0 = first.mul_(-gap).add_(1.0 + gap)
    big_a, big_b = torch.add(r1, r0, alpha=2.0), torch.add(r0, r1, alpha=2.0)
    return torch.gt(big_a, t0, out=big_a), torch.gt(big_b, t1, out=big_b)


def a2_nearest(x: torch.Tensor, y: torch.Tensor, d: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Integer coordinates (a, b), as integer-valued float64 tensors, of the A2 point nearest to (x, y) [update
    units], minimum distance ``d``: in the basis' coordinates w = (x / d - w1 / 2, 2 y / (sqrt(3) d)) the point
    lies in the rhombus at floor(w), and the nearest lattice point is that rhombus' vertex :func:`a2_corner` picks
    (Delaunay triangles' vertices cover them: Conway & Sloane ch. 20 for A2's cells)."""
    w1 = y.to(torch.float64).mul(2.0 / (_SQRT3 * d))
    w0 = torch.div(x.to(torch.float64), d).add_(w1, alpha=-0.5)  # x / d - 0.5 w1 (0.5 w1 exact: one rounding)
    f0, f1 = w0.floor(), w1.floor()
    c0, c1 = a2_corner(w0.sub_(f0), w1.sub_(f1))
    return f0.add_(c0), f1.add_(c1)


def a2_cell(u: torch.Tensor, d: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The dither vectors of the uniform pairs ``u`` (rows of two U[0, 1), float64): the point u0 g1 + u1 g2 of
    the fundamental rhombus (g1 = d (1, 0), g2 = d (1/2, sqrt(3)/2)) less its nearest vertex (:func:`a2_corner`),
    so uniform over the Voronoi cell when u is uniform. A codec draws ``u`` for every sub-vector and maps only the
    rows it needs."""
    u0, u1 = u[:, 0].contiguous(), u[:, 1].contiguous()  # comparisons into floats are several times slower strided
    c0, c1 = a2_corner(u0, u1)
    return a2_points(c0.neg_().add_(u0), c1.neg_().add_(u1), d)  # u - c, exact


def flatnonzero(mask: torch.Tensor) -> torch.Tensor:
    """int64 indices of the True elements of the 1-D boolean ``mask``, ascending, on its device. On the CPU through
    numpy (the same indices; torch's nonzero takes 20 ms on a half-full mask of 1.66 M elements, numpy's 1 ms)."""
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return torch.nonzero(mask).reshape(-1)


def _suffix_counts(hist: torch.Tensor) -> np.ndarray:
    """``above[t] = sum(hist[t:])`` of a histogram, as a host array one longer (``above[-1] = 0``)."""
    hist = hist.cpu().numpy()
    above = np.zeros(hist.size + 1, dtype=np.int64)
    np.cumsum(hist[::-1], out=above[-2::-1])  # above[t] for t = size - 1 down to 0
    return above


def _last_reaching(above: np.ndarray, k: int) -> int:
    """The largest t with ``above[t] >= k`` (k >= 1) of the non-increasing counts ``above``."""
    return above.size - 1 - int(np.searchsorted(above[::-1], k))


class Ranking:
    """The top-k sets of the magnitudes of the float32 ``scores`` for many k (NaN first, ties to the lower
    index), for a budget search that probes a few k. A non-negative float32's bit pattern
    orders as its value, so one histogram of the top 15 bits (``above[t]``: how many have ``bits >> 16 >= t``, bins
    of 1/128 octave) says which bin holds the k-th largest; the elements at or above a bin are materialised once
    (:meth:`hold`) and each k ranks within its one boundary bin only, by a second histogram, of the low 16 bits
    (the exact key, no sort: a bin of many equal keys, such as exact zeros, costs one pass)."""

    def __init__(self, scores: torch.Tensor) -> None:
        self.key = scores.reshape(-1).to(torch.float32).view(torch.int32) & 0x7FFFFFFF  # a NaN's is above inf's
        self.above = _suffix_counts(torch.bincount(self.key >> _HI, minlength=1 << (31 - _HI)))
        self.held_bin = None

    def bin_of(self, k: int) -> int:
        """The bin of the k-th largest key (k >= 1): the largest t with above[t] >= k."""
        return _last_reaching(self.above, k)

    def hold(self, t: int) -> None:
        """Materialise the elements of bins >= t (those of every top-k with bin_of(k) >= t): their positions
        ``pos``, or all of them in place (``pos`` None, no gathers) when they are most of the elements. The held
        bins and positions are also kept as host arrays (:func:`_host`: numpy views on the CPU, where comparisons
        and boolean selections are several times faster than torch's)."""
        if self.held_bin is not None and self.held_bin <= t:
            return
        if 2 * int(self.above[t]) > self.key.numel():
            t, self.pos, self.pkey = 0, None, self.key
        else:
            self.pos = flatnonzero(torch.as_tensor(_host(self.key) >= (t << _HI)))
            self.pkey = self.key.index_select(0, self.pos)
        self.pbin = self.pkey >> _HI
        self._bin, self._pos = _host(self.pbin), None if self.pos is None else _host(self.pos)
        self.held_bin, self.bins, self._last = t, {}, None

    def top(self, k: int) -> torch.Tensor:
        """Boolean mask over all the scores of the top ``k`` (clamped to [0, n])."""
        n = self.key.numel()
        k = max(0, min(int(k), n))
        if k in (0, n):
            return torch.full((n,), k > 0, dtype=torch.bool, device=self.key.device)
        mask = self._mask(k)
        if self.pos is None:
            return torch.as_tensor(mask)
        kept = torch.as_tensor(self._pos[mask])
        return torch.zeros(n, dtype=torch.bool, device=self.key.device).index_fill_(0, kept, True)

    def positions(self, k: int) -> torch.Tensor:
        """Ascending positions of the top k (1 <= k < n)."""
        mask = self._mask(k)  # holds the bin first
        return flatnonzero(torch.as_tensor(mask)) if self.pos is None else torch.as_tensor(self._pos[mask])

    def select(self, k: int) -> torch.Tensor:
        """Which of the held elements (indices into ``pos``, ascending) are the top k (1 <= k < n)."""
        return flatnonzero(self.mask(k))

    def mask(self, k: int) -> torch.Tensor:
        """Boolean mask over the held elements of the top k (1 <= k < n)."""
        return torch.as_tensor(self._mask(k))

    def _mask(self, k: int):
        """:meth:`mask` as a host array (:func:`_host`); the last k's is kept, since a search asks for a probe's
        positions and mask in turn (callers read it, never write it)."""
        t = self.bin_of(k)
        self.hold(t)
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        if t not in self.bins:  # the boundary bin's elements (indices into pos), their keys' low 16 bits (which order
            inside = flatnonzero(torch.as_tensor(self._bin == t))  # them as the keys do) and a histogram of those
            low = self.pkey.index_select(0, inside) & ((1 << _HI) - 1)
            self.bins[t] = _host(inside), _host(low), _suffix_counts(torch.bincount(low, minlength=1 << _HI))
        inside, low, above = self.bins[t]
        r = k - int(self.above[t + 1])  # the bin's top r: the low bits above the r-th largest's, s, and the first of s
        s = _last_reaching(above, r)
        mask = self._bin > t
        mask[inside[low > s]] = True
        mask[inside[low == s][: r - int(above[s + 1])]] = True
        self._last = (k, mask)
        return mask


def uniform_gaps_bits(k: int, n: int) -> float:
    """About the size [bits] of the Rice field of the gaps of k positions among n if they were uniform (a size
    model for :func:`largest_fitting`): gaps of a geometric law of mean (n - k) / k take
    k (b + 1 + q / (1 - q)) bits, q = (1 - k / n)^(2^b), at the best b."""
    if k <= 0:
        return 0.0
    p, best = min(k / n, 1.0), math.inf
    for b in range(40):
        q = (1.0 - p) ** (2.0**b)
        best = min(best, b + 1 + (q / (1.0 - q) if q < 1 else math.inf))
        if q == 0.0 or 2.0**b * p > 4:
            break
    return RICE_B_BITS + k * best


def largest_fitting(size, hi: int, budget: float, model, tol: float) -> int | None:
    """The largest k in [0, hi] with ``size(k) <= budget`` for a non-decreasing ``size`` [bits], to within
    ``step = max(1, floor(tol * k))``: the k returned fits, and k + step does not (or k = hi); None when ``size(0)``
    does not fit. ``model(k)``: an estimate of ``size(k)``, non-decreasing, that only needs the right shape.

    Few probes: hi first if the model says it fits; after one probe, the k where the model scaled by that probe's
    size over its estimate (both less size(0)) meets the budget; after two, the secant of the last two (the local
    slope); once probes on both sides are near, regula falsi with the Illinois rule (the chord between the nearest
    probes below and above; the side kept twice counts half). Each aimed half a step low, so that a probe at
    k + step settles the answer."""
    s0 = size(0)
    if s0 > budget:
        return None
    lo, r_lo, up, r_up = 0, s0 - budget, hi + 1, math.inf  # size(lo) fits; size(up) does not (hi + 1: not known)
    scale, last, probes = 1.0, 0, []
    if model(hi) <= budget:  # the estimate says everything fits: that probe first
        s = size(hi)
        if s <= budget:
            return hi
        up, r_up, scale, probes = hi, s - budget, (s - s0) / max(model(hi) - s0, 1e-9), [(hi, s)]
    while True:
        step = max(1, int(tol * lo))
        if lo == hi or (up <= hi and up - lo <= step):
            return lo
        (k1, s1), (k2, s2) = ([(0, s0)] + probes)[-2:] if probes else ((0, s0), (0, s0))
        if math.isfinite(r_up) and lo > 0 and up - lo < max(lo, 1) // 8:
            target = lo + (up - lo) * -r_lo / (r_up - r_lo)
        elif len(probes) >= 2 and s2 != s1:
            target = k2 + (budget - s2) * (k2 - k1) / (s2 - s1)
        else:  # the least k whose scaled estimate exceeds the budget, less one
            a, b = lo, min(up, hi + 1)
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if s0 + scale * (model(mid) - s0) <= budget else (a, mid)
            target = a
        k = min(max(int(target) - max(1, int(tol * target)) // 2, lo + step), up - 1, hi)
        s = size(k)
        scale = (s - s0) / max(model(k) - s0, 1e-9)
        probes.append((k, s))
        side = 1 if s <= budget else -1
        if side > 0:
            lo, r_lo = k, s - budget
            r_up = r_up / 2 if last > 0 else r_up
        else:
            up, r_up = k, s - budget
            r_lo = r_lo / 2 if last < 0 else r_lo
        last = side
