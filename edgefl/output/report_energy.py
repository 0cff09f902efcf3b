"""The run report's energy by device type and part: for each device type (its catalogue profile key, or
:data:`DRAWN` for a device drawn from ranges without one) the energy charged over the whole run [J], split into
compute static (``e_static_j``), compute dynamic (``e_cmp_j - e_static_j``), upload (``e_com_j``), download
(``e_down_j``) and idle (``e_idle_j``); a stacked bar chart and a small HTML table of the same numbers.

A column the device table lacks (a run folder written before it existed) counts as 0 J, and so does an empty cell.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

__all__ = ["DRAWN", "ENERGY_PARTS", "energy_by_type", "energy_by_type_figure", "energy_by_type_table"]

DRAWN = "drawn"
"""The device type of a device without a catalogue profile."""

ENERGY_PARTS = ("compute static", "compute dynamic", "upload", "download", "idle")
"""The parts of a device's energy, in stacking order."""

_COLOURS = {
    "compute static": "#aec7e8",
    "compute dynamic": "#1f77b4",
    "upload": "#ff7f0e",
    "download": "#2ca02c",
    "idle": "#9aa5b1",
}


def _joules(device_rounds: pd.DataFrame, column: str) -> pd.Series:
    """Column ``column`` as float joules, 0 where the cell is empty or the table has no such column."""
    if column not in device_rounds.columns:
        return pd.Series(0.0, index=device_rounds.index)
    return pd.to_numeric(device_rounds[column], errors="coerce").astype(float).fillna(0.0)


def _device_type(device_rounds: pd.DataFrame) -> pd.Series:
    """Each row's device type: its ``profile`` key, or :data:`DRAWN` (no column, an empty cell, NaN from CSV)."""
    if "profile" not in device_rounds.columns:
        return pd.Series(DRAWN, index=device_rounds.index, dtype=object)
    key = device_rounds["profile"].astype(object).where(device_rounds["profile"].notna(), "")
    key = key.map(lambda v: str(v).strip())
    return key.where(key != "", DRAWN)


def energy_by_type(device_rounds: pd.DataFrame) -> pd.DataFrame:
    """Energy over the run [J] by device type (rows: the profile keys in alphabetical order, :data:`DRAWN` last)
    and part (columns: :data:`ENERGY_PARTS`); an empty frame with those columns when the table has no rows."""
    parts = pd.DataFrame(
        {
            "type": _device_type(device_rounds),
            "compute static": _joules(device_rounds, "e_static_j"),
            "compute dynamic": _joules(device_rounds, "e_cmp_j") - _joules(device_rounds, "e_static_j"),
            "upload": _joules(device_rounds, "e_com_j"),
            "download": _joules(device_rounds, "e_down_j"),
            "idle": _joules(device_rounds, "e_idle_j"),
        }
    )
    sums = parts.groupby("type", sort=True)[list(ENERGY_PARTS)].sum()
    order = [t for t in sums.index if t != DRAWN] + ([DRAWN] if DRAWN in sums.index else [])
    out = sums.reindex(order)
    out.index.name = "device type"
    return out


def energy_by_type_figure(table: pd.DataFrame, rounds_word: str = "rounds") -> go.Figure:
    """The stacked bar chart of :func:`energy_by_type`'s ``table``: one bar per device type, one colour per part."""
    fig = go.Figure()
    fig.update_layout(
        title=f"Energy by device type and part, all {rounds_word}",
        template="plotly_white",
        xaxis_title="device type (catalogue profile)",
        yaxis_title="energy [J]",
        barmode="stack",
    )
    if table.empty:
        fig.add_annotation(text="no device rows yet", xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                           font={"size": 16, "color": "#888"})  # fmt: skip
        return fig
    types = [str(t) for t in table.index]
    for part in ENERGY_PARTS:
        values = [float(v) for v in table[part]]
        fig.add_trace(
            go.Bar(
                name=part,
                x=types,
                y=values,
                marker={"color": _COLOURS[part]},
                hovertext=[f"{t}<br>{part} {v:.4g} J" for t, v in zip(types, values)],
                hoverinfo="text",
            )
        )
    fig.update_xaxes(categoryorder="array", categoryarray=types)
    return fig


def energy_by_type_table(table: pd.DataFrame) -> str:
    """:func:`energy_by_type`'s ``table`` as an HTML table [J], with each type's total and a total row; empty text
    when it has no rows."""
    if table.empty:
        return ""
    head = "".join(f"<th>{html.escape(p)} [J]</th>" for p in ENERGY_PARTS)
    rows = []
    for kind, values in [*table.iterrows(), ("all devices", table.sum())]:
        cells = "".join(f"<td>{float(values[p]):.4g}</td>" for p in ENERGY_PARTS)
        total = float(sum(float(values[p]) for p in ENERGY_PARTS))
        rows.append(f"<tr><th>{html.escape(str(kind))}</th>{cells}<td>{total:.4g}</td></tr>")
    return (f'<table class="summary energy-by-type"><tr><th>device type</th>{head}<th>total [J]</th></tr>'
            + "".join(rows) + "</table>")  # fmt: skip
