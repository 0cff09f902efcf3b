"""Where a round's training jobs run: the trainer's executors (DESIGN.md, "Training jobs and executors").

An executor takes a round's (or a dispatch's) jobs as values, :class:`~edgefl.algorithms.base.TrainJob`, and
returns each job's :class:`~edgefl.algorithms.base.ClientUpdate` in job order; the server side (decoding,
aggregation, evaluation) stays in the driver. Each job's whole device-side work (shrinking, training,
compression and its budget search) runs where the executor puts it:

- ``"inline"`` (:class:`edgefl.learner.InlineExecutor`): in this process, one job after another (or the method's
  vectorised :meth:`~edgefl.algorithms.base.Method.client_updates`);
- ``"processes"`` (:class:`ProcessExecutor`): a local pool of ``train.workers`` processes;
- ``"ray"`` (:class:`RayExecutor`): ``train.workers`` Ray actors on a cluster (``train.address``, or a local
  one bound to 127.0.0.1).

A worker (a process or an actor) builds its own copy of the run's device side once, when it starts: the trainer
with its data and the method as built (its settings and per-device constants), from the scenario, with
``train.threads`` torch threads; jobs then reach it as values. The pool deals a round's jobs into
:data:`PARTS_PER_WORKER` parts per worker, handed out as workers free up (a model that a part's jobs download
travels once per part); each Ray actor takes one contiguous chunk. A worker runs its jobs one after another,
so every executor and worker count gives the same updates, bit for bit, at a fixed thread count: a job draws
only from its own streams (:meth:`~edgefl.algorithms.base.TrainJob.rng`, the trainer's batches keyed by round
and device).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.algorithms.base import ClientUpdate, Method, TrainJob
    from edgefl.learning.protocol import Training

__all__ = ["DeviceSide", "ProcessExecutor", "RayExecutor", "chunks", "dealt", "usable_cores"]

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


def dealt(n_jobs: int, n_parts: int) -> list[list[int]]:
    """Jobs ``0..n_jobs-1`` dealt round-robin into at most ``n_parts`` parts (job i to part i mod k), none empty:
    each part holds jobs from the whole round, so the parts cost about the same when the round's jobs are ordered
    by anything that tracks their cost (device index, width)."""
    k = max(1, min(n_parts, n_jobs))
    return [list(range(i, n_jobs, k)) for i in range(k)] if n_jobs else []


def run_jobs(method: Method, trainer: Training, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
    """Every job's client update, one after another, on ``trainer``: what each worker does with its chunk."""
    return [method.client_update(job, trainer=trainer) for job in jobs]


# ------------------------------------------------------------------------------------------- processes

_WORKER: tuple[Any, Any] | None = None  # a worker process's (method, trainer)


def _start_worker(build: DeviceSide, threads: int) -> None:
    """A pool process's initializer: ``threads`` torch threads and BLAS/OpenMP threads, then its device side."""
    global _WORKER
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _WORKER = build()


def _run_chunk(jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
    method, trainer = _WORKER
    return run_jobs(method, trainer, jobs)


class ProcessExecutor:
    """A local pool of ``workers`` processes (started with ``spawn``: nothing inherited from this process), each
    with its own device side from ``build`` and ``threads`` torch threads. The pool starts with the first round
    that has jobs and stops with :meth:`close` (or when this process exits)."""

    def __init__(self, *, build: DeviceSide, workers: int, threads: int = 1) -> None:
        self.build, self.workers, self.threads = build, int(workers), int(threads)
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
            # start every worker now, so that each builds its device side once, before the first round's jobs
            list(self._pool.map(_ready, range(self.workers)))
        return self._pool

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        if not jobs:
            return []
        pool = self._started()
        parts = dealt(len(jobs), PARTS_PER_WORKER * self.workers)
        out: list[Any] = [None] * len(jobs)
        for part, updates in zip(parts, pool.map(_run_chunk, [[jobs[i] for i in p] for p in parts])):
            for i, u in zip(part, updates):
                out[i] = u
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _ready(_: int) -> bool:
    """A no-op task: waiting for one per worker makes the pool start every worker."""
    import time

    time.sleep(0.05)  # long enough that one worker does not take every task before the others exist
    return _WORKER is not None


# ------------------------------------------------------------------------------------------- Ray


class _Actor:
    """A Ray actor's device side (the class becomes a Ray actor in :class:`RayExecutor`)."""

    def __init__(self, build: DeviceSide, threads: int) -> None:
        _start_worker(build, threads)

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        return _run_chunk(jobs)


class RayExecutor:
    """``workers`` Ray actors, each with its own device side from ``build`` (the data placed once per actor, not
    per job) and ``threads`` torch threads (``num_cpus`` of the actor). ``address``: join that cluster (its nodes
    must have edgefl installed); None: join the cluster this process is connected to, else start a local one
    bound to 127.0.0.1 with ``workers`` CPUs, shut down by :meth:`close`."""

    def __init__(self, *, build: DeviceSide, workers: int, threads: int = 1, address: str | None = None) -> None:
        from edgefl.ray_cluster import import_ray

        self.build, self.workers, self.threads, self.address = build, int(workers), int(threads), address
        self._ray = import_ray()
        self._actors: list[Any] = []
        self._started_cluster = False

    def start(self) -> None:
        """Start every actor now (each builds its device side), not with the first round's jobs."""
        self._ray.get([a.run.remote([]) for a in self._started()])

    def _started(self) -> list[Any]:
        if not self._actors:
            from edgefl.ray_cluster import connect

            ray = self._ray
            self._started_cluster = connect(self.address, num_cpus=self.workers * self.threads)
            actor = ray.remote(num_cpus=self.threads)(_Actor)
            self._actors = [actor.remote(self.build, self.threads) for _ in range(self.workers)]
        return self._actors

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        if not jobs:
            return []
        actors = self._started()
        parts = chunks(len(jobs), len(actors))
        refs = [a.run.remote([jobs[i] for i in c]) for a, c in zip(actors, parts)]
        return [u for part in self._ray.get(refs) for u in part]

    def close(self) -> None:
        ray = self._ray
        for a in self._actors:
            ray.kill(a)
        self._actors = []
        if self._started_cluster:
            ray.shutdown()
            self._started_cluster = False
