"""UVeQFed's sizes without payloads and its fast coders give what the straightforward codec gives.

The reference written out here is the codec as first built: dither ``p - a2_points(*a2_nearest(p, d), d)`` from one
draw of the shared generator, E3 by :func:`lattice.a2_nearest` over all sub-vectors, the top k by a stable comparison
sort of the norms, symbols joined with the base of the kept points, and the library's plain Rice and Huffman
writers. Every expected payload, size and decoded update comes from it (or from the sizer's own encoder); none is
hard-coded. Inputs: random updates and the adversarial ones (ties of norms, exact zeros, all zeros, one element,
odd lengths, a few huge values), sizes of every k on small updates and budgets at the exact byte boundaries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import coding, lattice
from edgefl.compression.container import header_bits as _header_bits, write_header as _write_header
from edgefl.compression.search import SizeFunction, largest_fitting
from edgefl.compression.uveqfed import LatticeSizer, decode_lattice

SQRT3 = math.sqrt(3.0)


def _reference(
    update: dict[str, torch.Tensor], seed: int, step: float, k: int
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The payload keeping the top ``k`` sub-vectors, the flat update it decodes to and the mask of its elements."""
    flat = np.concatenate([v.reshape(-1).numpy() for v in update.values()]).astype(np.float32)
    n = flat.size
    m = math.ceil(n / 2)
    h = np.concatenate([flat.astype(np.float64), np.zeros(2 * m - n)]).reshape(m, 2)
    rms = math.sqrt(float(np.mean(flat.astype(np.float64) ** 2))) if n else 0.0
    d = float(np.float32(step * rms))
    d = d if d > 0 else float(np.finfo(np.float32).tiny)
    u = np.random.default_rng(seed).random((m, 2))
    p = np.stack([d * (u[:, 0] + 0.5 * u[:, 1]), d * (SQRT3 / 2.0) * u[:, 1]], axis=-1)
    dither = p - lattice.a2_points(*lattice.a2_nearest(p, d), d)
    a, b = lattice.a2_nearest(h + dither, d)
    kept = np.sort(np.argsort(-(h**2).sum(axis=1), kind="stable")[:k])
    w = coding.BitWriter()
    _write_header(w, 0xC7, 1, [tuple(v.shape) for v in update.values()], k, None)
    out = np.zeros((m, 2), dtype=np.float32)
    sent = np.zeros((m, 2), dtype=bool)
    sent[kept] = True
    if k:
        za = np.where(a[kept] >= 0, 2 * a[kept], -2 * a[kept] - 1)
        zb = np.where(b[kept] >= 0, 2 * b[kept], -2 * b[kept] - 1)
        base = int(zb.max()) + 1
        distinct, index = np.unique(za * base + zb, return_inverse=True)
        coding.rice_encode(w, np.diff(kept, prepend=-1) - 1)
        w.float32(d)
        w.uint(base, 32)
        w.uint(distinct.size, 32)
        coding.rice_encode(w, np.diff(distinct, prepend=-1) - 1)
        coding.huffman_encode(w, index.reshape(-1), distinct.size)
        out[kept] = (lattice.a2_points(a[kept], b[kept], d) - dither[kept]).astype(np.float32)
    return w.to_bytes(), out.reshape(-1)[:n], sent.reshape(-1)[:n]


def _flat(tensors: dict[str, torch.Tensor]) -> np.ndarray:
    return np.concatenate([v.reshape(-1).numpy() for v in tensors.values()])


