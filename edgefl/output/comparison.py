"""Overlay of several runs in one HTML page: ``edgefl plot RUN_DIR [RUN_DIR ...]`` (docs/outputs.md).

A run directory is what :func:`edgefl.output.results.write_run` writes; the overlay reads two of its files:

- ``summary.json``: ``name``, ``method`` and ``seed`` label the run (``complete`` is shown when present;
  ``target_accuracy``, when the run had one, is drawn with the round where the run first reached it);
- ``rounds.csv``: ``round``, ``sim_time_s`` [s], ``energy_cum_j`` [J] and at least one of ``test_accuracy``
  (a fraction in [0, 1], empty on rounds without evaluation), ``test_loss``, ``train_loss``.

The page has three figures, one trace per run in each: test accuracy vs simulated time, vs cumulative energy and
vs round, on evaluated rounds only. If no run has a test accuracy (a run with ``learning = "surrogate"`` may
record only a loss), the figures show ``test_loss`` instead, or ``train_loss`` if no run has a test loss; the
y-axis title says which. Traces are labelled ``"<name> (<method>, seed <seed>)"``; labels that collide get the
run directory's name appended (then ``#1``, ``#2``, ... if they still collide).
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from edgefl.errors import EdgeflError
from edgefl.io import atomic_write_text
from edgefl.output.report import AXIS_TITLES, format_value
from edgefl.output.report_marks import SYNC_WORDS, crossing, draw_target

__all__ = [
    "FIGURE_KEYS",
    "METRICS",
    "OverlayError",
    "RunData",
    "overlay_figures",
    "overlay_page",
    "plotted_metric",
    "read_run",
    "run_labels",
    "write_overlay",
]

#: Keys of the dict ``overlay_figures`` returns, in page order (the names stay when a loss is plotted).
FIGURE_KEYS = ("accuracy_vs_time", "accuracy_vs_energy", "accuracy_vs_round")

#: Quantities the y-axis can show, in order of preference: the first one any run has a value of is plotted.
METRICS = ("test_accuracy", "test_loss", "train_loss")

_X_COLUMNS = ("round", "sim_time_s", "energy_cum_j")  # must be a number on every row of rounds.csv
_X_AXES = {  # figure key -> (rounds.csv column, title suffix)
    "accuracy_vs_time": ("sim_time_s", "vs simulated time"),
    "accuracy_vs_energy": ("energy_cum_j", "vs energy"),
    "accuracy_vs_round": ("round", "vs round"),
}
_TICK_FORMATS = {"test_accuracy": ".0%", "test_loss": "", "train_loss": ""}  # metric -> y tick format
_TEMPLATE = "plotly_white"
# the floats exactly as written: pandas < 3 needs "round_trip" (its default may differ in the last bit); pandas 3
# parses exactly by default and deprecates the argument
_EXACT_FLOATS: dict[str, Any] = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}
_RUN_HINT = "expected a run directory written by `edgefl run`"


class OverlayError(EdgeflError, ValueError):
    """A run directory cannot be read or the runs cannot be overlaid; the message names the path and the problem."""


@dataclass(frozen=True, kw_only=True)
class RunData:
    """One run as the overlay needs it. ``path``: the run directory as given; ``rounds``: ``rounds.csv`` with
    ``round``, ``sim_time_s``, ``energy_cum_j`` and the metric columns present converted to float (NaN where a
    metric was not recorded); ``complete``: from summary.json, ``None`` if it is not recorded."""

    path: Path
    name: str
    method: str
    seed: Any
    complete: bool | None
    rounds: pd.DataFrame
    target_accuracy: float | None = None

    @property
    def label(self) -> str:
        """``"<name> (<method>, seed <seed>)"``, as in the run's own report title."""
        return f"{self.name} ({self.method}, seed {self.seed})"


# --------------------------------------------------------------------------------------------- reading


