"""Self-contained HTML report of one run (docs/outputs.md).

The page has a header with a summary table and five plotly figures:

1. test accuracy vs simulated time [s],
2. test accuracy vs cumulative energy [J],
3. test accuracy vs round,
4. one round's device timeline (compute and upload bars, under TDMA the wait for the channel between them,
   uploads lost to packet errors marked, straggler and deadline marked),
5. a multi-round Gantt of device states on the run's absolute clock for the first devices: offline periods
   (given by the caller: the run's availability schedule, regenerated from its seed), download, compute and
   upload bars of every job, idle between them, jobs lost offline marked (needs ``t_down_s``, ``t_start_s``,
   ``t_end_s``),
6. per-device total energy (compute and upload stacked) [J],
7. energy by device type (catalogue profile, or "drawn") and part: compute static and dynamic, upload, download,
   idle [J], stacked, with a table of the numbers under it (:mod:`edgefl.output.report_energy`),
8. for asynchronous runs (a ``staleness`` column), a histogram of the aggregated updates' staleness.

The header names the physics the run was simulated with and lists its settings (given by the caller,
:func:`edgefl.output.report_header.run_settings`). With a
target accuracy the accuracy figures draw it and mark the first round that reached it (:mod:`edgefl.output.report_marks`).
An asynchronous run's figures speak of server updates and late jobs, not rounds and stragglers. Device-level
figures are sampled or aggregated above a size and say so (:mod:`edgefl.output.report_scale`), so the page stays a
few MB whatever the fleet.

Inputs are the two result tables: ``rounds`` (one row per round; ``sim_time_s`` is the simulated clock at the
end of the round, ``test_accuracy`` is a fraction in [0, 1] and NaN on rounds without evaluation) and
``device_rounds`` (one row per selected device per round). For the timeline, ``device_rounds`` may carry
``t_start_s`` (when the device began computing) and ``t_arrive_s`` (when its upload arrived), both [s]: absolute
on the run's clock when the table has ``t_down_s`` (the job's dispatch, the round's start), which the timeline
subtracts, else relative to the round start; without them a device starts at 0 s and arrives at
``t_start_s + t_cmp_s + t_com_s``.

plotly.js is inlined once, so the page opens offline. ``build_figures`` returns the figures themselves, so
that a notebook (or a test) can inspect or restyle them.
"""

from __future__ import annotations

import html
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from edgefl.errors import EdgeflError
from edgefl.io import atomic_write_text
from edgefl.output.report_energy import energy_by_type, energy_by_type_figure, energy_by_type_table
from edgefl.output.report_marks import Words, crossing, draw_target, words_for
from edgefl.output.report_scale import group_energy, sample_timeline, thin_curve

__all__ = [
    "AXIS_TITLES",
    "FIGURE_KEYS",
    "ReportError",
    "build_figures",
    "build_report",
    "figures_page",
    "default_timeline_round",
    "find_straggler",
    "format_value",
    "summarize",
    "write_report",
]

#: Keys of the dict ``build_figures`` returns, in page order.
FIGURE_KEYS = (
    "accuracy_vs_time", "accuracy_vs_energy", "accuracy_vs_round", "timeline", "device_states", "device_energy",
    "energy_by_type",
)  # fmt: skip

GANTT_DEVICES = 10
"""Devices (the lowest ids with jobs) in the multi-round Gantt of device states."""

#: Axis title of each rounds.csv column a figure plots: the run report, ``edgefl plot`` and the sweep page.
AXIS_TITLES = {
    "round": "round",
    "sim_time_s": "simulated time [s]",
    "energy_cum_j": "cumulative energy, all devices [J]",
    "test_accuracy": "test accuracy [%]",
    "test_loss": "test loss",
    "train_loss": "train loss",
}

_ROUNDS_REQUIRED = ("round", "sim_time_s", "round_time_s", "energy_cum_j", "test_accuracy")
_DEVICE_REQUIRED = ("round", "device", "trained", "arrived", "t_cmp_s", "t_com_s", "e_cmp_j", "e_com_j")

_COLOURS = {
    "compute": "#1f77b4",
    "upload": "#ff7f0e",
    "compute (dropped)": "#9aa5b1",
    "upload (dropped)": "#c7b299",
    "waiting for the channel": "#d9d9d9",
    "waiting for the channel (dropped)": "#eeeeee",
    "packet error": "#7f3fbf",
    "straggler": "#d62728",
    "deadline": "#d62728",
    "round end": "#555555",
}
_TEMPLATE = "plotly_white"
PACKET_ERROR = "packet error"
"""The ``reason`` of a device whose upload was lost to packet errors (``[channel.packet_errors]``)."""


class ReportError(EdgeflError, ValueError):
    """The result tables or report options cannot be drawn; the message names the input and what was expected."""


# --------------------------------------------------------------------------------------------- public API


