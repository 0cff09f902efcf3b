"""STC, sparse ternary compression (Sattler et al., IEEE TNNLS 2019), as AnycostFL's baseline (Sec. V-B) under
the same T_max / E_max budgets (:mod:`edgefl.methods.budgeted`).

A device trains the full model, adds its error-feedback residual to the update, keeps the k largest-magnitude
elements as +-mu (mu = mean |kept|), codes positions with Golomb-Rice and signs as bits
(:mod:`edgefl.compression.ternary`), and keeps what it did not send as its next residual (:class:`Residual`: the
accumulated update and the sent elements, whose float64 difference it is). k is the largest whose exact encoded
size fits the planned bits (to within :data:`~edgefl.compression.ternary.TOLERANCE` of k). The server averages the
sent updates weighted by |D_i| (FedAvg).
"""

from __future__ import annotations

import math
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

    name = "stc"

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self.residual: dict[int, State] = {}

    def min_payload_bits(self) -> float:
        import torch

        from edgefl.compression import ternary

        zero = {k: torch.zeros_like(v) for k, v in self.workload.initial_state().items()}
        return float(ternary.encode(zero, 1).bits)  # header + one position, mu and a sign

    @staticmethod
    def accumulate(update: State, residual: State | None) -> State:
        """The update plus the device's ``residual`` (None: none yet), rounded to float32 (what STC compresses)."""
        import torch

        if residual is None:
            return {k: v.to(torch.float32) for k, v in update.items()}
        if isinstance(residual, Residual) and all(v.dtype == torch.float32 for v in update.values()):
            return residual.added_to(update)
        return {k: (v.to(torch.float64) + residual[k].to(torch.float64)).to(torch.float32) for k, v in update.items()}

    def device_memory(self, device: int) -> State | None:
        """The device's error-feedback residual (None before its first job)."""
        return self.residual.get(device)

    def remember(self, updates) -> None:
        for u in updates:
            self.residual[u.device] = u.memory

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression import ternary

        acc = self.accumulate(res.update, job.memory)
        coded = ternary.fit(acc, job.job.bits_planned)  # k = 0 only if the header alone exceeds the budget
        return self.coded_update(job, res, coded, memory=Residual(acc, coded))

    def state_dict(self) -> dict:
        return {"residual": {str(d): dict(r) for d, r in sorted(self.residual.items())}}

    def load_state_dict(self, state: dict) -> None:
        self.residual = {int(d): dict(r) for d, r in state.get("residual", {}).items()}


class Residual(Mapping):
    """A device's error-feedback residual ``acc - sent`` (float64 tensors by name, as a read-only mapping), held as
    the accumulated update (float32) and the :class:`~edgefl.compression.coded.Coded` sent from it (neither is
    changed afterwards). ``residual[name]`` computes the float64 difference (exact: the difference of two float32
    values is a float64 value), so ``residual + sent == acc`` element for element.

    :meth:`added_to` gives :meth:`STC.accumulate`'s result without the float64 arrays: where nothing was sent the
    residual is ``acc`` itself, and the float64 sum of two float32 values rounded to float32 is their float32 sum
    (double rounding is harmless when the wider format has at least 2p + 2 bits: 53 >= 50), so those elements
    take one float32 addition; the sent ones are added in float64.
    """

    def __init__(self, acc: State, coded) -> None:
        self._acc = acc
        self._coded = coded

    def __getitem__(self, name: str):
        import torch

        if not hasattr(self, "_sent"):
            self._sent = self._coded.dense()
        return self._acc[name].to(torch.float64) - self._sent[name].to(torch.float64)

    def __getstate__(self) -> dict:
        return {"_acc": self._acc, "_coded": self._coded}  # not the dense copy

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

        from edgefl.compression.coded import flat_update

        names, shapes, u = flat_update(update)
        acc, coded = flat_update(self._acc)[2], self._coded
        if coded.kept == acc.numel():
            # every element sent: float64 a stretch at a time (each element on its own, so the same numbers, with
            # the temporaries kept in the cache)
            total, step = torch.empty_like(acc), 1 << 15
            for c in range(0, acc.numel(), step):
                cut = slice(c, c + step)
                total[cut] = acc[cut].to(torch.float64).sub_(coded.values[cut].to(torch.float64)).add_(
                    u[cut].to(torch.float64))  # fmt: skip
        else:
            # one float32 addition, then the sent elements again in float64 (index_select / index_copy_: several
            # times faster than indexing with a tensor, and no dense float64 copy)
            total = torch.add(u, acc)
            at = coded.positions.long()
            sent = acc.index_select(0, at).to(torch.float64).sub_(coded.values.to(torch.float64))
            total.index_copy_(0, at, sent.add_(u.index_select(0, at).to(torch.float64)).to(torch.float32))
        parts = torch.split(total, [math.prod(s) for s in shapes])
        return {name: part.view(shape) for name, shape, part in zip(names, shapes, parts)}
