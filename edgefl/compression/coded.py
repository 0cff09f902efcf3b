"""What a compressed update is after its codec ran: its compact symbols, the exact size of their encoding, and the
values the server aggregates, without a dense tensor or a byte string in between.

A codec returns a :class:`Coded`: the positions of the elements it sends (flat indices into the concatenation of
the update's tensors, ascending) and their dequantised float32 values, the shapes and names it was built for, its
size in bits (the padded length of the payload its :meth:`Coded.to_bytes` writes, computed from the symbols'
statistics, never by writing it) and the few numbers that define it. It crosses processes as its symbols
(:meth:`Coded.__reduce__`: positions unless all are sent, sign bits with level indices where the codec has a
``table`` of magnitudes), and the server adds it into its running sums with one ``index_add_``
(:func:`scatter_add`), on the device it is on.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Coded", "every", "flat_update", "scatter_add", "dense"]


@dataclass(frozen=True, kw_only=True)
class Coded:
    """One encoded update. ``positions``: int64 or int32 flat indices of the sent elements, ascending;
    ``values``: their dequantised float32 values (what the server aggregates); ``names``/``shapes``: the update's
    tensors; ``bits``: the exact payload size [bits], padded to a whole byte; ``kept``: the header's kept count
    (kernels, elements or sub-vectors, by codec); ``meta``: the codec's own scalars (levels, range, seed...) that
    :meth:`to_bytes` needs beside the arrays; ``codec``: the module-level name of the codec that wrote it;
    ``table``: the few magnitudes the values take, when the codec has them (see :meth:`__reduce__`)."""

    positions: torch.Tensor
    values: torch.Tensor
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    bits: int
    kept: int
    codec: str
    meta: dict = field(default_factory=dict)
    table: torch.Tensor | None = field(default=None, compare=False)
    """float32 magnitudes with ``values == copysign(table[meta["indices"]], values)`` bit for bit (without
    ``"indices"``: ``table[0]`` for every value): FGC's L + 1 points, STC's mu. None: the values are any float32."""

    @property
    def n(self) -> int:
        """Elements in the whole update."""
        return sum(math.prod(s) for s in self.shapes)

    def to(self, device: torch.device | str) -> Coded:
        """The same update with its arrays (``meta``'s too) on ``device``."""
        meta = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.meta.items()}
        table = None if self.table is None else self.table.to(device)
        return Coded(positions=self.positions.to(device), values=self.values.to(device), names=self.names,
                     shapes=self.shapes, bits=self.bits, kept=self.kept, codec=self.codec, meta=meta,
                     table=table)  # fmt: skip

    def on_cpu(self) -> Coded:
        """This update where the server aggregates it, the CPU: itself when it is there, else a copy
        (:meth:`to`); a GPU-coded update crosses processes and reaches the server in this form."""
        return self if self.values.device.type == "cpu" and self.positions.device.type == "cpu" else self.to("cpu")

    def __reduce__(self):
        """Pickle (an executor's worker hands the run's process its results so, and the run's process hands STC's
        residual back) as the symbols: the positions as nothing when every element is sent, else as the int
        indices; the values as their sign bits with the ``table`` index (``meta["indices"]``, 1-2 bytes) when there
        is a table, else as float32. The arrays travel as bytes in the pickle, not as shared-memory tensors, and
        :func:`_unpickled` rebuilds the same tensors bit for bit on the CPU (an update it rebuilt pickles again
        from the symbols it came as). ``copy.deepcopy`` goes the same way, so a GPU update's copy is on the CPU."""
        if "_symbols" in self.__dict__:
            return _unpickled, self.__dict__["_symbols"]
        c = self.on_cpu()
        n, k = c.n, c.positions.numel()
        # every element: nothing (ascending and distinct, so 0..n-1); else the int indices (a bitmask is smaller
        # above n / 32 kept, but its unpacking in the run's process, serial, costs more than the bytes it saves)
        where = None if k == n else c.positions.numpy()
        meta = {key: v.numpy() if isinstance(v, torch.Tensor) else v for key, v in c.meta.items()}
        if c.table is None:
            values, table = c.values.numpy(), None
        else:
            values, table = np.packbits(torch.signbit(c.values).numpy()), c.table.numpy()
        dtype = str(c.positions.dtype).removeprefix("torch.")
        return _unpickled, (c.names, c.shapes, c.bits, c.kept, c.codec, meta, table, dtype, k, where, values)

    def dense(self) -> dict[str, torch.Tensor]:
        """The dequantised update as float32 tensors by name (0 where nothing was sent)."""
        return dense(self)

    def sent(self) -> dict[str, torch.Tensor]:
        """Boolean tensors by name: the elements the payload carries (AnycostFL's m_{t,i} of eq. (5))."""
        flat = torch.zeros(self.n, dtype=torch.bool, device=self.positions.device)
        flat[self.positions.long()] = True
        return _split(flat, self.names, self.shapes)


