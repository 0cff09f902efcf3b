"""Cost-effective choice of clients per round K and local iterations E: Luo et al., "Cost-Effective Federated
Learning Design" (INFOCOM 2021).

The implementation is split by idea; this module is the public face:

- :mod:`optimizers.cost_effective_expectation`: expected time (Lemma 2, eqs. 12-13, exact and stable for
  N up to 10^4 and beyond) and energy (Lemma 1, eq. 10) of uniform K-of-N sampling.
- :mod:`optimizers.cost_effective_model`: problem P3 (eq. 20), rounds for a precision (eq. 19), K given E
  (eq. 21), E given K (cubic eq. 22, Cardano with a bracketing fallback).
- :mod:`optimizers.cost_effective_acs`: Algorithm 2 lines 5-13 (alternate search and integer rounding).
- :mod:`optimizers.cost_effective_gp`: P3 as a cvxpy geometric program (global reference optimum).
- :mod:`optimizers.cost_effective_estimation`: A0/B0 from sampled runs (eqs. 23-25).

P3 uses the device-average constants t_p, t_m, e_p, e_m (eq. 17 and Lemma 1); the exact expected time of
Lemma 2 is for evaluating a chosen (K, E) on a heterogeneous fleet, not part of P3.
"""

from __future__ import annotations

from optimizers import cost_effective_model
from optimizers.cost_effective_acs import KESolution, solve_acs
from optimizers.cost_effective_estimation import A0B0Estimate, estimate_a0_over_b0
from optimizers.cost_effective_expectation import (
    expected_round_time_s,
    expected_total_energy_j,
    expected_total_time_s,
    straggler_probabilities,
)
from optimizers.cost_effective_gp import GpSolution, solve_gp
from optimizers.cost_effective_model import (
    LuoCostParams,
    cubic_positive_root,
    e_given_k,
    k_given_e,
    p3_objective,
    participation_factor,
    rounds_for_precision,
)

__all__ = [
    *cost_effective_model.__all__,
    "KESolution",
    "GpSolution",
    "A0B0Estimate",
    "straggler_probabilities",
    "expected_round_time_s",
    "expected_total_time_s",
    "expected_total_energy_j",
    "solve_acs",
    "solve_gp",
    "estimate_a0_over_b0",
]
