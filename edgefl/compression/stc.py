"""Sparse ternary compression (Sattler et al., "Robust and Communication-Efficient Federated Learning from Non-IID
Data", IEEE TNNLS 2019, Alg. 1): the k largest-magnitude elements of an update, each sent as +-mu with
mu = mean |kept| (:func:`edgefl.compression.quantize.ternary`); positions Golomb-Rice coded, one sign bit each.

Container (MSB first, padded to a whole byte): the header of :mod:`.codec` without its kernel-wise flag, i.e.
magic (8 bits), version (4), tensor count (8), per tensor ndim (4) and dims (32 each), k (32); if k > 0: Rice gaps
between the sorted kept positions (:func:`coding.rice_encode`'s layout), mu (float32), one sign bit per kept element
(1 = negative).

:class:`TernarySizer` gives the exact size for every k, so a caller can search the largest k that fits a bit budget;
the size is non-decreasing in k (a new position splits a gap: the Rice quotients shrink by at most 2 while the code
grows by b + 1 bits, plus a sign bit). The top k come from :class:`sparsify.TopkSelection` (partial partitions, no
full ranking). With gaps g_1..g_k before the kept positions p_1 < ... < p_k, the Rice code with parameter b takes
``f(b) = sum(g >> b) + k (b + 1)`` bits, and ``f(0) = p_k + 1``. When ``p_k + 1 <= 2k`` (gaps of mean at most 1),
b = 0 is the smallest optimal parameter: ``g >> b >= (g - 2^b + 1) / 2^b`` gives
``f(b) - f(0) >= k (b - 2 + 2^(1-b)) >= 0`` for b >= 1. Such sizes need only the largest kept position; the
others come from top sets the search materialised and the elements ranked between (:class:`_Added`), and the
smallest optimal b is kept for encoding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from edgefl.compression import coding, quantize, sparsify
from edgefl.compression.codec import Compressed
from edgefl.compression.container import (
    CodecError, check_names, flatten, header_bits, read_header, tensor_views, write_header,
)  # fmt: skip

__all__ = ["TernarySizer", "encode_ternary", "decode_ternary"]

_MAGIC, _VERSION = 0xB7, 1
_RICE_B_BITS = 6  # the Rice parameter's field (coding.rice_encode)


class TernarySizer:
    """One update; :meth:`bits` and :meth:`encode` for any number ``k`` of kept elements (the ``k`` largest |value|,
    ties by index). Sizes are computed once per k."""

    def __init__(self, update: Mapping[str, torch.Tensor]) -> None:
        self.names, self.shapes, self.flat = flatten(update)
        self._sizes: dict[int, int] = {}
        self._parameters: dict[int, int] = {}  # the Rice parameter of each k sized
        self._kept: list[_Kept] = []  # top sets materialised by the size search
        self._consumed = False  # encode(consume=True) made ``flat`` the update's storage

    @property
    def n(self) -> int:
        return int(self.flat.size)

    @functools.cached_property
    def _selection(self) -> sparsify.TopkSelection | None:
        """Top-k sets by partial partitions; None when a value is NaN (then :attr:`order` ranks NaNs last)."""
        if self.flat.size and np.isnan(self.flat.min()):
            return None
        return sparsify.TopkSelection(self.flat)

    @functools.cached_property
    def order(self) -> np.ndarray:
        """All element indices by descending |value|, ties by index, NaNs last (every element its own kernel)."""
        return sparsify.rank_kernels(np.abs(self.flat))

    def positions(self, k: int) -> np.ndarray:
        """Positions of the top ``k`` elements, ascending."""
        k = self._check(k)
        if 0 < k < self.n and self._selection is not None:
            return self._selection.positions(k)
        return sparsify.top_of(lambda: self.order, self.n, k)

    def bits(self, k: int) -> int:
        """Exact payload size [bits] keeping the top ``k`` elements (a multiple of 8)."""
        k = self._check(k)
        size = self._sizes.get(k)
        if size is None:
            body = _RICE_B_BITS + self._rice_bits(k) + 32 + k if k else 0
            size = self._sizes[k] = 8 * math.ceil((header_bits(self.shapes, flag=False) + body) / 8)
        return size

    def _rice_bits(self, k: int) -> int:
        """Size [bits] of the top ``k``'s gaps Rice coded with the optimal parameter (no parameter field); the
        parameter, the smallest optimal one (as :func:`coding.rice_parameter` picks it), is kept for :meth:`encode`."""
        if k == self.n:
            self._parameters[k] = 0
            return k  # all gaps 0
        sel = self._selection
        if sel is None:
            gaps = _gaps(self.positions(k))
            b = self._parameters[k] = coding.rice_parameter(gaps)
            return coding.rice_bits(gaps, b)
        end = sel.last(k) + 1  # the sum of the gaps plus k
        if end <= 2 * k:
            self._parameters[k] = 0
            return end  # b = 0 (module docstring)
        shifted = self._shifted_sums(k)
        mean = (end - k) / k
        b, size = _least(lambda b: shifted(b) + k * (b + 1), max(0, math.floor(math.log2(mean))) if mean >= 1 else 0)
        self._parameters[k] = b
        return size

    def _shifted_sums(self, k: int) -> Callable[[int], int]:
        """``b -> sum(gaps >> b)`` over the top ``k``'s gaps: from the nearest top set materialised below ``k`` and
        the few elements ranked between (:class:`_Added`), or from the top ``k`` itself, materialised.

        A search that evaluates k between two sizes already evaluated (a bisection) mostly adds few elements to a set
        it holds; when the nearest evaluated k below lies far above the set held, that k is materialised first.
        """
        below = [kept for kept in self._kept if kept.k < k]
        base = max(below, key=lambda kept: kept.k) if below else None
        if base is not None:
            nearest = max((j for j in base.added if j < k), default=None)
            if nearest is not None and 16 * (nearest - base.k) > base.k:
                base = self._hold(base.added[nearest].merged())
        if base is None or 8 * (k - base.k) > base.k:
            kept = self._hold(_Kept(self.positions(k)))
            return kept.shifted
        nearest = max((j for j in base.added if j < k), default=None)
        if nearest is None:
            added = _Added(base, np.sort(self._selection.ranked(base.k, k)))
        else:
            added = base.added[nearest].extended(np.sort(self._selection.ranked(nearest, k)))
        base.added[k] = added
        return lambda b: base.shifted(b) + added.shifted(b)

    def _hold(self, kept: _Kept) -> _Kept:
        """Keep ``kept`` as one of the two most recent materialised top sets."""
        self._kept = [*self._kept[-1:], kept]
        return kept

    def encode(self, k: int, *, consume: bool = False) -> Compressed:
        """The STC payload keeping the top ``k`` elements; ``update`` and ``sent`` are what the server decodes.

        ``consume``: the sizer is not used again, so the update is written over its own flat copy of the input (no
        new 6.6 MB array for the CNN); any later call raises :class:`CodecError`."""
        k = self._check(k)
        coded = self._encode(k, self.flat if consume else None)
        self._consumed = consume
        return coded

    def _encode(self, k: int, out: np.ndarray | None) -> Compressed:
        n = self.n
        head = coding.BitWriter()
        write_header(head, _MAGIC, _VERSION, self.shapes, k, None)
        if k == n:  # every gap 0: b = 0, k zero bits
            values = np.empty(n, dtype=np.float32) if out is None else out  # |flat| for mu, then the update itself
            negative, mu = _ternary_into(self.flat, values)
            payload = _pack(head, k, 0, None, mu, negative)
            update, sent = _all_sent_tensors(values, negative, mu, self.names, self.shapes)
            return Compressed(payload=payload, kept_kernels=k, n_kernels=n, levels=1, update=update, sent=sent)
        if k and self._selection is not None and self._selection.last(k) + 1 <= 2 * k:
            mask = self._selection.mask(k)  # b = 0: the unary terminators are the kept positions themselves
            negative, mu = _ternary_of_copy(self.flat[mask])
            payload = _pack(head, k, 0, mask[: self._selection.last(k) + 1], mu, negative)
        elif k:
            pos = self.positions(k)
            negative, mu = _ternary_of_copy(self.flat[pos])
            mask = np.zeros(n, dtype=bool)
            mask[pos] = True
            gaps = _gaps(pos)
            b = self._parameters[k] if k in self._parameters else coding.rice_parameter(gaps)
            terminators = mask[: pos[-1] + 1] if b == 0 else _terminators(gaps >> b)
            payload = _pack(head, k, b, terminators, mu, negative, gaps)
        else:
            payload, negative, mu, mask = head.to_bytes(), np.zeros(0, dtype=bool), 0.0, np.zeros(n, dtype=bool)
        update, sent = _encoded_tensors(self.flat, mask, None, mu, self.names, self.shapes, out)
        return Compressed(payload=payload, kept_kernels=k, n_kernels=n, levels=1, update=update, sent=sent)

    def _check(self, k: int) -> int:
        if self._consumed:
            raise CodecError("this sizer's update was consumed by encode(consume=True)")
        if not 0 <= int(k) <= self.n:
            raise CodecError(f"k={k!r}: must be in [0, {self.n}]")
        return int(k)


class _Kept:
    """A top set materialised: its positions ``pos`` (ascending), their gaps, ``sum(gaps >> b)`` by b, and the
    elements added to it that sizes were evaluated for (:class:`_Added`, by the k they make)."""

    def __init__(self, pos: np.ndarray, gaps: np.ndarray | None = None, sums: dict[int, int] | None = None) -> None:
        self.k, self.pos = int(pos.size), pos
        self.gaps = _gaps(pos) if gaps is None else gaps
        self.sums = dict(sums or {})
        self.added: dict[int, _Added] = {}

    def shifted(self, b: int) -> int:
        """``sum(gaps >> b)``."""
        total = self.sums.get(b)
        if total is None:
            total = self.sums[b] = int(np.right_shift(self.gaps, b).sum())
        return total


class _Added:
    """Positions added to a :class:`_Kept` set (ascending, none of them in it): each makes the gap before it, and
    the set's first position after a run of them gets a shorter gap; ``shifted(b)`` is what that adds to the set's
    ``sum(gaps >> b)``."""

    def __init__(self, base: _Kept, pos: np.ndarray, at: np.ndarray | None = None) -> None:
        self.base, self.pos = base, pos
        self.at = np.searchsorted(base.pos, pos) if at is None else at  # base.pos[at - 1] < pos < base.pos[at]
        left = base.pos[np.maximum(self.at - 1, 0)] if base.k else np.zeros(pos.size, dtype=np.int64)
        left[self.at == 0] = -1
        np.maximum(left[1:], pos[:-1], out=left[1:])  # an added position nearer on the left
        self.gaps = pos - left - 1
        last = np.ones(pos.size, dtype=bool)  # the last added position before each base position
        np.not_equal(self.at[1:], self.at[:-1], out=last[:-1])
        last &= self.at < base.k
        self.changed = self.at[last]  # indices of the base positions whose gap shrinks
        self.changed_gaps = base.pos[self.changed] - pos[last] - 1
        self.old_gaps = base.gaps[self.changed]
        self.sums: dict[int, int] = {}

    def extended(self, pos: np.ndarray) -> _Added:
        """These positions and ``pos`` (ascending, in neither the base nor these) added to the same base."""
        into = np.searchsorted(self.pos, pos)
        return _Added(self.base, np.insert(self.pos, into, pos), np.insert(self.at, into, np.searchsorted(
            self.base.pos, pos)))  # fmt: skip

    def shifted(self, b: int) -> int:
        total = self.sums.get(b)
        if total is None:
            total = self.sums[b] = int(np.right_shift(self.gaps, b).sum() + np.right_shift(self.changed_gaps, b).sum()
                                       - np.right_shift(self.old_gaps, b).sum())  # fmt: skip
        return total

    def merged(self) -> _Kept:
        """The base set with these positions, materialised (its sums carried over where both are known)."""
        base = self.base
        gaps = base.gaps.copy()
        gaps[self.changed] = self.changed_gaps
        sums = {b: base.sums[b] + total for b, total in self.sums.items() if b in base.sums}
        return _Kept(np.insert(base.pos, self.at, self.pos), np.insert(gaps, self.at, self.gaps), sums)


def _least(size: Callable[[int], int], b: int) -> tuple[int, int]:
    """The smallest b >= 0 of least ``size(b)`` for a convex ``size``, and that size: a walk from ``b`` down while
    not larger, then up while smaller (:func:`coding.rice_parameter`'s walk; it ends at the smallest minimiser from
    any start)."""
    best = size(b)
    while b > 0 and (lower := size(b - 1)) <= best:
        b, best = b - 1, lower
    while (higher := size(b + 1)) < best:
        b, best = b + 1, higher
    return b, best


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
        kept, negative, mu = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), 0.0
        if k:
            kept = _read_kept(r, k, n)
            mu = r.float32()
            negative = r.take(k).view(bool)
    except (coding.CodingError, IndexError) as err:
        raise CodecError(f"malformed payload: {err}") from err
    check_names(names, shapes)
    return _decoded_tensors(kept, negative, mu, names, shapes)


def _ternary_of_copy(values: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`quantize.ternary` of ``values``, a float32 array the caller hands over (a fresh copy): its magnitudes
    are taken in place instead of into a new array (the same array's mean, so the same mu to the bit)."""
    if values.dtype != np.float32:
        return quantize.ternary(values)
    negative = values < 0
    mu = float(np.abs(values, out=values).mean()) if values.size else 0.0
    return negative, float(np.float32(mu))


