"""Training probabilities and train/skip schedules of CC-FedAvg: Zhang et al., "CC-FedAvg: Computationally
Customized Federated Averaging" (Sec. VI-A).

A client i trains in a round with probability p_i in (0, 1] (it skips, and CC-FedAvg estimates its update,
otherwise). The paper's experiments set ``p_i = (1/2)^floor(beta i / N)``; here p_i can also come from an
energy budget. Two schedules turn p_i into per-round decisions:

- "ad-hoc": every round, client i trains with probability p_i, independently of everything else;
- "round-robin": client i trains once, then skips (1/p_i - 1) rounds, strictly periodically.

Client index i runs over 0..N-1. The paper writes "client i" without fixing the range, but its statements
pin it down: "there are ceil(N/beta) clients with p_i = 1" and "beta = 3 divides the clients equally into
3 groups" with levels 1, 1/2, 1/4 hold for i = 0..N-1 only (with i = 1..N, client N would get a
(beta+1)-th level (1/2)^beta and the first group would have one client fewer).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from optimizers import _checks as chk
from optimizers.errors import OptimizerInputError

__all__ = [
    "level_probabilities",
    "budget_probabilities",
    "adhoc_mask",
    "adhoc_schedule",
    "round_robin_phases",
    "round_robin_mask",
    "round_robin_schedule",
]


def _array(value: Any, name: str) -> np.ndarray:
    """``value`` as a non-empty 1-D float array of finite numbers.

    Not :func:`optimizers._checks.one_dimensional`: this checks the shape before finiteness and keeps its own
    messages (``"must be a 1-D array of numbers"``, ``"must be a non-empty 1-D array"``), and it converts a
    numeric string (``"0.5"``) like numpy does instead of refusing it.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise OptimizerInputError(f"{name}={value!r}: must be a 1-D array of numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise OptimizerInputError(f"{name}: shape {arr.shape}: must be a non-empty 1-D array")
    return chk.require(arr, name, np.isfinite(arr), "must be finite")


def _probabilities(p: Any) -> np.ndarray:
    """Training probabilities p_i, shape (N,), in [0, 1]."""
    arr = _array(p, "p")
    return chk.require(arr, "p", (arr >= 0) & (arr <= 1), "must be in [0, 1]")


def level_probabilities(n: int, beta: int) -> np.ndarray:
    """Training probabilities ``p_i = (1/2)^floor(beta i / N)`` for clients i = 0..N-1, CC-FedAvg Sec. VI-A.

    ``beta`` is the number of resource levels: clients fall into beta consecutive blocks with p = 1, 1/2, ...,
    (1/2)^(beta-1) (for beta <= N; a block may be empty when beta does not divide N evenly, or when
    beta > N). Example: N = 100, beta = 4 gives 1, 1/2, 1/4, 1/8 in blocks of 25. Shape (n,).
    """
    n = chk.integer(n, "n", 1, integral_float=False)
    beta = chk.integer(beta, "beta", 1, integral_float=False)
    i = np.arange(n, dtype=np.int64)
    level = (beta * i) // n  # exact integer floor
    return np.ldexp(1.0, -level)  # (1/2)^level


def budget_probabilities(budget_j: Any, cost_per_round_j: Any, rounds: int) -> np.ndarray:
    """Training probabilities from energy budgets: ``p_i = min(1, B_i / (T e_i))``.

    A client with a total energy budget B_i [J] for a horizon of T rounds, spending e_i [J] each round it
    trains, can afford B_i / e_i trainings; training with probability p_i spends p_i T e_i in expectation
    (ad-hoc) or at most ceil(p_i T) e_i (round-robin) over the T rounds. This is the budget reading of the
    paper's "ratio of remaining computational resources" p_i (CC-FedAvg Sec. III-B); the paper itself only
    uses the level formula. A zero budget gives p_i = 0 (the client never trains).

    Args:
        budget_j: B_i [J], shape (N,), >= 0.
        cost_per_round_j: e_i [J], shape (N,), > 0.
        rounds: horizon T, >= 1.
    """
    budget = _array(budget_j, "budget_j")
    cost = _array(cost_per_round_j, "cost_per_round_j")
    if cost.shape != budget.shape:
        raise OptimizerInputError(
            f"cost_per_round_j: length {cost.size}: must equal len(budget_j)={budget.size}"
        )
    chk.require(budget, "budget_j", budget >= 0, "must be >= 0")
    chk.require(cost, "cost_per_round_j", cost > 0, "must be > 0")
    rounds = chk.integer(rounds, "rounds", 1, integral_float=False)
    return np.minimum(1.0, budget / (rounds * cost))


def adhoc_mask(p: Any, rng: np.random.Generator) -> np.ndarray:
    """One round of the "ad-hoc" schedule: client i trains with probability p_i, independently.

    Args:
        p: training probabilities, shape (N,), in [0, 1].
        rng: the stream for this round's decisions (draws N uniforms).

    Returns:
        bool array, shape (N,): True = train, False = skip.
    """
    p = _probabilities(p)
    return rng.random(p.size) < p


def adhoc_schedule(p: Any, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Endless "ad-hoc" schedule: yields :func:`adhoc_mask` (shape (N,), True = train) for rounds 0, 1, ...,
    all drawn from ``rng``. Same ``p`` and generator state give the same sequence."""
    p = _probabilities(p)  # validated now, not at the first next()

    def rounds() -> Iterator[np.ndarray]:
        while True:
            yield rng.random(p.size) < p

    return rounds()


def _periods(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Period 1/p_i [rounds] and whether it is an integer (within 1e-9 relative)."""
    with np.errstate(divide="ignore"):
        period = np.where(p > 0, 1.0 / p, np.inf)
    finite = np.isfinite(period)
    nearest = np.where(finite, np.round(period), 0.0)
    is_int = finite & (np.abs(period - nearest) <= 1e-9 * nearest)
    return period, is_int


def round_robin_phases(p: Any, rng: np.random.Generator) -> np.ndarray:
    """Phase phi_i of each client in the "round-robin" schedule, uniform in {0, ..., ceil(1/p_i) - 1}.

    Args:
        p: training probabilities, shape (N,), in [0, 1].
        rng: the stream that fixes the phases (draws N integers).

    Returns:
        int64 array, shape (N,) (0 for p_i = 0).
    """
    p = _probabilities(p)
    period, is_int = _periods(p)
    span = np.where(is_int, np.round(period), np.ceil(np.where(np.isfinite(period), period, 1.0)))
    return rng.integers(0, span.astype(np.int64))


def round_robin_mask(p: Any, phases: Any, round_index: int) -> np.ndarray:
    """Train/skip decisions of the "round-robin" schedule in round ``round_index`` (0-based), CC-FedAvg
    Sec. VI-A: client i trains once, then skips 1/p_i - 1 rounds.

    Client i trains in round t when ``floor((t + phi_i + 1) p_i) > floor((t + phi_i) p_i)``. When 1/p_i is an
    integer W_i this is ``(t + phi_i + 1) mod W_i == 0``, evaluated in integers: exactly one training in every
    W_i consecutive rounds. Otherwise the gaps alternate between floor(1/p_i) and ceil(1/p_i) rounds and any
    T consecutive rounds hold floor(p_i T) or ceil(p_i T) trainings. p_i = 0 never trains. A pure function
    of (p, phases, t), so a resumed run gets the same decisions.

    Returns:
        bool array, shape (N,): True = train.
    """
    p = _probabilities(p)
    phases = np.asarray(phases)
    if phases.shape != p.shape or not np.issubdtype(phases.dtype, np.integer):
        raise OptimizerInputError(f"phases: shape {phases.shape}: must be integers of the shape of p {p.shape}")
    t = chk.integer(round_index, "round_index", 0, integral_float=False)
    period, is_int = _periods(p)
    shifted = t + phases.astype(np.int64)
    w = np.where(is_int, np.round(period), 1.0).astype(np.int64)
    by_period = (shifted + 1) % w == 0
    by_rate = np.floor((shifted + 1) * p) > np.floor(shifted * p)
    return np.where(is_int, by_period, by_rate & (p > 0))


def round_robin_schedule(p: Any, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Endless "round-robin" schedule: phases from :func:`round_robin_phases` (one draw from ``rng``), then
    yields :func:`round_robin_mask` (shape (N,), True = train) for rounds 0, 1, ...."""
    p = _probabilities(p)
    phases = round_robin_phases(p, rng)  # drawn now, not at the first next()

    def rounds() -> Iterator[np.ndarray]:
        t = 0
        while True:
            yield round_robin_mask(p, phases, t)
            t += 1

    return rounds()
