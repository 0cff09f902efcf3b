"""AnycostFL's per-device training strategy in closed form (Li et al., INFOCOM 2023, Sec. IV-D).

For every device the closed form returns the (alpha, beta, f) that maximise the learning gain
``alpha**4 * beta`` (eq. (19), Definition 3) under the latency, energy, shrinking, compression and frequency
constraints (10a)-(10e), for any number of devices at once (numpy, no loop over devices).

Method. With ``c = tau*D*W`` [cycles], ``s = S/r`` [s] and ``x = alpha*beta*s = T_com`` [s] the gain is
``alpha**3 * x / s``. Eliminating ``f`` leaves a 2-D problem in (alpha, x) whose feasible set is convex in
(log alpha, log x) (a projection of the geometric program of :mod:`optimizers.anycost_gp`) and whose
objective is linear there, so the optimum is a tangent point of one curved boundary or a corner of two
boundaries. The boundaries are

- ``A``: alpha = alpha_min or alpha = 1 (10c);           ``B``: beta = beta_max, i.e. x = beta_max*s*alpha (10d);
- ``Fmax``: latency tight at f = f_max (10a, 10e);        ``Fmin``: energy tight at f = f_min (10b, 10e);
- ``J``: latency and energy both tight at an interior f, the paper's Lemma 3 / eq. (20) regime, where
  ``T_cmp = phi*T_max`` and ``alpha**3 = (phi*T_max)**2 * (E_max - (1-phi)*T_max*P) / (eps*c**3)`` (eq. (26)).

Eight candidates cover every such point:

1. the tangent on ``J``: the stationary point phi_s1 of eq. (24), with the ERRATA sign (both roots solve
   ``4a*phi**2 - (6a - 3E)*phi - 2(E - a) = 0``, ``a = P*T_max``, ``E = E_max``). The other root phi_s2 is never
   a candidate: on the admissible range ``phi > max(0, 1 - E/a)`` (where E_cmp > 0) eq. (21) is log-concave,
   so it has one stationary point there, phi_s1; phi_s2 lies at or below that range;
2. the tangent on ``Fmax`` (phi = 3/4 at f = f_max) and 3. on ``Fmin`` (varphi = 3/4 at f = f_min);
4.-5. the best point on the line alpha = alpha_min and on alpha = 1: the largest upload time allowed by
   ``B``, ``Fmax``, ``Fmin`` and ``J`` (a monotone cubic, :mod:`optimizers.anycost_corners`); any corner of
   ``A`` with another boundary that is optimal is this point;
6. the best point on ``B``, where the gain grows like alpha**4: the largest alpha allowed by alpha <= 1,
   ``Fmax``, ``Fmin`` and ``J`` (again a monotone cubic);
7.-8. the corners of ``J`` with ``Fmax`` and ``Fmin``: both constraints tight at f = f_max or f = f_min (a
   2x2 linear solve).

Each candidate is checked against the exact constraints (10a)-(10e) and the best feasible one is kept, so the
answer is right also where the paper's eq. (23) bounds are not sufficient (alpha capped at 1, beta at
beta_max, f at f_min or f_max). Candidate 4 is feasible whenever the device is.

Devices that cannot meet the constraints even at alpha = alpha_min, beta -> 0+ are reported infeasible with
a reason (see :mod:`optimizers.anycost_model`).

Devices with a static compute power (``AnycostDevices.p_static_w > 0``) break eq. (7), on which all of the
above rests; they are solved by the numeric search of :mod:`optimizers.anycost_static` instead. Devices with
``p_static_w == 0`` (the default) take the closed form, unchanged.
"""

from __future__ import annotations

import numpy as np

from optimizers.anycost_corners import corner_alpha_fixed, corner_beta_max
from optimizers.anycost_gp import solve_anycost_gp
from optimizers.anycost_static import solve_anycost_numeric, solve_devices
from optimizers.anycost_model import (
    REASON_CONFLICT,
    REASON_ENERGY,
    REASON_LATENCY,
    REASON_LATENCY_ENERGY,
    AnycostDevices,
    AnycostSolution,
    _Problem,
    aggregation_weights,
    build_problem,
    build_solution,
    infeasibility_reason,
    tightest_reason,
)

