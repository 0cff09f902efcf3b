"""Who trains and who skips: CC-FedAvg's training probabilities p_i and train/skip schedules per participation.

Shared by ``ccfedavg``, ``fedavg_dropout`` and ``fednova`` (each has the settings in its own table).
The maths lives in :mod:`optimizers.ccfedavg`; this module ties it to a run's fleet, cost model and seed.

A schedule runs over each device's own participations (the rounds in which the server selected it), not over
global rounds: with every device selected every round (cross-silo) the two are the same; in cross-device
settings "round-robin" then means "trains once in every 1/p_i of its participations", which is what a device
planning its own energy can guarantee. Decisions are pure functions of (seed, round, participation count), and
the counts are method state (:meth:`SkipPlanner.state_dict`), so a resumed run decides the same.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from edgefl.methods.base import Needs
from edgefl.methods.fedavg import FedAvg, FedAvgSettings
from edgefl.scenario.sections import MAX_DEVICE_ENERGY_J
from edgefl.learning.config import steps_per_round
from edgefl.scenario.limits import Limit, check_limits, require
from edgefl.scenario.section_base import check_range
from optimizers.ccfedavg import (
    budget_probabilities,
    level_probabilities,
    round_robin_mask,
    round_robin_phases,
)

if TYPE_CHECKING:
    from edgefl.methods.base import MethodSetup

_BATTERY_J = Limit(0.0, MAX_DEVICE_ENERGY_J, "J", "a device spends at most its battery on training: 3.6e8 J "
                   "(100 kWh, an electric vehicle's, the largest an edge device carries)")  # fmt: skip

__all__ = ["TrainingProbabilitySettings", "SkipPlanner", "training_probabilities", "expected_participations"]


class TrainingProbabilitySettings(FedAvgSettings):
    """How much each device may train: CC-FedAvg's p_i, shared by ``ccfedavg``, ``fedavg_dropout`` and
    ``fednova`` (each reads them from its own ``[method.<name>]`` table; give them the same values to compare
    the three on the same devices).

    - ``p_source``: ``"levels"`` (p_i = (1/2)^floor(beta i / N), Sec. VI-A; ``p_order="shuffled"`` gives the
      levels to devices in a seeded random order, as Table II assigns budgets at random) or ``"battery"``
      (p_i = min(1, B_i / (T_sel e_i)): ``battery_j`` B_i [J] is the energy the device can spend on local
      training over the whole run, e_i [J] the compute energy of one training under the cost model, T_sel =
      rounds * K / N its expected participations).
    """

    p_source: Literal["levels", "battery"] = "levels"
    beta: int = Field(4, ge=1, le=1_000_000)
    p_order: Literal["index", "shuffled"] = "index"
    battery_j: Annotated[float | tuple[float, float] | None, _BATTERY_J] = None

    @model_validator(mode="before")
    @classmethod
    def _limits(cls, data: Any) -> Any:
        return check_limits(cls, data)

    @field_validator("battery_j")
    @classmethod
    def _battery(cls, v: float | tuple[float, float] | None) -> float | tuple[float, float] | None:
        if v is None:
            return v
        values = v if isinstance(v, tuple) else (v,)
        for x in values:
            if not (math.isfinite(x) and x >= 0):
                raise ValueError("must be >= 0 [J] and finite, or [low, high] of such")
        return check_range(v)

    @model_validator(mode="after")
    def _battery_given(self) -> TrainingProbabilitySettings:
        what = "battery_j [J] (a number or [low, high])"
        return require(self, key="p_source", value="battery", field="battery_j", what=what)


class ProbabilityMethod(FedAvg):
    """FedAvg's planning for a method built on each device's training probability p_i (CC-FedAvg, FedNova, FedAvg
    with dropout): its ``[method.<name>]`` table extends :class:`TrainingProbabilitySettings`; its estimates or
    step counts need a real model, so it does not run under surrogate learning."""

    needs = Needs()
    Settings = TrainingProbabilitySettings

    def probabilities(self, *, deadline: bool) -> np.ndarray:
        """p_i of every device, shape (n_devices,) (:func:`training_probabilities`; ``deadline``: the rounds
        have one)."""
        return training_probabilities(self.settings, self.setup, deadline=deadline)


def training_probabilities(settings: TrainingProbabilitySettings, setup: MethodSetup, *, deadline: bool) -> np.ndarray:
    """p_i of every device, shape (n_devices,).

    ``levels``: CC-FedAvg Sec. VI-A, p_i = (1/2)^floor(beta i / N) (shuffled over devices with a seeded
    permutation when ``p_order = "shuffled"``). ``battery``: p_i = min(1, B_i / (T_sel e_i)) with e_i [J] the
    compute energy of one local training under the cost model at the frequency FedAvg would use (f_max with a
    ``deadline``, else by ``cpu_policy``) and T_sel = rounds K / N expected participations.
    """
    n = setup.n_devices
    streams = setup.streams
    if settings.p_source == "levels":
        p = level_probabilities(n, settings.beta)
        if settings.p_order == "shuffled":
            p = p[streams.numpy("ccfedavg_p_order").permutation(n)]
        return p
    battery = settings.battery_j
    if isinstance(battery, tuple):
        budget = streams.numpy("ccfedavg_battery").uniform(battery[0], battery[1], size=n)
    else:
        budget = np.full(n, float(battery))
    dev = np.arange(n)
    wl, costs = setup.workload, setup.costs
    cycles = costs.cycles(dev, wl.flops_per_sample() * wl.samples_per_round(dev))
    f = costs.free_frequency_hz(dev, "max" if deadline else settings.cpu_policy)
    steps = steps_per_round(wl.train_config, wl.n_samples)
    e_train = costs.compute(dev, cycles=cycles, steps=steps, f_hz=f)[1]
    t_sel = max(1, math.ceil(expected_participations(setup)))
    return budget_probabilities(budget, e_train, t_sel)


def expected_participations(setup: MethodSetup) -> float:
    """Rounds in which a device is expected to be selected: T K / N."""
    return setup.rounds * setup.clients_per_round / setup.n_devices


class SkipPlanner:
    """Train/skip decisions of CC-FedAvg's schedule; ``p`` is set on first use (the deadline is known then)."""

    def __init__(self, settings, setup: MethodSetup) -> None:
        self.settings = settings
        self.setup = setup
        self.p: np.ndarray | None = None
        self._phases: np.ndarray | None = None
        self.participations = np.zeros(setup.n_devices, dtype=np.int64)

    def probabilities(self, *, deadline: bool) -> np.ndarray:
        """p_i, shape (n_devices,)."""
        if self.p is None:
            self.p = training_probabilities(self.settings, self.setup, deadline=deadline)
            if self.settings.schedule == "round_robin":
                self._phases = round_robin_phases(self.p, self.setup.streams.numpy("ccfedavg_phases"))
        return self.p

    def decide(self, selected: np.ndarray, round_index: int, *, deadline: bool) -> np.ndarray:
        """Whether each selected device trains in round ``round_index`` (1-based); bool, shape (k,).

        Counts the participation of every selected device (call once per round).
        """
        p = self.probabilities(deadline=deadline)
        sel = np.asarray(selected, dtype=np.int64)
        if self.settings.schedule == "adhoc":
            # one uniform per device per round from the (seed, "skip", round) stream: a device's decision does
            # not depend on who else was selected
            u = self.setup.streams.numpy("skip", round_index).random(p.size)
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
