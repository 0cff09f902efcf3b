"""The plain byte-exact writer and reader of the codecs' payloads: the oracle the charged sizes are held to.

Bits are written MSB first, and a payload is its fields' bits followed by zero bits up to a whole byte (the
padding rule of ``docs/wire_formats.md``). Everything here is numpy over arrays of 0/1 bits, written for reading,
not for speed: the codecs size their payloads from statistics (:mod:`.ops`) and only ``output.payloads`` and the
tests write or read bytes.

Fields: unsigned integers and float32s, bit arrays, a Rice field (6-bit parameter b, the unary quotients
``v >> b`` as that many ones and a zero, then the b-bit remainders) and a Huffman stream (alphabet size, used count,
then the single symbol, or the Rice gaps between the used symbols, each one's code length - 1 in 4 bits and the
canonical code bits), and the header every codec starts with.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from edgefl.compression.ops import COUNT_BITS, RICE_B_BITS, canonical_codes, huffman_lengths, rice_size
from edgefl.errors import EdgeflError

__all__ = ["WireError", "BitWriter", "BitReader", "header_bits", "write_header", "read_header"]


class WireError(EdgeflError, ValueError):
    """A payload that cannot be read: wrong magic or version, or it ends early."""


def _uint_bits(values: np.ndarray, width: int) -> np.ndarray:
    """The ``width``-bit MSB-first binary digits of each of ``values``, one row each."""
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((np.asarray(values, dtype=np.int64)[:, None] >> shifts) & 1).astype(np.uint8)


class BitWriter:
    """Collects fields as arrays of bits; :meth:`to_bytes` pads with zeros to a whole byte."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []

    @property
    def n_bits(self) -> int:
        return sum(p.size for p in self.parts)

    def bits(self, bits: np.ndarray) -> None:
        self.parts.append(np.asarray(bits, dtype=np.uint8).reshape(-1))

    def uint(self, value: int, width: int) -> None:
        if not 0 <= int(value) < 1 << width:
            raise WireError(f"{value} does not fit in {width} bits")
        self.bits(_uint_bits(np.array([int(value)]), width))

    def float32(self, value: float) -> None:
        self.uint(struct.unpack(">I", struct.pack(">f", value))[0], 32)

    def rice(self, values: np.ndarray) -> None:
        """A Rice field of the non-negative integers ``values`` at the parameter :func:`~.ops.rice_size` picks."""
        values = np.asarray(values, dtype=np.int64).reshape(-1)
        _, b = rice_size(values)
        self.uint(b, RICE_B_BITS)
        q = values >> b
        unary = np.ones(int(q.sum()) + values.size, dtype=np.uint8)
        unary[np.cumsum(q + 1) - 1] = 0  # each quotient's ones end with a zero
        self.bits(unary)
        if b:
            self.bits(_uint_bits(values & ((1 << b) - 1), b))

    def huffman(self, symbols: np.ndarray, alphabet: int) -> None:
        """A Huffman stream of ``symbols`` in [0, alphabet) with the canonical code of their own histogram."""
        symbols = np.asarray(symbols, dtype=np.int64).reshape(-1)
        counts = np.bincount(symbols, minlength=alphabet)
        if counts.size != alphabet:
            raise WireError(f"symbols outside the alphabet [0, {alphabet})")
        used = np.flatnonzero(counts)
        self.uint(alphabet, COUNT_BITS)
        self.uint(used.size, COUNT_BITS)
        if used.size == 1:
            self.uint(int(used[0]), COUNT_BITS)
        if used.size <= 1:
            return
        lengths = huffman_lengths(counts)
        self.rice(np.diff(used, prepend=-1) - 1)
        self.bits(_uint_bits(lengths[used] - 1, 4))
        codes, lens = canonical_codes(lengths)[symbols], lengths[symbols]
        # bit t of symbol i's code, MSB first: code >> (len - 1 - t) & 1
        owner = np.repeat(np.arange(symbols.size), lens)
        t = np.arange(owner.size) - np.repeat(np.cumsum(lens) - lens, lens)
        self.bits((codes[owner] >> (lens[owner] - 1 - t)) & 1)

    def to_bytes(self) -> bytes:
        bits = np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.uint8)
        return np.packbits(bits).tobytes()  # packbits pads the last byte with zeros