def build_figures(
    rounds: pd.DataFrame,
    device_rounds: pd.DataFrame,
    *,
    timeline_round: int | None = None,
    t_max_s: float | None = None,
    offline: Mapping[int, Sequence[tuple[float, float]]] | None = None,
    target_accuracy: float | None = None,
) -> dict[str, go.Figure]:
    """Build the report's figures, keyed by ``FIGURE_KEYS`` (plus ``"staleness"`` after them when the device
    table has a ``staleness`` column: an asynchronous run).

    ``timeline_round`` picks the round of the device timeline (default: ``default_timeline_round``);
    ``t_max_s`` [s] is the round deadline drawn as a dashed vertical line on the timeline (none if ``None``).
    ``offline`` maps a device to its offline intervals ``(start, end)`` [s], drawn on the Gantt of device states
    (:func:`edgefl.output.results.offline_periods` regenerates them from a run's availability schedule).
    ``target_accuracy`` (a fraction in (0, 1]) is drawn on the accuracy figures with the round that first reached it.
    Raises ``ReportError`` for a missing column, an unknown ``timeline_round`` or a bad ``t_max_s``.
    """
    rounds = _check_table(rounds, "rounds", _ROUNDS_REQUIRED)
    device_rounds = _check_table(device_rounds, "device_rounds", _DEVICE_REQUIRED)
    t_max_s = _check_t_max(t_max_s)
    if timeline_round is None:
        timeline_round = default_timeline_round(rounds, device_rounds)
    else:
        timeline_round = _check_round(timeline_round, rounds, device_rounds)

    evaluated = _evaluated_rounds(rounds)
    words = words_for("staleness" in device_rounds.columns)
    hit = crossing(evaluated, target_accuracy)
    curve = (evaluated, target_accuracy, hit, words)
    return {
        "accuracy_vs_time": _accuracy_figure(*curve, "sim_time_s", "Test accuracy vs simulated time"),
        "accuracy_vs_energy": _accuracy_figure(*curve, "energy_cum_j", "Test accuracy vs energy"),
        "accuracy_vs_round": _accuracy_figure(*curve, "round", f"Test accuracy vs {words.round}"),
        "timeline": _timeline_figure(rounds, device_rounds, timeline_round, t_max_s, words),
        "device_states": _states_figure(device_rounds, offline or {}),
        "device_energy": _device_energy_figure(device_rounds, words),
        "energy_by_type": energy_by_type_figure(energy_by_type(device_rounds), words.rounds),
        **({"staleness": _staleness_figure(device_rounds)} if "staleness" in device_rounds.columns else {}),
    }


def build_report(
    rounds: pd.DataFrame,
    device_rounds: pd.DataFrame,
    *,
    title: str,
    timeline_round: int | None = None,
    t_max_s: float | None = None,
    notes: Sequence[str] = (),
    offline: Mapping[int, Sequence[tuple[float, float]]] | None = None,
    settings: Sequence[tuple[str, str]] = (),
    target_accuracy: float | None = None,
    physics: str | None = None,
) -> str:
    """Return the report as one self-contained HTML page (plotly.js inlined once, no network needed).
    ``physics``: the line naming the run's physics, shown first under the title
    (:func:`edgefl.output.report_header.physics_line`; None: none);
    ``notes``: sentences about the run's setup shown under the title (e.g. its laptop-scale cost scaling);
    ``settings``: ``(label, value)`` rows of the header's settings table (:func:`edgefl.output.report_header.run_settings`);
    ``target_accuracy``: drawn on the accuracy figures, its crossing in the summary table."""
    if not isinstance(title, str):
        raise ReportError(f"title must be a str, got {type(title).__name__} {title!r}")
    figures = build_figures(rounds, device_rounds, timeline_round=timeline_round, t_max_s=t_max_s, offline=offline,
                            target_accuracy=target_accuracy)  # fmt: skip
    summary = summarize(rounds)
    words = words_for("staleness" in device_rounds.columns)
    intro = (
        '<p class="note">edgefl run report. Times and energies are simulated by the cost model '
        f"(not host time); test accuracy is shown on evaluated {words.rounds} only.</p>\n"
        + (f'<p class="note physics">{html.escape(physics)}</p>\n' if physics else "")
        + "".join(f'<p class="note">{html.escape(n)}</p>\n' for n in notes)
        + _settings_table(settings)
        + f"{_summary_table(summary, words, _target_row(rounds, target_accuracy, words))}"
    )
    after = {"energy_by_type": energy_by_type_table(energy_by_type(device_rounds))}
    return figures_page(title, {key: figures[key] for key in FIGURE_KEYS}, intro_html=intro, after_html=after)


