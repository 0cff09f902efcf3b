"""Scenario settings of Luo et al. cost-effective K and E (INFOCOM 2021): the ``[method.luo]`` table.

Read by ``edgefl design ke`` (:mod:`edgefl.design`); command-line options override them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from edgefl.scenario.section_base import Strict

__all__ = ["LuoSettings"]

_Loss = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Pair = tuple[Annotated[int, Field(ge=1, le=10_000_000)], Annotated[int, Field(ge=1, le=10_000_000)]]


class LuoSettings(Strict):
    """Settings of Luo et al.'s cost-effective design of K and E (Algorithm 2).

    - ``f_a`` > ``f_b``: the two estimation losses of eqs. (23)-(25) [loss units, global training loss F(w)];
      ``f_target`` (<= ``f_b``): the loss the design must reach (precision epsilon of P1).
    - ``samples``: the sampled designs (K_i, E_i) of Algorithm 2 line 2 (at least two distinct ones), run to
      F_b by ``design ke --rule paper``.
    - ``measured_samples``: the designs ``design ke --rule measured`` runs to ``f_target`` to fit its
      rounds-to-target model (:mod:`optimizers.cost_effective_fit`): a small design spread over (K, E) in log
      space, off the K = E diagonal; at least 3 distinct K, 2 distinct E and 5 designs.
    - ``gamma``: weight of energy against time in eq. (8), in [0, 1].
    - ``grid_k`` / ``grid_e``: the (K, E) grid of the exhaustive validation (``design ke --exhaustive``).
    - ``max_rounds``: a run that has not reached its target after this many rounds is reported as not reaching
      it (0: the scenario's ``rounds``).
    """

    f_a: _Loss = 1.5
    f_b: _Loss = 1.3
    f_target: _Loss = 1.05
    samples: tuple[_Pair, ...] = ((10, 10), (20, 20), (30, 30), (50, 50), (80, 80))
    measured_samples: tuple[_Pair, ...] = ((1, 40), (1, 80), (4, 25), (4, 60), (16, 30), (16, 80))
    gamma: float = Field(0.0, ge=0, le=1)
    grid_k: tuple[Annotated[int, Field(ge=1, le=10_000_000)], ...] = (1, 5, 10, 20, 50, 100)
    grid_e: tuple[Annotated[int, Field(ge=1, le=10_000_000)], ...] = (5, 10, 20, 40, 80)
    max_rounds: int = Field(0, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _order(self) -> LuoSettings:
        if not self.f_a > self.f_b:
            raise ValueError(f"f_a={self.f_a} must be > f_b={self.f_b} (F_b is the lower estimation loss)")
        if self.f_target > self.f_b:
            raise ValueError(f"f_target={self.f_target} must be <= f_b={self.f_b}")
        if len(set(self.samples)) < 2:
            raise ValueError(f"samples={[list(p) for p in self.samples]}: need at least two distinct (K, E)")
        if len(set(self.measured_samples)) < 2:
            raise ValueError(f"measured_samples={[list(p) for p in self.measured_samples]}: need at least two distinct (K, E)")
        if not self.grid_k or not self.grid_e:
            raise ValueError("grid_k and grid_e must each hold at least one value")
        return self
