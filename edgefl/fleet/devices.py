"""The device fleet: hardware and radio constants per device, drawn from the scenario's ``[fleet]`` section,
and the per-round energy budgets. Every per-device quantity is a numpy array of shape ``(n_devices,)``.

What a device's work costs is the cost model's business (:mod:`edgefl.fleet.costs`, AnycostFL eqs. (6)-(9) or
Luo et al.'s per-step costs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgefl.scenario.sections import BudgetConfig, FleetConfig

__all__ = ["Fleet", "EnergyBudgets", "draw_per_device", "draw_budgets_j", "draw_columns"]


def draw_per_device(spec: float | tuple[float, float], n: int, rng: np.random.Generator) -> np.ndarray:
    """A per-device array from a scenario value: a number (all equal) or (low, high) (uniform draws)."""
    if isinstance(spec, tuple):
        return rng.uniform(spec[0], spec[1], size=n)
    return np.full(n, float(spec))


@dataclass(frozen=True, kw_only=True)
class EnergyBudgets:
    """How each round draws a device's energy budget E_max [J] (``[fleet.budget]``, resolved at build time):
    ``kind`` ``"none"`` (no budget), ``"fixed"`` (``value_j``: a number for every device, or (low, high) drawn per
    device) or ``"uniform"`` (uniform on [``low_j``, ``high_j``])."""

    kind: str = "none"
    value_j: float | tuple[float, float] = 1.0
    low_j: float = 1.0
    high_j: float = 1.0

    @classmethod
    def of(cls, budget: BudgetConfig) -> EnergyBudgets:
        """The budgets a ``[fleet.budget]`` section sets."""
        return cls(kind=budget.kind, value_j=budget.value_j, low_j=budget.low_j, high_j=budget.high_j)


def draw_budgets_j(budget: EnergyBudgets, n: int, rng: np.random.Generator) -> np.ndarray:
    """This round's energy budget E_max [J] per device, shape (n,); ``inf`` when budgets are off."""
    if budget.kind == "none":
        return np.full(n, np.inf)
    if budget.kind == "uniform":
        return rng.uniform(budget.low_j, budget.high_j, size=n)
    return draw_per_device(budget.value_j, n, rng)


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """The devices: hardware and radio constants, each an array of shape (n_devices,).

    ``f_min_hz``/``f_max_hz`` CPU frequency range [Hz]; ``energy_coeff`` eps [J/(cycle Hz^2)];
    ``flops_per_cycle`` FLOPs the CPU retires per cycle; ``tx_power_w`` uplink power [W];
    ``n_samples`` local training set size; ``profiles`` each device's catalogue profile key ('' for a device drawn
    from ranges without one), an object array of str, or None (no device has one). Per-round energy budgets are
    drawn separately each round.

    The parts of the power (issue #33; None: the papers' model, where each is 0, or 1 for the PA efficiency):
    ``static_power_w`` the platform's static (idle) power [W], drawn while computing on top of eps f^3 and while
    waiting inside a round; ``tx_circuit_power_w`` the radio's circuit power while transmitting [W] and
    ``pa_efficiency`` its power amplifier's efficiency [-] (upload power = circuit + tx / efficiency);
    ``rx_power_w`` the receive power of downloads [W] (None: ``[channel.downlink]``'s for every device).
    """

    f_min_hz: np.ndarray
    f_max_hz: np.ndarray
    energy_coeff: np.ndarray
    flops_per_cycle: np.ndarray
    tx_power_w: np.ndarray
    n_samples: np.ndarray
    step_time_s: np.ndarray | None = None
    comm_time_s: np.ndarray | None = None
    step_energy_j: np.ndarray | None = None
    comm_energy_j: np.ndarray | None = None
    profiles: np.ndarray | None = None
    static_power_w: np.ndarray | None = None
    tx_circuit_power_w: np.ndarray | None = None
    pa_efficiency: np.ndarray | None = None
    rx_power_w: np.ndarray | None = None

    @property
    def has_power_parts(self) -> bool:
        """Whether the fleet has a static power, a circuit power or a PA efficiency (not the papers' model)."""
        return self.static_power_w is not None

    @property
    def upload_power_w(self) -> np.ndarray:
        """The power [W] a device draws while it uploads, shape (n,): circuit + tx / PA efficiency, or the
        radiated power alone in the papers' model (AnycostFL eq. (9))."""
        if self.static_power_w is None:
            return self.tx_power_w
        return self.tx_circuit_power_w + self.tx_power_w / self.pa_efficiency

    @property
    def has_step_costs(self) -> bool:
        """Whether costs are given per SGD step and per upload (Luo et al.) instead of by the cost model."""
        return self.step_time_s is not None

    def __post_init__(self) -> None:
        n = self.n_samples.shape[0]
        for name in ("f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle", "tx_power_w"):
            arr = getattr(self, name)
            if arr.shape != (n,):
                raise ValueError(f"{name}: shape {arr.shape}, expected ({n},)")
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise ValueError(f"{name}: every value must be finite and > 0")
        if np.any(self.f_min_hz > self.f_max_hz):
            raise ValueError("f_min_hz must be <= f_max_hz for every device")
        parts = ("static_power_w", "tx_circuit_power_w", "pa_efficiency")
        if len({getattr(self, name) is None for name in parts}) != 1:
            raise ValueError(f"{', '.join(parts)}: give all three or none")
        for name in (*parts, "rx_power_w"):
            arr = getattr(self, name)
            if arr is not None and (arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0)):
                raise ValueError(f"{name}: expected finite values >= 0 of shape ({n},)")
        if self.pa_efficiency is not None and np.any((self.pa_efficiency <= 0) | (self.pa_efficiency > 1)):
            raise ValueError("pa_efficiency: every value must be in (0, 1]")
        if self.profiles is not None and self.profiles.shape != (n,):
            raise ValueError(f"profiles: shape {self.profiles.shape}, expected ({n},)")

    @property
    def n_devices(self) -> int:
        return int(self.n_samples.shape[0])

    @classmethod
    def from_config(
        cls, cfg: FleetConfig, n_samples: np.ndarray, rng: np.random.Generator,
        cost_rng: np.random.Generator | None = None,
    ) -> Fleet:  # fmt: skip
        """Draw the fleet from its scenario section; draws happen in a fixed order from ``rng``.

        With ``cfg.step_costs.kind`` ``"normal"`` or ``"lognormal"`` the per-step and per-upload costs are drawn
        from ``cost_rng`` (its own stream, so the rest of the fleet does not change).
        """
        cols = draw_columns(cfg, rng, cost_rng)
        cols["flops_per_cycle"] = cols["flops_per_cycle"] * cfg.flops_per_cycle_scale
        return cls(n_samples=np.asarray(n_samples, dtype=np.int64), **cols)


