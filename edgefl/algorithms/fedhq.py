"""FedHQ (Chen et al., "Dynamic Aggregation for Heterogeneous Quantization in Federated Learning", IEEE TWC
2021), as AnycostFL's baseline (Sec. V-B) under the same T_max / E_max budgets (:mod:`edgefl.algorithms.budgeted`).

A device trains the full model and quantises *every* element with L intervals (unbiased stochastic rounding,
AnycostFL eqs. (3)-(4), shared container :func:`edgefl.compression.encode_fixed`); L is the largest whose real
encoded size fits the bits its channel and budgets allow. The server weights each update inversely to its
quantisation error variance, computed from L and the range: ``var_i = n (Delta_i / 2)^2`` with
``Delta_i = (u_max - u_min) / L`` (the largest variance of stochastic rounding in an interval of width Delta is
Delta^2 / 4, :func:`edgefl.compression.quantize.expected_error`).

The weighting rule is not yet checked against the paper: its abstract (IEEE TWC 20(10):6804-6819; the
abstract on openreview.net/forum?id=Qx8BUDfjvt) says the weights minimise the convergence-rate upper bound
as a function of every client's quantisation error, for strongly convex and non-convex losses, and that each
client piggybacks its instantaneous quantisation error on its upload. The closed form itself could not be
read here, so the inverse-variance weights stay until it can (they let one fine-quantised device dominate a
round: issue #16).

The smallest payload the plan allows is the codec's real size for every element at L = 1
(:func:`smallest_full_payload_bits`), so no job trains and pays for an update that could only send a header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, Needs
from edgefl.algorithms.budgeted import BudgetedMethod
from edgefl.learning.config import BITS_PER_PARAMETER

if TYPE_CHECKING:
    from edgefl.learning.workload import State

__all__ = [
    "FedHQ", "QuantizedUpdate", "error_variance", "inverse_variance_weights", "smallest_full_payload_bits",
]

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


def smallest_full_payload_bits(shapes: dict[str, tuple[int, ...]]) -> int:
    """Real size [bits] of every element at L = 1 interval for an incompressible update of these tensor shapes.

    Measured with the codec (:class:`edgefl.compression.search.TopkQuantSizer`) on values iid uniform on [-1, 1]:
    the signs and the L = 1 level indices are fair coins, so the Huffman stage saves nothing and the payload is
    about 2 bits per parameter plus the header, range and Huffman table (2.004 bits per parameter for 1,663,370
    parameters, the FMNIST CNN). A trained update's indices are skewed and code smaller (1.67 bits per parameter
    measured on that CNN).
    """
    import torch

    from edgefl.compression.search import TopkQuantSizer

    g = torch.Generator().manual_seed(0)
    worst = {k: 2 * torch.rand(tuple(shape), generator=g) - 1 for k, shape in shapes.items()}
    sizer = TopkQuantSizer(worst, np.random.default_rng(0))
    return int(sizer.bits(sizer.n, 1))


class FedHQ(BudgetedMethod):
    """Full update, L intervals per device from its bit budget; inverse-error-variance aggregation."""

    name = "fedhq"
    needs = Needs(surrogate=True, cost_modes=("physical",))  # its plan needs no real model

    def payload_kept(self, payload: QuantizedUpdate) -> int:
        """The payload's L intervals (0: nothing fit, a header-only update)."""
        return int(payload.levels)

    def min_payload_bits(self) -> float:
        """The real encoded size [bits] of FedHQ's smallest full payload, :func:`smallest_full_payload_bits` of
        the model's shapes: every job planned with at least this many bits fits L = 1 and sends every element.
        The old floor of 1 bit per parameter let jobs train, pay and then send only the header. Under surrogate
        learning (no tensors) the update is one flat tensor of the surrogate's parameter count."""
        state = self.workload.initial_state()
        if isinstance(state, Mapping):
            shapes = {k: tuple(v.shape) for k, v in state.items()}
        else:
            shapes = {"update": (int(self.workload.update_bits // BITS_PER_PARAMETER),)}
        return float(smallest_full_payload_bits(shapes))

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