def read_run(path: str | os.PathLike[str]) -> RunData:
    """Read the summary and the rounds table of one run directory.

    Raises :class:`OverlayError` naming the path when it is not a directory, ``summary.json`` or ``rounds.csv``
    is missing or unreadable, a summary key (``name``, ``method``, ``seed``) or a column is missing, or a
    column holds something other than numbers.
    """
    run_dir = Path(path)
    where = f"run directory {str(run_dir)!r}"
    if not run_dir.exists():
        raise OverlayError(f"{where}: no such directory; {_RUN_HINT}")
    if not run_dir.is_dir():
        raise OverlayError(f"{where}: not a directory; {_RUN_HINT}")
    missing = [name for name in ("summary.json", "rounds.csv") if not (run_dir / name).is_file()]
    if len(missing) == 2:
        raise OverlayError(f"{where}: not an edgefl run directory (no summary.json, no rounds.csv); {_RUN_HINT}")
    if missing:
        raise OverlayError(f"{where}: {missing[0]} is missing; {_RUN_HINT}")
    summary = _read_summary(run_dir / "summary.json")
    complete = summary.get("complete")
    return RunData(
        path=run_dir,
        name=str(summary["name"]),
        method=str(summary["method"]),
        seed=summary["seed"],
        complete=None if complete is None else bool(complete),
        rounds=_read_rounds(run_dir / "rounds.csv"),
        target_accuracy=_target_of(summary),
    )


def _target_of(summary: dict[str, Any]) -> float | None:
    """The run's target accuracy from its summary (``None`` if it had none or the value is not a fraction)."""
    value = summary.get("target_accuracy")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return None
    return float(value)


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OverlayError(f"{str(path)!r}: cannot read the run summary: {exc}") from None
    if not isinstance(summary, dict):
        raise OverlayError(f"{str(path)!r}: expected a JSON object, got {type(summary).__name__}")
    missing = [key for key in ("name", "method", "seed") if key not in summary]
    if missing:
        raise OverlayError(f"{str(path)!r}: missing key(s) {', '.join(missing)}; a run summary has name, method, seed")
    return summary


def _read_rounds(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path, **_EXACT_FLOATS)
    except pd.errors.EmptyDataError:
        raise OverlayError(f"{str(path)!r}: empty file; expected a header with {', '.join(_X_COLUMNS)}") from None
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise OverlayError(f"{str(path)!r}: cannot read: {' '.join(str(exc).split())}") from None
    missing = [col for col in _X_COLUMNS if col not in raw.columns]
    if missing:
        raise OverlayError(f"{str(path)!r}: missing column(s) {', '.join(missing)}; the overlay needs "
                           f"{', '.join(_X_COLUMNS)} and one of {', '.join(METRICS)}")  # fmt: skip
    metrics = [col for col in METRICS if col in raw.columns]
    if not metrics:
        raise OverlayError(f"{str(path)!r}: no column {' or '.join(METRICS)}; nothing to plot against")
    out = pd.DataFrame(index=raw.index)
    for col in (*_X_COLUMNS, *metrics):
        values = pd.to_numeric(raw[col], errors="coerce").astype(float)
        bad = ~values.map(math.isfinite)
        if col not in _X_COLUMNS:
            bad &= raw[col].notna()  # a metric may be empty (not evaluated that round)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise OverlayError(
                f"{str(path)!r} data row {row + 1}: {col}={_cell(raw[col].iloc[row])}: must be a finite number"
            )
        fractional = values % 1 != 0
        if col == "round" and fractional.any():
            row = int(fractional.to_numpy().nonzero()[0][0])
            cell = _cell(raw[col].iloc[row])
            raise OverlayError(f"{str(path)!r} data row {row + 1}: round={cell}: must be an integer")
        out[col] = values
    return out.sort_values("round", kind="stable").reset_index(drop=True)


