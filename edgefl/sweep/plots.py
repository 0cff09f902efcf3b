"""sweep.html: per grid point, each metric's curve as the mean over seeds with a min..max band, and the final
metrics of every grid point (mean marker, min..max error bar, one dot per seed).

Curves are aligned by round: at round r the point is (mean over seeds of the x value at r, mean of the metric
at r) and the band spans the metric's min..max over seeds at r. Simulated time and energy come from the cost
model, never the host clock.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from edgefl.output.report import AXIS_TITLES, figures_page

if TYPE_CHECKING:
    from edgefl.sweep.spec import Sweep

__all__ = ["build_sweep_page", "curve_stats"]

_TEMPLATE = "plotly_white"
_CURVE_METRICS = {  # rounds.csv column -> axis title, tick format
    "test_accuracy": (AXIS_TITLES["test_accuracy"], ".0%"),
    "test_loss": (AXIS_TITLES["test_loss"], None),
    "train_loss": ("training loss (mean over arrived devices)", None),  # says more than a run's "train loss"
}
_X = {x: (key, AXIS_TITLES[x]) for x, key in (("sim_time_s", "time"), ("energy_cum_j", "energy"))}
_FINAL = {  # sweep.csv column -> panel title
    "final_accuracy": "final test accuracy",
    "best_accuracy": "best test accuracy",
    "final_test_loss": "final test loss",
    "final_train_loss": "final training loss",
    "sim_time_s": "simulated time at the end [s]",
    "energy_j": "energy at the end [J]",
    "sim_time_to_target_s": "simulated time to target [s]",
    "energy_to_target_j": "energy to target [J]",
}


def curve_stats(rounds_by_seed: list[pd.DataFrame], x: str, y: str) -> pd.DataFrame:
    """Per round: ``x`` (mean over seeds), ``mean``, ``min``, ``max`` of ``y`` and ``n`` (seeds with a value)."""
    frames = []
    for df in rounds_by_seed:
        if y in df.columns and x in df.columns:
            part = pd.DataFrame(
                {
                    "round": df["round"],
                    "x": pd.to_numeric(df[x], errors="coerce"),
                    "y": pd.to_numeric(df[y], errors="coerce"),
                }
            )
            frames.append(part.dropna())
    if not frames:
        return pd.DataFrame(columns=["round", "x", "mean", "min", "max", "n"])
    both = pd.concat(frames, ignore_index=True)
    stats = both.groupby("round", sort=True).agg(
        x=("x", "mean"), mean=("y", "mean"), min=("y", "min"), max=("y", "max"), n=("y", "size")
    )
    return stats.reset_index()


def build_sweep_page(sweep: Sweep, table: pd.DataFrame, rounds: dict[str, pd.DataFrame]) -> str:
    """The sweep page (one self-contained HTML file); ``rounds`` maps run id -> that run's rounds.csv."""
    points: dict[str, list[str]] = {}  # grid point label -> run ids, in grid order
    for run in sweep.runs:
        points.setdefault(run.point, []).append(run.run_id)
    target = sweep.spec.target
    present = figures_metrics(rounds)
    if "test_loss" in present and not (target is not None and target.columns == ("train_loss",)):
        present.discard("train_loss")  # the test loss is the loss to look at when the runs have one
    figures: dict[str, go.Figure] = {}
    for metric, (y_title, fmt) in _CURVE_METRICS.items():
        if metric not in present:
            continue
        for x, (x_key, x_title) in _X.items():
            fig = _curve_figure(points, rounds, x, metric, x_title, y_title, fmt)
            if target is not None and metric in target.columns:
                fig.add_hline(y=target.value, line_dash="dash", line_color="#555", annotation_text="target")
            figures[f"{metric}_vs_{x_key}"] = fig
    figures["final_metrics"] = _final_figure(points, table)
    return figures_page(f"Sweep {sweep.spec.name}", figures, intro_html=_intro(sweep, points))


def figures_metrics(rounds: dict[str, pd.DataFrame]) -> set[str]:
    """The curve metrics that have at least one value in some run."""
    present = set()
    for df in rounds.values():
        for metric in _CURVE_METRICS:
            if metric in df.columns and pd.to_numeric(df[metric], errors="coerce").notna().any():
                present.add(metric)
    return present


