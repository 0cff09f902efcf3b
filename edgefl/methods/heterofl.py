"""HeteroFL (Diao et al., ICLR 2021): each client trains the width-r submodel its level allows; the server
averages every element over exactly the clients whose submodel contains it (eqs. (1)-(3)).

The method only composes shared parts: level choice (here), slicing and nested aggregation
(:mod:`edgefl.learning.slicing`), masked cross-entropy (:mod:`edgefl.learning.losses`, through the shared
trainer) and static batch norm (the workload's evaluation). Official-code training details (gradient-norm
clipping 1, SGD momentum 0.9, weight decay 5e-4) are the ``train`` section's settings in the HeteroFL preset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from edgefl.methods.base import (
    ClientUpdate, DeviceJob, JobTable, LocalTraining, Method, RoundContext, RoundPlan, TrainJob, dense_bytes,
)  # fmt: skip
from edgefl.learning.config import steps_per_round
from edgefl.scenario.section_base import Strict

if TYPE_CHECKING:
    import torch

    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State, TrainResult

__all__ = ["HeteroFL", "HeteroFLSettings", "NestedPayload", "LEVEL_WIDTHS"]

LEVEL_WIDTHS = {"a": 1.0, "b": 0.5, "c": 0.25, "d": 0.125, "e": 0.0625}
"""Width (hidden-channel) rate of HeteroFL's complexity levels a..e (Sec. 4: shrinkage ratio r = 0.5)."""

Level = Literal["a", "b", "c", "d", "e"]


