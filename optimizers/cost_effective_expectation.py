"""Expected time and energy of uniform K-of-N client sampling, Luo et al., "Cost-Effective Federated
Learning Design" (INFOCOM 2021), Lemma 1 (eq. 10) and Lemma 2 (eqs. 12-13), for heterogeneous devices.

Per device k (eq. 3 and 6): t_k = t_{k,p} E + t_{k,m} [s] and e_k = e_{k,p} E + e_{k,m} [J]. A round waits
for the slowest sampled device (eq. 4) and spends the sum of the sampled devices' energies (eq. 7).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = [
    "straggler_probabilities",
    "expected_round_time_s",
    "expected_total_time_s",
    "expected_total_energy_j",
]


def straggler_probabilities(n: int, k: int) -> np.ndarray:
    """Probability that the i-th fastest device (i = 1..N) is the slowest of K sampled uniformly without
    replacement: ``C(i-1, K-1) / C(N, K)`` for i >= K, else 0 — the weights of Luo et al. eq. (13).

    No binomial coefficient is formed, so N up to 10^4 and far beyond neither overflows nor loses
    precision: the weights follow from the ratio recursion ``w_N = K/N``,
    ``w_i = w_{i+1} (i - K + 1) / i`` (i = N-1 .. K), evaluated as one cumulative product (relative error
    about sqrt(N) machine epsilons; weights below 1e-308 underflow to 0).
    Returns shape (n,), index 0 is the fastest device; the weights sum to 1.
    """
    n = chk.integer(n, "n", 1)
    k = chk.k_of_n(k, n)
    i = np.arange(n - 1, k - 1, -1, dtype=float)  # N-1, N-2, ..., K
    tail = (k / n) * np.cumprod((i - k + 1) / i)  # w_{N-1}, ..., w_K
    w = np.zeros(n)
    w[n - 1] = k / n
    w[k - 1 : n - 1] = tail[::-1]
    return w


def expected_round_time_s(round_times_s: Any, k: int) -> float:
    """Expected per-round time E[t^(r)] [s] with K of N devices sampled uniformly, Luo et al. eq. (13).

    ``E[t^(r)] = sum_{i=K}^{N} C(i-1, K-1) t_(i) / C(N, K)`` where t_(1) <= ... <= t_(N) are the per-round
    times ``round_times_s`` [s], shape (N,), sorted here (eq. 11). K = 1 gives the mean, K = N the maximum.
    """
    t = chk.one_dimensional(round_times_s, "round_times_s")
    chk.require(t, "round_times_s", t >= 0, "must be >= 0")
    w = straggler_probabilities(t.size, k)
    return float(np.dot(w, np.sort(t)))


def expected_total_time_s(t_p_s: Any, t_m_s: Any, *, k: int, e: float, rounds: float) -> float:
    """Expected total learning time E[t_tot] [s] over R rounds, Luo et al. Lemma 2, eq. (12).

    ``t_p_s`` / ``t_m_s``: per-device time of one local iteration / one round of communication [s],
    shape (N,); per-round time t_k = t_{k,p} E + t_{k,m} (eq. 3); result = R * E[t^(r)] (eq. 13).
    """
    t_p = chk.one_dimensional(t_p_s, "t_p_s")
    t_m = chk.one_dimensional(t_m_s, "t_m_s")
    _same_length(t_p, t_m, "t_m_s")
    chk.require(t_p, "t_p_s", t_p >= 0, "must be >= 0")
    chk.require(t_m, "t_m_s", t_m >= 0, "must be >= 0")
    e = chk.at_least(e, "e", 1)
    rounds = chk.at_least(rounds, "rounds", 0)
    return rounds * expected_round_time_s(t_p * e + t_m, k)


def expected_total_energy_j(e_p_j: Any, e_m_j: Any, *, k: int, e: float, rounds: float) -> float:
    """Expected total energy E[e_tot] [J] over R rounds, Luo et al. Lemma 1, eq. (10).

    ``E[e_tot] = K (e_p E + e_m) R`` with e_p, e_m the device averages of ``e_p_j`` / ``e_m_j`` [J],
    shape (N,) (energy of one local iteration / one round of communication per device).
    """
    e_p = chk.one_dimensional(e_p_j, "e_p_j")
    e_m = chk.one_dimensional(e_m_j, "e_m_j")
    _same_length(e_p, e_m, "e_m_j")
    chk.require(e_p, "e_p_j", e_p >= 0, "must be >= 0")
    chk.require(e_m, "e_m_j", e_m >= 0, "must be >= 0")
    k = chk.k_of_n(k, e_p.size)
    e = chk.at_least(e, "e", 1)
    rounds = chk.at_least(rounds, "rounds", 0)
    return float(k * (e_p.mean() * e + e_m.mean()) * rounds)


def _same_length(first: np.ndarray, second: np.ndarray, name: str) -> None:
    if second.shape != first.shape:
        raise OptimizerInputError(f"{name}: length {second.size}: must equal the first array's length {first.size}")