def _colour(i: int, alpha: float | None = None) -> str:
    hex_ = qualitative.Plotly[i % len(qualitative.Plotly)].lstrip("#")
    if alpha is None:
        return f"#{hex_}"
    r, g, b = (int(hex_[k : k + 2], 16) for k in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _curve_figure(
    points: dict[str, list[str]],
    rounds: dict[str, pd.DataFrame],
    x: str,
    y: str,
    x_title: str,
    y_title: str,
    fmt: str | None,
) -> go.Figure:
    fig = go.Figure()
    for i, (label, ids) in enumerate(points.items()):
        stats = curve_stats([rounds[r] for r in ids if r in rounds], x, y)
        if stats.empty:
            continue
        xs = [float(v) for v in stats["x"]]
        band = {
            "x": xs, "mode": "lines", "line": {"width": 0}, "legendgroup": label, "showlegend": False,
            "hoverinfo": "skip",
        }  # fmt: skip
        fig.add_trace(go.Scatter(y=[float(v) for v in stats["max"]], **band))
        fig.add_trace(go.Scatter(y=[float(v) for v in stats["min"]], fill="tonexty", fillcolor=_colour(i, 0.2), **band))
        hover = [
            f"{html.escape(label)}<br>round {int(r['round'])} ({int(r['n'])} seeds)<br>mean {r['mean']:.4g} "
            f"[{r['min']:.4g} .. {r['max']:.4g}]<br>{x_title}: {r['x']:.4g}"
            for _, r in stats.iterrows()
        ]
        fig.add_trace(
            go.Scatter(
                x=xs, y=[float(v) for v in stats["mean"]], mode="lines+markers" if len(xs) <= 40 else "lines",
                name=label, legendgroup=label,
                line={"color": _colour(i)}, hovertext=hover, hoverinfo="text",
            )
        )  # fmt: skip
    name = y_title.split(" [")[0]
    fig.update_layout(
        title=f"{name[0].upper()}{name[1:]} vs {x_title.split(' [')[0]} (mean over seeds, band: min..max)",
        template=_TEMPLATE,
        xaxis_title=x_title,
        yaxis={"title": y_title, **({"tickformat": fmt} if fmt else {})},
        legend={"title": "grid point"},
    )
    return fig


def _final_figure(points: dict[str, list[str]], table: pd.DataFrame) -> go.Figure:
    metrics = [m for m in _FINAL if m in table.columns and pd.to_numeric(table[m], errors="coerce").notna().any()]
    if not metrics:
        fig = go.Figure()
        fig.add_annotation(text="no finished runs", xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False)
        return fig
    fig = make_subplots(
        rows=len(metrics), cols=1, subplot_titles=[_FINAL[m] for m in metrics], vertical_spacing=0.25 / len(metrics)
    )
    by_run = table.set_index("run")
    labels = list(points)
    for row, metric in enumerate(metrics, start=1):
        means, lo, hi, dots_x, dots_y, dots_text = [], [], [], [], [], []
        for label, ids in points.items():
            values = pd.to_numeric(by_run.loc[[r for r in ids if r in by_run.index], metric], errors="coerce")
            seeds = by_run.loc[values.index, "seed"]
            for run_id, v, s in zip(values.index, values, seeds):
                if not math.isnan(v):
                    dots_x.append(label)
                    dots_y.append(float(v))
                    dots_text.append(f"{html.escape(run_id)} (seed {s}): {v:.4g}")
            values = values.dropna()
            mean = float(values.mean()) if len(values) else math.nan
            means.append(mean)
            lo.append(mean - float(values.min()) if len(values) else math.nan)
            hi.append(float(values.max()) - mean if len(values) else math.nan)
        fig.add_trace(
            go.Scatter(x=dots_x, y=dots_y, mode="markers", marker={"color": "#9aa5b1", "size": 6}, name="one seed",
                       hovertext=dots_text, hoverinfo="text", showlegend=row == 1, legendgroup="seed"),
            row=row, col=1,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(
                x=labels, y=means, mode="markers", marker={"color": _colour(0), "size": 11, "symbol": "diamond"},
                error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                name="mean, bar: min..max over seeds", showlegend=row == 1, legendgroup="mean",
            ),
            row=row, col=1,
        )  # fmt: skip
    fig.update_layout(
        title="Final metrics per grid point", template=_TEMPLATE, height=max(350, 260 * len(metrics)),
        legend={"orientation": "h", "y": -0.05},
    )  # fmt: skip
    fig.update_xaxes(type="category")
    return fig


def _intro(sweep: Sweep, points: dict[str, list[str]]) -> str:
    spec = sweep.spec
    target = spec.target
    target_text = "none" if target is None else html.escape(target.describe())
    grid = "; ".join(f"{html.escape(k)} = {html.escape(str(v))}" for k, v in spec.grid.items()) or "none (base only)"
    desc = f"<p>{html.escape(spec.description)}</p>\n" if spec.description else ""
    return (
        f"{desc}"
        '<p class="note">edgefl sweep. Times and energies are simulated by the cost model (not host time). '
        "Curves are aligned by round: each point is the mean over seeds, the band spans min..max over seeds.</p>\n"
        "<ul>"
        f"<li>base scenario: {html.escape(sweep.base_source)}</li>"
        f"<li>grid: {grid}</li>"
        f"<li>seeds: {', '.join(str(s) for s in spec.seeds)}</li>"
        f"<li>runs: {len(sweep.runs)} ({len(points)} grid points &times; {len(spec.seeds)} seeds)</li>"
        f"<li>target: {target_text}</li>"
        "</ul>"
    )
