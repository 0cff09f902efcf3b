"""UVeQFed (Shlezinger et al., "UVeQFed: Universal Vector Quantization for Federated Learning", IEEE TSP 2021,
arXiv 2006.03262), as a row of AnycostFL's Table I, under the same T_max / E_max budgets as the other baselines
(:mod:`edgefl.methods.budgeted`).

A device trains the full model, cuts its update into sub-vectors of L = 2 consecutive elements, keeps the k of
largest norm, and quantises them with subtractive-dithered lattice vector quantisation on the hexagonal lattice A2,
entropy-coding the lattice points (:mod:`edgefl.compression.uveqfed`, the paper's encoder steps E1-E4). The dither
comes from the run's ``"quantization"`` stream for (round, device): a seed the server knows too, so it regenerates
the dither and subtracts it (decoder steps D1-D3). k is the largest whose real encoded size fits the planned bits;
the lattice's minimum distance is ``step`` times the RMS of the whole update, whatever k. The server averages the
decoded updates weighted by |D_i| (FedAvg). Only the paper's abstract could be read here; see
:mod:`edgefl.compression.uveqfed` for what was and was not checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from edgefl.methods.base import ClientUpdate, TrainJob
from edgefl.methods.budgeted import BudgetedMethod, BudgetedSettings

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    import numpy as np

    from edgefl.learning.protocol import Training

__all__ = ["UVeQFed", "UVeQFedSettings", "LatticeUpdate"]

STREAM = "quantization"
"""The run's stream the dither is drawn from, keyed (round, device): the seed both ends share."""


class UVeQFedSettings(BudgetedSettings):
    """``[method.uveqfed]``: the baselines' ``protocol`` and ``beta_max`` (:class:`BudgetedSettings`) and ``step``, the A2 lattice's minimum distance in units of the update's RMS
    ``||h|| / sqrt(n)`` (the scale of step E1). A kept element's error has variance ``5 step^2 / 72`` times the
    update's mean square (0.069 at the default 1.0); a smaller step spends more bits per kept sub-vector, so the
    budget keeps fewer."""

    step: float = Field(1.0, ge=0.01, le=100)  # >= 0.01: joined symbols stay far inside int64


@dataclass(frozen=True)
class LatticeUpdate:
    """What the server applies from a UVeQFed payload: the decoded update, the number of kept sub-vectors, and the
    payload bytes themselves (decodable with :meth:`UVeQFed.dither_rng`)."""

    update: Any
    kept: int
    payload: bytes


class UVeQFed(BudgetedMethod):
    """Top-k sub-vectors + subtractive-dithered A2 lattice quantisation + entropy coding; k from the bit budget."""

    codec = "uveqfed"

    name = "uveqfed"
    Settings = UVeQFedSettings

    def dither_rng(self, round_index: int, device: int) -> np.random.Generator:
        """The shared-seed generator of the dither of ``device``'s payload in ``round_index`` (both ends)."""
        return self.streams.numpy(STREAM, round_index, device)

    def min_payload_bits(self) -> float:
        import numpy as np
        import torch

        from edgefl.compression.uveqfed import LatticeSizer

        ones = {k: torch.ones_like(v) for k, v in self.workload.initial_state().items()}
        return float(LatticeSizer(ones, np.random.default_rng(0), step=self.settings.step).bits(1))

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression.container import on_wire
        from edgefl.compression.search import largest_fitting
        from edgefl.compression.uveqfed import LatticeSizer

        sizer = LatticeSizer(res.update, job.rng(STREAM), step=self.settings.step)
        k = largest_fitting(sizer.bits, 0, sizer.m, job.job.bits_planned)
        coded = sizer.encode(0 if k is None else k)  # k None only if the header alone exceeds the budget
        coded = on_wire(coded, job.rng(STREAM))  # to the driver as its payload, decoded there with the shared seed
        return ClientUpdate(
            device=job.device, payload=LatticeUpdate(coded.update, coded.kept, coded.payload),
            weight=float(res.n_samples), bits=float(coded.bits), flops=res.flops, steps=res.steps,
            train_loss=res.train_loss,
        )  # fmt: skip
