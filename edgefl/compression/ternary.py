"""STC, sparse ternary compression (Sattler et al., "Robust and Communication-Efficient Federated Learning from
Non-IID Data", IEEE TNNLS 2019, Alg. 1, "STC"): the k elements of largest magnitude, each sent as +-mu with
mu = mean |kept|, positions as Golomb-Rice coded gaps, one sign bit each. Wire format 0xB7 version 2
(``docs/wire_formats.md``): header without the kernel-wise flag (kept count k); if k > 0 the Rice gaps between the
kept positions, mu (float32) and one sign bit per kept element (1 = negative). Size
``8 ceil((header + [R(gaps) + 32 + k]) / 8)``.

With gaps of mean at most 1 (last kept position + 1 <= 2k) the Rice field takes 6 + last + 1 bits
(:func:`~.ops.positions_rice_size`): a probe of such a dense set needs only its last position.

The size grows by at least one bit with each element kept: at a fixed Rice parameter b an added position splits a
gap g = g1 + 1 + g2, so the quotients lose at most 1 (``(g1 + g2 + 1) >> b <= (g1 >> b) + (g2 >> b) + 1``) while
the remainders and the unary terminator add b + 1 and the sign bit 1; the least over b keeps that. :func:`fit`
therefore searches k by its exact sizes (:func:`~.ops.largest_fitting`), each from the kept positions' gaps alone.

Ranking: :class:`~.ops.Ranking` of the magnitudes (a histogram of their float32 bit patterns, one pass; each
probe ranks within one bin), the same sets as :func:`~.ops.top_k` (ties to the lower index).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from edgefl.compression import ops, wire
from edgefl.compression.coded import Coded, every, flat_update

__all__ = ["CODEC", "MAGIC", "VERSION", "TOLERANCE", "encode", "fit", "size_bits", "to_bytes", "from_bytes"]

CODEC = "edgefl.compression.ternary"
MAGIC, VERSION = 0xB7, 2
TOLERANCE = 0.005
""":func:`fit`'s k is the largest fitting to within max(1, floor(0.005 k)) elements: k + that does not fit."""


def size_bits(shapes: Sequence[Sequence[int]], positions: torch.Tensor) -> int:
    """Exact payload size [bits] keeping the elements at the ascending flat ``positions``."""
    k = positions.numel()
    body = ops.positions_rice_size(positions) + 32 + k if k else 0
    return 8 * math.ceil((wire.header_bits(shapes, flag=False) + body) / 8)


def _coded(names, shapes, flat: torch.Tensor, positions: torch.Tensor | None, bits: int | None = None) -> Coded:
    """The ternary update of the elements of ``flat`` at ``positions`` (ascending; None: every element): mu with
    each element's sign bit, mu = the float64 mean of their magnitudes rounded to float32. ``flat`` is the new
    concatenation :func:`~.coded.flat_update` made, and with ``positions`` None it becomes the values."""
    if positions is not None and positions.numel() == flat.numel():  # ascending and distinct: every element
        positions = None
    kept = flat if positions is None else flat.index_select(0, positions)  # several times faster than flat[...]
    k = kept.numel()
    mu = float(np.float32(float(kept.abs().sum(dtype=torch.float64)) / k)) if k else 0.0
    values = torch.copysign(kept.new_full((), mu), kept, out=kept)  # one pass, in place: mu with each sign bit
    if positions is None:
        positions = every(k, torch.int32, flat.device)
    bits = size_bits(shapes, positions) if bits is None else bits
    return Coded(positions=positions.to(torch.int32), values=values, names=tuple(names), shapes=tuple(shapes),
                 bits=bits, kept=k, codec=CODEC, meta={"mu": mu},
                 table=torch.tensor([mu], dtype=torch.float32, device=flat.device))  # fmt: skip


def encode(update: Mapping[str, torch.Tensor], k: int) -> Coded:
    """STC of ``update`` keeping its ``k`` largest-magnitude elements (ties to the lower index)."""
    names, shapes, flat = flat_update(update)
    if not 0 <= int(k) <= flat.numel():
        raise ValueError(f"stc: k={k!r} must be in [0, {flat.numel()}]")
    return _coded(names, shapes, flat, ops.flatnonzero(ops.top_k(flat, int(k))))  # top_k ranks |flat|


