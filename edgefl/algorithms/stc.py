"""STC, sparse ternary compression (Sattler et al., IEEE TNNLS 2019), as AnycostFL's baseline (Sec. V-B) under
the same T_max / E_max budgets (:mod:`edgefl.algorithms.budgeted`).

A device trains the full model, adds its error-feedback residual to the update, keeps the k largest-magnitude
elements as +-mu (mu = mean |kept|), codes positions with Golomb-Rice and signs as bits
(:mod:`edgefl.compression.stc`), and keeps what it did not send as its next residual. k is the largest whose real
encoded size fits the planned bits. The server averages the decoded updates weighted by |D_i| (FedAvg).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgefl.algorithms.base import ClientUpdate, TrainJob
from edgefl.algorithms.budgeted import BudgetedMethod

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State

__all__ = ["STC"]


class STC(BudgetedMethod):
    """Top-k + ternary values + error feedback + Golomb-Rice positions; k from the device's bit budget.

    Error-feedback residuals are float64 (``acc - sent`` of two float32 values is exact in float64, so
    ``residual + sent == accumulated`` holds exactly); the accumulated update is rounded to float32 before
    ternarisation. They are kept per client and saved in :meth:`state_dict`.
    """

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
        import torch

        from edgefl.compression.search import largest_fitting
        from edgefl.compression.stc import TernarySizer

        acc = self.accumulate(res.update, job.memory)
        sizer = TernarySizer(acc)
        k = largest_fitting(sizer.bits, 0, sizer.n, job.job.bits_planned)
        packed = sizer.encode(0 if k is None else k)  # k None only if the header alone exceeds the budget
        sent = packed.update  # what the server decodes
        # acc - sent in float64 (exact for two float32 values), computed by numpy into numpy-backed tensors
        residual = {n: torch.from_numpy(np.subtract(acc[n].numpy(), sent[n].numpy(), dtype=np.float64)) for n in acc}
        return self.packed_update(job, res, packed, memory=residual)

    def state_dict(self) -> dict:
        return {"residual": {str(d): dict(r) for d, r in sorted(self.residual.items())}}

    def load_state_dict(self, state: dict) -> None:
        self.residual = {int(d): dict(r) for d, r in state.get("residual", {}).items()}
