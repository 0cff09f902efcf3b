"""AnycostFL (Li et al., INFOCOM 2023): each round, every selected device gets the (alpha, beta, f) that
maximises its learning gain alpha^4 beta under the round's deadline T_max and its energy budget E_max.

Planning: :func:`optimizers.anycost.solve_anycost` (closed form, eqs. (19)-(26)). Learning (torch mode), from
shared parts only: the server sorts hidden channels by L2 norm (:mod:`edgefl.learning.shrinking`, function
preserving), a device trains the first ``ceil(sqrt(alpha) * units)`` channels of each hidden layer
(:mod:`edgefl.learning.slicing`), compresses its update to at most the planned ``alpha beta S`` bits with the
flexible codec (:mod:`edgefl.compression.fgc`), and the server fuses the sent elements (the codec's positions and
values, no bytes decoded) with the optimal weights p* (all-in-one aggregation, eq. (5) with eq. (13)).

Ablations (Fig. 5(a), ``[method.anycostfl] ablation``): w/o EMS (alpha = 1), w/o FGC (beta = 1, uncompressed
submodel updates), w/o AIO (zero-padded weighted averaging instead of eq. (5)); each plans with the cost model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from edgefl.methods.base import (
    ClientUpdate, DeviceJob, JobTable, LocalTraining, Method, Needs, RoundContext, RoundPlan, TrainJob,
)  # fmt: skip
from edgefl.learning.config import BITS_PER_PARAMETER, steps_per_round
from edgefl.scenario.section_base import Strict

if TYPE_CHECKING:
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State, TrainResult

__all__ = ["AnycostFL", "AnycostFLSettings", "SparseUpdate", "all_in_one", "plain_average"]



_NO_TIME_S = 1e-12
"""What is left of T_max [s] when the download alone takes all of it: so little that no device meets the
latency constraint, which the optimizer then reports per device (it refuses a T_max <= 0)."""


def _time_left(ctx) -> float:
    """T_max net of the download [s], at least :data:`_NO_TIME_S`."""
    return max(float(ctx.t_budget_s), _NO_TIME_S)

class AnycostFLSettings(Strict):
    """``[method.anycostfl]``: the bounds of problem P1's knobs, and the ablations of Fig. 5(a).

    - ``alpha_min``: smallest model-shrinking factor, constraint (10c); ``beta_max``: largest compression rate,
      constraint (10d) (Sec. V-A: 1/4 and 1/15).
    - ``ablation``: one of AnycostFL's three techniques removed (Sec. V-C, Fig. 5(a)), the rest kept:
      ``"none"`` (AnycostFL); ``"no_ems"`` (w/o elastic model shrinking: alpha = 1, the full model trains, and
      the largest beta <= ``beta_max`` that T_max and E_max leave, from the cost model's upload budget);
      ``"no_fgc"`` (w/o flexible gradient compression: beta = 1, the uncompressed float32 update of the widest
      submodel whose compute and upload fit T_max and E_max; a device no width in [alpha_min, 1] fits sits out);
      ``"no_aio"`` (w/o all-in-one aggregation: the shrunk, compressed updates, zero-padded to the global shapes,
      are averaged with the eq. (13) weights p_i, sum_i p_i u_i / sum_i p_i, instead of eq. (5)'s element-wise
      fusion over the devices that carry each element). Under surrogate learning ``"no_aio"`` plans and charges
      as AnycostFL (the bound does not model the aggregation rule).
    """

    alpha_min: float = Field(0.25, gt=0, le=1)
    beta_max: float = Field(1 / 15, gt=0, le=1)
    ablation: Literal["none", "no_ems", "no_fgc", "no_aio"] = "none"


@dataclass(frozen=True)
class SparseUpdate:
    """An AnycostFL payload: the codec's symbols (``coded``, :class:`~edgefl.compression.coded.Coded`, what crosses
    processes; None for the w/o-FGC ablation's uncompressed update, held in ``dense``) and the (alpha, beta) it was
    planned with (for the weights of eq. (13)). ``update``: the quantised sparse update of the device's submodel,
    ``sent``: the mask of the elements it carries (m_{t,i} of eq. (5)), both tensors by name."""

    coded: Any
    alpha: float
    beta: float
    dense: Any = None

    @property
    def update(self) -> dict:
        return self.dense if self.coded is None else self.coded.dense()

    @property
    def sent(self) -> dict:
        if self.coded is None:
            import torch

            return {k: torch.ones_like(v, dtype=torch.bool) for k, v in self.dense.items()}
        return self.coded.sent()


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
    takes_allocation = "radio"  # plans with ctx.rate_bps and ctx.costs; its frequency is eq. (26)'s

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self._grid: tuple[np.ndarray, np.ndarray] | None = None  # widths and their measured FLOPs (torch)
        self._groups = None  # hidden-layer channel groups of the model (torch)
        self._sorted_for: Any = None  # the global state the sorted copy was made from
        self._sorted_state: Any = None

    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        from optimizers.anycost import AnycostDevices, solve_anycost

        if self.settings.ablation == "no_ems":
            return self._plan_full_model(ctx)
        if self.settings.ablation == "no_fgc":
            return self._plan_uncompressed(ctx)
        dev, fleet, wl = ctx.selected, ctx.fleet, self.workload
        t_max = _time_left(ctx)
        cycles = ctx.costs.cycles(dev, wl.flops_per_sample(1.0) * wl.samples_per_round(dev))
        sol = solve_anycost(
            AnycostDevices(
                samples=cycles,  # with cycles_per_sample = 1: c_i = tau D_i W in cycles
                eps=fleet.energy_coeff[dev],
                f_min_hz=fleet.f_min_hz[dev],
                f_max_hz=fleet.f_max_hz[dev],
                e_max_j=ctx.e_max_j[dev],
                rate_bps=ctx.rate_bps[dev],
                p_tx_w=fleet.upload_power_w[dev],  # radiated only in the papers' model
                **({"p_static_w": fleet.static_power_w[dev]} if fleet.has_power_parts else {}),
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
        dev, wl = ctx.selected, self.workload
        grid_w, grid_f = self._width_grid()
        s_bits = float(wl.update_bits)
        upper = np.where(sol.feasible, np.sqrt(np.where(sol.feasible, sol.alpha, 0.0)), 0.0)
        fit = self._fit_widths(ctx, t_max, grid_w, grid_f, upper,
                               lambda g, i: grid_w[g] ** 2 * sol.beta[i] * s_bits)  # fmt: skip
        ok = fit.chosen >= 0
        width = grid_w[np.maximum(fit.chosen, 0)][ok]
        jobs = fit.jobs(dev, ok, width=width, alpha=width**2, beta=sol.beta[ok],
                        steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]))  # fmt: skip
        reason = np.where(sol.feasible, "measured submodel cost exceeds T_max or E_max at every width", sol.reason)
        return RoundPlan(jobs, dev[~ok], reason[~ok].astype(object))

    def _fit_widths(self, ctx: RoundContext, t_max: float, grid_w, grid_f, upper_w, bits_of) -> _Fit:
        """Per device, the widest grid width ``<= upper_w`` whose compute (``grid_f`` FLOPs/sample, at the lowest
        frequency meeting T_max after the upload) and upload of ``bits_of(g, i)`` bits fit T_max and E_max
        (AnycostFL eqs. (6)-(9) through the cost model); ``chosen = -1`` where none fits."""
        dev, costs, wl = ctx.selected, ctx.costs, self.workload
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        samples = wl.samples_per_round(dev)
        n = dev.size
        fit = _Fit(np.full(n, -1), *(np.full(n, np.nan) for _ in range(6)))
        for g in range(grid_w.size - 1, -1, -1):  # widest first
            todo = (fit.chosen < 0) & (grid_w[g] <= upper_w * (1 + 1e-12))
            if not todo.any():
                continue
            i = np.flatnonzero(todo)
            d = dev[i]
            c = costs.cycles(d, grid_f[g] * samples[i])
            b = np.broadcast_to(np.asarray(bits_of(g, i), dtype=float), i.shape)
            tc, ecom = costs.upload(d, bits=b, rate_bps=ctx.rate_bps[d])
            slack = t_max - tc
            f, _ = costs.deadline_frequency_hz(d, c, slack)
            tcmp, ec = costs.compute(d, cycles=c, steps=steps[i], f_hz=f)
            fits = (slack > 0) & (tcmp <= slack * (1 + 1e-12)) & (ec + ecom <= ctx.e_max_j[d])
            k = i[fits]
            fit.chosen[k] = g
            fit.f_hz[k], fit.t_cmp_s[k], fit.t_com_s[k] = f[fits], tcmp[fits], tc[fits]
            fit.e_cmp_j[k], fit.e_com_j[k], fit.bits[k] = ec[fits], ecom[fits], b[fits]
        return fit

    # ------------------------------------------------------------------ ablations (Fig. 5(a))
    def _plan_full_model(self, ctx: RoundContext) -> RoundPlan:
        """w/o EMS: alpha = 1; the frequency and the largest beta <= beta_max that T_max and E_max leave after
        computing the full model (:meth:`edgefl.fleet.costs.CostModel.upload_budget`, eqs. (6)-(9))."""
        dev, wl = ctx.selected, self.workload
        s_bits = float(wl.update_bits)
        steps = steps_per_round(wl.train_config, wl.n_samples[dev])
        cycles = ctx.costs.cycles(dev, wl.flops_per_sample(1.0) * wl.samples_per_round(dev))
        b = ctx.costs.upload_budget(
            dev, cycles=cycles, steps=steps, e_max_j=ctx.e_max_j[dev], rate_bps=ctx.rate_bps[dev],
            t_max_s=_time_left(ctx), min_bits=1.0, max_bits=math.floor(self.settings.beta_max * s_bits),
        )  # fmt: skip
        ok = b.feasible
        jobs = JobTable.build(
            dev[ok], cpu_hz=b.f_hz[ok], width=1.0, alpha=1.0, beta=b.bits[ok] / s_bits, local_steps=steps[ok],
            bits_planned=b.bits[ok], t_cmp_planned_s=b.t_cmp_s[ok], t_com_planned_s=b.t_com_s[ok],
            e_cmp_planned_j=b.e_cmp_j[ok], e_com_planned_j=b.e_com_j[ok],
        )  # fmt: skip
        return RoundPlan(jobs, dev[~ok], np.array([f"w/o EMS: {r}" for r in b.reason[~ok]], dtype=object))

    def _plan_uncompressed(self, ctx: RoundContext) -> RoundPlan:
        """w/o FGC: beta = 1; the widest submodel (alpha in [alpha_min, 1]) whose compute and uncompressed
        float32 upload fit T_max and E_max; a device none fits sits out."""
        dev, wl = ctx.selected, self.workload
        if wl.trains:
            grid_w, grid_f = self._width_grid()
            dense = np.array([float(_dense_bits(wl.submodel_shapes(float(w)))) for w in grid_w])
        else:  # surrogate: FLOPs and parameters scale with alpha = width^2
            grid_w = np.sqrt(np.linspace(self.settings.alpha_min, 1.0, 64))
            grid_f = np.asarray(wl.flops_per_sample(grid_w), dtype=float)
            dense = grid_w**2 * float(wl.update_bits)
        fit = self._fit_widths(ctx, _time_left(ctx), grid_w, grid_f, np.ones(dev.size), lambda g, i: dense[g])
        ok = fit.chosen >= 0
        width = grid_w[np.maximum(fit.chosen, 0)][ok]
        jobs = fit.jobs(dev, ok, width=width, alpha=width**2, beta=1.0,
                        steps=steps_per_round(wl.train_config, wl.n_samples[dev[ok]]))  # fmt: skip
        reason = "w/o FGC: the uncompressed update of every width down to alpha_min exceeds T_max or E_max"
        return RoundPlan(jobs, dev[~ok], np.full(int((~ok).sum()), reason, dtype=object))

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

    def download(self, job: DeviceJob, *, state: State) -> State:
        """The job's width-``sqrt(alpha)`` submodel of the round's channel-sorted global model (Sec. III-B: the
        device receives only the important channels)."""
        return self.sliced(self._sorted(state), job.width)

    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        return self.trained_update(job, trainer=trainer)

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining:
        """The downloaded submodel trained at the job's width (jobs of one width may train together)."""
        return LocalTraining(start=job.start, width=job.job.width)

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        """Flexible gradient compression of the trained update to the planned bits (Sec. IV-B,
        :func:`edgefl.compression.fgc.fit`), or, ablation ``no_fgc``, the uncompressed update."""
        from edgefl.compression import fgc, ops

        plan = job.job
        if self.settings.ablation == "no_fgc":  # w/o FGC: the uncompressed float32 update, every element sent
            return ClientUpdate(
                device=job.device, payload=SparseUpdate(None, plan.alpha, 1.0, dense=res.update), weight=1.0,
                bits=float(_dense_bits(res.update)), flops=res.flops, steps=res.steps, train_loss=res.train_loss,
            )  # fmt: skip
        update = res.on_device  # coded where it was trained
        gen = ops.job_generator(job.rng("quantization"), res.device)
        try:
            coded = fgc.fit(update, plan.bits_planned, gen)
        except fgc.BudgetError:  # the budget cannot even hold the header: send an empty update
            coded = fgc.encode(update, kept=0, levels=1, gen=gen)
        return ClientUpdate(
            device=job.device, payload=SparseUpdate(coded.on_cpu(), plan.alpha, plan.beta), weight=1.0,
            bits=float(coded.bits),  # the exact encoded size, charged by the simulator
            flops=res.flops, steps=res.steps, train_loss=res.train_loss,
        )  # fmt: skip

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        from optimizers.anycost import aggregation_weights

        base = self._sorted(state)  # clients' coordinates: the sorted global model of this round
        if not updates:
            return base
        p = aggregation_weights(
            np.array([u.payload.alpha for u in updates]), np.array([u.payload.beta for u in updates])
        )
        if self.settings.ablation == "no_aio":
            return plain_average(base, [u.payload.update for u in updates], p)
        if all(u.payload.coded is not None for u in updates):  # from the symbols, without dense copies
            return all_in_one_coded(base, [u.payload.coded for u in updates], p)
        return all_in_one(base, [u.payload.update for u in updates], [u.payload.sent for u in updates], p)

    def learning_gain(self, jobs: JobTable, *, n_selected: int) -> float:
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


def all_in_one_coded(state: State, coded: Sequence[Any], weights: Sequence[float]) -> State:
    """:func:`all_in_one` from the clients' symbols (:class:`~edgefl.compression.coded.Coded`, each over its
    submodel's tensors, leading slices of the global ones): each client's sent values, times p_i, and p_i itself
    are added at the global positions of its sent elements, client after client, into float64 sums over the whole
    model. An element a client did not send added 0 there, which leaves a float64 sum as it was, so the result
    equals :func:`all_in_one`'s bit for bit, at a cost in the sent elements rather than in the model's size."""
    import torch

    names = list(state)
    shapes = {k: tuple(state[k].shape) for k in names}
    offsets = dict(zip(names, np.cumsum([0] + [state[k].numel() for k in names[:-1]]).tolist()))
    total = sum(state[k].numel() for k in names)
    num = torch.zeros(total, dtype=torch.float64)
    den = torch.zeros(total, dtype=torch.float64)
    # work space for the largest update, reused by each (fresh arrays of this size cost more in page faults than
    # the sums themselves); each element's arithmetic is that of values.to(float64) * p
    most = max((c.values.numel() for c in coded), default=0)
    work = [torch.empty(most, dtype=torch.int64) for _ in range(2)]
    values, weight = torch.empty(most, dtype=torch.float64), torch.empty(most, dtype=torch.float64)
    for c, p in zip(coded, weights):
        k = c.values.numel()
        at = _global_positions(c, shapes, offsets, [w[:k] for w in work])
        num.index_add_(0, at, values[:k].copy_(c.values).mul_(float(p)))
        den.index_add_(0, at, weight[:k].fill_(float(p)))
    fused = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), 0.0)
    return {k: (w.to(torch.float64) + fused[offsets[k] : offsets[k] + w.numel()].view(w.shape)).to(w.dtype)
            for k, w in state.items()}  # fmt: skip


