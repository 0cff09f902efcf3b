"""The shared size operations of :mod:`edgefl.compression.ops` against plain formulations written out here: the Rice
parameter walk against trying every parameter, the Huffman code lengths against the textbook merge that adds 1 to
every leaf under each merge."""

from __future__ import annotations

import heapq

import numpy as np

from edgefl.compression import ops


def test_rice_parameter_walk_equals_the_exhaustive_search() -> None:
    """The convex walk gives the smallest b of least size over all of [0, bit_length(max)], as trying every b
    does: geometric gaps of many means, constant values (ties between b), zeros, one large outlier."""
    rng = np.random.default_rng(4)
    cases = [rng.geometric(p, size=n) - 1 for p in (0.9, 0.5, 0.1, 0.01, 1e-4) for n in (1, 7, 300)]
    cases += [np.zeros(5, dtype=np.int64), np.full(9, 3), np.full(9, 4), np.array([0, 0, 0, 1 << 40]), np.arange(64)]
    for values in cases:
        top = max(int(values.max()).bit_length(), 1)
        sizes = [ops.RICE_B_BITS + int((values >> c).sum()) + values.size * (c + 1) for c in range(top + 1)]
        assert ops.rice_size(values) == (min(sizes), sizes.index(min(sizes))), values[:5]


def test_huffman_lengths_equal_the_merge_that_counts_every_leaf() -> None:
    """Code lengths equal those of the merge that adds 1 to every leaf under each merge (written out here with a
    heap; ties: a leaf before a merged node, leaves by symbol, merged nodes in the order made), the used counts
    halved (at least 1) and merged again while a code is longer than 16 bits: geometric counts, equal counts
    (ties), two symbols, one symbol, none, and heavy tails (Fibonacci, powers of two, Zipf) that need halvings."""

    def by_leaves(counts):
        used = np.flatnonzero(counts)
        lengths = np.zeros(counts.size, dtype=np.int64)
        heap = [(int(counts[s]), 0, i, [int(s)]) for i, s in enumerate(used)]
        heapq.heapify(heap)
        made = 0
        while len(heap) > 1:
            c1, _, _, s1 = heapq.heappop(heap)
            c2, _, _, s2 = heapq.heappop(heap)
            lengths[s1] += 1
            lengths[s2] += 1
            heapq.heappush(heap, (c1 + c2, 1, made, s1 + s2))
            made += 1
        return lengths

    rng = np.random.default_rng(8)
    cases = [np.bincount(rng.geometric(p, size=2000)) for p in (0.5, 0.05)]
    cases += [np.full(37, 5), np.array([0, 3, 0, 9]), np.array([0, 0, 4]), np.zeros(3, dtype=np.int64)]
    cases += [rng.integers(0, int(rng.choice([2, 4, 9, 1000])), size=int(rng.integers(1, 120))) for _ in range(150)]
    cases += [(1 << rng.integers(0, 6, size=60)) * (rng.random(60) < 0.8) for _ in range(150)]
    fib = [1, 1]
    while len(fib) < 30:
        fib.append(fib[-1] + fib[-2])
    cases += [np.array(fib), 1 << np.arange(40), np.minimum(rng.zipf(1.2, size=800), 10**6), np.array([0, 1, 1, 10**7])]
    cases += [np.minimum(rng.zipf(1.3, size=m), 10**9) * (rng.random(m) < 0.7) for m in rng.integers(20, 400, 20)]
    halved = 0
    for counts in cases:
        work = np.asarray(counts, dtype=np.int64)
        while (want := by_leaves(work)).max(initial=0) > ops.MAX_CODE_BITS:
            work, halved = np.where(work > 0, (work >> 1) | 1, 0), halved + 1
        assert np.array_equal(ops.huffman_lengths(counts), want), counts
    assert halved >= 10  # the length limit is exercised


def test_positions_rice_size_equals_the_exhaustive_search_over_the_gaps() -> None:
    """The Rice size of the gaps before ascending positions (g_1 = p_1, g_i = p_i - p_(i-1) - 1), found from the
    positions in one pass, equals the least over every parameter b of 6 + sum(g >> b) + m (b + 1), computed here
    from the gaps written out: sparse and clustered sets, a far first position, positions beyond 2^31."""
    import torch

    rng = np.random.default_rng(11)
    cases = [np.sort(rng.choice(n, size=k, replace=False)) for n, k in [(10**6, 3000), (5000, 900), (300, 2)]]
    cases += [np.cumsum(rng.geometric(0.02, size=2000)) * (1 + (rng.random(2000) < 0.1) * 40), np.array([123456])]
    cases += [np.array([5, 2**31 + 7, 2**33]), 2**31 + np.sort(rng.choice(10**5, size=50, replace=False))]
    for pos in cases:
        pos = np.unique(pos).astype(np.int64)
        gaps = np.diff(pos, prepend=-1) - 1
        top = max(int(gaps.max()).bit_length(), 1)
        want = min(ops.RICE_B_BITS + int((gaps >> b).sum()) + gaps.size * (b + 1) for b in range(top + 1))
        assert ops.positions_rice_size(torch.from_numpy(pos)) == want, pos[:4]
