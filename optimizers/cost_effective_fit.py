"""A measured design rule for Luo et al.'s K and E ("Cost-Effective Federated Learning Design", INFOCOM 2021):
a rounds-to-target model fitted to sampled runs, and the (K, E) that minimises the straggler-aware expected
cost with it.

Why not bound (15): in the simulator the rounds to a target loss fall with E much faster than (15)'s
``A0/E + B0 E`` says, and with few clients per round (K = 1) they grow several-fold where (15) predicts
less than 2x. The model here takes its shape from measured rounds instead:

    ln R(K, E) = a + b / E + c K^(-p),    b > 0, c > 0, p in [P_MIN, P_MAX]      (model M)

- ``b / E``: rounds fall with more local steps and flatten out; with eta_r = eta_0 / (1 + r) the progress of R
  rounds grows like E ln R, so ln R is close to linear in 1 / E.
- ``c K^(-p)``: the penalty of sampling few clients (client drift on non-i.i.d. data), largest at K = 1 and
  vanishing as K grows; ``p`` is fitted.
- ``a``: the scale, set by the target loss.

The fit is least squares on ln R over the sampled designs: for each p, (a, b, c) is a linear least-squares
problem; p is found by a grid over [P_MIN, P_MAX] refined by a bounded scalar search. A fit is refused
(:class:`RoundsFitError`) when it cannot be trusted: fewer designs than parameters plus one held out, fewer than
3 distinct K or 2 distinct E, a round count that is not finite and positive (a run that never reached its
loss), or a fitted b or c that is not positive (rounds that do not fall as E or K grow).

The expected cost of a design is eq. (14) with Lemma 2's exact straggler (eq. 13), not eq. (17):

    C(K, E) = ((1 - gamma) E[t^(r)](K, E) + gamma K (e_p E + e_m)) R(K, E)                             (14)

minimised over integers K in [1, N] and E in the sampled range of E (the model is not trusted outside it).
Pure numpy/scipy: no torch, simpy or edgefl.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from optimizers import _checks as chk
from optimizers.cost_effective_expectation import straggler_probabilities
from optimizers.errors import OptimizerInputError

__all__ = ["P_MIN", "P_MAX", "RoundsFitError", "RoundsFit", "MeasuredChoice", "fit_rounds", "rounds_model",
           "expected_round_costs", "choose_ke"]  # fmt: skip

P_MIN, P_MAX = 0.25, 4.0  # range of the exponent p of K in model M
N_PARAMETERS = 4  # a, b, c, p


class RoundsFitError(OptimizerInputError):
    """The rounds-to-target model cannot be fitted or trusted from these samples."""


def rounds_model(k: Any, e: Any, a: float, b: float, c: float, p: float) -> np.ndarray:
    """Model M: R(K, E) = exp(a + b / E + c K^(-p)) [rounds], element-wise over ``k`` and ``e``."""
    k = np.asarray(k, dtype=float)
    e = np.asarray(e, dtype=float)
    return np.exp(a + b / e + c * k ** (-p))


@dataclass(frozen=True)
class RoundsFit:
    """Fitted model M and how well it predicts.

    Attributes:
        a, b, c, p: the parameters of ln R = a + b / E + c K^(-p).
        rms_log: root mean square of ln(R_fit / R) over the samples it was fitted to.
        holdout_errors: for each sample i, R predicted by the fit to the other samples over R_i measured, minus 1
            (leave-one-out), in the order given; ``holdout_error``: the largest magnitude among them.
        n_samples: designs fitted.
    """

    a: float
    b: float
    c: float
    p: float
    rms_log: float
    holdout_errors: tuple[float, ...]
    holdout_error: float
    n_samples: int

    def rounds(self, k: Any, e: Any) -> np.ndarray:
        """Predicted rounds to the target, model M."""
        return rounds_model(k, e, self.a, self.b, self.c, self.p)


def _solve_linear(k: np.ndarray, e: np.ndarray, y: np.ndarray, p: float) -> tuple[np.ndarray, float]:
    x = np.column_stack([np.ones_like(k), 1.0 / e, k ** (-p)])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    return coef, float(resid @ resid)


def _least_squares(k: np.ndarray, e: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float, float]:
    """(a, b, c, p, sse) minimising the squared error of ln R; p by grid then bounded refinement."""
    grid = np.linspace(P_MIN, P_MAX, 76)
    sse = np.array([_solve_linear(k, e, y, p)[1] for p in grid])
    i = int(np.argmin(sse))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    best_p, best_sse = float(grid[i]), float(sse[i])
    if hi > lo:
        res = minimize_scalar(lambda p: _solve_linear(k, e, y, p)[1], bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-9})  # fmt: skip
        if res.fun <= best_sse:
            best_p, best_sse = float(res.x), float(res.fun)
    coef, sse_p = _solve_linear(k, e, y, best_p)
    return float(coef[0]), float(coef[1]), float(coef[2]), best_p, sse_p


def fit_rounds(k: Any, e: Any, rounds: Any) -> RoundsFit:
    """Fit model M to sampled designs: ``k``, ``e`` shape (M,) (K_i >= 1, E_i >= 1), ``rounds`` shape (M,) the
    measured rounds to the target loss (seed means). Raises :class:`RoundsFitError` when the fit cannot be
    trusted (see the module docstring)."""
    k = chk.one_dimensional(k, "k")
    e = chk.one_dimensional(e, "e")
    r = np.asarray(rounds, dtype=float).reshape(-1)
    if not (k.shape == e.shape == r.shape):
        raise RoundsFitError(f"k, e, rounds: lengths {k.size}, {e.size}, {r.size}: must be equal")
    chk.require(k, "k", k >= 1, "must be >= 1")
    chk.require(e, "e", e >= 1, "must be >= 1")
    bad = ~(np.isfinite(r) & (r > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise RoundsFitError(
            f"rounds[{i}]={r[i]!r} for (K={k[i]:g}, E={e[i]:g}): must be finite and > 0 "
            "(a sampled run that never reached its loss cannot be fitted)"
        )
    designs = len(set(zip(k.tolist(), e.tolist())))
    if designs < N_PARAMETERS + 1:
        raise RoundsFitError(
            f"samples: {designs} distinct (K, E): model M has {N_PARAMETERS} parameters and needs >= "
            f"{N_PARAMETERS + 1} (one is held out to check the fit)"
        )
    if np.unique(k).size < 3 or np.unique(e).size < 2:
        raise RoundsFitError(
            f"samples: {np.unique(k).size} distinct K and {np.unique(e).size} distinct E: need >= 3 distinct K "
            "and >= 2 distinct E to fit model M"
        )
    y = np.log(r)
    a, b, c, p, sse = _least_squares(k, e, y)
    if not b > 0:
        raise RoundsFitError(
            f"fit: b={b:.4g}: must be > 0 (over the samples, rounds do not fall as E grows; sample a wider E "
            "range or more seeds)"
        )
    if not c > 0:
        raise RoundsFitError(
            f"fit: c={c:.4g}: must be > 0 (over the samples, rounds do not fall as K grows; sample smaller K "
            "or more seeds)"
        )
    held = []
    for i in range(k.size):
        keep = np.arange(k.size) != i
        ai, bi, ci, pi_, _ = _least_squares(k[keep], e[keep], y[keep])
        held.append(float(rounds_model(k[i], e[i], ai, bi, ci, pi_) / r[i] - 1.0))
    return RoundsFit(a=a, b=b, c=c, p=p, rms_log=float(np.sqrt(sse / k.size)), holdout_errors=tuple(held),
                     holdout_error=float(np.max(np.abs(held))), n_samples=int(k.size))  # fmt: skip


def expected_round_costs(
    t_p_s: Any, t_m_s: Any, e_p_j: Any, e_m_j: Any, e_values: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Expected time E[t^(r)] [s] (Lemma 2, eq. 13) and energy [J] (Lemma 1, eq. 10 with R = 1) of one round,
    for every K = 1..N (rows) and every E in ``e_values`` (columns), shape (N, len(e_values)) each.

    The device arrays are shape (N,) or (S, N) for S independent fleets (seeds); with S rows each entry is the
    mean over the fleets of that fleet's exact expectation (Lemma 2 is not linear in the device times, so the
    fleets are not pooled first).
    """
    t_p, t_m, e_p, e_m = (np.atleast_2d(chk.real_array(x, name)) for x, name in
                          ((t_p_s, "t_p_s"), (t_m_s, "t_m_s"), (e_p_j, "e_p_j"), (e_m_j, "e_m_j")))  # fmt: skip
    if not (t_p.shape == t_m.shape == e_p.shape == e_m.shape):
        raise OptimizerInputError(f"device arrays: shapes {t_p.shape}, {t_m.shape}, {e_p.shape}, {e_m.shape}: must be equal")
    for arr, name in ((t_p, "t_p_s"), (t_m, "t_m_s"), (e_p, "e_p_j"), (e_m, "e_m_j")):
        chk.require(arr, name, arr >= 0, "must be >= 0")
    es = chk.one_dimensional(e_values, "e_values")
    chk.require(es, "e_values", es >= 1, "must be >= 1")
    s, n = t_p.shape
    weights = np.stack([straggler_probabilities(n, kk) for kk in range(1, n + 1)])  # (N of K, N of devices)
    time = np.zeros((n, es.size))
    for row in range(s):
        times = np.sort(t_p[row][None, :] * es[:, None] + t_m[row][None, :], axis=1)  # (len(E), N), eq. (11)
        time += weights @ times.T
    time /= s
    ks = np.arange(1, n + 1, dtype=float)[:, None]
    energy = ks * (e_p.mean(axis=1).mean() * es[None, :] + e_m.mean(axis=1).mean())
    return time, energy