solve_gp = solve_anycost_gp
"""The per-device geometric-program reference under the name issue #4 uses (``optimizers.anycost.solve_gp``)."""

__all__ = [
    "AnycostDevices",
    "AnycostSolution",
    "solve_anycost",
    "solve_anycost_gp",
    "solve_gp",
    "solve_anycost_numeric",
    "aggregation_weights",
    "stationary_phi",
    "REASON_LATENCY",
    "REASON_ENERGY",
    "REASON_LATENCY_ENERGY",
    "REASON_CONFLICT",
]

#: Relative slack allowed when checking a candidate against the constraints; the chosen point is then
#: pulled back onto the feasible set, so the returned strategy satisfies (10a)-(10e) to rounding error.
_CANDIDATE_TOL = 1e-10


def solve_anycost(
    devices: AnycostDevices,
    *,
    t_max_s: float,
    cycles_per_sample: float,
    update_bits: float,
    epochs: float = 1,
    alpha_min: float = 0.25,
    beta_max: float = 1 / 15,
) -> AnycostSolution:
    """Optimal (alpha, beta, f) per device in closed form, AnycostFL eqs. (19)-(26) with exact constraints.

    Args:
        devices: per-device arrays, shape (n,) each.
        t_max_s: round deadline ``T_max`` [s], > 0.
        cycles_per_sample: CPU cycles to train the full model on one sample, ``W`` [cycles/sample], > 0.
        update_bits: size of the full uncompressed update ``S`` [bits], > 0.
        epochs: local epochs ``tau`` [-], > 0.
        alpha_min: smallest shrinking factor, in (0, 1] (paper: 1/4).
        beta_max: largest compression rate, in (0, 1] (paper: 1/15).

    Devices with ``devices.p_static_w > 0`` are solved numerically (:mod:`optimizers.anycost_static`), the
    others in closed form; a fleet with ``p_static_w`` all zero gives exactly the paper's closed form.

    Returns:
        :class:`AnycostSolution` with arrays of shape (n,).

    Raises:
        OptimizerInputError: a field or setting is out of range (the message names it).
    """
    pb = build_problem(
        devices, t_max_s=t_max_s, cycles_per_sample=cycles_per_sample, update_bits=update_bits,
        epochs=epochs, alpha_min=alpha_min, beta_max=beta_max,
    )  # fmt: skip
    reason = infeasibility_reason(pb)
    static = pb.p0 > 0
    feasible = (reason == "") & ~static  # the closed form's devices
    n = feasible.shape[0]
    alpha, x, y = np.zeros(n), np.zeros(n), np.ones(n)
    idx = np.flatnonzero(feasible)  # infeasible devices need no candidates
    with np.errstate(all="ignore"):
        sub = pb.subset(idx)
        cand_alpha, cand_x, cand_y = _candidates(sub)
        score = np.where(_candidate_ok(sub, cand_alpha, cand_x, cand_y), cand_alpha**3 * cand_x, -np.inf)
    best = np.argmax(score, axis=0) if idx.size else np.zeros(0, dtype=int)
    pick = np.arange(idx.size)
    alpha[idx], x[idx], y[idx] = cand_alpha[best, pick], cand_x[best, pick], cand_y[best, pick]
    stuck = idx[~np.isfinite(score[best, pick])]  # only within rounding error of the feasibility boundary
    if stuck.size:
        reason[stuck] = tightest_reason(pb)[stuck]
        feasible[stuck] = False
    out = _finish(pb, alpha, x, y, feasible, reason)
    solve_devices(pb, np.flatnonzero(static & (reason == "")), out)
    return build_solution(pb, **out)