def figures_page(
    title: str, figures: dict[str, go.Figure], *, intro_html: str = "", after_html: Mapping[str, str] | None = None
) -> str:
    """One self-contained HTML page: ``title``, ``intro_html`` (trusted markup), then each figure in order, each
    followed by ``after_html``'s markup for its key (trusted; e.g. a table of the figure's numbers).

    plotly.js is inlined once (the page opens offline); each figure's div id is ``edgefl-<key>`` so the same
    inputs give the same page. The run report, ``edgefl plot`` and sweep pages all use this layout.
    """
    sections = []
    for i, (key, fig) in enumerate(figures.items()):
        div = fig.to_html(
            full_html=False,
            include_plotlyjs=(i == 0),  # inline plotly.js once, in the first figure
            include_mathjax=False,
            div_id=f"edgefl-{key.replace('_', '-')}",  # fixed ids: the same run gives the same page
            default_width="100%",
            config={"displaylogo": False, "responsive": True},
        )
        extra = (after_html or {}).get(key, "")
        body = f"{div}\n{extra}" if extra else div
        sections.append(f'<section class="figure">\n{body}\n</section>')
    esc = html.escape(title)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{esc}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{esc}</h1>\n{intro_html}\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )


def write_report(
    path: str | os.PathLike[str], rounds: pd.DataFrame, device_rounds: pd.DataFrame, **options: Any
) -> Path:
    """Build the report with :func:`build_report` (``options`` are its keyword arguments: ``title``, ...) and
    write it atomically to ``path``; return the path."""
    return atomic_write_text(path, build_report(rounds, device_rounds, **options))


def summarize(rounds: pd.DataFrame) -> dict[str, Any]:
    """Headline numbers of a run.

    Returns ``rounds`` (number of rounds), ``final_accuracy`` / ``final_accuracy_round`` (last evaluated
    round), ``best_accuracy`` / ``best_accuracy_round`` (first round reaching the maximum), ``sim_time_s``
    (simulated clock at the end of the last round) [s] and ``energy_j`` (cumulative energy at the last round)
    [J]; a value that does not exist yet is ``None``.
    """
    rounds = _check_table(rounds, "rounds", _ROUNDS_REQUIRED)
    out: dict[str, Any] = {
        "rounds": 0,
        "final_accuracy": None,
        "final_accuracy_round": None,
        "best_accuracy": None,
        "best_accuracy_round": None,
        "sim_time_s": None,
        "energy_j": None,
    }
    if rounds.empty:
        return out
    by_round = rounds.assign(round=_numeric(rounds["round"])).sort_values("round", kind="stable")
    out["rounds"] = int(by_round["round"].nunique())
    last = by_round.iloc[-1]
    out["sim_time_s"] = _float_or_none(last["sim_time_s"])
    out["energy_j"] = _float_or_none(last["energy_cum_j"])
    evaluated = _evaluated_rounds(rounds)
    if not evaluated.empty:
        final = evaluated.iloc[-1]
        best = evaluated.loc[evaluated["test_accuracy"].idxmax()]
        out["final_accuracy"] = float(final["test_accuracy"])
        out["final_accuracy_round"] = int(final["round"])
        out["best_accuracy"] = float(best["test_accuracy"])
        out["best_accuracy_round"] = int(best["round"])
    return out


def default_timeline_round(rounds: pd.DataFrame, device_rounds: pd.DataFrame) -> int | None:
    """The round whose device timeline the report shows by default.

    The round with the largest ``round_time_s`` (the first one on ties), i.e. where a straggler mattered most;
    if no round has a round time, the last round with device rows; ``None`` if neither table has a round.
    """
    if not rounds.empty:
        times = _numeric(rounds["round_time_s"])
        if times.notna().any():
            return int(_numeric(rounds["round"]).loc[times.idxmax()])
    if not device_rounds.empty:
        return int(_numeric(device_rounds["round"]).max())
    return None


def find_straggler(device_rounds: pd.DataFrame, round_: int) -> int | None:
    """The straggler of round ``round_``: the arrived device whose upload arrived last.

    If no device arrived, the device with the latest arrival time among all that have one (it would have been
    the straggler). Ties go to the lowest device id. ``None`` if no device of that round has an arrival time.
    """
    device_rounds = _check_table(device_rounds, "device_rounds", _DEVICE_REQUIRED)
    rows = _phase_times(_round_rows(device_rounds, round_))
    timed = rows[rows["_arrive"].notna()]
    if timed.empty:
        return None
    arrived = timed[timed["_arrived"]]
    pool = arrived if not arrived.empty else timed
    return _device_id(pool.loc[pool["_arrive"].idxmax(), "device"])


# --------------------------------------------------------------------------------------------- validation


