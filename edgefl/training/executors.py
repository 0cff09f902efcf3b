"""Where a round's training jobs run: the trainer's executors (docs/architecture.md, "Training jobs and executors").

An executor takes a round's (or a dispatch's) jobs as values, :class:`~edgefl.methods.base.TrainJob`, and
returns each job's :class:`~edgefl.methods.base.ClientUpdate` in job order; the server side (decoding,
aggregation, evaluation) stays in the driver. Each job's whole device-side work (shrinking, training,
compression and its budget search) runs where the executor puts it:

- ``"inline"`` (:class:`edgefl.training.learner.InlineExecutor`): in this process, one job after another (or the method's
  vectorised :meth:`~edgefl.methods.base.Method.client_updates`);
- ``"processes"`` (:class:`ProcessExecutor`): a local pool of ``train.workers`` processes;
- ``"ray"`` (:class:`RayExecutor`): ``train.workers`` Ray actors on a cluster (``train.address``, or a local
  one bound to 127.0.0.1).

A worker (a process or an actor) builds its own copy of the run's device side once, when it starts: the trainer
with its data and the method as built (its settings and per-device constants), from the scenario, with
``train.threads`` torch threads; jobs then reach it as values. The jobs that train together
(:func:`edgefl.training.learner.training_groups`, ``train.vectorise``) are grouped from the jobs alone, and a group is
never split: a worker runs each of its groups together and its other jobs one after another
(:func:`edgefl.training.learner.run_groups`). The pool deals a round's groups round-robin into :data:`PARTS_PER_WORKER`
parts per worker, handed out as workers free up (a model that a part's jobs download travels once per part);
each Ray actor takes one contiguous chunk of whole groups. So every executor and worker count gives the same
updates, bit for bit, at a fixed thread count: a job draws only from its own streams
(:meth:`~edgefl.methods.base.TrainJob.rng`, the trainer's batches keyed by round and device), and a group's
padding depends only on its jobs.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.methods.base import ClientUpdate, Method, TrainJob
    from edgefl.learning.protocol import Training

__all__ = [
    "DeviceSide", "Grouping", "ProcessExecutor", "RayExecutor", "chunks", "dealt", "group_chunks", "usable_cores",
]  # fmt: skip

PARTS_PER_WORKER = 4
"""A pool's round is cut into this many parts per worker, handed out as workers free up: a worker whose part
was quick takes the next, so one slow part (wide models, long searches) no longer idles the other workers."""

DeviceSide = Callable[[], "tuple[Method, Training]"]
"""Builds a worker's copy of a run's device side: (the method as built, the trainer with the devices' data).
Picklable (a module-level function with its arguments), so a worker process or actor can call it."""


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; all cores where the platform has none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def chunks(n_jobs: int, n_workers: int) -> list[range]:
    """Jobs ``0..n_jobs-1`` cut into at most ``n_workers`` contiguous chunks of near-equal size (the first
    ``n_jobs % k`` one longer), none empty."""
    k = max(1, min(n_workers, n_jobs))
    size, extra = divmod(n_jobs, k)
    out, start = [], 0
    for i in range(k):
        stop = start + size + (1 if i < extra else 0)
        out.append(range(start, stop))
        start = stop
    return [c for c in out if len(c)]


def dealt(groups: Sequence[Sequence[int]], n_parts: int) -> list[list[int]]:
    """``groups`` (job indices) dealt round-robin into at most ``n_parts`` parts (group i to part i mod k), none
    empty, each part the concatenation of its groups: each part holds jobs from the whole round, so the parts cost
    about the same when the round's jobs are ordered by anything that tracks their cost (device index, width)."""
    k = max(1, min(n_parts, len(groups)))
    return [[j for g in groups[i::k] for j in g] for i in range(k)] if groups else []

Grouping = Callable[["Sequence[TrainJob]"], "list[list[int]]"]
"""A round's jobs -> the groups that train together (indices into the jobs), :func:`edgefl.training.learner.training_groups`
bound to the run's method and trainer; None in an executor: every job alone."""


def group_chunks(groups: Sequence[Sequence[int]], n_workers: int) -> list[list[int]]:
    """``groups`` (job indices) cut into at most ``n_workers`` chunks of whole groups, in order, each chunk the
    concatenation of its groups; with singleton groups, :func:`chunks` of the jobs. A chunk closes once it holds
    its share of the jobs, ``ceil`` of the jobs left over the workers left."""
    n_jobs = sum(len(g) for g in groups)
    if all(len(g) == 1 for g in groups):
        order = [g[0] for g in groups]
        return [[order[i] for i in c] for c in chunks(n_jobs, n_workers)]
    out: list[list[int]] = []
    left, workers_left, current = n_jobs, max(1, n_workers), []
    for g in groups:
        current.extend(g)
        if len(current) >= -(-left // workers_left) and workers_left > 1:
            out.append(current)
            left -= len(current)
            workers_left -= 1
            current = []
    if current:
        out.append(current)
    return out


def _local_groups(chunk: Sequence[int], groups: Sequence[Sequence[int]]) -> list[list[int]]:
    """The groups inside ``chunk`` as positions in it."""
    where = {j: i for i, j in enumerate(chunk)}
    return [[where[j] for j in g] for g in groups if g and g[0] in where]


def run_jobs(
    method: Method, trainer: Training, jobs: Sequence[TrainJob], groups: Sequence[Sequence[int]] | None = None
) -> list[ClientUpdate]:
    """Every job's client update on ``trainer``, in job order: each of ``groups`` (positions in ``jobs``; None:
    every job alone) trained together, the rest one after another; what each worker does with its chunk."""
    from edgefl.training.learner import run_groups

    return run_groups(method, trainer, jobs, [[i] for i in range(len(jobs))] if groups is None else groups)


def _parts(
    jobs: Sequence[TrainJob], grouping: Grouping | None, cut: Callable[[list[list[int]]], list[list[int]]]
) -> list[tuple[list[int], list]]:
    """The round's parts as ``cut`` makes them from its groups: (job indices, (its jobs, its groups as positions
    in the part))."""
    groups = [[i] for i in range(len(jobs))] if grouping is None else grouping(jobs)
    return [(c, ([jobs[i] for i in c], _local_groups(c, groups))) for c in cut(groups)]


def _in_order(n: int, parts: Sequence[tuple[list[int], Any]], results: Sequence[Sequence[ClientUpdate]]) -> list:
    out: list[Any] = [None] * n
    for (c, _), res in zip(parts, results):
        for i, u in zip(c, res):
            out[i] = u
    return out


# ------------------------------------------------------------------------------------------- processes

_WORKER: tuple[Any, Any] | None = None  # a worker process's (method, trainer)


def _start_worker(build: DeviceSide, threads: int) -> None:
    """A pool process's (or Ray actor's) start: ``threads`` torch threads and BLAS/OpenMP threads, then its device
    side, its trainer warmed up (:meth:`~edgefl.learning.workload.Workload.warm_up`: first-use costs paid here,
    not in the first round's jobs)."""
    global _WORKER
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _WORKER = build()
    _WORKER[1].warm_up()


def _run_chunk(part: tuple[Sequence[TrainJob], Sequence[Sequence[int]]]) -> list[ClientUpdate]:
    method, trainer = _WORKER
    jobs, groups = part
    return run_jobs(method, trainer, jobs, groups)


class ProcessExecutor:
    """A local pool of ``workers`` processes (started with ``spawn``: nothing inherited from this process), each
    with its own device side from ``build`` and ``threads`` torch threads. The pool starts with the first round
    that has jobs and stops with :meth:`close` (or when this process exits)."""

    def __init__(self, *, build: DeviceSide, workers: int, threads: int = 1, grouping: Grouping | None = None) -> None:
        """``grouping``: which jobs train together (None: every job alone)."""
        self.build, self.workers, self.threads, self.grouping = build, int(workers), int(threads), grouping
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Start every worker now (each builds its device side), not with the first round's jobs."""
        self._started()

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker, initargs=(self.build, self.threads),
            )  # fmt: skip
            # start every worker now, so that each builds its device side once, before the first round's jobs: a
            # worker takes tasks only once started, so waiting until every worker has answered one waits for all
            answered: set[int] = set()
            while len(answered) < self.workers:
                answered.update(self._pool.map(_ready, range(self.workers)))
        return self._pool

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        if not jobs:
            return []
        pool = self._started()
        parts = _parts(jobs, self.grouping, lambda groups: dealt(groups, PARTS_PER_WORKER * self.workers))
        return _in_order(len(jobs), parts, list(pool.map(_run_chunk, [p for _, p in parts])))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _ready(_: int) -> int:
    """A no-op task answering the worker's process id: the pool is started once every worker has answered."""
    import time

    time.sleep(0.05)  # long enough that one worker does not take every task while the others start
    return os.getpid()


# ------------------------------------------------------------------------------------------- Ray


class _Actor:
    """A Ray actor's device side (the class becomes a Ray actor in :class:`RayExecutor`)."""

    def __init__(self, build: DeviceSide, threads: int) -> None:
        _start_worker(build, threads)

    def run(self, part: tuple[Sequence[TrainJob], Sequence[Sequence[int]]]) -> list[ClientUpdate]:
        return _run_chunk(part)


class RayExecutor:
    """``workers`` Ray actors, each with its own device side from ``build`` (the data placed once per actor, not
    per job) and ``threads`` torch threads (``num_cpus`` of the actor). ``address``: join that cluster (its nodes
    must have edgefl installed); None: join the cluster this process is connected to, else start a local one
    bound to 127.0.0.1 with ``workers`` CPUs, shut down by :meth:`close`."""

    def __init__(
        self, *, build: DeviceSide, workers: int, threads: int = 1, address: str | None = None,
        grouping: Grouping | None = None,
    ) -> None:  # fmt: skip
        """``grouping``: which jobs train together (None: every job alone)."""
        from edgefl.training.ray_cluster import import_ray

        self.build, self.workers, self.threads, self.address = build, int(workers), int(threads), address
        self.grouping = grouping
        self._ray = import_ray()
        self._actors: list[Any] = []
        self._started_cluster = False

    def start(self) -> None:
        """Start every actor now (each builds its device side), not with the first round's jobs."""
        self._ray.get([a.run.remote(([], [])) for a in self._started()])

    def _started(self) -> list[Any]:
        if not self._actors:
            from edgefl.training.ray_cluster import connect

            ray = self._ray
            self._started_cluster = connect(self.address, num_cpus=self.workers * self.threads)
            actor = ray.remote(num_cpus=self.threads)(_Actor)
            self._actors = [actor.remote(self.build, self.threads) for _ in range(self.workers)]
        return self._actors

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        if not jobs:
            return []
        actors = self._started()
        parts = _parts(jobs, self.grouping, lambda groups: group_chunks(groups, len(actors)))
        refs = [a.run.remote(p) for a, (_, p) in zip(actors, parts)]
        return _in_order(len(jobs), parts, self._ray.get(refs))

    def close(self) -> None:
        ray = self._ray
        for a in self._actors:
            ray.kill(a)
        self._actors = []
        if self._started_cluster:
            ray.shutdown()
            self._started_cluster = False