def _finish(
    pb: _Problem, alpha: np.ndarray, x: np.ndarray, y: np.ndarray, feasible: np.ndarray, reason: np.ndarray
) -> dict[str, np.ndarray]:
    """Turn a chosen (alpha, x = T_com, y = T_max - T_com) per device into a feasible strategy and its costs.

    The frequency is the lowest one that meets the deadline, ``f = clip(c*alpha/y, f_min, f_max)``; where
    latency and energy are both tight this is eq. (26)'s ``f = alpha*c/(phi*T_max)``, elsewhere it is the
    least-energy frequency. alpha and f within 1e-12 of a bound are put on it. ``x`` is then trimmed so
    that (10a), (10b) and (10d) hold to rounding error. Returns the arguments of ``build_solution``.
    """
    with np.errstate(all="ignore"):
        alpha = np.where(feasible, _snap(np.clip(alpha, pb.alpha_min, 1.0), pb.alpha_min, 1.0), 1.0)
        f = np.where(feasible, _snap(np.clip(pb.c * alpha / y, pb.f_min, pb.f_max), pb.f_min, pb.f_max), pb.f_min)
        t_cmp = pb.c * alpha / f
        e_cmp = pb.eps * f**2 * pb.c * alpha
        x = np.minimum.reduce([x, pb.t - t_cmp, (pb.e - e_cmp) / pb.p, pb.beta_max * pb.s * alpha])
    lost = feasible & ~(x > 0)  # only within rounding error of the feasibility boundary
    if lost.any():
        reason[lost] = tightest_reason(pb)[lost]
        feasible = feasible & ~lost
    alpha = np.where(feasible, alpha, 0.0)
    beta = np.zeros_like(alpha)
    beta[feasible] = np.minimum(x[feasible] / (alpha[feasible] * pb.s[feasible]), pb.beta_max)
    f = np.where(feasible, f, 0.0)
    t_cmp = np.where(feasible, t_cmp, 0.0)
    e_cmp = np.where(feasible, e_cmp, 0.0)
    t_com = np.where(feasible, x, 0.0)
    return dict(alpha=alpha, beta=beta, f_hz=f, feasible=feasible, reason=reason, t_cmp_s=t_cmp, t_com_s=t_com,
                e_cmp_j=e_cmp)


def _snap(v: np.ndarray, lo, hi, rel: float = 1e-12) -> np.ndarray:
    """Put values within ``rel`` of a bound exactly on it (a bound hit up to rounding is reported as hit)."""
    v = np.where(np.abs(v - lo) <= rel * np.abs(lo), lo, v)
    return np.where(np.abs(v - hi) <= rel * np.abs(hi), hi, v)


