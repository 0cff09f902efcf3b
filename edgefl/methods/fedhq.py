"""FedHQ (Chen et al., "Dynamic Aggregation for Heterogeneous Quantization in Federated Learning", IEEE TWC
2021), as AnycostFL's baseline (Sec. V-B) under the same T_max / E_max budgets (:mod:`edgefl.methods.budgeted`).

A device trains the full model and quantises *every* element with L intervals (unbiased stochastic rounding,
AnycostFL eqs. (3)-(4), AnycostFL's format 0xA7: :func:`edgefl.compression.fgc.fit_levels`); L is the largest whose
exact encoded size fits the bits its channel and budgets allow (L fits, L + 1 does not). Each device sends, with its payload, its update's
measured relative quantisation error ``q_i = ||Q(u_i) - u_i||^2 / ||u_i||^2`` (the paper's "instantaneous
quantisation error" piggybacked on the upload), and the server weights the updates by
``p_i = (n_i / (1 + q_i)) / sum_j n_j / (1 + q_j)`` (:func:`fedhq_weights`).

Where the weights come from: the paper (IEEE TWC 20(10):6804-6819) chooses the weights that minimise its
convergence bound as a function of the clients' quantisation errors. For an unbiased quantiser,
``E||Q(u)||^2 = ||u||^2 + E||Q(u) - u||^2 <= (1 + q_i) ||u||^2``, and minimising ``sum_i p_i^2 (1 + q_i)``
subject to ``sum_i p_i = 1`` gives ``p_i`` proportional to ``1 / (1 + q_i)``, the rule a public FedHQ
reproduction uses with q_i measured each round on equal-sized shards. The factor ``n_i`` (the device's
training samples) for unequal data is edgefl's extension, not the paper's. A device with a lossless update
(q_i = 0) weighs ``n_i``; a coarsely quantised one (q_i = 3) a quarter of that, never the whole round.

The smallest payload the plan allows is the codec's real size for every element at L = 1
(:func:`smallest_full_payload_bits`), so no job trains and pays for an update that could only send a header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.methods.base import ClientUpdate, TrainJob, Needs
from edgefl.methods.budgeted import BudgetedMethod
from edgefl.learning.config import BITS_PER_PARAMETER

if TYPE_CHECKING:
    from edgefl.learning.workload import TrainResult
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State

__all__ = ["FedHQ", "QuantizedUpdate", "fedhq_weights", "relative_error", "smallest_full_payload_bits"]

@dataclass(frozen=True)
class QuantizedUpdate:
    """A FedHQ payload: the codec's symbols (:class:`~edgefl.compression.coded.Coded`), its L intervals (0:
    nothing fit, a header-only update) and its measured relative quantisation error q_i (None when nothing was
    sent); ``update``: the quantised update the server applies."""

    coded: Any
    levels: int
    rel_error: float | None

    @property
    def update(self) -> dict:
        return self.coded.dense()


def relative_error(quantized, original) -> float:
    """Measured relative quantisation error ``||Q(u) - u||^2 / ||u||^2`` of one update (flat vectors of one
    shape, tensors or arrays; ``original`` may also be the update's tensors in order, read as the float32
    concatenation the codec quantised, without building it); float64 sums; 0 for a zero update (nothing to
    lose)."""
    import torch

    d = torch.as_tensor(quantized).reshape(-1).to(torch.float64, copy=True)
    if isinstance(original, (list, tuple)):
        u, at = torch.empty_like(d), 0
        for part in original:
            u[at : at + part.numel()].copy_(part.detach().reshape(-1).to(torch.float32))
            at += part.numel()
    else:
        u = torch.as_tensor(original).reshape(-1).to(device=d.device, dtype=torch.float64)
    norm2 = float(u @ u)
    if norm2 == 0.0:
        return 0.0
    d -= u
    return float(d @ d) / norm2


def fedhq_weights(n_samples: Sequence[float], rel_errors: Sequence[float]) -> np.ndarray:
    """FedHQ aggregation weights ``p_i = (n_i / (1 + q_i)) / sum_j n_j / (1 + q_j)``, shape (m,).

    ``n_samples``: each update's training samples n_i (> 0); ``rel_errors``: its measured q_i (>= 0).
    """
    n = np.asarray(n_samples, dtype=float)
    q = np.asarray(rel_errors, dtype=float)
    w = n / (1.0 + q)
    return w / w.sum()


def smallest_full_payload_bits(shapes: dict[str, tuple[int, ...]]) -> int:
    """Exact size [bits] of every element at L = 1 interval for an incompressible update of these tensor shapes.

    Measured with the codec (:func:`edgefl.compression.fgc.encode`) on values iid uniform on [-1, 1]: the signs
    and the L = 1 level indices are fair coins, so the Huffman stage saves nothing and the payload is about 2 bits
    per parameter plus the header, range and Huffman table. A trained update's indices are skewed and code
    smaller.
    """
    import torch

    from edgefl.compression import fgc

    g = torch.Generator().manual_seed(0)
    worst = {k: 2 * torch.rand(tuple(shape), generator=g) - 1 for k, shape in shapes.items()}
    n = sum(v.numel() for v in worst.values())
    return int(fgc.encode(worst, kept=n, levels=1, gen=g, kernel_wise=False).bits)


class FedHQ(BudgetedMethod):
    """Full update, L intervals per device from its bit budget; weights n_i / (1 + q_i) (:func:`fedhq_weights`)."""

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

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        from edgefl.compression import fgc, ops

        update = res.on_device  # coded where it was trained
        gen = ops.job_generator(job.rng("quantization"), res.device)
        try:
            coded = fgc.fit_levels(update, job.job.bits_planned, gen)
            levels = coded.meta["levels"]
            q = relative_error(coded.values, list(update.values()))  # every element sent, in element order
        except fgc.BudgetError:  # not even L = 1 fits: the header alone
            coded, levels, q = fgc.encode(update, kept=0, levels=1, gen=gen, kernel_wise=False), 0, None
        return ClientUpdate(
            device=job.device, payload=QuantizedUpdate(coded.on_cpu(), levels, q), weight=float(res.n_samples),
            bits=float(coded.bits), flops=res.flops, steps=res.steps, train_loss=res.train_loss,
        )  # fmt: skip

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.methods.aggregate import apply_update, weighted_mean_update

        sent = [u for u in updates if u.payload.rel_error is not None]
        if not sent:
            return state
        p = fedhq_weights([u.weight for u in sent], [u.payload.rel_error for u in sent])
        return apply_update(state, weighted_mean_update([u.payload.update for u in sent], p))