def _check_table(df: Any, name: str, required: tuple[str, ...]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ReportError(f"{name} must be a pandas.DataFrame, got {type(df).__name__}")
    if df.empty and len(df.columns) == 0:
        return pd.DataFrame(columns=list(required))
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ReportError(f"{name} is missing column(s) {missing}; the report needs at least {list(required)}")
    for col in ("round", "device"):
        if col in required and _numeric(df[col]).isna().any():
            bad = df.loc[_numeric(df[col]).isna(), col].iloc[0]
            raise ReportError(f"{name}.{col} must be an integer on every row, got {bad!r}")
    return df.reset_index(drop=True)


def _check_t_max(t_max_s: float | None) -> float | None:
    if t_max_s is None:
        return None
    try:
        value = float(t_max_s)
    except (TypeError, ValueError):
        raise ReportError(f"t_max_s must be a number of seconds, got {t_max_s!r}") from None
    if not math.isfinite(value) or value <= 0.0:
        raise ReportError(f"t_max_s must be finite and > 0 [s], got {t_max_s!r}")
    return value


def _check_round(timeline_round: Any, rounds: pd.DataFrame, device_rounds: pd.DataFrame) -> int:
    present = pd.concat([_numeric(rounds["round"]), _numeric(device_rounds["round"])]).dropna()
    known = sorted({int(r) for r in present})
    is_int = isinstance(timeline_round, numbers.Integral) and not isinstance(timeline_round, bool)
    if not is_int or int(timeline_round) not in known:
        span = f"{known[0]}..{known[-1]}" if known else "none (the tables are empty)"
        raise ReportError(f"timeline_round={timeline_round!r} is not a round of this run; rounds present: {span}")
    return int(timeline_round)


# --------------------------------------------------------------------------------------------- table helpers


def _numeric(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce").astype(float)


def _as_bool(series: pd.Series) -> pd.Series:
    """Booleans as written by pandas or read back from CSV ("True"/"False", 1/0); missing is False."""
    if series.dtype == bool:
        return series

    def convert(value: Any) -> bool:
        if isinstance(value, str):
            return value.strip().lower() in {"true", "1", "yes"}
        if pd.isna(value):
            return False
        return bool(value)

    return series.map(convert).astype(bool)


def _float_or_none(value: Any) -> float | None:
    number = pd.to_numeric(value, errors="coerce")
    return None if pd.isna(number) else float(number)


def _device_id(value: Any) -> int:
    return int(float(value))


def _device_label(value: Any) -> str:
    return f"device {_device_id(value)}"


def _evaluated_rounds(rounds: pd.DataFrame) -> pd.DataFrame:
    """Rounds with a test accuracy, sorted by round; numeric columns as float."""
    df = rounds.copy()
    for col in ("round", "sim_time_s", "energy_cum_j", "test_accuracy"):
        df[col] = _numeric(df[col])
    df["test_loss"] = _numeric(df["test_loss"]) if "test_loss" in df.columns else math.nan
    return df[df["test_accuracy"].notna()].sort_values("round", kind="stable").reset_index(drop=True)


def _round_rows(device_rounds: pd.DataFrame, round_: int) -> pd.DataFrame:
    rows = device_rounds[_numeric(device_rounds["round"]) == round_].copy()
    rows["_device"] = _numeric(rows["device"])
    return rows.sort_values("_device", kind="stable").reset_index(drop=True)


def _phase_times(rows: pd.DataFrame) -> pd.DataFrame:
    """Add ``_start``, ``_cmp_end``, ``_up_start``, ``_arrive`` [s from round start], ``_trained`` and ``_arrived``.

    Devices that did not train get NaN times. A device's upload starts when it has computed and, under TDMA,
    waited ``t_wait_s`` for the channel. A trained device without ``t_arrive_s`` arrives at its upload start +
    ``t_com_s``.
    """
    rows = rows.copy()
    trained = _as_bool(rows["trained"])
    start = _numeric(rows["t_start_s"]) if "t_start_s" in rows.columns else pd.Series(0.0, index=rows.index)
    arrive = _numeric(rows["t_arrive_s"]) if "t_arrive_s" in rows.columns else pd.Series(math.nan, index=rows.index)
    if "t_down_s" in rows.columns:  # absolute times: from the round's dispatch
        offset = _numeric(rows["t_down_s"]).min()
        offset = 0.0 if pd.isna(offset) else offset
        start, arrive = start - offset, arrive - offset
    start = start.fillna(0.0)
    cmp_end = start + _numeric(rows["t_cmp_s"])
    up_start = cmp_end + _numeric(rows["t_wait_s"]).fillna(0.0) if "t_wait_s" in rows.columns else cmp_end
    arrive = arrive.fillna(up_start + _numeric(rows["t_com_s"]))
    rows["_trained"] = trained
    rows["_arrived"] = _as_bool(rows["arrived"]) & trained
    rows["_start"] = start.where(trained)
    rows["_cmp_end"] = cmp_end.where(trained)
    rows["_up_start"] = up_start.where(trained)
    rows["_arrive"] = arrive.where(trained)
    return rows


# --------------------------------------------------------------------------------------------- figures


def _placeholder(fig: go.Figure, text: str) -> None:
    fig.add_annotation(
        text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 16, "color": "#888"}
    )


def format_value(value: Any, spec: str, unit: str = "") -> str:
    """``value`` in the format ``spec`` followed by ``unit`` (``format_value(1.5, ".4g", " s")`` is
    ``"1.5 s"``), or ``"n/a"`` when it is missing: ``None``, NaN or not a number."""
    number = _float_or_none(value)
    return "n/a" if number is None else f"{number:{spec}}{unit}"


def _accuracy_figure(
    evaluated: pd.DataFrame, target: float | None, hit: pd.Series | None, words: Words, x_col: str, title: str
) -> go.Figure:
    fig = go.Figure()
    if evaluated.empty:
        _placeholder(fig, "no evaluation yet")
    else:
        evaluated, thinned = thin_curve(evaluated, [] if hit is None else [int(hit["round"])])
        title += f" ({thinned})" if thinned else ""
        hover = [
            f"{words.round} {int(r['round'])}<br>test accuracy {r['test_accuracy']:.2%}<br>"
            f"test loss {format_value(r['test_loss'], '.4f')}<br>"
            f"simulated time {format_value(r['sim_time_s'], '.4g', ' s')}<br>"
            f"cumulative energy {format_value(r['energy_cum_j'], '.4g', ' J')}"
            for _, r in evaluated.iterrows()
        ]
        x = [int(v) for v in evaluated[x_col]] if x_col == "round" else [float(v) for v in evaluated[x_col]]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[float(v) for v in evaluated["test_accuracy"]],
                mode="lines+markers",
                name="test accuracy",
                hovertext=hover,
                hoverinfo="text",
            )
        )
    if target is not None:
        draw_target(fig, x_col, target, [("", hit)], words)
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        xaxis_title=words.round if x_col == "round" else AXIS_TITLES[x_col],
        yaxis={"title": AXIS_TITLES["test_accuracy"], "tickformat": ".0%"},
        showlegend=False,
    )
    return fig