class HeteroFLSettings(Strict):
    """``[method.heterofl]``: which submodel each client trains.

    ``levels``: the complexity levels in play, default all five a..e (``["a", "e"]`` is the paper's "a-e").
    A single level trains that one submodel on every client: FedAvg of it (with HeteroFL's Scaler, static BN and
    masked loss), the paper's rows "a" and "e" of Tables 1-3. ``assignment`` (default ``capability``, the
    paper's premise that a client trains the level its computation and communication allow, Sec. 3.1):

    - ``fix``: each device gets one level for the whole run, drawn once with ``proportions`` (default equal);
    - ``dynamic``: every selected device draws its level each round with ``proportions`` (the paper's tables);
    - ``capability``: each round, the largest level in ``levels`` whose compute time and energy (at the lowest
      CPU frequency meeting the deadline) and upload fit the round's deadline T_max and the device's E_max
      under the cost model; a device that fits none sits the round out. Without a deadline and an energy
      budget every device fits level a: the run is FedAvg of the full model.

    ``masked_loss``: HeteroFL's masked cross-entropy (absent classes' logits set to 0, their output rows not
    aggregated from that client); default on for label-skewed partitions (shards, dirichlet, gamma_mix).
    ``bn_clients``: how many clients the server queries, in turn, for the static batch-norm statistics
    before each evaluation (0 = all).
    """

    levels: tuple[Level, ...] = ("a", "b", "c", "d", "e")
    proportions: tuple[float, ...] | None = None
    assignment: Literal["fix", "dynamic", "capability"] = "capability"
    masked_loss: bool | None = None
    bn_clients: int = Field(0, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _check(self) -> HeteroFLSettings:
        if not self.levels:
            raise ValueError("levels: give at least one of a, b, c, d, e")
        if len(set(self.levels)) != len(self.levels):
            raise ValueError(f"levels={list(self.levels)}: each level at most once")
        if self.proportions is not None:
            if len(self.proportions) != len(self.levels):
                raise ValueError(
                    f"proportions={list(self.proportions)}: need one per level ({len(self.levels)} levels)"
                )
            if any(p < 0 for p in self.proportions) or sum(self.proportions) <= 0:
                raise ValueError(f"proportions={list(self.proportions)}: must be >= 0 with a positive sum")
        return self

    def widths(self) -> tuple[float, ...]:
        """Width rates of ``levels``, in order."""
        return tuple(LEVEL_WIDTHS[level] for level in self.levels)

    def probabilities(self) -> tuple[float, ...]:
        """Normalised ``proportions`` (equal when not given)."""
        p = self.proportions or (1.0,) * len(self.levels)
        total = float(sum(p))
        return tuple(float(x) / total for x in p)


@dataclass(frozen=True)
class NestedPayload:
    """A client's trained submodel: its parameters, their shapes, and the classes it holds (masked loss)."""

    params: dict[str, Any]
    shapes: Any
    row_mask: Any | None


class HeteroFL(Method):
    """Width levels a..e (1, 1/2, 1/4, 1/8, 1/16) assigned fixed, dynamically or by capability."""

    name = "heterofl"
    takes_allocation = "radio"  # plans with ctx.rate_bps and ctx.costs at its own frequencies

    @classmethod
    def plans_to_t_max(cls, settings: HeteroFLSettings) -> bool:
        """``assignment = "capability"`` fits the level and the frequency to T_max; ``"fix"`` and ``"dynamic"``
        plan at f_max whatever the deadline."""
        return settings.assignment == "capability"
    Settings = HeteroFLSettings

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        cfg = self.settings
        self.widths = np.array(cfg.widths())
        self.probs = np.array(cfg.probabilities())
        masked = cfg.masked_loss
        self.masked = bool(getattr(self.workload, "labels_skewed", False)) if masked is None else masked
        # Fix: one level per device for the whole run, from its own stream
        self.fixed = setup.streams.numpy("heterofl_levels").choice(len(self.widths), size=setup.n_devices, p=self.probs)

    # ------------------------------------------------------------------ planning
    def _costs(self, ctx: RoundContext, dev: np.ndarray, width: float, f: np.ndarray | None):
        """Per device: bits, frequency, planned times [s] and energies [J] at ``width``, and whether they fit."""
        costs, wl = ctx.costs, self.workload
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        cycles = costs.cycles(dev, wl.flops_per_sample(width) * wl.samples_per_round(dev))
        bits = float(wl.update_bits_at(width))
        t_com, e_com = costs.upload(dev, bits=bits, rate_bps=ctx.rate_bps[dev])
        capability = f is None
        if capability:  # the lowest frequency that meets the deadline, within [f_min, f_max]
            slack = (np.inf if ctx.t_budget_s is None else ctx.t_budget_s) - t_com
            f, fits_time = costs.deadline_frequency_hz(dev, cycles, slack)
        else:
            fits_time = np.ones(dev.shape, dtype=bool)
        t_cmp, e_cmp = costs.compute(dev, cycles=cycles, steps=steps, f_hz=f)
        if capability and costs.mode == "per_step" and ctx.t_budget_s is not None:
            fits_time = t_cmp + t_com <= ctx.t_budget_s  # per-step time does not depend on the frequency
        fits = fits_time & (e_cmp + e_com <= ctx.e_max_j[dev])
        return bits, f, t_cmp, t_com, e_cmp, e_com, fits

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        dev = ctx.selected
        k = len(self.widths)
        capability = self.settings.assignment == "capability"
        if capability:
            level = np.full(dev.shape, -1)
            costs = [None] * k  # every selected device's costs at each level
            for i in np.argsort(self.widths):  # smallest first: the last level that fits is the largest
                costs[i] = self._costs(ctx, dev, float(self.widths[i]), None)
                level = np.where(costs[i][-1], i, level)
        elif self.settings.assignment == "fix":
            level = self.fixed[dev]
        else:
            rng = self.streams.numpy("heterofl_levels", ctx.round_index)
            level = rng.choice(k, size=dev.size, p=self.probs)
        cols = {name: np.full(dev.shape, np.nan) for name in ("bits", "f", "t_cmp", "t_com", "e_cmp", "e_com")}
        ok = np.zeros(dev.shape, dtype=bool)
        for i in range(k):
            at = level == i
            if not at.any():
                continue
            if capability:  # the costs the level was chosen with
                bits, *per_device = costs[i]
                f, t_cmp, t_com, e_cmp, e_com, fits = (v[at] for v in per_device)
            else:
                f = ctx.fleet.f_max_hz[dev[at]]
                bits, f, t_cmp, t_com, e_cmp, e_com, fits = self._costs(ctx, dev[at], float(self.widths[i]), f)
            for name, value in zip(cols, (bits, f, t_cmp, t_com, e_cmp, e_com)):
                cols[name][at] = value
            ok[at] = fits
        width = np.where(level >= 0, self.widths[np.maximum(level, 0)], np.nan)
        jobs = JobTable.build(
            dev[ok], cpu_hz=cols["f"][ok], width=width[ok],
            local_steps=steps_per_round(self.workload.train_config, self.workload.n_samples[dev[ok]]),
            bits_planned=cols["bits"][ok], t_cmp_planned_s=cols["t_cmp"][ok], t_com_planned_s=cols["t_com"][ok],
            e_cmp_planned_j=cols["e_cmp"][ok], e_com_planned_j=cols["e_com"][ok],
        )  # fmt: skip
        why = "no level fits T_max and E_max" if capability else "energy: the assigned level exceeds E_max"
        return RoundPlan(jobs, dev[~ok], np.full((~ok).sum(), why, dtype=object))

    # ------------------------------------------------------------------ learning
    def _shapes(self, width: float):
        return self.workload.submodel_shapes(width)

    def download(self, job: DeviceJob, *, state: State) -> State:
        """The job's level: the upper-left ``width`` share of every hidden layer of ``state`` (Diao et al. Sec. 3.1)."""
        return self.sliced(state, job.width)

    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        return self.trained_update(job, trainer=trainer)

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining:
        """The rate-``width`` submodel trained, with the masked cross-entropy of the device's classes when
        ``masked`` (jobs of one level may train together, on a model without batch norm)."""
        from edgefl.learning.losses import label_mask

        mask: torch.Tensor | None = None
        if self.masked:
            mask = label_mask(trainer.device_labels(job.device), trainer.dataset.n_classes)
        return LocalTraining(start=job.start, width=job.job.width, class_mask=mask)

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        """The trained submodel's parameters, sent whole (with the label mask of its output rows)."""
        from edgefl.learning.losses import label_mask
        from edgefl.learning.workload import state_bits

        shapes = self._shapes(job.job.width)
        sub = job.start
        mask = label_mask(trainer.device_labels(job.device), trainer.dataset.n_classes) if self.masked else None
        params = {k: sub[k] + res.update[k] for k in sub}
        return ClientUpdate(
            device=job.device,
            payload=NestedPayload(params=params, shapes=shapes, row_mask=mask),
            weight=1.0,  # HeteroFL: a plain count average over the covering clients
            bits=float(state_bits(params)),
            flops=res.flops,
            steps=res.steps,
            train_loss=res.train_loss,
        )

    def wire_bytes(self, update: ClientUpdate) -> bytes:
        """The submodel's parameters as sent: :func:`~edgefl.methods.base.dense_bytes` of ``params``."""
        return dense_bytes(update.payload.params)

    def evaluate(self, state: State) -> tuple[float, float]:
        """Static BN (Diao et al. Sec. 3.2): statistics from the clients' data, the first ``bn_clients`` (0 = all)."""
        return self.workload.evaluate(state, bn_clients=self.settings.bn_clients)

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.learning.slicing import aggregate_nested

        if not updates:
            return state
        payloads = [u.payload for u in updates]
        head = self.workload.output_layer() if self.masked else ()
        return aggregate_nested(
            state,
            [p.params for p in payloads],
            [p.shapes for p in payloads],
            row_masks=[p.row_mask for p in payloads] if self.masked else None,
            head=head,
        )
