"""Asynchronous FL on the run's clock (FedAsync, FedBuff): exact timelines and staleness by hand.

Hand set-up: Luo-style per-step costs with no spread (every device: 5 SGD steps of 0.1 s and 1 mJ, one upload of
2 s and 20 mJ), so every job takes T = 5 x 0.1 + 2 = 2.5 s and 25 mJ; 6 devices, concurrency C = 3, always
online, no downlink. The server refills a free slot right after each arrival, unless that arrival completes a
server update (then it refills at the start of the next one); jobs that end at one instant end in dispatch
order.

FedBuff, M = 2: jobs a, b, c start at 0 (version 0).
    2.5: a arrives (buffer a) -> d starts (v0); b arrives -> update 1 (a, b: staleness 0, 0)
    update 2: e starts at 2.5 (v1); c arrives (buffer c) -> f starts (v1); 5.0: d arrives -> update 2
              (c, d: staleness 1 - 0 = 1, 1)
    update 3: g starts at 5.0 (v2); e arrives -> h starts (v2); f arrives -> update 3 (e, f: 2 - 1 = 1, 1)
    update 4: i starts at 5.0 (v3); 7.5: g arrives -> j starts; h arrives -> update 4 (g, h: 3 - 2 = 1, 1)
  update times 2.5, 5, 5, 7.5, 10, 10, ... ; staleness 1 from update 2 on.
FedAsync: every arrival is an update.
    2.5: a -> update 1 (staleness 0); d starts (v1); b -> update 2 (1 - 0 = 1); e starts (v2);
         c -> update 3 (2 - 0 = 2); f starts (v3); 5.0: d -> update 4 (3 - 1 = 2); e -> update 5 (4 - 2 = 2), ...
  surrogate gap: gap_u = gap_{u-1} (1 - (nu/lambda) alpha (tau_u + 1)^(-1/2)), full updates (alpha_i = beta_i = 1).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from edgefl.methods.asynchronous import staleness_weight
from edgefl.errors import ScenarioError
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART

T_JOB = 2.5  # [s]
E_JOB = 0.025  # [J]
BASE = [
    "learning=surrogate", "checkpoint_every=0", "fleet.n_devices=6", "method.clients_per_round=3",
    "fleet.step_costs.kind=normal", "fleet.step_costs.std_ratio=0", "fleet.step_costs.step_time_s=0.1",
    "fleet.step_costs.comm_time_s=2.0", "fleet.step_costs.step_energy_j=1e-3", "fleet.step_costs.comm_energy_j=2e-2",
    "train.local_steps=5",
]  # fmt: skip


def _max_concurrent(dr) -> int:
    events = sorted([(t, 1) for t in dr["t_down_s"]] + [(t, -1) for t in dr["t_end_s"]], key=lambda e: (e[0], e[1]))
    busy = peak = 0
    for _, step in events:
        busy += step
        peak = max(peak, busy)
    return peak


@pytest.mark.slow
def test_fedbuff_m2_c3_timeline_and_staleness():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*BASE, "rounds=8", "method.name=fedbuff", "method.fedbuff.buffer_size=2"])
    res = run_scenario(sc)
    rounds, dr = res.rounds, res.device_rounds
    assert rounds["sim_time_s"].tolist() == [2.5, 5.0, 5.0, 7.5, 10.0, 10.0, 12.5, 15.0]
    assert rounds["arrived"].tolist() == [2] * 8 and (rounds["dropped"] == 0).all()
    assert rounds["selected"].tolist() == [4, 2, 2, 2, 2, 2, 2, 2]  # a, b, c, d; then two starts per update
    np.testing.assert_allclose(rounds["energy_j"], 2 * E_JOB, rtol=1e-12)  # charged as jobs end
    assert rounds["staleness_mean"].tolist() == [0.0] + [1.0] * 7
    stale = dr.groupby("round")["staleness"].apply(list)
    assert stale[1] == [0.0, 0.0] and all(v == [1.0, 1.0] for v in stale[2:])
    np.testing.assert_allclose(dr["t_end_s"] - dr["t_down_s"], T_JOB, rtol=1e-12)
    assert dr["arrived"].all() and len(dr) == 16
    assert _max_concurrent(dr) <= 3
    for _, g in dr.sort_values(["device", "t_down_s"]).groupby("device"):  # a device runs one job at a time
        assert (g["t_down_s"].to_numpy()[1:] >= g["t_end_s"].to_numpy()[:-1]).all()


@pytest.mark.slow
def test_fedasync_staleness_and_surrogate_gap_by_hand():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*BASE, "rounds=7", "method.name=fedasync", "method.fedasync.alpha=0.6"])
    res = run_scenario(sc)
    rounds = res.rounds
    assert rounds["sim_time_s"].tolist() == [2.5, 2.5, 2.5, 5.0, 5.0, 5.0, 7.5]
    tau = [0, 1, 2, 2, 2, 2, 2]
    assert rounds["staleness_mean"].tolist() == tau
    assert res.device_rounds.sort_values("t_end_s", kind="stable")["staleness"].tolist() == tau
    gap, expected = 2.302585, []  # surrogate.initial_loss, loss_floor 0, nu/lambda = 0.05
    for t in tau:
        gap *= 1 - 0.05 * 0.6 * (t + 1) ** -0.5
        expected.append(gap)
    np.testing.assert_allclose(rounds["train_loss"], expected, rtol=1e-12)


def test_staleness_functions():
    tau = np.array([0, 1, 3, 4, 6])
    np.testing.assert_allclose(staleness_weight(tau, "polynomial", 0.5, 4), [1, 2**-0.5, 0.5, 5**-0.5, 7**-0.5])
    np.testing.assert_allclose(staleness_weight(tau, "hinge", 10, 4), [1, 1, 1, 1, 1 / 21])
    assert staleness_weight(tau, "constant", 0.5, 4).tolist() == [1.0] * 5


def test_server_steps_on_tensors():
    from edgefl.methods import METHODS, MethodSetup
    from edgefl.methods.base import ClientUpdate, DenseUpdate

    setup = MethodSetup(workload=None, costs=None, streams=None, n_devices=4, clients_per_round=2, rounds=1)
    w = {"x": torch.tensor([1.0, 2.0])}
    base = {"x": torch.tensor([0.0, 0.0])}
    up = lambda d: ClientUpdate(device=0, payload=DenseUpdate({"x": torch.tensor(d)}), weight=1.0, bits=64.0,  # noqa: E731
                                flops=0.0, steps=1, train_loss=math.nan)  # fmt: skip
    fa = METHODS["fedasync"](settings=METHODS["fedasync"].Settings(alpha=0.5, staleness="polynomial", a=1.0), setup=setup)
    # tau = 1: alpha_t = 0.5 / 2 = 0.25; w_i = base + delta = [4, 8]; w <- 0.75 [1, 2] + 0.25 [4, 8] = [1.75, 3.5]
    out = fa.server_step(w, updates=[up([4.0, 8.0])], bases=[base], tau=np.array([1.0]))
    assert out["x"].tolist() == [1.75, 3.5]
    fb = METHODS["fedbuff"](settings=METHODS["fedbuff"].Settings(buffer_size=2, server_lr=2.0, staleness="constant"), setup=setup)
    # w <- w + 2 (1/2) (d1 + d2) = [1, 2] + [1, -1] + [0.5, 0.5]
    out = fb.server_step(
        w, updates=[up([1.0, -1.0]), up([0.5, 0.5])], bases=[base, base], tau=np.array([0.0, 3.0])
    )
    assert out["x"].tolist() == [2.5, 1.5]


@pytest.mark.slow
def test_fedbuff_trains_a_real_model():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["rounds=4", "checkpoint_every=0", "method.name=fedbuff",
                                      "method.fedbuff.buffer_size=2", "method.clients_per_round=3"])  # fmt: skip
    res = run_scenario(sc)
    assert (res.rounds["arrived"] == 2).all() and not math.isnan(res.rounds["test_accuracy"].iloc[-1])
    assert res.rounds["sim_time_s"].is_monotonic_increasing


@pytest.mark.parametrize(
    "sets, match",
    [(["round.policy=deadline", "round.deadline_s=1.0"], "asynchronous method has no rounds"),
     (["learning=surrogate", "surrogate.bound=luo"], "surrogate.bound = 'anycostfl'"),
     (["method.fedbuff.buffer_size=0"], r"method.fedbuff.buffer_size=0: Input should be greater than or equal to 1")],
)  # fmt: skip
def test_async_config_errors(sets, match):
    with pytest.raises(ScenarioError, match=match):
        load_scenario("quickstart", PAPER_QUICKSTART + ["method.name=fedbuff", "checkpoint_every=0", *sets])


FLEET_PLAN_SETS = [
    "fleet.n_devices=300", "method.clients_per_round=30", "method.fedbuff.buffer_size=5", "rounds=40",
    "fleet.availability.kind=markov", "fleet.availability.online_mean_s=[20.0, 80.0]",
    "fleet.availability.offline_mean_s=[5.0, 40.0]", "fleet.budget.kind=fixed", "fleet.budget.value_j=6.0",
]  # fmt: skip


@pytest.mark.slow
def test_one_fleet_plan_per_update_equals_planning_each_dispatch(monkeypatch):
    """Invariant: the fleet plan a server update makes once (FedAvg's plan, surrogate work, fixed sub-bands, a
    fixed budget that some devices cannot meet) gives the tables that planning each dispatch alone gives."""
    from edgefl.engine import async_driver as asynchronous

    sc = load_scenario("fedbuff_surrogate_10k", FLEET_PLAN_SETS)
    plans = []
    made = asynchronous._fleet_plan

    def counted(*args):
        plan = made(*args)
        plans.append(plan)
        return plan

    monkeypatch.setattr(asynchronous, "_fleet_plan", counted)
    fast = run_scenario(sc)
    assert plans and all(p is not None for p in plans)  # the fleet plan served every dispatch
    assert fast.rounds["skipped"].sum() > 0 and fast.rounds["dropped"].sum() > 0  # sat out and lost offline
    monkeypatch.setattr(asynchronous, "_plans_per_update", lambda run: False)
    slow = run_scenario(sc)
    for a, b in ((fast.rounds, slow.rounds), (fast.device_rounds, slow.device_rounds)):
        pd.testing.assert_frame_equal(a.drop(columns="wall_time_s", errors="ignore"),
                                      b.drop(columns="wall_time_s", errors="ignore"), check_exact=True)  # fmt: skip


def test_lazy_stream_draws_what_the_stream_draws():
    from edgefl.seeding import Streams

    streams = Streams(7)
    lazy = streams.lazy_numpy("method", 3, 4)
    assert lazy.uniform(size=5).tolist() == streams.numpy("method", 3, 4).uniform(size=5).tolist()


def _clock_with(n: int, offline: list[int], busy: list[int]):
    """A real clock of ``n`` devices with ``offline`` devices offline and ``busy`` ones on a long job."""
    from edgefl.engine.clock import Clock

    clock = Clock(n)
    clock.online[offline] = False
    if busy:
        m = len(busy)
        clock.dispatch(np.array(busy), down_s=np.zeros(m), t_cmp_s=np.full(m, 1e6), t_com_s=np.zeros(m),
                       on_end=lambda j, lost: None)  # fmt: skip
    return clock


@pytest.mark.parametrize("n, offline, busy", [(20, [0, 1, 2, 3, 4], [5, 6, 7]), (10_000, list(range(3, 10_000)), [])],
                         ids=["rejection", "few-left"])  # fmt: skip
def test_async_selection_is_uniform_among_online_idle_devices(n, offline, busy):
    """The server's draw (:class:`edgefl.engine.async_driver._Selection`) picks only online, idle devices, each as
    often as the others: chi-square of 24,000 single draws against equal counts, below its 99.9% quantile.
    With 12 of 20 devices available the draws are kept by rejection; with 3 of 10,000 the 64-rejection
    fallback draws among the 3."""
    from scipy.stats import chi2

    from edgefl.engine.async_driver import _Selection

    clock = _clock_with(n, offline, busy)
    ok = np.flatnonzero(clock.available())
    sel = _Selection(np.random.default_rng(5), n)
    draws = np.concatenate([sel.draw(1, clock) for _ in range(24_000)])
    assert np.isin(draws, ok).all()
    counts = np.bincount(draws, minlength=n)[ok]
    expected = draws.size / ok.size
    assert ((counts - expected) ** 2 / expected).sum() < chi2.ppf(0.999, ok.size - 1)


def test_async_selection_draws_distinct_devices_and_no_more_than_are_free():
    from edgefl.engine.async_driver import _Selection

    clock = _clock_with(20, [0, 1, 2, 3, 4], [5, 6, 7])
    ok = np.flatnonzero(clock.available())  # 12 devices
    sel = _Selection(np.random.default_rng(1), 20)
    for k in (1, 5, 12):
        got = sel.draw(k, clock)
        assert got.size == k and np.unique(got).size == k and np.isin(got, ok).all() and (np.diff(got) > 0).all()
    assert sel.draw(30, clock).tolist() == ok.tolist()  # asked for more than are free: every free device
    clock.online[:] = False
    assert sel.draw(3, clock).size == 0


@pytest.mark.slow
def test_async_run_whose_jobs_are_always_lost_offline_stops_with_an_error():
    """Jobs of 2.5 s on devices online 1 ms at a time: every job is lost, and the run stops after
    max(1000, 20 C) = 1000 losses in a row instead of dispatching forever."""
    from edgefl.errors import SimulationError

    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*BASE, "method.name=fedbuff", "method.fedbuff.buffer_size=2",
                                      "fleet.availability.kind=markov", "fleet.availability.online_mean_s=0.001",
                                      "fleet.availability.offline_mean_s=0.001"])  # fmt: skip
    with pytest.raises(SimulationError, match=r"the last 1000 jobs were all lost to devices going offline"):
        run_scenario(sc)


@pytest.mark.slow
def test_an_async_run_restores_the_garbage_collectors_thresholds():
    """run_scenario plays an asynchronous run with rarer young-generation passes (edgefl.engine.async_driver
    .fewer_collections) and gives the caller's thresholds back, also when the run fails."""
    import gc

    from edgefl.engine.async_driver import _GC_YOUNG
    from edgefl.errors import SimulationError

    saved = gc.get_threshold()
    seen = []
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*BASE, "method.name=fedbuff", "method.fedbuff.buffer_size=2", "rounds=3"])
    try:
        gc.set_threshold(700, 10, 10)
        run_scenario(sc, progress=lambda row: seen.append(gc.get_threshold()))
        assert seen == [(_GC_YOUNG, 10, 10)] * 3 and gc.get_threshold() == (700, 10, 10)
        lost = load_scenario("quickstart", PAPER_QUICKSTART + [*BASE, "method.name=fedbuff", "fleet.availability.kind=markov",
                                            "fleet.availability.online_mean_s=0.001",
                                            "fleet.availability.offline_mean_s=0.001"])  # fmt: skip
        with pytest.raises(SimulationError):
            run_scenario(lost)
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*saved)