def _timeline_figure(
    rounds: pd.DataFrame, device_rounds: pd.DataFrame, round_: int | None, t_max_s: float | None, words: Words
) -> go.Figure:
    """Device timeline of round ``round_``: each device's phases [s since round start], the straggler, the deadline
    ``t_max_s`` [s] and the round's end; a placeholder when there is no such round or no device rows."""
    fig = go.Figure()
    fig.update_layout(
        template=_TEMPLATE,
        xaxis_title=f"time since {words.round} start [s]",
        yaxis_title="device",
        barmode="overlay",
        legend={"orientation": "h", "y": -0.2},
    )
    if round_ is None:
        fig.update_layout(title="Device timeline")
        _placeholder(fig, f"no {words.rounds} yet")
        return fig
    rows = _phase_times(_round_rows(device_rounds, round_))
    if rows.empty:
        fig.update_layout(title=f"Device timeline, {words.round} {round_}")
        _placeholder(fig, f"no device rows for {words.round} {round_}")
        return fig
    straggler = find_straggler(device_rounds, round_)
    rows, sampled = sample_timeline(rows, [] if straggler is None else [straggler])

    labels = [_device_label(d) for d in rows["device"]]
    rows["_label"] = labels
    _add_phase_bars(fig, rows[rows["_trained"]])
    _add_idle_markers(fig, rows[~rows["_trained"]])
    _add_packet_error_marks(fig, rows[rows["_trained"]])

    title = f"Device timeline, {words.round} {round_}"
    if straggler is not None:
        title += _mark_straggler(fig, rows, straggler, words)
    if sampled:
        title += f"<br><sup>{sampled}</sup>"

    if t_max_s is not None:
        _vline(fig, t_max_s, "deadline", "dash", f"deadline {t_max_s:.4g} s", top=True)
    round_time = _round_time(rounds, round_)
    if round_time is not None:
        _vline(fig, round_time, "round end", "dot", f"{words.round} end {round_time:.4g} s", top=False)

    fig.update_layout(
        title=title,
        height=max(320, 140 + 28 * len(labels)),
        yaxis={"categoryorder": "array", "categoryarray": labels, "autorange": "reversed"},
    )
    return fig