def draw_columns(
    cfg: FleetConfig, rng: np.random.Generator, cost_rng: np.random.Generator | None = None
) -> dict[str, np.ndarray]:
    """The per-device quantities of :class:`Fleet` drawn from the scenario's ranges, each shape (n_devices,), in
    a fixed order from ``rng`` (per-step costs from ``cost_rng``); ``flops_per_cycle`` before
    ``cfg.flops_per_cycle_scale`` is applied."""
    n = cfg.n_devices
    sc = cfg.step_costs
    step: dict[str, np.ndarray] = {}
    if sc.kind != "none":
        if cost_rng is None:
            raise ValueError(f"fleet.step_costs.kind={sc.kind!r} needs a random stream for the costs")
        sigma = math.sqrt(math.log1p(sc.std_ratio**2))
        for name in ("step_time_s", "comm_time_s", "step_energy_j", "comm_energy_j"):
            mean = getattr(sc, name)
            if sc.kind == "normal":
                step[name] = np.maximum(cost_rng.normal(mean, sc.std_ratio * mean, size=n), 0.01 * mean)
            else:  # lognormal of this mean and standard deviation std_ratio * mean
                step[name] = cost_rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, size=n)
    f_max = draw_per_device(cfg.f_max_hz, n, rng)
    f_min = np.minimum(draw_per_device(cfg.f_min_hz, n, rng), f_max)
    return {
        "f_min_hz": f_min,
        "f_max_hz": f_max,
        "energy_coeff": draw_per_device(cfg.energy_coeff, n, rng),
        "flops_per_cycle": draw_per_device(cfg.flops_per_cycle, n, rng),
        "tx_power_w": draw_per_device(cfg.tx_power_w, n, rng),
        **step,
    }
