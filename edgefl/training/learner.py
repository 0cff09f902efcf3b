"""How a run's global model learns, bound once at build time: the method's own steps on a real model
(:class:`TrainingLearner`) or the surrogate's convergence bound standing in for them (:class:`BoundLearner`).

Both drivers call the same four steps, never handed the method: ``work`` (the jobs' device-side work, when they
start), ``advance`` (a synchronous round's aggregation of the kept updates), ``server_step`` (an asynchronous
update's step from staleness-weighted updates) and ``assess`` (the new global model).

The device-side work of a round goes through one :class:`Executor`: the server side turns each planned job into a
value, a :class:`~edgefl.methods.base.TrainJob` (the device's download of the global model, its knobs, its
memory, its seed), and the executor runs the method's device side on each (shrink, train, compress) and returns
a :class:`~edgefl.methods.base.ClientUpdate` (payload, bits, FLOPs, steps, loss, the device's new memory).
:class:`InlineExecutor`, the jobs in this process in job order, is the one executor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from edgefl.learning.protocol import Assessment, RoundWork

if TYPE_CHECKING:
    from edgefl.methods.base import ClientUpdate, JobTable, Method, TrainJob
    from edgefl.learning.protocol import Learning, Training

__all__ = [
    "BoundLearner", "Executor", "InlineExecutor", "Learner", "TrainingLearner", "make_learner", "run_groups",
    "training_groups",
]  # fmt: skip


class Executor(Protocol):
    """Runs the device side of a round's jobs (values) and returns what each built (:mod:`edgefl.training.executors`)."""

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        """Every job's client update, in job order."""
        ...

    def start(self) -> None:
        """Start the executor's workers now rather than with the first jobs."""
        ...

    def close(self) -> None:
        """Release the executor's workers (the run is over)."""
        ...


def training_groups(method: Method, trainer: Training, jobs: Sequence[TrainJob]) -> list[list[int]]:
    """A round's jobs (indices into ``jobs``) cut into the groups that train together: the jobs whose
    :meth:`~edgefl.methods.base.Method.local_training` has the same shape (round, width, step count, masked or
    not) when ``trainer.vectorises`` it (``train.vectorise``), in order of their first job; every other job alone.

    It depends only on the jobs, the method and the scenario, never on the executor or its worker count, and every
    executor runs each group whole (:func:`run_groups`), so that the tables are the same whichever runs them:
    a job's vectorised result may differ from its one-by-one result in the last float bits, and its padding
    depends on the other jobs of its group.
    """
    from edgefl.methods.base import vectorisable

    if len(jobs) < 2 or not vectorisable(method):
        return [[i] for i in range(len(jobs))]
    groups: dict[Any, list[int]] = {}
    for i, job in enumerate(jobs):
        req = method.local_training(job, trainer=trainer)
        ok = req is not None and trainer.vectorises(req.width, req.steps, auto=req.auto)
        groups.setdefault(req.key(job) if ok else ("alone", i), []).append(i)
    return list(groups.values())


def run_groups(method: Method, trainer: Training, jobs: Sequence[TrainJob], groups: Sequence[Sequence[int]]) -> list[ClientUpdate]:
    """Every job's client update on ``trainer``, in job order: each group of two or more jobs (indices into
    ``jobs``, :func:`training_groups`) trained together (:meth:`~edgefl.methods.base.Method.client_updates`),
    the others (and a group the method declines) one by one."""
    out: list[Any] = [None] * len(jobs)
    for group in groups:
        part = [jobs[i] for i in group]
        updates = method.client_updates(part, trainer=trainer) if len(part) > 1 else None
        if updates is None:
            updates = [method.client_update(job, trainer=trainer) for job in part]
        for i, u in zip(group, updates):
            out[i] = u
    return out


class InlineExecutor:
    """The jobs' client updates in this process, on the run's ``trainer``: the jobs of each of
    :func:`training_groups` together, the others one by one (:func:`run_groups`)."""

    def __init__(self, *, method: Method, trainer: Training) -> None:
        self.method, self.trainer = method, trainer

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        method, trainer = self.method, self.trainer
        return run_groups(method, trainer, jobs, training_groups(method, trainer, jobs))

    def start(self) -> None:
        return None

    def close(self) -> None:
        return None


