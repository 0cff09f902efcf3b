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
(:func:`edgefl.training.learner.run_groups`). The pool sends a group to the worker that holds its devices' memory
(:class:`Held`: STC's residual stays where it was made), up to an even share of the round's jobs per worker, and
deals the other groups round-robin into :data:`PARTS_PER_WORKER` parts per worker, handed out as workers free up (a
model that a part's jobs download travels once per part); each Ray actor takes one contiguous chunk of whole groups
(memories cross with the jobs). So every executor and worker count gives the same
updates, bit for bit, at a fixed thread count: a job draws only from its own streams
(:meth:`~edgefl.methods.base.TrainJob.rng`, the trainer's batches keyed by round and device), and a group's
padding depends only on its jobs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import multiprocessing
import os
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.methods.base import ClientUpdate, Method, TrainJob
    from edgefl.learning.protocol import Training

__all__ = [
    "DeviceSide", "Grouping", "Held", "ProcessExecutor", "RayExecutor", "chunks", "dealt", "group_chunks",
    "usable_cores",
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
_INDEX: int | None = None  # a pool worker's index (None in a Ray actor: it keeps no memory)
_HELD: dict[int, tuple[int, Any]] = {}  # a pool worker's device memories: device -> (token, memory)
_TOKENS = itertools.count(1)


class Held(Mapping):
    """A device's memory (:attr:`~edgefl.methods.base.ClientUpdate.memory`, a mapping: STC's error-feedback
    residual, CC-FedAvg's history) left in the pool worker that made it: what crosses back to the run is this
    handle (the device, a token, the worker), and the device's next job, routed to that worker, crosses with the
    handle alone; the worker puts its memory back into the job. In the run's process it reads as the memory
    itself (a read-only mapping): the first read (a checkpoint's ``Method.state_dict``) fetches every memory the
    executor's workers hold for the run, once. A full-size residual then stays put instead of crossing twice
    a round."""

    def __init__(self, device: int, token: int, worker: int | None) -> None:
        self.device, self.token = int(device), int(token)
        self.worker = None if worker is None else int(worker)
        """The pool worker that holds the memory; None once it was taken back to move with a job."""
        self._owner: ProcessExecutor | None = None  # the executor whose worker holds it (the run's process)
        self._value: Any = None  # the memory, once fetched

    def __reduce__(self):
        return (Held, (self.device, self.token, self.worker))  # the handle alone crosses

    @property
    def value(self) -> Any:
        """The memory itself (fetched from the worker on first use)."""
        if self._value is None:
            if self._owner is None:
                raise RuntimeError(f"device {self.device}'s memory is held by pool worker {self.worker}, which is "
                                   "gone")  # fmt: skip
            self._owner.fetch()
            if self._value is None:  # a later job of the device replaced it in the worker
                raise RuntimeError(f"device {self.device}'s memory {self.token} was replaced by a later job's")
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self.value[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.value)

    def __len__(self) -> int:
        return len(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, Held) else other)

    __hash__ = None  # equal by value


def _start_worker(build: DeviceSide, threads: int, index: int | None = None) -> None:
    """A pool process's (or Ray actor's) start: ``threads`` torch threads and BLAS/OpenMP threads, then its device
    side, its trainer warmed up (:meth:`~edgefl.learning.workload.Workload.warm_up`: first-use costs paid here,
    not in the first round's jobs). ``index``: a pool worker's place in its pool (it then keeps the device
    memories its jobs make, :class:`Held`)."""
    global _WORKER, _INDEX
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)
    _INDEX = index
    _WORKER = build()
    _WORKER[1].warm_up()


def _unheld(job: TrainJob) -> TrainJob:
    """``job`` with the memory this worker holds for it in place of its :class:`Held` handle."""
    if not isinstance(job.memory, Held):
        return job
    token, memory = _HELD.get(job.memory.device, (None, None))
    if token != job.memory.token:
        raise RuntimeError(f"pool worker {_INDEX} does not hold device {job.memory.device}'s memory "
                           f"{job.memory.token} (it holds {token})")  # fmt: skip
    return dataclasses.replace(job, memory=memory)


def _held(update: ClientUpdate) -> ClientUpdate:
    """``update`` with its memory kept here and a :class:`Held` handle in its place (a pool worker only)."""
    if _INDEX is None or not isinstance(update.memory, Mapping):
        return update
    token = next(_TOKENS)
    _HELD[update.device] = (token, update.memory)
    return dataclasses.replace(update, memory=Held(update.device, token, _INDEX))


def _run_chunk(part: tuple[Sequence[TrainJob], Sequence[Sequence[int]]]) -> list[ClientUpdate]:
    method, trainer = _WORKER
    jobs, groups = part
    return [_held(u) for u in run_jobs(method, trainer, [_unheld(j) for j in jobs], groups)]


def _fetch(keys: Sequence[tuple[int, int]], drop: bool) -> list[Any]:
    """The memories this worker holds for ``keys`` ((device, token) pairs); ``drop``: forget them (they move)."""
    out = []
    for device, token in keys:
        held, memory = _HELD[device]
        if held != token:
            raise RuntimeError(f"pool worker {_INDEX} holds memory {held} of device {device}, not {token}")
        out.append(memory)
        if drop:
            del _HELD[device]
    return out


class ProcessExecutor:
    """``workers`` local processes (started with ``spawn``: nothing inherited from this process), each with its own
    device side from ``build`` and ``threads`` torch threads, each a pool of one so that a job can be sent to the
    worker of its choice. A device's memory stays in the worker that made it (:class:`Held`): a round's group whose
    devices' memory a worker holds goes to that worker, up to an even share of the round's jobs each (the
    memory of a job sent elsewhere is fetched back first and crosses with it); the other groups are dealt into
    :data:`PARTS_PER_WORKER` parts per worker, handed out as workers free up. The workers start with the first
    round that has jobs and stop with :meth:`close` (or when this process exits), which first brings every memory
    they hold for the run back into its handle."""

    def __init__(self, *, build: DeviceSide, workers: int, threads: int = 1, grouping: Grouping | None = None) -> None:
        """``grouping``: which jobs train together (None: every job alone)."""
        self.build, self.workers, self.threads, self.grouping = build, int(workers), int(threads), grouping
        self._pools: list[ProcessPoolExecutor] = []
        self._issued: dict[int, weakref.ref] = {}  # device -> its latest Held handed to the run
        self.moved = 0
        """Jobs so far whose memory was fetched back from one worker to go with them to another."""

    def start(self) -> None:
        """Start every worker now (each builds its device side), not with the first round's jobs."""
        self._started()

    def _started(self) -> list[ProcessPoolExecutor]:
        if not self._pools:
            spawn = multiprocessing.get_context("spawn")
            self._pools = [
                ProcessPoolExecutor(max_workers=1, mp_context=spawn, initializer=_start_worker,
                                    initargs=(self.build, self.threads, w))
                for w in range(self.workers)
            ]  # fmt: skip
            for answer in [pool.submit(_ready, w) for w, pool in enumerate(self._pools)]:
                answer.result()  # every worker has built its device side before the first round's jobs
        return self._pools

    def run(self, jobs: Sequence[TrainJob]) -> list[ClientUpdate]:
        if not jobs:
            return []
        pools = self._started()
        jobs = [self._sendable(job) for job in jobs]
        groups = [[i] for i in range(len(jobs))] if self.grouping is None else self.grouping(jobs)
        share, load = math.ceil(len(jobs) / len(pools)), [0] * len(pools)
        pinned: list[list[list[int]]] = [[] for _ in pools]
        free, moving = [], []
        for g in groups:
            homes = [jobs[i].memory.worker for i in g if isinstance(jobs[i].memory, Held)]
            home = homes[0] if homes and load[homes[0]] + len(g) <= share else None
            if home is None:
                free.append(g)
            else:
                pinned[home].append(g)
                load[home] += len(g)
            moving += [i for i in g if isinstance(jobs[i].memory, Held) and jobs[i].memory.worker != home]
        self.moved += len(moving)
        for i, memory in zip(moving, self._take([jobs[i].memory for i in moving])):
            jobs[i] = dataclasses.replace(jobs[i], memory=memory)
        queues = [deque(dealt(p, PARTS_PER_WORKER)) for p in pinned]
        spare = deque(dealt(free, PARTS_PER_WORKER * len(pools)))
        out: list[Any] = [None] * len(jobs)
        running: dict[Future, tuple[int, list[int]]] = {}
        busy = [0] * len(pools)

        def feed(w: int) -> None:
            # up to two parts in a worker's queue, so that the next is there when one ends; but a shared part is
            # queued behind another only while there are more of them than workers (the round's last ones go to
            # whichever worker frees up first)
            while busy[w] < 2:
                if queues[w]:
                    part = queues[w].popleft()
                elif spare and (busy[w] == 0 or len(spare) > len(pools)):
                    part = spare.popleft()
                else:
                    return
                busy[w] += 1
                running[pools[w].submit(_run_chunk, ([jobs[i] for i in part], _local_groups(part, groups)))] = (w, part)

        for w in range(len(pools)):
            feed(w)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in done:
                w, part = running.pop(f)
                busy[w] -= 1
                for i, update in zip(part, f.result()):
                    out[i] = self._adopted(update)
            for w in range(len(pools)):  # a shared part may wait for whichever worker frees up first
                feed(w)
        return out

    def _sendable(self, job: TrainJob) -> TrainJob:
        """``job`` with the memory itself in place of a :class:`Held` handle that no worker of this executor holds:
        one of another executor (closed: its value fetched), or one taken to move with an earlier job that made no
        new memory (CC-FedAvg's estimating device keeps its history)."""
        memory = job.memory
        if isinstance(memory, Held) and (memory._owner is not self or memory.worker is None):
            return dataclasses.replace(job, memory=memory.value)
        return job

    def _adopted(self, update: ClientUpdate) -> ClientUpdate:
        if isinstance(update.memory, Held):
            update.memory._owner = self
            self._issued[update.device] = weakref.ref(update.memory)
        return update

    def _take(self, handles: Sequence[Held]) -> list[Any]:
        """The memories of ``handles``, each dropped by the worker that held it (they move to another)."""
        self._ask(handles, drop=True)
        for h in handles:
            h.worker = None  # no worker holds it now: it goes with the job as itself
        return [h._value for h in handles]

    def fetch(self) -> None:
        """Bring every memory the workers hold for the run's live handles into those handles (read by a checkpoint,
        or before the workers stop); the workers keep them for the devices' next jobs."""
        self._ask([h for r in self._issued.values() if (h := r()) is not None and h._value is None], drop=False)

    def _ask(self, handles: Sequence[Held], *, drop: bool) -> None:
        """Each of ``handles`` given its memory, asked of the worker holding it (one request per worker);
        ``drop``: the workers forget them."""
        by_worker: dict[int, list[Held]] = {}
        for h in handles:
            by_worker.setdefault(h.worker, []).append(h)
        asked = {w: self._pools[w].submit(_fetch, [(h.device, h.token) for h in hs], drop)
                 for w, hs in by_worker.items()}  # fmt: skip
        for w, answer in asked.items():
            for h, memory in zip(by_worker[w], answer.result()):
                h._value = memory

    def close(self) -> None:
        if not self._pools:
            return
        from concurrent.futures.process import BrokenProcessPool

        try:
            self.fetch()  # the run's memories come home before the workers go
        except BrokenProcessPool:
            pass  # a worker died, so the run has failed: its memories are lost, and their handles say so if read
        finally:
            for pool in self._pools:
                pool.shutdown(wait=True, cancel_futures=True)
            self._pools = []
            for ref in self._issued.values():
                if (h := ref()) is not None:
                    h._owner = None
            self._issued = {}


def _ready(_: int) -> int:
    """A no-op task answering the worker's process id (the worker has started and built its device side)."""
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
