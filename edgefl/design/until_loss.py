"""Run a scenario round by round until its global training loss reaches given targets (Luo et al.'s
Algorithm 1 run "until F_a and F_b are reached", Algorithm 2 line 3).

The loss is the ``global_train_loss`` column (F(w) over every device's training data; ``train.global_loss``
must be on and ``train.eval_every = 1``), or the surrogate's ``train_loss`` with ``learning = "surrogate"``.
A run stops at the first round whose loss is at or below the lowest target, or after ``max_rounds``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgefl.errors import ScenarioError
from edgefl.learning.threads import torch_threads
from edgefl.scenario.loading import Scenario
from edgefl.run.load import scenario_from_dict

__all__ = ["LossRun", "Hit", "run_until_loss", "design_scenario", "RunCache"]


@dataclass(frozen=True)
class Hit:
    """The first round R at which the loss is <= a target, and the simulated time [s] and energy [J] spent
    up to and including it."""

    rounds: int
    time_s: float
    energy_j: float


@dataclass(frozen=True)
class LossRun:
    """One run's loss trajectory, shape (R,) each: loss after round r, cumulative time [s] and energy [J].

    ``k``, ``e``, ``seed`` name the design; ``wall_s`` is the host time the run took.
    """

    k: int
    e: int
    seed: int
    loss: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    wall_s: float

    @property
    def rounds(self) -> int:
        return int(self.loss.size)

    def hit(self, target: float) -> Hit | None:
        """First round whose loss <= ``target`` (None if the run never got there)."""
        below = np.flatnonzero(self.loss <= target)
        if below.size == 0:
            return None
        i = int(below[0])
        return Hit(rounds=i + 1, time_s=float(self.time_s[i]), energy_j=float(self.energy_j[i]))

    def answers(self, target: float, max_rounds: int) -> bool:
        """Whether this trajectory settles ``target``: it reached it, or it ran ``max_rounds`` without."""
        return self.hit(target) is not None or self.rounds >= max_rounds


def _loss_column(scenario: Scenario) -> str:
    if scenario.learning == "surrogate":
        return "train_loss"
    if not scenario.train.global_loss or scenario.train.eval_every != 1:
        raise ScenarioError(
            "train.global_loss must be true and train.eval_every 1 to run until a loss is reached "
            f"(got global_loss={scenario.train.global_loss}, eval_every={scenario.train.eval_every})"
        )
    return "global_train_loss"


def design_scenario(base: Scenario, *, k: int, e: int, seed: int | None = None, rounds: int | None = None) -> Scenario:
    """``base`` with K clients per round (``method.clients_per_round``) and E local SGD steps
    (``train.local_steps``), optionally another seed and round limit; validated like a scenario file."""
    data = base.model_dump(mode="python")
    data["method"]["clients_per_round"] = int(k)
    data["train"]["local_steps"] = int(e)
    if seed is not None:
        data["seed"] = int(seed)
    if rounds is not None:
        data["rounds"] = int(rounds)
    data["checkpoint_every"] = 0
    return scenario_from_dict(data)


def run_until_loss(scenario: Scenario, targets: Iterable[float], *, max_rounds: int | None = None) -> LossRun:
    """Step a :class:`~edgefl.run.runner.Simulation` of ``scenario`` until its loss is <= min(``targets``) or
    ``max_rounds`` (default ``scenario.rounds``) rounds have run; return the trajectory."""
    from edgefl.run.runner import Simulation

    column = _loss_column(scenario)
    goals = [float(t) for t in targets]
    if not goals or not all(math.isfinite(t) for t in goals):
        raise ValueError(f"targets={goals}: need at least one finite loss")
    lowest = min(goals)
    limit = scenario.rounds if max_rounds is None else int(max_rounds)
    wall0 = time.perf_counter()
    sim = Simulation(scenario)
    loss, t, en = [], [], []
    for r in range(1, limit + 1):
        row = sim.step(r)
        loss.append(float(row[column]))
        t.append(float(row["sim_time_s"]))
        en.append(float(row["energy_cum_j"]))
        if loss[-1] <= lowest:
            break
    return LossRun(
        k=scenario.method.clients_per_round, e=scenario.train.local_steps, seed=scenario.seed,
        loss=np.array(loss), time_s=np.array(t), energy_j=np.array(en), wall_s=time.perf_counter() - wall0,
    )  # fmt: skip


class RunCache:
    """Runs of one base scenario by (K, E, seed), each simulated once: every consumer (A0/B0 sampling, the
    final design, the exhaustive grid, every gamma) reads the same trajectory; a run is repeated only when
    a lower target is asked of it than it was run to. ``progress`` gets a line per simulated run.

    ``store`` (a folder, optional) makes the cache resumable: every finished run is written there as one JSON
    file (atomically), and runs already there for the same scenario and ``max_rounds`` are read back at start
    instead of simulated again. A run's file name carries a hash of the resolved scenario and the round limit,
    so runs of another scenario or limit in the same folder are never mixed in.

    Every run trains with one torch thread (small models: one thread is faster than contended many), in a
    worker process of :meth:`prefetch` or, for :meth:`get`, here with the caller's setting restored after."""

    def __init__(
        self,
        base: Scenario,
        *,
        max_rounds: int,
        progress: Callable[[str], None] | None = None,
        store: str | Path | None = None,
    ) -> None:
        _loss_column(base)
        self.base = base
        self.max_rounds = int(max_rounds)
        self.progress = progress
        self.runs: dict[tuple[int, int, int], LossRun] = {}
        self.simulated = 0
        self.wall_s = 0.0
        self.store = None if store is None else Path(store)
        self.loaded = 0
        if self.store is not None:
            self._load_store()

    def _store_tag(self) -> str:
        text = json.dumps([self.base.model_dump(mode="json", exclude={"seed", "rounds", "name", "description"}),
                           self.max_rounds], sort_keys=True, default=str)  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def _store_path(self, key: tuple[int, int, int]) -> Path:
        k, e, seed = key
        return self.store / f"run-{self._store_tag()}-K{k}-E{e}-s{seed}.json"

    def _load_store(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.store.glob(f"run-{self._store_tag()}-*.json")):
            d = json.loads(path.read_text())
            run = LossRun(k=int(d["k"]), e=int(d["e"]), seed=int(d["seed"]), loss=np.array(d["loss"], dtype=float),
                          time_s=np.array(d["time_s"], dtype=float), energy_j=np.array(d["energy_j"], dtype=float),
                          wall_s=float(d["wall_s"]))  # fmt: skip
            self.runs[(run.k, run.e, run.seed)] = run
            self.loaded += 1

    def _save(self, key: tuple[int, int, int], run: LossRun) -> None:
        from edgefl.io import atomic_write_text

        d = {"k": run.k, "e": run.e, "seed": run.seed, "loss": run.loss.tolist(), "time_s": run.time_s.tolist(),
             "energy_j": run.energy_j.tolist(), "wall_s": run.wall_s}  # fmt: skip
        atomic_write_text(self._store_path(key), json.dumps(d))

    def prefetch(self, designs: Iterable[tuple[int, int, int]], targets: Iterable[float], *, jobs: int = 1) -> None:
        """Simulate the missing (K, E, seed) runs to ``targets``, ``jobs`` processes at a time (torch at one
        thread each); later :meth:`get` calls read them. ``jobs = 1`` runs them here, one after another."""
        goals = [float(x) for x in targets]
        self.prefetch_plan([(d, goals) for d in designs], jobs=jobs)

    def prefetch_plan(self, plan: Iterable[tuple[tuple[int, int, int], Iterable[float]]], *, jobs: int = 1) -> None:
        """:meth:`prefetch` with targets per design, all in one process pool: ``plan`` pairs a (K, E, seed)
        with the losses its run must settle (a design listed twice is run to the union of its targets)."""
        wanted: dict[tuple[int, int, int], list[float]] = {}
        for design, targets in plan:
            key = tuple(int(v) for v in design)
            wanted.setdefault(key, []).extend(float(x) for x in targets)
        todo = [(d, g) for d, g in wanted.items() if not (d in self.runs and all(self.runs[d].answers(x, self.max_rounds) for x in g))]
        if jobs <= 1 or len(todo) <= 1:
            for (k, e, s), goals in todo:
                self.get(k, e, s, goals)
            return
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=jobs, initializer=_one_thread) as pool:
            futures = {
                pool.submit(run_until_loss, design_scenario(self.base, k=k, e=e, seed=s, rounds=self.max_rounds), goals,
                            max_rounds=self.max_rounds): (key, goals)  # fmt: skip
                for key, goals in todo
                for k, e, s in [key]
            }
            for fut in as_completed(futures):  # recorded (and stored) as each finishes
                key, goals = futures[fut]
                self._record(key, fut.result(), goals)

    def _record(self, key: tuple[int, int, int], run: LossRun, goals: list[float]) -> None:
        k, e, seed = key
        self.runs[key] = run
        if self.store is not None:
            self._save(key, run)
        self.simulated += 1
        self.wall_s += run.wall_s
        if self.progress is not None:
            h = run.hit(min(goals))
            got = (f"loss {min(goals):g} at round {h.rounds}, {h.time_s:.1f} s, {h.energy_j:.3f} J" if h
                   else f"loss {min(goals):g} NOT reached in {run.rounds} rounds (last {run.loss[-1]:.4f})")  # fmt: skip
            self.progress(f"run K={k} E={e} seed={seed}: {got}; wall {run.wall_s:.1f} s")

    def get(self, k: int, e: int, seed: int, targets: Iterable[float]) -> LossRun:
        goals = [float(x) for x in targets]
        key = (int(k), int(e), int(seed))
        run = self.runs.get(key)
        if run is not None and all(run.answers(x, self.max_rounds) for x in goals):
            return run
        sc = design_scenario(self.base, k=k, e=e, seed=seed, rounds=self.max_rounds)
        with torch_threads(1):  # as in the pool's workers; the caller's setting is restored after
            run = run_until_loss(sc, goals, max_rounds=self.max_rounds)
        self._record(key, run, goals)
        return run


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
