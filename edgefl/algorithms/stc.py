"""STC, sparse ternary compression (Sattler et al., IEEE TNNLS 2019), as AnycostFL's baseline (Sec. V-B) under
the same T_max / E_max budgets (:mod:`edgefl.algorithms.budgeted`).

A device trains the full model, adds its error-feedback residual to the update, keeps the k largest-magnitude
elements as +-mu (mu = mean |kept|), codes positions with Golomb-Rice and signs as bits
(:mod:`edgefl.compression.stc`), and keeps what it did not send as its next residual. k is the largest whose real
encoded size fits the planned bits. The server averages the decoded updates weighted by |D_i| (FedAvg).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgefl.algorithms.base import ClientUpdate, DeviceJob
from edgefl.algorithms.budgeted import BudgetedMethod

if TYPE_CHECKING:
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

    def accumulate(self, device: int, update: State) -> State:
        """The update plus the device's residual, rounded to float32 (what STC compresses)."""
        import torch

        res = self.residual.get(device)
        if res is None:
            return {k: v.to(torch.float32) for k, v in update.items()}
        return {k: (v.to(torch.float64) + res[k]).to(torch.float32) for k, v in update.items()}

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        import torch

        from edgefl.compression.search import largest_fitting
        from edgefl.compression.stc import TernarySizer

        res = self.workload.train(job.device, global_state, round_index=round_index)
        acc = self.accumulate(job.device, res.update)
        sizer = TernarySizer(acc)
        k = largest_fitting(sizer.bits, 0, sizer.n, job.bits_planned)
        packed = sizer.encode(0 if k is None else k)  # k None only if the header alone exceeds the budget
        sent = packed.update  # what the server decodes
        self.residual[job.device] = {n: acc[n].to(torch.float64) - sent[n].to(torch.float64) for n in acc}
        return self.packed_update(job, res, packed)

    def state_dict(self) -> dict:
        return {"residual": {str(d): dict(r) for d, r in sorted(self.residual.items())}}

    def load_state_dict(self, state: dict) -> None:
        self.residual = {int(d): dict(r) for d, r in state.get("residual", {}).items()}
