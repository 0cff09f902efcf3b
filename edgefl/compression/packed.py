"""Bit streams of :mod:`.coding`'s format written from variable-length codes packed into 64-bit words, and read
with fewer passes (AnycostFL Sec. III-C 3)).

:class:`CodeWriter` writes what :class:`~.coding.BitWriter` with :func:`~.coding.rice_encode` and
:func:`~.coding.huffman_encode` writes, byte for byte, without an array of one byte per bit; :func:`read_rice`
and :func:`read_huffman` read what :func:`~.coding.rice_decode` and :func:`~.coding.huffman_decode` read, from
the packed bytes;
:func:`huffman_bits_of` gives :func:`~.coding.huffman_bits` from a histogram and the blocks' code lengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgefl.compression.jit import kernel
from edgefl.compression.coding import (
    COUNT_BITS,
    RICE_B_BITS,
    BitReader,
    CodingError,
    canonical_codes,
    huffman_table_gaps,
    huffman_decode_fast,
    rice_decode_fast,
    huffman_lengths,
    huffman_symbols,
    rice_head,
    rice_bits,
    rice_parameter,
    write_table_head,
)

__all__ = ["CodeWriter", "HuffmanCoded", "block_code_bits", "huffman_bits_of", "read_huffman", "read_rice"]


@dataclass(frozen=True)
class HuffmanCoded:
    """Symbols (int64, in the alphabet of ``counts``) with what sizing and writing their Huffman stream both need:
    their histogram ``counts``, its :func:`huffman_lengths` and each 512-symbol block's bit length. Computed once,
    it sizes the stream (:meth:`bits`, :func:`~.coding.huffman_bits`) and writes it (:meth:`CodeWriter.huffman_coded`,
    the bytes of :meth:`CodeWriter.huffman`)."""

    symbols: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray
    blocks: np.ndarray

    @classmethod
    def of(cls, symbols: np.ndarray, counts: np.ndarray) -> HuffmanCoded:
        """From symbols (int64) in ``[0, counts.size)`` and their histogram ``counts``."""
        lengths = huffman_lengths(counts)
        return cls(symbols, counts, lengths, block_code_bits(symbols, lengths))

    def bits(self) -> int:
        """:func:`~.coding.huffman_bits` of the symbols."""
        return huffman_bits_of(self.counts, self.lengths, self.blocks)


@kernel
def _block_sums(symbols: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    block = 512
    for k in range(out.size):
        total = 0
        for i in range(k * block, min((k + 1) * block, symbols.size)):
            total += lengths[symbols[i]]
        out[k] = total


def block_code_bits(symbols: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`~.coding.huffman_block_lengths` of ``lengths[symbols]``: the code bits of each block of 512 symbols
    (int64), summed in one loop without the array of code lengths."""
    out = np.empty(-(-symbols.size // 512), dtype=np.int64)
    _block_sums(np.asarray(symbols), np.asarray(lengths, dtype=np.int64), out)
    return out


@kernel
def _put(out: np.ndarray, pos: int, code: int, length: int) -> None:
    """OR the low ``length`` (<= 32) bits of ``code`` into the zeroed bytes ``out`` at bit ``pos``, MSB first."""
    v = np.uint64(code & ((1 << length) - 1)) << np.uint64(40 - length - (pos & 7))
    at = pos >> 3
    for t in range(5):
        out[at + t] |= np.uint8((v >> np.uint64(32 - 8 * t)) & np.uint64(0xFF))


@kernel
def _put_codes(out: np.ndarray, pos: int, codes: np.ndarray, lengths: np.ndarray, width: int) -> int:
    """Codes (uint64, each in its low ``lengths[i]`` bits, or ``width`` bits when ``width`` > 0) at bit ``pos``;
    returns the bit after them."""
    for i in range(codes.size):
        length = width if width > 0 else lengths[i]
        code = codes[i]
        while length > 32:
            length -= 32
            _put(out, pos, np.int64(code >> np.uint64(length)), 32)
            pos += 32
        _put(out, pos, np.int64(code & np.uint64(0xFFFFFFFF)), length)
        pos += length
    return pos


@kernel
def _put_packed(out: np.ndarray, pos: int, packed: np.ndarray, n_bits: int) -> int:
    """The first ``n_bits`` bits of ``packed`` (bytes, MSB first, zero after them) at bit ``pos``."""
    shift = pos & 7
    at = pos >> 3
    for i in range((n_bits + 7) >> 3):
        byte = packed[i]
        out[at + i] |= byte >> shift
        if shift:
            out[at + i + 1] |= np.uint8((np.int64(byte) << (8 - shift)) & 0xFF)
    return pos + n_bits


@kernel
def _put_rice(out: np.ndarray, pos: int, values: np.ndarray, b: int) -> int:
    """:func:`~.coding.rice_encode`'s unary quotients (``v >> b`` ones and a zero each), then the ``b``-bit
    remainders, at bit ``pos``."""
    for i in range(values.size):
        q = values[i] >> b
        while q >= 32:
            _put(out, pos, 0xFFFFFFFF, 32)
            pos += 32
            q -= 32
        _put(out, pos, (1 << (q + 1)) - 2, q + 1)
        pos += q + 1
    if b:
        for i in range(values.size):
            _put(out, pos, values[i] & ((1 << b) - 1), b)
            pos += b
    return pos


@kernel
def _put_symbols(out: np.ndarray, pos: int, symbols: np.ndarray, codes: np.ndarray, lengths: np.ndarray) -> int:
    """The code ``codes[s]`` of ``lengths[s]`` (<= 32) bits of each symbol ``s`` at bit ``pos``."""
    for i in range(symbols.size):
        s = symbols[i]
        _put(out, pos, codes[s], lengths[s])
        pos += lengths[s]
    return pos


class CodeWriter:
    """:class:`BitWriter`'s stream kept as parts (fields, codes, bit arrays, Rice and Huffman runs) instead of one
    byte per bit, and written once by :meth:`to_bytes` into a zeroed byte buffer by compiled loops, each code
    ORed in at its bit position. :meth:`rice` and :meth:`huffman` write what :func:`rice_encode` and
    :func:`huffman_encode` write.
    """

    def __init__(self) -> None:
        self._parts: list[tuple] = []
        self._fields: list[tuple[int, int]] = []  # pending single fields (value, bits)
        self.n_bits = 0

    def _part(self, part: tuple, n_bits: int) -> None:
        self._flush()
        self._parts.append(part)
        self.n_bits += n_bits

    def _flush(self) -> None:
        if self._fields:
            codes = np.array([v for v, _ in self._fields], dtype=np.uint64)
            lengths = np.array([n for _, n in self._fields], dtype=np.int64)
            self._parts.append(("codes", codes, lengths, 0))
            self._fields = []

    def codes(self, codes: np.ndarray, lengths: np.ndarray | int) -> None:
        """Append ``codes`` (non-negative ints below ``2**lengths``), ``lengths`` (<= 64) per code or one for
        all."""
        codes = np.asarray(codes, dtype=np.uint64).reshape(-1)
        if codes.size == 0:
            return
        if np.ndim(lengths) == 0:
            if int(lengths) == 0:
                return
            self._part(("codes", codes, np.zeros(0, dtype=np.int64), int(lengths)), codes.size * int(lengths))
            return
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        self._part(("codes", codes, lengths, 0), int(lengths.sum()))

    def uint(self, value: int, n_bits: int) -> None:
        value = int(value)
        if value < 0 or value >= 1 << n_bits:
            raise CodingError(f"value {value} does not fit in {n_bits} unsigned bits")
        if n_bits:
            self._fields.append((value, n_bits))
            self.n_bits += n_bits

    def float32(self, value: float) -> None:
        self.uint(int(np.array(value, dtype=np.float32).view(np.uint32)), 32)

    def bits(self, bits: np.ndarray) -> None:
        """A bit array (uint8 or bool of 0/1)."""
        bits = np.asarray(bits).reshape(-1)
        packed = np.packbits(bits.view(np.uint8) if bits.dtype == bool else bits.astype(np.uint8, copy=False))
        self._part(("packed", packed, bits.size), bits.size)

    def rice(self, values: np.ndarray, b: int | None = None) -> None:
        """:func:`rice_encode`'s ``[b][unary quotients][b-bit remainders]``."""
        values, b, q = rice_head(self, values, b)
        self._part(("rice", values, b), int(q.sum()) + values.size * (b + 1))

    def huffman(self, symbols: np.ndarray, alphabet_size: int) -> None:
        """:func:`huffman_encode`'s table, block lengths and code bits."""
        symbols, counts = huffman_symbols(symbols, alphabet_size)
        self.huffman_coded(HuffmanCoded.of(symbols, counts))

    def huffman_coded(self, coded: HuffmanCoded) -> None:
        """:meth:`huffman` of symbols whose histogram, code lengths and block lengths are already known (a size
        computed before the payload is written: :meth:`HuffmanCoded.bits`)."""
        used, gaps = huffman_table_gaps(coded.lengths)
        if write_table_head(self, coded.counts) < 2:
            return
        self.rice(gaps)
        self.codes(coded.lengths[used] - 1, 4)
        self.rice(coded.blocks)
        codes = canonical_codes(coded.lengths).astype(np.int64)
        self._part(("symbols", coded.symbols, codes, coded.lengths), int(coded.blocks.sum()))

    def to_bytes(self) -> bytes:
        self._flush()
        out = np.zeros(((self.n_bits + 7) >> 3) + 8, dtype=np.uint8)
        pos = 0
        for part in self._parts:
            kind = part[0]
            if kind == "codes":
                pos = _put_codes(out, pos, part[1], part[2], part[3])
            elif kind == "packed":
                pos = _put_packed(out, pos, part[1], part[2])
            elif kind == "rice":
                pos = _put_rice(out, pos, part[1], part[2])
            else:
                pos = _put_symbols(out, pos, part[1], part[2], part[3])
        assert pos == self.n_bits
        return out[: (self.n_bits + 7) >> 3].tobytes()


def read_rice(reader: BitReader, n: int) -> np.ndarray:
    """Read ``n`` Rice-coded values written by :func:`~.coding.rice_encode` (or :meth:`CodeWriter.rice`): the
    shared decoder, :func:`~.coding.rice_decode_fast` (one compiled loop over the packed bytes)."""
    return rice_decode_fast(reader, n)


def huffman_bits_of(counts: np.ndarray, lengths: np.ndarray, block_bits: np.ndarray) -> int:
    """Exact size [bits] :func:`~.coding.huffman_encode` writes for symbols of histogram ``counts`` whose code
    lengths are ``lengths`` (``huffman_lengths(counts)``) and whose blocks of 512 symbols hold ``block_bits`` code
    bits each: :func:`~.coding.huffman_bits` without the symbols themselves."""
    size = 2 * COUNT_BITS
    n_used = int(np.count_nonzero(counts))
    if n_used <= 1:
        return size + (COUNT_BITS if n_used == 1 else 0)
    used, gaps = huffman_table_gaps(lengths)
    size += RICE_B_BITS + rice_bits(gaps, rice_parameter(gaps)) + 4 * used.size
    size += RICE_B_BITS + rice_bits(block_bits, rice_parameter(block_bits))
    return size + int(block_bits.sum())


def read_huffman(reader: BitReader, n: int) -> np.ndarray:
    """Read ``n`` symbols written by :func:`~.coding.huffman_encode` (or :meth:`CodeWriter.huffman`): the shared
    decoder, :func:`~.coding.huffman_decode_fast`."""
    return huffman_decode_fast(reader, n)

