"""Update compression: coders, quantiser, sparsifier and AnycostFL's budgeted codec (Sec. III-C, eqs. (2)-(4))."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgefl.compression import BudgetError, CodecError, compress, decode, encode_fixed, encoded_bits
from edgefl.compression import coding, quantize, sparsify


def _update(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = {"conv.weight": (8, 3, 3, 3), "conv.bias": (8,), "fc.weight": (10, 72), "fc.bias": (10,)}
    return {k: torch.randn(s, generator=g) * torch.rand(s, generator=g) for k, s in shapes.items()}


def test_rice_round_trip_and_optimal_parameter() -> None:
    values = np.random.default_rng(0).geometric(0.01, size=500) - 1
    w = coding.BitWriter()
    coding.rice_encode(w, values)
    assert coding.rice_decode(coding.BitReader(w.to_bytes()), values.size).tolist() == values.tolist()
    b = coding.rice_parameter(values)
    assert all(coding.rice_bits(values, b) <= coding.rice_bits(values, c) for c in range(12))


def test_rice_parameter_walk_equals_the_exhaustive_search() -> None:
    """The convex walk gives the smallest b of least size over all of [0, bit_length(max)], as trying every b
    does: geometric gaps of many means, constant values (ties between b), zeros, one large outlier."""
    rng = np.random.default_rng(4)
    cases = [rng.geometric(p, size=n) - 1 for p in (0.9, 0.5, 0.1, 0.01, 1e-4) for n in (1, 7, 300)]
    cases += [np.zeros(5, dtype=np.int64), np.full(9, 3), np.full(9, 4), np.array([0, 0, 0, 1 << 40]), np.arange(64)]
    for values in cases:
        top = max(int(values.max()).bit_length(), 1)
        sizes = [coding.rice_bits(values, c) for c in range(top + 1)]
        assert coding.rice_parameter(values) == sizes.index(min(sizes)), values[:5]


def test_huffman_round_trip_and_size_near_entropy() -> None:
    symbols = np.minimum(np.random.default_rng(1).geometric(0.3, size=3000) - 1, 40)
    w = coding.BitWriter()
    coding.huffman_encode(w, symbols, 41)
    assert w.n_bits == coding.huffman_bits(symbols, 41)
    assert coding.huffman_decode(coding.BitReader(w.to_bytes()), symbols.size).tolist() == symbols.tolist()
    entropy = coding.entropy_bits(np.bincount(symbols))
    assert entropy <= w.n_bits <= entropy + 0.1 * symbols.size + 2000  # Huffman: < 1 bit/symbol above; header


def test_quantiser_is_unbiased() -> None:
    """Eq. (4): E[Q] = |u|; the mean over draws is within 3 standard errors of the magnitude."""
    mags = np.array([0.1, 0.137, 0.5, 0.77, 1.0])
    draws = 20_000
    rng = np.random.default_rng(2)
    idx = quantize.stochastic_levels(np.repeat(mags, draws), 3, 0.1, 1.0, rng.random(mags.size * draws))
    values = quantize.level_magnitudes(idx, 3, 0.1, 1.0).astype(np.float64).reshape(mags.size, draws)
    se = values.std(axis=1, ddof=1) / np.sqrt(draws) + 1e-12
    assert np.all(np.abs(values.mean(axis=1) - mags) <= 3 * se + 1e-7)


@pytest.mark.parametrize(("kept", "levels", "kernel_wise"), [(0, 3, True), (5, 1, True), (40, 7, True),
                                                             (762, 15, True), (300, 2, False), (1, 4, False)])
def test_codec_round_trip_is_exact(kept: int, levels: int, kernel_wise: bool) -> None:
    update = _update()
    c = encode_fixed(update, kept_kernels=kept, levels=levels, rng=np.random.default_rng(3), kernel_wise=kernel_wise)
    decoded = decode(c.payload, list(update))
    for name in update:
        assert torch.equal(decoded[name], c.update[name])
    assert c.bits == 8 * len(c.payload) == encoded_bits(
        update, kept_kernels=kept, levels=levels, rng=np.random.default_rng(3), kernel_wise=kernel_wise
    )


def test_codec_equals_sparsify_then_quantise() -> None:
    """The decoded update is eq. (2) then eqs. (3)-(4) applied by hand with the same uniforms."""
    update = _update(4)
    c = encode_fixed(update, kept_kernels=30, levels=5, rng=np.random.default_rng(5))
    flat = np.concatenate([t.reshape(-1).numpy() for t in update.values()])
    layout = sparsify.kernel_layout([t.shape for t in update.values()])
    elements = sparsify.kernel_elements(sparsify.top_kernels(sparsify.kernel_scores(flat, layout), 30), layout)
    mags = np.abs(flat[elements])
    idx = quantize.stochastic_levels(mags, 5, mags.min(), mags.max(), np.random.default_rng(5).random(flat.size)[elements])
    expected = np.zeros_like(flat)
    expected[elements] = np.sign(flat[elements]) * quantize.level_magnitudes(idx, 5, mags.min(), mags.max())
    got = np.concatenate([t.reshape(-1).numpy() for t in decode(c.payload, list(update)).values()])
    assert np.array_equal(got, expected)
    assert layout.size.tolist().count(9) == 24  # a conv kernel is one (out, in) slice of 3x3


def test_equal_magnitudes_and_malformed_payloads() -> None:
    update = {"w": torch.tensor([1.0, -1.0, 1.0, 0.0])}
    c = encode_fixed(update, kept_kernels=3, levels=3, rng=np.random.default_rng(0))
    assert torch.equal(decode(c.payload, ["w"])["w"], torch.tensor([1.0, -1.0, 1.0, 0.0]))
    with pytest.raises(CodecError, match="malformed|magic"):
        decode(c.payload[:-1] if len(c.payload) > 8 else b"\x00" + c.payload, ["w"])
    with pytest.raises(BudgetError, match="budget_bits=10"):
        compress(update, budget_bits=10, rng=np.random.default_rng(0))


@settings(max_examples=15, deadline=None)
@given(budget_fraction=st.floats(0.002, 0.5), seed=st.integers(0, 2**16))
def test_compress_fits_the_budget_and_uses_it(budget_fraction: float, seed: int) -> None:
    update = _update(seed % 7)
    dense = 32 * sum(t.numel() for t in update.values())
    budget = max(budget_fraction * dense, 700.0)
    c = compress(update, budget_bits=budget, rng=np.random.default_rng(seed))
    assert c.bits <= budget
    decoded = decode(c.payload, list(update))
    assert all(torch.equal(decoded[k], c.update[k]) for k in update)
    if budget <= 0.2 * dense:  # below the all-kernels size at the largest L the chooser tries
        assert c.bits >= 0.8 * budget


def test_radix_ranking_equals_a_stable_comparison_sort() -> None:
    """``rank_kernels`` (16-bit LSD radix passes) gives numpy's stable argsort of ``-scores``: descending, ties by
    index, over float32-derived magnitudes (skipped digits), float64 norms, zeros, -0.0 and repeated values; and
    ``top_positions`` is ``np.sort(order[:k])``."""
    rng = np.random.default_rng(11)
    as_float32 = np.abs(rng.normal(size=5000)).astype(np.float32).astype(np.float64)
    norms = np.sqrt(rng.random(5000) * 3.0)
    for scores in (as_float32, norms):
        scores[:700] = 0.0
        scores[700:710] = -0.0
        scores[1000:1300] = scores[17]
        rng.shuffle(scores)
        order = sparsify.rank_kernels(scores)
        assert np.array_equal(order, np.argsort(-scores, kind="stable"))
        for k in (0, 1, 999, 5000):
            assert np.array_equal(sparsify.top_positions(order, k), np.sort(order[:k]))


def test_huffman_lengths_by_depth_equal_the_merge_that_counts_every_leaf() -> None:
    """Code lengths from parent links equal those of the merge that adds 1 to every leaf under each merge
    (written out here, ties as in the codec): geometric counts, equal counts (ties), two symbols, one symbol."""
    import heapq

    def by_leaves(counts):
        used = np.flatnonzero(counts)
        lengths = np.zeros(counts.size, dtype=np.int64)
        heap = [(int(counts[s]), i, [int(s)]) for i, s in enumerate(used)]
        heapq.heapify(heap)
        tie = len(heap)
        while len(heap) > 1:
            c1, _, s1 = heapq.heappop(heap)
            c2, _, s2 = heapq.heappop(heap)
            lengths[s1] += 1
            lengths[s2] += 1
            heapq.heappush(heap, (c1 + c2, tie, s1 + s2))
            tie += 1
        return lengths

    rng = np.random.default_rng(8)
    cases = [np.bincount(rng.geometric(p, size=2000)) for p in (0.5, 0.05, 0.005)]
    cases += [np.full(37, 5), np.array([0, 3, 0, 9]), np.array([0, 0, 4]), np.zeros(3, dtype=np.int64)]
    # many ties between leaves and merged nodes (small counts, powers of two), where the tie rule decides
    cases += [rng.integers(0, int(rng.choice([2, 4, 9, 1000])), size=int(rng.integers(1, 120))) for _ in range(150)]
    cases += [(1 << rng.integers(0, 6, size=60)) * (rng.random(60) < 0.8) for _ in range(150)]
    for counts in cases:
        assert np.array_equal(coding._plain_lengths(counts), by_leaves(counts)), counts
