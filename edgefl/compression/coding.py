"""Lossless coders on numpy bit arrays: bit packing, Golomb-Rice, canonical Huffman (AnycostFL Sec. III-C 3)).

The writers work on unpacked bit arrays (``numpy.uint8`` of 0/1) so that every coder is vectorised; the readers
read the packed bytes (compiled loops, :mod:`.jit`):

- :class:`BitWriter` / :class:`BitReader` — fixed-width fields and bit arrays, packed MSB first by
  ``numpy.packbits`` into whole bytes; the reader unpacks only the bits it is asked for;
- Golomb-Rice (:func:`rice_encode`, :func:`rice_decode`) of non-negative integers (gaps between positions) with
  the *optimal* parameter: :func:`rice_parameter` takes the ``b`` that minimises the exact coded size. The unary
  quotients and the ``b``-bit remainders are written as two consecutive runs (same size as interleaving them);
  the decoder reads the quotients, then the remainders, in one loop;
- canonical Huffman (:func:`huffman_encode`, :func:`huffman_decode`) with code lengths limited to
  :data:`MAX_CODE_BITS` and the symbol stream cut into blocks whose bit lengths go in the header (Rice coded);
  the decoder reads each block from its start with one table lookup per symbol and checks that every block but
  the last ends where the next starts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from edgefl.compression.jit import kernel
from edgefl.errors import EdgeflError

__all__ = [
    "CodingError", "MAX_CODE_BITS", "BitWriter", "BitReader", "uint_bits", "pack_codes", "rice_parameter",
    "rice_bits", "rice_encode", "rice_decode", "huffman_lengths", "huffman_encode", "huffman_decode",
    "huffman_bits", "entropy_bits", "pack_short_codes", "rice_decode_positions", "huffman_encode_counted",
    "huffman_decode_fast", "rice_decode_fast", "HuffmanMemo", "RICE_B_BITS", "COUNT_BITS", "canonical_codes",
    "huffman_block_lengths", "huffman_table_gaps", "huffman_symbols", "write_table_head", "rice_head",
]  # fmt: skip

#: Longest Huffman code [bits]; the decoder's lookup table has 2**MAX_CODE_BITS entries at most.
MAX_CODE_BITS = 16
_BLOCK_LOG2 = 9  # Huffman symbols per independently addressable block: 512
RICE_B_BITS = 6
COUNT_BITS = 32


class CodingError(EdgeflError, ValueError):
    """A bit stream is truncated or malformed, or a value does not fit its field."""


def uint_bits(value: int, n_bits: int) -> np.ndarray:
    """``value`` as ``n_bits`` bits, MSB first (uint8 0/1 array); raises :class:`CodingError` if it does not fit."""
    value = int(value)
    if value < 0 or value >= 1 << n_bits:
        raise CodingError(f"value {value} does not fit in {n_bits} unsigned bits")
    return ((value >> np.arange(n_bits - 1, -1, -1, dtype=np.int64)) & 1).astype(np.uint8)


def pack_codes(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenate variable-length codes (``codes[i]`` in its low ``lengths[i]`` bits, MSB first) as a bit array."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.uint8)
    ends = np.cumsum(lengths)
    # bit j of code i sits at position ends[i] - lengths[i] + j; its shift is lengths[i] - 1 - j = ends[i] - 1 - pos
    shift = np.repeat(ends, lengths) - 1 - np.arange(total, dtype=np.int64)
    return ((np.repeat(np.asarray(codes, dtype=np.uint64), lengths) >> shift.astype(np.uint64)) & 1).astype(np.uint8)


def pack_short_codes(codes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`pack_codes` for codes of at most :data:`MAX_CODE_BITS` bits, without a bit per array element on
    the way (:func:`_pack_windows`)."""
    lengths = np.asarray(lengths)
    if lengths.size == 0 or int(lengths.max()) == 0:
        return np.zeros(0, dtype=np.uint8)
    if int(lengths.max()) > MAX_CODE_BITS:
        return pack_codes(codes, lengths)
    codes = np.asarray(codes)
    if int(lengths.min()) == 0:  # empty codes write nothing
        codes, lengths = codes[lengths > 0], lengths[lengths > 0]
    lengths = lengths.astype(np.uint8)
    return _pack_windows(codes.astype(np.uint32), lengths, np.cumsum(lengths, dtype=np.int64))


