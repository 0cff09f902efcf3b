"""Problem P3 of Luo et al. (eq. 20) as a geometric program in (K, E), solved with cvxpy (``gp=True``).

The objective is a product of posynomials divided by the monomial E:
``((1-gamma) t_p E + (1-gamma) t_m + gamma e_p K E + gamma e_m K) * (A + (N-2)/(N-1) E^2 + N/(N-1) E^2/K) / E``
with A = A0/B0 (normalised as in :mod:`optimizers.cost_effective_model`), subject to 1 <= K <= N and E >= 1.
Its global optimum is the reference for the alternate search of Algorithm 2 (:func:`solve_acs`).
Zero or negligible coefficients (gamma at or next to 0 or 1, N = 2) are left out of the program, because
a geometric program's coefficients must be positive; the problem for each such structure is built once
with ``cp.Parameter``s and re-solved with new values.
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
from dataclasses import dataclass

import cvxpy as cp

from optimizers.cost_effective_model import LuoCostParams, p3_objective
from optimizers.errors import SolverError

__all__ = ["GpSolution", "solve_gp"]


@dataclass(frozen=True)
class GpSolution:
    """Result of :func:`solve_gp`.

    Attributes:
        k: optimal continuous K in [1, N].
        e: optimal continuous E >= 1.
        objective: P3 objective eq. (20) at (k, e), normalised (times epsilon/B0), evaluated with
            :func:`optimizers.cost_effective.p3_objective` (not the solver's value).
        status: cvxpy status string (always ``"optimal"`` when returned).
    """

    k: float
    e: float
    objective: float
    status: str


# Clarabel stalls just above its default 1e-8 gap tolerance on some instances ("AlmostSolved", reported by
# cvxpy as optimal_inaccurate) yet converges with 1e-10; the default and a looser 1e-7 follow as retries.
_ATTEMPTS = (
    {"solver": cp.CLARABEL, "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10},
    {"solver": cp.CLARABEL},
    {"solver": cp.CLARABEL, "tol_gap_abs": 1e-7, "tol_gap_rel": 1e-7},
    {"solver": cp.SCS, "eps": 1e-9, "max_iters": 100_000},
)


_LOCK = threading.Lock()
_COST_NAMES = ("tp", "tm", "ep", "em")


@functools.lru_cache(maxsize=64)
def _program(cost_terms: tuple[bool, bool, bool, bool], full_bound: bool, k_free: bool):
    """The parametrised GP for one structure: which of the terms t_p E, t_m, e_p K E, e_m K and
    (N-2)/(N-1) E^2, N/(N-1) E^2/K are present."""
    k = cp.Variable(pos=True, name="K")
    e = cp.Variable(pos=True, name="E")
    par = {name: cp.Parameter(pos=True, name=name) for name in _COST_NAMES + ("a", "c", "d", "n")}
    monomials = (e, 1.0, k * e, k)
    terms = [par[name] * x for name, x, on in zip(_COST_NAMES, monomials, cost_terms) if on]
    per_round = cp.sum(cp.hstack(terms)) if len(terms) > 1 else terms[0]
    bound_terms = [par["a"]]
    if full_bound:
        bound_terms.append(par["c"] * e**2)
    if k_free:
        bound_terms.append(par["d"] * e**2 / k)
    bound = cp.sum(cp.hstack(bound_terms))
    constraints = [e >= 1, k >= 1, k <= par["n"]]
    problem = cp.Problem(cp.Minimize(per_round * bound / e), constraints)
    return problem, par, k, e


def solve_gp(params: LuoCostParams) -> GpSolution:
    """Global optimum of the continuous relaxation of P3 (Luo et al. eq. (20)) as a geometric program.

    The bound factor F(K) = 1 + (N-K)/(K(N-1)) is written (N-2)/(N-1) + N/((N-1) K); for N = 1 it is 1
    and K = 1. Costs are rescaled by their largest coefficient before solving (the optimum does not move).

    Raises:
        SolverError: cvxpy did not report ``optimal`` (or failed).
    """
    g, n = params.gamma, params.n
    coeff = (
        (1 - g) * params.t_p_s,
        (1 - g) * params.t_m_s,
        g * params.e_p_j,
        g * params.e_m_j,
    )
    scale = max(coeff)
    # A term whose coefficient is this small changes the objective by less than 1e-20 relative (its monomial
    # is at most N E times another's, E < 1 + sqrt(A) at the optimum): leave it out. This covers gamma = 0
    # or 1 and a gamma so close to them that gamma * e_p underflows or lies far below double precision.
    negligible = 1e-20 * scale / (n * (1.0 + math.sqrt(params.a0_over_b0)))
    cost_terms = tuple(value > negligible for value in coeff)
    full_bound = n != 2  # (N-2)/(N-1) = 0 for N = 2
    k_free = n > 1
    problem, par, k_var, e_var = _program(cost_terms, full_bound, k_free)
    for name, value, on in zip(_COST_NAMES, coeff, cost_terms):
        par[name].value = value / scale if on else 1.0  # unused parameters still need a value
    par["a"].value = params.a0_over_b0
    par["c"].value = (n - 2) / (n - 1) if n > 2 else 1.0  # N = 1: F(K) = 1, bound A + E^2
    par["d"].value = n / (n - 1) if n > 1 else 1.0
    par["n"].value = float(n)
    statuses = []
    with _LOCK:  # the cached problem is shared; one solve at a time
        for options in _ATTEMPTS:
            try:
                with warnings.catch_warnings():  # "Solution may be inaccurate": the status below decides
                    warnings.simplefilter("ignore", UserWarning)
                    problem.solve(gp=True, **options)
            except cp.error.SolverError as exc:
                statuses.append(f"failed ({exc})")
                continue
            statuses.append(str(problem.status))
            if problem.status == cp.OPTIMAL:
                break
        else:
            raise SolverError(f"geometric program for P3 ended with statuses {statuses}, not 'optimal'")
        k = min(float(n), max(1.0, float(k_var.value)))
        e = max(1.0, float(e_var.value))
    return GpSolution(k=k, e=e, objective=float(p3_objective(params, k, e)), status=str(problem.status))
