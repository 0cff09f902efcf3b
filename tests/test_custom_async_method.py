"""An asynchronous method defined outside edgefl, in one file (examples/custom_async_method.py), runs like a
shipped one: FedAsync with the exponential staleness rule s(tau) = exp(-decay tau).

Expected values by hand: its step weights; at ``decay = 0`` it is FedAsync with ``staleness = "constant"`` (the same
tables); and under surrogate learning each server update (one arrival, M = 1, full uncompressed update:
alpha = beta = 1) moves the optimality gap by the factor ``1 - (nu/lambda) alpha exp(-decay tau)`` with the
update's recorded staleness tau (the asynchronous surrogate step, :mod:`edgefl.methods.asynchronous`).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_async_method.py"
REL = 1e-9  # float rounding of a product of 30 factors
SMALL = ["fleet.n_devices=200", "method.clients_per_round=20", "rounds=30"]


def _example():
    """The example module, loaded once (it registers ``fedasync_exp``)."""
    name = "edgefl_example_custom_async_method"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _run(*sets: str):
    _example()
    return run_scenario(load_scenario("fedbuff_surrogate_10k", [*SMALL, *sets]))


def test_its_weights_are_alpha_times_exp_of_minus_decay_tau():
    ex = _example()
    from edgefl.methods import MethodSetup
    from edgefl.run.runner import build_run

    setup_from = build_run(load_scenario("fedbuff_surrogate_10k", SMALL))
    setup = MethodSetup(workload=setup_from.workload, costs=setup_from.costs, streams=setup_from.streams,
                        n_devices=200, clients_per_round=20, rounds=30)  # fmt: skip
    method = ex.FedAsyncExp(settings=ex.ExpStalenessSettings(alpha=0.5, decay=math.log(2.0)), setup=setup)
    assert method.weights(np.array([0, 1, 2, 3])) == pytest.approx([0.5, 0.25, 0.125, 0.0625], rel=1e-12)
    assert method.buffer_size == 1 and method.needs.asynchronous


@pytest.mark.slow
def test_at_zero_decay_it_is_fedasync_with_constant_staleness():
    mine = _run("method.name=fedasync_exp", "method.fedasync_exp.decay=0", "method.fedasync_exp.alpha=0.6")
    ref = _run("method.name=fedasync", "method.fedasync.staleness=constant", "method.fedasync.alpha=0.6")
    pd.testing.assert_frame_equal(mine.rounds.drop(columns="wall_time_s"), ref.rounds.drop(columns="wall_time_s"))
    pd.testing.assert_frame_equal(mine.device_rounds, ref.device_rounds)


@pytest.mark.slow
def test_each_surrogate_update_moves_the_gap_by_its_staleness_weight():
    sc = load_scenario("fedbuff_surrogate_10k", [*SMALL, "method.name=fedasync_exp"])
    res = _run("method.name=fedasync_exp", "method.fedasync_exp.decay=0.3", "method.fedasync_exp.alpha=0.8")
    cfg = sc.surrogate
    gap = np.concatenate([[cfg.initial_loss - cfg.loss_floor], res.rounds["train_loss"].to_numpy() - cfg.loss_floor])
    tau = res.rounds["staleness_mean"].to_numpy()
    assert (res.rounds["arrived"] == 1).all() and tau.max() > 0  # one arrival per update, some of them stale
    expected = 1.0 - cfg.nu_over_lambda * 0.8 * np.exp(-0.3 * tau)
    assert gap[1:] / gap[:-1] == pytest.approx(expected, rel=REL)