def _pack_windows(codes: np.ndarray, lengths: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Codes (uint32) of 1 to 16 bits (``lengths``, uint8; ``ends`` their running sum, int64) as a bit array:
    each code, shifted to its bit offset, lies in the 24-bit window of the byte it starts in; the windows of the
    codes that start in one byte are added (their bits are disjoint; a weighted histogram over the start bytes),
    and each byte is its own window's top byte plus the overhanging bytes of the two windows before it."""
    total = int(ends[-1])
    start = ends - lengths
    byte = start >> 3
    shift = np.uint8(24) - lengths
    shift -= (start & 7).astype(np.uint8)
    window = codes << shift
    acc = np.zeros(((total + 7) >> 3) + 2, dtype=np.uint32)
    acc[2:] = np.bincount(byte, weights=window, minlength=acc.size - 2)  # exact: sums below 2^24 in float64
    packed = acc[2:] >> 16
    packed |= (acc[1:-1] >> 8) & 0xFF
    packed |= acc[:-2] & 0xFF
    return np.unpackbits(packed.astype(np.uint8))[:total]


class BitWriter:
    """Collects bit arrays and fixed-width fields; :meth:`to_bytes` packs them (zero padding to a whole byte)."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self.n_bits = 0

    def bits(self, bits: np.ndarray) -> None:
        bits = np.asarray(bits, dtype=np.uint8)
        self._parts.append(bits)
        self.n_bits += int(bits.size)

    def uint(self, value: int, n_bits: int) -> None:
        self.bits(uint_bits(value, n_bits))

    def float32(self, value: float) -> None:
        self.uint(int(np.array(value, dtype=np.float32).view(np.uint32)), 32)

    def to_bytes(self) -> bytes:
        if not self._parts:
            return b""
        return np.packbits(np.concatenate(self._parts)).tobytes()


class BitReader:
    """Reads fields and bit runs from packed bytes (MSB first), raising :class:`CodingError` past the end.

    The bytes stay packed: :meth:`uint` and :meth:`take` unpack only the bytes they read, and the Rice and Huffman
    decoders read the packed bytes with compiled kernels. ``bits_array``, the whole stream as one uint8 (0/1) per
    bit, is unpacked on first use, for readers that search it as a bit array."""

    def __init__(self, data: bytes) -> None:
        self.data = np.frombuffer(data, dtype=np.uint8)
        self.n_bits = 8 * int(self.data.size)
        self.pos = 0
        self._bits: np.ndarray | None = None

    @property
    def bits_array(self) -> np.ndarray:
        if self._bits is None:
            self._bits = np.unpackbits(self.data)
        return self._bits

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.n_bits:
            raise CodingError(f"bit stream truncated: need {n} bits at {self.pos} of {self.n_bits}")

    def take(self, n: int) -> np.ndarray:
        self._need(n)
        if self._bits is not None:
            out = self._bits[self.pos : self.pos + n]
        else:
            first = self.pos >> 3
            skip = self.pos & 7
            out = np.unpackbits(self.data[first : (self.pos + n + 7) >> 3])[skip : skip + n]
        self.pos += n
        return out

    def skip(self, n: int) -> int:
        """Pass over the next ``n`` bits; returns the position of the first."""
        self._need(n)
        self.pos += n
        return self.pos - n

    def uint(self, n_bits: int) -> int:
        self._need(n_bits)
        if n_bits == 0:
            return 0
        first, last = self.pos >> 3, (self.pos + n_bits + 7) >> 3
        word = int.from_bytes(self.data[first:last].tobytes(), "big")
        value = (word >> (8 * (last - first) - (self.pos & 7) - n_bits)) & ((1 << n_bits) - 1)
        self.pos += n_bits
        return value

    def float32(self) -> float:
        return float(np.array(self.uint(32), dtype=np.uint32).view(np.float32))


@kernel
def _rice_kernel(data: np.ndarray, pos: int, n_bits: int, n: int, b: int, limit: int, out: np.ndarray) -> int:
    """``n`` Rice values of parameter ``b`` at bit ``pos`` of ``data`` into ``out``: their unary quotients (ones
    ended by a zero) from ``pos`` on, their terminators before bit ``limit``, then their ``b``-bit remainders.
    Returns the bit after the last remainder, or -1 - (terminators found) when fewer than ``n`` are found
    before ``limit``, or -1 - n when the remainders run past ``n_bits``."""
    found = 0
    q = 0
    at = pos
    while found < n and at < limit:
        byte = data[at >> 3]
        if byte == 0xFF and (at & 7) == 0 and at + 8 <= limit:
            q += 8
            at += 8
            continue
        if (byte >> (7 - (at & 7))) & 1:
            q += 1
        else:
            out[found] = q
            found += 1
            q = 0
        at += 1
    if found < n:
        return -1 - found
    if b == 0:
        return at
    if at + n * b > n_bits:
        return -1 - n
    n_bytes = data.size
    for i in range(n):
        rem = 0
        left = b
        while left > 0:  # up to 24 bits at a time from the 4 bytes at ``at``
            take = min(left, 24)
            first = at >> 3
            word = 0
            for t in range(4):
                word = (word << 8) | (data[first + t] if first + t < n_bytes else 0)
            rem = (rem << take) | ((word >> (32 - (at & 7) - take)) & ((1 << take) - 1))
            at += take
            left -= take
        out[i] = (out[i] << b) | rem
    return at


def _read_rice(reader: BitReader, n: int, span: int | None = None) -> tuple[np.ndarray, int]:
    """(the ``n`` values, ``b``) of a Rice field at the reader (its ``b`` read first); their unary terminators
    are searched in the next ``span`` bits (the rest of the stream when None)."""
    b = reader.uint(RICE_B_BITS)
    if n == 0:
        return np.zeros(0, dtype=np.int64), b
    out = np.empty(n, dtype=np.int64)
    limit = reader.n_bits if span is None else min(reader.n_bits, reader.pos + span)
    end = _rice_kernel(reader.data, reader.pos, reader.n_bits, n, b, limit, out)
    if end < 0:
        found = -1 - end
        if found < n:
            raise CodingError(f"Rice stream truncated: {found} of {n} values")
        raise CodingError(f"bit stream truncated: need {n * b} bits of remainders past {reader.pos}")
    reader.pos = int(end)
    return out, b


# --- Golomb-Rice ----------------------------------------------------------------------------------------------


def rice_bits(values: np.ndarray, b: int) -> int:
    """Exact size [bits] of ``values`` (non-negative ints) Rice-coded with parameter ``b`` (no header)."""
    values = np.asarray(values, dtype=np.int64)
    return int((values >> b).sum()) + values.size * (b + 1)


def rice_parameter(values: np.ndarray) -> int:
    """The Rice parameter ``b`` (divisor ``2**b``) that minimises the exact coded size of ``values`` (the
    smallest such b in ``[0, bit_length(max)]``).

    The size ``f(b) = sum floor(v / 2^b) + n (b + 1)`` is convex in b: ``f(b) - f(b+1) = sum ceil(floor(v / 2^b)
    / 2) - n`` does not increase with b. So a walk from ``b0 = floor(log2(mean))`` (down while not larger, else up
    while smaller) ends at the smallest minimiser after a few sizes instead of all of them.
    """
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return 0
    top = max(int(values.max()).bit_length(), 1)
    mean = float(values.mean())
    b = min(top, max(0, math.floor(math.log2(mean)))) if mean >= 1 else 0
    size = rice_bits(values, b)
    while b > 0 and (lower := rice_bits(values, b - 1)) <= size:
        b, size = b - 1, lower
    while b < top and (higher := rice_bits(values, b + 1)) < size:
        b, size = b + 1, higher
    return b


def rice_head(writer: Any, values: np.ndarray, b: int | None) -> tuple[np.ndarray, int, np.ndarray]:
    """Check ``values`` (non-negative ints), choose ``b`` (optimal when None) and write it (``writer``: anything
    with ``uint``): the start of a Rice field. Returns the values as int64, ``b`` and the quotients ``values >> b``."""
    values = np.asarray(values, dtype=np.int64)
    if values.size and values.min() < 0:
        raise CodingError("Rice coding needs non-negative integers")
    b = rice_parameter(values) if b is None else int(b)
    writer.uint(b, RICE_B_BITS)
    return values, b, values >> b


def rice_encode(writer: BitWriter, values: np.ndarray, b: int | None = None) -> None:
    """Write ``values`` (non-negative ints; the count is known to the decoder) as ``[b][unary quotients]
    [b-bit remainders]``, ``b`` optimal when not given."""
    values, b, q = rice_head(writer, values, b)
    unary = np.ones(int(q.sum()) + values.size, dtype=np.uint8)
    unary[np.cumsum(q + 1) - 1] = 0  # q ones, then a terminating zero
    writer.bits(unary)
    if b:
        writer.bits(pack_codes((values & ((1 << b) - 1)).astype(np.uint64), np.full(values.size, b)))


def rice_decode(reader: BitReader, n: int) -> np.ndarray:
    """Read ``n`` Rice-coded values written by :func:`rice_encode` (:func:`rice_decode_fast`)."""
    return rice_decode_fast(reader, n)


def rice_decode_fast(reader: BitReader, n: int) -> np.ndarray:
    """:func:`rice_decode`: the unary quotients and remainders read from the packed bytes by one compiled loop
    (:func:`_rice_kernel`), the terminators searched in the rest of the stream."""
    return _read_rice(reader, n)[0]


def rice_decode_positions(reader: BitReader, n: int, span: int) -> np.ndarray:
    """Sorted positions ``cumsum(gaps + 1) - 1`` of ``n`` gaps read as :func:`rice_decode` reads them, when the
    positions are below ``span``: then the unary quotients take at most ``span`` bits, and only those are searched
    for their terminators."""
    gaps, _ = _read_rice(reader, n, span)
    return np.cumsum(gaps + 1) - 1


# --- canonical Huffman ----------------------------------------------------------------------------------------


def entropy_bits(counts: np.ndarray) -> float:
    """Empirical (zeroth-order) entropy of a symbol histogram times its count [bits]: ``-sum c log2(c/n)``."""
    counts = np.asarray(counts, dtype=np.float64)
    counts = counts[counts > 0]
    n = counts.sum()
    return float(-(counts * np.log2(counts / n)).sum()) if n else 0.0


def _plain_lengths(counts: np.ndarray) -> np.ndarray:
    """Huffman code lengths by the textbook merge of the two least counts (ties: leaves by symbol, then merged
    nodes in the order they were made). A node's length is its depth, found from parent links after the merges
    (linear), rather than by adding 1 to every leaf under each merge.

    The merges take two queues instead of a heap: the leaves sorted by (count, symbol), and the merged nodes in
    the order they were made, whose counts never decrease. The least (count, tie) node is the lesser head, a
    leaf on equal counts (a leaf's tie is below every merged node's), so the merges are the heap's, in order.
    """
    used = np.flatnonzero(counts)
    lengths = np.zeros(counts.size, dtype=np.int64)
    u = int(used.size)
    if u <= 1:
        return lengths
    leaf_counts = counts[used].astype(np.int64)
    leaves = np.argsort(leaf_counts, kind="stable").tolist()  # leaf nodes 0..u-1 by (count, symbol)
    leaf_count = leaf_counts.tolist()
    merged: list[int] = []  # counts of merged nodes u, u+1, ...
    parent = [-1] * (2 * u - 1)
    li = mi = 0
    for node in range(u, 2 * u - 1):
        total = 0
        for _ in range(2):
            if li < u and (mi >= len(merged) or leaf_count[leaves[li]] <= merged[mi]):
                child, c = leaves[li], leaf_count[leaves[li]]
                li += 1
            else:
                child, c = u + mi, merged[mi]
                mi += 1
            parent[child] = node
            total += c
        merged.append(total)
    depth = [0] * len(parent)
    for node in range(len(parent) - 2, -1, -1):  # a parent is made after its children
        depth[node] = depth[parent[node]] + 1
    lengths[used] = depth[:u]
    return lengths


def huffman_lengths(counts: np.ndarray, max_bits: int = MAX_CODE_BITS) -> np.ndarray:
    """Huffman code length of every symbol of histogram ``counts`` (0 for unused symbols), at most ``max_bits``.

    A single used symbol gets length 0 (it costs no payload bits). When the optimal code is longer than
    ``max_bits`` the counts are flattened (halved, keeping used symbols >= 1) until it fits.
    """
    counts = np.asarray(counts, dtype=np.int64)
    used = np.count_nonzero(counts)
    if used > 1 << max_bits:
        raise CodingError(f"{used} symbols cannot have codes of at most {max_bits} bits")
    if used <= 1:
        return np.zeros(counts.size, dtype=np.int64)
    work = counts.copy()
    while True:
        lengths = _plain_lengths(work)
        if lengths.max() <= max_bits:
            return lengths
        work = np.where(work > 0, (work >> 1) | 1, 0)


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """Canonical codes: symbols sorted by (length, symbol) get consecutive codes."""
    codes = np.zeros(lengths.size, dtype=np.uint64)
    order = np.lexsort((np.arange(lengths.size), lengths))
    order = order[lengths[order] > 0]
    code, prev = 0, 0
    for s in order:
        code <<= int(lengths[s]) - prev
        prev = int(lengths[s])
        codes[s] = code
        code += 1
    return codes


def huffman_block_lengths(sym_lengths: np.ndarray) -> np.ndarray:
    block = 1 << _BLOCK_LOG2
    if sym_lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(sym_lengths, np.arange(0, sym_lengths.size, block))


def huffman_table_gaps(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    used = np.flatnonzero(lengths)
    gaps = np.diff(used, prepend=-1) - 1
    return used, gaps


def huffman_bits(symbols: np.ndarray, alphabet_size: int) -> int:
    """Exact size [bits] :func:`huffman_encode` writes for ``symbols`` (table, block lengths and payload)."""
    symbols = np.asarray(symbols, dtype=np.int64)
    counts = np.bincount(symbols, minlength=alphabet_size)
    lengths = huffman_lengths(counts)
    size = 2 * COUNT_BITS
    used, gaps = huffman_table_gaps(lengths)
    n_used = int(np.count_nonzero(counts))
    if n_used <= 1:
        return size + (COUNT_BITS if n_used == 1 else 0)
    b = rice_parameter(gaps)
    size += RICE_B_BITS + rice_bits(gaps, b) + 4 * used.size
    blocks = huffman_block_lengths(lengths[symbols])
    size += RICE_B_BITS + rice_bits(blocks, rice_parameter(blocks))
    return size + int(blocks.sum())


def huffman_symbols(symbols: np.ndarray, alphabet_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``symbols`` as int64 and their histogram over [0, alphabet_size) (what a Huffman code is built from);
    raises :class:`CodingError` for a symbol outside the alphabet."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if symbols.size and (symbols.min() < 0 or symbols.max() >= alphabet_size):
        raise CodingError(f"symbols outside the alphabet [0, {alphabet_size})")
    return symbols, np.bincount(symbols, minlength=alphabet_size)


def write_table_head(writer: Any, counts: np.ndarray) -> int:
    """The head of a Huffman stream for the histogram ``counts`` (``writer``: anything with ``uint``): alphabet
    size, used-symbol count and, when one symbol is used, that symbol. Returns the used-symbol count: a table and
    code bits follow only when it is above 1."""
    writer.uint(counts.size, COUNT_BITS)
    n_used = int(np.count_nonzero(counts))
    writer.uint(n_used, COUNT_BITS)
    if n_used == 1:
        writer.uint(int(np.flatnonzero(counts)[0]), COUNT_BITS)
    return n_used


def huffman_encode(writer: BitWriter, symbols: np.ndarray, alphabet_size: int) -> None:
    """Write ``symbols`` (ints in [0, alphabet_size); the count is known to the decoder) with a canonical Huffman
    code built from their own histogram (:func:`huffman_encode_counted` of that histogram).

    Layout: alphabet size, used-symbol count, [single symbol] or [Rice gaps between used symbols, 4-bit
    (length - 1) per used symbol, Rice bit lengths of each block of 512 symbols, code bits].
    """
    huffman_encode_counted(writer, *huffman_symbols(symbols, alphabet_size))


def huffman_decode(reader: BitReader, n: int) -> np.ndarray:
    """Read ``n`` symbols written by :func:`huffman_encode` (all blocks decoded in parallel,
    :func:`huffman_decode_fast`)."""
    return huffman_decode_fast(reader, n)


def huffman_encode_counted(writer: BitWriter, symbols: np.ndarray, counts: np.ndarray,
                           lengths: np.ndarray | None = None) -> None:  # fmt: skip
    """What :func:`huffman_encode` writes for ``symbols`` over the alphabet of ``counts`` (their histogram,
    ``counts.size`` symbols), given that histogram and optionally its :func:`huffman_lengths`; the code bits and
    block lengths come from :func:`_pack_symbols`."""
    symbols = np.asarray(symbols)
    counts = np.asarray(counts, dtype=np.int64)
    lengths = huffman_lengths(counts) if lengths is None else np.asarray(lengths, dtype=np.int64)
    used, gaps = huffman_table_gaps(lengths)
    if write_table_head(writer, counts) < 2:
        return
    rice_encode(writer, gaps)
    writer.bits(pack_codes(lengths[used] - 1, np.full(used.size, 4)))
    bits, block_bits = _pack_symbols(symbols, canonical_codes(lengths).astype(np.uint32), lengths.astype(np.uint8))
    rice_encode(writer, block_bits)
    writer.bits(bits)


def _pack_symbols(symbols: np.ndarray, codes: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The code bits of ``symbols`` (codes uint32 and lengths uint8 by symbol, 1 to 16 bits) and the bit length
    of each block of 512, as :func:`_pack_windows` computes them but over runs of 2^14 symbols (a run's arrays
    stay in the CPU cache), each run's windows added into the bytes it covers."""
    n = symbols.size
    block = 1 << _BLOCK_LOG2
    run = 1 << 14  # a multiple of the block: blocks do not straddle runs
    acc = np.zeros(2 * n + 3, dtype=np.uint32)  # 16 bits at most per code: 2 n bytes, + 2 before the first
    block_bits = []
    offset = 0
    for r0 in range(0, n, run):
        sym = symbols[r0 : r0 + run]
        length = lengths[sym]
        ends = np.cumsum(length, dtype=np.int64)
        block_bits.append(np.diff(ends[np.minimum(np.arange(block, ends.size + block, block), ends.size) - 1],
                                  prepend=0))  # fmt: skip
        start = ends - length
        start += offset
        byte = start >> 3
        shift = np.uint8(24) - length
        shift -= (start & 7).astype(np.uint8)
        window = codes[sym] << shift
        first = int(byte[0])
        sums = np.bincount(byte - first, weights=window)  # exact: sums below 2^24 in float64
        acc[first + 2 : first + 2 + sums.size] += sums.astype(np.uint32)
        offset += int(ends[-1])
    acc = acc[: ((offset + 7) >> 3) + 2]
    packed = acc[2:] >> 16
    packed |= (acc[1:-1] >> 8) & 0xFF
    packed |= acc[:-2] & 0xFF
    return np.unpackbits(packed.astype(np.uint8))[:offset], np.concatenate(block_bits)


@kernel
def _huffman_kernel(code: np.ndarray, n: int, starts: np.ndarray, width: int, table_sym: np.ndarray,
                    table_len: np.ndarray, out: np.ndarray) -> bool:
    """``n`` symbols of the canonical code whose ``width``-bit windows ``table_sym``/``table_len`` map to a symbol
    and its code length, read from the code bits ``code`` (bytes, zero after the last code bit and padded with 8
    zero bytes), block by block of 512 from each block's start (``starts``). Returns whether every block but the
    last ended where the next one starts."""
    block = 512
    n_blocks = starts.size
    keep = (1 << width) - 1
    same = True
    for k in range(n_blocks):
        pos = starts[k]
        at = pos >> 3
        buf = 0  # the next ``have`` bits of the stream in its low bits, MSB first
        have = 0
        skip = pos & 7
        first = k * block
        steps = block if k < n_blocks - 1 else n - first
        for i in range(steps):
            while have <= 48:
                buf = (buf << 8) | code[at]
                at += 1
                have += 8
            if skip:
                have -= skip
                buf &= (1 << have) - 1
                skip = 0
            w = (buf >> (have - width)) & keep
            out[first + i] = table_sym[w]
            used = table_len[w]
            have -= used
            buf &= (1 << have) - 1
            pos += used
        if k < n_blocks - 1:
            if pos != starts[k + 1]:
                same = False
    return same


def huffman_decode_fast(reader: BitReader, n: int) -> np.ndarray:
    """:func:`huffman_decode`: the canonical code's table of all ``width``-bit windows (``width`` its longest
    code), then the symbols read from the packed bytes by one compiled loop (:func:`_huffman_kernel`), each
    block of 512 from the start its bit length gives; every block but the last must end where the next starts."""
    alphabet_size = reader.uint(COUNT_BITS)
    n_used = reader.uint(COUNT_BITS)
    if n_used == 1:
        return np.full(n, reader.uint(COUNT_BITS), dtype=np.int64)
    if n_used == 0:
        if n:
            raise CodingError(f"Huffman stream holds no symbols, {n} expected")
        return np.zeros(0, dtype=np.int64)
    used = np.cumsum(rice_decode_fast(reader, n_used) + 1) - 1
    if used.size and used[-1] >= alphabet_size:
        raise CodingError("Huffman table names a symbol outside its alphabet")
    lengths = np.zeros(alphabet_size, dtype=np.int64)
    lengths[used] = reader.take(4 * n_used).reshape(n_used, 4).astype(np.int64) @ np.array([8, 4, 2, 1]) + 1
    block = 1 << _BLOCK_LOG2
    n_blocks = math.ceil(n / block)
    block_bits = rice_decode_fast(reader, n_blocks)
    total = int(block_bits.sum())
    start = reader.pos
    reader.take(total)  # raises when the stream is shorter
    width = int(lengths.max())
    codes = canonical_codes(lengths)
    table_sym = np.zeros(1 << width, dtype=np.int64)
    table_len = np.zeros(1 << width, dtype=np.int64)
    for s in used:
        lo = int(codes[s]) << (width - int(lengths[s]))
        hi = (int(codes[s]) + 1) << (width - int(lengths[s]))
        table_sym[lo:hi] = s
        table_len[lo:hi] = lengths[s]
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    starts = np.concatenate([[0], np.cumsum(block_bits)[:-1]]).astype(np.int64)
    code = np.zeros(((total + 7) >> 3) + 8 + block * MAX_CODE_BITS // 8, dtype=np.uint8)  # zeros past the end
    if total:
        skip = start & 7
        bits = np.unpackbits(reader.data[start >> 3 : (start + total + 7) >> 3])[skip : skip + total]
        code[: (total + 7) >> 3] = np.packbits(bits)
    if not _huffman_kernel(code, n, starts, width, table_sym, table_len, out):
        raise CodingError("Huffman block lengths do not match the decoded code lengths")
    return out


class HuffmanMemo:
    """:func:`huffman_lengths` for a run of histograms (the budget search's), by a compiled merge: the two-queue
    merge of :func:`_plain_lengths` (leaves by count then symbol, a leaf first on equal counts) and the flattening
    of :func:`huffman_lengths`, the same steps in a loop, so the lengths are :func:`huffman_lengths`' to the bit.
    (It kept each level's merge and reused it for histograms that would take the same steps while the merge was
    interpreted Python; compiled, the merge of ~700 symbols costs less than that check.)"""

    def __init__(self, max_bits: int = MAX_CODE_BITS) -> None:
        self.max_bits = max_bits

    def lengths(self, counts: np.ndarray) -> np.ndarray:
        counts = np.asarray(counts, dtype=np.int64)
        used = np.flatnonzero(counts)
        if used.size <= 1 or used.size > 1 << self.max_bits:
            return huffman_lengths(counts, self.max_bits)
        if counts[used].min() < 0 or counts[used].max() >= 1 << 62:  # a merged count compared could leave int64
            return huffman_lengths(counts, self.max_bits)
        lengths = np.zeros(counts.size, dtype=np.int64)
        lengths[used] = self._merge(counts[used], self.max_bits)
        return lengths

    @staticmethod
    @kernel
    def _merge(work, max_bits):  # pragma: no cover - compiled
        """The code lengths of the used symbols' counts ``work`` (all in [1, 2^62), at least 2 and at most
        2^max_bits of them): :func:`_plain_lengths`' merge and depths, repeated on ``(work >> 1) | 1`` while a
        length exceeds ``max_bits``. A merged count is compared with a leaf only while leaves are left, and is then
        the sum of two counts at most that leaf's, below 2^63: int64 holds every count that is compared."""
        u = work.size
        work = work.copy()
        merged = np.empty(u - 1, dtype=np.int64)  # counts of merged nodes u, u+1, ...
        parent = np.empty(2 * u - 1, dtype=np.int64)
        depth = np.empty(2 * u - 1, dtype=np.int64)
        while True:
            leaves = np.argsort(work, kind="mergesort")  # stable: by (count, symbol)
            li = 0
            mi = 0
            for node in range(u, 2 * u - 1):
                total = 0
                for _ in range(2):  # the two lightest of the queues' fronts, a leaf first on ties
                    if li < u and (mi >= node - u or work[leaves[li]] <= merged[mi]):
                        child = leaves[li]
                        total += work[child]
                        li += 1
                    else:
                        child = u + mi
                        total += merged[mi]
                        mi += 1
                    parent[child] = node
                merged[node - u] = total
            depth[2 * u - 2] = 0
            longest = 0
            for node in range(2 * u - 3, -1, -1):  # a parent is made after its children
                depth[node] = depth[parent[node]] + 1
                if node < u and depth[node] > longest:
                    longest = depth[node]
            if longest <= max_bits:
                return depth[:u].copy()
            for i in range(u):
                work[i] = (work[i] >> 1) | 1
