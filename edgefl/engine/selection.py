"""The server's selection policy of a synchronous round (``[selection]``, issue #36 points 3 and 4): which of the
round's candidates run, and, for Chen et al.'s policy, on which resource block (RB) and at which transmit power.

**Candidates.** Every policy starts from the draw of every release: K = ``method.clients_per_round`` devices
uniformly among the online, idle ones (:func:`edgefl.engine.round_steps.select_devices`, stream ``selection`` of
round r), less those without a link this round. They are the devices the server asks for their state: FedCS's
resource request to ⌈C N⌉ random clients (C = K / N), Chen et al.'s U users. ``"random"`` runs them all (the
default, which never calls this module); set K = N for a policy to choose among the whole fleet.

**Planned work of a candidate** (:func:`planned_work`), from the cost model the round charges with:

- a method whose plan of a device depends on that device alone (:attr:`Method.plans_each_device_alone`: FedAvg;
  its compute time is ``c / f_max``, or under ``cpu_policy = "min_energy"`` the frequency that just meets the
  deadline after its upload at its FDMA rate): its own plan of the candidates, the call the round then makes for
  the selected ones, so the times and bits selected on are the ones planned and charged. Under FedCS a candidate
  that plan leaves out (over its energy budget) is not selected; under Chen's policy that plan is made without the
  budget, since Chen's power sets the upload's energy and Chen's step holds each device to its budget;
- every other method (its plan depends on who else is selected, draws from its stream or counts its plans:
  AnycostFL, HeteroFL, CC-FedAvg, FedNova, the compressing baselines): the full model's local work of a round
  (FLOPs per sample x samples, the trainer's steps) at the device's f_max, and the full model's update bits. That
  is the fastest the device can update, FedCS's "compute capability"; the method then plans the selected devices
  its own way, which can take longer (a method that stretches its compute to the deadline) or upload fewer bits.

**FedCS** (Nishio and Yonetani, ICC 2019; notes FedCS §2-§4; :func:`optimizers.fedcs.fedcs_greedy`): a candidate's
update is ready at ``t_down + t_cmp`` after the round start (its download as the round plans it, then its planned
compute), its upload takes ``t_up``: its planned bits at the rate it gets alone on the uplink band (the whole
``channel.bandwidth_hz`` under ``"split"``, its own sub-band under ``"fixed"``), charged by the cost model. Uploads
go one after another in the greedy's order, ``Theta_i = max(Theta_{i-1}, ready_i) + t_up_i``, and the greedy keeps
the most candidates whose last upload ends before ``round.deadline_s`` (strictly, as the paper). The order is the
upload schedule (:attr:`Selection.upload_order`, and each row's ``upload_slot`` and planned end): TDMA plays it as
is. Under FDMA the selected devices upload at once, each on its sub-band: with ``"fixed"`` sub-bands each then ends
no later than its slot in the schedule; with ``"split"`` the sub-band of each shrinks as more are selected, so
the schedule is FedCS's model and not a promise.

**Chen et al.** (IEEE TWC 2021; notes Chen §6-§7; :func:`optimizers.chen_assignment.chen_assignment`): the
candidates are the U users, ``[selection.chen]`` gives the R RBs (bandwidth B^U, interference I_n, waterfall m). A
user's channel is the round's gain (path loss, shadowing and fading of this round), its samples K_i its data size,
its cap its ``tx_power_w``, its energy budget gamma_E the round's E_max less its planned download's energy (none:
no energy limit), its computation energy and its time before the upload (download + compute) its planned work's,
and the delay budget gamma_T the round's deadline (none under ``wait_all``); the upload is the planned bits Z(w).
The solver returns each selected user's RB and its power P* (the largest the energy budget allows); the round then
charges exactly those: the upload's rate is Chen's eq. (5), ``B^U log2(1 + P* h / (I_n + B^U N0))``, and its energy
the cost model's ``P* t``. The papers' model of the upload energy only: a fleet with a radio circuit power or a
power amplifier efficiency below 1 is refused (:func:`check_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from channel.rate import shannon_rate_bps
from edgefl.errors import ScenarioError
from edgefl.learning.config import steps_per_round
from edgefl.methods.base import RoundContext
from optimizers.chen_assignment import chen_assignment
from optimizers.fedcs import fedcs_greedy, upload_finish_times

if TYPE_CHECKING:
    from edgefl.engine.round_rules import RoundRules
    from edgefl.fleet.costs import CostModel
    from edgefl.fleet.devices import Fleet
    from edgefl.fleet.links import Radio
    from edgefl.learning.protocol import Learning
    from edgefl.methods.base import Method
    from edgefl.scenario.selection_settings import SelectionConfig

__all__ = ["PlannedWork", "PolicyParts", "Selection", "check_policy", "choose", "planned_work"]


class PolicyParts(Protocol):
    """The parts of a run a policy reads (:class:`edgefl.engine.driver.Run` has them): its rules (the policy's
    settings, the deadline), method, workload (sizes), fleet and radio."""

    @property
    def rules(self) -> RoundRules: ...
    @property
    def method(self) -> Method: ...
    @property
    def workload(self) -> Learning: ...
    @property
    def fleet(self) -> Fleet: ...
    @property
    def radio(self) -> Radio: ...


_ULP_STEPS = 64
"""Most steps of one ulp a Chen power is lowered by when the cost model's arithmetic puts its energy a rounding
error above the budget the solver met (a power at the root of e(P) = gamma_E)."""
_NO_LIMIT = 1e300
"""What stands for "no limit" in the solvers, which take finite numbers only (a delay [s] or energy [J] no plan
reaches)."""


@dataclass(frozen=True, eq=False)
class PlannedWork:
    """The planned work of the candidates that can run (:func:`planned_work`), each shape (m,): ``device`` ids,
    compute time ``t_cmp_s`` [s] and energy ``e_cmp_j`` [J], upload ``bits``."""

    device: np.ndarray
    t_cmp_s: np.ndarray
    e_cmp_j: np.ndarray
    bits: np.ndarray


@dataclass(frozen=True, eq=False)
class Selection:
    """What a policy chose for round r.

    ``devices``: the selected ids, ascending, shape (k,). ``upload_order``: FedCS's upload schedule, the same ids
    in the order they upload (None for Chen's policy); ``tx_power_w``: every device's transmit power this round
    [W], shape (n,) (Chen's P* for the selected, the fleet's for the others; None: the fleet's);
    ``rate_bps``: the planned uplink rate of each selected device [bit/s], shape (k,) in ``devices`` order
    (Chen's RB rate; None: the radio's); ``columns``: the policy's ``device_rounds`` columns, each shape (k,)
    in ``devices`` order (FedCS: ``upload_slot``, 1-based, and ``upload_end_planned_s``, the absolute time [s]
    its upload ends in the schedule; Chen: ``rb``, 0-based, ``bandwidth_hz`` [Hz], ``tx_power_w`` [W],
    ``interference_w`` [W] and ``error_rate_planned``, the packet error rate q of its RB at P*)."""

    devices: np.ndarray
    upload_order: np.ndarray | None = None
    tx_power_w: np.ndarray | None = None
    rate_bps: np.ndarray | None = None
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def costs(self, costs: CostModel) -> CostModel:
        """The cost model the round plans and charges with: ``costs`` with this round's transmit powers."""
        if self.tx_power_w is None:
            return costs
        return replace(costs, fleet=replace(costs.fleet, tx_power_w=self.tx_power_w))

    def rates(self, rate_bps: np.ndarray) -> np.ndarray:
        """The radio's rates of every device, shape (n,), with the planned rates of the selected devices."""
        if self.rate_bps is None:
            return rate_bps
        out = rate_bps.copy()
        out[self.devices] = self.rate_bps
        return out

    def values_of(self, devices: np.ndarray) -> dict[str, np.ndarray]:
        """The policy's columns for the rows of ``devices`` (selected ids, shape (m,))."""
        where = np.searchsorted(self.devices, devices)
        return {name: col[where] for name, col in self.columns.items()}


def check_policy(cfg: SelectionConfig, fleet: Fleet) -> None:
    """Refuse, in one line, a policy the built fleet cannot run: Chen et al.'s energy is the radiated ``P t``, so a
    fleet whose upload power has a circuit part or a power amplifier efficiency below 1 is refused."""
    if cfg.policy != "chen" or not fleet.has_power_parts:
        return
    if np.any(fleet.tx_circuit_power_w > 0) or np.any(fleet.pa_efficiency < 1):
        raise ScenarioError(
            "selection.policy='chen' with a radio circuit power or PA efficiency below 1 (physics = 'realistic', a "
            "profile or fleet.tx_circuit_power_w / fleet.pa_efficiency): Chen et al.'s energy budget is the radiated "
            "P t; set fleet.tx_circuit_power_w = 0 and fleet.pa_efficiency = 1"
        )


def planned_work(run: PolicyParts, ctx: RoundContext) -> PlannedWork:
    """The planned work of ``ctx.selected`` (the candidates) as the module docstring says: the method's own plan
    when it plans each device alone, else the full model at f_max."""
    method, costs, wl = run.method, ctx.costs, run.workload
    if method.plans_each_device_alone:
        jobs = method.plan_round(ctx).jobs
        return PlannedWork(jobs.device, jobs.t_cmp_planned_s, jobs.e_cmp_planned_j, jobs.bits_planned)
    dev, width = ctx.selected, run.rules.width
    samples = wl.samples_per_round(dev)
    cycles = costs.cycles(dev, wl.flops_per_sample(width) * samples)
    steps = steps_per_round(wl.train_config, wl.n_samples[dev])
    t_cmp, e_cmp = costs.compute(dev, cycles=cycles, steps=steps, f_hz=costs.fleet.f_max_hz[dev])
    return PlannedWork(dev, t_cmp, e_cmp, np.full(dev.size, float(wl.update_bits_at(width))))


def choose(
    run: PolicyParts, ctx: RoundContext, *, gain: np.ndarray, down_s: np.ndarray, held: int, start_s: float
) -> Selection:
    """Round ``ctx.round_index``'s selection among the candidates ``ctx.selected`` (their context as the method
    would see them all selected); ``gain``: every device's channel gain this round, shape (n,); ``down_s``: each
    candidate's planned download time [s], shape of ``ctx.selected``; ``held``: sub-bands held by late devices;
    ``start_s``: the round's start on the run's clock [s]."""
    policy = run.rules.selection.policy
    # Chen's power decides the upload energy: the method's plan must not leave a device out for an upload energy
    # at its full power and FDMA rate, so its compute is planned without the budget (which Chen's step applies)
    work = planned_work(run, ctx if policy != "chen" else replace(ctx, e_max_j=np.full(ctx.e_max_j.shape, np.inf)))
    down = down_s[np.searchsorted(ctx.selected, work.device)] if work.device.size else np.zeros(0)
    if policy == "fedcs":
        return _fedcs(run, ctx, work, down, gain=gain, held=held, start_s=start_s)
    if policy == "chen":
        return _chen(run, ctx, work, down, gain=gain)
    raise ValueError(f"selection.policy={policy!r}: no such policy")


def _fedcs(run: PolicyParts, ctx: RoundContext, work: PlannedWork, down: np.ndarray, *, gain: np.ndarray, held: int,
           start_s: float) -> Selection:  # fmt: skip
    """FedCS's greedy schedule of the candidates that can run (module docstring)."""
    dev = work.device
    if dev.size == 0:
        return Selection(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    power = run.fleet.tx_power_w
    alone = np.array([run.radio.rates_bps(gain[[d]], power[[d]], held=held)[0] for d in dev])  # alone on the band
    t_up = ctx.costs.upload(dev, bits=work.bits, rate_bps=alone)[0]
    ready = down + work.t_cmp_s
    order = fedcs_greedy(ready, t_up, deadline_s=run.rules.deadline_s)
    ends = upload_finish_times(ready, t_up, order)
    schedule = dev[order]
    chosen = np.sort(schedule)
    slot = np.empty(chosen.size, dtype=np.int64)
    end = np.empty(chosen.size)
    where = np.searchsorted(chosen, schedule)
    slot[where], end[where] = np.arange(1, chosen.size + 1), start_s + ends
    return Selection(chosen, schedule, columns={"upload_slot": slot, "upload_end_planned_s": end})


def _chen(run: PolicyParts, ctx: RoundContext, work: PlannedWork, down: np.ndarray, *, gain: np.ndarray) -> Selection:
    """Chen et al.'s joint selection, RB assignment and power of the candidates that can run (module docstring)."""
    dev, cfg, fleet = work.device, run.rules.selection.chen, run.fleet
    if dev.size == 0:
        return Selection(np.zeros(0, dtype=np.int64))
    i_w = np.array(cfg.interference_per_rb_w())
    n0 = run.radio.model.noise_psd_w_per_hz
    e_max = ctx.e_max_j[dev]
    t_max = run.rules.t_max_s
    res = chen_assignment(
        fleet.n_samples[dev].astype(float), gain[dev], i_w, p_max_w=fleet.tx_power_w[dev],
        rb_bandwidth_hz=cfg.rb_bandwidth_hz, noise_psd_w_per_hz=n0, waterfall=cfg.waterfall,
        model_bits=float(np.max(work.bits)), delay_budget_s=_NO_LIMIT if t_max is None else t_max,
        energy_budget_j=np.where(np.isfinite(e_max), e_max, _NO_LIMIT), downlink_delay_s=down + work.t_cmp_s,
        compute_energy_j=work.e_cmp_j,
    )  # fmt: skip
    picked = res.rb >= 0
    chosen, rb, p = dev[picked], res.rb[picked], res.power_w[picked].copy()  # dev ascending, so chosen is too
    b = cfg.rb_bandwidth_hz
    bits, e_cmp, budget = work.bits[picked], work.e_cmp_j[picked], e_max[picked]
    power = fleet.tx_power_w.copy()
    for _ in range(_ULP_STEPS):  # a budget met in the solver's arithmetic is met in the cost model's too
        power[chosen] = p
        # eq. (5): the RB's interference adds to its noise, N0 B + I_n = (N0 + I_n / B) B
        rate = np.asarray(shannon_rate_bps(b, gain[chosen], p, n0 + i_w[rb] / b), dtype=float)
        costs = replace(ctx.costs, fleet=replace(ctx.costs.fleet, tx_power_w=power))
        over = e_cmp + costs.upload(chosen, bits=bits, rate_bps=rate)[1] > budget
        if not over.any():
            break
        p[over] = np.nextafter(p[over], 0.0)
    columns = {"rb": rb.astype(np.int64), "bandwidth_hz": np.full(chosen.size, b), "tx_power_w": p,
               "interference_w": i_w[rb], "error_rate_planned": res.error_rate[picked]}  # fmt: skip
    return Selection(chosen, tx_power_w=power, rate_bps=rate, columns=columns)
