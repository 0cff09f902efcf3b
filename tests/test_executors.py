"""The trainer's executors give the same tables as the inline one: a local process pool and a real local Ray cluster
(started here, bound to 127.0.0.1) run a round's jobs, synchronous and asynchronous, with the devices' memories
carried by the jobs. The reference is the run with the inline executor."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.errors import ScenarioError
from edgefl.training.executors import Held, chunks, dealt
from edgefl.run.runner import prepare, run_scenario
from edgefl.run.load import load_scenario

SMALL = ["model.hidden=[16]", "rounds=3", "checkpoint_every=0"]
STC = ["method.name=stc", "round.policy=deadline", "round.deadline_s=2.0"]  # error feedback: memory in the jobs


def tables(result):
    """The run's two tables without the host's wall time."""
    return result.rounds.drop(columns="wall_time_s"), result.device_rounds


def assert_same_run(sets, executor_sets):
    inline = run_scenario(load_scenario("quickstart", sets))
    other = run_scenario(load_scenario("quickstart", [*sets, *executor_sets]))
    (r0, d0), (r1, d1) = tables(inline), tables(other)
    assert len(r0) == len(r1) and r0.equals(r1)
    assert d0.equals(d1)
    assert inline.summary["training_jobs"] == {"executor": "inline", "workers": 1, "device": "cpu"}
    return other


@pytest.mark.parametrize(("n_jobs", "n_workers", "sizes"), [
    (10, 2, [5, 5]), (7, 3, [3, 2, 2]), (2, 4, [1, 1]), (1, 1, [1]), (0, 2, []),
])  # fmt: skip
def test_chunks_are_contiguous_near_equal_and_cover_every_job(n_jobs, n_workers, sizes):
    parts = chunks(n_jobs, n_workers)
    assert [len(c) for c in parts] == sizes
    assert [i for c in parts for i in c] == list(range(n_jobs))


@pytest.mark.parametrize(("groups", "n_parts", "expected"), [
    ([[0], [1], [2], [3], [4], [5], [6]], 3, [[0, 3, 6], [1, 4], [2, 5]]),
    ([[0, 1], [2], [3, 4, 5], [6]], 2, [[0, 1, 3, 4, 5], [2, 6]]),
    ([[0], [1]], 8, [[0], [1]]), ([[0]], 1, [[0]]), ([], 4, []),
])  # fmt: skip
def test_dealt_parts_take_every_kth_group_whole_and_cover_each_job_once(groups, n_parts, expected):
    assert dealt(groups, n_parts) == expected


@pytest.mark.slow
def test_two_processes_give_the_inline_tables_with_memory_carried_by_the_jobs():
    other = assert_same_run([*SMALL, *STC], ["train.executor=processes", "train.workers=2"])
    assert other.summary["training_jobs"] == {"executor": "processes", "workers": 2, "device": "cpu"}


def _same(a, b) -> bool:
    """Two memories (mappings of tensors, nested) equal bit for bit."""
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)


def _stepped(sets: list[str], rounds: int):
    """The run of ``sets`` inline and on 2 processes, ``rounds`` rounds each (rows compared as they come), open."""
    inline, pool = prepare(load_scenario("quickstart", sets)), prepare(load_scenario("quickstart", [
        *sets, "train.executor=processes", "train.workers=2"]))  # fmt: skip
    with inline.run.driver.playing(), pool.run.driver.playing():
        for r in range(1, rounds + 1):
            a, b = inline.step(r), pool.step(r)
            assert {k: v for k, v in a.items() if k != "wall_time_s"} == {
                k: v for k, v in b.items() if k != "wall_time_s"}, r
    return inline, pool


def _crowded(memories: dict) -> list[int]:
    """The devices whose memory the busier of the two workers holds (at least 2 of them)."""
    by = {w: sorted(d for d, m in memories.items() if m.worker == w) for w in (0, 1)}
    most = max(by.values(), key=len)
    assert len(most) >= 2
    return most


def _both(inline, pool, table, r: int):
    """``table``'s jobs in round ``r`` on the inline run's method one by one, and on the pool's executor."""
    mine = [inline.method.client_update(inline.method.train_job(table[i], state=inline.state.model, round_index=r),
                                        trainer=inline.workload) for i in range(len(table))]  # fmt: skip
    theirs = pool.run.learner.executor.run(
        [pool.method.train_job(table[i], state=pool.state.model, round_index=r) for i in range(len(table))])
    return mine, theirs


