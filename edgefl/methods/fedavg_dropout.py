"""FedAvg(dropout), the computation-limited baseline of CC-FedAvg (Zhang et al., Sec. VI-B, Table I).

Each device trains with FedAvg whenever it is selected until it has used its quota of trained rounds,
ceil(p_i T_sel) with T_sel = T K / N its expected participations (T in cross-silo, where K = N); then it drops
out for the rest of the run (its row says so). p_i comes from the ``[method.fedavg_dropout]`` settings (levels
or battery, the same fields as CC-FedAvg's), so with the same values the quota is the computation CC-FedAvg's
schedule allows on average.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from edgefl.methods.base import ClientUpdate, RoundContext, RoundPlan
from edgefl.methods.ccfedavg_schedule import ProbabilityMethod, expected_participations
from edgefl.methods.fedavg import FedAvg

__all__ = ["FedAvgDropout", "dropout_quota"]


def dropout_quota(p: np.ndarray, participations: float) -> np.ndarray:
    """Trained rounds each device can afford: ceil(p_i T_sel) (1e-9 slack against float noise); shape of p."""
    return np.ceil(np.asarray(p, dtype=float) * participations - 1e-9).astype(np.int64)


class FedAvgDropout(ProbabilityMethod):
    """FedAvg where device i stops for good after ``dropout_quota`` trained rounds."""

    name = "fedavg_dropout"
    plans_to_t_max = FedAvg.__dict__["plans_to_t_max"]  # FedAvg's plan; only whether there is a deadline counts

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self.quota: np.ndarray | None = None
        self.trained = np.zeros(setup.n_devices, dtype=np.int64)

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        if self.quota is None:
            p = self.probabilities(deadline=ctx.t_budget_s is not None)
            self.quota = dropout_quota(p, expected_participations(self.setup))
        sel = ctx.selected
        out = self.trained[sel] >= self.quota[sel]
        base = super().plan_round(dataclasses.replace(ctx, selected=sel[~out]))
        return base.with_skipped(sel[out], [f"dropout: quota of {q} trained rounds used" for q in self.quota[sel[out]]])

    def remember(self, updates: Sequence[ClientUpdate]) -> None:
        """Count a trained round for every job's device: the computation is spent whether or not the update
        arrives in time."""
        for u in updates:
            self.trained[u.device] += 1

    def state_dict(self) -> dict:
        import torch

        return {"trained": torch.from_numpy(self.trained.copy())}

    def load_state_dict(self, state: dict) -> None:
        self.trained = state["trained"].numpy().astype(np.int64).copy()