def _add_phase_bars(fig: go.Figure, trained: pd.DataFrame) -> None:
    """Horizontal bars of the compute and upload phases [s since round start] of the devices that trained, and
    under TDMA their wait for the channel between the two; the phases of devices whose upload was dropped (late,
    or lost to packet errors) are hatched and named "<phase> (dropped)"."""
    waits = bool((trained["_up_start"] > trained["_cmp_end"]).any())
    phases = (("compute", "_start", "_cmp_end"), ("waiting for the channel", "_cmp_end", "_up_start"),
              ("upload", "_up_start", "_arrive")) if waits else (("compute", "_start", "_cmp_end"),
                                                                  ("upload", "_cmp_end", "_arrive"))  # fmt: skip
    for phase, lo, hi in phases:
        for dropped in (False, True):
            part = trained[(~trained["_arrived"] if dropped else trained["_arrived"]) & trained[hi].notna()]
            if part.empty:
                continue
            name = f"{phase} (dropped)" if dropped else phase
            hover = [
                f"{r['_label']}: {phase}<br>{r[lo]:.4g} s to {r[hi]:.4g} s ({r[hi] - r[lo]:.4g} s)<br>"
                + (_dropped_why(r) if dropped else "arrived") + _device_details(r)
                for _, r in part.iterrows()
            ]
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    name=name,
                    y=list(part["_label"]),
                    base=[float(v) for v in part[lo]],
                    x=[float(v) for v in part[hi] - part[lo]],
                    marker={
                        "color": _COLOURS[name],
                        "pattern": {"shape": "/" if dropped else ""},
                    },
                    hovertext=hover,
                    hoverinfo="text",
                )
            )


def _dropped_why(row: pd.Series) -> str:
    """Why a trained device's update did not count, for a hover text."""
    reason = row["reason"] if "reason" in row.index else None
    return "lost to packet errors" if reason == PACKET_ERROR else "dropped (late)"


def _add_packet_error_marks(fig: go.Figure, trained: pd.DataFrame) -> None:
    """A cross at the end of each upload lost to packet errors [s since round start], with how many times it was
    sent (``uploads``) in its hover text."""
    if "reason" not in trained.columns:
        return
    lost = trained[trained["reason"] == PACKET_ERROR]
    if lost.empty:
        return
    sent = lost["uploads"] if "uploads" in lost.columns else pd.Series(math.nan, index=lost.index)
    fig.add_trace(
        go.Scatter(
            name=PACKET_ERROR,
            x=[float(v) for v in lost["_arrive"]],
            y=list(lost["_label"]),
            mode="markers",
            marker={"symbol": "x-thin-open", "size": 12, "color": _COLOURS[PACKET_ERROR], "line": {"width": 2}},
            hovertext=[f"{r['_label']}: upload lost to packet errors at {r['_arrive']:.4g} s"
                       + ("" if pd.isna(n) else f" after {int(n)} attempt(s)") for (_, r), n in zip(lost.iterrows(), sent)],
            hoverinfo="text",
        )
    )


def _add_idle_markers(fig: go.Figure, idle: pd.DataFrame) -> None:
    """A cross at time 0 for each device that did not train, the reason in its hover text."""
    if idle.empty:
        return
    fig.add_trace(
        go.Scatter(
            name="did not train",
            x=[0.0] * len(idle),
            y=list(idle["_label"]),
            mode="markers",
            marker={"symbol": "x", "size": 10, "color": "#888"},
            hovertext=[f"{r['_label']}: did not train ({_reason(r)})" for _, r in idle.iterrows()],
            hoverinfo="text",
        )
    )


def _mark_straggler(fig: go.Figure, rows: pd.DataFrame, straggler: int, words: Words) -> str:
    """A star and an annotation at the straggler's upload arrival time [s]; returns the title's suffix naming it."""
    row = rows[rows["_device"] == straggler].iloc[0]
    label = _device_label(straggler)
    status = "arrived" if row["_arrived"] else "dropped (late); nobody arrived"
    fig.add_trace(
        go.Scatter(
            name=words.straggler,
            x=[float(row["_arrive"])],
            y=[label],
            mode="markers",
            marker={"symbol": "star", "size": 14, "color": _COLOURS["straggler"]},
            hovertext=[f"{words.straggler}: {label}<br>upload arrived at {row['_arrive']:.4g} s<br>{status}"],
            hoverinfo="text",
        )
    )
    fig.add_annotation(x=float(row["_arrive"]), y=label, text=f"{words.straggler} ({label})", showarrow=True,
                       ax=40, ay=-25)  # fmt: skip
    return f" ({words.straggler}: {label})"


_DETAILS = (
    ("width", "width {:.3g}", 1.0), ("cpu_hz", "CPU {:.3g} GHz", 1e9), ("rate_bps", "rate {:.3g} Mbit/s", 1e6),
    ("bandwidth_hz", "band {:.3g} MHz", 1e6), ("tx_power_w", "power {:.3g} mW", 1e-3),
)  # fmt: skip
"""The job's knobs a timeline bar's hover shows: (column, text, unit [SI per shown unit]); the allocated CPU
frequency, sub-band and transmit power among them (``channel.allocation``)."""


def _device_details(row: pd.Series) -> str:
    parts = []
    for col, text, unit in _DETAILS:
        value = _float_or_none(row[col]) if col in row.index else None
        if value is not None:
            parts.append(text.format(value / unit))
    return "<br>" + ", ".join(parts) if parts else ""


def _reason(row: pd.Series) -> str:
    reason = row["reason"] if "reason" in row.index else None
    return "no reason recorded" if reason is None or pd.isna(reason) or str(reason) == "" else str(reason)


