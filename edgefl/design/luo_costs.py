"""Per-device costs of Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021), eqs. (3) and (6),
measured from a run's fleet: t_{k,p} [s] / e_{k,p} [J] of one local SGD step and t_{k,m} [s] / e_{k,m} [J] of
one round of communication, each an array of shape (N,).

Two sources, matching how the simulator charges a round:

- ``fleet.step_costs.kind = "normal"`` (the paper's simulation setups): the fleet's drawn per-device constants.
- the physical cost model (``kind = "none"``, :class:`edgefl.fleet.costs.CostModel`): one step of batch B on
  device k computes ``FLOPs/sample x min(B, n_k)`` FLOPs, i.e. ``cycles = that / flops_per_cycle`` at the
  FedAvg CPU frequency f (``f_max``; ``f_min`` with ``cpu_policy = "min_energy"`` and no deadline), so
  ``t_p = cycles / f`` and ``e_p = eps f^2 cycles`` (AnycostFL eqs. 6-7); one upload of the float32 update
  takes ``t_m = bits x mean_r(1 / rate_r)`` and ``e_m = P_tx t_m`` (eq. 9). The rate changes from round to
  round under mobility and fading: the mean runs over the first ``rate_rounds`` rounds of the run's own radio
  streams (the same draws the run sees), with every device transmitting (exact for
  ``channel.bandwidth_mode = "fixed"``; with ``"split"`` the band depends on how many transmit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from optimizers.cost_effective import LuoCostParams, expected_total_energy_j, expected_total_time_s

if TYPE_CHECKING:
    from edgefl.run.runner import Simulation

__all__ = ["DeviceCosts", "measure_device_costs"]


@dataclass(frozen=True)
class DeviceCosts:
    """Per-device costs of one local step and one round of communication, each shape (N,).

    Attributes:
        t_p_s: time of one local SGD step t_{k,p} [s].
        t_m_s: time of one round of communication t_{k,m} [s].
        e_p_j: energy of one local SGD step e_{k,p} [J].
        e_m_j: energy of one round of communication e_{k,m} [J].
        source: ``"step_costs"`` (drawn constants) or ``"cost_model"`` (FLOPs, frequency and radio).
    """

    t_p_s: np.ndarray
    t_m_s: np.ndarray
    e_p_j: np.ndarray
    e_m_j: np.ndarray
    source: str

    @property
    def n(self) -> int:
        return int(self.t_p_s.shape[0])

    def means(self) -> dict[str, float]:
        """Device averages t_p, t_m [s], e_p, e_m [J] of eq. (17) and Lemma 1."""
        return {name: float(np.mean(getattr(self, name))) for name in ("t_p_s", "t_m_s", "e_p_j", "e_m_j")}

    def luo_params(self, *, gamma: float, a0_over_b0: float) -> LuoCostParams:
        """The inputs of problem P3 (eq. 20) for these devices."""
        return LuoCostParams(n=self.n, gamma=gamma, a0_over_b0=a0_over_b0, **self.means())

    def expected_round(self, k: int, e: int) -> tuple[float, float]:
        """(E[t^(r)] [s], E[e^(r)] [J]) of one round with K of N sampled uniformly and E local steps:
        Lemma 2, eq. (13) over t_k = t_{k,p} E + t_{k,m} (eq. 3), and Lemma 1, eq. (10) per round,
        ``K (e_p E + e_m)`` (the totals of eqs. 10 and 12 with R = 1)."""
        t = expected_total_time_s(self.t_p_s, self.t_m_s, k=k, e=e, rounds=1)
        energy = expected_total_energy_j(self.e_p_j, self.e_m_j, k=k, e=e, rounds=1)
        return t, energy


def measure_device_costs(sim: Simulation, *, rate_rounds: int = 20) -> DeviceCosts:
    """The per-device costs a :class:`~edgefl.run.runner.Simulation` charges (see the module docstring).

    ``rate_rounds`` (>= 1): rounds of the run's radio over which 1/rate is averaged (cost-model source only).
    The simulation itself is not advanced: a fresh radio on the same streams replays the rounds.
    """
    fleet = sim.fleet
    if fleet.has_step_costs:
        return DeviceCosts(
            t_p_s=np.array(fleet.step_time_s, dtype=float),
            t_m_s=np.array(fleet.comm_time_s, dtype=float),
            e_p_j=np.array(fleet.step_energy_j, dtype=float),
            e_m_j=np.array(fleet.comm_energy_j, dtype=float),
            source="step_costs",
        )
    if rate_rounds < 1:
        raise ValueError(f"rate_rounds={rate_rounds}: must be >= 1")
    from edgefl.fleet.links import Radio

    sc, wl, costs = sim.scenario, sim.workload, sim.costs
    n = fleet.n_devices
    dev = np.arange(n)
    policy = "max" if sim.t_max is not None else getattr(sim.method.settings, "cpu_policy", "max")
    f_hz = costs.free_frequency_hz(dev, policy)
    batch = np.minimum(sc.train.batch_size, wl.n_samples)  # samples of one SGD step, shape (N,)
    cycles = costs.cycles(dev, float(wl.flops_per_sample(sc.model.width)) * batch)
    t_p, e_p = costs.compute(dev, cycles=cycles, steps=1, f_hz=f_hz)  # AnycostFL eqs. (6)-(7)
    radio = Radio(sc.channel, n, sim.streams)
    everyone = np.ones(n, dtype=bool)
    t_m, e_m = np.zeros(n), np.zeros(n)
    for r in range(1, rate_rounds + 1):
        _, gain = radio.round_state(r)
        t, e = costs.upload(dev, bits=wl.update_bits, rate_bps=radio.rates_bps(gain, fleet.tx_power_w, everyone))
        t_m, e_m = t_m + t, e_m + e  # eq. (9) each round
    t_m, e_m = t_m / rate_rounds, e_m / rate_rounds  # bits x mean(1/rate) [s], P_tx t_m [J]
    return DeviceCosts(t_p_s=t_p, t_m_s=t_m, e_p_j=e_p, e_m_j=e_m, source="cost_model")
