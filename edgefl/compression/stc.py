"""Sparse ternary compression (Sattler et al., "Robust and Communication-Efficient Federated Learning from Non-IID
Data", IEEE TNNLS 2019, Alg. 1): the k largest-magnitude elements of an update, each sent as +-mu with
mu = mean |kept| (:func:`edgefl.compression.quantize.ternary`); positions Golomb-Rice coded, one sign bit each.

Container (MSB first, padded to a whole byte): the header of :mod:`.container` without its kernel-wise flag, i.e.
magic (8 bits), version (4), tensor count (8), per tensor ndim (4) and dims (32 each), k (32); if k > 0: Rice gaps between the sorted kept positions (:func:`coding.rice_encode`),
mu (float32), one sign bit per kept element (1 = negative).

:class:`TernarySizer` gives the exact size for every k after one sort, so a caller can search the largest k that
fits a bit budget; the size is non-decreasing in k (a new position splits a gap: the Rice quotients shrink by at
most 2 while the code grows by b + 1 bits, plus a sign bit).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from edgefl.compression import coding, quantize, sparsify
from edgefl.compression.codec import Compressed
from edgefl.compression.container import (
    CodecError, decoded, flatten, header_bits, read_header, unflatten, unflatten_mask, write_header,
)  # fmt: skip

__all__ = ["TernarySizer", "encode_ternary", "decode_ternary"]

_MAGIC, _VERSION = 0xB7, 1


class TernarySizer:
    """One update ranked once by |value|; :meth:`bits` and :meth:`encode` for any number ``k`` of kept elements."""

    def __init__(self, update: Mapping[str, torch.Tensor]) -> None:
        self.names, self.shapes, self.flat = flatten(update)

    @functools.cached_property
    def order(self) -> np.ndarray:
        """Element indices by descending |value|, ties by index (every element its own kernel); ranked on first
        use, which keeping none or all of them never needs."""
        return sparsify.rank_kernels(np.abs(self.flat))

    @property
    def n(self) -> int:
        return int(self.flat.size)

    def positions(self, k: int) -> np.ndarray:
        if not 0 <= int(k) <= self.n:
            raise CodecError(f"k={k!r}: must be in [0, {self.n}]")
        return sparsify.top_of(lambda: self.order, self.n, k)

    def bits(self, k: int) -> int:
        """Exact payload size [bits] keeping the top ``k`` elements (a multiple of 8)."""
        bits = header_bits(self.shapes, flag=False)
        if k > 0:
            gaps = np.diff(self.positions(k), prepend=-1) - 1
            bits += 6 + coding.rice_bits(gaps, coding.rice_parameter(gaps)) + 32 + int(k)
        return 8 * math.ceil(bits / 8)

    def encode(self, k: int) -> Compressed:
        """The STC payload keeping the top ``k`` elements; ``update`` and ``sent`` are what the server decodes."""
        pos = self.positions(k)
        negative, mu = quantize.ternary(self.flat[pos])
        w = coding.BitWriter()
        write_header(w, _MAGIC, _VERSION, self.shapes, pos.size, None)
        if pos.size:
            coding.rice_encode(w, np.diff(pos, prepend=-1) - 1)
            w.float32(mu)
            w.bits(negative.astype(np.uint8))
        payload = w.to_bytes()
        out = np.zeros(self.n, dtype=np.float32)
        out[pos] = np.where(negative, -np.float32(mu), np.float32(mu))
        sent = np.zeros(self.n, dtype=bool)
        sent[pos] = True
        return Compressed(payload=payload, update=unflatten(out, self.names, self.shapes),
                          sent=unflatten_mask(sent, self.names, self.shapes), kept_kernels=int(pos.size),
                          n_kernels=self.n, levels=1)  # fmt: skip


def encode_ternary(update: Mapping[str, torch.Tensor], *, kept: int) -> Compressed:
    """STC payload of ``update`` keeping its ``kept`` largest-magnitude elements."""
    return TernarySizer(update).encode(kept)


def decode_ternary(payload: bytes, names: Sequence[str]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The decoded ternary update and the mask of the elements it carries, as tensors named ``names``."""
    r = coding.BitReader(payload)
    try:
        _, shapes, k = read_header(r, _MAGIC, _VERSION, "an STC update", flag=False)
        n = sum(math.prod(s) for s in shapes)
        if k > n:
            raise CodecError(f"payload keeps {k} of {n} elements")
        out = np.zeros(n, dtype=np.float32)
        sent = np.zeros(n, dtype=bool)
        if k:
            pos = np.cumsum(coding.rice_decode(r, k) + 1) - 1
            if pos[-1] >= n:
                raise CodecError(f"payload position {int(pos[-1])} outside {n} elements")
            mu = np.float32(r.float32())
            negative = r.take(k).astype(bool)
            out[pos] = np.where(negative, -mu, mu)
            sent[pos] = True
    except (coding.CodingError, IndexError) as err:
        raise CodecError(f"malformed payload: {err}") from err
    return decoded(out, sent, names, shapes)
