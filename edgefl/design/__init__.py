"""The design loop of Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021), in the simulator.

- :mod:`edgefl.design.luo_costs`: per-device t_{k,p}, t_{k,m}, e_{k,p}, e_{k,m} from a run's fleet and radio,
  and the Lemma 1/2 prediction of a round's time and energy.
- :mod:`edgefl.design.until_loss`: run a design until the global training loss reaches targets.
- :mod:`edgefl.design.ke`: Algorithm 2 (sampling, A0/B0 estimate, alternate search, final run), the paper
  rule, and the exhaustive (K, E) grid.
- :mod:`edgefl.design.measured`: the measured rule (straggler-aware round cost, fitted rounds-to-target model).
- :mod:`edgefl.design.tradeoff`: the gamma sweep (Fig. 5e) for both rules as CSV and plot.
"""

from __future__ import annotations

from edgefl.design.luo_costs import DeviceCosts, measure_device_costs
from edgefl.design.ke import (
    DesignError,
    Estimate,
    KEDesign,
    Outcome,
    SampleRecord,
    design_ke,
    estimate_ratio,
    evaluate_design,
    grid_optimum,
    grid_table,
    mean_costs,
    seed_costs,
)
from edgefl.design.measured import (
    MeasuredDesign,
    MeasuredEstimate,
    MeasuredSample,
    design_measured,
    fit_measured,
    predict_choice,
    refine_neighbours,
)
from edgefl.design.tradeoff import TRADEOFF_COLUMNS, TRADEOFF_GAMMAS, tradeoff_table, write_tradeoff
from edgefl.design.until_loss import Hit, LossRun, RunCache, design_scenario, run_until_loss

__all__ = [
    "DeviceCosts",
    "measure_device_costs",
    "Hit",
    "LossRun",
    "RunCache",
    "design_scenario",
    "run_until_loss",
    "DesignError",
    "SampleRecord",
    "Estimate",
    "Outcome",
    "KEDesign",
    "mean_costs",
    "seed_costs",
    "estimate_ratio",
    "evaluate_design",
    "design_ke",
    "grid_table",
    "grid_optimum",
    "MeasuredSample",
    "MeasuredEstimate",
    "MeasuredDesign",
    "fit_measured",
    "predict_choice",
    "refine_neighbours",
    "design_measured",
    "TRADEOFF_COLUMNS",
    "TRADEOFF_GAMMAS",
    "tradeoff_table",
    "write_tradeoff",
]
