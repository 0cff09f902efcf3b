"""The rules of every round (or server update) of a run, resolved from the scenario once at build time
(:func:`edgefl.run.runner.round_rules`); the drivers (:mod:`edgefl.engine.driver`) and their shared mechanics
(:mod:`edgefl.engine.round_steps`) read them instead of the scenario."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgefl.fleet.devices import EnergyBudgets
    from edgefl.scenario.selection_settings import SelectionConfig

__all__ = ["RoundRules"]


@dataclass(frozen=True, kw_only=True)
class RoundRules:
    """The rules of every round (or server update) of a run, resolved from the scenario at build time.

    ``rounds``: rounds (server updates) T; ``n_select``: devices the server starts per round (K, or more under
    ``over_select``; the jobs kept in flight for an asynchronous method); ``keep``: updates an ``over_select``
    round keeps (K); ``policy``, ``late``: the round policy and what a late job does (:meth:`edgefl.engine.clock.Clock.play`);
    ``deadline_s``: the configured deadline [s]; ``t_max_s``: the deadline a method plans for [s] (None unless
    ``policy = "deadline"``); ``downlink_s``: a fixed download time [s] (no downlink model);
    ``downlink_rx_power_w``: a device's receive power [W] under the downlink model (None: no downlink model,
    downloads cost no energy); ``width``: the global model's width; ``budget``: how each round draws the energy budgets;
    ``eval_every``: rounds between evaluations (and the last round); ``global_loss``: also record the training loss
    of the global model over every device's data; ``fixed_bands``: a device's uplink and downlink rates do not
    depend on how many devices share the band (``bandwidth_mode = "fixed"`` on both links); ``selection``: the
    ``[selection]`` policy and its settings (None: ``"random"``, every candidate runs; :mod:`edgefl.engine.selection`);
    ``charge_idle``: a
    device waiting inside its job (for its TDMA slot) is charged its static power (``round.charge_idle``);
    ``waterfall``: Chen et al.'s m of ``[channel.packet_errors]`` (None: no upload is lost to packet errors) and
    ``retransmissions``: how many times a lost upload is sent again;
    ``allocation``: how each round shares the uplink (``channel.allocation``, :mod:`edgefl.fleet.allocation`) and
    ``allocation_weight`` the weight of time in min_energy's weighted form (rounds without a deadline).
    """

    rounds: int
    n_select: int
    keep: int
    policy: str
    late: str
    deadline_s: float
    t_max_s: float | None
    downlink_s: float
    downlink_rx_power_w: float | None
    width: float
    budget: EnergyBudgets
    eval_every: int
    global_loss: bool
    fixed_bands: bool
    selection: SelectionConfig | None = None
    charge_idle: bool = False
    waterfall: float | None = None
    retransmissions: int = 0
    allocation: str = "equal"
    allocation_weight: float = 0.5

    def evaluates(self, r: int) -> bool:
        """Whether round (server update) ``r`` evaluates the global model: every ``eval_every`` and the last."""
        return r % self.eval_every == 0 or r == self.rounds