def fit(update: Mapping[str, torch.Tensor], budget_bits: float, *, tol: float = TOLERANCE) -> Coded:
    """STC of ``update`` keeping the most elements whose exact size fits ``budget_bits``, to within ``tol`` k
    (:data:`TOLERANCE`); k = 0 (the header alone) when nothing fits."""
    names, shapes, flat = flat_update(update)
    n = flat.numel()
    head = wire.header_bits(shapes, flag=False)
    every = 8 * math.ceil((head + 6 + n + 32 + n) / 8)  # every gap 0: b = 0, n unary zeros
    if every <= budget_bits:
        return _coded(names, shapes, flat, None, every)
    ranked = ops.Ranking(flat)  # it ranks the magnitudes (the bit patterns without the sign)
    probes: dict[int, tuple[torch.Tensor, int]] = {0: (flat.new_zeros(0, dtype=torch.int64), 8 * math.ceil(head / 8))}

    def size(k: int) -> int:  # probes[k]: the kept positions, or their mask over every element when dense
        if k not in probes:
            mask = ranked.mask(k)
            last = _last_true(mask) if ranked.pos is None else -1
            if 0 <= last < 2 * k:  # gaps of mean <= 1: b = 0 is the smallest best parameter, R = 6 + last + 1
                probes[k] = mask, 8 * math.ceil((head + 6 + last + 1 + 32 + k) / 8)
            else:
                pos = ops.flatnonzero(mask) if ranked.pos is None else ranked.pos[ops.flatnonzero(mask)]
                probes[k] = pos, size_bits(shapes, pos)
        return probes[k][1]

    model = lambda k: head + 38 + ops.uniform_gaps_bits(k, n) + k  # noqa: E731 (the fields, signs, gaps)
    k = ops.largest_fitting(size, n - 1, budget_bits, model, tol) or 0
    bits = size(k)
    pos = probes[k][0]
    return _coded(names, shapes, flat, ops.flatnonzero(pos) if pos.dtype == torch.bool else pos, bits)


def _last_true(mask: torch.Tensor) -> int:
    """The index of the last True of a 1-D boolean mask (-1 if none), looking from the end."""
    if mask.device.type == "cpu":
        back = mask.numpy()[::-1]
        at = int(np.argmax(back))
        return mask.numel() - 1 - at if back.size and back[at] else -1
    hits = torch.nonzero(mask)
    return int(hits[-1]) if hits.numel() else -1


def to_bytes(coded: Coded) -> bytes:
    """The 0xB7 payload of ``coded`` (the oracle: plain :class:`~.wire.BitWriter` fields)."""
    w = wire.BitWriter()
    wire.write_header(w, MAGIC, VERSION, coded.shapes, coded.kept, None)
    if coded.kept:
        pos = coded.positions.cpu().numpy().astype(np.int64)
        w.rice(np.diff(pos, prepend=-1) - 1)
        w.float32(coded.meta["mu"])
        w.bits(torch.signbit(coded.values).cpu().numpy())
    return w.to_bytes()


def from_bytes(payload: bytes, names: Sequence[str]) -> Coded:
    """The :class:`Coded` a 0xB7 payload holds, read field by field (:class:`~.wire.WireError` if malformed)."""
    r = wire.BitReader(payload)
    _, shapes, k = wire.read_header(r, MAGIC, VERSION, flag=False)
    if len(names) != len(shapes):
        raise wire.WireError(f"payload holds {len(shapes)} tensors; {len(names)} names given")
    n = sum(math.prod(s) for s in shapes)
    pos, values, mu = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), 0.0
    if k:
        pos = np.cumsum(r.rice(k) + 1) - 1
        if k > n or pos[-1] >= n:
            raise wire.WireError(f"payload keeps positions up to {int(pos[-1])} of {n} elements")
        mu = r.float32()
        values = np.where(r.bits(k).astype(bool), -np.float32(mu), np.float32(mu)).astype(np.float32)
    return Coded(positions=torch.from_numpy(pos.astype(np.int32)), values=torch.from_numpy(values),
                 names=tuple(names), shapes=tuple(shapes), bits=8 * len(payload), kept=k, codec=CODEC,
                 meta={"mu": mu})  # fmt: skip
