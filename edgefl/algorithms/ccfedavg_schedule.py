"""Who trains and who skips: CC-FedAvg's training probabilities p_i and train/skip schedules per participation.

Shared by ``ccfedavg``, ``fedavg_dropout`` and ``fednova`` (they read the same ``[method.ccfedavg]`` settings).
The maths lives in :mod:`optimizers.ccfedavg`; this module ties it to a scenario's fleet and seed.

A schedule runs over each device's own participations (the rounds in which the server selected it), not over
global rounds: with every device selected every round (cross-silo) the two are the same; in cross-device
settings "round-robin" then means "trains once in every 1/p_i of its participations", which is what a device
planning its own energy can guarantee. Decisions are pure functions of (seed, round, participation count), and
the counts are method state (:meth:`SkipPlanner.state_dict`), so a resumed run decides the same.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from optimizers.ccfedavg import (
    budget_probabilities,
    level_probabilities,
    round_robin_mask,
    round_robin_phases,
)

from edgefl.algorithms.fedavg import cpu_hz_without_deadline
from edgefl.system import compute_energy_j

if TYPE_CHECKING:
    from edgefl.learning.workload import Workload
    from edgefl.scenario import Scenario
    from edgefl.system import Fleet

__all__ = ["SkipPlanner", "training_probabilities"]


def training_probabilities(scenario: Scenario, workload: Workload, fleet: Fleet) -> np.ndarray:
    """p_i of every device, shape (n_devices,), from the scenario's ``[method.ccfedavg]`` settings.

    ``levels``: CC-FedAvg Sec. VI-A, p_i = (1/2)^floor(beta i / N) (shuffled over devices with a seeded
    permutation when ``p_order = "shuffled"``). ``battery``: p_i = min(1, B_i / (T_sel e_i)) with e_i [J] the
    compute energy eps f^2 cycles of one local training at the frequency FedAvg would use (f_max, or f_min for
    ``cpu_policy = "min_energy"`` without a deadline) and T_sel = rounds K / N expected participations.
    """
    cfg = scenario.method.ccfedavg
    n = scenario.fleet.n_devices
    streams = workload.streams
    if cfg.p_source == "levels":
        p = level_probabilities(n, cfg.beta)
        if cfg.p_order == "shuffled":
            p = p[streams.numpy("ccfedavg_p_order").permutation(n)]
        return p
    battery = cfg.battery_j
    if isinstance(battery, tuple):
        budget = streams.numpy("ccfedavg_battery").uniform(battery[0], battery[1], size=n)
    else:
        budget = np.full(n, float(battery))
    dev = np.arange(n)
    cycles = workload.flops_per_sample() * workload.samples_per_round(dev) / fleet.flops_per_cycle
    deadline = scenario.round.policy == "deadline"
    f = fleet.f_max_hz if deadline else cpu_hz_without_deadline(scenario.method.cpu_policy, fleet)
    e_train = compute_energy_j(cycles, f, fleet.energy_coeff)
    t_sel = max(1, math.ceil(expected_participations(scenario)))
    return budget_probabilities(budget, e_train, t_sel)


def expected_participations(scenario: Scenario) -> float:
    """Rounds in which a device is expected to be selected: T K / N."""
    return scenario.rounds * scenario.method.clients_per_round / scenario.fleet.n_devices


class SkipPlanner:
    """Train/skip decisions of the scenario's schedule; ``p`` is set on first use (it needs the fleet)."""

    def __init__(self, scenario: Scenario, workload: Workload) -> None:
        self.scenario = scenario
        self.workload = workload
        self.p: np.ndarray | None = None
        self._phases: np.ndarray | None = None
        self.participations = np.zeros(scenario.fleet.n_devices, dtype=np.int64)

    def probabilities(self, fleet: Fleet) -> np.ndarray:
        """p_i, shape (n_devices,)."""
        if self.p is None:
            self.p = training_probabilities(self.scenario, self.workload, fleet)
            if self.scenario.method.ccfedavg.schedule == "round_robin":
                self._phases = round_robin_phases(self.p, self.workload.streams.numpy("ccfedavg_phases"))
        return self.p

    def decide(self, selected: np.ndarray, round_index: int, fleet: Fleet) -> np.ndarray:
        """Whether each selected device trains in round ``round_index`` (1-based); bool, shape (k,).

        Counts the participation of every selected device (call once per round).
        """
        p = self.probabilities(fleet)
        sel = np.asarray(selected, dtype=np.int64)
        if self.scenario.method.ccfedavg.schedule == "adhoc":
            # one uniform per device per round from the (seed, "skip", round) stream: a device's decision does
            # not depend on who else was selected
            u = self.workload.streams.numpy("skip", round_index).random(p.size)
            train = u[sel] < p[sel]
        else:
            counts = self.participations[sel]
            train = np.zeros(sel.size, dtype=bool)
            for c in np.unique(counts):  # round_robin_mask takes one (0-based) participation index
                at = counts == c
                train[at] = round_robin_mask(p[sel[at]], self._phases[sel[at]], int(c))
        self.participations[sel] += 1
        return train

    def state_dict(self) -> dict:
        import torch

        return {"participations": torch.from_numpy(self.participations.copy())}

    def load_state_dict(self, state: dict) -> None:
        self.participations = state["participations"].numpy().astype(np.int64).copy()
