"""The one cost model: what a device-round's compute and upload cost in time [s] and energy [J].

Every method plans with it and the runner charges with it, so a device-round that runs as planned is charged
exactly what was planned. It is the only place in edgefl where these formulas are written.

Two modes, chosen by the fleet (``fleet.step_costs.kind``):

- ``"physical"`` (AnycostFL eqs. (6)-(9)): cycles = FLOPs / (FLOPs per cycle),
  compute time ``t_cmp = c / f`` (6), compute energy ``e_cmp = eps f^2 c`` (7),
  upload time ``t_com = bits / rate`` (9), upload energy ``e_com = P_tx t_com`` (9);
  with the power parts of the realistic physics (:attr:`Fleet.has_power_parts`) the compute power is static +
  dynamic, ``e_cmp = (P_static + eps f^3) c / f = P_static c / f + eps f^2 c``, and the upload power is the
  radio's circuit power plus the radiated power over the PA efficiency, ``e_com = (P_c + P_tx / eta) t_com``;
- a download (``[channel.downlink]``, both modes): ``t_down = bits / r_down``, ``e_down = P_rx t_down``;
- idle inside a round (``round.charge_idle``): ``e_idle = P_static t_wait``;
  a job stopped early is charged pro rata of each phase's time done (:func:`prorated_energy_j`);
- ``"per_step"`` (Luo et al. eqs. (3)-(7)): given per-device time ``t_p`` and energy ``e_p`` of one local SGD
  step and ``t_m``, ``e_m`` of one round of communication: ``t_cmp = E t_p``, ``e_cmp = E e_p``, and an upload
  (any payload of more than 0 bits) takes ``t_m`` and ``e_m``. The CPU frequency and the rate play no part.

The frequency rules live here too: the energy-optimal frequency that computes within a time budget
(:meth:`CostModel.deadline_frequency_hz`: the lowest such frequency in the papers' model; with a static power no
lower than ``f* = (P_static / (2 eps))^(1/3)``, where ``(P_static + eps f^3) / f`` is least), FedAvg's
deadline-free rule (:meth:`CostModel.free_frequency_hz`: the energy-optimal frequency, f_min in the papers' model,
under ``min_energy``, else f_max), and the frequency that leaves the most upload bits under a deadline
and an energy budget (:meth:`CostModel.upload_budget`, the compression baselines' plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

__all__ = ["CostModel", "CostMode", "Devices", "UploadBudget", "COST_MODES", "prorated_energy_j"]

CostMode = Literal["physical", "per_step"]
COST_MODES: tuple[str, ...] = ("physical", "per_step")
"""The cost modes, in the order the docs list them."""

_BISECT_STEPS = 100


def _f(x) -> np.ndarray:
    return np.asarray(x, dtype=float)


def prorated_energy_j(e_j: np.ndarray, t_s: np.ndarray, done_s: np.ndarray) -> np.ndarray:
    """Energy [J] charged for a phase (compute or upload) of duration ``t_s`` [s] and energy ``e_j`` [J] that
    stopped after ``done_s`` [s] (a job cancelled at the cut-off or lost offline): ``e done / t``, all of ``e``
    when the phase completed (``done >= t``, also for ``t = 0``). Shapes broadcast."""
    e, t, done = _f(e_j), _f(t_s), _f(done_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(done >= t, e, e * done / t)


class Devices(Protocol):
    """What the cost model reads of the devices (:class:`edgefl.fleet.devices.Fleet` is the one implementation): per
    device, shape (n,), the CPU frequency range [Hz], eps [J/(cycle Hz^2)], FLOPs per cycle, uplink power [W],
    and under Luo's costs the time [s] and energy [J] of one SGD step and of one upload (None otherwise)."""

    @property
    def f_min_hz(self) -> np.ndarray: ...
    @property
    def f_max_hz(self) -> np.ndarray: ...
    @property
    def energy_coeff(self) -> np.ndarray: ...
    @property
    def flops_per_cycle(self) -> np.ndarray: ...
    @property
    def tx_power_w(self) -> np.ndarray: ...
    @property
    def step_time_s(self) -> np.ndarray | None: ...
    @property
    def comm_time_s(self) -> np.ndarray | None: ...
    @property
    def step_energy_j(self) -> np.ndarray | None: ...
    @property
    def comm_energy_j(self) -> np.ndarray | None: ...
    @property
    def has_step_costs(self) -> bool: ...