def _global_positions(coded: Any, shapes: dict[str, tuple[int, ...]], offsets: dict[str, int],
                      work: Sequence[Any]):  # fmt: skip
    """The flat positions in the whole model (tensors in ``shapes``' order, starting at ``offsets``) of
    ``coded``'s sent elements, which are flat over its own (leading-slice) tensors, int64; ``work``: two int64
    tensors of the sent count, the second of which becomes the result."""
    import torch

    pos, out = work[0].copy_(coded.positions), work[1]
    start = 0  # the tensors' positions follow each other: each fills its own stretch
    for name, sub in zip(coded.names, coded.shapes):
        size = int(np.prod(sub, dtype=np.int64))
        lo, hi = (int(v) for v in torch.searchsorted(pos, torch.tensor([start, start + size])))
        here, seg, full = pos[lo:hi], out[lo:hi], shapes[name]
        differ = [d for d in range(len(sub)) if sub[d] != full[d]]
        if differ in ([], [0]):  # the whole tensor or its leading rows: the same flat positions, shifted
            torch.add(here, offsets[name] - start, out=seg)
        elif differ[-1] == 1:  # rows and columns (whole trailing dimensions): a row of the slice starts where the
            cols, wide = math.prod(sub[1:]), math.prod(full[1:])  # tensor's row does
            local = here - start
            torch.floor_divide(local, cols, out=seg).mul_(wide - cols).add_(local).add_(offsets[name])
        else:  # unravel over the slice's shape, ravel over the global tensor's
            local, index, stride = here - start, torch.zeros_like(here), 1
            for d in range(len(sub) - 1, -1, -1):
                index += (local % sub[d]) * stride
                local = local // sub[d]
                stride *= full[d]
            torch.add(index, offsets[name], out=seg)
        start += size
    return out