def _candidate_ok(pb: _Problem, alpha: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether each candidate (shape (K, n)) meets (10a)-(10e) to relative tolerance ``_CANDIDATE_TOL``."""
    tol = _CANDIDATE_TOL
    ok = np.isfinite(alpha) & np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    ok &= (alpha >= pb.alpha_min * (1 - tol)) & (alpha <= 1 + tol)
    ok &= x <= pb.beta_max * pb.s * alpha * (1 + tol)
    f = np.clip(pb.c * alpha / y, pb.f_min, pb.f_max)
    ok &= pb.c * alpha / f + x <= pb.t * (1 + tol)
    ok &= pb.eps * f**2 * pb.c * alpha + pb.p * x <= pb.e * (1 + tol)
    return ok


def stationary_phi(a: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stationary points of eq. (21) in phi, AnycostFL eq. (24) with the ERRATA sign (second root ``+ 3/4``).

    The roots of ``4a*phi**2 - (6a - 3E)*phi - 2(E - a) = 0`` with ``a = P*T_max`` [J], ``E = E_max`` [J]:
    ``phi_s1 = (sqrt(psi) - 3E)/(8a) + 3/4`` and ``phi_s2 = -(sqrt(psi) + 3E)/(8a) + 3/4``,
    ``psi = 4a**2 - 4aE + 9E**2``. They are computed through ``z = 1 - phi``, the roots of
    ``4a*z**2 - (2a + 3E)*z + E = 0``, in a form free of cancellation.

    Returns:
        ``(phi_s1, z_s1, phi_s2, z_s2)``, each shape (n,), with ``z = 1 - phi``.
    """
    root = np.sqrt(4 * a**2 - 4 * a * e + 9 * e**2)
    z2 = (2 * a + 3 * e + root) / (8 * a)
    z1 = 2 * e / (2 * a + 3 * e + root)  # = E / (4a z2), Vieta
    return 1 - z1, z1, 1 - z2, z2


def _candidates(pb: _Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate optima (alpha, x = T_com [s], y = T_max - T_com [s]), each shape (K, n), K = 8.

    See the module docstring. ``y`` is carried separately from ``x`` so that the computation time keeps
    full precision where ``x`` is close to T_max.
    """
    c, s, t, e, p, eps = pb.c, pb.s, pb.t, pb.e, pb.p, pb.eps
    f_min, f_max, a_min, b_max = pb.f_min, pb.f_max, pb.alpha_min, pb.beta_max
    a = p * t
    out_alpha, out_x, out_y = [], [], []

    def add(alpha, x, y):
        out_alpha.append(alpha)
        out_x.append(x)
        out_y.append(y)

    # Tangent on J, eq. (24) root s1 put into eq. (26): alpha^3 = (phi T)^2 (E - (1-phi) T P) / (eps c^3).
    phi1, z1, _, _ = stationary_phi(a, e)
    add(np.cbrt((phi1 * t) ** 2 * (e - a * z1) / (eps * c**3)), z1 * t, phi1 * t)
    # Tangent on Fmax: max alpha^3 x s.t. c alpha / f_max + x = T  ->  x = T/4 (phi = 3/4).
    add(3 * t * f_max / (4 * c), np.full_like(c, t / 4), np.full_like(c, 0.75 * t))
    # Tangent on Fmin: max alpha^3 x s.t. eps c alpha f_min^2 + P x = E  ->  P x = E/4 (varphi = 3/4).
    x = e / (4 * p)
    add(3 * e / (4 * eps * c * f_min**2), x, t - x)

    # Best point on the line alpha = alpha0 (10c): the largest x allowed by (10d), Fmax, Fmin and J. The
    # cubic for J is solved only where J binds, i.e. where the point allowed by the others violates J.
    for alpha0 in (a_min, 1.0):
        k = eps * (c * alpha0) ** 3
        x = np.minimum.reduce([b_max * s * alpha0, t - c * alpha0 / f_max, (e - eps * c * alpha0 * f_min**2) / p])
        y = t - x
        bind = np.flatnonzero((x > 0) & (k > y**2 * (e - p * x)))
        x_j, y_j = corner_alpha_fixed(t, e[bind], p[bind], k[bind])
        x[bind], y[bind] = x_j, y_j  # NaN where no x > 0 meets J: the line is infeasible
        add(np.full_like(c, alpha0), x, y)

    # Best point on the line beta = beta_max (10d), x = beta_max*s*alpha: gain ~ alpha^4 grows along it,
    # so take the largest alpha allowed by alpha <= 1, Fmax, Fmin and J (the cubic only where J binds).
    bs = b_max * s
    al = np.minimum.reduce([np.ones_like(c), t * f_max / (c + f_max * bs), e / (eps * c * f_min**2 + p * bs)])
    x = bs * al
    y = t - x
    k = eps * c**3 / bs**3
    bind = np.flatnonzero(k * x**3 > y**2 * (e - p * x))
    x_j, y_j = corner_beta_max(t, e[bind], p[bind], k[bind])
    x[bind], y[bind], al[bind] = x_j, y_j, x_j / bs[bind]
    add(al, x, y)

    # Corners of J with a frequency bound: latency and energy both tight at f = f_max or f = f_min.
    for f0 in (f_max, f_min):
        al = (e - a) / (c * (eps * f0**2 - p / f0))
        y = c * al / f0
        add(al, t - y, y)

    return np.stack(out_alpha), np.stack(out_x), np.stack(out_y)
