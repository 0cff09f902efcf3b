"""STC, sparse ternary compression (Sattler et al., IEEE TNNLS 2019), as AnycostFL's baseline (Sec. V-B) under
the same T_max / E_max budgets (:mod:`edgefl.methods.budgeted`).

A device trains the full model, adds its error-feedback residual to the update, keeps the k largest-magnitude
elements as +-mu (mu = mean |kept|), codes positions with Golomb-Rice and signs as bits
(:mod:`edgefl.compression.stc`), and keeps what it did not send as its next residual (:class:`Residual`: the
accumulated update and the sent one, whose float64 difference it is). k is the largest whose real
encoded size fits the planned bits. The server averages the decoded updates weighted by |D_i| (FedAvg).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np

from edgefl.methods.base import ClientUpdate, TrainJob
from edgefl.methods.budgeted import BudgetedMethod

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State

__all__ = ["STC", "Residual"]


class STC(BudgetedMethod):
    """Top-k + ternary values + error feedback + Golomb-Rice positions; k from the device's bit budget.

    Error-feedback residuals are float64 (``acc - sent`` of two float32 values is exact in float64, so
    ``residual + sent == accumulated`` holds exactly); the accumulated update is rounded to float32 before
    ternarisation. They are kept per client (as :class:`Residual`, the two float32 states they are the difference
    of) and saved in :meth:`state_dict` as float64 tensors.
    """

    codec = "stc"

    name = "stc"

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self.residual: dict[int, State] = {}

    def min_payload_bits(self) -> float:
        import torch

        from edgefl.compression.stc import TernarySizer

        zero = {k: torch.zeros_like(v) for k, v in self.workload.initial_state().items()}
        return float(TernarySizer(zero).bits(1))  # header + one position, mu and a sign

    @staticmethod
    def accumulate(update: State, residual: State | None) -> State:
        """The update plus the device's ``residual`` (None: none yet), rounded to float32 (what STC compresses)."""
        import torch

        if residual is None:
            return {k: v.to(torch.float32) for k, v in update.items()}
        if isinstance(residual, Residual) and all(v.dtype == torch.float32 for v in update.values()):
            return residual.added_to(update)
        return {  # float64 sums rounded to float32, by numpy into numpy-backed tensors
            k: torch.from_numpy(np.add(v.numpy(), residual[k].numpy(), dtype=np.float64).astype(np.float32))
            for k, v in update.items()
        }

    def device_memory(self, device: int) -> State | None:
        """The device's error-feedback residual (None before its first job)."""
        return self.residual.get(device)

    def remember(self, updates) -> None:
        for u in updates:
            self.residual[u.device] = u.memory

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression.container import on_wire
        from edgefl.compression.search import largest_fitting
        from edgefl.compression.stc import TernarySizer

        acc = self.accumulate(res.update, job.memory)
        sizer = TernarySizer(acc)
        k = largest_fitting(sizer.bits, 0, sizer.n, job.job.bits_planned)
        # k None only if the header alone exceeds the budget; the sizer is not used again: its flat copy is reused
        packed = sizer.encode(0 if k is None else k, consume=True)
        # acc - sent, what the server decodes: kept as the two float32 states (no new 13 MB float64 array per job);
        # the payload travels once for both (on_wire): the decoded update is the residual's subtrahend
        packed = on_wire(packed)
        return self.packed_update(job, res, packed, memory=Residual(acc, packed.update))

    def state_dict(self) -> dict:
        return {"residual": {str(d): dict(r) for d, r in sorted(self.residual.items())}}

    def load_state_dict(self, state: dict) -> None:
        self.residual = {int(d): dict(r) for d, r in state.get("residual", {}).items()}


class Residual(Mapping):
    """A device's error-feedback residual ``acc - sent`` (float64 tensors by name, as a read-only mapping), held as
    the two float32 states it is the difference of: the accumulated update and what the server decodes from the
    payload (arrays the job made anyway; neither is changed afterwards). ``residual[name]`` computes the float64
    difference (exact: the difference of two float32 values is a float64 value).

    :meth:`added_to` gives :meth:`STC.accumulate`'s result without the float64 arrays: where ``sent`` is +0.0 (every
    element not sent) the residual is ``acc`` itself, and the float64 sum of two float32 values rounded to float32
    is their float32 sum (double rounding is harmless when the wider format has at least 2p + 2 bits: 53 >= 50), so
    those elements take one float32 addition; the sent ones are added in float64 as before.
    """

    def __init__(self, acc: State, sent: State) -> None:
        self._acc = acc
        self._sent = sent

    def __getitem__(self, name: str):
        import torch

        return torch.from_numpy(np.subtract(self._acc[name].numpy(), self._sent[name].numpy(), dtype=np.float64))

    def __iter__(self) -> Iterator[str]:
        return iter(self._acc)

    def __len__(self) -> int:
        return len(self._acc)

    def __eq__(self, other: object) -> bool:
        """The same residual bit for bit (NaN payloads included), against any mapping of tensors or arrays."""
        if not isinstance(other, Mapping):
            return NotImplemented
        if list(self) != list(other):
            return False
        for name in self:
            a, b = self[name].numpy(), np.asarray(other[name])
            if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a.view(np.uint64), b.view(np.uint64)):
                return False
        return True

    __hash__ = None  # equal by value

    def added_to(self, update: State) -> State:
        """``update + residual`` rounded to float32 (:meth:`STC.accumulate`) for float32 ``update`` tensors."""
        import torch

        out = {}
        for name, v in update.items():
            u, acc, sent = v.numpy(), self._acc[name].numpy(), self._sent[name].numpy()
            total = np.add(u, acc, dtype=np.float32)  # the float64 sum rounded, where sent is +0.0
            at = np.flatnonzero(sent.view(np.uint32))  # sent elements (and any -0.0): the float64 sum as before
            exact = np.subtract(acc.reshape(-1)[at], sent.reshape(-1)[at], dtype=np.float64)
            exact += u.reshape(-1)[at]
            total.reshape(-1)[at] = exact
            out[name] = torch.from_numpy(total)
        return out
