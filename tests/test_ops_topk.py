"""``ops.top_k`` / ``ops.Ranking`` against a plain sort: the k largest magnitudes (NaN above everything, -0.0
equal to 0.0), ties to the lower index, whichever of the Ranking's views (whole mask, positions) gives them."""

from __future__ import annotations

import math

import torch

from edgefl.compression import ops


def _reference(scores: torch.Tensor, k: int) -> torch.Tensor:
    values = [math.inf if math.isnan(v) else abs(v) for v in scores.tolist()]
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]
    mask = torch.zeros(len(values), dtype=torch.bool)
    mask[order] = True
    return mask


def test_top_k_equals_a_plain_sort_with_ties_nan_and_signed_zeros():
    g = torch.Generator().manual_seed(1)
    for n in (1, 5, 100, 3000):
        for trial in range(12):
            s = torch.randn(n, generator=g) * (10.0 ** (trial - 6))
            if trial % 3 == 0:
                s = torch.round(s * 2) / 2  # many ties, and -0.0
            if trial % 4 == 0:
                s[::7] = math.nan
            for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
                want = _reference(s, k)
                assert torch.equal(ops.top_k(s, k), want), (n, trial, k)
                assert torch.equal(ops.top_k(s.abs(), k), want)
                if 0 < k < n:  # a fresh Ranking holds only the bins this k needs: positions index the whole
                    assert torch.equal(ops.Ranking(s).positions(k), torch.nonzero(want).reshape(-1))
            ranking = ops.Ranking(s)  # many k on one ranking, the largest held set first
            for k in sorted({1, n // 3, n // 2, n - 1} - {0, n}, reverse=True):
                assert torch.equal(ranking.top(k), _reference(s, k)), (n, trial, k)


def test_ranking_within_one_crowded_bin():
    """Keys that share their top bits (one bin) and differ, or tie, in the low 16: 1 + j 2^-23 for j in [0, 300)
    drawn with repeats, among exact zeros (one bin of equal keys), every k through both bins."""
    g = torch.Generator().manual_seed(2)
    s = 1.0 + torch.randint(0, 300, (2000,), generator=g).to(torch.float32) * 2.0**-23
    s[torch.rand(2000, generator=g) < 0.4] = 0.0
    s *= torch.where(torch.rand(2000, generator=g) < 0.5, -1.0, 1.0)
    ranking = ops.Ranking(s)
    for k in range(1, 2000, 7):
        assert torch.equal(ranking.top(k), _reference(s, k)), k