def _updates() -> dict[str, dict[str, torch.Tensor]]:
    """Named updates, random and adversarial."""
    g = torch.Generator().manual_seed(3)
    heavy = {"w": torch.randn(40, 25, generator=g) * torch.rand(40, 25, generator=g) ** 3}
    heavy["b"] = torch.randn(7, generator=g)
    ties = {"w": torch.randn(301, generator=g)}
    ties["w"][:120] = 0.0  # exact zeros: the largest tie
    ties["w"][120:160] = 0.25  # equal norms of both signs
    ties["w"][160:200] = torch.tensor([0.25, -0.25]).repeat(20)
    huge = {"w": torch.randn(500, generator=g) * 1e-3}
    huge["w"][[3, 77, 301]] = torch.tensor([1e3, -2e3, 5e2])
    return {
        "heavy": heavy, "ties": ties, "huge": huge, "zeros": {"w": torch.zeros(9, 3)},
        "one": {"w": torch.tensor([0.7])},
        "odd": {"w": torch.randn(3, 3, generator=g), "v": torch.randn(2, generator=g)},
        "constant": {"w": torch.full((64,), -0.3)},
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_updates()))
def test_every_size_is_the_reference_payload_and_the_encoder_gives_it(name: str) -> None:
    """For every k (every ninth above 160 sub-vectors): the size without a payload is the reference payload's
    length, the sizer's payload is the reference's bytes, and it decodes (with the shared seed) to the reference's
    update and to what the encoder says the server applies."""
    update = _updates()[name]
    sizer = LatticeSizer(update, np.random.default_rng(5), step=0.7)
    every = range(sizer.m + 1)
    for k in every if sizer.m <= 160 else sorted({*every[::9], 1, 2, sizer.m - 1, sizer.m}):
        payload, values, mask = _reference(update, 5, 0.7, k)
        assert sizer.bits(k) == 8 * len(payload), k
        coded = sizer.encode(k)
        assert coded.payload == payload and coded.bits == 8 * len(payload), k
        assert np.array_equal(_flat(coded.update).view(np.uint32), values.view(np.uint32)), k
        decoded, sent = decode_lattice(coded.payload, list(update), np.random.default_rng(5))
        assert np.array_equal(_flat(decoded).view(np.uint32), values.view(np.uint32)), k
        assert np.array_equal(_flat(sent), mask) and np.array_equal(_flat(coded.sent), mask), k


