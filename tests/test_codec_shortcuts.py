"""The codecs' shortcuts give what the plain formulations give: the packed-key ranking a stable argsort's order,
the one-pass quantiser stochastic_levels' indices and expected_error's error, the packed writer and windowed
readers the bit-array coders' bytes and symbols, sizes from sorted magnitudes the encoder's byte length, and
AnycostFL's chooser (AnycostFL Sec. III-C) the payload of the same search written with arrays over every ranked
element and the real encoder's sizes. Inputs include ties, zeros, all-zero updates, single elements, ranges a few
float32 spacings wide and budgets equal to a real size."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import LEVEL_GRID, MAX_LEVELS, CodecError, compress, decode_with_mask, encode_fixed
from edgefl.compression import codec, coding, packed, quantize, sparsify
from edgefl.compression.search import SizeFunction, TopkQuantSizer, largest_fitting

SHAPES = {"conv1.weight": (6, 1, 5, 5), "conv1.bias": (6,), "conv2.weight": (8, 6, 3, 3), "fc.weight": (40, 72),
          "fc.bias": (40,)}  # fmt: skip


def _update(seed: int, *, smallest_in_conv: bool = True) -> dict[str, torch.Tensor]:
    """A seeded update with exact zeros and repeated magnitudes of both signs; ``smallest_in_conv=False`` keeps the
    convolutions' magnitudes above every weight's, so the smallest kept magnitude changes with the kept count."""
    g = torch.Generator().manual_seed(seed)
    out = {k: torch.randn(s, generator=g) * torch.rand(s, generator=g) for k, s in SHAPES.items()}
    out["fc.weight"][:3] = 0.0
    out["fc.weight"][3, :10] = 0.25
    out["fc.weight"][4, :10] = -0.25
    if not smallest_in_conv:
        for name in ("conv1.weight", "conv2.weight"):
            out[name] = torch.sign(out[name]) * (1.0 + out[name].abs())
    return out


def _flat(update: dict[str, torch.Tensor]) -> np.ndarray:
    return np.concatenate([v.reshape(-1).numpy() for v in update.values()]).astype(np.float32)


# --- ranking and quantiser ------------------------------------------------------------------------------------


def test_packed_key_ranking_equals_a_stable_argsort() -> None:
    """Float32 magnitudes, float64 norms and their mix, zeros, -0.0, repeated values, norms one float64 step above
    a float32, values beyond float32, subnormals; NaN falls back to the argsort."""
    rng = np.random.default_rng(21)
    for trial in range(120):
        n = int(rng.integers(1, 4000))
        as_float32 = np.abs(rng.normal(size=n)).astype(np.float32).astype(np.float64)
        norms = np.sqrt(rng.random(n) * 3.0)
        scores = np.where(rng.random(n) < [0.0, 1.0, 0.1][trial % 3], norms, as_float32)
        scores[rng.random(n) < 0.2] = 0.0
        scores[rng.random(n) < 0.02] = -0.0
        scores[rng.random(n) < 0.2] = scores[0]
        step = rng.random(n) < 0.05
        scores[step] = np.nextafter(scores[step], np.inf)  # just above a float32: sorts after it, descending
        if trial % 10 == 0:
            scores[rng.random(n) < 0.05] = 1e300
            scores[rng.random(n) < 0.05] = 1e-310
        assert np.array_equal(sparsify.rank_descending(scores), np.argsort(-scores, kind="stable")), trial
    with_nan = np.array([0.5, np.nan, 0.25, 0.5])
    assert np.array_equal(sparsify.rank_descending(with_nan), np.argsort(-with_nan, kind="stable"))


def test_one_pass_quantiser_equals_stochastic_levels_and_expected_error() -> None:
    """Every L from 1 to MAX_LEVELS, ranges of many magnitudes down to a few float32 spacings, repeated values,
    magnitudes outside the range, a collapsed range, uniforms at 0."""
    rng = np.random.default_rng(22)
    for trial in range(600):
        n = int(rng.integers(0, 400))
        levels = int(rng.choice([1, 2, 3, 7, 15, 16, 255, MAX_LEVELS, int(rng.integers(1, MAX_LEVELS + 1))]))
        mags = np.abs(rng.normal(size=n) * 10.0 ** rng.integers(-30, 4)).astype(np.float32).astype(np.float64)
        if trial % 5 == 0 and n:
            mags[rng.random(n) < 0.3] = mags[0]
        if trial % 7 == 0:  # consecutive float32 values: the points collide
            mags = (np.float32(0.1) + np.arange(n) * np.spacing(np.float32(0.1))).astype(np.float64)
        if trial % 11 == 0:
            mags = np.zeros(n)
        lo, hi = (float(mags.min()), float(mags.max())) if n else (0.0, 0.0)
        if trial % 13 == 0 and n:  # the range starts above some magnitudes
            lo = float(np.float32((lo + hi) / 2))
        uniforms = rng.random(n)
        uniforms[: min(n, 3)] = 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            want = quantize.stochastic_levels(mags, levels, lo, hi, uniforms)
        got, error = quantize.rounded_levels(mags, levels, lo, hi, uniforms, with_error=True)
        assert np.array_equal(got, want) and got.dtype == want.dtype, trial
        assert error == quantize.expected_error(mags, levels, lo, hi), trial


# --- writer and readers ---------------------------------------------------------------------------------------


def _random_stream(rng: np.random.Generator, writer) -> None:
    """The same random fields, bit arrays, Rice and Huffman runs into ``writer`` (a BitWriter or a CodeWriter)."""
    for _ in range(int(rng.integers(0, 8))):
        kind = int(rng.integers(0, 5))
        if kind == 0:
            width = int(rng.integers(0, 33))
            writer.uint(int(rng.integers(0, 1 << width)) if width else 0, width)
        elif kind == 1:
            writer.bits((rng.random(int(rng.integers(0, 200))) < 0.5).astype(np.uint8))
        elif kind == 2:
            values = rng.geometric(float(rng.choice([0.9, 0.3, 0.01])), size=int(rng.integers(0, 300))) - 1
            if values.size and rng.random() < 0.2:
                values[0] = 1 << int(rng.integers(7, 14))  # quotients of 64 bits and more at a fixed b
            b = None if rng.random() < 0.5 else int(rng.integers(0, 4))
            if isinstance(writer, packed.CodeWriter):
                writer.rice(values, b)
            else:
                coding.rice_encode(writer, values, b)
        elif kind == 3:
            alphabet = int(rng.integers(1, 300))
            symbols = np.minimum(rng.geometric(0.2, size=int(rng.integers(0, 1500))) - 1, alphabet - 1)
            if rng.random() < 0.2:
                symbols = np.full(symbols.size, alphabet - 1)  # one used symbol
            if isinstance(writer, packed.CodeWriter):
                writer.huffman(symbols, alphabet)
            else:
                coding.huffman_encode(writer, symbols, alphabet)
        else:
            writer.float32(float(rng.normal()))


def test_packed_writer_writes_the_bit_array_writers_bytes() -> None:
    for seed in range(400):
        plain, fast = coding.BitWriter(), packed.CodeWriter()
        _random_stream(np.random.default_rng(seed), plain)
        _random_stream(np.random.default_rng(seed), fast)
        assert fast.n_bits == plain.n_bits and fast.to_bytes() == plain.to_bytes(), seed
    fib = [1, 1]  # codes of every length up to 16 bits, at every offset in a 64-bit word
    while len(fib) < 17:
        fib.append(fib[-1] + fib[-2])
    symbols = np.random.default_rng(3).permutation(np.repeat(np.arange(17), fib))
    for offset in range(64):
        plain, fast = coding.BitWriter(), packed.CodeWriter()
        for w in (plain, fast):
            w.bits(np.ones(offset, dtype=np.uint8))
        coding.huffman_encode(plain, symbols, 17)
        fast.huffman(symbols, 17)
        assert fast.to_bytes() == plain.to_bytes(), offset
    full = packed.CodeWriter()
    full.codes(np.array([2**64 - 1, 12345678901234567890], dtype=np.uint64), 64)
    assert full.to_bytes() == np.array([2**64 - 1, 12345678901234567890], dtype=">u8").tobytes()
    with pytest.raises(coding.CodingError, match="does not fit"):
        packed.CodeWriter().uint(8, 3)


def test_windowed_readers_read_what_the_plain_readers_read() -> None:
    """Rice and Huffman runs after bits of every offset, then truncated or corrupted: the same values, the same
    position after them, and a CodingError where the plain reader raises one."""
    rng = np.random.default_rng(23)
    for trial in range(300):
        w = coding.BitWriter()
        w.bits(np.ones(trial % 19, dtype=np.uint8))
        values = rng.geometric(float(rng.choice([0.5, 0.01])), size=int(rng.integers(0, 400))) - 1
        coding.rice_encode(w, values)
        alphabet = int(rng.integers(1, 200))
        symbols = np.minimum(rng.geometric(0.1, size=int(rng.integers(0, 3000))) - 1, alphabet - 1)
        coding.huffman_encode(w, symbols, alphabet)
        data = bytearray(w.to_bytes())
        if trial % 3 == 1 and data:
            data = data[: int(rng.integers(0, len(data)))]
        elif trial % 3 == 2 and data:
            data[int(rng.integers(0, len(data)))] ^= 1 << int(rng.integers(0, 8))
        results = []
        for read_rice, read_huffman in ((coding.rice_decode, coding.huffman_decode),
                                        (packed.read_rice, packed.read_huffman)):  # fmt: skip
            r = coding.BitReader(bytes(data))
            try:
                r.take(trial % 19)
                got = (read_rice(r, values.size).tolist(), read_huffman(r, symbols.size).tolist(), r.pos)
            except (coding.CodingError, IndexError):
                got = "error"
            results.append(got)
        assert results[0] == results[1], trial
        if trial % 3 == 0:
            assert results[1][0] == values.tolist() and results[1][1] == symbols.tolist()


# --- sizes from sorted magnitudes -----------------------------------------------------------------------------


def _sizer_cases() -> list[tuple[str, dict[str, torch.Tensor]]]:
    rng = np.random.default_rng(24)
    ties = np.repeat(rng.normal(size=30), 40).astype(np.float32)
    close = (np.float32(0.5) + np.arange(300) * np.spacing(np.float32(0.5)) * 6).astype(np.float32)  # narrow range
    return [
        ("update", _update(5)),
        ("ties", {"w": torch.from_numpy(rng.permutation(ties).reshape(40, 30))}),
        ("all zero", {"w": torch.zeros(7, 9), "b": torch.zeros(9)}),
        ("single element", {"w": torch.tensor([-0.75])}),
        ("narrow range", {"w": torch.from_numpy(close)}),
    ]


@pytest.mark.parametrize("case", range(5))
def test_topk_sizes_from_sorted_magnitudes_are_the_encoders_bytes(case: int) -> None:
    """Every element at L = 1..20, every L of one index per symbol the searches try, and the narrowest ranges the
    sorted sizes accept: the size is the encoder's byte length, and the bytes are encode_fixed's."""
    name, update = _sizer_cases()[case]
    n = sum(v.numel() for v in update.values())
    sizer = TopkQuantSizer(update, np.random.default_rng(case))
    sizer.bits(n, MAX_LEVELS)  # sizes at an L of one index per symbol sort the magnitudes first
    for levels in [*range(1, 21), 23, 31, 64, 255, 256, 1000, 2048, MAX_LEVELS]:
        ref = encode_fixed(update, kept_kernels=n, levels=levels, rng=np.random.default_rng(case), kernel_wise=False,
                           score="l2")  # fmt: skip
        assert sizer.bits(n, levels) == ref.bits == 8 * len(ref.payload), (name, levels)
        assert sizer.encode(n, levels).payload == ref.payload, (name, levels)
    if name == "update":
        mags = np.abs(_flat(update)).astype(np.float64)
        assert codec._SortedLevels.applies(MAX_LEVELS, float(mags.min()), float(mags.max()))
    if name == "narrow range":  # about 1800 float32 spacings wide: sorted sizes up to L = 448, direct ones above
        hi = float(_flat(update).max())
        assert codec._SortedLevels.applies(255, 0.5, hi) and not codec._SortedLevels.applies(1000, 0.5, hi)


@pytest.mark.parametrize("seed", [0, 1])
def test_searches_on_budgets_equal_to_a_real_size_land_on_it(seed: int) -> None:
    """FedHQ's search over L and QSGD's over k with the budget exactly some setting's real size (and one bit
    less): the largest fitting setting is the one the same bisection finds over encode_fixed's sizes."""
    update = _update(seed)
    n = sum(v.numel() for v in update.values())

    def real(k: int, levels: int) -> int:
        return encode_fixed(update, kept_kernels=k, levels=levels, rng=np.random.default_rng(seed), kernel_wise=False,
                            score="l2").bits  # fmt: skip

    for levels in (1, 17, 40):
        for budget in (real(n, levels), real(n, levels) - 1):
            sizer = TopkQuantSizer(update, np.random.default_rng(seed))
            got = largest_fitting(lambda L: sizer.bits(n, L), 1, MAX_LEVELS, budget)
            assert got == largest_fitting(lambda L: real(n, L), 1, MAX_LEVELS, budget), (levels, budget)
    for k in (1, n // 3, n - 1):
        budget = real(k, 7)
        sizer = TopkQuantSizer(update, np.random.default_rng(seed))
        got = largest_fitting(lambda x: sizer.bits(x, 7), 0, n, budget)
        assert got == largest_fitting(lambda x: real(x, 7), 0, n, budget) and real(got, 7) <= budget


def test_sizer_argument_errors_name_the_value() -> None:
    sizer = TopkQuantSizer(_update(0), np.random.default_rng(0))
    with pytest.raises(CodecError, match="k=-1"):
        sizer.bits(-1, 3)
    with pytest.raises(CodecError, match="levels=0"):
        sizer.bits(sizer.n, 0)


# --- AnycostFL's chooser --------------------------------------------------------------------------------------


def _reference_compress(update: dict[str, torch.Tensor], budget_bits: float, seed: int, sample_size: int) -> bytes:
    """The chooser of :func:`edgefl.compression.compress` with arrays over every ranked element (running min and
    max, the sampled elements), stochastic_levels and expected_error for the estimates, and encode_fixed's real
    payloads for the exact sizes."""
    flat = _flat(update)
    shapes = [tuple(v.shape) for v in update.values()]
    layout = sparsify.kernel_layout(shapes)
    n_k = layout.n_kernels
    uniforms = np.random.default_rng(seed).random(flat.size)
    minimum = 8 * math.ceil((8 + 4 + 1 + 8 + sum(4 + 32 * len(s) for s in shapes) + 32) / 8)
    order = np.argsort(-sparsify.kernel_scores(flat, layout), kind="stable")
    rank_el = sparsify.kernel_elements(order, layout)
    mags_rank = np.abs(flat[rank_el]).astype(np.float64)
    n_el = np.concatenate([[0], np.cumsum(layout.size[order])])
    energy = np.concatenate([[0.0], np.cumsum(np.add.reduceat(flat.astype(np.float64) ** 2, layout.start)[order])])
    pre_min, pre_max = np.minimum.accumulate(mags_rank), np.maximum.accumulate(mags_rank)
    sample = np.arange(0, flat.size, max(1, flat.size // sample_size))
    u_sample = uniforms[rank_el[sample]]

    def estimate(k: int, levels: int) -> tuple[float, float]:
        if k == 0:
            return float(minimum), float(energy[-1])
        n = int(n_el[k])
        lo, hi = float(pre_min[n - 1]), float(pre_max[n - 1])
        sub = sample[sample < n]
        mags = mags_rank[sub]
        idx = quantize.stochastic_levels(mags, levels, lo, hi, u_sample[: sub.size])
        h = coding.entropy_bits(np.bincount(idx)) / idx.size if hi > lo and idx.size else 0.0
        p = min(k / n_k, 1 - k / n_k)
        mask = n_k * (0.0 if p <= 0 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))) * 1.03 + 200
        bits = minimum + 150 + mask + n * (1.0 + h) + min(n, 256 * 4 + 2000)
        q_err = quantize.expected_error(mags, levels, lo, hi) * (n / max(sub.size, 1))
        return bits, float(energy[-1] - energy[k]) + q_err

    estimate.n_k = n_k  # the chooser's search over (k, L) itself, on these full-array estimates
    k, levels = codec._least_estimated_error(estimate, LEVEL_GRID, budget_bits)

    def exact(k: int):
        return encode_fixed(update, kept_kernels=k, levels=levels, rng=np.random.default_rng(seed))

    size = exact(k).bits
    fits_k, fits = (k, exact(k)) if size <= budget_bits else (0, None)
    bad_k = n_k + 1 if size <= budget_bits else k
    steps = 0
    while bad_k - fits_k > max(1, fits_k // 200) and (steps < 8 or fits is None):
        steps += 1
        guess = int(k * (budget_bits - minimum) / max(size - minimum, 1) * (0.995 if size > budget_bits else 1.0))
        k = guess if fits_k < guess < min(bad_k, n_k + 1) and steps <= 3 else (fits_k + bad_k) // 2
        k = min(k, n_k)
        size = exact(k).bits
        if size <= budget_bits:
            fits_k, fits = k, exact(k)
        else:
            bad_k = k
    return (fits if fits is not None else exact(0)).payload


@pytest.mark.parametrize("smallest_in_conv", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compress_gives_the_payload_of_the_plain_search(seed: int, smallest_in_conv: bool) -> None:
    """Budgets from a header and a little to more than the densest payload, budgets equal to a real payload's
    size, subsampled and full estimates; with the smallest magnitude in a convolution (one range for every k the
    refinement tries) and in the weights (a range per k). Decoding gives the update and mask handed over."""
    update = _update(seed, smallest_in_conv=smallest_in_conv)
    n = sum(v.numel() for v in update.values())
    budgets = [700.0, 0.03 * 32 * n, 0.1 * 32 * n, 0.35 * 32 * n, 2.0 * 32 * n]
    budgets.append(float(encode_fixed(update, kept_kernels=500, levels=7, rng=np.random.default_rng(seed)).bits))
    for sample_size in (20_000, 300):
        for budget in budgets:
            got = compress(update, budget_bits=budget, rng=np.random.default_rng(seed), sample_size=sample_size)
            assert got.payload == _reference_compress(update, budget, seed, sample_size), (budget, sample_size)
            out, sent = decode_with_mask(got.payload, list(update))
            for name in update:
                assert torch.equal(out[name], got.update[name]) and torch.equal(sent[name], got.sent[name])


def test_ranked_prefix_answers_equal_arrays_over_the_ranked_elements() -> None:
    """Element counts, magnitude ranges, elements at ranked positions and kept sets of the top k kernels, from the
    few multi-element kernels, against the arrays they replace: layouts of every tensor rank, kernels of one and
    many elements, zeros and ties, convolutions ranked first or last, and an update with a NaN."""
    rng = np.random.default_rng(25)
    for trial in range(150):
        shapes = [tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(0, 5)))) for _ in range(rng.integers(1, 5))]
        n = sum(math.prod(s) for s in shapes)
        flat = (rng.normal(size=n) * rng.random(n) * rng.choice([1e-3, 1.0, 1e3], size=n)).astype(np.float32)
        flat[rng.random(n) < 0.2] = 0.0
        flat[rng.random(n) < 0.2] = flat[0]
        if trial == 149:
            flat[n // 2] = np.nan
        layout = sparsify.kernel_layout(shapes, kernel_wise=bool(trial % 4))
        ranked = codec._Ranked(flat, layout, ["rms", "l2"][trial % 3 == 0])
        order = np.argsort(-sparsify.kernel_scores(flat, layout, score=["rms", "l2"][trial % 3 == 0]), kind="stable")
        assert np.array_equal(ranked.order, order)
        rank_el = sparsify.kernel_elements(order, layout)
        n_el = np.concatenate([[0], np.cumsum(layout.size[order])])
        mags = np.abs(flat[rank_el]).astype(np.float64)
        for k in range(layout.n_kernels + 1):
            assert ranked.n_elements(k) == n_el[k]
            m = mags[: n_el[k]]
            want = (float(np.min(m)), float(np.max(m))) if k else (0.0, 0.0)
            assert np.array_equal(ranked.magnitude_range(k), want, equal_nan=True), (trial, k)
            kept, elements = ranked.kept(k)
            assert np.array_equal(kept, np.sort(order[:k])) and np.array_equal(elements, np.sort(rank_el[: n_el[k]]))
        positions = np.arange(0, n, max(1, n // 7))
        assert np.array_equal(ranked.elements_at(positions), rank_el[positions])


# --- FedHQ's search from bounds -------------------------------------------------------------------------------


def test_huffman_bounds_hold_the_real_size_and_are_one_bit_per_block_apart() -> None:
    """For symbols in any order the bounds from their histogram hold coding.huffman_bits, and differ by at most
    one bit per 512-symbol block (sorted and shuffled orders give different block lengths, the same bounds)."""
    rng = np.random.default_rng(31)
    for trial in range(60):
        n = int(rng.integers(1, 20_000))
        alphabet = int(rng.choice([2, 3, 17, 40, 300]))
        symbols = np.minimum(rng.geometric(rng.uniform(0.05, 0.9), size=n) - 1, alphabet - 1)
        if trial % 3 == 0:
            symbols = np.sort(symbols)
        blocks = -(-n // 512)
        low, high = codec._huffman_bounds(np.bincount(symbols, minlength=alphabet), blocks)
        real = coding.huffman_bits(symbols, alphabet)
        assert low <= real <= high and high - low <= blocks, (trial, low, real, high)


def test_fits_from_bounds_answers_as_the_exact_size() -> None:
    """``TopkQuantSizer.fits`` (intervals' entropy, then the histogram, then the exact size) against
    ``bits(n, L) <= budget`` for budgets at, around and far from the real sizes, for every L the bounds serve; a
    bound that were a bit too tight would answer differently at a budget equal to a real size, and the same
    bisection with both must land on the same L."""
    rng = np.random.default_rng(32)
    g = torch.Generator().manual_seed(3)
    cases = [_update(7), {"w": torch.randn(300, 200, generator=g) * torch.rand(300, 200, generator=g) ** 4}]
    for update in cases:
        n = sum(v.numel() for v in update.values())
        sizer = TopkQuantSizer(update, np.random.default_rng(4))
        plain = TopkQuantSizer(update, np.random.default_rng(4))
        for levels in (16, 17, 23, 40, 100, 511, 513, 2048):
            real = plain.bits(n, levels)
            for budget in {real, real - 1, real - 8, real + 8, real - 2000, real + 2000, real // 2, 2 * real,
                           real - 8 * int(rng.integers(1, 400))}:  # fmt: skip
                assert sizer.fits(n, levels, budget) == (real <= budget), (levels, budget, real)
        for budget in (plain.bits(n, 17), plain.bits(n, 40) - 1, plain.bits(n, 16) + 3000):
            size = SizeFunction(lambda L: sizer.bits(n, L), lambda L, b: sizer.fits(n, L, b))
            assert largest_fitting(size, 1, MAX_LEVELS, budget) == largest_fitting(
                lambda L: plain.bits(n, L), 1, MAX_LEVELS, budget)


def test_fits_rejects_large_levels_from_the_intervals_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """At an L far above what a budget allows, neither a histogram nor an exact size is computed."""
    update = _update(8)
    n = sum(v.numel() for v in update.values())
    sizer = TopkQuantSizer(update, np.random.default_rng(5))
    budget = sizer.bits(n, 16)

    def forbidden(*args, **kwargs):
        raise AssertionError("sized exactly")

    monkeypatch.setattr(sizer, "bits", forbidden)
    monkeypatch.setattr(codec._SortedLevels, "histogram", forbidden)
    assert not sizer.fits(n, 4000, budget)


def test_searched_intervals_equal_the_arithmetic_ones_at_every_point() -> None:
    """The binary search gives the interval arithmetic's estimate and corrections give, for magnitudes on, just
    below and just above every point, outside the range, zeros and repeats, over ranges down to the narrowest it
    accepts (4 float32 spacings per interval); it declines narrower ranges, L above its bound and NaN."""
    rng = np.random.default_rng(33)
    used = 0
    for trial in range(400):
        levels = int(rng.integers(2, quantize._SEARCHED_LEVELS + 1))
        lo = float(np.float32(abs(rng.normal()) * 10.0 ** rng.integers(-6, 2)))
        width = levels * 4 * float(np.spacing(np.float32(lo + 1e-30))) * float(rng.choice([1.0, 1.5, 30.0, 1e5]))
        hi = float(np.float32(lo + width))
        points = quantize.quantization_points(levels, lo, hi).astype(np.float64)
        near = np.concatenate([points, np.nextafter(points, 0), np.nextafter(points, np.inf),
                               np.nextafter(points.astype(np.float32), np.float32(0)).astype(np.float64)])  # fmt: skip
        mags = np.concatenate([near, rng.uniform(lo, hi, 200), [0.0, lo / 2, hi * 2, hi]])
        got = quantize._interval_searched(mags, points, levels)
        if got is None:
            assert (points[-1] - points[0]) / levels < 4 * float(np.spacing(np.float32(points[-1])))
            continue
        used += 1
        assert np.array_equal(got, quantize._interval_once(mags, points, levels)), trial
    assert used > 300
    points = quantize.quantization_points(7, 0.0, 1.0).astype(np.float64)
    assert quantize._interval_searched(np.array([0.5, np.nan]), points, 7) is None
    assert quantize._interval_searched(np.array([0.5]), quantize.quantization_points(16, 0.0, 1.0), 16) is None
