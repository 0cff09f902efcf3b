"""Problem P3 of Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021), and its stationarity
conditions: the objective (eq. 20), rounds for a precision (eq. 19), K given E (eq. 21) and E given K (the
cubic, eq. 22, solved by Cardano's formula with a bracketing fallback).

Notation (Luo et al. Sec. III-IV): N devices, K sampled per round, E local iterations per round, gamma the
weight of energy against time (eq. 8), t_p [s] / e_p [J] the device-average time / energy of one local
iteration, t_m [s] / e_m [J] the device-average time / energy of one round of communication, A0 and B0 the
constants of the convergence bound (15), epsilon the target precision.

Only the ratio A = A0/B0 moves the optimum. Objectives are therefore reported *normalised*, i.e. as
``epsilon / B0`` times the expected total cost of eq. (20); pass ``b0_over_epsilon`` to get the cost itself in
the units of eq. (8): (1 - gamma) [$/s] * seconds + gamma [$/J] * joules.

Erratum (derived here, checked by the tests): setting dP3/dE = 0 gives
``2 (a_t + K a_e) E^3 + (b_t + K b_e) E^2 - A/F(K) (b_t + K b_e) = 0`` with a_t = (1-gamma) t_p,
a_e = gamma e_p, b_t = (1-gamma) t_m, b_e = gamma e_m, F(K) = 1 + (N-K)/(K(N-1)); the cubic's leading
coefficient is ``2((1-gamma) t_p + gamma K e_p) / ((1-gamma) t_m + gamma K e_m)``. The paper prints
``(2(1-gamma) t_p + gamma K e_p) / (2(1-gamma) t_m + gamma K e_m)``, which disagrees with its own eq. (28)
(gamma = 0) and with the second derivative in the proof of Theorem 1. This module uses the derived form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = [
    "LuoCostParams",
    "participation_factor",
    "p3_objective",
    "rounds_for_precision",
    "k_given_e",
    "e_given_k",
    "cubic_positive_root",
]


@dataclass(frozen=True)
class LuoCostParams:
    """Inputs of problem P3, Luo et al. eq. (20).

    Attributes:
        n: number of devices N (>= 1).
        t_p_s: average computation time of one local iteration t_p [s] (> 0), eq. (17).
        t_m_s: average communication time of one round t_m [s] (> 0), eq. (17).
        e_p_j: average computation energy of one local iteration e_p [J] (> 0), Lemma 1.
        e_m_j: average communication energy of one round e_m [J] (> 0), Lemma 1.
        gamma: weight of energy against time in [0, 1], eq. (8).
        a0_over_b0: ratio A0/B0 of the constants of bound (15) (> 0), estimated with eq. (25).
    """

    n: int
    t_p_s: float
    t_m_s: float
    e_p_j: float
    e_m_j: float
    gamma: float
    a0_over_b0: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", chk.integer(self.n, "n", 1))
        for name in ("t_p_s", "t_m_s", "e_p_j", "e_m_j", "a0_over_b0"):
            object.__setattr__(self, name, chk.positive(getattr(self, name), name))
        object.__setattr__(self, "gamma", chk.in_range(self.gamma, "gamma", 0.0, 1.0))


def participation_factor(k: Any, n: int) -> np.ndarray | float:
    """F(K) = 1 + (N - K) / (K (N - 1)), the partial-participation factor of bound (15) (dimensionless).

    Written as (N-2)/(N-1) + N/((N-1) K), a posynomial in K. For N = 1 the only choice is K = N = 1 (full
    participation) and F = 1. ``k`` may be an array; no range check (callers validate).
    """
    k = np.asarray(k, dtype=float)
    if n == 1:
        out = np.ones_like(k)
    else:
        out = (n - 2) / (n - 1) + n / ((n - 1) * k)
    return float(out) if out.ndim == 0 else out


def _k_e_arrays(n: int, k: Any, e: Any) -> tuple[np.ndarray, np.ndarray]:
    """``k`` in [1, n] and ``e`` >= 1 as float arrays (the feasible set of P3)."""
    k_arr = chk.real_array(k, "k")
    e_arr = chk.real_array(e, "e")
    chk.require(k_arr, "k", (k_arr >= 1) & (k_arr <= n), f"must be in [1, n={n}]")
    chk.require(e_arr, "e", e_arr >= 1, "must be >= 1")
    return k_arr, e_arr


def p3_objective(params: LuoCostParams, k: Any, e: Any, *, b0_over_epsilon: float = 1.0) -> np.ndarray | float:
    """Objective of P3, Luo et al. eq. (20), for continuous or integer K in [1, N] and E >= 1.

    ``((1-gamma)(t_p E + t_m) + gamma K (e_p E + e_m)) * (A0 + B0 F(K) E^2) / (epsilon E)``, returned as
    ``b0_over_epsilon * ((1-gamma)(t_p E + t_m) + gamma K (e_p E + e_m)) * (A + F(K) E^2) / E`` with
    A = A0/B0 and F from :func:`participation_factor`. With the default ``b0_over_epsilon = 1`` this is the
    normalised cost (cost times epsilon/B0). ``k`` and ``e`` broadcast; a scalar pair gives a ``float``.
    """
    k_arr, e_arr = _k_e_arrays(params.n, k, e)
    scale = chk.positive(b0_over_epsilon, "b0_over_epsilon")
    g = params.gamma
    per_round = (1 - g) * (params.t_p_s * e_arr + params.t_m_s) + g * k_arr * (params.e_p_j * e_arr + params.e_m_j)
    bound = params.a0_over_b0 + participation_factor(k_arr, params.n) * e_arr**2
    out = scale * per_round * bound / e_arr
    return float(out) if np.ndim(out) == 0 else out


def rounds_for_precision(
    k: Any, e: Any, *, n: int, a0: float, b0: float, epsilon: float
) -> np.ndarray | float:
    """Rounds R that make bound (15) equal the precision epsilon, Luo et al. eq. (19) (real-valued).

    ``R = (A0 + B0 F(K) E^2) / (epsilon E)``. The bound guarantees precision epsilon after ``ceil(R)`` rounds.
    ``k`` in [1, n] and ``e`` >= 1 broadcast.
    """
    n = chk.integer(n, "n", 1)
    a0 = chk.positive(a0, "a0")
    b0 = chk.positive(b0, "b0")
    epsilon = chk.positive(epsilon, "epsilon")
    k_arr, e_arr = _k_e_arrays(n, k, e)
    out = (a0 + b0 * participation_factor(k_arr, n) * e_arr**2) / (epsilon * e_arr)
    return float(out) if np.ndim(out) == 0 else out


def k_given_e(params: LuoCostParams, e: float) -> float:
    """Stationary K for a fixed E, Luo et al. eq. (21), before projection onto [1, N].

    ``K' = sqrt((1-gamma) N (t_p E^3 + t_m E^2) / (gamma ((N-2) E^2 + A (N-1)) (e_p E + e_m)))`` with
    A = A0/B0 (the paper's form divided through by B0). dP3/dK is increasing in K, so projecting K' onto
    [1, N] gives the minimiser over K. Returns ``inf`` for gamma = 0 (Theorem 2: K* = N) and 0 for
    gamma = 1 (Theorem 3: K* = 1). For N = 1 returns 1.
    """
    e = chk.positive(e, "e")
    n, g = params.n, params.gamma
    if n == 1:
        return 1.0
    if g == 0.0:
        return math.inf
    # (1 - gamma) / gamma first: no 0/0 when gamma is so small that gamma * (...) underflows
    ratio = (1 - g) / g
    ratio *= n * e * e * (params.t_p_s * e + params.t_m_s)
    ratio /= ((n - 2) * e * e + params.a0_over_b0 * (n - 1)) * (params.e_p_j * e + params.e_m_j)
    return math.sqrt(ratio)


def e_given_k(params: LuoCostParams, k: float) -> float:
    """Stationary E for a fixed K: the positive root of the cubic of Luo et al. eq. (22) (corrected).

    ``(2 alpha / beta) E^3 + E^2 - A / F(K) = 0`` with alpha = (1-gamma) t_p + gamma K e_p [$ per iteration],
    beta = (1-gamma) t_m + gamma K e_m [$ per round], A = A0/B0; see the module docstring for the factor 2.
    The cubic has exactly one positive root (one sign change), which minimises P3 over E > 0 because P3 is
    strictly convex in E (Theorem 1). Not projected onto E >= 1.
    """
    k = chk.real(k, "k")
    if not 1 <= k <= params.n:
        raise OptimizerInputError(f"k={k!r}: must be in [1, n={params.n}]")
    g = params.gamma
    alpha = (1 - g) * params.t_p_s + g * k * params.e_p_j
    beta = (1 - g) * params.t_m_s + g * k * params.e_m_j
    return cubic_positive_root(2.0 * alpha / beta, params.a0_over_b0 / participation_factor(k, params.n))


def _cardano_positive_root(a: float, c: float) -> float:
    """Largest real root of ``a x^3 + x^2 - c`` by Cardano's formula; may be inaccurate or NaN (see caller)."""
    with np.errstate(all="ignore"):
        b = np.float64(1.0) / a  # monic form: x^3 + b x^2 + 0 x + d, d = -c/a (numpy floats: inf, not raise)
        d = -np.float64(c) / a
        p = -b * b / 3.0  # depressed cubic y^3 + p y + q, x = y - b/3
        q = 2.0 * b**3 / 27.0 + d
        disc = (q / 2.0) ** 2 + (p / 3.0) ** 3
        if not (np.isfinite(disc) and np.isfinite(q)):
            return math.nan
        if disc > 0:  # one real root
            s = math.sqrt(disc)
            y = float(np.cbrt(-q / 2.0 + s) + np.cbrt(-q / 2.0 - s))
        else:  # three real roots (two negative): the trigonometric form, k = 0 branch is the largest
            r = math.sqrt(-p / 3.0)
            arg = min(1.0, max(-1.0, (3.0 * q / (2.0 * p)) / r))
            y = 2.0 * r * math.cos(math.acos(arg) / 3.0)
        return float(y - b / 3.0)


def cubic_positive_root(a: float, c: float) -> float:
    """The unique positive root of ``a x^3 + x^2 - c = 0`` for a > 0, c > 0 (the form of Luo eq. (22)).

    Cardano's formula first; it is accepted when its relative residual
    ``|a x^3 + x^2 - c| / (a x^3 + x^2 + c)`` is below 1e-12. Otherwise (cancellation when x << 1/a,
    overflow of (1/a)^6 for tiny a) the root is found by Brent's method on the bracket
    ``[min(sqrt(c/2), cbrt(c/(2a))), min(sqrt(c), cbrt(c/a))]`` (widened by 1e-12 relative), where the
    cubic changes sign.
    """
    a = chk.positive(a, "a")
    c = chk.positive(c, "c")

    def rel_residual(x: float) -> float:
        return abs((a * x + 1.0) * x * x - c) / ((a * x + 1.0) * x * x + c)

    x = _cardano_positive_root(a, c)
    if math.isfinite(x) and x > 0 and rel_residual(x) <= 1e-12:
        return x
    # widened by 1e-12 relative so that rounding cannot put both ends on one side of the root
    lo = min(math.sqrt(c / 2.0), float(np.cbrt(c / (2.0 * a)))) * (1.0 - 1e-12)
    hi = min(math.sqrt(c), float(np.cbrt(c / a))) * (1.0 + 1e-12)

    def f(x: float) -> float:
        return (a * x + 1.0) * x * x / c - 1.0  # scaled by 1/c against overflow

    return float(brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))
