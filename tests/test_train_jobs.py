"""A round's device-side work is values: each :class:`~edgefl.methods.base.TrainJob` holds what its device needs
besides the trainer (its download, knobs, memory and seed), so another copy of the run, handed the job after a
pickle round trip (what a process pool or a cluster does), builds the same update bit for bit as the run's own
inline executor. The reference is the run itself; nothing here is computed twice the same way in one process."""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pytest
import torch

from edgefl.training.learner import InlineExecutor
from edgefl.run.runner import Simulation
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART

BUDGETED = [
    "round.policy=deadline", "round.deadline_s=2.0", "fleet.budget.kind=uniform", "fleet.budget.low_j=0.002",
    "fleet.budget.high_j=0.02", "method.heterofl.levels=['a','b','c']", "method.heterofl.assignment=capability",
]  # fmt: skip
"""The budgeted quickstart of ``benchmarks/identity.py``: every method plans jobs under it."""
SMALL = ["model.hidden=[16]", "rounds=3", "checkpoint_every=0"]
METHODS = ("fedavg", "stc", "qsgd", "fedhq", "uveqfed", "anycostfl", "heterofl", "ccfedavg", "fednova",
           "fedavg_dropout", "fedasync")  # fmt: skip

pytestmark = pytest.mark.slow  # each test steps a whole run


class Recording:
    """The run's inline executor, keeping every job it ran and the update each built (in run order)."""

    def __init__(self, inner: InlineExecutor) -> None:
        self.inner, self.jobs, self.updates = inner, [], []

    def run(self, jobs):
        updates = self.inner.run(jobs)
        self.jobs.extend(jobs)
        self.updates.extend(updates)
        return updates


def same(a, b) -> bool:
    """Equal bit for bit: tensors (dtype, shape, values), dicts, dataclasses, sequences, numbers (NaN == NaN)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    return a == b


@pytest.mark.parametrize("method", METHODS)
def test_a_job_run_by_another_copy_of_the_run_builds_the_same_update(method):
    sets = [f"method.name={method}", *SMALL, *([] if method == "fedasync" else BUDGETED)]  # async: no deadline
    sim = Simulation(load_scenario("quickstart", PAPER_QUICKSTART + sets))
    recording = Recording(sim.run.learner.executor)
    sim.run.learner.executor = recording
    for r in (1, 2, 3):
        sim.step(r)
    assert recording.jobs, f"{method}: no job ran in 3 rounds"
    # a worker's copy: its own data, its own method as built (no memory of the rounds played), the jobs pickled
    twin = Simulation(load_scenario("quickstart", PAPER_QUICKSTART + sets))
    for job, update in zip(recording.jobs, recording.updates):
        moved = pickle.loads(pickle.dumps(job))
        again = twin.method.client_update(moved, trainer=twin.workload)
        assert same(again, update), f"{method}: job of device {job.device} in round {job.round_index} differs"


def test_stc_jobs_carry_the_devices_residual_and_return_the_next():
    """Error feedback lives on the device: a job of a device that sent before carries its residual, and the
    update's memory is what the next job of that device carries (accumulated - sent, by the STC test above)."""
    sim = Simulation(load_scenario("quickstart", PAPER_QUICKSTART + ["method.name=stc", *SMALL, *BUDGETED]))
    recording = Recording(sim.run.learner.executor)
    sim.run.learner.executor = recording
    for r in (1, 2, 3):
        sim.step(r)
    last: dict[int, object] = {}
    carried = 0
    for job, update in zip(recording.jobs, recording.updates):
        if job.device in last:
            assert same(job.memory, last[job.device])
            carried += 1
        else:
            assert job.memory is None
        assert update.memory is not None
        last[job.device] = update.memory
    assert carried > 0  # some device trained twice in 3 rounds