class BitReader:
    """Reads the fields :class:`BitWriter` wrote, in order."""

    def __init__(self, payload: bytes) -> None:
        self.data = np.unpackbits(np.frombuffer(payload, dtype=np.uint8))
        self.pos = 0

    def bits(self, n: int) -> np.ndarray:
        if self.pos + n > self.data.size:
            raise WireError(f"payload ends after {self.data.size} bits; {self.pos + n} needed")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uint(self, width: int) -> int:
        value = 0
        for bit in self.bits(width).tolist():
            value = value << 1 | bit
        return value

    def float32(self) -> float:
        return struct.unpack(">f", struct.pack(">I", self.uint(32)))[0]

    def _uints(self, m: int, width: int) -> np.ndarray:
        if width == 0:
            return np.zeros(m, dtype=np.int64)
        rows = self.bits(m * width).reshape(m, width).astype(np.int64)
        return rows @ (1 << np.arange(width - 1, -1, -1, dtype=np.int64))

    def rice(self, m: int) -> np.ndarray:
        """``m`` values of a Rice field."""
        b = self.uint(RICE_B_BITS)
        zeros = np.flatnonzero(self.data[self.pos :] == 0)[:m]
        if zeros.size < m:
            raise WireError("payload ends inside a Rice field")
        q = np.diff(zeros, prepend=-1) - 1
        self.pos += int(zeros[-1]) + 1 if m else 0
        return (q << b) | self._uints(m, b)

    def huffman(self, n: int) -> np.ndarray:
        """``n`` symbols of a Huffman stream, decoded one code at a time."""
        alphabet, n_used = self.uint(COUNT_BITS), self.uint(COUNT_BITS)
        if n_used == 1:
            return np.full(n, self.uint(COUNT_BITS), dtype=np.int64)
        if n_used == 0:
            if n:
                raise WireError("a Huffman stream of no symbols cannot hold any")
            return np.zeros(0, dtype=np.int64)
        used = np.cumsum(self.rice(n_used) + 1) - 1
        lengths = np.zeros(alphabet, dtype=np.int64)
        lengths[used] = self._uints(n_used, 4) + 1
        codes = canonical_codes(lengths)
        table = {(int(lengths[s]), int(codes[s])): int(s) for s in used}
        out, bits, pos = np.empty(n, dtype=np.int64), self.data.tolist(), self.pos
        for i in range(n):
            code, length = 0, 0
            while (length, code) not in table:
                if length == 16 or pos >= len(bits):
                    raise WireError("payload holds no valid Huffman code here")
                code, length, pos = code << 1 | bits[pos], length + 1, pos + 1
            out[i] = table[length, code]
        self.pos = pos
        return out


def header_bits(shapes: Sequence[Sequence[int]], *, flag: bool) -> int:
    """Size [bits] of :func:`write_header`'s header for tensors of ``shapes``, with or without the flag bit."""
    return 8 + 4 + int(flag) + 8 + sum(4 + 32 * len(s) for s in shapes) + 32


def write_header(w: BitWriter, magic: int, version: int, shapes: Sequence[Sequence[int]], kept: int,
                 flag: bool | None) -> None:  # fmt: skip
    """magic (8), version (4), [flag (1)], tensor count (8), per tensor ndim (4) and dims (32 each), kept (32)."""
    w.uint(magic, 8)
    w.uint(version, 4)
    if flag is not None:
        w.uint(int(flag), 1)
    w.uint(len(shapes), 8)
    for shape in shapes:
        w.uint(len(shape), 4)
        for dim in shape:
            w.uint(dim, 32)
    w.uint(kept, 32)


def read_header(r: BitReader, magic: int, version: int, *, flag: bool) -> tuple[bool | None, list[tuple[int, ...]], int]:
    """(flag or None, shapes, kept) of a header; :class:`WireError` on another codec's magic or version."""
    got_magic, got_version = r.uint(8), r.uint(4)
    if (got_magic, got_version) != (magic, version):
        raise WireError(f"payload has magic {got_magic:#x} version {got_version}; expected {magic:#x} version {version}")
    value = bool(r.uint(1)) if flag else None
    shapes = [tuple(r.uint(32) for _ in range(r.uint(4))) for _ in range(r.uint(8))]
    return value, shapes, r.uint(32)
