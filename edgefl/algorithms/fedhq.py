"""FedHQ (Chen et al., "Dynamic Aggregation for Heterogeneous Quantization in Federated Learning", IEEE TWC
2021), as AnycostFL's baseline (Sec. V-B) under the same T_max / E_max budgets (:mod:`edgefl.algorithms.budgeted`).

A device trains the full model and quantises *every* element with L intervals (unbiased stochastic rounding,
AnycostFL eqs. (3)-(4), shared container :func:`edgefl.compression.encode_fixed`); L is the largest whose real
encoded size fits the bits its channel and budgets allow. The server weights each update inversely to its
quantisation error variance, computed from L and the range: ``var_i = n (Delta_i / 2)^2`` with
``Delta_i = (u_max - u_min) / L`` (the largest variance of stochastic rounding in an interval of width Delta is
Delta^2 / 4, :func:`edgefl.compression.quantize.expected_error`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, Needs
from edgefl.algorithms.budgeted import BudgetedMethod
from edgefl.learning.config import BITS_PER_PARAMETER

if TYPE_CHECKING:
    from edgefl.learning.workload import State

__all__ = ["FedHQ", "QuantizedUpdate", "error_variance", "inverse_variance_weights"]

@dataclass(frozen=True)
class QuantizedUpdate:
    """What the server decodes from a FedHQ payload: the quantised update, its L intervals (0: nothing fit) and
    its quantisation error variance bound (None when nothing was sent)."""

    update: Any
    levels: int
    variance: float | None


_VAR_FLOOR = 1e-30  # a zero-range update has zero variance: give it the weight of a tiny one, not infinity


def error_variance(n_elements: int, levels: int, u_min: float, u_max: float) -> float:
    """Quantisation error variance bound of one update [update units^2]: ``n ((u_max - u_min) / (2 L))^2``."""
    return float(n_elements) * ((float(u_max) - float(u_min)) / (2.0 * int(levels))) ** 2


def inverse_variance_weights(variances: Sequence[float]) -> np.ndarray:
    """FedHQ aggregation weights ``p_i = (1/var_i) / sum_j (1/var_j)``, shape (m,)."""
    inv = 1.0 / np.maximum(np.asarray(variances, dtype=float), _VAR_FLOOR)
    return inv / inv.sum()


class FedHQ(BudgetedMethod):
    """Full update, L intervals per device from its bit budget; inverse-error-variance aggregation."""

    name = "fedhq"
    needs = Needs(surrogate=True, cost_modes=("physical",))  # its plan needs no real model

    def min_payload_bits(self) -> float:
        """One sign bit per parameter at least (FedHQ sends every element)."""
        return float(self.workload.update_bits // BITS_PER_PARAMETER)

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        from edgefl.compression import MAX_LEVELS
        from edgefl.compression.search import TopkQuantSizer, largest_fitting

        res = self.workload.train(job.device, global_state, round_index=round_index)
        rng = self.streams.numpy("quantization", round_index, job.device)
        sizer = TopkQuantSizer(res.update, rng)
        n = sizer.n
        levels = largest_fitting(lambda L: sizer.bits(n, L), 1, MAX_LEVELS, job.bits_planned)
        packed = sizer.encode(n, levels) if levels is not None else sizer.encode(0, 1)  # empty: nothing fits
        mags = np.abs(sizer.flat)
        var = error_variance(n, levels, float(np.float32(mags.min())), float(np.float32(mags.max()))) if levels else None
        return ClientUpdate(
            device=job.device,
            payload=QuantizedUpdate(packed.update, levels or 0, var),
            weight=float(res.n_samples), bits=float(packed.bits), flops=res.flops, steps=res.steps,
            train_loss=res.train_loss,
        )  # fmt: skip

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.algorithms.aggregate import apply_update, weighted_mean_update

        sent = [u for u in updates if u.payload.variance is not None]
        if not sent:
            return global_state
        p = inverse_variance_weights([u.payload.variance for u in sent])
        return apply_update(global_state, weighted_mean_update([u.payload.update for u in sent], p))
