"""AnycostFL (Li et al., INFOCOM 2023): each round, every selected device gets the (alpha, beta, f) that
maximises its learning gain alpha^4 beta under the round's deadline T_max and its energy budget E_max.

Planning: :func:`optimizers.anycost.solve_anycost` (closed form, eqs. (19)-(26)). Learning (torch mode), from
shared parts only: the server sorts hidden channels by L2 norm (:mod:`edgefl.learning.shrinking`, function
preserving), a device trains the first ``ceil(sqrt(alpha) * units)`` channels of each hidden layer
(:mod:`edgefl.learning.slicing`), compresses its update to at most the planned ``alpha beta S`` bits with the
flexible codec (:mod:`edgefl.compression`), and the server decodes the bytes and fuses the updates element by
element with the optimal weights p* (all-in-one aggregation, eq. (5) with eq. (13)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from edgefl.algorithms.base import ClientUpdate, DeviceJob, JobTable, Method, Needs, RoundContext, RoundPlan
from edgefl.learning.config import steps_per_round
from edgefl.method_settings import Strict

if TYPE_CHECKING:
    from edgefl.learning.workload import State

__all__ = ["AnycostFL", "AnycostFLSettings", "SparseUpdate", "all_in_one"]


class AnycostFLSettings(Strict):
    """``[method.anycostfl]``: the bounds of problem P1's knobs.

    ``alpha_min``: smallest model-shrinking factor, constraint (10c); ``beta_max``: largest compression rate,
    constraint (10d) (Sec. V-A: 1/4 and 1/15).
    """

    alpha_min: float = Field(0.25, gt=0, le=1)
    beta_max: float = Field(1 / 15, gt=0, le=1)


@dataclass(frozen=True)
class SparseUpdate:
    """What the server decodes from an AnycostFL payload: the quantised sparse update of the device's submodel,
    the mask of elements it carries, and the (alpha, beta) it was planned with (for the weights of eq. (13))."""

    update: Any
    sent: Any
    alpha: float
    beta: float


class AnycostFL(Method):
    """Per-round, per-device (alpha, beta, f) from AnycostFL's closed form; infeasible devices sit out.

    The optimizer sees one device's whole local computation as ``c_i = samples_per_round_i x FLOPs/sample
    / FLOPs-per-cycle_i`` cycles (its ``tau D_i W``; only that product enters eqs. (6)-(7)), the round's
    uplink rate, ``T_max = deadline_s - downlink_s`` and ``E_max``. A job trains a submodel of width
    ``sqrt(alpha)`` (so about ``alpha`` of the FLOPs and parameters) and plans ``alpha beta S`` upload bits.
    """

    name = "anycostfl"
    Settings = AnycostFLSettings
    needs = Needs(deadline=True, budget=True, surrogate=True, cost_modes=("physical",))

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self._grid: tuple[np.ndarray, np.ndarray] | None = None  # widths and their measured FLOPs (torch)
        self._groups = None  # hidden-layer channel groups of the model (torch)
        self._sorted_for: Any = None  # the global state the sorted copy was made from
        self._sorted_state: Any = None

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        from optimizers.anycost import AnycostDevices, solve_anycost

        dev, fleet, wl = ctx.selected, ctx.fleet, self.workload
        t_max = float(ctx.t_budget_s)
        cycles = ctx.costs.cycles(dev, wl.flops_per_sample(1.0) * wl.samples_per_round(dev))
        sol = solve_anycost(
            AnycostDevices(
                samples=cycles,  # with cycles_per_sample = 1: c_i = tau D_i W in cycles
                eps=fleet.energy_coeff[dev],
                f_min_hz=fleet.f_min_hz[dev],
                f_max_hz=fleet.f_max_hz[dev],
                e_max_j=ctx.e_max_j[dev],
                rate_bps=ctx.rate_bps[dev],
                p_tx_w=fleet.tx_power_w[dev],
            ),
            t_max_s=t_max,
            cycles_per_sample=1.0,
            update_bits=float(wl.update_bits),
            alpha_min=self.settings.alpha_min,
            beta_max=self.settings.beta_max,
        )
        if self.workload.trains:
            return self._plan_measured(ctx, sol, t_max)
        ok = sol.feasible
        alpha, beta = sol.alpha[ok], sol.beta[ok]
        jobs = JobTable.build(
            dev[ok], cpu_hz=sol.f_hz[ok], width=np.sqrt(alpha), alpha=alpha, beta=beta,
            local_steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]),
            bits_planned=alpha * beta * float(wl.update_bits),
            t_cmp_planned_s=sol.t_cmp_s[ok], t_com_planned_s=sol.t_com_s[ok],
            e_cmp_planned_j=sol.e_cmp_j[ok], e_com_planned_j=sol.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], sol.reason[~ok].astype(object))

    def _width_grid(self) -> tuple[np.ndarray, np.ndarray]:
        """Widths from sqrt(alpha_min) to 1 (64 steps) and the measured training FLOPs/sample of each submodel."""
        if self._grid is None:
            w = np.linspace(np.sqrt(self.settings.alpha_min), 1.0, 64)
            self._grid = (w, np.array([self.workload.flops_per_sample(float(x)) for x in w]))
        return self._grid

    def _plan_measured(self, ctx: RoundContext, sol, t_max: float) -> RoundPlan:
        """Keep the closed form's (alpha, beta) as targets, but cost each job with the FLOPs of the submodel
        that will really train (the paper assumes FLOPs proportional to alpha; a real network's first and
        last layers do not shrink like that). Width: the largest grid width <= sqrt(alpha) whose measured
        compute, at the lowest frequency meeting T_max, and planned upload fit T_max and E_max; the recorded
        alpha is that width squared. A device no width fits sits out."""
        dev, costs, wl = ctx.selected, ctx.costs, self.workload
        grid_w, grid_f = self._width_grid()
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        samples = wl.samples_per_round(dev)
        s_bits = float(wl.update_bits)
        n = dev.size
        chosen = np.full(n, -1)
        f_out, t_cmp, t_com, e_cmp, e_com, bits = (np.full(n, np.nan) for _ in range(6))
        for g in range(grid_w.size - 1, -1, -1):  # widest first
            todo = sol.feasible & (chosen < 0) & (grid_w[g] <= np.sqrt(sol.alpha) * (1 + 1e-12))
            if not todo.any():
                continue
            i = np.flatnonzero(todo)
            d = dev[i]
            c = costs.cycles(d, grid_f[g] * samples[i])
            b = grid_w[g] ** 2 * sol.beta[i] * s_bits
            tc, ecom = costs.upload(d, bits=b, rate_bps=ctx.rate_bps[d])
            slack = t_max - tc
            f, _ = costs.deadline_frequency_hz(d, c, slack)
            tcmp, ec = costs.compute(d, cycles=c, steps=steps[i], f_hz=f)
            fits = (slack > 0) & (tcmp <= slack * (1 + 1e-12)) & (ec + ecom <= ctx.e_max_j[d])
            k = i[fits]
            chosen[k] = g
            f_out[k], t_cmp[k], t_com[k] = f[fits], tcmp[fits], tc[fits]
            e_cmp[k], e_com[k], bits[k] = ec[fits], ecom[fits], b[fits]
        ok = chosen >= 0
        width = grid_w[np.maximum(chosen, 0)][ok]
        jobs = JobTable.build(
            dev[ok], cpu_hz=f_out[ok], width=width, alpha=width**2, beta=sol.beta[ok],
            local_steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]), bits_planned=bits[ok],
            t_cmp_planned_s=t_cmp[ok], t_com_planned_s=t_com[ok], e_cmp_planned_j=e_cmp[ok], e_com_planned_j=e_com[ok],
        )  # fmt: skip
        reason = np.where(sol.feasible, "measured submodel cost exceeds T_max or E_max at every width", sol.reason)
        return RoundPlan(jobs, dev[~ok], reason[~ok].astype(object))

    # ------------------------------------------------------------------ learning (torch)
    def _sorted(self, global_state: State) -> State:
        """The round's global state with channels sorted (computed once per global state object)."""
        from edgefl.learning.shrinking import channel_groups, sort_channels

        if self._sorted_for is not global_state:
            if self._groups is None:
                self._groups = channel_groups(self.workload.make_model(1.0))
            self._sorted_state = sort_channels(global_state, self._groups)
            self._sorted_for = global_state
        return self._sorted_state

    def client_update(self, job: DeviceJob, global_state: State, round_index: int) -> ClientUpdate:
        from edgefl.compression import BudgetError, compress, encode_fixed
        from edgefl.learning.slicing import slice_state

        wl = self.workload
        sub = slice_state(self._sorted(global_state), wl.submodel_shapes(job.width))
        res = wl.train(job.device, sub, round_index=round_index, width=job.width)
        rng = self.streams.numpy("quantization", round_index, job.device)
        try:
            packed = compress(res.update, budget_bits=job.bits_planned, rng=rng)
        except BudgetError:  # the budget cannot even hold the header: send an empty update
            packed = encode_fixed(res.update, kept_kernels=0, levels=1, rng=rng)
        return ClientUpdate(
            device=job.device,
            # what the server decodes from the payload: the quantised sparse update and the elements it carries
            payload=SparseUpdate(packed.update, packed.sent, job.alpha, job.beta),
            weight=1.0,
            bits=float(packed.bits),  # the real encoded size, charged by the simulator
            flops=res.flops,
            steps=res.steps,
            train_loss=res.train_loss,
        )

    def aggregate(self, global_state: State, updates: Sequence[ClientUpdate]) -> State:
        from optimizers.anycost import aggregation_weights

        base = self._sorted(global_state)  # clients' coordinates: the sorted global model of this round
        if not updates:
            return base
        p = aggregation_weights(
            np.array([u.payload.alpha for u in updates]), np.array([u.payload.beta for u in updates])
        )
        return all_in_one(base, [u.payload.update for u in updates], [u.payload.sent for u in updates], p)

    def learning_gain(self, jobs: JobTable, n_selected: int) -> float:
        """Global learning gain g_t = sum_i alpha_i^4 beta_i / I (Definition 3) over the kept jobs."""
        from edgefl.learning.surrogate import learning_gain

        return learning_gain(jobs.alpha, jobs.beta, n_selected)


def all_in_one(state: State, updates: Sequence[State], sent: Sequence[State], weights: Sequence[float]) -> State:
    """AnycostFL all-in-one aggregation, eq. (5): w + u~ with, element by element,
    u~[j] = sum_i p_i m_i[j] u_i[j] / sum_i p_i m_i[j] over the devices whose submodel and mask carry j,
    and u~[j] = 0 where none does. ``updates[i]``/``sent[i]`` are client i's (submodel-shaped) decoded update and
    sent-element mask, leading slices of the global tensors; ``weights`` are the p_i of eq. (13)."""
    import torch

    out = {}
    for name, w in state.items():
        num = torch.zeros_like(w, dtype=torch.float64)
        den = torch.zeros_like(w, dtype=torch.float64)
        for u, m, p in zip(updates, sent, weights):
            if name not in u:
                continue
            region = tuple(slice(0, n) for n in u[name].shape)
            mask = m[name].to(torch.float64) * float(p)
            num[region] += mask * u[name].to(torch.float64)
            den[region] += mask
        fused = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)
        out[name] = (w.to(torch.float64) + fused).to(w.dtype)
    return out
