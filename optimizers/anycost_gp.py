"""AnycostFL per-device problem as a geometric program: the reference for the closed form.

Per device, problem (P3) eq. (19) with constraints (10a)-(10e) is a GP in (alpha, beta, f)::

    maximise   alpha**4 * beta                                            (Definition 3)
    subject to c*alpha/(T_max*f) + s*alpha*beta/T_max          <= 1        (10a), eqs. (6), (9)
               eps*c*alpha*f**2/E_max + P*s*alpha*beta/E_max   <= 1        (10b), eqs. (7), (9)
               alpha_min <= alpha <= 1,  beta <= beta_max,  f_min <= f <= f_max   (10c)-(10e)

with ``c = tau*D*W`` [cycles] and ``s = S/r`` [s]. A device with a static compute power ``P_static > 0`` [W]
(:mod:`optimizers.anycost_static`) adds ``P_static*c*alpha/(f*E_max)``, the static energy over ``T_cmp``,
to (10b): a monomial, so the energy constraint stays a posynomial and the problem a GP (a second template,
since a cvxpy positive parameter cannot be 0). The frequency enters as ``g = f/f_max`` so that every
variable is O(1). cvxpy (``gp=True``) solves it in log space; the problem is built once with
``cp.Parameter`` and re-solved per device. cvxpy is imported lazily so that the closed form loads fast.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from optimizers.anycost_model import (
    AnycostDevices,
    AnycostSolution,
    build_problem,
    build_solution,
    infeasibility_reason,
    tightest_reason,
)
from optimizers.errors import SolverError

__all__ = ["solve_anycost_gp", "GP_SOLVER_LADDER"]

#: Clarabel settings for the reference solve, tried in order until one ends "optimal" or "infeasible".
#: 1e-10 gives about 1e-9 relative accuracy in the gain. Clarabel's fallback ("reduced") tolerances are set
#: to at most 1e-8 too, so its "AlmostSolved" (cvxpy "optimal_inaccurate") still means gap and residuals
#: below 1e-8 and is accepted as optimal; it occurs where the upload terms are tiny next to the computation
#: terms. ``warm_start=False``: a warm start from an inaccurate solve tends to end inaccurate again.
GP_SOLVER_LADDER: tuple[dict[str, Any], ...] = tuple(
    {
        "solver": "CLARABEL", "max_iter": 500, "warm_start": False,
        "tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol,
        "reduced_tol_gap_abs": max(tol, 1e-8), "reduced_tol_gap_rel": max(tol, 1e-8),
        "reduced_tol_feas": max(tol, 1e-8), "reduced_tol_ktratio": 1e-6,
    }  # fmt: skip
    for tol in (1e-10, 1e-9, 1e-8, 1e-7)
)

_PARAMS = ("lat_cmp", "lat_com", "en_cmp", "en_com", "alpha_min", "beta_max", "g_min", "en_static")


@lru_cache(maxsize=2)
def _gp_templates(static: bool = False):
    """Build the parametrised GPs once: (main problem, phase-I problem, variables, parameters).

    With ``static`` the energy constraint has the static term ``en_static*alpha/g`` (``en_static`` =
    P_static*c/(f_max*E_max)); without it the parameter ``en_static`` is unused.

    The main problem is the GP of the module docstring. The phase-I problem minimises the larger of the
    two normalised budgets, ``s``, over the box (10c)-(10e) with beta >= 1e-12*beta_max (its infimum is at
    beta -> 0+); the device is feasible iff ``s < 1``. It is only solved when the main problem ends in
    neither "optimal" nor "infeasible" (Clarabel occasionally stalls on an infeasible GP).
    """
    import cvxpy as cp

    alpha = cp.Variable(pos=True, name="alpha")
    beta = cp.Variable(pos=True, name="beta")
    g = cp.Variable(pos=True, name="f_over_fmax")
    par = {name: cp.Parameter(pos=True, name=name) for name in _PARAMS}
    latency = par["lat_cmp"] * alpha / g + par["lat_com"] * alpha * beta  # (10a) / T_max
    energy = par["en_cmp"] * alpha * g**2 + par["en_com"] * alpha * beta  # (10b) / E_max
    if static:
        energy = energy + par["en_static"] * alpha / g
    box = [alpha >= par["alpha_min"], alpha <= 1, beta <= par["beta_max"], g >= par["g_min"], g <= 1]
    main = cp.Problem(cp.Maximize(alpha**4 * beta), [latency <= 1, energy <= 1, *box])
    slack = cp.Variable(pos=True, name="slack")
    phase1 = cp.Problem(
        cp.Minimize(slack), [latency <= slack, energy <= slack, beta >= 1e-12 * par["beta_max"], *box]
    )
    assert main.is_dgp(dpp=True) and phase1.is_dgp(dpp=True)
    return main, phase1, {"alpha": alpha, "beta": beta, "g": g, "slack": slack}, par


def _solve(problem, ladder, *, accept_inaccurate: bool) -> str:
    """Solve ``problem`` (DGP) with each option set of ``ladder`` until optimal/infeasible; return the status.

    With ``accept_inaccurate`` an "optimal_inaccurate" status counts as "optimal" (see GP_SOLVER_LADDER).
    """
    import cvxpy as cp

    status = "not solved"
    for options in ladder:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "Solution may be inaccurate": we check status
                problem.solve(gp=True, **options)
            status = problem.status
        except cp.SolverError as exc:
            status = f"solver error ({exc})"
        if accept_inaccurate and status == cp.OPTIMAL_INACCURATE:
            status = cp.OPTIMAL
        if status in (cp.OPTIMAL, cp.INFEASIBLE):
            break
    return status


def solve_anycost_gp(
    devices: AnycostDevices,
    *,
    t_max_s: float,
    cycles_per_sample: float,
    update_bits: float,
    epochs: float = 1,
    alpha_min: float = 0.25,
    beta_max: float = 1 / 15,
    solver_options: dict[str, Any] | None = None,
) -> AnycostSolution:
    """Optimal (alpha, beta, f) per device by solving the GP of eq. (19) s.t. (10a)-(10e) with cvxpy.

    Slow (one conic solve per device, a Python loop) but independent of the closed form: use it as the
    reference. Same arguments and output as :func:`optimizers.anycost.solve_anycost`. A device whose GP is
    infeasible is reported infeasible with the reason of the cheapest-setting test. The solver's box
    variables are clipped into their bounds (a ~1e-12 correction); latency and energy are as solved.

    Args:
        solver_options: keyword arguments for ``problem.solve``, one attempt per device, only "optimal"
            accepted (default: the attempts of :data:`GP_SOLVER_LADDER`, in order).

    Raises:
        OptimizerInputError: a field or setting is out of range.
        SolverError: the solver ended in a status other than optimal or infeasible.
    """
    pb = build_problem(
        devices, t_max_s=t_max_s, cycles_per_sample=cycles_per_sample, update_bits=update_bits,
        epochs=epochs, alpha_min=alpha_min, beta_max=beta_max,
    )  # fmt: skip
    import cvxpy as cp

    ladder = GP_SOLVER_LADDER if solver_options is None else (dict(solver_options),)
    n = len(devices)
    alpha, beta, f = np.zeros(n), np.zeros(n), np.zeros(n)
    feasible = np.zeros(n, dtype=bool)
    for i in range(n):
        main, phase1, var, par = _gp_templates(bool(pb.p0[i] > 0))
        par["alpha_min"].value = pb.alpha_min
        par["beta_max"].value = pb.beta_max
        par["en_static"].value = pb.p0[i] * pb.c[i] / (pb.f_max[i] * pb.e[i]) if pb.p0[i] > 0 else 1.0  # unused
        par["lat_cmp"].value = pb.c[i] / (pb.f_max[i] * pb.t)
        par["lat_com"].value = pb.s[i] / pb.t
        par["en_cmp"].value = pb.eps[i] * pb.c[i] * pb.f_max[i] ** 2 / pb.e[i]
        par["en_com"].value = pb.p[i] * pb.s[i] / pb.e[i]
        par["g_min"].value = pb.f_min[i] / pb.f_max[i]
        status = _solve(main, ladder, accept_inaccurate=solver_options is None)
        if status not in (cp.OPTIMAL, cp.INFEASIBLE):
            if _solve(phase1, ladder, accept_inaccurate=False) == cp.OPTIMAL and var["slack"].value >= 1.0:
                status = cp.INFEASIBLE
        if status == cp.OPTIMAL:
            feasible[i] = True
            alpha[i] = np.clip(var["alpha"].value, pb.alpha_min, 1.0)
            beta[i] = np.clip(var["beta"].value, 0.0, pb.beta_max)
            f[i] = np.clip(var["g"].value * pb.f_max[i], pb.f_min[i], pb.f_max[i])
        elif status != cp.INFEASIBLE:
            raise SolverError(f"device {i}: GP ended with status {status!r}, expected 'optimal' or 'infeasible'")
    reason = infeasibility_reason(pb)
    reason = np.where(feasible, "", np.where(reason == "", tightest_reason(pb), reason))
    t_cmp = np.where(feasible, pb.c * alpha / np.where(feasible, f, 1.0), 0.0)
    e_cmp = pb.p0 * t_cmp + pb.eps * f**2 * pb.c * alpha
    t_com = alpha * beta * pb.s
    return build_solution(pb, alpha=alpha, beta=beta, f_hz=f, feasible=feasible, reason=reason.astype(str),
                          t_cmp_s=t_cmp, t_com_s=t_com, e_cmp_j=e_cmp)  # fmt: skip