def plain_average(state: State, updates: Sequence[State], weights: Sequence[float]) -> State:
    """The w/o-AIO ablation's aggregation: ``w + sum_i p_i u_i / sum_i p_i`` with each (submodel-shaped) update
    zero-padded to the global shapes, so an element a device did not train or send counts as a 0 in its mean,
    instead of being left out as in eq. (5). ``weights`` are the p_i of eq. (13)."""
    import torch

    total = float(sum(weights))
    out = {}
    for name, w in state.items():
        acc = torch.zeros_like(w, dtype=torch.float64)
        for u, p in zip(updates, weights):
            if name in u:
                acc[tuple(slice(0, n) for n in u[name].shape)] += float(p) * u[name].to(torch.float64)
        out[name] = (w.to(torch.float64) + acc / total).to(w.dtype)
    return out


def _dense_bits(shapes_or_state) -> int:
    """Bits of an uncompressed float32 payload of these tensors (shapes or tensors by name)."""
    return BITS_PER_PARAMETER * sum(
        int(np.prod(tuple(v.shape if hasattr(v, "shape") else v))) for v in shapes_or_state.values()
    )


@dataclass
class _Fit:
    """Per device of a plan, shape (n,): chosen grid index (-1: none fits) and its planned frequency and costs."""

    chosen: np.ndarray
    f_hz: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    bits: np.ndarray

    def jobs(self, dev: np.ndarray, ok: np.ndarray, *, width, alpha, beta, steps) -> JobTable:
        return JobTable.build(
            dev[ok], cpu_hz=self.f_hz[ok], width=width, alpha=alpha, beta=beta, local_steps=steps,
            bits_planned=self.bits[ok], t_cmp_planned_s=self.t_cmp_s[ok], t_com_planned_s=self.t_com_s[ok],
            e_cmp_planned_j=self.e_cmp_j[ok], e_com_planned_j=self.e_com_j[ok],
        )  # fmt: skip
