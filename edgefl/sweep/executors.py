"""Where a sweep's runs execute: in this process, in a local process pool, or on a Ray cluster.

Every executor runs the same job, :func:`compute_run` (scenario TOML text in, :class:`RunResult` out); the
local executors write the run directory in the worker with :func:`run_one`, the Ray executor returns the
result to the driver and writes it there (the nodes of a cluster need not share a filesystem). Torch uses a
fixed number of threads per run in every executor, so the same sweep gives the same numbers wherever it runs.

An executor is a context manager; ``imap(jobs)`` yields one :class:`RunOutcome` per job as it finishes.
Ray is an optional extra, imported only by :class:`RayExecutor`.
"""

from __future__ import annotations

import multiprocessing
import os
import tomllib
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from edgefl.errors import EdgeflError
from edgefl.learning.threads import torch_threads as _torch_threads
from edgefl.training.ray_cluster import RAY_INSTALL_HINT, RayUnavailable, connect, import_ray, start_local_cluster

if TYPE_CHECKING:
    from edgefl.output.results import RunResult

__all__ = [
    "SweepError",
    "RunJob",
    "RunOutcome",
    "compute_run",
    "run_one",
    "LocalExecutor",
    "RayExecutor",
    "make_executor",
    "start_local_cluster",
    "RAY_INSTALL_HINT",
]



class SweepError(EdgeflError, RuntimeError):
    """A sweep cannot run or some of its runs failed; the message names the run or the option."""


@dataclass(frozen=True, kw_only=True)
class RunJob:
    """One run to execute: its id, resolved scenario (TOML text), directory and torch threads."""

    run_id: str
    scenario_toml: str
    run_dir: Path
    threads: int = 1
    report: bool = True  # also write the run's report.html


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """A finished job: ``summary`` (summary.json) when it succeeded, else ``error`` (one line)."""

    job: RunJob
    summary: dict[str, Any] | None = None
    error: str | None = None


# ------------------------------------------------------------------------------------------- the job


def compute_run(scenario_toml: str, threads: int = 1) -> RunResult:
    """Validate and run one scenario given as TOML text with ``threads`` torch threads; return its result."""
    from edgefl.run.runner import run_scenario
    from edgefl.run.load import scenario_from_dict

    scenario = scenario_from_dict(tomllib.loads(scenario_toml))
    with _torch_threads(threads):
        return run_scenario(scenario)


def run_one(
    scenario_toml: str, run_dir: str | os.PathLike[str], threads: int = 1, report: bool = True
) -> dict[str, Any]:
    """Run one scenario (TOML text) and write its run directory (summary.json last); return the summary."""
    from edgefl.output.results import write_run

    result = compute_run(scenario_toml, threads)
    write_run(result, Path(run_dir), report=report)
    return dict(result.summary)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text}"


# ------------------------------------------------------------------------------------------- local


class LocalExecutor:
    """``jobs == 1``: run in this process, one after the other; ``jobs > 1``: a pool of ``jobs`` processes
    started with the ``spawn`` method (no state inherited from the parent)."""

    def __init__(self, *, jobs: int = 1) -> None:
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
            raise SweepError(f"jobs={jobs!r}: must be an integer >= 1")
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> LocalExecutor:
        if self.jobs > 1:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._pool is not None:
            # on Ctrl-C the workers got SIGINT too; runs not started yet are cancelled
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def imap(self, jobs: Sequence[RunJob]) -> Iterator[RunOutcome]:
        """Yield one outcome per job as it finishes (submission order when sequential)."""
        if self._pool is None:
            for job in jobs:
                try:
                    summary = run_one(job.scenario_toml, job.run_dir, job.threads, job.report)
                except Exception as exc:  # noqa: BLE001 - a failed run is reported, the sweep goes on
                    yield RunOutcome(job=job, error=_one_line(exc))
                else:
                    yield RunOutcome(job=job, summary=summary)
            return
        pool = self._pool
        pending: dict[Future[dict[str, Any]], RunJob] = {
            pool.submit(run_one, job.scenario_toml, str(job.run_dir), job.threads, job.report): job for job in jobs
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f].run_id):
                job = pending.pop(future)
                exc = future.exception()
                if isinstance(exc, KeyboardInterrupt):
                    raise KeyboardInterrupt
                yield RunOutcome(job=job, error=_one_line(exc)) if exc else RunOutcome(job=job, summary=future.result())


