"""What a compressed update is after its codec ran: its compact symbols, the exact size of their encoding, and the
values the server aggregates, without a dense tensor or a byte string in between.

A codec returns a :class:`Coded`: the positions of the elements it sends (flat indices into the concatenation of
the update's tensors, ascending) and their dequantised float32 values, the shapes and names it was built for, its
size in bits (the padded length of the payload its :meth:`Coded.to_bytes` writes, computed from the symbols'
statistics, never by writing it) and the few numbers that define it. The arrays are the smallest that say what was
sent (int32 positions, the dequantised values), so that an update crosses processes in a few hundred kB, and the
server adds it into its running sums with one ``index_add_`` (:func:`scatter_add`), on the device it is on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

__all__ = ["Coded", "flat_update", "scatter_add", "dense"]


@dataclass(frozen=True, kw_only=True)
class Coded:
    """One encoded update. ``positions``: int64 or int32 flat indices of the sent elements, ascending;
    ``values``: their dequantised float32 values (what the server aggregates); ``names``/``shapes``: the update's
    tensors; ``bits``: the exact payload size [bits], padded to a whole byte; ``kept``: the header's kept count
    (kernels, elements or sub-vectors, by codec); ``meta``: the codec's own scalars (levels, range, seed...) that
    :meth:`to_bytes` needs beside the arrays; ``codec``: the module-level name of the codec that wrote it."""

    positions: torch.Tensor
    values: torch.Tensor
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    bits: int
    kept: int
    codec: str
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Elements in the whole update."""
        return sum(math.prod(s) for s in self.shapes)

    def to(self, device: torch.device | str) -> Coded:
        """The same update with its arrays (``meta``'s too) on ``device``."""
        meta = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.meta.items()}
        return Coded(positions=self.positions.to(device), values=self.values.to(device), names=self.names,
                     shapes=self.shapes, bits=self.bits, kept=self.kept, codec=self.codec, meta=meta)  # fmt: skip

    def on_cpu(self) -> Coded:
        """This update where the server aggregates it, the CPU: itself when it is there, else a copy
        (:meth:`to`); a GPU-coded update crosses processes and reaches the server in this form."""
        return self if self.values.device.type == "cpu" and self.positions.device.type == "cpu" else self.to("cpu")

    def dense(self) -> dict[str, torch.Tensor]:
        """The dequantised update as float32 tensors by name (0 where nothing was sent)."""
        return dense(self)

    def sent(self) -> dict[str, torch.Tensor]:
        """Boolean tensors by name: the elements the payload carries (AnycostFL's m_{t,i} of eq. (5))."""
        flat = torch.zeros(self.n, dtype=torch.bool, device=self.values.device)
        flat[self.positions.long()] = True
        return _split(flat, self.names, self.shapes)


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
    flat = torch.zeros(coded.n, dtype=torch.float32, device=coded.values.device)
    flat[coded.positions.long()] = coded.values
    return _split(flat, coded.names, coded.shapes)


def scatter_add(total: torch.Tensor, coded: Coded, weight: float = 1.0) -> None:
    """``total[positions] += weight * values`` over the flat update (float64 ``total`` keeps the weighted sum
    exact to float64 rounding, the order of the updates fixed by the caller)."""
    total.index_add_(0, coded.positions.to(total.device).long(), coded.values.to(total.device, total.dtype),
                     alpha=weight)  # fmt: skip
