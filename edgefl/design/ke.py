"""Algorithm 2 of Luo et al., "Cost-Effective Federated Learning Design" (INFOCOM 2021), run in the simulator:
sample designs (K_i, E_i), run FedAvg (Algorithm 1) until F_a and F_b, record R_{i,a} and R_{i,b}
(lines 1-3), estimate A0/B0 (eqs. 23-25, line 4), solve P3 by alternate search (lines 5-13), then train with
(K*, E*) to the target loss and charge what it cost; plus the exhaustive (K, E) grid that validates it.

Seeds: every design is run once per seed (each seed is a new draw of data, device costs, sampling and SGD
batches); round counts, times and energies are averaged over seeds, as the paper averages its experiments.
The cost of a design is eq. (8): ``(1 - gamma) t_tot [s] + gamma e_tot [J]`` at the round the target is hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgefl.design.luo_costs import DeviceCosts, measure_device_costs
from edgefl.design.until_loss import RunCache, design_scenario
from edgefl.errors import EdgeflError
from optimizers.cost_effective import KESolution, estimate_a0_over_b0, solve_acs

__all__ = [
    "DesignError",
    "SampleRecord",
    "Estimate",
    "Outcome",
    "run_design",
    "solve_p3",
    "KEDesign",
    "seed_costs",
    "mean_costs",
    "estimate_ratio",
    "evaluate_design",
    "design_ke",
    "grid_table",
    "grid_optimum",
]


class DesignError(EdgeflError, ValueError):
    """The design loop cannot go on (a sampled run never reached F_b, or a grid has no run at the target)."""


@dataclass(frozen=True)
class SampleRecord:
    """One sampled design (K_i, E_i) of Algorithm 2 line 2: seed-mean rounds to F_a and F_b."""

    k: int
    e: int
    r_a: float
    r_b: float


@dataclass(frozen=True)
class Estimate:
    """A0/B0 by eq. (25) (least squares over pairs) from ``samples``; ``iterations`` = sum_i R_{i,b} E_i,
    the local iterations spent on estimation (numerator of eq. 26); ``time_s``/``energy_j`` the seed-mean
    simulated time [s] and energy [J] of the sampled runs up to F_b."""

    a0_over_b0: float
    pairs: int
    samples: tuple[SampleRecord, ...]
    iterations: float
    time_s: float
    energy_j: float


@dataclass(frozen=True)
class Outcome:
    """Seed means of a design run to a target loss: rounds R, time t_tot [s], energy e_tot [J]; ``reached``
    counts the seeds that got there (means are over those); ``seeds`` how many ran."""

    k: int
    e: int
    rounds: float
    time_s: float
    energy_j: float
    reached: int
    seeds: int

    def cost(self, gamma: float) -> float:
        """Eq. (8): (1 - gamma) t_tot + gamma e_tot [$]; inf if a seed did not reach the target."""
        if self.reached < self.seeds:
            return float("inf")
        return (1.0 - gamma) * self.time_s + gamma * self.energy_j


@dataclass(frozen=True)
class KEDesign:
    """Algorithm 2's choice for one gamma and what it achieved.

    ``overhead`` is the cost of the sampled runs over the cost of the final run (same gamma, eq. 8), the
    measure both design rules report (:mod:`edgefl.design.measured`); ``overhead_iterations`` is eq. (26)'s
    left side measured: sum_i R_{i,b} E_i / (R E*), with R the rounds (K*, E*) took to the target.
    """

    gamma: float
    k: int
    e: int
    k_cont: float
    e_cont: float
    a0_over_b0: float
    p3_objective: float
    outcome: Outcome
    cost: float
    overhead: float
    overhead_iterations: float
    predicted_time_s: float
    predicted_energy_j: float
    rule: str = "paper"


def seed_costs(base, seeds: Sequence[int], *, rate_rounds: int = 20) -> list[DeviceCosts]:
    """Per-device costs of each seed's fleet (each seed draws its own)."""
    from edgefl.run.runner import Simulation

    return [measure_device_costs(Simulation(design_scenario(base, k=1, e=1, seed=s)), rate_rounds=rate_rounds)
            for s in seeds]  # fmt: skip


def mean_costs(base, seeds: Sequence[int] | None = None, *, rate_rounds: int = 20,
               rows: Sequence[DeviceCosts] | None = None) -> DeviceCosts:  # fmt: skip
    """Per-device costs averaged device by device over ``seeds`` (or over given per-seed ``rows``).

    Its device means are the P3 inputs (eq. 17, Lemma 1). Averaging device by device narrows the spread
    between devices, so do not feed it to Lemma 2: :func:`design_ke` predicts the straggler per seed.
    """
    if rows is None:
        rows = seed_costs(base, seeds or [base.seed], rate_rounds=rate_rounds)
    mean = {name: np.mean([getattr(c, name) for c in rows], axis=0) for name in ("t_p_s", "t_m_s", "e_p_j", "e_m_j")}
    return DeviceCosts(source=rows[0].source, **mean)


