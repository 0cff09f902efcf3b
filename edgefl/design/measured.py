"""The measured design rule for K and E (``edgefl design ke --rule measured``), beside Luo et al.'s Algorithm 2.

Algorithm 2 (:mod:`edgefl.design.ke`) plans with eq. (17), which has no straggler, and bound (15), whose
dependence on K is too weak in the simulator (examples/README.md, the Luo section). This rule keeps Luo et al.'s
cost, eq. (14), but takes each of its two factors from what the simulator measures:

1. the expected cost of one round, straggler-aware: Lemma 2's exact E[max of K sampled t_k] (eq. 13) and
   Lemma 1's energy (eq. 10), per seed's fleet, then averaged over seeds;
2. the rounds to the target loss: model M, ``ln R(K, E) = a + b / E + c K^(-p)``
   (:mod:`optimizers.cost_effective_fit`), fitted to sampled designs run to the target loss itself (the
   shape of R in (K, E) changes between F_b and the target, so the fit is made where it is used). The samples
   are a small design spread over (K, E) in log space, ``[method.luo] measured_samples``.

It then picks the integer (K, E), K in [1, N], E in the sampled range of E, of least predicted cost, and runs it
to the target. Optional bounded refinement (``refine = n``) runs the up to n nearest neighbours of that design
on the integer grid ((K +- step_K, E), (K, E +- step_E)) to the target as well, and keeps the cheapest measured;
those runs count toward the overhead.

Overhead, for both rules alike: the seed-mean cost (eq. 8, same gamma) of every run the rule made before its
final choice (sampled runs, confirmation runs), divided by the cost of the chosen design's run to the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgefl.design.luo_costs import DeviceCosts
from edgefl.design.ke import DesignError, Outcome, evaluate_design
from edgefl.design.until_loss import RunCache
from optimizers.cost_effective_fit import MeasuredChoice, RoundsFit, choose_ke, fit_rounds

__all__ = ["MeasuredSample", "MeasuredEstimate", "MeasuredDesign", "fit_measured", "predict_choice",
           "refine_neighbours", "design_measured"]  # fmt: skip


@dataclass(frozen=True)
class MeasuredSample:
    """One sampled design run to the target on every seed: seed means of rounds R, time [s], energy [J]."""

    k: int
    e: int
    rounds: float
    time_s: float
    energy_j: float


@dataclass(frozen=True)
class MeasuredEstimate:
    """Model M fitted to ``samples``; ``time_s`` / ``energy_j``: the sampled runs' seed-mean time [s] and
    energy [J] summed over the samples (what the sampling cost)."""

    fit: RoundsFit
    samples: tuple[MeasuredSample, ...]
    time_s: float
    energy_j: float

    def cost(self, gamma: float) -> float:
        """Eq. (8) of the sampled runs: (1 - gamma) t + gamma e [$]."""
        return (1.0 - gamma) * self.time_s + gamma * self.energy_j


@dataclass(frozen=True)
class MeasuredDesign:
    """The measured rule's choice for one gamma and what it achieved.

    ``predicted``: the first choice and its model-M prediction; (``k``, ``e``) the final design (the first
    choice, or the cheapest confirmed neighbour after refinement); ``confirmed``: the refinement runs' outcomes;
    ``overhead``: (sampled + confirmation cost) / ``cost`` (see the module docstring).
    """

    gamma: float
    k: int
    e: int
    predicted: MeasuredChoice
    outcome: Outcome
    cost: float
    overhead: float
    confirmed: tuple[Outcome, ...]
    rule: str = "measured"


def fit_measured(cache: RunCache, samples: Sequence[tuple[int, int]], *, target: float,
                 seeds: Sequence[int]) -> MeasuredEstimate:  # fmt: skip
    """Run every sampled (K, E) to ``target`` on every seed (runs the cache lacks are simulated one by one:
    prefetch them for parallel runs) and fit model M to the seed-mean rounds.

    Raises :class:`DesignError` if a sampled run never reached the target, and
    :class:`optimizers.cost_effective_fit.RoundsFitError` if the fit cannot be trusted."""
    records = []
    for k, e in samples:
        hits = []
        for s in seeds:
            run = cache.get(k, e, s, (target,))
            hit = run.hit(target)
            if hit is None:
                raise DesignError(
                    f"measured sample (K={k}, E={e}) seed {s}: target loss {target:g} not reached in "
                    f"{cache.max_rounds} rounds (last loss {run.loss[-1]:.4g}); the rounds model cannot be fitted: "
                    "raise max_rounds or sample larger K and E"
                )
            hits.append(hit)
        records.append(MeasuredSample(k=int(k), e=int(e), rounds=float(np.mean([h.rounds for h in hits])),
                                      time_s=float(np.mean([h.time_s for h in hits])),
                                      energy_j=float(np.mean([h.energy_j for h in hits]))))  # fmt: skip
    fit = fit_rounds([r.k for r in records], [r.e for r in records], [r.rounds for r in records])
    return MeasuredEstimate(fit=fit, samples=tuple(records), time_s=sum(r.time_s for r in records),
                            energy_j=sum(r.energy_j for r in records))  # fmt: skip


def _arrays(costs: DeviceCosts | Sequence[DeviceCosts]) -> tuple[np.ndarray, ...]:
    rows = [costs] if isinstance(costs, DeviceCosts) else list(costs)
    return tuple(np.stack([getattr(c, name) for c in rows]) for name in ("t_p_s", "t_m_s", "e_p_j", "e_m_j"))


def predict_choice(costs: DeviceCosts | Sequence[DeviceCosts], estimate: MeasuredEstimate, gamma: float) -> MeasuredChoice:
    """The (K, E) of least predicted eq. (14) cost, E within the sampled range (one fleet per seed in ``costs``)."""
    es = [s.e for s in estimate.samples]
    return choose_ke(estimate.fit, *_arrays(costs), gamma=gamma, e_min=min(es), e_max=max(es))


def refine_neighbours(k: int, e: int, *, n: int, e_min: int, e_max: int, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` neighbours of (K, E) for confirmation runs: K x/÷ 2 and E -+ 25%, rounded, kept within
    K in [1, N] and E in [e_min, e_max], in the order K down, K up, E down, E up."""
    out = []
    for kk, ee in ((max(1, k // 2), e), (min(n, 2 * k), e), (k, max(e_min, round(0.75 * e))), (k, min(e_max, round(1.25 * e)))):
        if (kk, ee) != (k, e) and (kk, ee) not in out:
            out.append((kk, ee))
    return out[: max(0, int(count))]


def design_measured(
    cache: RunCache,
    costs: DeviceCosts | Sequence[DeviceCosts],
    estimate: MeasuredEstimate,
    *,
    gamma: float,
    target: float,
    seeds: Sequence[int],
    refine: int = 0,
) -> MeasuredDesign:
    """The measured rule for ``gamma``: predicted choice, its run to ``target`` on every seed, optional
    refinement over ``refine`` neighbours, and the overhead."""
    choice = predict_choice(costs, estimate, gamma)
    first = evaluate_design(cache, choice.k, choice.e, target=target, seeds=seeds)
    es = [s.e for s in estimate.samples]
    confirmed = tuple(
        evaluate_design(cache, kk, ee, target=target, seeds=seeds)
        for kk, ee in refine_neighbours(choice.k, choice.e, n=cache.base.fleet.n_devices, e_min=min(es),
                                        e_max=max(es), count=refine)  # fmt: skip
    )
    best = min((first, *confirmed), key=lambda o: o.cost(gamma))
    cost = best.cost(gamma)
    spent = estimate.cost(gamma) + sum(o.cost(gamma) for o in (first, *confirmed) if o is not best)
    return MeasuredDesign(
        gamma=float(gamma), k=best.k, e=best.e, predicted=choice, outcome=best, cost=cost,
        overhead=spent / cost if np.isfinite(cost) and cost > 0 else float("nan"), confirmed=confirmed,
    )  # fmt: skip
