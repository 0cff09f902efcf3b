"""QSGD as AnycostFL describes its baseline (Sec. V-B): "TopK sparsification and probabilistic quantization are
combined to compress the local gradient" (Alistarh et al., NeurIPS 2017), under the same T_max / E_max budgets
(:mod:`edgefl.methods.budgeted`).

A device trains the full model, keeps the k largest-magnitude elements, quantises their magnitudes with the
unbiased stochastic quantiser of ``LEVELS`` intervals (:func:`edgefl.compression.quantize.stochastic_levels`),
and codes the result with the shared container (:func:`edgefl.compression.encode_fixed`, element-wise: Rice
positions, sign bits, Huffman level indices). k is the largest whose real encoded size fits the planned bits.
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

    codec = "topk"

    name = "qsgd"
    levels = LEVELS

    def min_payload_bits(self) -> float:
        import numpy as np
        import torch

        from edgefl.compression.search import TopkQuantSizer

        ones = {k: torch.ones_like(v) for k, v in self.workload.initial_state().items()}
        return float(TopkQuantSizer(ones, np.random.default_rng(0)).bits(1, self.levels))

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression.search import TopkQuantSizer, largest_fitting

        sizer = TopkQuantSizer(res.update, job.rng("quantization"))
        k = largest_fitting(lambda k: sizer.bits(k, self.levels), 0, sizer.n, job.job.bits_planned)
        packed = sizer.encode(0 if k is None else k, self.levels)
        return self.packed_update(job, res, packed)
