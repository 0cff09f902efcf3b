"""UVeQFed's codec (edgefl.compression.vq, format 0xC7 v2) against its oracle and the lattice's facts: the charged
size is the written payload's length, the payload and the seed read back to the same positions and values bit for
bit, A2's nearest point beats every neighbour, the dither lies in the Voronoi cell, the dithered quantiser is
unbiased with the error power G(A2) gives, and the budget fit is the largest k that fits within its tolerance."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from edgefl.compression import ops, vq, wire
from trained import random_update, trained_cnn_update


def _random(seed: int, scale: float = 1.0) -> dict[str, torch.Tensor]:
    return random_update(seed, scale, zeros=6)


UPDATES = {
    "random": _random(0), "tiny": _random(1, 1e-30), "huge": _random(2, 1e30),
    "zero": {k: torch.zeros_like(v) for k, v in _random(3).items()},
}  # fmt: skip
N = 108 + 4 + 77 + 5  # elements of _random
M = (N + 1) // 2


def _same(a, b) -> None:
    assert torch.equal(a.positions.long(), b.positions.long())
    assert torch.equal(a.values.view(torch.int32), b.values.view(torch.int32))


def _round_trip(coded) -> None:
    payload = vq.to_bytes(coded)
    assert coded.bits == 8 * len(payload)
    back = vq.from_bytes(payload, coded.names, seed=coded.meta["seed"])
    _same(coded, back)
    assert back.kept == coded.kept and (coded.kept == 0 or back.meta["d"] == coded.meta["d"])  # d sent if k > 0


@pytest.mark.parametrize("case", sorted(UPDATES))
@pytest.mark.parametrize("step", [1.0, 0.05, 20.0])
def test_every_k_round_trips_and_charges_the_written_bytes(case: str, step: float) -> None:
    update = UPDATES[case]
    flat = torch.cat([v.reshape(-1) for v in update.values()])
    for k in (0, 1, 2, 9, M // 2, M - 1, M):
        coded = vq.encode(update, k, step=step, seed=11)
        _round_trip(coded)
        idx = coded.positions.long()[coded.positions.long() % 2 == 0] // 2
        assert idx.numel() == k and (k < M or coded.positions.numel() == N)  # the padding is never sent
        x = torch.zeros(2 * M)
        x[:N] = flat
        norms = (x.view(M, 2).double() ** 2).sum(1).sqrt().float()
        assert torch.equal(idx, ops.flatnonzero(ops.top_k(norms, k)))  # the k largest norms, ties to the lower index
        if k and case != "zero":  # each kept element within the hexagon's radius d / sqrt(3) of the input
            err = (coded.values.double() - flat[coded.positions.long()].double()).abs()
            assert float(err.max()) <= coded.meta["d"] / math.sqrt(3) * (1 + 1e-6)


def test_d_and_the_size_formula_by_hand() -> None:
    """Four elements (2, 0, 0, 0), step 1: ||h|| / sqrt(n) = 1, so d = 1, and sub-vector (2, 0) is the lattice
    point (a, b) = (2, 0) whatever the dither (z lies in the origin's cell, so x + z in x's). Keeping k = 1:
    header 8 + 4 + 8 + (4 + 32) + 32 = 88; Rice of the index gap 0: 6 + 1; d, base, u: 96; the one symbol
    zigzag(2) * base + zigzag(0) = 4 (base 1), its gap 4 Rice coded at the smallest best b = 1: 6 + 2 + 2 = 10;
    a Huffman stream of one used symbol: 96. 88 + 7 + 96 + 10 + 96 = 297, padded to 304 bits."""
    coded = vq.encode({"w": torch.tensor([2.0, 0.0, 0.0, 0.0])}, 1, step=1.0, seed=3)
    assert coded.meta["d"] == 1.0 and coded.positions.tolist() == [0, 1]
    assert coded.bits == 304
    _round_trip(coded)


def test_a_real_trained_update_round_trips() -> None:
    update = trained_cnn_update()
    n = sum(v.numel() for v in update.values())
    coded = vq.fit(update, 0.002 * 32 * n, step=1.0, seed=5)
    assert 0 < coded.kept and coded.bits <= 0.002 * 32 * n
    _round_trip(coded)
    _same(coded, vq.encode(update, coded.kept, step=1.0, seed=5))  # the fit's superset gives encode's values


def test_a_real_update_fit_where_most_sub_vectors_are_kept() -> None:
    """At 0.06 x 32 n bits (this preset's budgets) most sub-vectors are kept and the search runs on the model of
    :meth:`vq.Lattice.model`; its k must still meet the stated guarantee, checked with encode's sizes: k fits and
    k + max(1, floor(0.005 k)) does not. Keeping every sub-vector at a budget of that size gives k = M."""
    update = trained_cnn_update()
    n = sum(v.numel() for v in update.values())
    m = (n + 1) // 2
    budget = 0.06 * 32 * n
    coded = vq.fit(update, budget, step=1.0, seed=7)
    assert m // 2 < coded.kept < m and coded.bits <= budget
    assert coded.bits == vq.encode(update, coded.kept, step=1.0, seed=7).bits
    step = max(1, int(vq.TOLERANCE * coded.kept))
    assert vq.encode(update, min(coded.kept + step, m), step=1.0, seed=7).bits > budget
    every = vq.encode(update, m, step=1.0, seed=7)
    assert vq.fit(update, every.bits, step=1.0, seed=7).kept == m


def test_nan_or_inf_in_an_update_is_refused_in_one_line() -> None:
    for bad in (math.nan, math.inf):
        update = _random(0)
        update["fc"][2, 3] = bad
        with pytest.raises(ValueError, match="NaN or inf") as info:
            vq.fit(update, 10**6, step=1.0, seed=1)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_the_fit_is_the_largest_k_that_fits_within_its_tolerance(case: str) -> None:
    update = UPDATES[case]
    sizes = [vq.encode(update, k, step=1.0, seed=2).bits for k in range(M + 1)]
    for budget in (sizes[0] - 1, sizes[0], sizes[1], 600, 900, sizes[M] - 1, sizes[M], 10**6):
        coded = vq.fit(update, budget, step=1.0, seed=2)
        assert coded.bits == sizes[coded.kept] and (coded.bits <= budget or coded.kept == 0)
        step = max(1, int(vq.TOLERANCE * coded.kept))
        # the stated guarantee: k fits and some k' in (k, k + step] does not (or k = M)
        assert coded.kept == M or any(s > budget for s in sizes[coded.kept + 1 : coded.kept + step + 1])
        first_over = next((k for k in range(M + 1) if sizes[k] > budget), M + 1)
        assert coded.kept >= first_over - 1 - step or coded.kept == 0 and first_over == 0  # no earlier stop
        _same(coded, vq.encode(update, coded.kept, step=1.0, seed=2))


def test_the_nearest_point_beats_its_neighbours_and_the_dither_lies_in_the_cell() -> None:
    g = torch.Generator().manual_seed(0)
    for d in (1.0, 0.37, 1e-30, 1e30):
        x, y = (torch.randn(50_000, generator=g, dtype=torch.float64) * 7 * d for _ in "xy")
        a, b = ops.a2_nearest(x, y, d)
        px, py = ops.a2_points(a, b, d)
        best = (px - x) ** 2 + (py - y) ** 2
        for da, db in itertools.product((-1, 0, 1), repeat=2):
            qx, qy = ops.a2_points(a + da, b + db, d)
            assert bool(((qx - x) ** 2 + (qy - y) ** 2 >= best * (1 - 1e-12)).all())
        zx, zy = ops.a2_cell(torch.rand((50_000, 2), generator=g, dtype=torch.float64), d)
        za, zb = ops.a2_nearest(zx, zy, d)
        assert bool((za == 0).all() and (zb == 0).all())  # the origin is z's nearest point: z is in its cell
        # uniform over the hexagon of area sqrt(3) / 2 d^2: E z_x^2 = E z_y^2 = 5 d^2 / 72 (G(A2) = 5 / (36 sqrt 3))
        for z in (zx / d, zy / d):
            assert abs(float((z * z).mean()) - 5 / 72) < 0.003 and abs(float(z.mean())) < 0.003


def test_the_dithered_quantiser_is_unbiased_with_the_lattice_error_power() -> None:
    """Over 400 seeds, every kept element's mean decoded value is within 4.5 standard errors of the input (error
    variance 5 d^2 / 72 per element), and the mean squared error within 10% of 5 d^2 / 72."""
    update = {"w": torch.tensor([0.3, -1.2, 2.5, 0.01, -0.7, 0.0], dtype=torch.float32)}
    runs = torch.stack([vq.encode(update, 3, step=1.0, seed=s).values.double() for s in range(400)])
    coded = vq.encode(update, 3, step=1.0, seed=0)
    target, d = update["w"][coded.positions.long()].double(), coded.meta["d"]
    se = math.sqrt(5 / 72) * d / math.sqrt(400)
    assert float((runs.mean(0) - target).abs().max()) < 4.5 * se
    assert abs(float(((runs - target) ** 2).mean()) / (5 * d * d / 72) - 1) < 0.1


def test_malformed_payloads_and_settings_are_refused() -> None:
    coded = vq.encode(_random(0), 5, step=1.0, seed=1)
    payload = vq.to_bytes(coded)
    with pytest.raises(wire.WireError, match="magic"):
        vq.from_bytes(bytes([0xB7]) + payload[1:], coded.names, seed=1)
    with pytest.raises(wire.WireError):
        vq.from_bytes(payload[:14], coded.names, seed=1)
    with pytest.raises(ValueError, match="step=0"):
        vq.encode(_random(0), 5, step=0.0, seed=1)
    with pytest.raises(ValueError, match=f"k={M + 1}"):
        vq.encode(_random(0), M + 1, step=1.0, seed=1)


def _heap_lengths(counts):
    """Textbook Huffman code lengths by a heap (ties: a leaf before a merged node, leaves by symbol, merged nodes by
    creation), no length limit: the reference for ops.huffman_lengths where no code exceeds 16 bits."""
    import heapq

    used = [s for s, c in enumerate(counts) if c]
    heap = [(int(counts[s]), 0, i) for i, s in enumerate(used)]
    heapq.heapify(heap)
    parent, node = {}, len(used)
    while len(heap) > 1:
        (c1, _, a), (c2, _, b) = heapq.heappop(heap), heapq.heappop(heap)
        parent[a] = parent[b] = node
        heapq.heappush(heap, (c1 + c2, 1, node))
        node += 1
    out = [0] * len(counts)
    for i, s in enumerate(used):
        depth, at = 0, i
        while at in parent:
            at, depth = parent[at], depth + 1
        out[s] = depth if len(used) > 1 else 0
    return out


def test_huffman_lengths_are_the_heap_merges():
    g = torch.Generator().manual_seed(4)
    cases = [[0, 3, 0, 9], [5] * 37, [0, 0, 4], [1, 1], [2**i for i in range(12)]]
    cases += [torch.randint(0, int(hi), (int(size),), generator=g).tolist()
              for hi, size in [(2, 30), (4, 200), (9, 120), (1000, 300), (3, 1000)] for _ in range(20)]  # fmt: skip
    for counts in cases:
        assert ops.huffman_lengths(counts).tolist() == _heap_lengths(counts), counts
