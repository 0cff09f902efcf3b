"""AnycostFL's per-device problem with a static (idle) compute power, solved numerically (vectorised).

The paper's computation energy, eq. (7), is the dynamic term only, ``E_cmp = eps*f**2*c*alpha`` [J] (power
``eps*f**3`` [W]), and its closed form (:mod:`optimizers.anycost`) rests on it: the energy-optimal frequency
is then the lowest one that meets the deadline. With a static platform power ``P_static`` [W] drawn while
computing, compute power is ``P_static + eps*f**3`` and

    E_cmp = (P_static + eps*f**3) * T_cmp = g(f) * c * alpha,   g(f) = P_static/f + eps*f**2  [J/cycle]

with ``T_cmp = c*alpha/f`` [s] (eq. (6)) and ``c = tau*D*W`` [cycles]. This replaces eq. (7) in (10b); the
learning gain ``alpha**4*beta`` (Definition 3) and (10a), (10c)-(10e) are unchanged, and the upload energy is
still ``P*T_com`` (eq. (9)). ``g`` is convex with its minimum at ``f* = (P_static/(2*eps))**(1/3)``: for a
fixed workload energy no longer falls with the frequency, so Lemma 3, eqs. (20)-(26) and the eq. (23) bounds
do not hold.

Method. With ``x = alpha*beta*s = T_com`` [s], ``s = S/r`` [s], the gain is ``alpha**3*x/s``. The problem is a
geometric program (:mod:`optimizers.anycost_gp`): in ``(ln alpha, ln x, ln f)`` the feasible set is convex
and ``ln(alpha**3*x)`` linear, so ``H(ln f)``, the best log-gain at a fixed frequency, is concave (a partial
maximum of a jointly concave function). It is maximised by a golden-section search over ``ln f``, for all
devices at once, on the frequencies where ``alpha_min`` with beta -> 0+ is feasible: ``f > c*alpha_min/T_max``
and ``g(f) < E_max/(c*alpha_min)`` (an interval; its ends are roots of a convex function found by Newton's
method from outside, which converges monotonically). At a fixed ``f`` both budgets are linear in
``(alpha, x)``:

    (c/f)*alpha + x <= T_max,    c*g(f)*alpha + P*x <= E_max,    x <= beta_max*s*alpha,  alpha_min <= alpha <= 1

so ``x_max(alpha)`` is the minimum of three lines and ``ln(alpha**3*x_max(alpha))`` is concave in alpha. Its
maximum is at a bound of alpha, at the tangent point ``alpha = 3C/(4A)`` of a budget line ``A*alpha + B*x = C``
or where two lines cross: seven candidates, all evaluated, the best kept (exact, no iteration).

Where alpha = 1 and beta = beta_max (the gain's cap) is feasible the search is skipped and the least-energy
frequency among those that allow it is returned: ``f*`` clipped to ``[max(f_min, c/(T_max - beta_max*s)),
f_max]``. The returned (alpha, beta, f) meet (10a)-(10e) to rounding error: ``x`` is recomputed from the
reported costs. With ``P_static = 0`` the same code solves the paper's problem (a check of the closed form).
"""

from __future__ import annotations

import math

import numpy as np

from optimizers.anycost_model import (
    AnycostDevices,
    AnycostSolution,
    _Problem,
    build_problem,
    build_solution,
    energy_per_cycle,
    infeasibility_reason,
    tightest_reason,
)

