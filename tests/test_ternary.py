"""STC's codec (edgefl.compression.ternary, format 0xB7 v2) against its oracle: the charged size is the written
payload's length, the payload reads back to the same positions and values bit for bit, the kept set is the top k
of ops.top_k, and the budget fit is the largest k that fits to within its stated tolerance (brute scans)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import ops, ternary, wire
from trained import random_update, trained_cnn_update


def _random(seed: int, scale: float = 1.0) -> dict[str, torch.Tensor]:
    return random_update(seed, scale, zeros=5)


def _same(a, b) -> None:
    assert torch.equal(a.positions.long(), b.positions.long())
    assert torch.equal(a.values.view(torch.int32), b.values.view(torch.int32))  # bit for bit, -0.0 included


def _round_trip(coded) -> None:
    payload = ternary.to_bytes(coded)
    assert coded.bits == 8 * len(payload)
    back = ternary.from_bytes(payload, coded.names)
    _same(coded, back)
    assert back.kept == coded.kept and back.shapes == coded.shapes


UPDATES = {
    "random": _random(0), "tiny": _random(1, 1e-30), "huge": _random(2, 1e30),
    "zero": {k: torch.zeros_like(v) for k, v in _random(3).items()},
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_every_k_round_trips_and_charges_the_written_bytes(case: str) -> None:
    update = UPDATES[case]
    n = sum(v.numel() for v in update.values())
    for k in (0, 1, 2, 3, 17, n // 2, n - 1, n):
        coded = ternary.encode(update, k)
        _round_trip(coded)
        assert coded.kept == k
        expected = ops.flatnonzero(ops.top_k(torch.cat([v.reshape(-1) for v in update.values()]).abs(), k))
        assert torch.equal(coded.positions.long(), expected)
        if k:  # +-mu, mu the mean kept magnitude (float32 rounding: 1e-6 relative)
            mags = torch.cat([v.reshape(-1) for v in update.values()])[expected].abs().double()
            assert math.isclose(coded.meta["mu"], float(mags.mean()), rel_tol=1e-6, abs_tol=1e-45)
            assert torch.all(coded.values.abs() == np.float32(coded.meta["mu"]))


def test_the_size_formula_by_hand() -> None:
    """One tensor of 10 elements, kept positions 2 and 7: header 8 + 4 + 8 + (4 + 32) + 32 = 88 bits; Rice gaps
    (2, 4) at b = 1 (b = 0: 6 + 8, b = 1: 6 + (1 + 2) + 4 = 13, b = 2: 6 + (0 + 1) + 6 = 13, smallest b kept), mu 32,
    2 signs: 88 + 13 + 32 + 2 = 135 -> 136 bits."""
    update = {"w": torch.tensor([0.1, 0.0, -3.0, 0.2, 0.0, 0.0, 0.0, 2.0, 0.0, 0.3])}
    coded = ternary.encode(update, 2)
    assert coded.positions.tolist() == [2, 7] and coded.bits == 136
    assert coded.values.tolist() == [-2.5, 2.5]
    _round_trip(coded)


def test_a_real_trained_update_round_trips() -> None:
    update = trained_cnn_update()
    n = sum(v.numel() for v in update.values())
    for budget in (0.002 * 32 * n, 0.1 * 32 * n):
        coded = ternary.fit(update, budget)
        assert coded.bits <= budget
        _round_trip(coded)
    assert coded.kept == n  # at 0.1 x 32n bits every element fits (2n + fields)
    fitted = ternary.fit(update, 0.002 * 32 * n)
    _same(fitted, ternary.encode(update, fitted.kept))  # the histogram ranking keeps ops.top_k's set


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_the_fit_is_the_largest_k_that_fits_within_its_tolerance(case: str) -> None:
    update = UPDATES[case]
    n = sum(v.numel() for v in update.values())
    sizes = [ternary.encode(update, k).bits for k in range(n + 1)]
    assert all(b >= a for a, b in zip(sizes, sizes[1:]))  # non-decreasing (module docstring's argument)
    for budget in (sizes[0] - 1, sizes[0], sizes[1], 300, 400, 555, sizes[n] - 1, sizes[n], 10**6):
        coded = ternary.fit(update, budget)
        best = max((k for k in range(n + 1) if sizes[k] <= budget), default=0)
        assert coded.bits == sizes[coded.kept] and (coded.bits <= budget or coded.kept == 0)
        assert best - max(1, int(ternary.TOLERANCE * coded.kept)) < coded.kept <= best
        _same(coded, ternary.encode(update, coded.kept))


def test_the_fit_on_a_larger_update_stays_within_the_tolerance() -> None:
    g = torch.Generator().manual_seed(5)
    update = {"w": torch.randn(40, 1, 5, 5, generator=g) ** 3, "b": torch.randn(3000, generator=g)}
    n = 4000
    for budget in (2_000, 6_000, 9_000):
        coded = ternary.fit(update, budget)
        step = max(1, int(ternary.TOLERANCE * coded.kept))
        assert coded.bits <= budget
        assert coded.kept == n or budget < ternary.encode(update, min(n, coded.kept + step)).bits


def test_malformed_payloads_are_refused_with_one_line() -> None:
    coded = ternary.encode(_random(0), 5)
    payload = ternary.to_bytes(coded)
    with pytest.raises(wire.WireError, match="magic"):
        ternary.from_bytes(bytes([0xA7]) + payload[1:], coded.names)
    with pytest.raises(wire.WireError):
        ternary.from_bytes(payload[:12], coded.names)
    with pytest.raises(ValueError, match="k=-1"):
        ternary.encode(_random(0), -1)


def test_largest_fitting_against_a_brute_scan() -> None:
    """ops.largest_fitting on hand-made increasing sizes, with a model of the wrong scale and shape."""
    for budget in (0, 5, 100, 12_345, 10**6):
        size = lambda k: 7 + 3 * k + int(math.sqrt(k))  # noqa: E731
        best = max((k for k in range(200_001) if size(k) <= budget), default=None)
        got = ops.largest_fitting(size, 200_000, budget, lambda k: 2 * k + 50, 0.005)
        if best is None:
            assert got is None
        else:
            assert best - max(1, int(0.005 * got)) < got <= best


# --- the container written out bit by bit from a stable sort (independent of the codec's code) ---------------


def _uint(value: int, width: int) -> str:
    assert 0 <= value < 1 << width
    return format(value, f"0{width}b") if width else ""


def _rice(values: list[int]) -> str:
    """Rice code as edgefl writes it: the b of least size (smallest on ties) in 6 bits, unary quotients (q ones
    and a zero), then the b-bit remainders."""
    top = max(max(values, default=0).bit_length(), 1)
    sizes = [sum(v >> b for v in values) + len(values) * (b + 1) for b in range(top + 1)]
    b = sizes.index(min(sizes)) if values else 0
    unary = "".join("1" * (v >> b) + "0" for v in values)
    return _uint(b, 6) + unary + "".join(_uint(v & ((1 << b) - 1), b) for v in values)


def _to_bytes(bits: str) -> bytes:
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8))


def _reference(update: dict[str, torch.Tensor], k: int) -> bytes:
    """STC's v2 payload keeping the k largest |values| (ties by index): header, Rice gaps, mu = float32 of the
    float64 mean magnitude, sign bits (1 = negative, by the float's sign bit)."""
    flat = np.concatenate([v.reshape(-1).numpy() for v in update.values()]).astype(np.float32)
    kept = np.sort(np.argsort(-np.abs(flat).astype(np.float64), kind="stable")[:k])
    bits = _uint(0xB7, 8) + _uint(2, 4) + _uint(len(update), 8)
    for v in update.values():
        bits += _uint(v.dim(), 4) + "".join(_uint(d, 32) for d in v.shape)
    bits += _uint(k, 32)
    if k:
        gaps = np.diff(kept, prepend=-1) - 1
        mu = np.float32(np.abs(flat[kept]).astype(np.float64).mean())
        bits += _rice([int(g) for g in gaps]) + _uint(int(np.array(mu).view(np.uint32)), 32)
        bits += "".join("1" if np.signbit(x) else "0" for x in flat[kept])
    return _to_bytes(bits)


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_payloads_equal_the_written_out_container(case: str) -> None:
    update = UPDATES[case]
    n = sum(v.numel() for v in update.values())
    for k in (0, 1, 7, n // 3, n - 1, n):
        coded = ternary.encode(update, k)
        assert ternary.to_bytes(coded) == _reference(update, k)
    budget = 8 * len(_reference(update, n // 2))
    coded = ternary.fit(update, budget)
    assert ternary.to_bytes(coded) == _reference(update, coded.kept)


def test_the_rice_size_of_dense_positions_from_the_last_alone():
    """ops.positions_rice_size (the b = 0 shortcut when the gaps sum to at most k) equals the Rice size of the
    gaps at every density, and the written field's length."""
    g = torch.Generator().manual_seed(8)
    for n, k in [(10, 1), (10, 5), (10, 6), (100, 50), (100, 49), (1000, 999), (1000, 30), (7, 7)]:
        pos = torch.sort(torch.randperm(n, generator=g)[:k]).values
        gaps = np.diff(pos.numpy(), prepend=-1) - 1
        assert ops.positions_rice_size(pos) == ops.rice_size(gaps)[0]
        w = wire.BitWriter()
        w.rice(gaps)
        assert w.n_bits == ops.rice_size(gaps)[0]


def test_the_update_is_left_as_it_was() -> None:
    """The codec writes its values over its own concatenation, never over the update: one tensor and several,
    every element kept, some and none."""
    for update in (_random(6), {"w": torch.randn(50, generator=torch.Generator().manual_seed(7))}):
        before = {k: v.clone() for k, v in update.items()}
        n = sum(v.numel() for v in update.values())
        codes = [ternary.encode(update, k) for k in (0, 1, n // 2, n)] + [ternary.fit(update, b) for b in (300, 10**6)]
        assert codes[-1].kept == n
        for k, v in update.items():
            assert torch.equal(v.view(torch.int32), before[k].view(torch.int32)), k
