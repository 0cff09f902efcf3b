"""Corners of AnycostFL's "both constraints tight" boundary with the alpha and beta bounds (vectorised).

On boundary ``J`` latency (10a) and energy (10b) are both tight at an interior frequency, the regime of the
paper's Lemma 3 and eq. (26): with computation time ``y = phi*T_max`` [s] and upload time
``x = (1-phi)*T_max`` [s],

    eps * (c*alpha)**3 = y**2 * (E_max - P*x)                      (eq. (26) solved for alpha)

where ``c = tau*D*W`` [cycles]. Fixing alpha (10c) or beta = beta_max (10d) turns this into a cubic in ``y``
with exactly one root in the admissible range. Both roots are found by safeguarded Newton iterations in a
logarithmic variable, in which the equation is close to linear over many decades, and carry ``x`` and ``y``
separately so that whichever is much smaller than ``T_max`` keeps full relative precision.

Notation shared by both solvers, all shape (n,): ``L = min(T_max, E_max/P)`` is the admissible range of
``x`` (upload cannot outlast the deadline nor the energy budget), ``y_lo = T_max - L``, ``d = y - y_lo`` in
``(0, L]`` and ``w = E_max - P*x = q + P*d`` with ``q = max(E_max - P*T_max, 0)`` the energy left for
computation [J].
"""

from __future__ import annotations

import numpy as np

__all__ = ["corner_alpha_fixed", "corner_beta_max"]

_MAX_ITER = 60


