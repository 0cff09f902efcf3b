"""Radio resource allocation of a round: each started device's uplink bandwidth, transmit power and CPU frequency
(``channel.allocation``), planned with the cost model the round charges.

- ``"equal"``: the band as ``channel.bandwidth_mode`` says (``"split"``: ``B / m`` each), every device at its own
  transmit power and at f_max (Yang et al.'s EB-FDMA baseline); the drivers keep their own equal path, so this
  kind is here for other callers (a planner, the command line);
- ``"min_time"``: Shi et al.'s common finish (:func:`optimizers.alloc_min_time.min_time_allocation`): every device at
  f_max and its maximum power, the band split so that all finish together, as early as possible; a time spent
  before computing (the download, ``t_before_s``) is part of each device's finish;
- ``"min_energy"``: Yang et al.'s least energy of the round under its deadline
  (:func:`optimizers.alloc_min_energy.min_energy_allocation`: bandwidth, power and frequency; under the realistic
  physics :func:`optimizers.alloc_min_energy_realistic.min_energy_realistic_allocation`); without a deadline
  the least ``w T + (1 - w) E`` (:func:`optimizers.alloc_weighted.min_weighted_allocation`, ``w`` =
  ``channel.allocation_weight``). A deadline no allocation meets falls back to the min_time allocation (every
  device at its fastest; the round policy then cuts the late ones) and says so in :attr:`Allocation.note`.

The closed-form solvers assume the papers' model: Shannon's rate ``b log2(1 + g p / (N0 b))``, radiated upload
energy ``p t`` and compute energy ``eps c f^2``. This is exactly the cost model's physical mode without power parts
(:class:`edgefl.fleet.costs.CostModel`). min_time needs the times alone, which power parts do not change, and
plans the truncated Shannon link of ``physics = "realistic"`` exactly too
(:mod:`optimizers.alloc_min_time_truncated`: the SINR floor and the cap of TR 36.942 A.2); min_energy under a
deadline plans that link and the power parts (static power, circuit power, PA efficiency) exactly with
:mod:`optimizers.alloc_min_energy_realistic`. What is refused when the scenario loads
(:mod:`edgefl.scenario.loading`): Luo's per-step costs, and min_energy without a deadline (the weighted form)
under the truncated Shannon link or with power parts. The planned times and energies of :func:`allocate` come from
the cost model itself (:meth:`~edgefl.fleet.costs.CostModel.compute`, :meth:`~edgefl.fleet.costs.CostModel.upload`)
with the allocated powers (:func:`with_tx_power`), so a round that runs as allocated is charged exactly its plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from channel import fdma_bandwidth_hz, link_rate_bps
from edgefl.fleet.costs import CostModel

if TYPE_CHECKING:
    from channel import RadioModel

__all__ = ["ALLOCATIONS", "Allocation", "allocate", "with_tx_power"]

ALLOCATIONS: tuple[str, ...] = ("equal", "min_time", "min_energy")
"""The values of ``channel.allocation``, in the order the docs list them."""


@dataclass(frozen=True, eq=False)
class Allocation:
    """A round's allocation, one entry per device of ``device`` (ids, shape (m,)), in its order.

    ``bandwidth_hz`` [Hz] (sum <= the band), ``tx_power_w`` [W] (<= each device's maximum), ``cpu_hz`` [Hz] (in
    [f_min, f_max]), ``rate_bps`` [bit/s] (the link model's rate at them); the plan of the work allocated for:
    ``t_cmp_s``, ``t_com_s`` [s], ``e_cmp_j``, ``e_com_j`` [J]; ``costs``: the cost model with the allocated powers
    (:func:`with_tx_power`), the one the round charges with; ``note``: '' or why the allocation is not the kind
    asked for (a deadline no allocation meets)."""

    device: np.ndarray
    bandwidth_hz: np.ndarray
    tx_power_w: np.ndarray
    cpu_hz: np.ndarray
    rate_bps: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    costs: CostModel
    note: str = ""


def with_tx_power(costs: CostModel, devices: np.ndarray, tx_power_w: np.ndarray) -> CostModel:
    """``costs`` with the transmit power [W] of ``devices`` (ids, shape (m,)) set to ``tx_power_w`` (shape (m,));
    every other device keeps its own. Its upload energy is then ``p t`` (``(P_c + p / eta) t`` with power parts)
    at the allocated power."""
    power = costs.fleet.tx_power_w.copy()
    power[devices] = tx_power_w
    return CostModel(replace(costs.fleet, tx_power_w=power))


def allocate(
    kind: str,
    *,
    costs: CostModel,
    radio: RadioModel,
    devices: np.ndarray,
    gain: np.ndarray,
    cycles: np.ndarray,
    bits: np.ndarray | float,
    band_hz: float | None = None,
    deadline_s: float | None = None,
    weight: float = 0.5,
    t_before_s: np.ndarray | float = 0.0,
) -> Allocation:
    """The ``kind`` allocation (:data:`ALLOCATIONS`, module docstring) of ``devices`` (ids, shape (m,)) with uplink
    gains ``gain`` [linear] (shape (m,)), computing ``cycles`` [cycles] and uploading ``bits`` [bit] each.

    ``radio``: the uplink's model (noise PSD with the interference, link model, band); ``band_hz`` [Hz]: the band
    to share (None: ``radio.band_hz``); ``deadline_s`` [s]: the time each device has to compute and upload (None:
    none; min_energy then minimises ``weight * T + (1 - weight) * E``); ``t_before_s`` [s]: what each device
    spends before it computes (its download), part of min_time's common finish.
    """
    from optimizers.errors import InfeasibleError

    dev = np.asarray(devices, dtype=np.int64)
    g = np.asarray(gain, dtype=float)
    c = np.asarray(cycles, dtype=float)
    s = np.broadcast_to(np.asarray(bits, dtype=float), dev.shape)
    band = float(radio.band_hz if band_hz is None else band_hz)
    fl = costs.fleet
    f_min, f_max, p_max = fl.f_min_hz[dev], fl.f_max_hz[dev], fl.tx_power_w[dev]
    n0 = radio.noise_psd_w_per_hz
    note = ""
    if kind not in ALLOCATIONS:
        raise ValueError(f"channel.allocation={kind!r}: must be one of {', '.join(map(repr, ALLOCATIONS))}")
    if kind != "equal" and costs.mode != "physical":
        raise ValueError(f"channel.allocation={kind!r}: plans only with the physical cost model")
    realistic = radio.link_model != "shannon" or fl.has_power_parts
    if not dev.size:
        b = p = f = np.zeros(0)
    elif kind == "equal":
        b = np.full(dev.shape, fdma_bandwidth_hz(radio.bandwidth_mode, dev.size, band))
        p, f = p_max, f_max
    elif kind == "min_time":
        b, p, f = _fastest(c, s, g, p_max, f_max, n0, band, t_before_s, radio.link_model)
    else:
        solver = dict(cycles=c, kappa=fl.energy_coeff[dev], f_min_hz=f_min, f_max_hz=f_max, p_max_w=p_max,
                      update_bits=s, gain=g, n0_w_per_hz=n0, bandwidth_hz=band)  # fmt: skip
        try:
            if realistic and deadline_s is None:
                from optimizers.alloc_weighted import min_weighted_realistic_allocation

                sol = min_weighted_realistic_allocation(weight=weight, **solver, **_power_parts(fl, dev),
                                                        **_link(radio.link_model)).allocation  # fmt: skip
            elif realistic:
                from optimizers.alloc_min_energy_realistic import min_energy_realistic_allocation

                sol = min_energy_realistic_allocation(deadline_s=deadline_s, **solver, **_power_parts(fl, dev),
                                                      **_link(radio.link_model))  # fmt: skip
            elif deadline_s is None:
                from optimizers.alloc_weighted import min_weighted_allocation

                sol = min_weighted_allocation(weight=weight, **solver).allocation
            else:
                from optimizers.alloc_min_energy import min_energy_allocation

                sol = min_energy_allocation(deadline_s=deadline_s, **solver)
            b, p, f = sol.bandwidth_hz, sol.p_tx_w, sol.cpu_hz
        except InfeasibleError as exc:
            b, p, f = _fastest(c, s, g, p_max, f_max, n0, band, 0.0, radio.link_model)
            note = f"min_energy infeasible, min_time used: {exc}"
    b, p, f = (np.asarray(x, dtype=float).copy() for x in (b, p, f))
    round_costs = with_tx_power(costs, dev, p) if dev.size else costs
    rate = np.asarray(link_rate_bps(radio.link_model, b, g, p, n0, direction="uplink"), dtype=float) if dev.size else b
    t_cmp, e_cmp = round_costs.compute(dev, cycles=c, steps=np.zeros(dev.shape), f_hz=f)
    t_com, e_com = round_costs.upload(dev, bits=s, rate_bps=rate)
    return Allocation(device=dev, bandwidth_hz=b, tx_power_w=p, cpu_hz=f, rate_bps=rate, t_cmp_s=t_cmp,
                      t_com_s=t_com, e_cmp_j=e_cmp, e_com_j=e_com, costs=round_costs, note=note)  # fmt: skip


def _link(link_model: str) -> dict:
    """The uplink's link parameters as the solvers take them: Shannon's rate (alpha 1, no floor, no cap) or the
    truncated Shannon link's (3GPP TR 36.942 A.2, :data:`channel.TRUNCATED_SHANNON`)."""
    if link_model == "shannon":
        return {}
    from channel import TRUNCATED_SHANNON

    up = TRUNCATED_SHANNON["uplink"]
    return dict(alpha=up.alpha, snr_min=10.0 ** (up.snr_min_db / 10.0), max_bps_per_hz=up.max_bps_per_hz)


def _power_parts(fl, dev: np.ndarray) -> dict:
    """The devices' static power, circuit power and PA efficiency (the papers' 0, 0, 1 without power parts)."""
    if not fl.has_power_parts:
        return {}
    m = dev.size
    static = np.zeros(m) if fl.static_power_w is None else fl.static_power_w[dev]
    circuit = np.zeros(m) if fl.tx_circuit_power_w is None else fl.tx_circuit_power_w[dev]
    eta = np.ones(m) if fl.pa_efficiency is None else fl.pa_efficiency[dev]
    return dict(static_power_w=static, circuit_power_w=circuit, pa_efficiency=eta)


def _fastest(c, s, g, p_max, f_max, n0, band, t_before_s, link_model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shi et al.'s common finish: (bandwidth [Hz], power [W], frequency [Hz]) at f_max and p_max, under the
    ``link_model``'s rate (the truncated Shannon link: :mod:`optimizers.alloc_min_time_truncated`, with the
    uplink's TR 36.942 parameters)."""
    t_cmp = np.broadcast_to(np.asarray(t_before_s, dtype=float), c.shape) + c / f_max
    common = dict(t_cmp_s=t_cmp, update_bits=s, gain=g, p_tx_w=p_max, n0_w_per_hz=n0, bandwidth_hz=band)
    if link_model == "truncated_shannon":
        from channel import TRUNCATED_SHANNON
        from optimizers.alloc_min_time_truncated import min_time_truncated_allocation

        up = TRUNCATED_SHANNON["uplink"]
        sol = min_time_truncated_allocation(alpha=up.alpha, snr_min=10.0 ** (up.snr_min_db / 10.0),
                                            max_bps_per_hz=up.max_bps_per_hz, **common)  # fmt: skip
        return sol.bandwidth_hz, p_max, f_max
    from optimizers.alloc_min_time import min_time_allocation

    sol = min_time_allocation(**common)
    return sol.bandwidth_hz, p_max, f_max