# ------------------------------------------------------------------------------------------- Ray


def _import_ray() -> Any:
    """The ``ray`` module, or :class:`SweepError` saying how to install it."""
    try:
        return import_ray()
    except RayUnavailable as exc:
        raise SweepError(str(exc)) from None


class RayExecutor:
    """Runs each job as a Ray task (``num_cpus = threads``) and writes its run directory on the driver.

    ``address=None``: join the cluster this process is already connected to, else start a local one bound to
    127.0.0.1 with ``num_cpus`` CPUs (default: every CPU) and shut it down on exit. ``address="HOST:PORT"``
    (or ``"auto"``): join an existing cluster, whose nodes must have edgefl installed. ``max_in_flight``
    limits how many runs are submitted at once (default: all; Ray schedules them on free CPUs).
    """

    def __init__(
        self, *, address: str | None = None, num_cpus: int | None = None, max_in_flight: int | None = None
    ) -> None:
        for name, value in (("num_cpus", num_cpus), ("max_in_flight", max_in_flight)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise SweepError(f"{name}={value!r}: must be an integer >= 1")
        self.address = address
        self.num_cpus = num_cpus
        self.max_in_flight = max_in_flight
        self._module = _import_ray()  # fail before the sweep writes anything when Ray is missing
        self._ray: Any = None
        self._started = False
        self._refs: dict[Any, RunJob] = {}

    def __enter__(self) -> RayExecutor:
        self._ray = self._module
        try:
            self._started = connect(self.address, num_cpus=self.num_cpus or os.cpu_count() or 1)
        except RayUnavailable as exc:
            raise SweepError(str(exc)) from None
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        ray = self._ray
        if ray is None:
            return
        for ref in list(self._refs):  # Ctrl-C or an error: runs still queued or running are abandoned
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001, S110 - best effort; the run is redone on the next sweep
                pass
        self._refs.clear()
        self._ray = None
        if self._started:
            ray.shutdown()
            self._started = False

    def imap(self, jobs: Sequence[RunJob]) -> Iterator[RunOutcome]:
        """Yield one outcome per job as it finishes; the driver writes each run directory."""
        from edgefl.output.results import write_run

        ray = self._ray
        if ray is None:
            raise SweepError("RayExecutor.imap called outside `with RayExecutor(...)`")
        queue = list(jobs)
        limit = self.max_in_flight or len(queue)
        remote: dict[int, Any] = {}
        while queue or self._refs:
            while queue and len(self._refs) < limit:
                job = queue.pop(0)
                if job.threads not in remote:
                    remote[job.threads] = ray.remote(num_cpus=job.threads, max_retries=0)(compute_run)
                self._refs[remote[job.threads].remote(job.scenario_toml, job.threads)] = job
            ready, _ = ray.wait(list(self._refs), num_returns=1)
            for ref in ready:
                job = self._refs.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - RayTaskError wraps the run's own exception
                    yield RunOutcome(job=job, error=_one_line(getattr(exc, "cause", None) or exc))
                    continue
                write_run(result, job.run_dir, report=job.report)
                yield RunOutcome(job=job, summary=dict(result.summary))


def make_executor(
    kind: Literal["local", "ray"], *, jobs: int | None = None, address: str | None = None, threads: int = 1
) -> LocalExecutor | RayExecutor:
    """The executor the CLI options name: ``local`` with ``jobs`` processes (default 1 = in-process), or
    ``ray`` (a local cluster of ``jobs * threads`` CPUs when no ``address``; ``jobs`` also caps runs in flight)."""
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise SweepError(f"--jobs {jobs!r}: must be an integer >= 1")
    if kind == "local":
        if address is not None:
            raise SweepError(f"--address {address!r}: only used with --executor ray")
        return LocalExecutor(jobs=jobs or 1)
    if kind == "ray":
        return RayExecutor(address=address, num_cpus=jobs * threads if jobs else None, max_in_flight=jobs)
    raise SweepError(f"--executor {kind!r}: must be one of local, ray")