def estimate_ratio(
    cache: RunCache, samples: Sequence[tuple[int, int]], *, f_a: float, f_b: float, seeds: Sequence[int]
) -> Estimate:
    """Algorithm 2 lines 1-4: run each sampled (K_i, E_i) to F_b on every seed, average R_{i,a}, R_{i,b} over
    seeds and estimate A0/B0 by eq. (25) (errata: K_j in the second denominator)."""
    records, iterations, time_s, energy_j = [], 0.0, 0.0, 0.0
    for k, e in samples:
        ra, rb, ts, es = [], [], [], []
        for s in seeds:
            run = cache.get(k, e, s, (f_a, f_b))
            ha, hb = run.hit(f_a), run.hit(f_b)
            if ha is None or hb is None:
                raise DesignError(
                    f"sample (K={k}, E={e}) seed {s}: loss F_b={f_b} not reached in {cache.max_rounds} rounds "
                    f"(last loss {run.loss[-1]:.4g}); raise max_rounds or F_b, or sample larger K and E"
                )
            ra.append(ha.rounds); rb.append(hb.rounds); ts.append(hb.time_s); es.append(hb.energy_j)  # fmt: skip
        records.append(SampleRecord(k=int(k), e=int(e), r_a=float(np.mean(ra)), r_b=float(np.mean(rb))))
        iterations += float(np.mean(rb)) * e
        time_s += float(np.mean(ts))
        energy_j += float(np.mean(es))
    # R_b - R_a = 0 (both losses hit in the same round) would break eq. (24): keep the sample, widen by 0.5
    r_b = [max(r.r_b, r.r_a + 0.5) for r in records]
    est = estimate_a0_over_b0([r.k for r in records], [r.e for r in records], [r.r_a for r in records], r_b,
                              n=cache.base.fleet.n_devices)  # fmt: skip
    return Estimate(a0_over_b0=est.a0_over_b0, pairs=est.pairs, samples=tuple(records), iterations=iterations,
                    time_s=time_s, energy_j=energy_j)  # fmt: skip


def evaluate_design(cache: RunCache, k: int, e: int, *, target: float, seeds: Sequence[int]) -> Outcome:
    """Run (K, E) to ``target`` on every seed; seed means of R, t_tot and e_tot over the seeds that reached it."""
    hits = [cache.get(k, e, s, (target,)).hit(target) for s in seeds]
    got = [h for h in hits if h is not None]
    mean = (lambda xs: float(np.mean(xs)) if xs else float("nan"))  # noqa: E731
    return Outcome(k=int(k), e=int(e), rounds=mean([h.rounds for h in got]), time_s=mean([h.time_s for h in got]),
                   energy_j=mean([h.energy_j for h in got]), reached=len(got), seeds=len(seeds))  # fmt: skip


def design_ke(
    cache: RunCache,
    costs: DeviceCosts | Sequence[DeviceCosts],
    estimate: Estimate,
    *,
    gamma: float,
    target: float,
    seeds: Sequence[int],
) -> KEDesign:
    """Algorithm 2 lines 5-13 for ``gamma`` with the estimated A0/B0, then the (K*, E*) run to ``target``.

    ``costs``: one seed's devices, or one :class:`DeviceCosts` per seed (P3 takes their pooled means; the
    Lemma 1/2 prediction of the run's time and energy is the mean over seeds of each seed's prediction).
    """
    rows, sol = solve_p3(costs, estimate, gamma)
    return run_design(cache, rows, estimate, sol, gamma=gamma, target=target, seeds=seeds)


def solve_p3(
    costs: DeviceCosts | Sequence[DeviceCosts], estimate: Estimate, gamma: float
) -> tuple[list[DeviceCosts], KESolution]:
    """The per-seed cost rows and Algorithm 2 lines 5-13 (P3, eq. 20) on their pooled device means."""
    rows = [costs] if isinstance(costs, DeviceCosts) else list(costs)
    pooled = rows[0] if len(rows) == 1 else mean_costs(None, rows=rows)
    return rows, solve_acs(pooled.luo_params(gamma=gamma, a0_over_b0=estimate.a0_over_b0))


def run_design(
    cache: RunCache,
    rows: Sequence[DeviceCosts],
    estimate: Estimate,
    sol: KESolution,
    *,
    gamma: float,
    target: float,
    seeds: Sequence[int],
) -> KEDesign:
    """:func:`design_ke` after P3 is solved: run (K*, E*) of ``sol`` to ``target`` and charge it (eq. 8)."""
    out = evaluate_design(cache, sol.k, sol.e, target=target, seeds=seeds)
    cost = out.cost(gamma)
    sample_cost = (1.0 - gamma) * estimate.time_s + gamma * estimate.energy_j
    t_round, e_round = (float(np.mean(x)) for x in zip(*(c.expected_round(sol.k, sol.e) for c in rows)))
    return KEDesign(
        gamma=gamma, k=sol.k, e=sol.e, k_cont=sol.k_cont, e_cont=sol.e_cont, a0_over_b0=estimate.a0_over_b0,
        p3_objective=sol.objective, outcome=out, cost=cost,
        overhead=sample_cost / cost if np.isfinite(cost) and cost > 0 else float("nan"),
        overhead_iterations=estimate.iterations / (out.rounds * sol.e) if out.reached else float("nan"),
        predicted_time_s=t_round * out.rounds, predicted_energy_j=e_round * out.rounds,
    )  # fmt: skip


def grid_table(
    cache: RunCache, grid_k: Sequence[int], grid_e: Sequence[int], *, target: float, seeds: Sequence[int]
) -> list[Outcome]:
    """Every (K, E) of the grid (K <= N) run to ``target`` on every seed (the paper's exhaustive search)."""
    n = cache.base.fleet.n_devices
    return [evaluate_design(cache, k, e, target=target, seeds=seeds) for k in grid_k if k <= n for e in grid_e]


def grid_optimum(table: Sequence[Outcome], gamma: float) -> Outcome:
    """The grid design of least cost (eq. 8) for ``gamma`` among those every seed brought to the target."""
    finite = [o for o in table if np.isfinite(o.cost(gamma))]
    if not finite:
        raise DesignError("exhaustive grid: no (K, E) reached the target loss on every seed; raise max_rounds")
    return min(finite, key=lambda o: o.cost(gamma))