__all__ = ["solve_anycost_numeric", "solve_devices"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618...
#: Width of the final golden-section bracket in ln f [-]: f is located to ~1e-12 relative.
_LOG_F_TOL = 1e-12
_NEWTON_ITER = 200
#: A frequency this close (relative) to f_min or f_max is put on it; x is then recomputed, so (10a)-(10e)
#: still hold exactly and the gain moves by ~1e-10 at most.
_SNAP_REL = 1e-10


def solve_anycost_numeric(
    devices: AnycostDevices,
    *,
    t_max_s: float,
    cycles_per_sample: float,
    update_bits: float,
    epochs: float = 1,
    alpha_min: float = 0.25,
    beta_max: float = 1 / 15,
) -> AnycostSolution:
    """Optimal (alpha, beta, f) per device by the numeric search of the module docstring, for every device.

    :func:`optimizers.anycost.solve_anycost` uses it for the devices with ``p_static_w > 0`` and the closed
    form for the others; this entry point applies it to all (with ``p_static_w = 0`` it agrees with the
    closed form to ~1e-10 in the gain). Same arguments, units and output as ``solve_anycost``.
    """
    pb = build_problem(
        devices, t_max_s=t_max_s, cycles_per_sample=cycles_per_sample, update_bits=update_bits,
        epochs=epochs, alpha_min=alpha_min, beta_max=beta_max,
    )  # fmt: skip
    reason = infeasibility_reason(pb)
    n = len(devices)
    out = dict(alpha=np.zeros(n), beta=np.zeros(n), f_hz=np.zeros(n), feasible=np.zeros(n, dtype=bool),
               reason=reason, t_cmp_s=np.zeros(n), t_com_s=np.zeros(n), e_cmp_j=np.zeros(n))  # fmt: skip
    solve_devices(pb, np.flatnonzero(reason == ""), out)
    return build_solution(pb, **out)


def solve_devices(pb: _Problem, idx: np.ndarray, out: dict[str, np.ndarray]) -> None:
    """Solve the devices ``idx`` (feasible by :func:`~optimizers.anycost_model.infeasibility_reason`) and write
    alpha, beta, f_hz [Hz], feasible, reason, t_cmp_s, t_com_s [s] and e_cmp_j [J] into ``out`` at ``idx``.

    A device within rounding error of the feasibility boundary, where no point with ``x > 0`` is found, is
    reported infeasible with :func:`~optimizers.anycost_model.tightest_reason`.
    """
    if idx.size == 0:
        return
    sub = pb.subset(idx)
    with np.errstate(all="ignore"):
        alpha, f = _search(sub)
        alpha = np.clip(alpha, sub.alpha_min, 1.0)
        f = np.clip(f, sub.f_min, sub.f_max)
        for bound in (sub.f_min, sub.f_max):  # the search stops within ~1e-12 of a bound it aims at
            f = np.where(np.abs(f - bound) <= _SNAP_REL * bound, bound, f)
        t_cmp = sub.c * alpha / f
        e_cmp = sub.p0 * t_cmp + sub.eps * f**2 * sub.c * alpha
        x = np.minimum.reduce([sub.beta_max * sub.s * alpha, sub.t - t_cmp, (sub.e - e_cmp) / sub.p])
    ok = np.isfinite(x) & (x > 0)
    beta = np.where(ok, np.minimum(x / (alpha * sub.s), sub.beta_max), 0.0)
    out["reason"][idx[~ok]] = tightest_reason(sub)[~ok]
    for name, value in (("alpha", alpha), ("beta", beta), ("f_hz", f), ("t_cmp_s", t_cmp), ("t_com_s", x),
                        ("e_cmp_j", e_cmp)):  # fmt: skip
        out[name][idx] = np.where(ok, value, 0.0)
    out["feasible"][idx] = ok


def _search(pb: _Problem) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, f [Hz]) maximising the gain per device: the cap check, then golden section over ln f."""
    c, t, e, p, eps, p0 = pb.c, pb.t, pb.e, pb.p, pb.eps, pb.p0
    bs = pb.beta_max * pb.s
    # The gain's cap alpha = 1, beta = beta_max: take the least-energy frequency that meets the deadline.
    f_cap = np.clip(np.cbrt(p0 / (2 * eps)), np.maximum(pb.f_min, c / (t - bs)), pb.f_max)
    capped = (t > bs) & (c / f_cap + bs <= t) & (c * energy_per_cycle(pb, f_cap) + p * bs <= e)
    alpha, f = np.ones_like(c), f_cap.copy()
    rest = np.flatnonzero(~capped)
    if rest.size:
        sub = pb.subset(rest)
        lo, hi = _frequency_range(sub)
        alpha[rest], f[rest] = _golden(sub, np.log(lo), np.log(hi))
    return alpha, f


def _frequency_range(pb: _Problem) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` [Hz]: the frequencies where alpha_min with beta -> 0+ meets both budgets, ends included.

    ``f > c*alpha_min/T_max`` (10a) and ``g(f) < K = E_max/(c*alpha_min)`` (10b), within [f_min, f_max]. Where an
    end of ``[max(f_min, c*alpha_min/T_max), f_max]`` breaks (10b) it moves to the root of ``g(f) = K`` on its
    side, by Newton's method from that end (g is convex, so the iterates approach the root monotonically
    from outside the interval).
    """
    ca = pb.c * pb.alpha_min
    k = pb.e / ca
    lo = np.maximum(pb.f_min, ca / pb.t)
    hi = pb.f_max.copy()
    for f in (lo, hi):
        todo = np.flatnonzero(energy_per_cycle(pb, f) >= k)
        for _ in range(_NEWTON_ITER):
            if todo.size == 0:
                break
            ft, p0, eps = f[todo], pb.p0[todo], pb.eps[todo]
            step = (p0 / ft + eps * ft**2 - k[todo]) / (2 * eps * ft - p0 / ft**2)
            f[todo] = ft - step
            todo = todo[np.abs(step) > 1e-15 * ft]
    return lo, np.maximum(hi, lo)


