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
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round
from edgefl.system import compute_energy_j, compute_time_s, deadline_frequency_hz, upload_energy_j, upload_time_s

if TYPE_CHECKING:
    import torch

    from edgefl.learning.workload import State

__all__ = ["HeteroFL", "NestedPayload", "LABEL_SKEWED"]

LABEL_SKEWED = ("shards", "dirichlet", "gamma_mix")
"""Partitions for which masked cross-entropy is on by default."""


@dataclass(frozen=True)
class NestedPayload:
    """A client's trained submodel: its parameters, their shapes, and the classes it holds (masked loss)."""

    params: dict[str, Any]
    shapes: Any
    row_mask: Any | None


class HeteroFL(Method):
    """Width levels a..e (1, 1/2, 1/4, 1/8, 1/16) assigned fixed, dynamically or by capability."""

    name = "heterofl"

    def __init__(self, *, scenario, workload) -> None:
        super().__init__(scenario=scenario, workload=workload)
        cfg = scenario.method.heterofl
        self.settings = cfg
        self.widths = np.array(cfg.widths())
        self.probs = np.array(cfg.probabilities())
        masked = cfg.masked_loss
        self.masked = scenario.data.partition in LABEL_SKEWED if masked is None else masked
        n = scenario.fleet.n_devices
        # Fix: one level per device for the whole run, from its own stream
        self.fixed = workload.streams.numpy("heterofl_levels").choice(len(self.widths), size=n, p=self.probs)

    # ------------------------------------------------------------------ planning
    def _costs(self, ctx: RoundContext, dev: np.ndarray, width: float, f: np.ndarray | None):
        """Per device: cycles, bits, frequency, planned times [s] and energies [J] at ``width``."""
        fleet, wl = ctx.fleet, self.workload
        cycles = wl.flops_per_sample(width) * wl.samples_per_round(dev) / fleet.flops_per_cycle[dev]
        bits = float(wl.update_bits_at(width))
        t_com = upload_time_s(bits, ctx.rate_bps[dev])
        if f is None:  # capability: the lowest frequency that meets the deadline, within [f_min, f_max]
            slack = (np.inf if ctx.t_max_s is None else ctx.t_max_s - self.scenario.round.downlink_s) - t_com
            f, fits_time = deadline_frequency_hz(cycles, slack, fleet.f_min_hz[dev], fleet.f_max_hz[dev])
        else:
            fits_time = np.ones(dev.shape, dtype=bool)
        t_cmp = compute_time_s(cycles, f)
        e_cmp = compute_energy_j(cycles, f, fleet.energy_coeff[dev])
        e_com = upload_energy_j(fleet.tx_power_w[dev], t_com)
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
            rng = self.workload.streams.numpy("heterofl_levels", ctx.round_index)
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
        from edgefl.learning.slicing import submodel_shapes

        m, ds = self.scenario.model, self.workload.dataset
        return submodel_shapes(m.name, input_shape=ds.input_shape, n_classes=ds.n_classes, width=width, hidden=m.hidden)

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        from edgefl.learning.losses import label_mask
        from edgefl.learning.slicing import slice_state
        from edgefl.learning.workload import state_bits

        wl = self.workload
        shapes = self._shapes(job.width)
        sub = slice_state(global_state, shapes)
        mask: torch.Tensor | None = None
        if self.masked:
            mask = label_mask(wl.device_labels(job.device), wl.dataset.n_classes)
        res = wl.train(job.device, sub, round_index=round_index, width=job.width, class_mask=mask)
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

    def evaluate(self, global_state: State) -> tuple[float, float]:
        """Static BN (Diao et al. Sec. 3.2): statistics from the clients' data, the first ``bn_clients`` (0 = all)."""
        return self.workload.evaluate(global_state, bn_clients=self.scenario.method.heterofl.bn_clients)

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        from edgefl.learning.models import output_layer
        from edgefl.learning.slicing import aggregate_nested

        if not updates:
            return global_state
        payloads = [u.payload for u in updates]
        head = output_layer(self.scenario.model.name, hidden=self.scenario.model.hidden) if self.masked else ()
        return aggregate_nested(
            global_state,
            [p.params for p in payloads],
            [p.shapes for p in payloads],
            row_masks=[p.row_mask for p in payloads] if self.masked else None,
            head=head,
        )
