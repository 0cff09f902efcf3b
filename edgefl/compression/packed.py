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

from edgefl.compression.coding import (
    COUNT_BITS,
    RICE_B_BITS,
    BitReader,
    CodingError,
    huffman_block_lengths,
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

__all__ = ["CodeWriter", "HuffmanCoded", "huffman_bits_of", "read_huffman", "read_rice"]


@dataclass(frozen=True)
class HuffmanCoded:
    """Symbols (int64, in the alphabet of ``counts``) with what sizing and writing their Huffman stream both need:
    their histogram ``counts``, its :func:`huffman_lengths`, each symbol's code length and each 512-symbol block's
    bit length. Computed once, it sizes the stream (:meth:`bits`, :func:`~.coding.huffman_bits`) and writes it
    (:meth:`CodeWriter.huffman_coded`, the bytes of :meth:`CodeWriter.huffman`)."""

    symbols: np.ndarray
    counts: np.ndarray
    lengths: np.ndarray
    sym_lengths: np.ndarray
    blocks: np.ndarray

    @classmethod
    def of(cls, symbols: np.ndarray, counts: np.ndarray) -> HuffmanCoded:
        """From symbols (int64) in ``[0, counts.size)`` and their histogram ``counts``."""
        lengths = huffman_lengths(counts)
        sym_lengths = lengths[symbols]
        return cls(symbols, counts, lengths, sym_lengths, huffman_block_lengths(sym_lengths))

    def bits(self) -> int:
        """:func:`~.coding.huffman_bits` of the symbols."""
        return huffman_bits_of(self.counts, self.lengths, self.blocks)


class CodeWriter:
    """:class:`BitWriter`'s stream kept as variable-length codes (``codes[i]`` in the low ``lengths[i]`` bits, at
    most 64, MSB first) instead of one byte per bit, and packed once by :meth:`to_bytes` into 64-bit words.

    Consecutive short codes are first joined into codes of at most 64 bits (``(c0 << l1) | c1`` ...), so the
    packing handles a few codes per word: a code lies in one word or straddles two, and the codes of a word never
    overlap, so each word is the integer sum of its codes' shifted bits. :meth:`rice` and :meth:`huffman` write
    what :func:`rice_encode` and :func:`huffman_encode` write.
    """

    def __init__(self) -> None:
        self._codes: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self.n_bits = 0

    def _append(self, codes: np.ndarray, lengths: np.ndarray) -> None:
        self._codes.append(codes)
        self._lengths.append(lengths)
        self.n_bits += int(lengths.sum())

    def codes(self, codes: np.ndarray, lengths: np.ndarray | int) -> None:
        """Append ``codes`` (non-negative ints below ``2**lengths``), ``lengths`` (<= 64) per code or one for
        all."""
        codes = np.asarray(codes, dtype=np.uint64).reshape(-1)
        if codes.size == 0:
            return
        if np.ndim(lengths) == 0:  # fixed width: ``group`` codes a word, the rest in one shorter code
            width = int(lengths)
            if width == 0:
                return
            group = max(1, min(64 // width, codes.size))
            whole = codes.size - codes.size % group
            rows = codes[:whole].reshape(-1, group)
            joined = rows[:, 0].copy()
            for t in range(1, group):
                joined <<= np.uint64(width)
                joined |= rows[:, t]
            self._append(joined, np.full(joined.size, group * width, dtype=np.int64))
            if whole < codes.size:
                tail = np.uint64(0)
                for c in codes[whole:]:
                    tail = (tail << np.uint64(width)) | c
                self._append(np.array([tail], dtype=np.uint64), np.array([(codes.size - whole) * width]))
            return
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        group = min(8, 64 // max(int(lengths.max()), 1))
        if group > 1:  # join ``group`` consecutive codes (zero-length codes pad the last group)
            pad = (-codes.size) % group
            if pad:
                codes = np.concatenate([codes, np.zeros(pad, dtype=np.uint64)])
                lengths = np.concatenate([lengths, np.zeros(pad, dtype=np.int64)])
            rows, widths = codes.reshape(-1, group), lengths.reshape(-1, group)
            joined, total = rows[:, 0].copy(), widths[:, 0].copy()
            for t in range(1, group):
                joined <<= widths[:, t].astype(np.uint64)
                joined |= rows[:, t]
                total += widths[:, t]
            codes, lengths = joined, total
        self._append(codes, lengths)

    def uint(self, value: int, n_bits: int) -> None:
        value = int(value)
        if value < 0 or value >= 1 << n_bits:
            raise CodingError(f"value {value} does not fit in {n_bits} unsigned bits")
        self.codes(np.array([value], dtype=np.uint64), n_bits)

    def float32(self, value: float) -> None:
        self.uint(int(np.array(value, dtype=np.float32).view(np.uint32)), 32)

    def bits(self, bits: np.ndarray) -> None:
        """A bit array (uint8 or bool of 0/1), as 64-bit codes of its packed bytes."""
        bits = np.asarray(bits).reshape(-1)
        packed = np.packbits(bits.view(np.uint8) if bits.dtype == bool else bits.astype(np.uint8, copy=False))
        whole, tail = divmod(bits.size, 64)
        if whole:
            words = packed[: 8 * whole].view(">u8").astype(np.uint64)
            self._append(words, np.full(whole, 64, dtype=np.int64))
        if tail:
            rest = packed[8 * whole :]
            self.codes(rest[:-1], 8)
            last = tail - 8 * (rest.size - 1)
            self.codes(rest[-1:] >> (8 - last), last)

    def rice(self, values: np.ndarray, b: int | None = None) -> None:
        """:func:`rice_encode`'s ``[b][unary quotients][b-bit remainders]``."""
        values, b, q = rice_head(self, values, b)
        if values.size and int(q.max()) >= 63:  # a quotient too long for one code: its unary bits one by one
            unary = np.ones(int(q.sum()) + values.size, dtype=np.uint8)
            unary[np.cumsum(q + 1) - 1] = 0
            self.bits(unary)
        else:  # q ones and a terminating zero: the code 2^(q+1) - 2 of q + 1 bits
            self.codes((np.uint64(2) << q.astype(np.uint64)) - np.uint64(2), q + 1)
        if b:
            self.codes(values & ((1 << b) - 1), b)

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
        self.codes(canonical_codes(coded.lengths)[coded.symbols], coded.sym_lengths)

    def to_bytes(self) -> bytes:
        if not self._codes:
            return b""
        codes = np.concatenate(self._codes)
        lengths = np.concatenate(self._lengths)
        if lengths.min() == 0:  # a group of zero-length codes
            codes, lengths = codes[lengths > 0], lengths[lengths > 0]
        if codes.size == 0:
            return b""
        ends = np.cumsum(lengths)
        total = int(ends[-1])
        start = ends - lengths
        offset = (start & 63).astype(np.uint64)
        aligned = codes << (64 - lengths).astype(np.uint64)  # the code in the top bits of a 64-bit word
        placed = aligned >> offset  # its bits in the word where it starts
        word = start >> 6
        words = np.zeros((total + 63) // 64, dtype=np.uint64)
        first = np.flatnonzero(np.diff(word, prepend=-1))  # first code of each word that holds a code start
        words[word[first]] = np.add.reduceat(placed, first)
        over = np.flatnonzero(offset + lengths.astype(np.uint64) > 64)  # straddling: the rest starts the next word
        words[word[over] + 1] |= aligned[over] << (64 - offset[over])
        return words.astype(">u8").view(np.uint8)[: (total + 7) // 8].tobytes()


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

