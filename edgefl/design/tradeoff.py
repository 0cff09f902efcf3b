"""Time-vs-energy trade-off over gamma, Luo et al. Fig. 5(e): for each gamma, each design rule's choice (Luo et
al.'s Algorithm 2, ``rule = "paper"``, and the measured rule, :mod:`edgefl.design.measured`) and the exhaustive
grid's optimum, each with its t_tot [s] and e_tot [J] to the target loss; written as CSV and as a plotly page
(:func:`edgefl.output.report.figures_page`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from edgefl.design.luo_costs import DeviceCosts
from edgefl.design.ke import Estimate, Outcome, run_design, solve_p3, grid_optimum
from edgefl.design.measured import MeasuredEstimate, design_measured, predict_choice, refine_neighbours
from edgefl.design.until_loss import RunCache

__all__ = ["TRADEOFF_COLUMNS", "TRADEOFF_GAMMAS", "tradeoff_table", "write_tradeoff"]

TRADEOFF_GAMMAS = tuple(round(0.1 * i, 1) for i in range(11))  # gamma = 0, 0.1, ..., 1 of Fig. 5(e)

TRADEOFF_COLUMNS = (
    "gamma", "rule", "K", "E", "time_s", "energy_j", "cost", "overhead", "K_opt", "E_opt", "time_opt_s",
    "energy_opt_j", "cost_opt", "optimality_error",
)  # fmt: skip


def tradeoff_table(
    cache: RunCache,
    costs: DeviceCosts | Sequence[DeviceCosts],
    gammas: Sequence[float] = TRADEOFF_GAMMAS,
    *,
    target: float,
    seeds: Sequence[int],
    paper: Estimate | None = None,
    measured: MeasuredEstimate | None = None,
    grid: Sequence[Outcome] | None = None,
    refine: int = 0,
    jobs: int = 1,
) -> pd.DataFrame:
    """One row per gamma and rule (columns :data:`TRADEOFF_COLUMNS`; the ``*_opt`` columns are empty without a
    grid): the paper rule's row when its A0/B0 estimate ``paper`` is given, the measured rule's when its fit
    ``measured`` is. ``optimality_error`` = cost(chosen) / cost(grid optimum) - 1; ``overhead`` as each rule
    reports it (sampled and confirmation runs' cost over the chosen design's cost).

    Each rule solves once per gamma; the chosen runs to ``target`` the cache lacks are simulated first, ``jobs``
    processes at a time (:meth:`RunCache.prefetch`), then read by every gamma that chose them."""
    gs = [float(g) for g in gammas]
    solved = {g: solve_p3(costs, paper, g) for g in gs} if paper is not None else {}
    designs = {(sol.k, sol.e) for _, sol in solved.values()}
    if measured is not None:
        es = [s.e for s in measured.samples]
        for g in gs:
            c = predict_choice(costs, measured, g)
            designs |= {(c.k, c.e), *refine_neighbours(c.k, c.e, n=cache.base.fleet.n_devices, e_min=min(es),
                                                       e_max=max(es), count=refine)}  # fmt: skip
    cache.prefetch([(k, e, s) for k, e in sorted(designs) for s in seeds], (target,), jobs=jobs)
    rows = []
    for g in gs:
        chosen = []
        if paper is not None:
            per_seed, sol = solved[g]
            chosen.append(run_design(cache, per_seed, paper, sol, gamma=g, target=target, seeds=seeds))
        if measured is not None:
            chosen.append(design_measured(cache, costs, measured, gamma=g, target=target, seeds=seeds, refine=refine))
        best = grid_optimum(grid, g) if grid is not None else None
        for d in chosen:
            row = {"gamma": g, "rule": d.rule, "K": d.k, "E": d.e, "time_s": d.outcome.time_s,
                   "energy_j": d.outcome.energy_j, "cost": d.cost, "overhead": d.overhead}  # fmt: skip
            if best is not None:
                c = best.cost(g)
                row.update(K_opt=best.k, E_opt=best.e, time_opt_s=best.time_s, energy_opt_j=best.energy_j, cost_opt=c,
                           optimality_error=d.cost / c - 1.0 if c > 0 else float("nan"))  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows, columns=list(TRADEOFF_COLUMNS))


_RULE_NAMES = {"paper": "Algorithm 2 (paper rule)", "measured": "measured rule"}


def write_tradeoff(table: pd.DataFrame, out_dir: str | Path, *, title: str = "Time-energy trade-off") -> tuple[Path, Path]:
    """Write ``tradeoff.csv`` and ``tradeoff.html`` (t_tot vs e_tot, one point per gamma and rule, and the
    grid optimum) into ``out_dir``."""
    import plotly.graph_objects as go

    from edgefl.io import atomic_write_text
    from edgefl.output.report import figures_page

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out / "tradeoff.csv", out / "tradeoff.html"
    atomic_write_text(csv_path, table.to_csv(index=False))
    fig = go.Figure()
    hover = "%{text}<br>e_tot %{x:.4g} J<br>t_tot %{y:.4g} s"
    for rule, part in table.groupby("rule", sort=False):
        labels = [f"gamma={g:g} K={k} E={e}" for g, k, e in zip(part["gamma"], part["K"], part["E"])]
        fig.add_trace(go.Scatter(x=part["energy_j"], y=part["time_s"], mode="lines+markers",
                                 name=_RULE_NAMES.get(str(rule), str(rule)), text=labels, hovertemplate=hover))  # fmt: skip
    if table["cost_opt"].notna().any():
        first = table.drop_duplicates("gamma")
        lab = [f"gamma={g:g} K={k} E={e}" for g, k, e in zip(first["gamma"], first["K_opt"], first["E_opt"])]
        fig.add_trace(go.Scatter(x=first["energy_opt_j"], y=first["time_opt_s"], mode="lines+markers",
                                 name="grid optimum", text=lab, line={"dash": "dash"}, hovertemplate=hover))  # fmt: skip
    fig.update_layout(title="Learning time vs energy to the target loss (Luo et al. Fig. 5e)",
                      xaxis_title="energy e_tot [J]", yaxis_title="time t_tot [s]")  # fmt: skip
    atomic_write_text(html_path, figures_page(title, {"tradeoff": fig}))
    return csv_path, html_path
