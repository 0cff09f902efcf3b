"""QSGD as AnycostFL describes its baseline (Sec. V-B): "TopK sparsification and probabilistic quantization are
combined to compress the local gradient" (Alistarh et al., NeurIPS 2017), under the same T_max / E_max budgets
(:mod:`edgefl.methods.budgeted`).

A device trains the full model, keeps the k largest-magnitude elements, quantises their magnitudes with the
unbiased stochastic quantiser of ``LEVELS`` intervals (:func:`edgefl.compression.ops.stochastic_levels`),
and codes the result with AnycostFL's format 0xA7 (:func:`edgefl.compression.fgc.fit`, element-wise: Rice
positions, sign bits, Huffman level indices). k is the largest whose exact encoded size fits the planned bits
(within :data:`~edgefl.compression.fgc.K_TOLERANCE`).
The server averages the decoded updates weighted by |D_i| (FedAvg).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgefl.methods.base import ClientUpdate, TrainJob
from edgefl.methods.budgeted import BudgetedMethod

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    from edgefl.learning.protocol import Training

__all__ = ["QSGD", "LEVELS"]

LEVELS = 7
"""Quantisation intervals s of QSGD (8 points between the smallest and largest kept magnitude, about 3 bits
before entropy coding); the knob the budget moves is the sparsity k."""


class QSGD(BudgetedMethod):
    """Element-wise top-k + unbiased stochastic quantisation with ``LEVELS`` intervals; k from the bit budget."""

    name = "qsgd"
    levels = LEVELS

    def min_payload_bits(self) -> float:
        """The exact size [bits] of one element kept at ``levels`` (its range is one point: no level codes)."""
        import torch

        from edgefl.compression import fgc

        ones = {k: torch.ones_like(v) for k, v in self.workload.initial_state().items()}
        return float(fgc.encode(ones, kept=1, levels=self.levels, gen=torch.Generator(), kernel_wise=False).bits)

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression import fgc, ops

        update = res.on_device  # coded where it was trained
        gen = ops.job_generator(job.rng("quantization"), res.device)
        try:
            coded = fgc.fit(update, job.job.bits_planned, gen, levels_grid=(self.levels,), kernel_wise=False)
        except fgc.BudgetError:  # not even the header fits: the header alone
            coded = fgc.encode(update, kept=0, levels=self.levels, gen=gen, kernel_wise=False)
        return self.coded_update(job, res, coded)
