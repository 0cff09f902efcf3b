"""Device fleet and the computation/communication cost model (AnycostFL eqs. (6)-(9)).

Every per-device quantity is a numpy array of shape ``(n_devices,)``. The cost functions are plain
vectorised formulas so that planners (optimizers/) and the simulator's charging use the same model:

- compute time     t_cmp = cycles / f                   [s]  (AnycostFL eq. (6), cycles = tau |D| alpha W)
- compute energy   e_cmp = eps * f^2 * cycles           [J]  (AnycostFL eq. (7))
- upload time      t_com = bits / rate                  [s]  (AnycostFL eq. (9))
- upload energy    e_com = p_tx * t_com                 [J]  (AnycostFL eq. (9))

Cycles charged by the simulator come from measured training FLOPs: ``cycles = flops / flops_per_cycle``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgefl.scenario import BudgetConfig, FleetConfig

__all__ = [
    "Fleet",
    "compute_time_s",
    "compute_energy_j",
    "upload_time_s",
    "upload_energy_j",
    "draw_per_device",
    "draw_budgets_j",
    "deadline_frequency_hz",
]


def compute_time_s(cycles: np.ndarray | float, f_hz: np.ndarray | float) -> np.ndarray:
    """Local computation time [s] = cycles / f  (AnycostFL eq. (6)). ``f_hz`` [Hz] > 0."""
    return np.asarray(cycles, dtype=float) / np.asarray(f_hz, dtype=float)


def compute_energy_j(
    cycles: np.ndarray | float, f_hz: np.ndarray | float, energy_coeff: np.ndarray | float
) -> np.ndarray:
    """Local computation energy [J] = eps * f^2 * cycles  (AnycostFL eq. (7)); eps in [J/(cycle Hz^2)]."""
    f = np.asarray(f_hz, dtype=float)
    return np.asarray(energy_coeff, dtype=float) * f * f * np.asarray(cycles, dtype=float)


def upload_time_s(bits: np.ndarray | float, rate_bps: np.ndarray | float) -> np.ndarray:
    """Uplink time [s] = bits / rate  (AnycostFL eq. (9)); ``rate_bps`` [bit/s] > 0."""
    return np.asarray(bits, dtype=float) / np.asarray(rate_bps, dtype=float)


def upload_energy_j(tx_power_w: np.ndarray | float, t_com_s: np.ndarray | float) -> np.ndarray:
    """Uplink energy [J] = P_tx * t_com  (AnycostFL eq. (9))."""
    return np.asarray(tx_power_w, dtype=float) * np.asarray(t_com_s, dtype=float)


def deadline_frequency_hz(
    cycles: np.ndarray, slack_s: np.ndarray | float, f_min_hz: np.ndarray, f_max_hz: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The lowest CPU frequency [Hz] that computes ``cycles`` within ``slack_s`` [s] (the deadline left after the
    downlink and the upload), clipped to [f_min, f_max], and whether f_max suffices; shapes of ``cycles``.

    Eq. (6) solved for f: f = cycles / slack. No slack (<= 0) needs an infinite frequency (never meets).
    """
    cycles = np.asarray(cycles, dtype=float)
    slack = np.broadcast_to(np.asarray(slack_s, dtype=float), cycles.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.where(slack > 0, cycles / slack, np.inf)
    return np.clip(need, f_min_hz, f_max_hz), need <= f_max_hz


def draw_per_device(spec: float | tuple[float, float], n: int, rng: np.random.Generator) -> np.ndarray:
    """A per-device array from a scenario value: a number (all equal) or (low, high) (uniform draws)."""
    if isinstance(spec, tuple):
        return rng.uniform(spec[0], spec[1], size=n)
    return np.full(n, float(spec))


def draw_budgets_j(budget: BudgetConfig, n: int, rng: np.random.Generator) -> np.ndarray:
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
    ``n_samples`` local training set size. Per-round energy budgets are drawn separately each round.
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

    @property
    def n_devices(self) -> int:
        return int(self.n_samples.shape[0])

    @classmethod
    def from_config(
        cls, cfg: FleetConfig, n_samples: np.ndarray, rng: np.random.Generator,
        cost_rng: np.random.Generator | None = None,
    ) -> Fleet:  # fmt: skip
        """Draw the fleet from its scenario section; draws happen in a fixed order from ``rng``.

        With ``cfg.step_costs.kind == "normal"`` the per-step and per-upload costs are drawn from ``cost_rng``
        (its own stream, so the rest of the fleet does not change).
        """
        n = cfg.n_devices
        sc = cfg.step_costs
        step: dict[str, np.ndarray] = {}
        if sc.kind == "normal":
            if cost_rng is None:
                raise ValueError("fleet.step_costs.kind='normal' needs a random stream for the costs")
            for name in ("step_time_s", "comm_time_s", "step_energy_j", "comm_energy_j"):
                mean = getattr(sc, name)
                step[name] = np.maximum(cost_rng.normal(mean, sc.std_ratio * mean, size=n), 0.01 * mean)
        f_max = draw_per_device(cfg.f_max_hz, n, rng)
        f_min = np.minimum(draw_per_device(cfg.f_min_hz, n, rng), f_max)
        return cls(
            f_min_hz=f_min,
            f_max_hz=f_max,
            energy_coeff=draw_per_device(cfg.energy_coeff, n, rng),
            flops_per_cycle=draw_per_device(cfg.flops_per_cycle, n, rng),
            tx_power_w=draw_per_device(cfg.tx_power_w, n, rng),
            n_samples=np.asarray(n_samples, dtype=np.int64),
            **step,
        )
