"""FedNova (Wang et al., "Tackling the Objective Inconsistency Problem in Heterogeneous Federated Optimization",
NeurIPS 2020) with local steps reduced in proportion to p_i: CC-FedAvg's comparison (Zhang et al., Sec. VI-D).

Device i runs tau_i = max(1, round(p_i K_i)) SGD steps, K_i being FedAvg's steps per round (p_i from the
``[method.fednova]`` settings, the same fields as CC-FedAvg's). The plan costs those tau_i steps (their samples
by the trainer's rule), so a device is charged what was planned. The server normalises each update by its step count before averaging
(FedNova eq. (6)-(7) with w_i = |D_i| / sum_j |D_j| over the kept updates):

    x_{t+1} = x_t + tau_eff * sum_i w_i Delta_i / ||a_i||_1,    tau_eff = sum_i w_i ||a_i||_1,

where ||a_i||_1 = tau_i for plain SGD and [tau_i - rho (1 - rho^tau_i) / (1 - rho)] / (1 - rho) for SGD with
momentum rho (FedNova Sec. 4, "momentum SGD"). Weight decay and gradient clipping are not normalised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgefl.methods.base import ClientUpdate, LocalTraining, RoundContext, RoundPlan, TrainJob
from edgefl.methods.ccfedavg_schedule import ProbabilityMethod
from edgefl.methods.fedavg import FedAvg
from edgefl.learning.config import samples_per_round, steps_per_round

if TYPE_CHECKING:
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State

__all__ = ["FedNova", "reduced_steps", "a_norm", "fednova_update"]


def reduced_steps(p: np.ndarray, full_steps: np.ndarray) -> np.ndarray:
    """tau_i = max(1, round(p_i K_i)) local steps; int64, shape of p."""
    return np.maximum(1, np.round(np.asarray(p, dtype=float) * np.asarray(full_steps))).astype(np.int64)


def a_norm(steps: int, momentum: float = 0.0) -> float:
    """||a_i||_1 of FedNova for ``steps`` local SGD steps with heavy-ball ``momentum`` rho in [0, 1)."""
    if momentum == 0.0:
        return float(steps)
    rho = float(momentum)
    return (steps - rho * (1.0 - rho**steps) / (1.0 - rho)) / (1.0 - rho)


def fednova_update(updates: Sequence[State], weights: Sequence[float], norms: Sequence[float]) -> State:
    """FedNova's aggregate update tau_eff * sum_i w_i u_i / a_i with w normalised to sum 1 (FedNova eq. (7))."""
    import torch

    if not updates or len(updates) != len(weights) or len(updates) != len(norms):
        raise ValueError("fednova_update: need as many weights and norms as updates, at least one")
    total = float(sum(weights))
    if total <= 0 or min(norms) <= 0:
        raise ValueError(f"fednova_update: sum of weights={total} and every norm must be > 0")
    w = [float(x) / total for x in weights]
    tau_eff = sum(wi * a for wi, a in zip(w, norms))
    out: State = {}
    for name in updates[0]:
        acc = torch.zeros_like(updates[0][name])
        for u, wi, a in zip(updates, w, norms):
            acc.add_(u[name], alpha=tau_eff * wi / float(a))
        out[name] = acc
    return out


class FedNova(ProbabilityMethod):
    """FedAvg planning with tau_i local steps and FedNova's normalised averaging."""

    name = "fednova"
    plans_to_t_max = FedAvg.__dict__["plans_to_t_max"]  # FedAvg's plan; only whether there is a deadline counts

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self.steps: np.ndarray | None = None  # tau_i, shape (n_devices,)
        self.full_steps = steps_per_round(self.workload.train_config, self.workload.n_samples)

    def local_work(self, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """tau_i steps and their samples: a full FedAvg round where tau_i = K_i, else tau_i fixed steps."""
        full_steps, full_samples = super().local_work(dev)
        tau = self.steps[dev]
        cfg = dataclasses.replace(self.workload.train_config, steps=1, epochs=1)
        reduced = tau * samples_per_round(cfg, self.workload.n_samples[dev])  # tau x min(batch, n_i)
        full = tau >= full_steps
        return np.where(full, full_steps, tau), np.where(full, full_samples, reduced)

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        if self.steps is None:
            self.steps = reduced_steps(self.probabilities(deadline=ctx.t_budget_s is not None), self.full_steps)
        return super().plan_round(ctx)  # FedAvg's plan of the local work above

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining:
        """A full FedAvg round (p_i = 1), or tau_i SGD steps; trained together only under ``train.vectorise =
        "on"`` (its ``auto`` is False)."""
        steps = int(job.job.local_steps)
        full = steps >= self.full_steps[job.device]
        return LocalTraining(start=job.start, width=job.job.width, steps=None if full else steps)

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.methods.aggregate import apply_update

        if not updates:
            return state
        rho = self.workload.train_config.momentum
        norms = [a_norm(u.steps, rho) for u in updates]
        mean = fednova_update([u.payload.update for u in updates], [u.weight for u in updates], norms)
        return apply_update(state, mean)
