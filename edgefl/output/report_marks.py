"""Marks the run report and ``edgefl plot`` share: the target accuracy and its crossing, and the words a figure
uses for a round (a synchronous round, or an asynchronous method's server update).

The crossing is the first evaluated round whose test accuracy reaches the target (:mod:`edgefl.output.targets`), drawn
where that round sits on each figure's x axis (simulated time [s], cumulative energy [J] or round).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from edgefl.output.targets import accuracy_target, time_to_target

__all__ = ["Words", "SYNC_WORDS", "ASYNC_WORDS", "words_for", "crossing", "draw_target"]

TARGET_COLOUR = "#2ca02c"


@dataclass(frozen=True)
class Words:
    """What a figure calls one step of the run (``round``), several (``rounds``) and the job that arrived last
    (``straggler``)."""

    round: str
    rounds: str
    straggler: str


SYNC_WORDS = Words(round="round", rounds="rounds", straggler="straggler")
ASYNC_WORDS = Words(round="server update", rounds="server updates", straggler="late job")


def words_for(asynchronous: bool) -> Words:
    """:data:`ASYNC_WORDS` for an asynchronous run (FedAsync, FedBuff: a device table with ``staleness``), else
    :data:`SYNC_WORDS`."""
    return ASYNC_WORDS if asynchronous else SYNC_WORDS


def crossing(rounds: pd.DataFrame, target_accuracy: float | None) -> pd.Series | None:
    """The ``rounds`` row that first reaches ``target_accuracy`` (``None``: no target, or not reached)."""
    hit = time_to_target(rounds, accuracy_target(target_accuracy))
    if pd.isna(hit["target_round"]):
        return None
    by_round = pd.to_numeric(rounds["round"], errors="coerce")
    return rounds[by_round == hit["target_round"]].iloc[0]


def draw_target(
    fig: go.Figure, x_col: str, target_accuracy: float, hits: Sequence[tuple[str, pd.Series | None]], words: Words
) -> None:
    """Draw the target as a dashed horizontal line and, for each ``(label, row)`` of ``hits``, a diamond where
    that run first reached it (``row`` from :func:`crossing`; ``None`` for a run that did not, said in the
    line's label)."""
    reached = [(label, row) for label, row in hits if row is not None]
    missed = [label for label, row in hits if row is None]
    text = f"target {target_accuracy:.0%}"
    if missed and len(hits) == 1:
        text += " (not reached)"
    elif missed:
        text += f" (not reached by {len(missed)} of {len(hits)} runs)"
    fig.add_hline(y=target_accuracy, line_dash="dash", line_color=TARGET_COLOUR, annotation_text=text,
                  annotation_position="bottom right", annotation_font_color=TARGET_COLOUR)  # fmt: skip
    if not reached:
        return
    x = [int(row[x_col]) if x_col == "round" else float(row[x_col]) for _, row in reached]
    hover = [
        (f"{label + ': ' if label else ''}target {target_accuracy:.2%} reached at {words.round} {int(row['round'])}"
         f"<br>test accuracy {float(row['test_accuracy']):.2%}<br>simulated time {float(row['sim_time_s']):.4g} s"
         f"<br>cumulative energy {float(row['energy_cum_j']):.4g} J")
        for label, row in reached
    ]  # fmt: skip
    fig.add_trace(
        go.Scatter(
            x=x, y=[float(row["test_accuracy"]) for _, row in reached], mode="markers", name="target reached",
            marker={"symbol": "diamond", "size": 13, "color": TARGET_COLOUR, "line": {"width": 1, "color": "#fff"}},
            hovertext=hover, hoverinfo="text", showlegend=False,
        )  # fmt: skip
    )