def _round_time(rounds: pd.DataFrame, round_: int) -> float | None:
    match = rounds[_numeric(rounds["round"]) == round_]
    return None if match.empty else _float_or_none(match["round_time_s"].iloc[0])


def _vline(fig: go.Figure, x: float, name: str, dash: str, text: str, *, top: bool) -> None:
    """A named vertical line at ``x`` [s]; its label above the plot (``top``) or just inside its bottom edge."""
    colour = _COLOURS[name]
    fig.add_shape(
        type="line", name=name, x0=x, x1=x, xref="x", y0=0, y1=1, yref="paper", line={"dash": dash, "color": colour}
    )
    fig.add_annotation(
        x=x, y=1.0 if top else 0.0, xref="x", yref="paper", text=text, showarrow=False,
        yanchor="bottom", xanchor="center" if top else "left", font={"color": colour},
    )


def gantt_devices(device_rounds: pd.DataFrame) -> list[int]:
    """The devices the Gantt of device states shows: the :data:`GANTT_DEVICES` lowest ids with a planned job."""
    if device_rounds.empty or "device" not in device_rounds.columns:
        return []
    rows = device_rounds[_as_bool(device_rounds["feasible"])] if "feasible" in device_rounds.columns else device_rounds
    return [int(d) for d in sorted(_numeric(rows["device"]).dropna().unique())[:GANTT_DEVICES]]


def _states_figure(device_rounds: pd.DataFrame, offline: Mapping[int, Sequence[tuple[float, float]]]) -> go.Figure:
    """Gantt of the first :data:`GANTT_DEVICES` devices' jobs over the whole run [s, absolute]: offline periods
    (``offline``, device -> intervals [s]), download [t_down, t_start), compute [t_start, t_start + t_cmp),
    under TDMA the wait for the channel (``t_wait_s``), upload [.., t_end); idle between them."""
    fig = go.Figure()
    fig.update_layout(
        title=f"Device states over the run (first {GANTT_DEVICES} devices)", template=_TEMPLATE,
        xaxis_title="simulated time [s]", yaxis_title="device", barmode="overlay", legend={"orientation": "h", "y": -0.2},
    )  # fmt: skip
    needed = ("t_down_s", "t_start_s", "t_end_s")
    if device_rounds.empty or any(c not in device_rounds.columns for c in needed):
        _placeholder(fig, "no absolute job times in this table")
        return fig
    rows = device_rounds[_as_bool(device_rounds["feasible"])] if "feasible" in device_rounds.columns else device_rounds
    dev = _numeric(rows["device"])
    first = gantt_devices(device_rounds)
    rows = rows[dev.isin(first)]
    down, start, end = (_numeric(rows[c]) for c in needed)
    cmp_end = (start + _numeric(rows["t_cmp_s"])).clip(upper=end)
    phases = [("download", down, start, "#2ca02c"), ("compute", start, cmp_end, _COLOURS["compute"])]
    if "t_wait_s" in rows.columns:  # TDMA: the wait for the channel, then the upload
        up_start = (cmp_end + _numeric(rows["t_wait_s"]).fillna(0.0)).clip(upper=end)
        phases.append(("waiting for the channel", cmp_end, up_start, _COLOURS["waiting for the channel"]))
    else:
        up_start = cmp_end
    phases.append(("upload", up_start, end, _COLOURS["upload"]))
    labels = [_device_label(d) for d in rows["device"]]
    periods = [(_device_label(d), a, b) for d in first for a, b in offline.get(d, ())]
    if periods:
        fig.add_trace(go.Bar(
            name="offline", orientation="h", y=[p[0] for p in periods], base=[p[1] for p in periods],
            x=[p[2] - p[1] for p in periods], marker={"color": "#c7c7c7"}, hoverinfo="text",
            hovertext=[f"{lab}: offline {a:.4g} s to {b:.4g} s" for lab, a, b in periods],
        ))  # fmt: skip
    for phase, lo, hi, colour in phases:
        fig.add_trace(go.Bar(
            name=phase, orientation="h", y=labels, base=lo.tolist(), x=(hi - lo).clip(lower=0).tolist(),
            marker={"color": colour}, hovertext=[f"{lab}: {phase} {a:.4g} s to {b:.4g} s" for lab, a, b in zip(labels, lo, hi)],
            hoverinfo="text",
        ))  # fmt: skip
    if "reason" in rows.columns:
        lost = rows["reason"].astype(str) == "offline"
        if lost.any():
            fig.add_trace(go.Scatter(
                name="lost (offline)", mode="markers", x=end[lost].tolist(), y=[lab for lab, m in zip(labels, lost) if m],
                marker={"symbol": "x", "size": 10, "color": "#d62728"},
            ))  # fmt: skip
    fig.update_yaxes(categoryorder="array", categoryarray=[_device_label(d) for d in first])
    return fig