@dataclass(frozen=True)
class UploadBudget:
    """Per device, shape (n,): frequency [Hz], affordable upload bits (floored), planned costs, feasibility."""

    f_hz: np.ndarray
    bits: np.ndarray
    t_cmp_s: np.ndarray
    t_com_s: np.ndarray
    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    feasible: np.ndarray
    reason: np.ndarray


@dataclass(frozen=True)
class CostModel:
    """Plans and charges compute and upload of the fleet's devices. ``dev`` arguments are device ids
    (an int array, shape (m,)); other arrays have the same shape."""

    fleet: Devices

    @property
    def mode(self) -> CostMode:
        """``"per_step"`` when the fleet gives costs per SGD step and per upload, else ``"physical"``."""
        return "per_step" if self.fleet.has_step_costs else "physical"

    # ------------------------------------------------------------------ the formulas
    def cycles(self, dev: np.ndarray, flops: np.ndarray | float) -> np.ndarray:
        """CPU cycles of ``flops`` training FLOPs on each device: FLOPs / (FLOPs per cycle)."""
        return _f(flops) / self.fleet.flops_per_cycle[dev]

    def compute(
        self, dev: np.ndarray, *, cycles: np.ndarray | float, steps: np.ndarray | float, f_hz: np.ndarray | float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(time [s], energy [J]) of a local computation of ``cycles`` cycles in ``steps`` SGD steps at ``f_hz``:
        AnycostFL eqs. (6)-(7) (``c / f``, ``eps f^2 c``), or Luo eq. (3)/(6) per step (``E t_p``, ``E e_p``)."""
        fl = self.fleet
        if fl.has_step_costs:
            steps = _f(steps)
            return steps * fl.step_time_s[dev], steps * fl.step_energy_j[dev]
        c, f = _f(cycles), _f(f_hz)
        t = c / f
        if fl.has_power_parts:
            return t, fl.energy_coeff[dev] * f * f * c + fl.static_power_w[dev] * t
        return t, fl.energy_coeff[dev] * f * f * c

    def static_energy_j(self, dev: np.ndarray, t_cmp_s: np.ndarray) -> np.ndarray:
        """The static part [J] of the compute energy of a computation lasting ``t_cmp_s`` [s]: ``P_static t``
        (0 in the papers' model and under per-step costs)."""
        fl = self.fleet
        if fl.has_step_costs or not fl.has_power_parts:
            return np.zeros(np.shape(t_cmp_s))
        return fl.static_power_w[dev] * _f(t_cmp_s)

    def idle_energy_j(self, dev: np.ndarray, wait_s: np.ndarray) -> np.ndarray:
        """Energy [J] of waiting ``wait_s`` [s] inside a round at the static power (0 in the papers' model)."""
        fl = self.fleet
        if not fl.has_power_parts:
            return np.zeros(np.shape(wait_s))
        return fl.static_power_w[dev] * _f(wait_s)

    def energy_optimal_hz(self, dev: np.ndarray) -> np.ndarray:
        """The CPU frequency [Hz] at which a computation costs least energy, in [f_min, f_max]: the energy per
        cycle ``P_static / f + eps f^2`` is least at ``f* = (P_static / (2 eps))^(1/3)``; f_min in the papers'
        model (no static power: the energy per cycle grows with f, AnycostFL eq. (7))."""
        fl = self.fleet
        if not fl.has_power_parts:
            return fl.f_min_hz[dev]
        best = np.cbrt(fl.static_power_w[dev] / (2.0 * fl.energy_coeff[dev]))
        return np.clip(best, fl.f_min_hz[dev], fl.f_max_hz[dev])

    def upload(
        self, dev: np.ndarray, *, bits: np.ndarray | float, rate_bps: np.ndarray | float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(time [s], energy [J]) of uploading ``bits`` at ``rate_bps`` [bit/s]: AnycostFL eq. (9)
        (``bits / r``, ``P_tx t``; with power parts ``(P_c + P_tx / eta) t``), or Luo eq. (3)/(6): ``t_m``,
        ``e_m`` per upload of more than 0 bits."""
        fl = self.fleet
        b = _f(bits)
        if fl.has_step_costs:
            sends = b > 0
            return np.where(sends, fl.comm_time_s[dev], 0.0), np.where(sends, fl.comm_energy_j[dev], 0.0)
        t = b / _f(rate_bps)
        return t, fl.upload_power_w[dev] * t

    def download(
        self, dev: np.ndarray, *, bits: np.ndarray | float, rate_bps: np.ndarray | float, rx_power_w: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(time [s], energy [J]) of downloading ``bits`` at ``rate_bps`` [bit/s] with receive power
        ``rx_power_w`` [W] (each device's own when the fleet has one, :attr:`Fleet.rx_power_w`):
        ``t_down = bits / r_down``, ``e_down = P_rx t_down`` (the downlink counterpart of AnycostFL eq. (9)), in
        both cost modes."""
        t = _f(bits) / _f(rate_bps)
        if self.fleet.rx_power_w is not None:
            return t, self.fleet.rx_power_w[dev] * t
        return t, rx_power_w * t

    # ------------------------------------------------------------------ frequency rules
    def deadline_frequency_hz(
        self, dev: np.ndarray, cycles: np.ndarray, slack_s: np.ndarray | float
    ) -> tuple[np.ndarray, np.ndarray]:
        """The energy-optimal CPU frequency [Hz] that computes ``cycles`` within ``slack_s`` [s] (the deadline
        left after downlink and upload), clipped to [f_min, f_max], and whether f_max suffices: the lowest such
        frequency (eq. (6) solved for f), raised to :meth:`energy_optimal_hz` when that is higher (a static
        power makes too slow a CPU cost more). No slack (<= 0) needs an infinite frequency (never meets)."""
        cycles = _f(cycles)
        slack = np.broadcast_to(_f(slack_s), cycles.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(slack > 0, cycles / slack, np.inf)
        f_max = self.fleet.f_max_hz[dev]
        if self.fleet.has_power_parts:
            return np.clip(np.maximum(need, self.energy_optimal_hz(dev)), self.fleet.f_min_hz[dev], f_max), need <= f_max
        return np.clip(need, self.fleet.f_min_hz[dev], f_max), need <= f_max

    def free_frequency_hz(self, dev: np.ndarray, cpu_policy: str) -> np.ndarray:
        """FedAvg's CPU frequency [Hz] when no deadline binds: the energy-optimal one under ``cpu_policy =
        "min_energy"`` (:meth:`energy_optimal_hz`: ``f_min`` in the papers' model), else ``f_max``. Planners that
        cost FedAvg ahead of a run with a deadline use ``f_max``."""
        if cpu_policy == "min_energy":
            return self.energy_optimal_hz(dev)
        return self.fleet.f_max_hz[dev]

    def upload_budget(
        self, dev: np.ndarray, *, cycles: np.ndarray, steps: np.ndarray, e_max_j: np.ndarray, rate_bps: np.ndarray,
        t_max_s: float, min_bits: float = 1.0, max_bits: float = math.inf, frugal: bool = False,
    ) -> UploadBudget:  # fmt: skip
        """Frequency maximising the affordable upload bits after computing ``cycles`` (physical mode):

            bits(f) = min( r (T_max - c/f),  r (E_max - e_cmp(f)) / P ),   f in [f_min, f_max]

        (AnycostFL eqs. (6)-(9); ``e_cmp(f) = eps f^2 c``, plus ``P_static c / f`` and with P the upload power
        ``P_c + P_tx / eta`` under the power parts). The first term grows with f; the second falls above the
        energy-optimal frequency f* (:meth:`energy_optimal_hz`, f_min in the papers' model) and rises below it,
        so no f below f* is better than f*: the best f in [f*, f_max] is where the two cross, or an end; it is found by vectorised bisection, and it is also the lowest frequency that
        meets the deadline after uploading those bits. ``t_max_s`` [s] (inf: no deadline), ``e_max_j`` [J] (inf:
        no budget). A device whose best budget is below ``min_bits`` is infeasible, with the reason. Bits are
        capped at ``max_bits``; f stays the cap-free optimum's, unless ``frugal``: then a device whose cap binds
        runs at the lowest frequency that computes and uploads the capped bits within ``t_max_s``
        (:meth:`deadline_frequency_hz`; f_min without a deadline), which spends less energy for the same bits.
        The costs come from :meth:`compute` and :meth:`upload`, so they are what the runner charges for the
        planned work.
        """
        fl = self.fleet
        c = _f(cycles)
        eps, lo, hi = fl.energy_coeff[dev], self.energy_optimal_hz(dev), fl.f_max_hz[dev]
        e_max, r, p = _f(e_max_j), _f(rate_bps), fl.upload_power_w[dev]
        p_s = fl.static_power_w[dev] if fl.has_power_parts else None

        def time_bits(f):
            return r * (t_max_s - c / f) if math.isfinite(t_max_s) else np.full(f.shape, np.inf)

        def energy_bits(f):
            e_cmp = eps * f * f * c if p_s is None else eps * f * f * c + p_s * c / f
            with np.errstate(invalid="ignore"):
                return np.where(np.isfinite(e_max), r * (e_max - e_cmp) / p, np.inf)

        at_min = time_bits(lo) >= energy_bits(lo)  # energy binds already at f_min: f_min is best
        at_max = ~at_min & (time_bits(hi) <= energy_bits(hi))  # time binds even at f_max
        a, b = lo.copy(), hi.copy()
        for _ in range(_BISECT_STEPS):  # crossing of an increasing and a decreasing function
            mid = 0.5 * (a + b)
            up = time_bits(mid) < energy_bits(mid)
            a, b = np.where(up, mid, a), np.where(up, b, mid)
        f = np.where(at_min, lo, np.where(at_max, hi, b))  # b: the side where energy binds, time is met
        bits = np.floor(np.minimum(time_bits(f), energy_bits(f)))
        if frugal:
            capped = bits > max_bits
            with np.errstate(invalid="ignore"):  # inf - inf where nothing is capped
                low = self.deadline_frequency_hz(dev, c, t_max_s - max_bits / r)[0]  # f_min without a deadline
            f = np.where(capped, np.minimum(low, f), f)  # never above the cap-free f: time and energy still met
        bits = np.minimum(bits, max_bits)
        t_cmp, e_cmp = self.compute(dev, cycles=c, steps=steps, f_hz=f)
        e_min = self.compute(dev, cycles=c, steps=steps, f_hz=lo)[1]
        reason = np.full(c.shape, "", dtype=object)
        reason[bits < min_bits] = "upload budget left by T_max and E_max is below the smallest useful payload"
        reason[bits <= 0] = "computing the model within T_max exceeds E_max (no frequency meets both)"
        reason[np.isfinite(e_max) & (e_min >= e_max)] = ("computing the model exceeds E_max at f_min" if p_s is None
                                                          else "computing the model exceeds E_max at any frequency")
        reason[math.isfinite(t_max_s) & (c / hi >= t_max_s)] = "computing the model exceeds T_max at f_max"
        feasible = reason == ""
        bits = np.where(feasible, bits, np.nan)
        t_com, e_com = self.upload(dev, bits=bits, rate_bps=r)
        return UploadBudget(f, bits, t_cmp, t_com, e_cmp, e_com, feasible, reason)
