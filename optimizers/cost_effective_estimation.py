"""Estimation of A0/B0 from sampled runs, Luo et al., "Cost-Effective Federated Learning Design"
(INFOCOM 2021), eqs. (23)-(25) (Algorithm 2, lines 1-4).

Each record i is a design (K_i, E_i) run until two losses F_a > F_b are reached, after R_{i,a} and R_{i,b}
rounds. By eq. (24), ``y_i := E_i (R_{i,b} - R_{i,a}) ~ Delta (A0 + B0 g_i)`` with
``g_i = F(K_i) E_i^2``, F(K) = 1 + (N-K)/(K(N-1)) and an unknown Delta > 0. For a pair (i, j), eq. (25)
(with the erratum K_j in the second denominator) reads ``y_i / y_j = (A + g_i) / (A + g_j)``, A = A0/B0,
i.e. the linear equation ``A (y_i - y_j) = y_j g_i - y_i g_j``. The estimate is the least-squares solution of
that equation over every pair with distinct designs (g_i != g_j):
``A = sum (y_i - y_j)(y_j g_i - y_i g_j) / sum (y_i - y_j)^2``.
A pair with g_i = g_j carries no information about A and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.cost_effective_model import participation_factor
from optimizers.errors import OptimizerInputError

__all__ = ["A0B0Estimate", "estimate_a0_over_b0"]


@dataclass(frozen=True)
class A0B0Estimate:
    """Result of :func:`estimate_a0_over_b0`.

    Attributes:
        a0_over_b0: least-squares estimate of A0/B0 (> 0), dimensionless as used in eqs. (21)-(22).
        pairs: number of record pairs (i < j) with distinct designs that entered the least squares.
    """

    a0_over_b0: float
    pairs: int


def estimate_a0_over_b0(k: Any, e: Any, r_a: Any, r_b: Any, *, n: int) -> A0B0Estimate:
    """A0/B0 from sampled records (K_i, E_i, R_{i,a}, R_{i,b}), Luo et al. eqs. (23)-(25), least squares over
    all pairs of records (see the module docstring).

    Args:
        k: clients per round K_i of each record, shape (M,), in [1, n].
        e: local iterations E_i of each record, shape (M,), >= 1.
        r_a: rounds to reach the higher loss F_a, shape (M,), >= 0 (may be real-valued).
        r_b: rounds to reach the lower loss F_b, shape (M,), > r_a.
        n: number of devices N.

    Raises:
        OptimizerInputError: malformed records, or samples that cannot determine A0/B0 (every pair has the
            same design, every pair has the same E (R_b - R_a), or a non-positive least-squares estimate,
            which bound (15) cannot produce).
    """
    n = chk.integer(n, "n", 1)
    k = chk.one_dimensional(k, "k", min_length=2)
    m = k.size
    e = _same_length(chk.one_dimensional(e, "e"), "e", m)
    r_a = _same_length(chk.one_dimensional(r_a, "r_a"), "r_a", m)
    r_b = _same_length(chk.one_dimensional(r_b, "r_b"), "r_b", m)
    chk.require(k, "k", (k >= 1) & (k <= n), f"must be in [1, n={n}]")
    chk.require(e, "e", e >= 1, "must be >= 1")
    chk.require(r_a, "r_a", r_a >= 0, "must be >= 0")
    bad = ~(r_b > r_a)
    if bad.any():
        i = int(np.argmax(bad))
        raise OptimizerInputError(
            f"r_b[{i}]={float(r_b[i])!r}: must be > r_a[{i}]={float(r_a[i])!r} (F_b < F_a takes more rounds)"
        )

    y = e * (r_b - r_a)  # eq. (24) without Delta
    g = participation_factor(k, n) * e**2
    i, j = np.triu_indices(m, 1)
    distinct = ~np.isclose(g[i], g[j], rtol=1e-12, atol=0.0)
    i, j = i[distinct], j[distinct]
    if i.size == 0:
        raise OptimizerInputError(
            f"samples: all {m} records have the same design F(K) E^2={g[0]!r}: cannot determine a0_over_b0; "
            "sample at least two different (K, E)"
        )
    u = y[i] - y[j]
    v = y[j] * g[i] - y[i] * g[j]
    uu = float(np.dot(u, u))
    if uu == 0.0:
        raise OptimizerInputError(
            "samples: E (R_b - R_a) is the same for every design: cannot determine a0_over_b0 (it is unbounded)"
        )
    estimate = float(np.dot(u, v)) / uu
    if not (np.isfinite(estimate) and estimate > 0):
        raise OptimizerInputError(
            f"samples: least-squares a0_over_b0={estimate!r}: must be > 0; the round counts do not follow "
            "bound (15) (E (R_b - R_a) should grow with F(K) E^2)"
        )
    return A0B0Estimate(a0_over_b0=estimate, pairs=int(i.size))


def _same_length(arr: np.ndarray, name: str, m: int) -> np.ndarray:
    if arr.size != m:
        raise OptimizerInputError(f"{name}: length {arr.size}: must equal len(k)={m}")
    return arr
