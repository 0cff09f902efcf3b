"""Algorithm 2 (lines 5-13) of Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021):
alternate convex search over (K, E) with the closed forms (21) and (22), then integer rounding.

P3 is strictly biconvex (Theorem 1). It is also a geometric program in (K, E) (see
:mod:`optimizers.cost_effective_gp`), i.e. convex in (log K, log E) with box constraints; exact block
minimisation in K and in E is block coordinate descent on that convex function, so the alternate search
converges to the *global* continuous optimum of P3, not merely to a local one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from optimizers import _checks as chk
from optimizers.cost_effective_model import LuoCostParams, e_given_k, k_given_e, p3_objective
from optimizers.errors import OptimizerInputError, SolverError

__all__ = ["KESolution", "solve_acs"]


@dataclass(frozen=True)
class KESolution:
    """Result of :func:`solve_acs`.

    Attributes:
        k: clients per round K* (integer in [1, N]), Algorithm 2 line 12.
        e: local iterations per round E* (integer >= 1), Algorithm 2 line 12.
        k_cont: converged continuous K (before rounding).
        e_cont: converged continuous E (before rounding).
        objective: P3 objective eq. (20) at (k, e), normalised (times epsilon/B0).
        objective_cont: P3 objective at (k_cont, e_cont), normalised.
        iterations: alternate-search iterations until the stopping condition held.
    """

    k: int
    e: int
    k_cont: float
    e_cont: float
    objective: float
    objective_cont: float
    iterations: int


def solve_acs(
    params: LuoCostParams,
    *,
    k0: float | None = None,
    e0: float = 1.0,
    tol: float = 1e-10,
    max_iter: int = 100_000,
) -> KESolution:
    """K* and E* by Luo et al. Algorithm 2, lines 5-13.

    Line 5: start from a feasible z_0 = (k0, e0) (default K = N, E = 1). Lines 6-11: repeat
    K <- projection of eq. (21) onto [1, N] (line 8), E <- projection of the positive root of eq. (22) onto
    E >= 1 (line 10), until the step ||z_j - z_{j-1}|| <= tol * (1 + ||z_j||) (the stopping condition
    epsilon_0 of line 6, taken relative to the size of z). Line 12: evaluate P3 (eq. 20) at the four
    combinations of floor/ceil of (K, E) and keep the cheapest (ties: the first in the paper's order
    (ceil, ceil), (ceil, floor), (floor, ceil), (floor, floor)).

    Raises:
        OptimizerInputError: infeasible start or bad ``tol``/``max_iter``.
        SolverError: no convergence within ``max_iter`` iterations.
    """
    n = params.n
    k = float(n) if k0 is None else chk.real(k0, "k0")
    e = chk.real(e0, "e0")
    if not 1 <= k <= n:
        raise OptimizerInputError(f"k0={k!r}: must be in [1, n={n}]")
    if not e >= 1:
        raise OptimizerInputError(f"e0={e!r}: must be >= 1")
    tol = chk.positive(tol, "tol")
    max_iter = chk.integer(max_iter, "max_iter", 1)

    for iteration in range(1, max_iter + 1):
        k_new = min(float(n), max(1.0, k_given_e(params, e)))  # line 8
        e_new = max(1.0, e_given_k(params, k_new))  # line 10
        step = math.hypot(k_new - k, e_new - e)
        k, e = k_new, e_new
        if step <= tol * (1.0 + math.hypot(k, e)):
            break
    else:
        raise SolverError(f"alternate convex search did not converge in max_iter={max_iter} iterations (k={k}, e={e})")

    candidates = [
        (min(n, math.ceil(k)), math.ceil(e)),
        (min(n, math.ceil(k)), max(1, math.floor(e))),
        (max(1, math.floor(k)), math.ceil(e)),
        (max(1, math.floor(k)), max(1, math.floor(e))),
    ]
    ks = np.array([c[0] for c in candidates], dtype=float)
    es = np.array([c[1] for c in candidates], dtype=float)
    values = p3_objective(params, ks, es)
    best = int(np.argmin(values))
    return KESolution(
        k=int(ks[best]),
        e=int(es[best]),
        k_cont=k,
        e_cont=e,
        objective=float(values[best]),
        objective_cont=float(p3_objective(params, k, e)),
        iterations=iteration,
    )
