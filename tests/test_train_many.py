"""Vectorised local training (``local_train_many`` / ``Workload.train_many``) against the one-device trainer it
replaces: the same batches and SGD rule must end at the same parameters, device by device, up to float
rounding. The reference is :func:`edgefl.learning.train.local_train` run once per device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgefl.learning.config import LocalTrainConfig
from edgefl.learning.models import build_model
from edgefl.learning.train import trains_together
from edgefl.run.runner import Simulation, make_workload
from edgefl.run.load import load_scenario
from edgefl.seeding import Streams

RTOL, ATOL = 1e-5, 1e-6  # float32 sums in another order; a wrong batch or SGD rule moves updates by >> 1e-3

LUO = ["fleet.n_devices=12", "method.clients_per_round=5", "train.local_steps=7", "rounds=3"]


def _compare(sc, devices, round_index):
    wl = make_workload(sc, Streams(sc.seed))
    state = wl.initial_state()
    state = {k: v + 0.05 * torch.randn(v.shape, generator=torch.Generator().manual_seed(1)) for k, v in state.items()}
    together = wl.train_many(np.asarray(devices), state, round_index=round_index)
    assert together is not None
    for d, res in zip(devices, together):
        one = wl.train(int(d), state, round_index=round_index)
        assert (res.steps, res.samples_processed, res.n_samples) == (one.steps, one.samples_processed, one.n_samples)
        assert res.flops == pytest.approx(one.flops, rel=1e-12)
        assert res.train_loss == pytest.approx(one.train_loss, rel=RTOL)
        for k in one.update:
            torch.testing.assert_close(res.update[k], one.update[k], rtol=RTOL, atol=ATOL)
    return wl


def test_logreg_on_unbalanced_synthetic_matches_one_by_one_including_small_devices():
    sc = load_scenario("luo_setup3", LUO)
    wl = make_workload(sc, Streams(sc.seed))
    small = [d for d in range(12) if wl.n_samples[d] < sc.train.batch_size]
    large = [d for d in range(12) if wl.n_samples[d] >= sc.train.batch_size]
    assert small and large  # padding of smaller batches is exercised
    _compare(sc, small[:2] + large[:3], round_index=3)  # inverse_round: eta_0 / 3


def test_mlp_with_momentum_and_weight_decay_matches_one_by_one():
    sc = load_scenario(
        "quickstart",
        ["fleet.n_devices=8", "model.name=mlp", "train.local_steps=5", "train.batch_size=16", "train.momentum=0.9",
         "train.weight_decay=0.01", "train.lr=0.1"],
    )  # fmt: skip
    _compare(sc, [0, 3, 5, 6], round_index=2)


def test_settings_that_cannot_be_vectorised_train_one_by_one():
    logreg = build_model("logreg", input_shape=(60,), n_classes=10, hidden=None, width=1.0)
    assert trains_together(logreg, LocalTrainConfig(steps=3))
    assert trains_together(logreg, LocalTrainConfig(epochs=1))  # a step count per device: masked steps
    assert not trains_together(logreg, LocalTrainConfig(steps=3, grad_clip=1.0))  # a norm per device
    bn = build_model("heterofl_conv", input_shape=(1, 28, 28), n_classes=10, hidden=None, width=1.0)
    assert not trains_together(bn, LocalTrainConfig(steps=3))  # batch-norm buffers
    sc = load_scenario("quickstart", ["fleet.n_devices=6", "train.local_epochs=1", "train.local_steps=0"])
    wl = make_workload(sc, Streams(sc.seed))
    assert not wl.vectorises(auto=True)  # epochs: vectorised only under train.vectorise = "on"
    assert wl.train_many(np.array([0]), wl.initial_state(), round_index=1) is None  # one device: alone


@pytest.mark.slow
def test_a_fedavg_run_is_the_same_vectorised_or_one_by_one():
    sc = load_scenario("luo_setup3", LUO)
    fast = Simulation(sc)
    slow = Simulation(sc)
    slow.method.client_updates = lambda jobs, *, trainer: None  # force the per-device path of the simulator
    for r in range(1, 4):
        a, b = fast.step(r), slow.step(r)
        assert a["global_train_loss"] == pytest.approx(b["global_train_loss"], rel=1e-5)
        assert a["sim_time_s"] == b["sim_time_s"] and a["energy_cum_j"] == b["energy_cum_j"]
    for k, v in fast.state.model.items():
        torch.testing.assert_close(v, slow.state.model[k], rtol=RTOL, atol=ATOL)