@pytest.mark.slow
def test_a_devices_memory_stays_in_its_worker_and_moves_with_a_job_sent_elsewhere():
    """STC's residuals stay in the pool workers that made them (the run holds handles). A round whose jobs are all
    held by one worker sends all but its even share to the other, with their residuals. Every update and residual
    equals the inline run's, bit for bit, while the workers run and after they stop (when the residuals come back
    into their handles)."""
    from edgefl.methods.base import JobTable

    sets = [*STC, "model.hidden=[16]", "rounds=5", "checkpoint_every=0", "fleet.n_devices=12",
            "method.clients_per_round=6"]  # fmt: skip
    inline, pool = _stepped(sets, 5)
    executor = pool.run.learner.executor
    try:
        held = pool.method.residual
        assert sorted(held) == sorted(inline.method.residual) and len(held) >= 8
        assert all(isinstance(m, Held) for m in held.values())  # nothing but handles came back
        devices = _crowded(held)
        before = executor.moved
        table = JobTable.build(np.array(devices), cpu_hz=1e9, bits_planned=20_000.0)
        mine, theirs = _both(inline, pool, table, 6)
        assert executor.moved - before == len(devices) - math.ceil(len(devices) / 2)  # beyond the even share
        assert [u.bits for u in mine] == [u.bits for u in theirs]
        inline.method.remember(mine)
        pool.method.remember(theirs)
        for d, m in inline.method.residual.items():
            assert m == pool.method.residual[d], d  # read through the handle: fetched from the worker
    finally:
        inline.run.learner.close()
        pool.run.learner.close()
    assert all(m == pool.method.residual[d] for d, m in inline.method.residual.items())  # values stay after close


@pytest.mark.slow
def test_a_moved_job_that_keeps_no_new_memory_leaves_its_memory_with_the_run():
    """A CC-FedAvg device that estimates makes no new history: when its job is sent away from the worker holding
    its history, the history comes back to the run for good, and the device's next job carries it itself. Its
    updates equal the inline run's, as do the rounds' rows before."""
    from edgefl.methods.base import JobTable

    sets = ["method.name=ccfedavg", "model.hidden=[16]", "rounds=6", "checkpoint_every=0", "fleet.n_devices=12",
            "method.clients_per_round=6"]  # fmt: skip
    inline, pool = _stepped(sets, 6)
    executor = pool.run.learner.executor
    try:
        store = pool.method.client_store
        assert len(store) >= 6 and all(isinstance(m, Held) for m in store.values())
        devices = _crowded(store)
        before = executor.moved
        for r, steps in ((7, 0), (8, 16)):  # estimate (away from the history's worker for some), then train
            table = JobTable.build(np.array(devices), cpu_hz=1e9, local_steps=steps)
            mine, theirs = _both(inline, pool, table, r)
            for u, v in zip(mine, theirs):
                assert _same(u.payload.update, v.payload.update) and u.bits == v.bits
            inline.method.remember(mine)
            pool.method.remember(theirs)
        assert executor.moved - before >= len(devices) - math.ceil(len(devices) / 2)
        for d, m in inline.method.client_store.items():
            assert _same(m, pool.method.client_store[d]), d
    finally:
        inline.run.learner.close()
        pool.run.learner.close()


@pytest.mark.slow
def test_the_asynchronous_driver_uses_the_same_executors():
    sets = [*SMALL, "method.name=fedasync", "method.clients_per_round=4"]
    assert_same_run(sets, ["train.executor=processes", "train.workers=2"])


@pytest.mark.slow
def test_a_local_ray_cluster_runs_a_rounds_jobs_with_the_same_tables():
    ray = pytest.importorskip("ray")
    from edgefl.training.ray_cluster import start_local_cluster

    start_local_cluster(2)  # the executor joins the cluster this process is connected to
    try:
        other = assert_same_run([*SMALL, *STC], ["train.executor=ray", "train.workers=2"])
    finally:
        ray.shutdown()
    assert other.summary["training_jobs"] == {"executor": "ray", "workers": 2, "device": "cpu"}


