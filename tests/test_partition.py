"""Partitions of a training set over devices: Dirichlet(alpha), CC-FedAvg's gamma mix, power-law sizes.

Invariants for every partition: one sorted index array per device, every sample used at most once, the same seed
gives the same split; plus each scheme's own class-count and size properties.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgefl.learning.partition import (
    LUO_SETUP3_MEAN_SIZE,
    LUO_SETUP3_STD_SIZE,
    partition_dirichlet,
    partition_gamma_mix,
    partition_power_law,
    power_law_sizes,
)
from strategies import log_uniform

BALANCED = np.repeat(np.arange(10), 100)  # 10 classes x 100 samples, sorted by label


def assert_disjoint(parts: list[np.ndarray], n_samples: int, *, all_used: bool = True) -> None:
    """Sorted int arrays, in range, no sample twice (and every sample once when ``all_used``)."""
    flat = np.concatenate(parts)
    assert all(np.issubdtype(p.dtype, np.integer) and np.all(np.diff(p) > 0) for p in parts)
    assert flat.size == np.unique(flat).size
    assert flat.size == 0 or (flat.min() >= 0 and flat.max() < n_samples)
    if all_used:
        assert flat.size == n_samples


def class_counts(labels: np.ndarray, parts: list[np.ndarray], n_classes: int = 10) -> np.ndarray:
    """Shape (n_devices, n_classes)."""
    return np.array([np.bincount(labels[p], minlength=n_classes) for p in parts])


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------- Dirichlet
labels_strategy = st.lists(st.integers(0, 9), min_size=20, max_size=400).map(np.array)


@settings(max_examples=60, deadline=None)
@given(y=labels_strategy, n_devices=st.integers(1, 8), alpha=log_uniform(0.05, 100.0), seed=st.integers(0, 2**32))
def test_dirichlet_uses_every_sample_once_and_keeps_class_totals(y, n_devices, alpha, seed):
    try:
        parts = partition_dirichlet(y, n_devices, alpha, np.random.default_rng(seed), min_size=1)
    except ValueError as exc:  # a tiny alpha may never give every device a sample: a named, typed refusal
        assert "none of 1000 Dirichlet draws" in str(exc)
        return
    assert len(parts) == n_devices and min(p.size for p in parts) >= 1
    assert_disjoint(parts, y.size)
    assert np.array_equal(class_counts(y, parts).sum(axis=0), np.bincount(y, minlength=10))


def test_dirichlet_alpha_moves_from_label_skew_to_iid():
    def mean_top_class_share(alpha: float) -> float:
        parts = partition_dirichlet(BALANCED, 10, alpha, np.random.default_rng(4))
        counts = class_counts(BALANCED, parts)
        return float(np.mean(counts.max(axis=1) / counts.sum(axis=1)))

    skewed, iid = mean_top_class_share(0.05), mean_top_class_share(1e4)
    assert skewed > 0.6  # most of a device's data is one class
    assert iid < 0.16  # about 1/10 of each class
    parts = partition_dirichlet(BALANCED, 10, 1e4, np.random.default_rng(4))
    assert all(abs(p.size - 100) <= 10 for p in parts)  # huge alpha: q_c -> uniform, sizes -> equal


def test_dirichlet_min_size_and_reproducibility():
    a = partition_dirichlet(BALANCED, 20, 0.3, np.random.default_rng(7), min_size=20)
    assert min(p.size for p in a) >= 20
    assert same(a, partition_dirichlet(BALANCED, 20, 0.3, np.random.default_rng(7), min_size=20))
    assert not same(a, partition_dirichlet(BALANCED, 20, 0.3, np.random.default_rng(8), min_size=20))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, r"alpha=0.0: must be a finite number in \(0.0"),
        ({"alpha": float("nan")}, "alpha=nan"),
        ({"n_devices": 0}, r"n_devices=0: must be an integer in \[1, 1000\]"),
        ({"n_devices": 1001}, "n_devices=1001"),
        ({"min_size": 101}, r"min_size=101: must be an integer in \[0, 100\]"),
        ({"alpha": 1e-4, "min_size": 100, "max_draws": 3}, "none of 3 Dirichlet draws .* min_size=100"),
    ],
)
def test_dirichlet_errors_name_argument_value_and_range(kwargs, match):
    args = {"n_devices": 10, "alpha": 0.5} | kwargs
    with pytest.raises(ValueError, match=match):
        partition_dirichlet(BALANCED, rng=np.random.default_rng(0), **args)


def test_partitions_reject_labels_that_are_not_a_1d_int_array():
    with pytest.raises(ValueError, match="labels: must be a non-empty 1-D integer array"):
        partition_dirichlet(np.zeros(10), 2, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="labels"):
        partition_gamma_mix(np.zeros((5, 2), int), 2, 0.5, np.random.default_rng(0))


# ---------------------------------------------------------------------------------------------- gamma mix
def test_gamma_zero_is_the_label_sorted_split_of_the_authors_code():
    """gamma = 0 ("totally non-IID"): the label-sorted data cut into contiguous chunks, one per device."""
    y = np.repeat(np.arange(10), 60)
    parts = partition_gamma_mix(y, 20, 0.0, np.random.default_rng(1))
    assert_disjoint(parts, y.size)
    assert all(p.size == 30 and np.unique(y[p]).size == 1 for p in parts)  # 20 chunks of 30: half a class each
    parts = partition_gamma_mix(BALANCED, 8, 0.0, np.random.default_rng(1))  # the paper's N = 8 on 10 classes
    assert all(p.size == 125 and np.unique(y[p]).size <= 2 for p in parts for y in [BALANCED])


@pytest.mark.parametrize("gamma", [0.1, 0.2, 0.5, 0.8])
def test_gamma_is_each_devices_iid_share(gamma):
    """N = 10 devices on 10 classes of 100, device order kept: device i's non-IID chunk is class i's remainder,
    so device i holds (1 - gamma) * 100 samples of class i plus gamma * 100 IID samples."""
    parts = partition_gamma_mix(BALANCED, 10, gamma, np.random.default_rng(2), shuffle_devices=False)
    assert_disjoint(parts, BALANCED.size)
    counts = class_counts(BALANCED, parts)
    own = np.diag(counts)
    assert all(p.size == 100 for p in parts)
    assert np.all(own >= round((1 - gamma) * 100))  # the whole remainder of its own class
    others = counts.sum(axis=1) - own  # only IID samples can be of another class
    assert np.all(others <= round(gamma * 100))
    # of the gamma * 100 IID samples, 9/10 are of another class on average
    assert abs(others.mean() - 0.9 * gamma * 100) <= 3.0
    # the IID pool is stratified: every class gives exactly round(gamma * 100) samples to it
    assert np.array_equal(counts.sum(axis=0), [100] * 10)


def test_gamma_one_is_iid_and_shuffle_devices_permutes_the_same_parts():
    parts = partition_gamma_mix(BALANCED, 10, 1.0, np.random.default_rng(3))
    counts = class_counts(BALANCED, parts)
    assert np.mean(counts.max(axis=1) / 100) < 0.25  # no device dominated by a class
    kept = partition_gamma_mix(BALANCED, 10, 0.3, np.random.default_rng(5), shuffle_devices=False)
    shuffled = partition_gamma_mix(BALANCED, 10, 0.3, np.random.default_rng(5), shuffle_devices=True)
    assert sorted(map(tuple, kept)) == sorted(map(tuple, shuffled)) and not same(kept, shuffled)


@settings(max_examples=60, deadline=None)
@given(y=labels_strategy, n_devices=st.integers(1, 20), gamma=st.floats(0.0, 1.0), seed=st.integers(0, 2**32))
def test_gamma_mix_uses_every_sample_once_with_sizes_within_one(y, n_devices, gamma, seed):
    n_devices = min(n_devices, y.size)
    parts = partition_gamma_mix(y, n_devices, gamma, np.random.default_rng(seed))
    assert len(parts) == n_devices
    assert_disjoint(parts, y.size)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert same(parts, partition_gamma_mix(y, n_devices, gamma, np.random.default_rng(seed)))


@pytest.mark.parametrize("gamma", [0.0, 0.2, 1.0])
def test_gamma_mix_with_k_classes_per_device_deals_the_rest_as_shards(gamma):
    parts = partition_gamma_mix(BALANCED, 20, gamma, np.random.default_rng(6), classes_per_device=2)
    assert_disjoint(parts, BALANCED.size)
    counts = np.sort(class_counts(BALANCED, parts), axis=1)[:, ::-1]
    top2 = counts[:, :2].sum(axis=1) / counts.sum(axis=1)
    assert np.all(top2 >= 1 - gamma - 1e-9)  # the non-IID (1 - gamma) share lies in the device's 2 classes
    if gamma == 0.0:
        assert np.all(counts[:, 2:] == 0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": 1.5}, r"gamma=1.5: must be a finite number in \[0.0, 1.0\]"),
        ({"gamma": -0.1}, "gamma=-0.1"),
        ({"gamma": float("inf")}, "gamma=inf"),
        ({"n_devices": 0}, r"n_devices=0: must be an integer in \[1, 1000\]"),
        ({"classes_per_device": 0}, r"classes_per_device=0: must be an integer in \[1, 10\]"),
        ({"classes_per_device": 11}, "classes_per_device=11"),
    ],
)
def test_gamma_mix_errors_name_argument_value_and_range(kwargs, match):
    args = {"n_devices": 10, "gamma": 0.5} | kwargs
    with pytest.raises(ValueError, match=match):
        partition_gamma_mix(BALANCED, rng=np.random.default_rng(0), **args)


# ---------------------------------------------------------------------------------------------- power law
def test_luo_setup3_sizes_have_the_papers_mean_and_standard_deviation():
    """Luo et al. setup 3: 24,517 samples over N = 100 devices, mean 245, standard deviation 362."""
    for seed in range(5):
        parts = partition_power_law(24517, 100, np.random.default_rng(seed))
        assert_disjoint(parts, 24517)
        sizes = np.array([p.size for p in parts])
        assert sizes.sum() == 24517 and sizes.min() >= 1
        assert abs(sizes.std() - 24517 / 100 * LUO_SETUP3_STD_SIZE / LUO_SETUP3_MEAN_SIZE) < 1.0
        assert sizes.max() > 3 * sizes.mean() and np.median(sizes) < sizes.mean()  # heavy right tail


def test_power_law_mean_size_takes_a_random_subset():
    parts = partition_power_law(60000, 100, np.random.default_rng(1), mean_size=LUO_SETUP3_MEAN_SIZE)
    assert_disjoint(parts, 60000, all_used=False)
    sizes = np.array([p.size for p in parts])
    assert sizes.sum() == 24500 and abs(sizes.std() - 362) < 1.0


@settings(max_examples=80, deadline=None)
@given(
    n_devices=st.integers(2, 300),
    mean=log_uniform(1.0, 2000.0),
    cv=st.floats(0.0, 3.0),
    min_frac=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32),
)
def test_power_law_sizes_hit_total_min_and_std(n_devices, mean, cv, min_frac, seed):
    total = int(round(mean * n_devices))
    min_size = int(min_frac * (total // n_devices))
    free_mean = (total - n_devices * min_size) / n_devices
    std = cv * free_mean
    if free_mean == 0 or std >= 0.95 * free_mean * np.sqrt(n_devices - 1):
        return  # past the attainable spread (checked in the error test)
    sizes = power_law_sizes(total, n_devices, np.random.default_rng(seed), std_size=std, min_size=min_size)
    assert sizes.dtype == np.int64 and sizes.shape == (n_devices,)
    assert sizes.sum() == total and sizes.min() >= min_size
    assert abs(sizes.std() - std) <= 0.5 + 1e-6 * std  # exact up to rounding each size to an integer


def test_power_law_std_zero_is_balanced_and_seeds_reproduce():
    sizes = power_law_sizes(1003, 10, np.random.default_rng(0), std_size=0.0)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 1003
    a = partition_power_law(5000, 30, np.random.default_rng(9))
    assert same(a, partition_power_law(5000, 30, np.random.default_rng(9)))
    assert partition_power_law(7, 1, np.random.default_rng(0))[0].size == 7


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_devices": 0}, r"n_devices=0: must be an integer in \[1, 1000\]"),
        ({"n_devices": 1001}, "n_devices=1001"),
        ({"mean_size": 11.0}, r"mean_size=11.0: must be a finite number in \(0.0, 10.0\]"),
        ({"mean_size": 0.0}, "mean_size=0.0"),
        ({"min_size": 11}, r"min_size=11: must be an integer in \[0, 10\]"),
        ({"std_size": -1.0}, r"std_size=-1.0: must be a number in \[0, "),
        ({"std_size": 1e6}, "std_size=1000000.0"),
    ],
)
def test_power_law_errors_name_argument_value_and_range(kwargs, match):
    args = {"n_devices": 100} | kwargs
    with pytest.raises(ValueError, match=match):
        partition_power_law(1000, rng=np.random.default_rng(0), **args)


def test_power_law_default_spread_too_wide_for_two_devices_says_so():
    with pytest.raises(ValueError, match=r"std_size=.*\(the default, mean \* 362 / 245\): must be a number in"):
        partition_power_law(100, 2, np.random.default_rng(0))