def every(n: int, dtype: torch.dtype = torch.int32, device: torch.device | str = "cpu") -> torch.Tensor:
    """0..n-1: the positions of an update that sends every element, one tensor per (n, dtype, device) shared by
    all such updates (the codecs' and the rebuilt ones'), since nothing writes a :class:`Coded`'s positions: no new
    n-element arange per job."""
    return _every(int(n), dtype, str(torch.device(device)))


@functools.lru_cache(maxsize=8)
def _every(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.arange(n, dtype=dtype, device=device)


def _unpickled(*symbols) -> Coded:
    """The :class:`Coded` :meth:`Coded.__reduce__` pickled as ``symbols``, its tensors rebuilt on the CPU."""
    names, shapes, bits, kept, codec, meta, table, dtype, k, where, values = symbols
    n = sum(math.prod(s) for s in shapes)
    positions = every(n, getattr(torch, dtype)) if where is None else torch.from_numpy(where)
    if table is not None:
        values = _signed(table, meta.get("indices"), values, k)
    coded = Coded(positions=positions, values=torch.from_numpy(values), names=names, shapes=shapes, bits=bits,
                  kept=kept, codec=codec, table=None if table is None else torch.from_numpy(table),
                  meta={key: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for key, v in meta.items()})  # fmt: skip
    coded.__dict__["_symbols"] = symbols  # frozen: set beside the fields
    return coded


def _signed(table: np.ndarray, indices: np.ndarray | None, signs: np.ndarray, k: int) -> np.ndarray:
    """float32 ``copysign(table[indices], sign)`` of ``k`` values from their packed sign bits (``indices`` None:
    index 0 for all), as one lookup: the sign bit above the index picks from the table and its negation."""
    magnitude = table.view(np.uint32) & np.uint32(0x7FFFFFFF)
    shift = max(len(table) - 1, 0).bit_length()  # index bits
    lut = np.zeros(2 << shift, dtype=np.uint32)
    lut[: len(table)] = magnitude
    lut[1 << shift : (1 << shift) + len(table)] = magnitude | np.uint32(0x80000000)
    at = np.unpackbits(signs, count=k)
    if shift:
        at = at.astype(np.uint8 if shift <= 7 else np.uint16 if shift <= 15 else np.uint32)
        at <<= shift
        at |= indices.astype(at.dtype, copy=False)
    return np.take(lut, at).view(np.float32)


def flat_update(update: dict[str, torch.Tensor]) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], torch.Tensor]:
    """(names, shapes, the float32 concatenation of the tensors) of an update, on its own device."""
    names = tuple(update)
    shapes = tuple(tuple(update[k].shape) for k in names)
    if not names:
        return names, shapes, torch.zeros(0, dtype=torch.float32)
    flat = torch.cat([update[k].detach().reshape(-1).to(torch.float32) for k in names])
    return names, shapes, flat


def _split(flat: torch.Tensor, names: Sequence[str], shapes: Sequence[tuple[int, ...]]) -> dict[str, torch.Tensor]:
    out, at = {}, 0
    for name, shape in zip(names, shapes):
        size = math.prod(shape)
        out[name] = flat[at : at + size].reshape(shape)
        at += size
    return out


def dense(coded: Coded) -> dict[str, torch.Tensor]:
    if coded.positions.numel() == coded.n:  # every element, in order (ascending and distinct): the values
        flat = coded.values.to(torch.float32, copy=True)
    else:
        flat = torch.zeros(coded.n, dtype=torch.float32, device=coded.values.device)
        flat[coded.positions.long()] = coded.values
    return _split(flat, coded.names, coded.shapes)


def scatter_add(total: torch.Tensor, coded: Coded, weight: float = 1.0) -> None:
    """``total[positions] += weight * values`` over the flat update (float64 ``total`` keeps the weighted sum
    exact to float64 rounding, the order of the updates fixed by the caller)."""
    # int32 or int64 positions as they are (index_add_ takes either): no int64 copy of them
    total.index_add_(0, coded.positions.to(total.device), coded.values.to(total.device, total.dtype),
                     alpha=weight)  # fmt: skip
