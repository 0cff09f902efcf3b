"""The compiled bit readers and writers (coding, packed, codec) against the numpy code they replaced, kept here as
references: the same values, bytes and errors on random and edge inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import codec, coding, packed, quantize


# --- references: the numpy bit-array decoders as they were ----------------------------------------------------


class RefReader:
    def __init__(self, data: bytes) -> None:
        self.bits_array = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
        self.pos = 0

    def take(self, n: int) -> np.ndarray:
        if n < 0 or self.pos + n > self.bits_array.size:
            raise coding.CodingError("truncated")
        out = self.bits_array[self.pos : self.pos + n]
        self.pos += n
        return out

    def uint(self, n_bits: int) -> int:
        bits = self.take(n_bits).astype(np.int64)
        return int((bits << np.arange(n_bits - 1, -1, -1, dtype=np.int64)).sum()) if n_bits else 0


def ref_rice(reader: RefReader, n: int) -> np.ndarray:
    b = reader.uint(coding.RICE_B_BITS)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    zeros = np.flatnonzero(reader.bits_array[reader.pos :] == 0)[:n]
    if zeros.size < n:
        raise coding.CodingError("Rice stream truncated")
    q = np.diff(zeros, prepend=-1) - 1
    reader.pos += int(zeros[-1]) + 1
    if b == 0:
        return q.astype(np.int64)
    rem = reader.take(n * b).reshape(n, b).astype(np.int64) @ (1 << np.arange(b - 1, -1, -1, dtype=np.int64))
    return (q.astype(np.int64) << b) | rem


def ref_huffman(reader: RefReader, n: int) -> np.ndarray:
    alphabet_size = reader.uint(coding.COUNT_BITS)
    n_used = reader.uint(coding.COUNT_BITS)
    if n_used == 1:
        return np.full(n, reader.uint(coding.COUNT_BITS), dtype=np.int64)
    if n_used == 0:
        if n:
            raise coding.CodingError("no symbols")
        return np.zeros(0, dtype=np.int64)
    used = np.cumsum(ref_rice(reader, n_used) + 1) - 1
    if used.size and used[-1] >= alphabet_size:
        raise coding.CodingError("outside")
    lengths = np.zeros(alphabet_size, dtype=np.int64)
    lengths[used] = reader.take(4 * n_used).reshape(n_used, 4).astype(np.int64) @ np.array([8, 4, 2, 1]) + 1
    codes = coding.canonical_codes(lengths)
    block_bits = ref_rice(reader, math.ceil(n / 512))
    payload = reader.take(int(block_bits.sum()))
    width = int(lengths.max())
    table_sym = np.zeros(1 << width, dtype=np.int64)
    table_len = np.zeros(1 << width, dtype=np.int64)
    for s in used:
        lo, hi = int(codes[s]) << (width - int(lengths[s])), (int(codes[s]) + 1) << (width - int(lengths[s]))
        table_sym[lo:hi], table_len[lo:hi] = s, lengths[s]
    padded = np.concatenate([payload, np.zeros(512 * 16 + 64, dtype=np.uint8)])
    out = []
    starts = np.concatenate([[0], np.cumsum(block_bits)])
    for k in range(block_bits.size):  # one block after another, each from its own start, symbol by symbol
        pos = int(starts[k])
        for _ in range(512):
            w = int(padded[pos : pos + width] @ (1 << np.arange(width - 1, -1, -1)))
            out.append(table_sym[w])
            pos += int(table_len[w])
        if k < block_bits.size - 1 and pos != starts[k + 1]:
            raise coding.CodingError("block lengths do not match")
    return np.array(out[:n], dtype=np.int64)


def _prefixed(rng: np.random.Generator, write) -> tuple[bytes, int]:
    """A stream of some random leading bits, then what ``write(writer)`` writes, then some random bits."""
    w = coding.BitWriter()
    lead = int(rng.integers(0, 20))
    w.bits(rng.integers(0, 2, lead).astype(np.uint8))
    write(w)
    w.bits(rng.integers(0, 2, int(rng.integers(0, 30))).astype(np.uint8))
    return w.to_bytes(), lead


@pytest.mark.parametrize("seed", range(12))
def test_rice_decoder_reads_what_the_reference_reads(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 2, 7, 100, 3000]))
    scale = float(rng.choice([0.5, 3, 100, 1e5]))
    values = np.floor(rng.exponential(scale, n)).astype(np.int64)
    if n and seed % 3 == 0:
        values[rng.integers(0, n)] = int(rng.integers(200, 5000))  # a long unary run (q >= 63)
    b = None if seed % 4 else int(rng.integers(0, 5))
    data, lead = _prefixed(rng, lambda w: coding.rice_encode(w, values, b))
    for read in (coding.rice_decode, coding.rice_decode_fast, packed.read_rice):
        r, ref = coding.BitReader(data), RefReader(data)
        r.pos = ref.pos = lead
        got = read(r, n)
        assert np.array_equal(got, ref_rice(ref, n)) and np.array_equal(got, values)
        assert r.pos == ref.pos


@pytest.mark.parametrize("seed", range(8))
def test_rice_decoder_raises_where_the_reference_raises(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, 40)
    w = coding.BitWriter()
    coding.rice_encode(w, values)
    bits = np.unpackbits(np.frombuffer(w.to_bytes(), dtype=np.uint8))
    cut = np.packbits(bits[: int(rng.integers(7, bits.size - 8))]).tobytes()
    for n in (40, 41):
        with pytest.raises(coding.CodingError):
            ref_rice(RefReader(cut), n)
        with pytest.raises(coding.CodingError):
            coding.rice_decode(coding.BitReader(cut), n)
    with pytest.raises(coding.CodingError):  # more values than the whole stream holds
        coding.rice_decode(coding.BitReader(w.to_bytes()), 10**4)


def test_rice_positions_search_only_their_span():
    w = coding.BitWriter()
    coding.rice_encode(w, np.array([3, 0, 5]), 0)
    w.bits(np.zeros(40, dtype=np.uint8))
    data = w.to_bytes()
    assert np.array_equal(coding.rice_decode_positions(coding.BitReader(data), 3, 12), [3, 4, 10])
    with pytest.raises(coding.CodingError):  # the third terminator lies past a span of 10 bits
        coding.rice_decode_positions(coding.BitReader(data), 3, 10)
    w = coding.BitWriter()
    coding.rice_encode(w, np.array([9, 2, 17, 1]), 2)
    assert np.array_equal(coding.rice_decode_positions(coding.BitReader(w.to_bytes()), 4, 200), [9, 12, 30, 32])


@pytest.mark.parametrize("seed", range(12))
def test_huffman_decoder_reads_what_the_reference_reads(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.choice([0, 1, 5, 511, 512, 513, 2000, 5000]))
    alphabet = int(rng.choice([1, 2, 3, 17, 256, 4096]))
    probs = rng.dirichlet(np.full(alphabet, float(rng.choice([0.05, 1.0]))))
    symbols = rng.choice(alphabet, size=n, p=probs) if alphabet > 1 else np.zeros(n, dtype=np.int64)
    if seed % 5 == 0 and alphabet > 2 and n:  # a skewed histogram: codes up to the 16-bit limit
        symbols = np.minimum(rng.geometric(0.5, n) - 1, alphabet - 1)
    data, lead = _prefixed(rng, lambda w: coding.huffman_encode(w, symbols, alphabet))
    for read in (coding.huffman_decode, coding.huffman_decode_fast, packed.read_huffman):
        r, ref = coding.BitReader(data), RefReader(data)
        r.pos = ref.pos = lead
        got = read(r, n)
        assert np.array_equal(got, ref_huffman(ref, n)) and np.array_equal(got, symbols)
        assert r.pos == ref.pos


def test_huffman_decoder_checks_the_block_lengths():
    rng = np.random.default_rng(5)
    symbols = rng.integers(0, 9, 1500)
    counts = np.bincount(symbols, minlength=9)
    lengths = coding.huffman_lengths(counts)
    codes = coding.canonical_codes(lengths)
    blocks = coding.huffman_block_lengths(lengths[symbols])

    def stream(blocks: np.ndarray) -> bytes:  # huffman_encode's layout with the given block lengths
        w = coding.BitWriter()
        used, gaps = coding.huffman_table_gaps(lengths)
        coding.write_table_head(w, counts)
        coding.rice_encode(w, gaps)
        w.bits(coding.pack_codes(lengths[used] - 1, np.full(used.size, 4)))
        coding.rice_encode(w, blocks)
        w.bits(coding.pack_codes(codes[symbols], lengths[symbols]))
        return w.to_bytes()

    assert np.array_equal(coding.huffman_decode(coding.BitReader(stream(blocks)), 1500), symbols)
    for shift in ([1, -1, 0], [0, -1, 1], [-1, 0, 1]):
        bad = stream(blocks + np.array(shift))
        with pytest.raises(coding.CodingError):
            ref_huffman(RefReader(bad), 1500)
        with pytest.raises(coding.CodingError, match="block lengths"):
            coding.huffman_decode(coding.BitReader(bad), 1500)
    bad = stream(blocks + np.array([0, 0, 1]))  # the last block is not checked: one more bit is read past
    assert np.array_equal(coding.huffman_decode(coding.BitReader(bad), 1500), ref_huffman(RefReader(bad), 1500))


@pytest.mark.parametrize("seed", range(6))
def test_bit_reader_fields_match_the_unpacked_bits(seed):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, int(rng.integers(1, 40)), dtype=np.uint8).tobytes()
    r, ref = coding.BitReader(data), RefReader(data)
    while True:
        n = int(rng.integers(0, 40))
        if rng.random() < 0.5:
            if ref.pos + n > ref.bits_array.size:
                with pytest.raises(coding.CodingError):
                    r.uint(n)
                break
            assert r.uint(n) == ref.uint(n)
        else:
            if ref.pos + n > ref.bits_array.size:
                with pytest.raises(coding.CodingError):
                    r.take(n)
                break
            assert np.array_equal(r.take(n), ref.take(n))
        assert r.pos == ref.pos
    assert np.array_equal(r.bits_array, ref.bits_array)


# --- the codec's decoder against the old one ------------------------------------------------------------------


def ref_decode(payload: bytes) -> tuple[np.ndarray, np.ndarray]:
    """decode_flat_mask's values and mask, as the numpy decoder computed them (over the reference readers)."""
    from edgefl.compression import sparsify
    from edgefl.compression.container import read_header

    r = RefReader(payload)
    kernel_wise, shapes, k = read_header(r, 0xA7, 1, "an edgefl update", flag=True)
    layout = sparsify.kernel_layout(shapes, kernel_wise=kernel_wise)
    out = np.zeros(layout.n_elements, dtype=np.float32)
    sent = np.zeros(layout.n_elements, dtype=bool)
    if k == 0:
        return out, sent
    mode = r.uint(1)
    listed = np.cumsum(ref_rice(r, k if mode == 0 else layout.n_kernels - k) + 1) - 1
    mask = np.zeros(layout.n_kernels, dtype=bool) if mode == 0 else np.ones(layout.n_kernels, dtype=bool)
    mask[listed] = mode == 0
    kept = np.flatnonzero(mask)
    u_min = float(np.array(r.uint(32), dtype=np.uint32).view(np.float32))
    u_max = float(np.array(r.uint(32), dtype=np.uint32).view(np.float32))
    levels, j = r.uint(16), r.uint(4)
    elements = sparsify.kernel_elements(kept, layout)
    negative = r.take(elements.size).view(bool)
    if u_max > u_min:
        base = levels + 1
        symbols = ref_huffman(r, math.ceil(elements.size / j))
        digits = (np.arange(base**j)[:, None] // base ** np.arange(j)) % base
        values = quantize.level_magnitudes(digits, levels, u_min, u_max)[symbols].reshape(-1)[: elements.size]
    else:
        values = quantize.level_magnitudes(np.zeros(elements.size, dtype=np.int64), levels, u_min, u_max)
    values = values.copy()
    values[negative] = -values[negative]
    out[elements] = values
    sent[elements] = True
    return out, sent


def _update(rng: np.random.Generator, n_zero: bool = False) -> dict[str, torch.Tensor]:
    upd = {"conv": torch.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
           "fc": torch.from_numpy(rng.standard_normal((50, 37)).astype(np.float32)),
           "b": torch.from_numpy(rng.standard_normal(7).astype(np.float32))}  # fmt: skip
    if n_zero:
        upd["fc"][:10] = 0.0
        upd["fc"][10:20] = -0.0
    return upd


@pytest.mark.parametrize("levels", [1, 2, 3, 7, 15, 16, 40, 255, 300])
@pytest.mark.parametrize("kernel_wise", [True, False])
def test_codec_decoder_matches_the_reference(levels, kernel_wise):
    rng = np.random.default_rng(levels)
    upd = _update(rng, n_zero=levels % 2 == 1)
    n_k = 4 * 3 + 50 * 37 + 7 if kernel_wise else 4 * 27 + 50 * 37 + 7
    for kept in (0, 1, 2, n_k // 3, n_k - 1, n_k):
        p = codec.encode_fixed(upd, kept_kernels=kept, levels=levels, rng=np.random.default_rng(7),
                               kernel_wise=kernel_wise)  # fmt: skip
        _, flat, sent = codec.decode_flat_mask(p.payload)
        ref_flat, ref_sent = ref_decode(p.payload)
        assert np.array_equal(flat.view(np.uint32), ref_flat.view(np.uint32)) and np.array_equal(sent, ref_sent)


def test_codec_decoder_of_a_constant_update_and_malformed_payloads():
    upd = {"w": torch.full((3, 5), -0.25)}  # u_max == u_min: no Huffman stream
    p = codec.encode_fixed(upd, kept_kernels=15, levels=7, rng=np.random.default_rng(0), kernel_wise=False)
    flat = codec.decode_flat(p.payload)[1]
    assert np.array_equal(flat, ref_decode(p.payload)[0]) and np.all(flat == -0.25)
    p = codec.encode_fixed(_update(np.random.default_rng(1)), kept_kernels=20, levels=3, rng=np.random.default_rng(0))
    for cut in (5, len(p.payload) // 2, len(p.payload) - 3):
        with pytest.raises(codec.CodecError):
            codec.decode_flat_mask(p.payload[:cut])


# --- the quantiser's loop and the writer's kernels ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_rounded_levels_loop_equals_stochastic_levels(seed):
    """rounded_levels without the error (the compiled loop) and rounded_magnitudes of signed float32 values, against
    stochastic_levels (the numpy quantiser): searched and arithmetic intervals, ties at the points, magnitudes
    outside the range, colliding points (zero widths), zeros and -0.0; a NaN goes to the numpy code."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(0, 3000))
    levels = int(rng.choice([1, 2, 3, 7, 15, 16, 40, 255, 4095, int(rng.integers(1, 4096))]))
    values = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 4)).astype(np.float32)
    if seed % 5 == 0 and n:
        values[rng.random(n) < 0.2] = 0.0
        values[rng.random(n) < 0.2] = -0.0
    if seed % 7 == 0:  # consecutive float32 values: the points collide
        values = (np.float32(0.1) + np.arange(n) * np.spacing(np.float32(0.1))).astype(np.float32)
    mags = np.abs(values).astype(np.float64)
    lo, hi = (float(mags.min()), float(mags.max())) if n else (0.0, 0.0)
    if seed % 4 == 1 and n:  # the points themselves among the magnitudes (ties)
        pts = quantize.quantization_points(levels, lo, hi)
        values[: min(n, pts.size)] = pts[: min(n, pts.size)]
        mags = np.abs(values).astype(np.float64)
    if seed % 6 == 2 and n:  # the range starts above some magnitudes
        lo = float(np.float32((lo + hi) / 2))
    uniforms = rng.random(n)
    uniforms[: min(n, 3)] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        want = quantize.stochastic_levels(mags, levels, lo, hi, uniforms)
    got, error = quantize.rounded_levels(mags, levels, lo, hi, uniforms)
    assert error is None and got.dtype == want.dtype and np.array_equal(got, want)
    assert np.array_equal(quantize.rounded_magnitudes(values, levels, lo, hi, uniforms), want)


def test_rounded_levels_with_a_nan_does_what_the_numpy_code_does():
    mags = np.array([0.5, np.nan, 0.25, 1.0])
    for levels in (3, 40):
        with np.errstate(invalid="ignore"):
            with pytest.raises(IndexError):
                quantize.stochastic_levels(mags, levels, 0.25, 1.0, np.zeros(4))
            with pytest.raises(IndexError):
                quantize.rounded_levels(mags, levels, 0.25, 1.0, np.zeros(4))


def test_packed_writer_codes_of_any_length_at_any_offset():
    rng = np.random.default_rng(9)
    for offset in range(0, 70, 3):
        lengths = rng.integers(0, 65, 50)
        codes = np.array([int(rng.integers(0, 1 << 62)) << 2 | 3 for _ in lengths], dtype=np.uint64)
        codes = np.where(lengths == 64, codes, codes & ((np.uint64(1) << lengths.astype(np.uint64)) - np.uint64(1)))
        fast, plain = packed.CodeWriter(), coding.BitWriter()
        for w in (fast, plain):
            w.bits(rng.integers(0, 2, offset).astype(np.uint8) * 0 + 1)
        fast.codes(codes, lengths)
        plain.bits(coding.pack_codes(codes, lengths))
        fixed = int(rng.integers(1, 65))
        mask = np.uint64(2**64 - 1) if fixed == 64 else np.uint64((1 << fixed) - 1)
        fast.codes(codes & mask, fixed)
        plain.bits(coding.pack_codes(codes & mask, np.full(codes.size, fixed)))
        values = np.array([0, 31, 32, 33, 63, 64, 200, 5])
        fast.rice(values, 0)
        coding.rice_encode(plain, values, 0)
        assert fast.n_bits == plain.n_bits and fast.to_bytes() == plain.to_bytes(), offset


@pytest.mark.parametrize("levels", [2, 5, 15, 16, 300, 4095])
def test_rounded_levels_loop_on_colliding_points_and_a_range_below_the_largest(levels):
    """Points closer than a float32 spacing (intervals of zero width) and magnitudes above u_max (the last
    interval's rounding of a value past its end), for both ways of finding the interval."""
    start = np.float32(0.1)
    values = (start + np.arange(64) * np.spacing(start)).astype(np.float32)
    mags = values.astype(np.float64)
    for hi in (mags[-1], mags[-5], mags[3]):
        for lo in (mags[0], mags[1]):
            uniforms = np.random.default_rng(levels).random(mags.size)
            with np.errstate(invalid="ignore", divide="ignore"):
                want = quantize.stochastic_levels(mags, levels, lo, hi, uniforms)
            assert np.array_equal(quantize.rounded_levels(mags, levels, lo, hi, uniforms)[0], want)
            assert np.array_equal(quantize.rounded_magnitudes(-values, levels, lo, hi, uniforms), want)


# --- the codec's sizing kernels ---------------------------------------------------------------------------------


def ref_grouped(indices: np.ndarray, levels: int, j: int) -> tuple[np.ndarray, int]:
    base = levels + 1
    indices = np.asarray(indices, dtype=np.int64)
    if j == 1:
        return indices, base
    pad = (-indices.size) % j
    indices = np.concatenate([indices, np.zeros(pad, dtype=np.int64)])
    digits = indices.reshape(-1, j)
    symbols = digits[:, j - 1].copy()
    for t in range(j - 2, -1, -1):
        symbols *= base
        symbols += digits[:, t]
    return symbols, base**j


@pytest.mark.parametrize("levels", [1, 2, 3, 7, 15, 16, 255, 4095])
def test_grouped_counts_equal_the_numpy_grouping(levels):
    rng = np.random.default_rng(levels)
    j = codec._group(levels)
    for n in (0, 1, j - 1, j, j + 1, 1000, 1001):
        indices = rng.integers(0, levels + 1, n)
        want, alphabet = ref_grouped(indices, levels, j)
        symbols, counts = codec._grouped_counts(indices, levels, j)
        assert np.array_equal(symbols, want) and np.array_equal(counts, np.bincount(want, minlength=alphabet))
        assert np.array_equal(codec._grouped(indices.astype(np.uint8 if levels < 255 else np.int64), levels, j)[0], want)


def ref_sorted_levels(flat: np.ndarray, uniforms: np.ndarray, levels: int, lo: float, hi: float):
    """(histogram, element-order level indices, code bits per 512-element block) as the numpy code computed them."""
    n = flat.size
    b = max(1, (n - 1).bit_length())
    keys = np.abs(flat).view(np.uint32).astype(np.uint64) << np.uint64(b)
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    element = (keys & np.uint64((1 << b) - 1)).astype(np.int64)
    mags = (keys >> np.uint64(b)).astype(np.uint32).view(np.float32).astype(np.float64)
    u = uniforms[element]
    points = quantize.quantization_points(levels, lo, hi).astype(np.float64)
    starts = np.concatenate([[0], np.searchsorted(mags, points[1:levels], side="left"), [n]])
    per = np.diff(starts)
    above = mags - np.repeat(points[:levels], per)
    above /= np.repeat(np.diff(points), per)
    level = np.repeat(np.arange(levels, dtype=np.int64), per) + (u < above)
    counts = np.bincount(level, minlength=levels + 1)
    lengths = coding.huffman_lengths(counts)
    blocks = np.bincount(element >> 9, weights=lengths.astype(np.float64)[level], minlength=-(-n // 512))
    out = np.empty(n, dtype=np.int64)
    out[element] = level
    return counts, out, blocks.astype(np.int64), lengths, starts


@pytest.mark.parametrize("seed", range(10))
def test_sorted_levels_kernels_equal_the_numpy_code(seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.choice([1, 2, 513, 3000, 20000]))
    flat = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 2)).astype(np.float32)
    if seed % 3 == 0:
        flat[rng.random(n) < 0.3] = flat[0]  # ties: the index orders them
        flat[rng.random(n) < 0.1] = -0.0
    uniforms = rng.random(n)
    mags = np.abs(flat).astype(np.float64)
    lo, hi = float(mags.min()), float(mags.max())
    assert codec._magnitude_range(flat) == (lo, hi)
    s = codec._SortedLevels(flat, uniforms)
    for levels in (1, 2, 16, 17, 40, 300, 4095):
        if hi <= lo or not codec._SortedLevels.applies(levels, lo, hi):
            continue
        counts, indices, blocks, lengths, starts = ref_sorted_levels(flat, uniforms, levels, lo, hi)
        assert np.array_equal(s._starts(levels, lo, hi)[1], starts)
        assert np.array_equal(s.histogram(levels, lo, hi), counts)
        assert np.array_equal(quantize.rounded_magnitudes(flat, levels, lo, hi, uniforms), indices)
        assert s.huffman_bits(levels, lo, hi) == packed.huffman_bits_of(counts, lengths, blocks)
        assert s.huffman_bits(levels, lo, hi) == coding.huffman_bits(indices, levels + 1)


def test_magnitude_range_of_nan_and_signed_zeros():
    assert codec._magnitude_range(np.array([-0.0, 0.0], dtype=np.float32)) == (0.0, 0.0)
    assert codec._magnitude_range(np.array([-3.0, 0.5, 2.0], dtype=np.float32)) == (0.5, 3.0)
    lo, hi = codec._magnitude_range(np.array([1.0, np.nan, 2.0], dtype=np.float32))
    assert np.isnan(lo) and np.isnan(hi)


@pytest.mark.parametrize("seed", range(5))
def test_relative_error_of_float32_vectors_equals_the_float64_formula(seed):
    from edgefl.methods.fedhq import relative_error

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(int(rng.integers(1, 5000))).astype(np.float32)
    q = (u + rng.standard_normal(u.size).astype(np.float32) * np.float32(0.1)).astype(np.float32)
    u64, q64 = u.astype(np.float64), q.astype(np.float64)
    want = float(np.dot(q64 - u64, q64 - u64)) / float(np.dot(u64, u64))
    assert relative_error(q, u) == pytest.approx(want, rel=1e-12)  # torch's float64 dot sums in its own order
    assert relative_error(q, np.zeros_like(u)) == 0.0
    w64, d64 = quantize.widened_difference(q, u)
    assert np.array_equal(w64, u64) and np.array_equal(d64, q64 - u64)


@pytest.mark.parametrize("seed", range(6))
def test_rounded_levels_loop_at_and_next_to_every_point(seed):
    """Magnitudes at each point Q_l and the float32 values next to it, where the arithmetic estimate of the
    interval is off by one and its corrections decide."""
    rng = np.random.default_rng(seed)
    for levels in (2, 3, 7, 15, 16, 17, 100, 1000, 4095):
        lo = float(np.float32(rng.random() * 10.0 ** rng.integers(-6, 0)))
        hi = float(np.float32(lo + rng.random() * 10.0 ** rng.integers(-3, 2)))
        pts = quantize.quantization_points(levels, lo, hi)
        near = np.concatenate([pts, np.nextafter(pts, np.float32(0)), np.nextafter(pts, np.float32(np.inf))])
        values = np.where(rng.random(near.size) < 0.5, near, -near).astype(np.float32)
        mags = np.abs(values).astype(np.float64)
        # uniforms at 0 and just below 1 too: only they tell an estimate off by one from its correction (rounding
        # from the interval below by a fraction at or above 1 gives the same level otherwise)
        uniforms = rng.choice([0.0, float(np.nextafter(1.0, 0.0)), 0.5], size=mags.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = quantize.stochastic_levels(mags, levels, lo, hi, uniforms)
        assert np.array_equal(quantize.rounded_levels(mags, levels, lo, hi, uniforms)[0], want), levels
        assert np.array_equal(quantize.rounded_magnitudes(values, levels, lo, hi, uniforms), want), levels
        # float64 magnitudes between each float32 point and the exact Q_0 + l step: there the estimate is off
        exact = lo + np.arange(levels + 1) * ((float(pts[-1]) - float(pts[0])) / levels)
        mags = np.concatenate([exact, (exact + pts) / 2, np.nextafter(exact, 0.0), np.nextafter(exact, 1.0)])
        uniforms = rng.choice([0.0, float(np.nextafter(1.0, 0.0)), 0.5], size=mags.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = quantize.stochastic_levels(mags, levels, lo, hi, uniforms)
        assert np.array_equal(quantize.rounded_levels(mags, levels, lo, hi, uniforms)[0], want), levels


@pytest.mark.parametrize("levels", [1, 3, 7, 40])
def test_encoded_update_is_the_signed_level_magnitudes(levels):
    """encode_fixed's update and mask against level_magnitudes of the plan's indices, negated where the value is
    below 0 (-0.0 stays positive), for some and for every element kept."""
    rng = np.random.default_rng(levels)
    upd = _update(rng, n_zero=True)
    names, shapes, flat = codec.flatten(upd)
    for kept in (5, 40, flat.size):
        p = codec.encode_fixed(upd, kept_kernels=kept, levels=levels, rng=np.random.default_rng(3),
                               kernel_wise=False)  # fmt: skip
        from edgefl.compression import sparsify

        elements = sparsify.top_kernels(sparsify.kernel_scores(flat, sparsify.kernel_layout(shapes, kernel_wise=False),
                                                                score="rms"), kept)  # fmt: skip
        mags = np.abs(flat[elements]).astype(np.float64)
        lo, hi = float(mags.min()), float(mags.max())
        idx = quantize.stochastic_levels(mags, levels, lo, hi, np.random.default_rng(3).random(flat.size)[elements])
        want = quantize.level_magnitudes(idx, levels, lo, hi)
        want[flat[elements] < 0] = -want[flat[elements] < 0]
        got = codec.flatten(p.update)[2]
        assert np.array_equal(got[elements].view(np.uint32), want.view(np.uint32))
        assert np.count_nonzero(got) <= kept and int(codec.flatten(p.sent)[2].sum()) == kept


@pytest.mark.parametrize("seed", range(8))
def test_rounded_groups_equal_grouping_the_numpy_levels(seed):
    rng = np.random.default_rng(500 + seed)
    n = int(rng.choice([1, 2, 7, 1000, 4099]))
    values = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 1)).astype(np.float32)
    if seed % 2:
        values[rng.random(n) < 0.2] = -0.0
    uniforms = rng.random(n)
    mags = np.abs(values).astype(np.float64)
    lo, hi = float(mags.min()), float(mags.max())
    for levels in (1, 2, 3, 7, 15, 16, 255, 4095):
        j = codec._group(levels)
        got = quantize.rounded_groups(values, levels, lo, hi, uniforms, j)
        if hi <= lo:
            assert got is None
            continue
        want, alphabet = ref_grouped(quantize.stochastic_levels(mags, levels, lo, hi, uniforms), levels, j)
        assert np.array_equal(got[0], want) and np.array_equal(got[1], np.bincount(want, minlength=alphabet))
    assert quantize.rounded_groups(np.array([1.0, np.nan], dtype=np.float32), 3, 0.5, 1.0, np.zeros(2), 2) is None


@pytest.mark.parametrize("levels", [1, 7, 15, 40])
def test_sizer_encoding_every_element_equals_encode_fixed(levels):
    upd = _update(np.random.default_rng(levels), n_zero=True)
    n = sum(v.numel() for v in upd.values())
    sizer = codec.TopkQuantSizer(upd, np.random.default_rng(11))
    assert sizer.bits(n, levels) > 0
    got = sizer.encode(n, levels)
    want = codec.encode_fixed(upd, kept_kernels=n, levels=levels, rng=np.random.default_rng(11), kernel_wise=False,
                              score="l2")  # fmt: skip
    assert got.payload == want.payload and len(got.payload) * 8 == sizer.bits(n, levels)
    for a, b in zip(got.update.values(), want.update.values()):
        assert np.array_equal(a.numpy().view(np.uint32), b.numpy().view(np.uint32))


@pytest.mark.parametrize("b", [0, 1, 23, 24, 25, 40, 63])
def test_rice_decoder_remainders_of_any_width(b):
    rng = np.random.default_rng(b)
    values = (rng.integers(0, 1 << min(b, 62), 50, dtype=np.int64) if b else np.zeros(50, dtype=np.int64)) + \
        (rng.integers(0, 3, 50) << b if b < 62 else 0)
    data, lead = _prefixed(rng, lambda w: coding.rice_encode(w, values, b))
    r, ref = coding.BitReader(data), RefReader(data)
    r.pos = ref.pos = lead
    assert np.array_equal(coding.rice_decode(r, 50), ref_rice(ref, 50)) and r.pos == ref.pos
