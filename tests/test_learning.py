"""Learning workload pieces: datasets, partitions, models, FLOP measurement, the shared trainer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.learning.datasets import load_digits, make_synthetic
from edgefl.learning.flops import measure_train_flops_per_sample
from edgefl.learning.models import build_model, init_parameters
from edgefl.learning.partition import partition_by_owner, partition_iid, partition_shards
from edgefl.learning.train import LocalTrainConfig, local_train


def test_digits_split_is_stratified_and_disjoint():
    d = load_digits(test_fraction=0.2, rng=np.random.default_rng(0))
    assert d.x_train.shape[1:] == (1, 8, 8) and d.n_classes == 10
    assert d.x_train.shape[0] + d.x_test.shape[0] == 1797  # sklearn's digits
    assert 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0
    # each class contributes round(0.2 * count) test samples
    counts = np.bincount(np.concatenate([d.y_train, d.y_test]), minlength=10)
    assert np.array_equal(np.bincount(d.y_test, minlength=10), np.round(0.2 * counts).astype(int))


def test_iid_partition_uses_every_sample_once_with_balanced_sizes():
    parts = partition_iid(103, 10, np.random.default_rng(1))
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(103))
    assert {p.size for p in parts} == {10, 11}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_shards_give_exactly_k_classes_and_use_every_sample_once(k):
    y = np.repeat(np.arange(10), 60)  # 600 samples, 60 per class
    parts = partition_shards(y, 20, k, np.random.default_rng(2))
    allidx = np.concatenate(parts)
    assert allidx.size == np.unique(allidx).size == 600
    assert all(np.unique(y[p]).size == k for p in parts)
    # 20*k slots over 10 classes: each class is split over 2k devices, 60/(2k) samples per slot
    per_class = [np.unique([i for i, p in enumerate(parts) if c in y[p]]).size for c in range(10)]
    assert per_class == [2 * k] * 10
    assert {p.size for p in parts} == {k * 60 // (2 * k)}


def test_partition_errors_name_the_limit():
    with pytest.raises(ValueError, match="n_devices=11"):
        partition_iid(10, 11, np.random.default_rng(0))
    with pytest.raises(ValueError, match="classes_per_device=2"):
        partition_shards(np.zeros(5, dtype=int), 3, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="class 1 has 2 samples"):
        partition_shards(np.array([0, 0, 0, 0, 1, 1]), 6, 1, np.random.default_rng(0))


def test_synthetic_matches_the_papers_shapes_and_labels():
    d = make_synthetic(n_devices=5, alpha=1.0, beta=1.0, samples_mean=100, test_fraction=0.2,
                       rng=np.random.default_rng(3))  # fmt: skip
    assert d.x_train.shape[1] == 60 and d.n_classes == 10
    parts = partition_by_owner(d.owner_train, 5)
    assert sum(p.size for p in parts) == d.x_train.shape[0] and all(p.size > 0 for p in parts)
    # Synthetic(0, 0) makes every device share one input law: heterogeneity grows with alpha, beta
    d0 = make_synthetic(n_devices=5, alpha=0.0, beta=0.0, samples_mean=400, test_fraction=0.2,
                        rng=np.random.default_rng(3))  # fmt: skip
    assert np.abs(d0.x_train.mean(0)).max() < np.abs(d.x_train.mean(0)).max() + 5.0


def test_width_shrinks_hidden_layers_only():
    full = build_model("mlp", in_features=64, n_classes=10, hidden=(64, 32))
    half = build_model("mlp", in_features=64, n_classes=10, hidden=(64, 32), width=0.3)
    shapes = [p.shape for p in half.parameters()]
    assert shapes[0] == (math.ceil(0.3 * 64), 64) and shapes[-1] == (10,) and shapes[-2] == (10, math.ceil(0.3 * 32))
    assert sum(p.numel() for p in full.parameters()) == 64 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10


def test_flops_by_hand():
    # MLP 64-h-10: layer 1 forward 2*64*h + weight grad 2*64*h (input needs no grad);
    # layer 2 forward 2*h*10 + weight grad 2*h*10 + input grad 2*h*10.
    for h in (16, 64):
        f = measure_train_flops_per_sample(lambda: build_model("mlp", in_features=64, n_classes=10, hidden=(h,)), (64,), 10)
        assert f == 4 * 64 * h + 6 * h * 10


def test_seeded_init_and_training_are_reproducible():
    def once():
        m = init_parameters(build_model("mlp", in_features=64, n_classes=10), torch.Generator().manual_seed(5))
        x = torch.linspace(0, 1, 40 * 64).reshape(40, 64)
        y = torch.arange(40) % 10
        stats = local_train(m, x, y, LocalTrainConfig(epochs=2, batch_size=16, lr=0.1), torch.Generator().manual_seed(9))
        return stats, torch.cat([p.flatten() for p in m.parameters()])

    (s1, w1), (_, w2) = once(), once()
    assert torch.equal(w1, w2)
    assert (s1.steps, s1.samples) == (2 * 3, 2 * 40)  # 3 batches per epoch (16, 16, 8), 2 epochs
    s3 = local_train(build_model("logreg", in_features=64, n_classes=10), torch.zeros(40, 64), torch.zeros(40, dtype=torch.long),
                     LocalTrainConfig(steps=7, batch_size=16), torch.Generator().manual_seed(0))  # fmt: skip
    assert (s3.steps, s3.samples) == (7, 7 * 16)


def test_training_lowers_loss():
    d = load_digits(test_fraction=0.2, rng=np.random.default_rng(0))
    x, y = torch.from_numpy(d.x_train), torch.from_numpy(d.y_train)
    m = init_parameters(build_model("logreg", in_features=64, n_classes=10), torch.Generator().manual_seed(0))
    first = local_train(m, x, y, LocalTrainConfig(epochs=1, batch_size=32, lr=0.1), torch.Generator().manual_seed(1))
    later = local_train(m, x, y, LocalTrainConfig(epochs=3, batch_size=32, lr=0.1), torch.Generator().manual_seed(2))
    assert later.mean_loss < 0.6 * first.mean_loss


def test_max_samples_takes_a_seeded_subset():
    from edgefl.run.runner import make_workload
    from edgefl.run.load import load_scenario
    from edgefl.seeding import Streams

    sc = load_scenario("quickstart", ["data.max_train_samples=500", "data.max_test_samples=100"])
    a, b = make_workload(sc, Streams(sc.seed)), make_workload(sc, Streams(sc.seed))
    full = make_workload(load_scenario("quickstart"), Streams(sc.seed)).dataset
    assert a.dataset.x_train.shape[0] == 500 and a.dataset.x_test.shape[0] == 100
    assert int(a.n_samples.sum()) == 500  # the partition splits the subset, nothing else
    assert np.array_equal(a.dataset.x_train, b.dataset.x_train)  # same seed, same subset
    # every kept row is a row of the full set (a subset, not a resample)
    rows = {r.tobytes() for r in full.x_train}
    assert all(r.tobytes() in rows for r in a.dataset.x_train)


def test_workloads_have_the_protocols_members():
    """The torch workload has every member of :class:`Training` (so of :class:`Learning`) with the protocol's
    parameters, and the surrogate workload every member of :class:`Learning`: a renamed argument fails here."""
    import inspect

    from edgefl.learning.protocol import Learning, Training
    from edgefl.learning.surrogate import SurrogateWorkload
    from edgefl.learning.workload import Workload

    def members(proto):
        own = {n for n, v in vars(proto).items() if callable(v) and not n.startswith("_")}
        return own | {n for base in proto.__mro__[1:] if base is Learning for n in members(base)}

    for impl, proto in ((Workload, Training), (SurrogateWorkload, Learning)):
        for name in sorted(members(proto)):
            want = list(inspect.signature(getattr(proto, name)).parameters)
            assert list(inspect.signature(getattr(impl, name)).parameters) == want, (impl.__name__, name)
    assert {"train", "evaluate", "saved_state", "update_bits_at"} <= members(Training)