def _staleness_figure(device_rounds: pd.DataFrame) -> go.Figure:
    """How many aggregated updates had each staleness (server updates between download and aggregation)."""
    fig = go.Figure()
    fig.update_layout(title="Staleness of the aggregated updates", template=_TEMPLATE,
                      xaxis_title="staleness [server updates]", yaxis_title="updates")  # fmt: skip
    tau = _numeric(device_rounds["staleness"]).dropna()
    if tau.empty:
        _placeholder(fig, "no update aggregated yet")
        return fig
    counts = tau.astype(int).value_counts().sort_index()
    fig.add_trace(go.Bar(name="updates", x=counts.index.tolist(), y=counts.tolist(), marker={"color": _COLOURS["compute"]}))
    return fig


def _device_energy_figure(device_rounds: pd.DataFrame, words: Words) -> go.Figure:
    """Energy per device summed over all its rows [J]: what the simulator charged (NaN counts as 0 J); above
    :data:`edgefl.output.report_scale.ENERGY_DEVICES` devices, group means (:func:`edgefl.output.report_scale.group_energy`)."""
    fig = go.Figure()
    fig.update_layout(
        title=f"Energy per device, all {words.rounds}",
        template=_TEMPLATE,
        xaxis_title="device",
        yaxis_title="energy [J]",
        barmode="stack",
    )
    if device_rounds.empty:
        _placeholder(fig, "no device rows yet")
        return fig
    df = pd.DataFrame(
        {
            "device": _numeric(device_rounds["device"]),
            "trained": _as_bool(device_rounds["trained"]),
            "compute": _numeric(device_rounds["e_cmp_j"]),
            "upload": _numeric(device_rounds["e_com_j"]),
        }
    )
    devices = sorted(df["device"].dropna().unique())
    sums = df.groupby("device")[["compute", "upload"]].sum(min_count=0).reindex(devices, fill_value=0.0)
    counts = df[df["trained"]].groupby("device").size().reindex(devices, fill_value=0)
    labels, bars, details, grouped = group_energy(sums, counts, words.round)
    if grouped:
        fig.update_layout(title=f"Energy per device, all {words.rounds}<br><sup>{grouped}</sup>",
                          xaxis_title="devices, by total energy [share of the fleet]")  # fmt: skip
    for phase in ("compute", "upload"):
        fig.add_trace(
            go.Bar(
                name=phase,
                x=labels,
                y=[float(v) for v in bars[phase]],
                marker={"color": _COLOURS[phase]},
                hovertext=[
                    f"{label}<br>{phase} energy {value:.4g} J<br>{detail}"
                    for label, value, detail in zip(labels, bars[phase], details)
                ],
                hoverinfo="text",
            )
        )
    fig.update_xaxes(categoryorder="array", categoryarray=labels)
    return fig


# --------------------------------------------------------------------------------------------- page


_CSS = (
    "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1100px;"
    "padding:0 1rem;color:#222}h1{margin-bottom:.2rem}.note{color:#666;margin-top:0}"
    "table.summary{border-collapse:collapse;margin:1rem 0}table.summary th,table.summary td{border:1px solid #ddd;"
    "padding:.3rem .8rem;text-align:left}table.summary th{background:#f4f4f4;font-weight:600}"
    "section.figure{margin:1.5rem 0}"
)


def _settings_table(settings: Sequence[tuple[str, str]]) -> str:
    """The header's table of the run's settings (none when ``settings`` is empty)."""
    if not settings:
        return ""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in settings)
    return f'<table class="summary settings">{body}</table>'


def _target_row(rounds: pd.DataFrame, target: float | None, words: Words) -> tuple[str, str] | None:
    """The summary table's row for the target accuracy (``None`` without a target)."""
    if target is None:
        return None
    hit = crossing(_evaluated_rounds(rounds), target)
    if hit is None:
        return (f"target {target:.2%}", "not reached")
    return (f"target {target:.2%}", f"reached at {words.round} {int(hit['round'])}: "
            f"{float(hit['sim_time_s']):.4g} s, {float(hit['energy_cum_j']):.4g} J")  # fmt: skip


def _summary_table(summary: dict[str, Any], words: Words, target_row: tuple[str, str] | None = None) -> str:
    def accuracy(key: str) -> str:
        value = summary[f"{key}_accuracy"]
        return ("no evaluation yet" if value is None
                else f"{value:.2%} ({words.round} {summary[f'{key}_accuracy_round']})")  # fmt: skip

    rows = [
        (words.rounds, str(summary["rounds"])),
        ("final test accuracy", accuracy("final")),
        ("best test accuracy", accuracy("best")),
        ("total simulated time", format_value(summary["sim_time_s"], ".4g", " s")),
        ("total energy, all devices", format_value(summary["energy_j"], ".4g", " J")),
        *([target_row] if target_row is not None else []),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="summary">{body}</table>'
