"""UVeQFed (Shlezinger et al., "UVeQFed: Universal Vector Quantization for Federated Learning", IEEE TSP 2021,
arXiv 2006.03262), as a row of AnycostFL's Table I, under the same T_max / E_max budgets as the other baselines
(:mod:`edgefl.methods.budgeted`).

A device trains the full model, cuts its update into sub-vectors of L = 2 consecutive elements, keeps the k of
largest norm, and quantises them with subtractive-dithered lattice vector quantisation on the hexagonal lattice A2,
entropy-coding the lattice points (:mod:`edgefl.compression.vq`, the paper's encoder steps E1-E4). The dither
comes from a seed drawn from the run's ``"quantization"`` stream for (round, device): a seed the server knows too,
so it regenerates the dither and subtracts it (decoder steps D1-D3; :func:`~edgefl.compression.vq.from_bytes`).
k is the largest whose exact encoded size fits the planned bits (to within
:data:`~edgefl.compression.vq.TOLERANCE` of k); the lattice's minimum distance is ``step`` times the RMS of the
whole update, whatever k. The server averages the sent updates weighted by |D_i| (FedAvg). Only the paper's
abstract could be read here; see :mod:`edgefl.compression.vq` for what was and was not checked against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from edgefl.methods.base import ClientUpdate, TrainJob
from edgefl.methods.budgeted import BudgetedMethod, BudgetedSettings

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    from edgefl.learning.protocol import Training

__all__ = ["UVeQFed", "UVeQFedSettings"]

STREAM = "quantization"
"""The run's stream the dither is drawn from, keyed (round, device): the seed both ends share."""


class UVeQFedSettings(BudgetedSettings):
    """``[method.uveqfed]``: the baselines' ``protocol`` and ``beta_max`` (:class:`BudgetedSettings`) and ``step``, the A2 lattice's minimum distance in units of the update's RMS
    ``||h|| / sqrt(n)`` (the scale of step E1). A kept element's error has variance ``5 step^2 / 72`` times the
    update's mean square (0.069 at the default 1.0); a smaller step spends more bits per kept sub-vector, so the
    budget keeps fewer."""

    step: float = Field(1.0, ge=0.01, le=100)  # >= 0.01: joined symbols stay far inside int64


class UVeQFed(BudgetedMethod):
    """Top-k sub-vectors + subtractive-dithered A2 lattice quantisation + entropy coding; k from the bit budget."""

    name = "uveqfed"
    Settings = UVeQFedSettings

    def dither_seed(self, round_index: int, device: int) -> int:
        """The shared seed of the dither of ``device``'s payload in ``round_index`` (both ends)."""
        return int(self.streams.numpy(STREAM, round_index, device).integers(0, 2**63 - 1))

    def min_payload_bits(self) -> float:
        import torch

        from edgefl.compression import vq

        ones = {k: torch.ones_like(v) for k, v in self.workload.initial_state().items()}
        return float(vq.encode(ones, 1, step=self.settings.step, seed=0).bits)

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression import vq

        seed = int(job.rng(STREAM).integers(0, 2**63 - 1))  # the dither_seed the server regenerates
        coded = vq.fit(res.on_device, job.job.bits_planned, step=self.settings.step, seed=seed)  # where it trained
        return self.coded_update(job, res, coded)
