"""Time and energy to a target: the first round whose metric reaches a threshold, and what it took to get there.

One rule for every caller: a run's ``summary.json`` (``train.target_accuracy``), its report and ``edgefl plot``
(the target line and the crossing), and a sweep's table (``target_accuracy`` / ``target_loss``). The target is
reached at the end of the first round, in round order, whose metric is ``>= value`` (accuracy) or ``<= value``
(a loss); a round without the metric (not evaluated) never reaches it. The time is that row's ``sim_time_s``
[s] and the energy its ``energy_cum_j`` [J], both cumulative from the start of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

__all__ = ["Target", "time_to_target", "accuracy_target", "run_target_summary", "target_sentence", "TARGET_KEYS"]

TARGET_KEYS = ("target_accuracy", "rounds_to_target", "time_to_target_s", "energy_to_target_j")
"""Keys :func:`run_target_summary` adds to a run's summary.json (null when there is no target or it was not met)."""


@dataclass(frozen=True, kw_only=True)
class Target:
    """A metric threshold: reached at the first round whose metric is ``>= value`` (``sense="max"``, accuracy)
    or ``<= value`` (``"min"``, a loss). The metric is the first of ``columns`` (rounds.csv columns) that has a
    value in the run, so a loss target times the test loss, or the training loss where a run has no test loss
    (``learning = "surrogate"``)."""

    columns: tuple[str, ...]
    value: float
    sense: Literal["max", "min"]

    def describe(self) -> str:
        return f"{' or '.join(self.columns)} {'>=' if self.sense == 'max' else '<='} {self.value:g}"


def accuracy_target(value: float | None) -> Target | None:
    """The target of a test accuracy ``value`` (a fraction in (0, 1]); ``None`` for no target."""
    return None if value is None else Target(columns=("test_accuracy",), value=float(value), sense="max")


def time_to_target(rounds: pd.DataFrame, target: Target | None) -> dict[str, Any]:
    """``target_metric`` (the column checked), ``target_round``, ``sim_time_to_target_s`` [s] and
    ``energy_to_target_j`` [J] at the end of the first round whose metric reaches the target; the metric is the
    first of ``target.columns`` with a value in ``rounds``. NaN (and ``""`` for the metric) when none applies."""
    out: dict[str, Any] = {
        "target_metric": "", "target_round": math.nan, "sim_time_to_target_s": math.nan, "energy_to_target_j": math.nan
    }  # fmt: skip
    if target is None or rounds.empty:
        return out
    df = rounds.sort_values("round", kind="stable")
    values = {c: pd.to_numeric(df[c], errors="coerce") for c in target.columns if c in df.columns}
    column = next((c for c, v in values.items() if v.notna().any()), None)
    if column is None:
        return out
    out["target_metric"] = column
    metric = values[column]
    hit = df[metric >= target.value] if target.sense == "max" else df[metric <= target.value]  # NaN never hits
    if hit.empty:
        return out
    first = hit.iloc[0]
    out.update(
        target_round=int(first["round"]),
        sim_time_to_target_s=float(first["sim_time_s"]),
        energy_to_target_j=float(first["energy_cum_j"]),
    )
    return out


def run_target_summary(target_accuracy: float | None, rounds: pd.DataFrame) -> dict[str, Any]:
    """A run's :data:`TARGET_KEYS`: the target (a test accuracy in (0, 1], or ``None``), ``rounds_to_target``
    (the round that first reached it), ``time_to_target_s`` [s] and ``energy_to_target_j`` [J]; ``None`` for
    each when there is no target or the run has not reached it."""
    hit = time_to_target(rounds, accuracy_target(target_accuracy))
    reached = not math.isnan(hit["target_round"])
    return {
        "target_accuracy": target_accuracy,
        "rounds_to_target": int(hit["target_round"]) if reached else None,
        "time_to_target_s": hit["sim_time_to_target_s"] if reached else None,
        "energy_to_target_j": hit["energy_to_target_j"] if reached else None,
    }


def target_sentence(summary: dict[str, Any], *, round_word: str = "round") -> str:
    """How the run did against its target, for the CLI's summary line and the report (``""`` without a target):
    ``"target 80.00% reached at round 7 (0.53 s, 0.123 J)"`` or ``"target 80.00% not reached"``."""
    target = summary.get("target_accuracy")
    if target is None:
        return ""
    if summary.get("rounds_to_target") is None:
        return f"target {target:.2%} not reached"
    return (
        f"target {target:.2%} reached at {round_word} {summary['rounds_to_target']} "
        f"({summary['time_to_target_s']:.4g} s, {summary['energy_to_target_j']:.4g} J)"
    )