def _ternary_into(flat: np.ndarray, scratch: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`quantize.ternary` of all of the float32 ``flat``, its magnitudes taken into ``scratch`` (float32, as
    large) rather than a new array: the same values in a contiguous array of the same size, so the same mean."""
    negative = flat < 0
    mu = float(np.abs(flat, out=scratch).mean()) if flat.size else 0.0
    return negative, float(np.float32(mu))


def _all_sent_tensors(values: np.ndarray, negative: np.ndarray, mu: float, names: Sequence[str],
                      shapes: Sequence[Sequence[int]]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
    """:func:`_encoded_tensors` of every element (``mask`` None) written into ``values`` (float32, handed over),
    whose tensors view it: ``bits(mu) | negative << 31``."""
    bits = values.view(np.uint32)
    np.left_shift(negative.view(np.uint8), np.uint32(31), out=bits, dtype=np.uint32)
    np.bitwise_or(bits, np.array(mu, dtype=np.float32).view(np.uint32), out=bits)
    sent = {name: _tensor(np.ones(math.prod(shape), dtype=bool), shape) for name, shape in zip(names, shapes)}
    return tensor_views(values, names, shapes), sent


def _gaps(pos: np.ndarray) -> np.ndarray:
    """Gaps before each of the ascending positions ``pos``: ``np.diff(pos, prepend=-1) - 1``."""
    gaps = np.empty(pos.size, dtype=np.int64)
    if pos.size:
        gaps[0] = pos[0]
        np.subtract(pos[1:], pos[:-1], out=gaps[1:])
        gaps[1:] -= 1
    return gaps


def _terminators(q: np.ndarray) -> np.ndarray:
    """Where the zero bits of the unary code of the quotients ``q`` sit (each quotient is q ones, then a zero)."""
    out = np.zeros(int(q.sum()) + q.size, dtype=bool)
    ends = np.cumsum(q)
    ends += np.arange(q.size)
    out[ends] = True
    return out


class _Joined:
    """A bit string (MSB first, zero padded to whole bytes) joined from packed parts, each ORed in at the running bit
    offset: shifted right by the offset within its byte, the bits shifted out going to the next byte."""

    def __init__(self, n_bits: int) -> None:
        self.out = np.zeros(n_bits // 8 + 2, dtype=np.uint8)
        self.n_bits = 0

    def packed(self, data: np.ndarray, n_bits: int) -> None:
        """Append the first ``n_bits`` of ``data`` (uint8, MSB first, the bits after them zero)."""
        at, shift = divmod(self.n_bits, 8)
        if shift:
            self.out[at : at + data.size] |= data >> shift
            self.out[at + 1 : at + 1 + data.size] |= data << (8 - shift)
        else:
            self.out[at : at + data.size] |= data
        self.n_bits += n_bits

    def bits(self, bits: np.ndarray) -> None:
        """Append a 0/1 (or boolean) array."""
        self.packed(np.packbits(bits), bits.size)

    def complement(self, bits: np.ndarray) -> None:
        """Append the complement of a boolean array."""
        data = np.invert(np.packbits(bits))
        if bits.size % 8:
            data[-1] &= (0xFF00 >> (bits.size % 8)) & 0xFF  # the padding stays zero
        self.packed(data, bits.size)

    def zeros(self, n_bits: int) -> None:
        self.n_bits += n_bits

    def to_bytes(self) -> bytes:
        return self.out[: -(-self.n_bits // 8)].tobytes()


def _pack(head: coding.BitWriter, k: int, b: int, terminators: np.ndarray | None, mu: float, negative: np.ndarray,
          gaps: np.ndarray | None = None) -> bytes:  # fmt: skip
    """The header ``head`` followed by the body of ``k`` kept elements: the Rice parameter ``b`` (6 bits), the unary
    quotients (``terminators``: True where a quotient's zero bit sits, ones elsewhere; None: k zeros), the b-bit
    remainders of ``gaps``, mu (float32) and the sign bits ``negative``.

    With b = 0 the quotients are the gaps, so the terminators sit at the kept positions themselves: the top-k mask up
    to the last kept element.
    """
    unary = k if terminators is None else int(terminators.size)
    out = _Joined(head.n_bits + _RICE_B_BITS + unary + k * b + 32 + k)
    out.packed(np.frombuffer(head.to_bytes(), dtype=np.uint8), head.n_bits)
    out.bits(coding.uint_bits(b, _RICE_B_BITS))
    if unary > k:  # some quotient above 0
        out.complement(terminators)
    else:
        out.zeros(unary)
    if b:
        out.bits(_msb_first(gaps & ((1 << b) - 1), b).reshape(-1))
    out.bits(coding.uint_bits(int(np.array(mu, dtype=np.float32).view(np.uint32)), 32))
    out.bits(negative)
    return out.to_bytes()


def _msb_first(values: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bits of each value, MSB first: uint8 0/1, shape ``(values.size, width)``, one column per
    bit (Rice remainders are a few bits wide)."""
    out = np.empty((values.size, width), dtype=np.uint8)
    for j in range(width):
        np.bitwise_and(values >> (width - 1 - j), 1, out=out[:, j], casting="unsafe")
    return out


def _from_msb_first(bits: np.ndarray, width: int) -> np.ndarray:
    """Unsigned integers (int64) from rows of ``width`` bits, MSB first: the inverse of :func:`_msb_first`."""
    rows = bits.reshape(-1, width)
    out = rows[:, 0].astype(np.int64)
    for j in range(1, width):
        out <<= 1
        out |= rows[:, j]
    return out


def _kth_zero(bits: np.ndarray, k: int) -> int:
    """Offset of the ``k``-th zero (k >= 1) in the 0/1 array ``bits``; -1 when it has fewer zeros. Zeros are
    counted 64 bits at a time (``np.bitwise_count`` of the bits packed into words)."""
    words = np.zeros(-(-bits.size // 64), dtype=np.uint64)
    words.view(np.uint8)[: -(-bits.size // 8)] = np.packbits(bits)
    zeros = np.cumsum(64 - np.bitwise_count(words).astype(np.int64))
    zeros[-1] -= 64 * words.size - bits.size  # the padding is not zeros of bits
    word = int(np.searchsorted(zeros, k))
    if word == zeros.size:
        return -1
    before = int(zeros[word - 1]) if word else 0
    return 64 * word + int(np.flatnonzero(bits[64 * word : 64 * word + 64] == 0)[k - before - 1])


def _read_kept(r: coding.BitReader, k: int, n: int) -> np.ndarray | None:
    """The ``k`` kept elements (among ``n``) whose gaps :func:`_pack` Rice coded, read from ``r``: their mask (b = 0),
    their ascending positions (b > 0), or None when all ``n`` are kept with b = 0 (``n`` zero bits).

    The j-th unary terminator (zero bit) sits at ``sum_{i<=j} (q_i + 1) - 1``, so with b = 0 the terminators are the
    positions themselves. With the optimal b the quotients sum to at most 2k (``f(b) <= f(b + 1)`` means
    ``sum ceil(q / 2) <= k``), so the terminators are looked for in the next 3k bits first.
    """
    b = r.uint(_RICE_B_BITS)
    rest = r.bits_array[r.pos :]
    if b == 0 and k == n and rest.size >= k and not rest[:k].any():
        r.pos += k
        return None
    last = _kth_zero(rest[: 3 * k + 8], k)
    if last < 0:
        last = _kth_zero(rest, k)
    if last < 0:
        raise coding.CodingError(f"Rice stream truncated: fewer than {k} values")
    r.pos += last + 1
    if b == 0:
        if last >= n:
            raise CodecError(f"payload position {last} outside {n} elements")
        mask = np.zeros(n, dtype=bool)
        np.logical_not(rest[: last + 1].view(bool), out=mask[: last + 1])
        return mask
    q = np.diff(np.flatnonzero(rest[: last + 1] == 0), prepend=-1) - 1
    pos = np.cumsum(((q << b) | _from_msb_first(r.take(k * b), b)) + 1) - 1
    if pos[-1] >= n:
        raise CodecError(f"payload position {int(pos[-1])} outside {n} elements")
    return pos


def _tensor(array: np.ndarray, shape: Sequence[int]) -> torch.Tensor:
    return torch.from_numpy(array).reshape(tuple(shape))


def _encoded_tensors(flat: np.ndarray, mask: np.ndarray | None, negative: np.ndarray | None, mu: float,
                     names: Sequence[str], shapes: Sequence[Sequence[int]], out: np.ndarray | None = None,
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
    """The ternary update of ``flat`` (``-mu`` where it is negative, else ``mu``, where ``mask`` is True; 0
    elsewhere; ``mask`` None: every element, ``negative`` then ``flat < 0`` if given) and that mask, as float32 and
    bool tensors named ``names``: the values each written elementwise into its own numpy array (numpy asks for
    huge pages for large arrays: far fewer page faults than fresh torch storage), the mask's tensors views of
    ``mask``, which the caller hands over (no copy). ``out``: a float32 array as large as ``flat`` (``flat``
    itself allowed: each tensor's signs are read before its values are written) to write the values into instead.

    ``-mu`` is ``mu`` with the float32 sign bit set, so the values are ``(bits(mu) | (flat < 0) << 31) * mask``.
    """
    mu_bits = np.array(mu, dtype=np.float32).view(np.uint32)
    update, sent, at = {}, {}, 0
    for name, shape in zip(names, shapes):
        size = math.prod(shape)
        signs = np.less(flat[at : at + size], 0) if negative is None else negative[at : at + size]
        bits = np.empty(size, dtype=np.uint32) if out is None else out[at : at + size].view(np.uint32)
        np.left_shift(signs.view(np.uint8), np.uint32(31), out=bits, dtype=np.uint32)
        np.bitwise_or(bits, mu_bits, out=bits)
        if mask is None:
            sent[name] = _tensor(np.ones(size, dtype=bool), shape)
        else:
            here = mask[at : at + size]
            np.multiply(bits, here, out=bits)
            sent[name] = _tensor(here, shape)  # a view: the caller hands its fresh mask over
        update[name] = _tensor(bits.view(np.float32), shape)
        at += size
    return update, sent


def _decoded_tensors(kept: np.ndarray | None, negative: np.ndarray, mu: float, names: Sequence[str],
                     shapes: Sequence[Sequence[int]],
                     ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
    """The ternary update (``(-1)**negative * mu`` at the kept elements, in order, 0 elsewhere) and the mask of the
    kept elements, as float32 and bool tensors named ``names``, each written into its own numpy array (``-mu`` is
    ``mu`` with the float32 sign bit set). ``kept``: a boolean mask, ascending positions, or None (every element)."""
    mu_bits = np.array(mu, dtype=np.float32).view(np.uint32)
    value_bits = None if kept is None else np.left_shift(negative.view(np.uint8), np.uint32(31), dtype=np.uint32)
    if value_bits is not None:
        value_bits |= mu_bits
    by_mask = kept is not None and kept.dtype == bool
    sizes = [math.prod(s) for s in shapes]
    bounds = np.cumsum([0, *sizes])
    cuts = bounds if kept is None or by_mask else np.searchsorted(kept, bounds)
    update, sent, done = {}, {}, 0
    for i, (name, shape) in enumerate(zip(names, shapes)):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if kept is None:
            bits = np.empty(hi - lo, dtype=np.uint32)
            np.left_shift(negative[lo:hi].view(np.uint8), np.uint32(31), out=bits, dtype=np.uint32)
            np.bitwise_or(bits, mu_bits, out=bits)
            mask = np.ones(hi - lo, dtype=bool)
        else:
            bits = np.zeros(hi - lo, dtype=np.uint32)
            if by_mask:
                mask = kept[lo:hi]  # a view of the mask _read_kept made for this payload
                where = np.flatnonzero(mask)
            else:
                where = kept[cuts[i] : cuts[i + 1]] - lo
                mask = np.zeros(hi - lo, dtype=bool)
                mask[where] = True
            bits[where] = value_bits[done : done + where.size]
            done += where.size
        update[name], sent[name] = _tensor(bits.view(np.float32), shape), _tensor(mask, shape)
    return update, sent