@pytest.mark.parametrize(("sets", "message"), [
    (["train.workers=2"], r"train\.workers=2: only used by executor='processes' or 'ray', not 'inline'"),
    (["train.executor=processes", "train.address=127.0.0.1:6379"],
     r"train\.address='127\.0\.0\.1:6379': only used by executor='ray', not 'processes'"),
    (["train.executor=threads"], r"train\.executor"),
    (["train.executor=processes", "train.workers=0"], r"train\.workers"),
])  # fmt: skip
def test_executor_settings_fail_in_one_line_naming_the_key(sets, message):
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario("quickstart", sets)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_the_device_auto_runs_where_torch_sees_a_gpu_else_on_the_cpu_with_the_cpu_tables():
    """``train.device = "auto"`` takes the GPU path's code (data and models moved to the device, updates back to
    the CPU) on whatever device torch has; on a CPU-only machine its tables are the CPU run's."""
    import torch

    sets = [*SMALL, *STC]
    cpu = run_scenario(load_scenario("quickstart", sets))
    auto = run_scenario(load_scenario("quickstart", [*sets, "train.device=auto"]))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert auto.summary["training_jobs"]["device"] == expected
    if expected == "cpu":
        (r0, d0), (r1, d1) = tables(cpu), tables(auto)
        assert r0.equals(r1) and d0.equals(d1)


def test_cuda_without_a_gpu_fails_in_one_line_before_the_run():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here")
    with pytest.raises(ScenarioError, match=r"train\.device='cuda': torch sees no CUDA GPU here") as info:
        run_scenario(load_scenario("quickstart", [*SMALL, "train.device=cuda"]))
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_a_run_on_the_gpu_gives_the_same_tables_twice():
    """Deterministic algorithms on the GPU: the same scenario twice, the same tables (needs a CUDA GPU)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the GPU path is exercised on the CPU by the device=auto test")
    sets = [*SMALL, *STC, "train.device=cuda"]
    (r0, d0), (r1, d1) = (tables(run_scenario(load_scenario("quickstart", sets))) for _ in range(2))
    assert r0.equals(r1) and d0.equals(d1)


@pytest.mark.slow
@pytest.mark.parametrize("vectorise", ["off", "on"])
def test_two_processes_on_the_gpu_give_the_inline_tables(vectorise):
    """``processes`` with ``cuda``: each spawned worker opens its own CUDA context on the same GPU and runs its
    jobs there with deterministic algorithms, so the tables equal the inline run's bit for bit, with and without
    vectorised groups (needs a CUDA GPU)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    sets = [*SMALL, *STC, "train.device=cuda", f"train.vectorise={vectorise}", "method.clients_per_round=6"]
    inline = run_scenario(load_scenario("quickstart", sets))
    pool = run_scenario(load_scenario("quickstart", [*sets, "train.executor=processes", "train.workers=2"]))
    (r0, d0), (r1, d1) = tables(inline), tables(pool)
    assert r0.equals(r1) and d0.equals(d1)
    assert pool.summary["training_jobs"] == {"executor": "processes", "workers": 2, "device": "cuda"}


@pytest.mark.slow
def test_vectorised_groups_give_the_same_tables_on_every_executor():
    """``train.vectorise = "on"``: the groups are cut from the jobs before they reach the workers and never split,
    so 2 processes give the inline tables bit for bit (a group's padding depends only on its jobs)."""
    sets = [*SMALL, "train.vectorise=on", "method.clients_per_round=6"]
    assert_same_run(sets, ["train.executor=processes", "train.workers=2"])


def test_a_warmed_up_trainer_trains_as_a_fresh_one_and_leaves_torchs_generator_alone():
    """A worker's warm-up (one thrown-away SGD step) restores torch's global generator, and the next training gives
    the same update, bit for bit, as on a trainer that never warmed up."""
    import torch

    from edgefl.run.runner import device_side

    sc = load_scenario("quickstart", SMALL)
    (_, fresh), (_, warmed) = device_side(sc), device_side(sc)
    state = fresh.initial_state()
    before = torch.random.get_rng_state()
    warmed.warm_up()
    assert torch.equal(torch.random.get_rng_state(), before)
    a, b = fresh.train(0, state, round_index=2), warmed.train(0, state, round_index=2)
    for name in a.update:
        assert torch.equal(a.update[name].view(torch.int32), b.update[name].view(torch.int32)), name
