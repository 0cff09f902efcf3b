"""Shared planning for compression baselines under AnycostFL's budgets (AnycostFL Sec. V-B: STC, QSGD, FedHQ;
UVeQFed, a row of its Table I).

Every device trains the full model. How it meets T_max and E_max is the ``protocol`` of
:class:`BudgetedSettings`:

- ``"deadline"`` (the default): every round lasts T_max for every method (AnycostFL's Table I: the latency
  column is #rounds x T_max), the four compression baselines compute the same 8.35 GFLOPs per device-round
  (= the full CNN on every device in every round: 152.71 TFLOPs / 305 / 60 for STC, 141.53 / 283 / 60 for
  QSGD, 123.67 / 247 / 60 for UVeQFed, 144.36 / 288 / 60 for FedHQ), and they spend 0.60-0.80 J per
  device-round against E_max ~ U[1.5, 4.5] J, so they do not burn their budgets on bits. Here: the payload is
  at most ``beta_max`` S, or the method's smallest real payload where that is larger (FedHQ quantises every
  element: >= ~2 bits each), and the CPU runs at the lowest frequency that computes and uploads it within
  T_max; where T_max and E_max leave fewer bits than the cap, the device sends what they leave (the
  ``"budget"`` plan). The ``beta_max`` S cap is edgefl's choice (AnycostFL's own compression cap, its
  constraint (10d)), not Table I's communication column: that column is 0.26-0.40 Mb per device-round
  (AnycostFL 0.35 GB / 179 rounds / 60 devices; STC 0.31, QSGD 0.38, UVeQFed 0.39, FedHQ 0.40 Mb), about
  0.5-0.75% of S, where ``beta_max`` S is 3.55 Mb. ``beta_max = 0.0049`` plans 0.26 Mb: STC's column within
  30%, QSGD's and UVeQFed's just outside it (-31%, -33%), but FedHQ's every-element payload cannot go below
  ~2 bits per parameter (3.3 Mb), so the default keeps 1/15 (examples/README.md has the measured planning
  figures).
- ``"budget"``: same budgets, most bits: the frequency that leaves the most upload bits under T_max and E_max
  and all those bits (spends the energy budget).

Either way the cost model's :meth:`~edgefl.fleet.costs.CostModel.upload_budget` (AnycostFL eqs. (6)-(9)) gives the
frequency and the device's bit budget, and a device whose budget is below the method's smallest real payload
sits out. The method then picks the largest setting of its own knob (sparsity, levels) whose *real encoded
size* fits the planned bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from edgefl.methods.base import (
    ClientUpdate, JobTable, LocalTraining, Method, Needs, RoundContext, RoundPlan, TrainJob,
)  # fmt: skip
from edgefl.learning.config import steps_per_round
from edgefl.scenario.section_base import Strict

if TYPE_CHECKING:
    from edgefl.compression.coded import Coded
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State, TrainResult

__all__ = ["BudgetedMethod", "BudgetedSettings", "CodedUpdate"]


class BudgetedSettings(Strict):
    """``[method.<baseline>]`` of a compression baseline: ``protocol``, how it meets T_max and E_max
    (``"deadline"``: at most ``beta_max`` S bits at the lowest frequency that meets T_max, the paper's;
    ``"budget"``: the most bits T_max and E_max leave; see :mod:`edgefl.methods.budgeted`), and ``beta_max``,
    the payload cap as a fraction of the dense update's S bits under ``"deadline"`` (AnycostFL Sec. V-A: 1/15).
    """

    protocol: Literal["deadline", "budget"] = "deadline"
    beta_max: float = Field(1 / 15, gt=0, le=1)


@dataclass(frozen=True)
class CodedUpdate:
    """A compressed full-model update as its codec's symbols (:class:`~edgefl.compression.coded.Coded`, what
    crosses processes); ``update``: the dense update the server applies, ``kept``: the header's kept count."""

    coded: Coded

    @property
    def update(self) -> dict:
        return self.coded.dense()

    @property
    def kept(self) -> int:
        return self.coded.kept


