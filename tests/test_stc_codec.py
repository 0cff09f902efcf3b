"""STC's fast paths against the plain formulation: top-k sets by partial partitions equal a stable sort's (ties by
index), every exact size the sizer gives (the b = 0 shortcut, materialised sets, elements added to them) equals the
byte length of the payload that the shared coders write (``coding.BitWriter`` + ``coding.rice_encode``, the codec's
header), in any order of queries; payloads are those bytes; the budget search picks the largest k that fits at the
exact boundary; decoding gives the encoder's update and mask, rejects malformed payloads and reads any Rice b."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgefl.compression import CodecError, coding, sparsify
from edgefl.compression.container import write_header as _write_header
from edgefl.compression.search import largest_fitting
from edgefl.compression.stc import TernarySizer, decode_ternary

SHAPES = {"conv.weight": (6, 2, 3, 3), "conv.bias": (6,), "fc.weight": (10, 24), "fc.bias": (10,)}
N = sum(math.prod(s) for s in SHAPES.values())


def _update(flat: np.ndarray) -> dict[str, torch.Tensor]:
    out, at = {}, 0
    for name, shape in SHAPES.items():
        size = math.prod(shape)
        out[name] = torch.from_numpy(np.array(flat[at : at + size], dtype=np.float32)).reshape(shape)
        at += size
    return out


def _flat(update: dict[str, torch.Tensor]) -> np.ndarray:
    return np.concatenate([v.reshape(-1).numpy() for v in update.values()]).astype(np.float32)


def _kept(flat: np.ndarray, k: int) -> np.ndarray:
    """The top k positions, ascending: a stable comparison sort of -|v| (ties by index, NaNs last)."""
    return np.sort(np.argsort(-np.abs(flat).astype(np.float64), kind="stable")[:k])


def _reference(update: dict[str, torch.Tensor], k: int) -> bytes:
    """The STC payload written with the shared coders: header, Rice-coded gaps (optimal b), mu, sign bits."""
    flat = _flat(update)
    kept = _kept(flat, k)
    w = coding.BitWriter()
    _write_header(w, 0xB7, 1, [tuple(v.shape) for v in update.values()], k, None)
    if k:
        coding.rice_encode(w, np.diff(kept, prepend=-1) - 1)
        values = flat[kept]
        w.float32(np.float32(np.abs(values).mean()))
        w.bits((values < 0).astype(np.uint8))
    return w.to_bytes()


def _cases() -> dict[str, np.ndarray]:
    """Updates a trained model can give and the corners of the size formula."""
    rng = np.random.default_rng(7)
    normal = (rng.normal(size=N) * rng.random(N)).astype(np.float32)
    ties = rng.choice(np.array([0.0, -0.0, 0.5, -0.5, 0.25, 1.0], dtype=np.float32), size=N)
    layered = normal * np.where(np.arange(N) < 120, 1e-3, 1.0).astype(np.float32)  # small first layer: sparse front
    tail = np.zeros(N, dtype=np.float32)
    tail[-40:] = rng.normal(size=40)  # the largest at the end: the last kept position is N - 1 for every k
    spread = np.zeros(N, dtype=np.float32)
    spread[::7] = rng.normal(size=spread[::7].size)  # gaps of 6: b > 0 for small k
    return {"normal": normal, "ties": ties, "layered": layered, "zeros": np.zeros(N, dtype=np.float32),
            "tail": tail, "spread": spread}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_cases()))
def test_sizes_and_payloads_equal_the_shared_coders_for_every_k_in_any_order(case: str) -> None:
    update = _update(_cases()[case])
    ref = [_reference(update, k) for k in range(N + 1)]
    rng = np.random.default_rng(3)
    for order in (range(N + 1), range(N, -1, -1), rng.permutation(N + 1)):
        sizer = TernarySizer(update)
        for k in order:
            assert sizer.bits(int(k)) == 8 * len(ref[k]), (case, int(k))
        for k in (1, N // 3, N - 1):  # encoding with what the sizes kept (the Rice parameter)
            assert sizer.encode(k).payload == ref[k]
    sizer = TernarySizer(update)
    for k in (0, 1, 2, N // 5, N // 2, N // 2 + 1, N - 1, N):
        packed = sizer.encode(k)
        assert packed.payload == ref[k] and packed.bits == 8 * len(ref[k])
        out, sent = decode_ternary(packed.payload, list(update))
        kept = np.zeros(N, dtype=bool)
        kept[_kept(_flat(update), k)] = True
        assert np.array_equal(np.concatenate([s.reshape(-1).numpy() for s in sent.values()]), kept)
        for name in update:
            assert torch.equal(out[name], packed.update[name]) and torch.equal(sent[name], packed.sent[name])
            assert out[name].dtype == torch.float32 and sent[name].dtype == torch.bool


@pytest.mark.parametrize("case", sorted(_cases()))
def test_the_search_picks_the_largest_k_that_fits_at_the_exact_boundary(case: str) -> None:
    update = _update(_cases()[case])
    sizes = [8 * len(_reference(update, k)) for k in range(N + 1)]
    for k in (1, 3, N // 7, N // 3, N - 2):
        for budget in (sizes[k] - 1, sizes[k], sizes[k] + 7):
            fits = [j for j in range(N + 1) if sizes[j] <= budget]
            assert largest_fitting(TernarySizer(update).bits, 0, N, budget) == (max(fits) if fits else None)
    assert largest_fitting(TernarySizer(update).bits, 0, N, sizes[0] - 1) is None


def test_the_b0_shortcut_at_its_boundary() -> None:
    """The size from the last kept position alone (b = 0 when it is below 2k) on both sides of last + 1 = 2k."""
    for k, last in ((5, 9), (5, 10), (6, 11), (40, 79), (40, 80), (40, 81)):
        flat = np.zeros(N, dtype=np.float32)
        flat[np.linspace(0, last, k).round().astype(int)] = 1.0 + np.arange(k, dtype=np.float32)
        update = _update(flat)
        assert TernarySizer(update).bits(k) == 8 * len(_reference(update, k))
        assert TernarySizer(update).encode(k).payload == _reference(update, k)


def test_one_element_and_nan_updates() -> None:
    one = {"w": torch.tensor([-0.5])}
    for k in (0, 1):
        w = coding.BitWriter()
        _write_header(w, 0xB7, 1, [(1,)], k, None)
        if k:
            coding.rice_encode(w, np.zeros(1, dtype=np.int64))
            w.float32(0.5)
            w.bits(np.ones(1, dtype=np.uint8))
        assert TernarySizer(one).encode(k).payload == w.to_bytes() and TernarySizer(one).bits(k) == 8 * len(
            w.to_bytes())  # fmt: skip
    flat = _cases()["normal"].copy()
    flat[[3, 50, 200]] = np.nan  # ranked last, as a stable sort of -|v| places them
    update = _update(flat)
    sizer = TernarySizer(update)
    for k in (1, N // 2, N - 2, N):
        assert sizer.bits(k) == 8 * len(_reference(update, k)) and sizer.encode(k).payload == _reference(update, k)


def test_a_bisection_through_materialised_and_added_sets_gives_the_reference_sizes() -> None:
    """A larger update, so that the search materialises top sets, adds the elements ranked between, extends those
    additions and merges them (the paths a bisection over 10^6 elements takes), for several budgets."""
    shapes = {"a": (200, 60), "b": (7000,), "c": (30, 40)}
    rng = np.random.default_rng(5)
    n = sum(math.prod(s) for s in shapes.values())
    flat = (rng.normal(size=n) * rng.random(n) ** 3).astype(np.float32)
    flat[rng.random(n) < 0.2] = 0.0
    update, at = {}, 0
    for name, shape in shapes.items():
        update[name] = torch.from_numpy(flat[at : at + math.prod(shape)].copy()).reshape(shape)
        at += math.prod(shape)
    for frac in (0.01, 0.05, 0.2, 0.4):
        budget = 8 * len(_reference(update, int(frac * n)))
        sizer, asked = TernarySizer(update), []
        k = largest_fitting(lambda j, sizer=sizer, asked=asked: asked.append(j) or sizer.bits(j), 0, n, budget)
        for j in asked:
            assert sizer.bits(j) == 8 * len(_reference(update, j)), (frac, j)
        assert 8 * len(_reference(update, k)) <= budget < 8 * len(_reference(update, k + 1))
        assert any(kept.added for kept in sizer._kept)  # the search added elements to a materialised set
        assert sizer.encode(k).payload == _reference(update, k)


def test_decoding_rejects_malformed_payloads_and_reads_any_rice_parameter() -> None:
    update = _update(_cases()["spread"])
    names = list(update)
    payload = TernarySizer(update).encode(N // 10).payload
    for cut in (1, 5, len(payload) // 2, len(payload) - 2):
        with pytest.raises(CodecError, match="malformed|magic|outside"):
            decode_ternary(payload[:cut], names)
    flat = _flat(update)
    kept = _kept(flat, N // 10)
    for b in (0, 3, 33, 40):  # not the encoder's b: the decoder follows the parameter written
        w = coding.BitWriter()
        _write_header(w, 0xB7, 1, [tuple(v.shape) for v in update.values()], kept.size, None)
        coding.rice_encode(w, np.diff(kept, prepend=-1) - 1, b)
        w.float32(np.float32(np.abs(flat[kept]).mean()))
        w.bits((flat[kept] < 0).astype(np.uint8))
        out, _ = decode_ternary(w.to_bytes(), names)
        expected = TernarySizer(update).encode(kept.size).update
        assert all(torch.equal(out[name], expected[name]) for name in names), b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1e-30, 0.5, -0.5, 0.5, 2.0, float("inf"), -float("inf")]), min_size=1,
                max_size=60), st.randoms(use_true_random=False))  # fmt: skip
def test_topk_selection_equals_a_stable_sort_in_any_order_of_queries(values, rnd) -> None:
    values = np.array(values, dtype=np.float32)
    n = values.size
    order = np.argsort(-np.abs(values).astype(np.float64), kind="stable")
    sel = sparsify.TopkSelection(values)
    queries = list(range(n + 1))
    rnd.shuffle(queries)
    for k in queries:
        assert np.array_equal(sel.positions(k), np.sort(order[:k]))
        assert np.array_equal(sel.mask(k), np.isin(np.arange(n), order[:k]))
        if k:
            assert sel.last(k) == order[:k].max()
        k0 = rnd.randint(0, k)
        assert np.array_equal(np.sort(sel.ranked(k0, k)), np.sort(order[k0:k]))


def test_topk_selection_rejects_nan_and_k_out_of_range() -> None:
    with pytest.raises(sparsify.SparsifyError, match="NaN"):
        sparsify.TopkSelection(np.array([0.5, np.nan], dtype=np.float32))
    with pytest.raises(sparsify.SparsifyError, match="k=4"):
        sparsify.TopkSelection(np.ones(3, dtype=np.float32)).positions(4)