def test_sizes_of_a_large_update_in_search_order_are_the_encoders_and_the_references() -> None:
    """On 60,000 sub-vectors (norm buckets sorted on their second cut, block lengths updated from the last exact
    size), sizes asked in a bisection's order and then in random order equal the encoder's bytes, and the payloads
    of some of those k are the reference's (the ranking's top k is the stable sort's)."""
    g = torch.Generator().manual_seed(8)
    update = {"w": torch.randn(120_000, generator=g) * torch.rand(120_000, generator=g) ** 2}
    update["w"][:15_000] = 0.0
    sizer = LatticeSizer(update, np.random.default_rng(2), step=1.0)
    ks = [sizer.m, sizer.m // 2, 3 * sizer.m // 4, 5 * sizer.m // 8, 11 * sizer.m // 16]
    ks += [ks[-1] + j for j in (-900, 1, 2, 3, 700, 4000, 4100)]
    ks += [sizer.m - 9000, sizer.m - 9001, sizer.m - 8000]  # cuts among the zero norms (one tie)
    ks += np.random.default_rng(1).integers(0, sizer.m + 1, 6).tolist()
    for k in ks:
        assert sizer.bits(k) == sizer.encode(k).bits, k
    for k in ks[4:9] + ks[-4:]:
        assert sizer.encode(k).payload == _reference(update, 2, 1.0, k)[0], k


def test_fits_answers_size_at_most_budget_at_the_byte_boundaries() -> None:
    """``bits.fits(k, budget)`` is ``bits(k) <= budget`` for budgets one bit below, at, and above the size, asked
    of one sizer in an interleaved order (its bounds and memos see every history); sizes from the encoder."""
    g = torch.Generator().manual_seed(4)
    update = {"w": torch.randn(20_000, generator=g) * torch.rand(20_000, generator=g) ** 2}
    sizer = LatticeSizer(update, np.random.default_rng(6), step=0.9)
    rng = np.random.default_rng(0)
    for k in [0, 1, sizer.m, *rng.integers(1, sizer.m, 25).tolist()]:
        size = sizer.encode(k).bits
        for budget in (size - 1, size - 0.5, size, size + 7, size + 8, size - 8, 0.3 * size, 3.0 * size):
            assert sizer.bits.fits(k, budget) == (size <= budget), (k, budget)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_search_with_fits_takes_the_plain_bisections_answer(seed: int) -> None:
    """``largest_fitting`` over the SizeFunction gives what it gives over the plain exact sizes, for budgets at
    exact sizes (the boundary), one bit below them, and between."""
    g = torch.Generator().manual_seed(10 + seed)
    update = {"w": torch.randn(30_000, generator=g) * torch.rand(30_000, generator=g), "b": torch.zeros(31)}
    exact = LatticeSizer(update, np.random.default_rng(seed), step=1.0)
    plain = lambda k: exact.bits(k)  # noqa: E731  (not a SizeFunction: plain bisection)
    rng = np.random.default_rng(seed)
    budgets = []
    for k in rng.integers(1, exact.m, 4).tolist():
        size = exact.bits(k)
        budgets += [size, size - 1, size + 3]
    budgets += [100.0, float(exact.bits(exact.m)), 1e9]
    for budget in budgets:
        sizer = LatticeSizer(update, np.random.default_rng(seed), step=1.0)
        assert isinstance(sizer.bits, SizeFunction)
        assert largest_fitting(sizer.bits, 0, sizer.m, budget) == largest_fitting(plain, 0, exact.m, budget), budget


def test_a_diverged_update_is_sized_and_encoded_as_the_reference() -> None:
    """NaN and infinite elements: the ranking falls back to the plain stable sort (NaN last), the symbols are
    joined per k, and sizes and payloads are the reference's (or, as there, no payload)."""
    for bad in (float("nan"), float("inf")):
        update = {"w": torch.randn(40_000, generator=torch.Generator().manual_seed(1))}  # 3 blocks, bad in the first
        update["w"][[5, 9]] = bad
        update["w"][17] = float("-inf")
        with np.errstate(invalid="ignore", over="ignore"):
            sizer = LatticeSizer(update, np.random.default_rng(0), step=1.0)
            for k in (0, 1, 50, 19_999, 20_000):
                try:
                    payload = _reference(update, 0, 1.0, k)[0]
                except coding.CodingError:  # the garbage points' joined symbols can go negative: no payload
                    with pytest.raises(coding.CodingError):
                        sizer.encode(k)
                    continue
                assert sizer.bits(k) == 8 * len(payload) and sizer.bits.fits(k, 8 * len(payload)), k
                assert sizer.encode(k).payload == payload, k


def test_fast_dither_and_chosen_points_equal_the_plain_formulas() -> None:
    """The dither from the parallelogram's two candidates is ``p - a2_points(*a2_nearest(p, d), d)`` to the bit,
    on uniforms at the cell's corners and edges (0, 1/2, the largest double below 1) and random ones; the point the
    nearest-point rule chose is ``a2_points(a, b, d)`` to the bit once -0.0 is made 0.0, on ties between cosets;
    the shared generator's draws in blocks are one draw's."""
    rng = np.random.default_rng(3)
    below_one = np.nextafter(1.0, 0.0)
    u = rng.random((20_000, 2))
    corners = np.array([0.0, 0.25, 0.5, 0.75, below_one])
    u[: corners.size**2] = np.stack(np.meshgrid(corners, corners), axis=-1).reshape(-1, 2)
    for d in (1e-30, 1.17549435e-38, 3e-3, 0.37, 1.0, 7e5):
        p = np.stack([d * (u[:, 0] + 0.5 * u[:, 1]), d * (SQRT3 / 2.0) * u[:, 1]], axis=-1)
        plain = p - lattice.a2_points(*lattice.a2_nearest(p, d), d)
        assert np.array_equal(lattice.a2_dither(u, d).view(np.uint64), plain.view(np.uint64)), d
        x = rng.standard_normal((20_000, 2)) * 40 * d
        x[:4000] = np.round(x[:4000] / d * 2) * d / 2  # half-lattice points: ties between the cosets
        x[4000:4100] = 0.0
        a, b, px, py = lattice.nearest_points_xy(np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(x[:, 1]), d)
        ra, rb = lattice.a2_nearest(x, d)
        points = lattice.a2_points(ra, rb, d)
        assert np.array_equal(a, ra) and np.array_equal(b, rb)
        assert np.array_equal((px + 0.0).view(np.uint64), points[:, 0].view(np.uint64))
        assert np.array_equal((py + 0.0).view(np.uint64), points[:, 1].view(np.uint64))
    whole = np.random.default_rng(9).random((50_000, 2))
    gen = np.random.default_rng(9)
    blocks = np.concatenate([gen.random((min(lattice.ROWS, 50_000 - s), 2)) for s in range(0, 50_000, lattice.ROWS)])
    assert np.array_equal(whole, blocks)


def test_fast_coders_write_and_read_the_plain_coders_bits() -> None:
    """Packed short codes, the counted Huffman writer, the faster Huffman and Rice readers and the Huffman memo
    give the plain functions' outputs, on random streams and on adversarial ones (one symbol, two, empty codes,
    the deepest codes, Rice fields before long payloads, histograms with many ties)."""
    rng = np.random.default_rng(12)
    for trial in range(60):
        n = int(rng.integers(0, 3000))
        lengths = rng.integers(0, 17, n) if trial % 3 else rng.integers(1, 3, n)
        codes = rng.integers(0, 1 << 16, n) & ((1 << lengths) - 1)
        assert np.array_equal(coding.pack_short_codes(codes, lengths), coding.pack_codes(codes, lengths))
    fib = [1, 1]
    while len(fib) < 17:
        fib.append(fib[-1] + fib[-2])
    streams = [rng.permutation(np.repeat(np.arange(17), fib)), np.zeros(700, dtype=np.int64), np.array([1, 0] * 300)]
    streams += [np.minimum(rng.geometric(rng.uniform(0.01, 0.9), int(rng.integers(1, 5000))) - 1, 59)
                for _ in range(20)]
    for symbols in streams:
        counts = np.bincount(symbols, minlength=60)
        plain, counted = coding.BitWriter(), coding.BitWriter()
        coding.huffman_encode(plain, symbols, 60)
        coding.huffman_encode_counted(counted, symbols, counts)
        assert plain.to_bytes() == counted.to_bytes()
        tail = rng.integers(0, 2, 3000).astype(np.uint8)
        plain.bits(tail)
        one, two = coding.BitReader(plain.to_bytes()), coding.BitReader(plain.to_bytes())
        assert np.array_equal(coding.huffman_decode(one, symbols.size), coding.huffman_decode_fast(two, symbols.size))
        assert one.pos == two.pos
    for trial in range(60):
        n = int(rng.integers(0, 300))
        values = rng.geometric(rng.uniform(0.001, 0.9), n) - 1
        if n and trial % 4 == 0:
            values[-1] = 1 << 30
        w = coding.BitWriter()
        coding.rice_encode(w, values)
        w.bits(rng.integers(0, 2, 5000).astype(np.uint8))
        one, two = coding.BitReader(w.to_bytes()), coding.BitReader(w.to_bytes())
        assert np.array_equal(coding.rice_decode(one, n), coding.rice_decode_fast(two, n)) and one.pos == two.pos
        positions = np.cumsum(values + 1) - 1
        three = coding.BitReader(w.to_bytes())
        span = int(positions[-1]) + 1 if n else 1
        assert np.array_equal(coding.rice_decode_positions(three, n, span), positions) and three.pos == one.pos
    memo = coding.HuffmanMemo()
    base = np.bincount(rng.geometric(0.01, 200_000), minlength=400)[:400] + 1
    for trial in range(120):
        counts = base + rng.integers(0, 3, base.size) * (rng.random(base.size) < 0.02) * (trial % 9)
        if trial % 10 == 0:
            counts = rng.integers(0, int(rng.choice([2, 4, 9])), size=int(rng.integers(1, 120)))
        assert np.array_equal(memo.lengths(counts), coding.huffman_lengths(counts)), trial


def test_all_zero_and_single_element_updates_at_the_budget_boundary() -> None:
    """An all-zero update and a one-element update: the search at a budget equal to a size keeps that k, one bit
    less keeps fewer; the sizes are the reference payloads'."""
    for update in ({"w": torch.zeros(10, 4)}, {"w": torch.tensor([-1.5])}):
        sizer = LatticeSizer(update, np.random.default_rng(1), step=1.0)
        sizes = [8 * len(_reference(update, 1, 1.0, k)[0]) for k in range(sizer.m + 1)]
        assert [sizer.bits(k) for k in range(sizer.m + 1)] == sizes
        for k, size in enumerate(sizes):
            fresh = LatticeSizer(update, np.random.default_rng(1), step=1.0)
            assert largest_fitting(fresh.bits, 0, fresh.m, size) == max(j for j, s in enumerate(sizes) if s <= size)
        assert largest_fitting(sizer.bits, 0, sizer.m, sizes[0] - 1) is None
        assert _header_bits([tuple(update["w"].shape)], flag=False) <= sizes[0]


def test_the_rankings_top_k_and_rank_ranges_are_the_stable_sorts() -> None:
    """The bucketed ranking's top k, rank ranges, masks, largest index and point histogram equal the stable
    sort's (descending norm, ties by index) in any order of questions: few large buckets (norms of a few
    magnitudes times 1 + tiny noise), ties, cuts inside one bucket twice (it is then sorted), ranges with both
    ends in one bucket, ends at bucket ends."""
    from edgefl.compression.uveqfed import _Ranking

    rng = np.random.default_rng(21)
    norm2 = rng.choice([0.0, 1.0, 2.0, 8.0], 6000) * (1 + rng.integers(0, 3, 6000) * 1e-12)
    norm2[rng.integers(0, 6000, 300)] = 2.0  # exact ties inside a bucket
    order = np.argsort(-norm2, kind="stable")
    points = rng.integers(0, 5, 6000)
    rank = _Ranking(norm2, points, 5)
    edges = rank.end.tolist()
    asks = [(0, int(k)) for k in rng.integers(1, 6001, 20)] + [(0, e) for e in edges]
    asks += [tuple(sorted(rng.integers(0, 6001, 2).tolist())) for _ in range(60)]
    asks += [(e - 5, e + 5) for e in edges[:-1]] + [(e, e + 1) for e in edges[:-1]] + [(1, 2), (2, 3)]
    for k0, k1 in asks:
        assert np.array_equal(np.sort(rank.between(k0, k1)), np.sort(order[k0:k1])), (k0, k1)
        assert np.array_equal(np.flatnonzero(rank.mask(k1)), np.sort(order[:k1])), k1
        if k1 > 0:
            hist, last = rank.cut(k1)
            assert last == int(order[:k1].max()), k1
            assert np.array_equal(hist, np.bincount(points[order[:k1]], minlength=5)), k1


def test_encoding_again_gives_the_same_update_and_leaves_the_first_one_as_it_was():
    """encode hands over its own array when at least half the sub-vectors are kept (the dropped rows zeroed);
    a later encode of another k must rebuild the full values without touching the update handed over."""
    import copy

    from edgefl.compression.uveqfed import LatticeSizer

    rng = np.random.default_rng(5)
    update = {"w": torch.from_numpy(rng.standard_normal((64, 33)).astype(np.float32))}
    dither = np.random.default_rng(6)
    sizer = LatticeSizer(update, copy.deepcopy(dither), step=1.0)
    m = sizer.m
    ks = [m, 3 * m // 4, m // 2, m // 5, 0, 7 * m // 8, m]
    firsts = {}
    for k in ks:
        coded = sizer.encode(k)
        fresh = LatticeSizer(update, copy.deepcopy(dither), step=1.0).encode(k)
        assert coded.payload == fresh.payload and torch.equal(coded.update["w"], fresh.update["w"]), k
        firsts.setdefault(k, (coded, fresh.update["w"].clone()))
    for k, (coded, want) in firsts.items():
        assert torch.equal(coded.update["w"], want), f"the update of k={k} changed after later encodes"
