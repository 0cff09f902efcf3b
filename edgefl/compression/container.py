"""The container every edgefl payload shares (AnycostFL's codec :mod:`.codec`, STC :mod:`.stc`, UVeQFed
:mod:`.uveqfed`): an update as one flat float32 vector and back, and the header each payload starts with (MSB
first): magic (8 bits), version (4), [kernel-wise flag (1)], tensor count (8), per tensor ndim (4) and dims (32
each), kept count (32). Each codec writes its own body after the header.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from edgefl.compression import coding
from edgefl.errors import EdgeflError

__all__ = ["CodecError", "Encoded", "flatten", "unflatten", "tensor_views", "unflatten_mask", "check_names", "decoded",
           "header_bits", "write_header", "read_header", "Wire", "WireTensors", "on_wire", "DECODERS"]  # fmt: skip


class CodecError(EdgeflError, ValueError):
    """A payload is malformed, or codec arguments are out of range."""


@dataclass(frozen=True, kw_only=True)
class Encoded:
    """One encoded update: its ``payload`` and what the decoder rebuilds from it, ``update`` (float32 tensors by
    name) and ``sent`` (the boolean mask of the elements the payload carries, by name). Each codec's payload class
    adds the knobs it used."""

    payload: bytes
    update: dict[str, torch.Tensor]
    sent: dict[str, torch.Tensor]

    @property
    def bits(self) -> int:
        """The payload's size [bits]: 8 * len(payload)."""
        return 8 * len(self.payload)


#: Each container's magic (its payload's first byte) -> (module, function) of its public decoder, called as
#: ``decoder(payload, names, *args) -> (update, sent)`` (tensors by name).
DECODERS: dict[int, tuple[str, str]] = {
    0xA7: ("edgefl.compression.codec", "decode_with_mask"),
    0xB7: ("edgefl.compression.stc", "decode_ternary"),
    0xC7: ("edgefl.compression.uveqfed", "decode_lattice"),
}


