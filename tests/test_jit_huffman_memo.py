"""coding.HuffmanMemo's compiled merge gives :func:`coding.huffman_lengths` (the plain two-queue merge and its
flattening), on random histograms and edge ones: two symbols, ties everywhere, Fibonacci counts (the deepest codes,
flattened once or more), the most symbols a code of ``max_bits`` holds, small ``max_bits``, zeros between used
symbols, one used symbol, counts whose sums would leave int64."""

from __future__ import annotations

import numpy as np
import pytest

from edgefl.compression import coding


def _fibonacci(n: int) -> np.ndarray:
    fib = [1, 1]
    while len(fib) < n:
        fib.append(fib[-1] + fib[-2])
    return np.array(fib[:n], dtype=np.int64)


HUGE = [3330221832295894558, 1483596302665782736, 1286306969554864396, 7716378739422086024, 8519270239060102241,
        6048745524027719190, 7040287413473190781]  # merged counts above 2^63 compared with leaves: not int64


def _histograms() -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(31)
    out = [(np.array([5, 3]), 16), (np.array([0, 4, 0, 4]), 16), (np.full(37, 9), 16), (np.array([0, 0, 7]), 16)]
    out += [(_fibonacci(n), b) for n, b in ((17, 16), (25, 16), (40, 16), (12, 5), (30, 8))]
    out += [(rng.permutation(_fibonacci(30)), 16), (np.ones(1 << 10, dtype=np.int64), 10)]
    out += [(rng.integers(1, 3, 1 << 8), 8), (np.array([1 << 61, 1 << 61, 3]), 16), (np.array(HUGE), 16), (np.zeros(5, np.int64), 16)]
    for _ in range(60):
        size = int(rng.integers(2, 1500))
        counts = rng.geometric(rng.uniform(0.001, 0.5), size) * (rng.random(size) < rng.uniform(0.2, 1.0))
        out.append((counts.astype(np.int64), int(rng.choice([16, 16, 9, 12]))))
    return out


@pytest.mark.parametrize("case", range(len(_histograms())))
def test_memo_lengths_are_huffman_lengths(case: int) -> None:
    counts, max_bits = _histograms()[case]
    if np.count_nonzero(counts) > 1 << max_bits:
        return
    want = coding.huffman_lengths(counts, max_bits)
    assert np.array_equal(coding.HuffmanMemo(max_bits).lengths(counts), want)


def test_one_memo_over_a_run_of_alike_histograms() -> None:
    """The search's use: one memo, histograms that differ a little from one call to the next."""
    rng = np.random.default_rng(32)
    memo = coding.HuffmanMemo()
    base = np.bincount(rng.geometric(0.01, 200_000), minlength=700)[:700] + 1
    for trial in range(80):
        counts = base + rng.integers(0, 3, base.size) * (rng.random(base.size) < 0.05) * (trial % 7)
        assert np.array_equal(memo.lengths(counts), coding.huffman_lengths(counts))


def test_the_merge_flattens_like_huffman_lengths() -> None:
    """Counts whose optimal code is deeper than max_bits: the kernel's lengths (the flattened code's) are those of
    huffman_lengths, none longer than max_bits, and differ from the unflattened merge's."""
    counts = _fibonacci(25)
    got = coding.HuffmanMemo(16).lengths(counts)
    assert got.max() <= 16 and np.array_equal(got, coding.huffman_lengths(counts, 16))
    assert coding._plain_lengths(counts).max() > 16