def _golden(pb: _Problem, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Golden-section search of the concave ``H(u)``, ``u = ln f``, on ``[a, b]``; returns (alpha, f) [-, Hz].

    Ties keep the left part (a tie of a concave function brackets its maximum). The iteration count is
    set by the widest bracket, so the loop runs over whole arrays without masks.
    """
    width = float(np.max(b - a)) if a.size else 0.0
    n_iter = max(0, math.ceil(math.log(max(width, _LOG_F_TOL) / _LOG_F_TOL) / -math.log(_GOLDEN)))
    uc, ud = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    hc, _ = _best_at_frequency(pb, np.exp(uc))
    hd, _ = _best_at_frequency(pb, np.exp(ud))
    for _ in range(n_iter):
        left = hc >= hd  # the maximum lies in [a, ud]
        b = np.where(left, ud, b)
        a = np.where(left, a, uc)
        new = np.where(left, b - _GOLDEN * (b - a), a + _GOLDEN * (b - a))
        h_new, _ = _best_at_frequency(pb, np.exp(new))
        uc, ud = np.where(left, new, ud), np.where(left, uc, new)
        hc, hd = np.where(left, h_new, hd), np.where(left, hc, h_new)
    u = np.where(hc >= hd, uc, ud)
    f = np.exp(u)
    _, alpha = _best_at_frequency(pb, f)
    return alpha, f


def _best_at_frequency(pb: _Problem, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha**3 * x_max, alpha)`` at the best alpha for the frequency ``f`` [Hz], shape (n,) each.

    ``x_max(alpha) = min(beta_max*s*alpha, T_max - (c/f)*alpha, (E_max - c*g(f)*alpha)/P)`` [s]; the
    candidates are alpha_min, 1, the tangent points ``3C/(4A)`` of the two budget lines and the three
    crossings of the lines, clipped into [alpha_min, 1]. The score is negative where no x > 0 exists.
    """
    lat = pb.c / f  # [s] per unit alpha
    en = pb.c * energy_per_cycle(pb, f)  # [J] per unit alpha
    bs = pb.beta_max * pb.s
    t, e, p = pb.t, pb.e, pb.p
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = np.stack([
            np.full_like(f, pb.alpha_min), np.ones_like(f),
            0.75 * t / lat, 0.75 * e / en,  # tangents of alpha^3 * x on the latency and energy lines
            t / (lat + bs), e / (en + p * bs),  # each budget line meets x = beta_max*s*alpha
            (e - p * t) / (en - p * lat),  # the two budget lines meet
        ])  # fmt: skip
    cand = np.clip(np.nan_to_num(cand, nan=pb.alpha_min), pb.alpha_min, 1.0)
    x = np.minimum.reduce([bs * cand, t - lat * cand, (e - en * cand) / p])
    score = cand**3 * x
    best = np.argmax(score, axis=0)
    pick = np.arange(f.shape[0])
    return score[best, pick], cand[best, pick]
