"""CC-FedAvg (Zhang et al.) Sec. VI-A: p_i = (1/2)^floor(beta i / N), p_i from energy budgets, and the
"ad-hoc" and "round-robin" train/skip schedules."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizers.ccfedavg import (
    adhoc_mask,
    adhoc_schedule,
    budget_probabilities,
    level_probabilities,
    round_robin_mask,
    round_robin_phases,
    round_robin_schedule,
)
from optimizers.errors import OptimizerInputError


def test_levels_n100_beta4_hand_values():
    # Sec. VI-A: N = 100, beta = 4 -> 1, 1/2, 1/4, 1/8 in blocks of 25 (Table II's setting).
    p = level_probabilities(100, 4)
    expected = np.repeat([1.0, 0.5, 0.25, 0.125], 25)
    np.testing.assert_array_equal(p, expected)


def test_levels_paper_examples():
    # "beta = 3 ... 30 clients ... each group of 10 clients performs local training in 400, 200, 100 rounds"
    np.testing.assert_array_equal(level_probabilities(30, 3), np.repeat([1.0, 0.5, 0.25], 10))
    # Table I: N = 8, beta = 4 -> probabilities 1, 0.5, 0.25, 0.125 (two clients each)
    np.testing.assert_array_equal(level_probabilities(8, 4), np.repeat([1.0, 0.5, 0.25, 0.125], 2))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 2000), beta=st.integers(1, 64))
def test_levels_properties(n, beta):
    p = level_probabilities(n, beta)
    assert p.shape == (n,)
    assert np.all(np.diff(p) <= 0)  # non-increasing in i
    assert p[0] == 1.0
    # "there are ceil(N / beta) clients with p_i = 1" (Sec. VI-A), which pins i to 0..N-1
    assert np.count_nonzero(p == 1.0) == math.ceil(n / beta)
    levels = np.log2(1 / p)
    np.testing.assert_array_equal(levels, np.floor(beta * np.arange(n) / n))
    assert levels.max() <= beta - 1


def test_budget_probabilities_formula():
    # p_i = min(1, B_i / (T e_i)): 10 J over 100 rounds at 0.2 J per training -> 50 trainings -> 0.5
    p = budget_probabilities([10.0, 50.0, 0.0, 2.5], [0.2, 0.2, 0.2, 0.1], 100)
    np.testing.assert_allclose(p, [0.5, 1.0, 0.0, 0.25])


def test_adhoc_fraction_within_three_standard_errors():
    rng = np.random.default_rng(1234)
    p = np.array([1.0, 0.5, 0.25, 0.125, 0.3, 0.9, 0.01, 0.0])
    rounds = 20_000
    masks = np.stack(list(itertools.islice(adhoc_schedule(p, rng), rounds)))
    fraction = masks.mean(axis=0)
    standard_error = np.sqrt(p * (1 - p) / rounds)
    assert np.all(np.abs(fraction - p) <= 3 * standard_error + 1e-12)
    assert np.all(masks[:, 0]) and not np.any(masks[:, -1])


def test_adhoc_is_reproducible_from_the_generator_and_independent_per_round():
    p = level_probabilities(50, 4)
    first = list(itertools.islice(adhoc_schedule(p, np.random.default_rng(9)), 30))
    second = list(itertools.islice(adhoc_schedule(p, np.random.default_rng(9)), 30))
    np.testing.assert_array_equal(np.stack(first), np.stack(second))
    # one round from its own stream (how a resumed run draws round t)
    seq = np.random.SeedSequence(9).spawn(3)
    a = adhoc_mask(p, np.random.default_rng(seq[2]))
    b = adhoc_mask(p, np.random.default_rng(np.random.SeedSequence(9).spawn(3)[2]))
    np.testing.assert_array_equal(a, b)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200), beta=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
def test_round_robin_exactly_once_in_every_period(n, beta, seed):
    p = level_probabilities(n, beta)
    period = np.round(1 / p).astype(int)
    horizon = 3 * int(period.max())
    masks = np.stack(list(itertools.islice(round_robin_schedule(p, np.random.default_rng(seed)), horizon)))
    for i in range(n):
        w = period[i]
        # every window of W_i consecutive rounds holds exactly one training round
        windows = np.convolve(masks[:, i].astype(int), np.ones(w, int), mode="valid")
        assert np.all(windows == 1)


def test_round_robin_phases_cover_the_period_and_follow_the_rng():
    p = np.full(4000, 0.125)
    phases = round_robin_phases(p, np.random.default_rng(5))
    assert phases.min() == 0 and phases.max() == 7
    np.testing.assert_array_equal(phases, round_robin_phases(p, np.random.default_rng(5)))
    # the first training round of client i is (W - 1 - phi_i): phases spread clients over the period
    first = np.argmax(np.stack([round_robin_mask(p, phases, t) for t in range(8)]), axis=0)
    np.testing.assert_array_equal(first, 7 - phases)


def test_round_robin_non_integer_period_keeps_the_rate():
    p = np.array([0.3, 0.7, 0.0, 1.0])
    phases = round_robin_phases(p, np.random.default_rng(0))
    masks = np.stack([round_robin_mask(p, phases, t) for t in range(1000)])
    counts = masks.sum(axis=0)
    assert abs(counts[0] - 300) <= 1 and abs(counts[1] - 700) <= 1
    assert counts[2] == 0 and counts[3] == 1000
    gaps = np.diff(np.flatnonzero(masks[:, 0]))
    assert set(gaps.tolist()) <= {3, 4}  # floor(1/p), ceil(1/p)


def test_round_robin_mask_is_a_pure_function_of_the_round():
    p = level_probabilities(40, 4)
    rng = np.random.default_rng(77)
    schedule = list(itertools.islice(round_robin_schedule(p, rng), 20))
    phases = round_robin_phases(p, np.random.default_rng(77))
    for t in (0, 7, 19):  # resuming at round t gives the same decisions
        np.testing.assert_array_equal(round_robin_mask(p, phases, t), schedule[t])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: level_probabilities(0, 4), r"n=0: must be >= 1"),
        (lambda: level_probabilities(10, 0), r"beta=0: must be >= 1"),
        (lambda: level_probabilities(10, 2.5), r"beta=2.5: must be an integer >= 1"),
        (lambda: budget_probabilities([1.0], [0.0], 10), r"cost_per_round_j\[0\]=0.0: must be > 0"),
        (lambda: budget_probabilities([-1.0], [1.0], 10), r"budget_j\[0\]=-1.0: must be >= 0"),
        (lambda: budget_probabilities([1.0], [1.0], 0), r"rounds=0: must be >= 1"),
        (lambda: budget_probabilities([1.0, 2.0], [1.0], 5), r"cost_per_round_j: length 1"),
        (lambda: adhoc_mask([0.5, 1.5], np.random.default_rng(0)), r"p\[1\]=1.5: must be in \[0, 1\]"),
        (lambda: adhoc_schedule([np.nan], np.random.default_rng(0)), r"p\[0\]=nan: must be finite"),
        (lambda: round_robin_schedule([-0.1], np.random.default_rng(0)), r"p\[0\]=-0.1: must be in \[0, 1\]"),
        (lambda: round_robin_mask([0.5], [0], -1), r"round_index=-1: must be >= 0"),
        (lambda: round_robin_mask([0.5], [0.5], 0), r"phases: shape \(1,\): must be integers"),
    ],
)
def test_validation(call, match):
    with pytest.raises(OptimizerInputError, match=match):
        call()