@dataclass(frozen=True)
class MeasuredChoice:
    """The (K, E) of least predicted cost and its predictions: rounds R, per-round time [s] and energy [J],
    and the cost ((1 - gamma) t + gamma e) R of eq. (14)."""

    k: int
    e: int
    rounds: float
    round_time_s: float
    round_energy_j: float
    cost: float


def choose_ke(
    fit: RoundsFit, t_p_s: Any, t_m_s: Any, e_p_j: Any, e_m_j: Any, *, gamma: float, e_min: int, e_max: int
) -> MeasuredChoice:
    """Integer (K, E), K in [1, N] and E in [``e_min``, ``e_max``], minimising eq. (14) with Lemma 2's
    straggler-aware round time, Lemma 1's energy and model M's rounds (an exhaustive search: N x (e_max -
    e_min + 1) evaluations). Device arrays as in :func:`expected_round_costs`."""
    gamma = chk.real(gamma, "gamma")
    if not 0.0 <= gamma <= 1.0:
        raise OptimizerInputError(f"gamma={gamma!r}: must be in [0, 1]")
    e_min, e_max = int(e_min), int(e_max)
    if not 1 <= e_min <= e_max:
        raise OptimizerInputError(f"e_min={e_min}, e_max={e_max}: need 1 <= e_min <= e_max")
    es = np.arange(e_min, e_max + 1, dtype=float)
    time, energy = expected_round_costs(t_p_s, t_m_s, e_p_j, e_m_j, es)
    n = time.shape[0]
    rounds = fit.rounds(np.arange(1, n + 1, dtype=float)[:, None], es[None, :])
    cost = ((1.0 - gamma) * time + gamma * energy) * rounds
    i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return MeasuredChoice(k=int(i + 1), e=int(es[j]), rounds=float(rounds[i, j]), round_time_s=float(time[i, j]),
                          round_energy_j=float(energy[i, j]), cost=float(cost[i, j]))  # fmt: skip
