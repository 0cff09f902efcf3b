"""Scenario settings of HeteroFL (Diao et al., ICLR 2021): the ``[method.heterofl]`` table."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from edgefl.method_settings._base import Strict

__all__ = ["HeteroFLSettings", "LEVEL_WIDTHS"]

LEVEL_WIDTHS = {"a": 1.0, "b": 0.5, "c": 0.25, "d": 0.125, "e": 0.0625}
"""Width (hidden-channel) rate of HeteroFL's complexity levels a..e (Sec. 4: shrinkage ratio r = 0.5)."""

Level = Literal["a", "b", "c", "d", "e"]


class HeteroFLSettings(Strict):
    """Which submodel each client trains.

    ``levels``: the complexity levels in play (``["a", "e"]`` is the paper's "a-e"). ``assignment``:

    - ``fix``: each device gets one level for the whole run, drawn once with ``proportions`` (default equal);
    - ``dynamic``: every selected device draws its level each round with ``proportions`` (the paper's tables);
    - ``capability``: each round, the largest level in ``levels`` whose compute time and energy (at the lowest
      CPU frequency meeting the deadline) and upload fit the round's deadline T_max and the device's E_max
      under the cost model; a device that fits none sits the round out.

    ``masked_loss``: HeteroFL's masked cross-entropy (absent classes' logits set to 0, their output rows not
    aggregated from that client); default on for label-skewed partitions (shards, dirichlet, gamma_mix).
    ``bn_clients``: how many clients the server queries, in turn, for the static batch-norm statistics
    before each evaluation (0 = all).
    """

    levels: tuple[Level, ...] = ("a",)
    proportions: tuple[float, ...] | None = None
    assignment: Literal["fix", "dynamic", "capability"] = "dynamic"
    masked_loss: bool | None = None
    bn_clients: int = Field(0, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _check(self) -> HeteroFLSettings:
        if not self.levels:
            raise ValueError("levels: give at least one of a, b, c, d, e")
        if len(set(self.levels)) != len(self.levels):
            raise ValueError(f"levels={list(self.levels)}: each level at most once")
        if self.proportions is not None:
            if len(self.proportions) != len(self.levels):
                raise ValueError(
                    f"proportions={list(self.proportions)}: need one per level ({len(self.levels)} levels)"
                )
            if any(p < 0 for p in self.proportions) or sum(self.proportions) <= 0:
                raise ValueError(f"proportions={list(self.proportions)}: must be >= 0 with a positive sum")
        return self

    def widths(self) -> tuple[float, ...]:
        """Width rates of ``levels``, in order."""
        return tuple(LEVEL_WIDTHS[level] for level in self.levels)

    def probabilities(self) -> tuple[float, ...]:
        """Normalised ``proportions`` (equal when not given)."""
        p = self.proportions or (1.0,) * len(self.levels)
        total = float(sum(p))
        return tuple(float(x) / total for x in p)
