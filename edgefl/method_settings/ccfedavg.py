"""Scenario settings of CC-FedAvg (Zhang et al.): the ``[method.ccfedavg]`` table.

``fedavg_dropout`` and ``fednova`` read the training probabilities p_i (``p_source``, ``beta``, ``p_order``,
``battery_j``) from this table too, so the three methods compare on the same devices.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from edgefl.method_settings._base import Strict, check_range

__all__ = ["CCFedAvgSettings"]


class CCFedAvgSettings(Strict):
    """Settings of CC-FedAvg (Zhang et al.) and of its baselines.

    - ``strategy``: what a skipping client contributes (Sec. III-B): 1 = nothing (left out of aggregation),
      2 = its last local model, 3 = its last computed update however old (CC-FedAvg, Algorithm 1),
      ``"c"`` = CC-FedAvg(c), eq. (4): Strategy 3 in rounds ``< tau``, Strategy 2 from round ``tau`` on.
    - ``tau``: the switch round of CC-FedAvg(c) (1-based round index, like ``rounds``).
    - ``backup``: where the history lives: ``"client"`` (Algorithm 1: the estimate is uploaded, full update
      bits), ``"server"`` (Algorithm 2: a 1-bit skip signal, the server keeps every client's history) or
      ``"mixed"`` (Algorithm 3: a seeded ``server_backup_fraction`` of the devices back up on the server).
    - ``schedule``: ``"adhoc"`` (train with probability p_i each time selected) or ``"round_robin"`` (train
      once, then skip 1/p_i - 1 participations), from :mod:`optimizers.ccfedavg`.
    - ``p_source``: ``"levels"`` (p_i = (1/2)^floor(beta i / N), Sec. VI-A; ``p_order="shuffled"`` gives the
      levels to devices in a seeded random order, as Table II assigns budgets at random) or ``"battery"``
      (p_i = min(1, B_i / (T_sel e_i)): ``battery_j`` B_i [J] is the energy the device can spend on local
      training over the whole run, e_i [J] the compute energy of one training under the cost model, T_sel =
      rounds * K / N its expected participations).
    """

    strategy: Literal[1, 2, 3, "c"] = 3
    tau: int = Field(100, ge=1, le=10_000_000)
    backup: Literal["client", "server", "mixed"] = "client"
    server_backup_fraction: float = Field(0.5, ge=0, le=1)
    schedule: Literal["adhoc", "round_robin"] = "adhoc"
    p_source: Literal["levels", "battery"] = "levels"
    beta: int = Field(4, ge=1, le=1_000_000)
    p_order: Literal["index", "shuffled"] = "index"
    battery_j: float | tuple[float, float] | None = None

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
    def _battery_given(self) -> CCFedAvgSettings:
        if self.p_source == "battery" and self.battery_j is None:
            raise ValueError("p_source='battery' needs battery_j [J] (a number or [low, high])")
        return self
