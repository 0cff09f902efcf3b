"""Time-vs-energy trade-off over gamma, Luo et al. Fig. 5(e): for each gamma, Algorithm 2's (K*, E*) and the
exhaustive grid's optimum, each with its t_tot [s] and e_tot [J] to the target loss; written as CSV and as a
plotly page (:func:`edgefl.report.figures_page`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from edgefl.design.costs import DeviceCosts
from edgefl.design.ke import Estimate, Outcome, _run_design, _solve_p3, grid_optimum
from edgefl.design.until_loss import RunCache

__all__ = ["TRADEOFF_COLUMNS", "TRADEOFF_GAMMAS", "tradeoff_table", "write_tradeoff"]

TRADEOFF_GAMMAS = tuple(round(0.1 * i, 1) for i in range(11))  # gamma = 0, 0.1, ..., 1 of Fig. 5(e)

TRADEOFF_COLUMNS = (
    "gamma", "K", "E", "time_s", "energy_j", "cost", "K_opt", "E_opt", "time_opt_s", "energy_opt_j", "cost_opt",
    "optimality_error",
)  # fmt: skip


def tradeoff_table(
    cache: RunCache,
    costs: DeviceCosts | Sequence[DeviceCosts],
    estimate: Estimate,
    gammas: Sequence[float] = TRADEOFF_GAMMAS,
    *,
    target: float,
    seeds: Sequence[int],
    grid: Sequence[Outcome] | None = None,
    jobs: int = 1,
) -> pd.DataFrame:
    """One row per gamma (columns :data:`TRADEOFF_COLUMNS`; the ``*_opt`` columns are empty without a grid).
    ``optimality_error`` = cost(K*, E*) / cost(grid optimum) - 1.

    P3 is solved once per gamma; the (K*, E*) runs to ``target`` the cache lacks are simulated first,
    ``jobs`` processes at a time (:meth:`RunCache.prefetch`), then read by every gamma that chose them."""
    solved = {float(g): _solve_p3(costs, estimate, float(g)) for g in gammas}
    chosen = sorted({(sol.k, sol.e) for _, sol in solved.values()})
    cache.prefetch([(k, e, s) for k, e in chosen for s in seeds], (target,), jobs=jobs)
    rows = []
    for g in gammas:
        per_seed, sol = solved[float(g)]
        d = _run_design(cache, per_seed, estimate, sol, gamma=float(g), target=target, seeds=seeds)
        row = {"gamma": float(g), "K": d.k, "E": d.e, "time_s": d.outcome.time_s, "energy_j": d.outcome.energy_j,
               "cost": d.cost}  # fmt: skip
        if grid is not None:
            best = grid_optimum(grid, float(g))
            c = best.cost(float(g))
            row.update(K_opt=best.k, E_opt=best.e, time_opt_s=best.time_s, energy_opt_j=best.energy_j, cost_opt=c,
                       optimality_error=d.cost / c - 1.0 if c > 0 else float("nan"))  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows, columns=list(TRADEOFF_COLUMNS))


def write_tradeoff(table: pd.DataFrame, out_dir: str | Path, *, title: str = "Time-energy trade-off") -> tuple[Path, Path]:
    """Write ``tradeoff.csv`` and ``tradeoff.html`` (t_tot vs e_tot, one point per gamma) into ``out_dir``."""
    import plotly.graph_objects as go

    from edgefl.io import atomic_write_text
    from edgefl.report import figures_page

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / "tradeoff.csv", out / "tradeoff.html"
    atomic_write_text(csv_path, table.to_csv(index=False))
    fig = go.Figure()
    labels = [f"gamma={g:g} K={k} E={e}" for g, k, e in zip(table["gamma"], table["K"], table["E"])]
    fig.add_trace(go.Scatter(x=table["energy_j"], y=table["time_s"], mode="lines+markers", name="Algorithm 2",
                             text=labels, hovertemplate="%{text}<br>e_tot %{x:.4g} J<br>t_tot %{y:.4g} s"))  # fmt: skip
    if table["cost_opt"].notna().any():
        lab = [f"gamma={g:g} K={k} E={e}" for g, k, e in zip(table["gamma"], table["K_opt"], table["E_opt"])]
        fig.add_trace(go.Scatter(x=table["energy_opt_j"], y=table["time_opt_s"], mode="lines+markers",
                                 name="grid optimum", text=lab, line={"dash": "dash"},
                                 hovertemplate="%{text}<br>e_tot %{x:.4g} J<br>t_tot %{y:.4g} s"))  # fmt: skip
    fig.update_layout(title="Learning time vs energy to the target loss (Luo et al. Fig. 5e)",
                      xaxis_title="energy e_tot [J]", yaxis_title="time t_tot [s]")  # fmt: skip
    atomic_write_text(html_path, figures_page(title, {"tradeoff": fig}))
    return csv_path, html_path