def _ranges(t: float, e: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(L, y_lo, q)`` of the module docstring."""
    length = np.minimum(t, e / p)
    return length, np.maximum(0.0, t - e / p), np.maximum(e - p * t, 0.0)


def corner_alpha_fixed(
    t: float, e: np.ndarray, p: np.ndarray, k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Point of ``J`` with alpha fixed: solve ``y**2 * w = k`` with ``k = eps*(c*alpha0)**3`` [J s^2].

    In ``v = ln d`` the residual ``F(v) = 2 ln y + ln w - ln k`` is increasing and convex with slope in
    [1, 3], so Newton's method started at an upper bound of the root descends monotonically onto it. A root
    exists iff ``F`` at ``d = L`` is >= 0, i.e. ``k <= T_max**2 * E_max``; else NaN.

    Args:
        t: T_max [s]. e: E_max [J], shape (n,). p: transmit power [W], shape (n,). k: shape (n,).

    Returns:
        ``(x, y)``: upload and computation time [s], shape (n,).
    """
    length, y_lo, q = _ranges(t, e, p)
    # Upper bounds on the root (y >= d and y >= y_lo): y^2 q <= k, P d^3 <= k, P d y_lo^2 <= k.
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.minimum.reduce([np.sqrt(k / q), np.cbrt(k / p), k / (p * y_lo**2)])
    d = np.where(bound < 0.5 * length, bound, length)
    x = length - d  # exact where d == L; where d < L/2 no cancellation
    exists = k <= t**2 * e
    idx = np.flatnonzero(exists)
    d_, x_, ylo_, q_, p_ = d[idx], x[idx], y_lo[idx], q[idx], p[idx]
    log_k = np.log(k)
    lk_ = log_k[idx]
    for _ in range(_MAX_ITER):
        if idx.size == 0:
            break
        y_, w_ = ylo_ + d_, q_ + p_ * d_
        ly, lw = np.log(y_), np.log(w_)
        f = 2 * ly + lw - lk_
        step = f / (d_ * (2 / y_ + p_ / w_))
        new_d = d_ * np.exp(-step)
        new_x = x_ - d_ * np.expm1(-step)
        # Converged when d and x stop moving, or F is at its rounding floor.
        done = (np.abs(step) * d_ <= 4e-16 * np.minimum(d_, x_ + 1e-300)) | (
            np.abs(f) <= 4e-16 * (2 * np.abs(ly) + np.abs(lw) + np.abs(lk_))
        )
        d[idx], x[idx] = np.where(done, d_, new_d), np.where(done, x_, new_x)
        keep = ~done
        idx = idx[keep]
        d_, x_, ylo_, q_, p_, lk_ = new_d[keep], new_x[keep], ylo_[keep], q_[keep], p_[keep], lk_[keep]
    x, y = np.maximum(x, 0.0), np.minimum(y_lo + d, t)  # a root at x = 0 may land an ulp outside
    return np.where(exists, x, np.nan), np.where(exists, y, np.nan)


def corner_beta_max(t: float, e: np.ndarray, p: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Point of ``J`` with beta = beta_max: solve ``y**2 * w = k * x**3``, ``k = eps*c**3/(beta_max*s)**3``.

    There alpha = x / (beta_max*s). With ``d = L*sigmoid(u)``, ``x = L*sigmoid(-u)`` the residual
    ``F(u) = 2 ln y + ln w - 3 ln x - ln k`` is increasing with slope in [1, 3] and runs from -inf to +inf,
    so the root is unique and bracketed by ``u0 - F(u0)*[1, 1/3]`` after one evaluation; Newton steps that
    leave the bracket are replaced by bisection.

    Args:
        t: T_max [s]. e: E_max [J], shape (n,). p: transmit power [W], shape (n,). k: shape (n,), [J/s].

    Returns:
        ``(x, y)``: upload and computation time [s], shape (n,).
    """
    length, y_lo, q = _ranges(t, e, p)
    u = _beta_guess(t, e, p, k, length, y_lo, q)
    idx = np.arange(e.shape[0])
    u_, lo_, hi_ = u.copy(), np.full_like(u, -np.inf), np.full_like(u, np.inf)
    len_, ylo_, q_, p_, lk_ = length, y_lo, q, p, np.log(k)
    for _ in range(_MAX_ITER):
        if idx.size == 0:
            break
        s_pos, s_neg = _sigmoid(u_), _sigmoid(-u_)
        d_, x_ = len_ * s_pos, len_ * s_neg
        y_, w_ = ylo_ + d_, q_ + p_ * d_
        ly, lw, lx = np.log(y_), np.log(w_), np.log(x_)
        f = 2 * ly + lw - 3 * lx - lk_
        slope = s_neg * d_ * (2 / y_ + p_ / w_) + 3 * s_pos
        # Bracket from the sign of F, tightened by the slope bounds [1, 3].
        pos = f > 0
        lo_ = np.maximum(lo_, np.where(pos, u_ - f, u_ - f / 3))
        hi_ = np.minimum(hi_, np.where(pos, u_ - f / 3, u_ - f))
        new = u_ - f / slope
        new = np.where((new >= lo_) & (new <= hi_), new, 0.5 * (lo_ + hi_))
        done = (np.abs(new - u_) <= 4e-16 * np.maximum(1.0, np.abs(u_))) | (
            np.abs(f) <= 4e-16 * (2 * np.abs(ly) + np.abs(lw) + 3 * np.abs(lx) + np.abs(lk_))
        )
        u[idx] = np.where(done, u_, new)
        keep = ~done
        idx = idx[keep]
        u_, lo_, hi_ = new[keep], lo_[keep], hi_[keep]
        len_, ylo_, q_, p_, lk_ = len_[keep], ylo_[keep], q_[keep], p_[keep], lk_[keep]
    x = length * _sigmoid(-u)
    y = y_lo + length * _sigmoid(u)
    return x, y


def _beta_guess(t, e, p, k, length, y_lo, q) -> np.ndarray:
    """Starting logit u = ln(d/x) for :func:`corner_beta_max` from the two one-sided balances.

    If upload is short (y ~ T_max): T_max**2 * E_max ~ k x**3. If computation is short (x ~ L): the
    upper bound on d of :func:`corner_alpha_fixed` with ``k L**3`` on the right-hand side.
    """
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        x_short = np.cbrt(t**2 * e / k)
        kl3 = k * length**3
        d_short = np.minimum.reduce([np.sqrt(kl3 / q), np.cbrt(kl3 / p), kl3 / (p * y_lo**2)])
        u = np.where(
            x_short < 0.5 * length,
            np.log((length - x_short) / x_short),
            np.where(d_short < 0.5 * length, np.log(d_short / (length - d_short)), 0.0),
        )
    return np.where(np.isfinite(u), u, 0.0)


def _sigmoid(u: np.ndarray) -> np.ndarray:
    """Logistic function ``1 / (1 + exp(-u))``, accurate in both tails."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-u))
