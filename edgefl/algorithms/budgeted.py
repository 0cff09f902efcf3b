"""Shared planning for compression baselines under AnycostFL's budgets (AnycostFL Sec. V-B: STC, QSGD, FedHQ;
UVeQFed, a row of its Table I).

Every device trains the full model and spends what T_max and E_max leave on upload bits: the cost model's
:meth:`~edgefl.costs.CostModel.upload_budget` gives the frequency that leaves the most bits and those bits
(AnycostFL eqs. (6)-(9)). The planned bits are the device's budget; the method then picks the largest setting
of its own knob (sparsity, levels) whose *real encoded size* fits them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, Needs, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round

if TYPE_CHECKING:
    from edgefl.compression.codec import Compressed
    from edgefl.learning.workload import State, TrainResult

__all__ = ["BudgetedMethod", "CompressedUpdate"]


@dataclass(frozen=True)
class CompressedUpdate:
    """What the server decodes from a compressed full-model payload: the update and how many kernels it kept."""

    update: Any
    kept: int


class BudgetedMethod(Method):
    """A full-model method whose knob is the compressed size: plans with :func:`upload_budget`.

    Subclasses give :meth:`min_payload_bits` and build payloads of at most ``job.bits_planned`` bits.
    The plan records ``alpha = 1`` and ``beta = bits / S`` (the planned compression rate). The bit budget comes
    from the radio (:meth:`edgefl.costs.CostModel.upload_budget`), so these methods plan only under the physical
    cost model: with Luo's per-step costs an upload costs the same whatever its size.
    """

    needs = Needs(cost_modes=("physical",))

    def min_payload_bits(self) -> float:
        """The smallest useful payload [bits] (a device that cannot afford it sits out)."""
        return 1.0

    @cached_property
    def _min_bits(self) -> float:
        # min_payload_bits depends only on the model's shape: computed once per run
        return float(self.min_payload_bits())

    def packed_update(self, job: DeviceJob, res: TrainResult, packed: Compressed) -> ClientUpdate:
        """A compressed full-model update: the decoded update the server applies (``packed.update``) and the
        number of kept kernels, charged the real encoded size ``packed.bits``."""
        return ClientUpdate(
            device=job.device, payload=CompressedUpdate(packed.update, int(packed.kept_kernels)),
            weight=float(res.n_samples), bits=float(packed.bits), flops=res.flops, steps=res.steps,
            train_loss=res.train_loss,
        )  # fmt: skip

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        """FedAvg of the decoded updates, weighted by |D_i| (a method with its own rule overrides this)."""
        from edgefl.algorithms.aggregate import fedavg_step

        return fedavg_step(global_state, [u.payload.update for u in updates], [u.weight for u in updates])

    def learning_gain(self, jobs: JobTable, n_selected: int) -> float:
        """Global learning gain (AnycostFL Definition 3) with alpha = 1 and beta = planned bits / S."""
        from edgefl.learning.surrogate import learning_gain

        return learning_gain(jobs.alpha, jobs.beta, n_selected)

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev, wl = ctx.selected, self.workload
        t_max = math.inf if ctx.t_budget_s is None else float(ctx.t_budget_s)
        s_bits = float(wl.update_bits)
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        cycles = ctx.costs.cycles(dev, wl.flops_per_sample() * wl.samples_per_round(dev))
        b = ctx.costs.upload_budget(
            dev, cycles=cycles, steps=steps, e_max_j=ctx.e_max_j[dev], rate_bps=ctx.rate_bps[dev], t_max_s=t_max,
            min_bits=self._min_bits, max_bits=2 * s_bits + 65536,  # more than any payload of the model
        )  # fmt: skip
        ok = b.feasible
        jobs = JobTable.build(
            dev[ok], cpu_hz=b.f_hz[ok], width=self.setup.width, alpha=1.0, beta=b.bits[ok] / s_bits,
            local_steps=steps[ok], bits_planned=b.bits[ok],
            t_cmp_planned_s=b.t_cmp_s[ok], t_com_planned_s=b.t_com_s[ok], e_cmp_planned_j=b.e_cmp_j[ok],
            e_com_planned_j=b.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], b.reason[~ok].astype(object))