class Learner(Protocol):
    """The learning steps a driver calls (module docstring)."""

    def work(self, jobs: JobTable, *, state: Any, round_index: int) -> RoundWork:
        """The device-side work of ``jobs`` from the global ``state`` (called when the jobs start)."""
        ...

    def advance(self, state: Any, *, jobs: JobTable, work: RoundWork, kept: np.ndarray, n_selected: int) -> Any:
        """The next global state from the kept jobs (indices into ``jobs``, arrival order) of a round that
        selected ``n_selected`` devices."""
        ...

    def server_step(self, state: Any, *, updates: Sequence[Any], bases: Sequence[Any], tau: np.ndarray,
                    alpha: np.ndarray, beta: np.ndarray) -> Any:  # fmt: skip
        """The next global state from an asynchronous server update: ``updates`` trained from ``bases`` (the
        models they downloaded), their staleness ``tau`` and knobs ``alpha``, ``beta`` (shape (m,) each)."""
        ...

    def assess(self, state: Any, work: RoundWork, *, evaluate: bool, global_loss: bool) -> Assessment:
        """Measure the new global state (``evaluate``: on the test set this step; ``global_loss``: also the
        global training loss F(w))."""
        ...

    def close(self) -> None:
        """Release what the learner holds beyond the run (its executor's workers)."""
        ...


class TrainingLearner:
    """Real training: the method's client updates (through ``executor``), its aggregation, its server step and
    its evaluation, on the torch ``workload``."""

    def __init__(self, *, method: Method, workload: Learning, executor: Executor) -> None:
        self.method, self.workload, self.executor = method, workload, executor

    def work(self, jobs: JobTable, *, state: Any, round_index: int) -> RoundWork:
        """The jobs as values (:meth:`~edgefl.methods.base.Method.train_job`), run by the executor; the method
        then takes note of what the devices did and kept (:meth:`~edgefl.methods.base.Method.remember`)."""
        method = self.method
        updates = self.executor.run([method.train_job(job, state=state, round_index=round_index) for job in jobs])
        method.remember(updates)
        return RoundWork(
            flops=np.array([u.flops for u in updates], dtype=float),
            bits=np.array([u.bits for u in updates], dtype=float),
            steps=np.array([u.steps for u in updates], dtype=np.int64),
            losses=np.array([u.train_loss for u in updates], dtype=float),
            updates=updates,
        )

    def advance(self, state: Any, *, jobs: JobTable, work: RoundWork, kept: np.ndarray, n_selected: int) -> Any:
        return self.method.aggregate(state, updates=[work.updates[i] for i in kept])

    def server_step(self, state: Any, *, updates: Sequence[Any], bases: Sequence[Any], tau: np.ndarray,
                    alpha: np.ndarray, beta: np.ndarray) -> Any:  # fmt: skip
        return self.method.server_step(state, updates=updates, bases=bases, tau=tau)

    def assess(self, state: Any, work: RoundWork, *, evaluate: bool, global_loss: bool) -> Assessment:
        """Test accuracy and loss (by the method's inference rule) when ``evaluate``, the jobs' mean training
        loss, and F(w) over every device's data when ``evaluate`` and ``global_loss``."""
        acc, test_loss = self.method.evaluate(state) if evaluate else (math.nan, math.nan)
        losses = work.losses
        train_loss = float(np.mean(losses[losses == losses])) if np.any(losses == losses) else math.nan
        f_w = self.workload.global_train_loss(state) if evaluate and global_loss else math.nan
        return Assessment(acc, test_loss, train_loss, f_w)

    def close(self) -> None:
        self.executor.close()


class BoundLearner:
    """Surrogate learning: the jobs' planned work, and the global loss moved by the surrogate ``workload``'s
    convergence bound (:class:`edgefl.learning.surrogate.SurrogateWorkload`); ``method`` gives the asynchronous
    steps' staleness weights."""

    def __init__(self, *, method: Method, workload: Any) -> None:
        self.method, self.workload = method, workload

    def work(self, jobs: JobTable, *, state: Any, round_index: int) -> RoundWork:
        return self.workload.planned_work(jobs)

    def advance(self, state: Any, *, jobs: JobTable, work: RoundWork, kept: np.ndarray, n_selected: int) -> Any:
        return self.workload.bound_step(
            state, n_selected=n_selected, alpha=jobs.alpha[kept], beta=jobs.beta[kept], local_steps=work.steps[kept]
        )

    def server_step(self, state: Any, *, updates: Sequence[Any], bases: Sequence[Any], tau: np.ndarray,
                    alpha: np.ndarray, beta: np.ndarray) -> Any:  # fmt: skip
        return self.workload.async_step(state, omega=self.method.weights(tau), alpha=alpha, beta=beta)

    def assess(self, state: Any, work: RoundWork, *, evaluate: bool, global_loss: bool) -> Assessment:
        """No test set: the training loss is the bound's loss."""
        return Assessment(math.nan, math.nan, self.workload.loss(state), math.nan)

    def close(self) -> None:
        return None


def make_learner(*, method: Method, workload: Learning, executor: Executor | None = None) -> Learner:
    """The learner of a run: :class:`TrainingLearner` when the workload trains (its jobs run by ``executor``,
    default :class:`InlineExecutor`), else :class:`BoundLearner`."""
    if workload.trains:
        executor = executor or InlineExecutor(method=method, trainer=workload)
        return TrainingLearner(method=method, workload=workload, executor=executor)
    return BoundLearner(method=method, workload=workload)
