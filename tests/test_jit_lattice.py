"""UVeQFed's compiled kernels give the numpy code they replaced, to the bit.

References kept here: the numpy block loop of ``LatticeSizer.__init__`` (E1-E3 with :func:`lattice.dither_xy` and
:func:`lattice.nearest_points_xy`), the numpy decoder loop of ``decode_lattice`` (D2-D3), ``np.unique``,
``np.argsort(kind="stable")`` and ``np.bincount``. Inputs: random ones and edge ones (ties between the two cosets,
cell borders, zeros of both signs, NaN, infinities, huge values, subnormal and out-of-range ``d``, empty and odd
lengths, chunk and block boundaries).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from edgefl.compression import lattice, uveqfed

SQRT3_2 = math.sqrt(3.0) / 2.0
BELOW_ONE = np.nextafter(1.0, 0.0)


@numba.njit
def _nearest_all(x, d):
    m = x.shape[0]
    a, b = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    px, py = np.empty(m), np.empty(m)
    for j in range(m):
        a[j], b[j], px[j], py[j] = lattice.nearest_point(x[j, 0], x[j, 1], d)
    return a, b, px, py


@numba.njit
def _dither_all(u, d, fast):
    out = np.empty_like(u)
    for j in range(u.shape[0]):
        if fast:
            out[j, 0], out[j, 1] = lattice.dither_fast(u[j, 0], u[j, 1], d)
        else:
            out[j, 0], out[j, 1] = lattice.dither_near(u[j, 0], u[j, 1], d)
    return out


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal arrays to the bit (NaN payloads and signs of zero included)."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8))


def _points_inputs(rng: np.random.Generator, d: float) -> np.ndarray:
    x = rng.standard_normal((6000, 2)) * 40 * d
    x[:1500] = np.round(x[:1500] / d * 2) * d / 2  # half-lattice points: ties between the cosets
    x[1500:1600] = np.round(x[1500:1600] / d) * d  # lattice points of the rectangular coset
    x[1600:1700] = 0.0
    x[1700:1750] = -0.0
    specials = [np.nan, -np.nan, np.inf, -np.inf, 1e300, -1e300, 5e-324, 2.0**60 * d, 2.0**53 * d]
    x[1750 : 1750 + len(specials), 0] = specials
    x[1800 : 1800 + len(specials), 1] = specials
    x[1850 : 1850 + len(specials)] = np.array(specials)[:, None]
    return x


D_VALUES = (1e-30, 1.17549435e-38, 1e-45, 3.2e-5, 3e-3, 0.37, 1.0, 7e5, 3.4e38)


@pytest.mark.parametrize("d", D_VALUES)
def test_nearest_point_is_the_numpy_rule(d: float) -> None:
    x = _points_inputs(np.random.default_rng(1), d)
    with np.errstate(all="ignore"):
        want = lattice.nearest_points_xy(np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(x[:, 1]), d)
    got = _nearest_all(x, d)
    for g, w in zip(got, want):
        assert _same(g, w)


@pytest.mark.parametrize("d", (*D_VALUES, 1e-310, 1e301, math.inf, math.nan, -0.5))
def test_dither_kernels_are_the_numpy_dither(d: float) -> None:
    rng = np.random.default_rng(2)
    u = rng.random((6000, 2))
    corners = np.array([0.0, 0.25, 0.5, 0.75, 1.0 / 3.0, 2.0 / 3.0, BELOW_ONE])
    u[: corners.size**2] = np.stack(np.meshgrid(corners, corners), axis=-1).reshape(-1, 2)  # cell borders
    with np.errstate(all="ignore"):
        want = lattice.a2_dither(u, d)
        near = _dither_all(u, d, False)
        assert _same(near, want)
        if lattice.fast_dither(d):
            assert _same(_dither_all(u, d, True), want)
            z0, z1 = lattice.dither_xy(u[:, 0], u[:, 1], d)
            assert _same(_dither_all(u, d, True), np.stack([z0, z1], axis=-1))


def _old_quantise(flat: np.ndarray, u: np.ndarray, d: float):
    """The numpy block loop of LatticeSizer.__init__ before its kernel: values, norm2, key, za, zb, finite, tops."""
    n = flat.size
    m = math.ceil(n / 2)
    squares = np.square(flat, dtype=np.float64)
    if n % 2:
        squares = np.append(squares, 0.0)
    pairs = (flat if n % 2 == 0 else np.append(flat, np.float32(0))).reshape(m, 2)
    values = np.empty((m, 2), dtype=np.float32)
    norm2, key = np.empty(m), np.empty(m, dtype=np.uint16)
    za, zb = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    near = (2.0**40 * d) ** 2
    finite, top_za, top_zb = True, 0, 0
    for s in range(0, m, lattice.ROWS):
        e = min(s + lattice.ROWS, m)
        z0, z1 = lattice.dither_xy(u[s:e, 0], u[s:e, 1], d)
        x0, x1 = pairs[s:e, 0].astype(np.float64), pairs[s:e, 1].astype(np.float64)
        np.add(squares[2 * s : 2 * e : 2], squares[2 * s + 1 : 2 * e : 2], out=norm2[s:e])
        key[s:e] = uveqfed._bucket_keys(norm2[s:e])
        x0 += z0
        x1 += z1
        a, b, px, py = lattice.nearest_points_xy(x0, x1, d)
        block_norm2 = float(norm2[s:e].max())
        finite = finite and math.isfinite(block_norm2)
        if block_norm2 < near:
            px += 0.0
            py += 0.0
        else:
            px, py = d * (a + 0.5 * b), d * SQRT3_2 * b
        values[s:e, 0] = px - z0
        values[s:e, 1] = py - z1
        za[s:e], zb[s:e] = uveqfed._zigzag(a), uveqfed._zigzag(b)
        top_za, top_zb = max(top_za, int(za[s:e].max())), max(top_zb, int(zb[s:e].max()))
    return values, norm2, key, za, zb, finite, top_za, top_zb


def _quantise(flat: np.ndarray, u: np.ndarray, d: float):
    m = math.ceil(flat.size / 2)
    values = np.empty((m, 2), dtype=np.float32)
    norm2, key = np.empty(m), np.empty(m, dtype=np.uint16)
    za, zb = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    finite, top_za, top_zb = uveqfed._quantise(flat, u, d, lattice.ROWS, values, norm2, key, za, zb)
    return values, norm2, key, za, zb, bool(finite), int(top_za), int(top_zb)


def _flats() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    heavy = (rng.standard_normal(3 * lattice.ROWS + 2 * 517 + 1) * rng.random(3 * lattice.ROWS + 2 * 517 + 1) ** 3)
    sparse = rng.standard_normal(2 * lattice.ROWS + 2 * uveqfed._CHUNK) * (rng.random(2 * lattice.ROWS + 1024) < 0.3)
    huge = rng.standard_normal(5001) * 1e-3
    huge[[3, 77, 4000]] = [1e30, -2e35, 5e2]  # a block with norms above (2^40 d)^2: points from (a, b)
    ties = rng.choice([0.0, -0.0, 0.25, -0.25], 4099)
    nan = rng.standard_normal(3 * lattice.ROWS)
    nan[[5, 2 * lattice.ROWS + 7]] = np.nan
    inf = rng.standard_normal(2 * lattice.ROWS + 3)
    inf[lattice.ROWS + 9] = -np.inf
    wide = np.exp(rng.uniform(-7, 7, 2 * lattice.ROWS + 9)) * rng.choice([-1.0, 1.0], 2 * lattice.ROWS + 9)
    flats = {"heavy": heavy, "wide": wide, "sparse": sparse, "huge": huge, "ties": ties, "nan": nan, "inf": inf}
    flats |= {"empty": np.zeros(0), "one": np.array([0.7]), "two": np.array([-1.5, 2.0]), "zeros": np.zeros(27)}
    return {name: f.astype(np.float32) for name, f in flats.items()}


@pytest.mark.parametrize("name", list(_flats()))
def test_quantise_kernel_is_the_numpy_block_loop(name: str) -> None:
    """At the update's d and others: points of 10^12 to 10^15 lattice steps (d = 1e-12 on "wide": blocks whose
    points come from (a, b)), everything rounding to 0 (3.0), overflowing the integers (1e-38, 1e-45)."""
    flat = _flats()[name]
    m = math.ceil(flat.size / 2)
    rms = math.sqrt(float(np.mean(np.square(flat, dtype=np.float64)))) if flat.size else 0.0
    ds = {float(np.float32(rms)) or 1e-38, 1e-38, 3.0, 1e-45, 1e-12} if math.isfinite(rms) else {0.01}
    for d in sorted(ds):
        u = np.random.default_rng(7).random((m, 2))
        edges = np.array([[0.0, 0.0], [BELOW_ONE, BELOW_ONE], [0.5, 0.5], [0.25, 0.5], [0.0, BELOW_ONE]])
        u[: min(m, 5)] = edges[: min(m, 5)]
        with np.errstate(all="ignore"):
            want = _old_quantise(flat, u[:m], d)
        got = _quantise(flat, u[:m], d)
        for g, w in zip(got[:5], want[:5]):
            assert _same(g, w), (name, d)
        assert got[5:] == want[5:], (name, d)


def test_point_ids_are_numpy_unique() -> None:
    rng = np.random.default_rng(8)
    cases = [(rng.integers(0, 40, 20_000), rng.integers(0, 9, 20_000)), (np.zeros(1, np.int64), np.zeros(1, np.int64))]
    cases += [(np.array([3, 0, 3, 1]), np.array([2, 2, 2, 0])), (rng.integers(0, 3, 50), rng.integers(0, 200, 50))]
    for za, zb in cases:
        za, zb = za.astype(np.int64), zb.astype(np.int64)
        base = int(zb.max()) + 1
        distinct, index = np.unique(za * base + zb, return_inverse=True)
        points, got = uveqfed._point_ids(za, zb, base, int(za.max()) * base + base)
        assert _same(points, distinct.astype(np.int64)) and _same(got, index.reshape(-1).astype(np.int64))
        small = uveqfed._points(za, zb, int(za.max()), int(zb.max()))
        assert _same(small[0], points) and _same(small[1], got)


def test_stable_order_is_the_stable_argsort() -> None:
    rng = np.random.default_rng(9)
    for key in (rng.integers(0, 1 << 16, 30_000), rng.integers(0, 4, 5000), np.zeros(0, np.int64), np.array([7])):
        key = key.astype(np.uint16)
        sym = rng.integers(0, 100, key.size)
        order, sym_sorted, counts = uveqfed._stable_order(key, sym, 1 << 16)
        want = np.argsort(key, kind="stable")
        assert _same(order, want.astype(np.int64)) and _same(sym_sorted, sym[want])
        assert _same(counts, np.bincount(key, minlength=1 << 16).astype(np.int64))


def _old_rebuild(m: int, kept: np.ndarray, index: np.ndarray, first, second, u: np.ndarray, d: float) -> np.ndarray:
    """The numpy decoder loop of decode_lattice before its kernel (D2-D3, dense and sparse blocks)."""
    out = np.zeros((m, 2), dtype=np.float32)
    mask = np.zeros(m, dtype=bool)
    mask[kept] = True
    k = kept.size
    dense = 2 * k >= m
    if dense:
        row_index = np.zeros(m, dtype=index.dtype)
        row_index[kept] = index
    lo = 0
    for s in range(0, m, lattice.ROWS):
        e = min(s + lattice.ROWS, m)
        block = u[s:e]
        hi = int(np.searchsorted(kept, e))
        if hi == lo:
            continue
        if dense:
            z0, z1 = lattice.dither_xy(block[:, 0], block[:, 1], d)
            at = row_index[s:e]
            out[s:e, 0] = first[at] - z0
            out[s:e, 1] = second[at] - z1
        else:
            rows = kept[lo:hi]
            block = block[rows - s]
            z0, z1 = lattice.dither_xy(block[:, 0], block[:, 1], d)
            at = index[lo:hi]
            out[rows, 0] = first[at] - z0
            out[rows, 1] = second[at] - z1
        lo = hi
    if dense and k < m:
        out[~mask] = 0
    return out


@pytest.mark.parametrize("d", (3.2e-5, 1.0, 1e-45, math.inf, 0.0, -0.0, -2.0, math.nan))
def test_rebuild_kernel_is_the_numpy_decoder_loop(d: float) -> None:
    """The kernel (and, for a malformed d of 0, which the kernels cannot divide by, decode_lattice's numpy path)."""
    d = float(np.float32(d))  # as a payload carries it
    rng = np.random.default_rng(10)  # its first draw is the dither's, as the decoder's generator of seed 10
    m = 3 * lattice.ROWS + 5
    u = rng.random((m, 2))
    a, b = np.arange(-25, 25), rng.integers(-30, 30, 50)  # distinct points
    with np.errstate(all="ignore"):
        first, second = d * (a + 0.5 * b), d * SQRT3_2 * b
        for fraction in (0.0, 1e-4, 0.3, 0.5, 0.9, 1.0):
            kept = np.flatnonzero(rng.random(m) < fraction) if fraction < 1 else np.arange(m)
            if fraction == 1e-4:
                kept = np.array([0, lattice.ROWS - 1, lattice.ROWS, m - 1])
            index = rng.integers(0, 50, kept.size)
            want = _old_rebuild(m, kept, index, first, second, u, d)
            out = np.zeros((m, 2), dtype=np.float32)
            if d != 0:
                uveqfed._rebuild(out, kept, index, first, second, u, d)
                assert _same(out, want), (d, fraction)
            if fraction in (0.3, 0.9):
                got = uveqfed.decode_lattice(_payload(m, kept, index, a, b, d), ["w"], np.random.default_rng(10))
                assert _same(got[0]["w"].numpy(), want.reshape(-1)), (d, fraction)


def _payload(m: int, kept: np.ndarray, index: np.ndarray, a: np.ndarray, b: np.ndarray, d: float) -> bytes:
    """A UVeQFed payload of one tensor of 2m elements keeping ``kept`` with these symbols (a, b by index)."""
    from edgefl.compression import coding
    from edgefl.compression.container import write_header

    w = coding.BitWriter()
    write_header(w, 0xC7, 1, [(2 * m,)], kept.size, None)
    if kept.size:
        za, zb = uveqfed._zigzag(a), uveqfed._zigzag(b)
        base = int(zb.max()) + 1
        symbols = za * base + zb
        order = np.argsort(symbols)  # the distinct symbols ascending (all distinct here)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        coding.rice_encode(w, np.diff(kept, prepend=-1) - 1)
        w.float32(d)
        w.uint(base, 32)
        w.uint(symbols.size, 32)
        coding.rice_encode(w, np.diff(symbols[order], prepend=-1) - 1)
        coding.huffman_encode(w, rank[index], symbols.size)
    return w.to_bytes()


def test_masks_and_kept_symbols_are_the_numpy_expressions() -> None:
    """_masks: ``mask[kept] = True`` and ``np.repeat(mask, 2)[:n]``; _kept_symbols: ``np.bincount(sym[kept])`` and
    each kept point's index among the used ones (``index_of[sym[kept]]``), for empty, one, all and odd n."""
    rng = np.random.default_rng(11)
    for m, n in ((0, 0), (1, 1), (1, 2), (7, 13), (5000, 10_000), (5000, 9999)):
        sym = rng.integers(0, 40, m)
        for kept in (np.zeros(0, np.int64), np.arange(m), np.flatnonzero(rng.random(m) < 0.4), np.array([m - 1])):
            if kept.size and (m == 0 or kept[-1] >= m):
                continue
            kept = kept.astype(np.int64)
            mask, sent = uveqfed._masks(kept, m, n)
            want = np.zeros(m, dtype=bool)
            want[kept] = True
            assert _same(mask, want) and _same(sent, np.repeat(want, 2)[:n])
            counts, index = uveqfed._kept_symbols(kept, sym.astype(np.int64), 40)
            want_counts = np.bincount(sym[kept], minlength=40)
            index_of = np.zeros(40, dtype=np.int64)
            index_of[np.flatnonzero(want_counts)] = np.arange(np.count_nonzero(want_counts))
            assert _same(counts, want_counts.astype(np.int64)) and _same(index, index_of[sym[kept]].astype(np.int64))