def _cell(value: Any) -> str:
    """A CSV cell for a message: text quoted, numbers plain, a missing cell as (empty)."""
    if isinstance(value, str):
        return repr(value)
    return "(empty)" if pd.isna(value) else repr(float(value))


# --------------------------------------------------------------------------------------------- figures


def plotted_metric(runs: Sequence[RunData]) -> str:
    """The ``rounds.csv`` column the overlay plots: the first of :data:`METRICS` that any run has a value of.

    Raises :class:`OverlayError` if no run has a value of any of them.
    """
    for metric in METRICS:
        if any(metric in run.rounds.columns and run.rounds[metric].notna().any() for run in runs):
            return metric
    raise OverlayError(f"none of the runs has a value of {', '.join(METRICS)} yet; nothing to plot")


def run_labels(runs: Sequence[RunData]) -> list[str]:
    """Trace labels, one per run, all distinct: :attr:`RunData.label`; labels that collide get the run
    directory's name appended, and ``#1``, ``#2``, ... (in argument order) if they still collide."""
    labels = [run.label for run in runs]
    counts = Counter(labels)
    labels = [
        f"{label} [{run.path.resolve().name}]" if counts[label] > 1 else label for label, run in zip(labels, runs)
    ]
    counts, seen = Counter(labels), Counter()
    out = []
    for label in labels:
        if counts[label] > 1:
            seen[label] += 1
            label = f"{label} #{seen[label]}"
        out.append(label)
    return out


def overlay_figures(runs: Sequence[RunData]) -> dict[str, go.Figure]:
    """The overlay's figures keyed by :data:`FIGURE_KEYS`, one trace per run (in argument order) in each.

    A trace holds the run's rounds where :func:`plotted_metric` has a value (for accuracy: the evaluated
    rounds), sorted by round; a run without such rounds gets an empty trace (it stays in the legend).
    """
    runs = list(runs)
    if not runs:
        raise OverlayError("no runs to overlay; give at least one run directory")
    metric = plotted_metric(runs)
    y_title, tick_format = AXIS_TITLES[metric], _TICK_FORMATS[metric]
    y_name = y_title.split(" [")[0]
    labels = run_labels(runs)
    figures = {}
    for key in FIGURE_KEYS:
        x_col, suffix = _X_AXES[key]
        fig = go.Figure()
        for run, label in zip(runs, labels):
            points = _points(run, metric)
            x = [int(v) for v in points["round"]] if x_col == "round" else [float(v) for v in points[x_col]]
            y = [float(v) for v in points[metric]]
            fig.add_trace(
                go.Scatter(
                    x=x, y=y, name=label, mode="lines+markers",
                    hovertext=[_hover(label, row, metric) for _, row in points.iterrows()], hoverinfo="text",
                )  # fmt: skip
            )
        fig.update_layout(
            title=f"{y_name.capitalize()} {suffix}",
            template=_TEMPLATE,
            xaxis_title=AXIS_TITLES[x_col],
            yaxis={"title": y_title, "tickformat": tick_format},
            showlegend=True,
            legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0.0},
        )
        if metric == "test_accuracy":
            _draw_targets(fig, x_col, runs, labels)
        figures[key] = fig
    return figures


def _draw_targets(fig: go.Figure, x_col: str, runs: list[RunData], labels: list[str]) -> None:
    """Each target accuracy the runs had, with the point where each of its runs first reached it."""
    for target in sorted({run.target_accuracy for run in runs if run.target_accuracy is not None}):
        hits = [
            (label, crossing(run.rounds, target)) for run, label in zip(runs, labels) if run.target_accuracy == target
        ]
        draw_target(fig, x_col, target, hits, SYNC_WORDS)


def _points(run: RunData, metric: str) -> pd.DataFrame:
    """The run's rounds where ``metric`` has a value (none if the run did not record it)."""
    if metric not in run.rounds.columns:
        return run.rounds.iloc[0:0].assign(**{metric: pd.Series(dtype=float)})
    return run.rounds[run.rounds[metric].notna()]