class Wire:
    """A payload as it travels between processes: its bytes, the tensor names and whatever else its decoder takes
    (``args``: UVeQFed's shared-seed generator in the state the encoder's had). Decoded once, on first use, by
    the decoder its first byte (the container's magic) names (:data:`DECODERS`)."""

    __slots__ = ("payload", "names", "args", "_decoded")

    def __init__(self, payload: bytes, names: Sequence[str], args: tuple = ()) -> None:
        self.payload, self.names, self.args = payload, tuple(names), tuple(args)
        self._decoded: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]] | None = None

    def __reduce__(self):
        return Wire, (self.payload, self.names, self.args)  # never what was decoded from it

    def decoded(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(update, sent) the payload decodes to."""
        if self._decoded is None:
            if not self.payload or self.payload[0] not in DECODERS:
                raise CodecError(f"no decoder for a payload starting with {self.payload[:1]!r}")
            module, name = DECODERS[self.payload[0]]
            decode = getattr(importlib.import_module(module), name)
            self._decoded = decode(self.payload, list(self.names), *copy.deepcopy(self.args))
        return self._decoded


class WireTensors(dict):
    """Tensors by name (a plain dict to every reader) that a pickle carries as the payload they decode from: an
    encoded update's ``update`` (``part`` 0) or ``sent`` mask (``part`` 1). A job's result crossing to the driver
    (a worker process, a Ray actor) or a device's memory crossing to a worker then moves the payload, hundreds of
    kB, instead of the dense float32 update, megabytes; the receiving side decodes it (the server's decoding, in
    the driver), to the same bits: each codec's decoder gives exactly the update its encoder handed over
    (tests/test_wire.py). Both parts of one payload share one :class:`Wire`, so it is sent and decoded once."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], wire: Wire, part: int) -> None:
        super().__init__(tensors)
        self.wire, self.part = wire, part

    def __reduce__(self):
        return _unwired, (self.wire, self.part)

    def __deepcopy__(self, memo: dict) -> WireTensors:
        return WireTensors({k: copy.deepcopy(v, memo) for k, v in self.items()}, self.wire, self.part)


def _unwired(wire: Wire, part: int) -> WireTensors:
    return WireTensors(wire.decoded()[part], wire, part)


def on_wire(encoded: Any, *args: Any) -> Any:
    """``encoded`` (an :class:`Encoded`) whose ``update`` and ``sent`` travel as its payload when pickled
    (:class:`WireTensors`); ``args``: what its decoder takes after the payload and the names. Already on the
    wire: itself."""
    if isinstance(encoded.update, WireTensors):
        return encoded
    wire = Wire(encoded.payload, list(encoded.update), args)
    wire._decoded = (encoded.update, encoded.sent)  # this side has it already
    return dataclasses.replace(encoded, update=WireTensors(encoded.update, wire, 0),
                               sent=WireTensors(encoded.sent, wire, 1))  # fmt: skip


def flatten(update: Mapping[str, torch.Tensor]) -> tuple[list[str], list[tuple[int, ...]], np.ndarray]:
    """Names, shapes and the float32 concatenation of ``update``'s tensors (in its iteration order)."""
    names = list(update)
    shapes = [tuple(update[n].shape) for n in names]
    parts = [update[n].detach().to("cpu", torch.float32).reshape(-1).numpy() for n in names]
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return names, shapes, flat.astype(np.float32, copy=False)


def unflatten(flat: np.ndarray, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
    """Tensors by name from a flat float32 vector (inverse of :func:`flatten`)."""
    out, at = {}, 0
    for name, shape in zip(names, shapes):
        n = math.prod(shape)
        out[name] = torch.from_numpy(np.array(flat[at : at + n], dtype=np.float32)).reshape(tuple(shape))
        at += n
    return out


def tensor_views(flat: np.ndarray, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
    """Tensors by name that view consecutive slices of ``flat`` (not copied: for an array a codec made and hands
    over; :func:`unflatten` copies)."""
    out, at = {}, 0
    for name, shape in zip(names, shapes):
        n = math.prod(shape)
        out[name] = torch.from_numpy(flat[at : at + n]).reshape(tuple(shape))
        at += n
    return out


def unflatten_mask(sent: np.ndarray, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
    """Boolean tensors by name from a flat boolean vector."""
    return {k: v.bool() for k, v in unflatten(sent.astype(np.float32), names, shapes).items()}


def check_names(names: Sequence[str], shapes: Sequence[Sequence[int]]) -> None:
    """Raise :class:`CodecError` unless ``names`` has one name per tensor of the payload (``shapes``)."""
    if len(names) != len(shapes):
        raise CodecError(f"names has {len(names)} entries; the payload holds {len(shapes)} tensors")


def decoded(flat: np.ndarray, sent: np.ndarray, names: Sequence[str],
            shapes: Sequence[Sequence[int]]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
    """A decoded payload's update (float32) and mask of the elements it carries (bool), both as tensors named
    ``names``, from its flat vectors; :class:`CodecError` when ``names`` does not match the payload's tensors."""
    check_names(names, shapes)
    return unflatten(flat, names, shapes), unflatten_mask(sent, names, shapes)


def header_bits(shapes: Sequence[Sequence[int]], *, flag: bool = True) -> int:
    """Size of the header of a payload of tensors of ``shapes`` [bits], with or without the kernel-wise flag."""
    return 8 + 4 + int(flag) + 8 + sum(4 + 32 * len(s) for s in shapes) + 32


def write_header(w: coding.BitWriter, magic: int, version: int, shapes: Sequence[Sequence[int]], kept: int,
                  kernel_wise: bool | None) -> None:  # fmt: skip
    """The header; ``kernel_wise=None`` writes no flag bit."""
    w.uint(magic, 8)
    w.uint(version, 4)
    if kernel_wise is not None:
        w.uint(int(kernel_wise), 1)
    w.uint(len(shapes), 8)
    for shape in shapes:
        w.uint(len(shape), 4)
        for d in shape:
            w.uint(d, 32)
    w.uint(kept, 32)


def read_header(r: coding.BitReader, magic: int, version: int, what: str, *,
                 flag: bool) -> tuple[bool | None, list[tuple[int, ...]], int]:  # fmt: skip
    """(kernel-wise flag or None without ``flag``, shapes, kept count) of a header written by :func:`write_header`;
    raises :class:`CodecError` naming ``what`` the payload should be on a bad magic or version."""
    if r.uint(8) != magic or r.uint(4) != version:
        raise CodecError(f"payload is not {what} (bad magic or version)")
    kernel_wise = bool(r.uint(1)) if flag else None
    shapes = [tuple(r.uint(32) for _ in range(r.uint(4))) for _ in range(r.uint(8))]
    return kernel_wise, shapes, r.uint(32)