class BudgetedMethod(Method):
    """A full-model method whose knob is the compressed size: plans with :func:`upload_budget`.

    Subclasses give :meth:`min_payload_bits` and build payloads of at most ``job.bits_planned`` bits.
    The plan records ``alpha = 1`` and ``beta = bits / S`` (the planned compression rate). The bit budget comes
    from the radio (:meth:`edgefl.fleet.costs.CostModel.upload_budget`), so these methods plan only under the physical
    cost model: with Luo's per-step costs an upload costs the same whatever its size.
    """

    needs = Needs(cost_modes=("physical",))
    takes_allocation = "radio"  # upload_budget plans with ctx.rate_bps and ctx.costs, and sets the frequency
    Settings = BudgetedSettings
    device_columns = ("payload_kept",)

    def min_payload_bits(self) -> float:
        """The smallest useful payload [bits] (a device that cannot afford it sits out)."""
        return 1.0

    @cached_property
    def _min_bits(self) -> float:
        # min_payload_bits depends only on the model's shape: computed once per run
        return float(self.min_payload_bits())

    def payload_kept(self, payload: Any) -> int:
        """What a payload carries beyond its header: kept kernels or sub-vectors (FedHQ: its L intervals);
        0 is a header-only update."""
        return int(payload.kept)

    def device_values(self, jobs: JobTable, *, updates: Sequence[ClientUpdate | None]) -> dict[str, np.ndarray]:
        """``payload_kept`` per job (:meth:`payload_kept`; NaN under surrogate learning)."""
        kept = [math.nan if u is None else float(self.payload_kept(u.payload)) for u in updates]
        return {"payload_kept": np.asarray(kept, dtype=float)}

    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        return self.trained_update(job, trainer=trainer)

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining:
        """The full model trained with the scenario's epochs/steps; the subclass's :meth:`finish_update` then
        compresses the update to the job's bit budget, per job."""
        return LocalTraining(start=job.start)

    def coded_update(self, job: TrainJob, res: TrainResult, coded: Coded, *, memory: Any = None) -> ClientUpdate:
        """A compressed full-model update carried as its codec's symbols (:class:`CodedUpdate`), charged the exact
        encoded size ``coded.bits``; ``memory``: what the device keeps."""
        return ClientUpdate(
            device=job.device, payload=CodedUpdate(coded.on_cpu()), weight=float(res.n_samples), bits=float(coded.bits),
            flops=res.flops, steps=res.steps, train_loss=res.train_loss, memory=memory,
        )  # fmt: skip

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        """FedAvg of the decoded updates, weighted by |D_i| (a method with its own rule overrides this); coded
        updates are added into one float64 flat sum at their positions (``scatter_add``), in arrival order."""
        from edgefl.methods.aggregate import fedavg_step

        if updates and isinstance(updates[0].payload, CodedUpdate):
            import torch

            from edgefl.compression.coded import scatter_add

            first, total_w = updates[0].payload.coded, float(sum(u.weight for u in updates))
            total = torch.zeros(first.n, dtype=torch.float64, device=first.values.device)
            for u in updates:
                scatter_add(total, u.payload.coded, u.weight / total_w)
            parts = torch.split(total.float(), [math.prod(s) for s in first.shapes])
            mean = {name: part.view(shape) for name, shape, part in zip(first.names, first.shapes, parts)}
            return {name: state[name] + mean[name].to(state[name].device) for name in state}
        return fedavg_step(state, [u.payload.update for u in updates], [u.weight for u in updates])

    def learning_gain(self, jobs: JobTable, *, n_selected: int) -> float:
        """Global learning gain (AnycostFL Definition 3) with alpha = 1 and beta = planned bits / S."""
        from edgefl.learning.surrogate import learning_gain

        return learning_gain(jobs.alpha, jobs.beta, n_selected)

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev, wl = ctx.selected, self.workload
        t_max = math.inf if ctx.t_budget_s is None else float(ctx.t_budget_s)
        s_bits = float(wl.update_bits)
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        cycles = ctx.costs.cycles(dev, wl.flops_per_sample() * wl.samples_per_round(dev))
        frugal = self.settings.protocol == "deadline"
        cap = max(math.floor(self.settings.beta_max * s_bits), self._min_bits) if frugal else 2 * s_bits + 65536
        b = ctx.costs.upload_budget(
            dev, cycles=cycles, steps=steps, e_max_j=ctx.e_max_j[dev], rate_bps=ctx.rate_bps[dev], t_max_s=t_max,
            min_bits=self._min_bits, max_bits=cap, frugal=frugal,
        )  # fmt: skip
        ok = b.feasible
        jobs = JobTable.build(
            dev[ok], cpu_hz=b.f_hz[ok], width=self.setup.width, alpha=1.0, beta=b.bits[ok] / s_bits,
            local_steps=steps[ok], bits_planned=b.bits[ok],
            t_cmp_planned_s=b.t_cmp_s[ok], t_com_planned_s=b.t_com_s[ok], e_cmp_planned_j=b.e_cmp_j[ok],
            e_com_planned_j=b.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], b.reason[~ok].astype(object))