def _words(metric: str) -> str:
    return metric.replace("_", " ")


def _value_text(metric: str, value: float) -> str:
    return f"{value:.2%}" if metric == "test_accuracy" else f"{value:.4g}"


def _hover(label: str, row: pd.Series, metric: str) -> str:
    return (
        f"{html.escape(label)}<br>round {int(row['round'])}<br>{_words(metric)} {_value_text(metric, row[metric])}<br>"
        f"simulated time {row['sim_time_s']:.4g} s<br>cumulative energy {row['energy_cum_j']:.4g} J"
    )


# --------------------------------------------------------------------------------------------- page


def overlay_page(runs: Sequence[RunData], *, title: str | None = None) -> str:
    """The overlay as one self-contained HTML page (:func:`edgefl.output.report.figures_page`): a table of the runs,
    then the figures of :func:`overlay_figures`. ``title`` defaults to ``"edgefl overlay of N run(s)"``."""
    from edgefl.output.report import figures_page

    runs = list(runs)
    figures = overlay_figures(runs)
    if title is None:
        title = f"edgefl overlay of {len(runs)} run{'s' if len(runs) != 1 else ''}"
    elif not isinstance(title, str):
        raise OverlayError(f"title must be a str, got {type(title).__name__} {title!r}")
    metric = plotted_metric(runs)
    note = ""
    if metric != "test_accuracy":
        note = f" No run has a test accuracy, so the figures show the {_words(metric)}."
    intro = (
        '<p class="note">Runs overlaid by edgefl. Times and energies are simulated by the cost model (not host '
        f"time); each curve shows the rounds with a recorded value only.{html.escape(note)}</p>\n"
        f"{_runs_table(runs, metric)}"
    )
    return figures_page(title, figures, intro_html=intro)


def write_overlay(
    run_dirs: Iterable[str | os.PathLike[str]], out_path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Read every run directory, build the overlay page and write it atomically to ``out_path``; return the path.

    Every run is read before anything is written, so a bad directory leaves no file behind.
    """
    runs = [read_run(path) for path in run_dirs]
    out = Path(out_path)
    if out.is_dir():
        raise OverlayError(f"output {str(out)!r} is a directory; give a file name such as overlay.html")
    page = overlay_page(runs, title=title)
    try:
        return atomic_write_text(out, page)
    except OSError as exc:
        raise OverlayError(f"output {str(out)!r}: cannot write: {exc.strerror or exc}") from None


def _target_cell(run: RunData) -> str:
    if run.target_accuracy is None:
        return "none"
    hit = crossing(run.rounds, run.target_accuracy) if "test_accuracy" in run.rounds.columns else None
    if hit is None:
        return f"{run.target_accuracy:.2%}: not reached"
    return (f"{run.target_accuracy:.2%}: round {int(hit['round'])}, {float(hit['sim_time_s']):.4g} s, "
            f"{float(hit['energy_cum_j']):.4g} J")  # fmt: skip


def _runs_table(runs: list[RunData], metric: str) -> str:
    head = ("run", "directory", "rounds", f"last {_words(metric)}", "simulated time", "energy", "target", "complete")
    rows = []
    for run, label in zip(runs, run_labels(runs)):
        rounds = run.rounds
        values = rounds[metric].dropna() if metric in rounds.columns else pd.Series(dtype=float)
        last = "none" if values.empty else _value_text(metric, values.iloc[-1])
        cells = (
            label,
            str(run.path),
            str(len(rounds)),
            last,
            format_value(rounds["sim_time_s"].iloc[-1] if len(rounds) else None, ".4g", " s"),
            format_value(rounds["energy_cum_j"].iloc[-1] if len(rounds) else None, ".4g", " J"),
            _target_cell(run),
            {True: "yes", False: "no (partial run)", None: "unknown"}[run.complete],
        )
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f'<table class="summary">{header}{"".join(rows)}</table>'
