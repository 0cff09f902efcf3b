"""Encoded updates cross process boundaries as their codec's symbols (:class:`edgefl.compression.coded.Coded`).

An executor's worker hands the driver each job's result by pickle; a compressed update then carries its symbols:
the sent positions (nothing when every element is sent, else int32 indices) and
the values as sign bits with their level index where the codec has a table of magnitudes (FGC's L + 1 points,
STC's mu), float32 otherwise (UVeQFed). For the tables to stay the same under every executor, what arrives must be
exactly what the device made: the same float32 bits (signed zeros and all) at the same positions. Each case here
encodes a random update with exact zeros of both signs, pickles it, and compares bit patterns; and checks that
the pickle's size is that of the symbols, counted by hand.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from edgefl.methods.budgeted import CodedUpdate
from edgefl.methods.stc import Residual
from edgefl.compression import fgc, ops, ternary, vq
from edgefl.compression.coded import scatter_add
SHAPES = {"conv.weight": (8, 3, 3, 3), "conv.bias": (8,), "fc.weight": (10, 720), "fc.bias": (10,)}
N = sum(int(np.prod(s)) for s in SHAPES.values())


def _update(seed: int) -> dict[str, torch.Tensor]:
    """Random float32 tensors, a tenth of their elements exactly +0.0 and a tenth -0.0."""
    gen = np.random.default_rng(seed)
    out = {}
    for name, shape in SHAPES.items():
        v = gen.normal(0, 0.02, size=shape).astype(np.float32)
        pick = gen.random(shape)
        v[pick < 0.1] = 0.0
        v[(pick >= 0.1) & (pick < 0.2)] = -0.0
        out[name] = torch.from_numpy(v)
    return out


def _bits(tensors) -> dict[str, bytes]:
    return {k: v.contiguous().numpy().tobytes() for k, v in tensors.items()}


def _encodings(seed: int):
    update = _update(seed)
    gen = lambda: ops.job_generator(np.random.default_rng(seed))  # noqa: E731
    return {
        "anycostfl fit": fgc.fit(update, 0.3 * 32 * N, gen()),
        "anycostfl fixed": fgc.encode(update, kept=40, levels=5, gen=gen()),
        "qsgd top-k": fgc.encode(update, kept=N // 3, levels=7, gen=gen(), kernel_wise=False),
        "fedhq every element": fgc.encode(update, kept=N, levels=31, gen=gen(), kernel_wise=False),
        "fedhq at L = 4095": fgc.encode(update, kept=N, levels=fgc.MAX_LEVELS, gen=gen(), kernel_wise=False),
        "all-zero update": fgc.encode({k: v * 0 for k, v in update.items()}, kept=N, levels=3, gen=gen(),
                                      kernel_wise=False),  # fmt: skip
        "empty": fgc.encode(update, kept=0, levels=1, gen=gen()),
        "stc": ternary.encode(update, N // 10),
        "stc one element": ternary.encode(update, 1),
        "stc every element": ternary.encode(update, N),
        "uveqfed": vq.encode(update, N // 20, step=1.0, seed=seed),
        "uveqfed every sub-vector": vq.encode(update, N // 2, step=1.0, seed=seed),
    }


CASES = ["anycostfl fit", "anycostfl fixed", "qsgd top-k", "fedhq every element", "fedhq at L = 4095",
         "all-zero update", "empty", "stc", "stc one element", "stc every element", "uveqfed",
         "uveqfed every sub-vector"]  # fmt: skip
PICKLE_OVERHEAD = 2048
"""Bytes of a pickled update beside its arrays: names, shapes, meta's scalars, the pickle's own opcodes."""


def _symbol_bytes(coded) -> int:
    """The bytes the symbols take, by hand: positions nothing (all sent) or 4 k (int32); values k / 8 sign bits
    plus the level index's bytes (FGC) or nothing (STC) and the table's float32 magnitudes, else 4 k (float32)."""
    k = coded.positions.numel()
    where = 0 if k == N else 4 * k
    if coded.table is None:
        return where + 4 * k
    indices = coded.meta.get("indices")
    index = 0 if indices is None else indices.numel() * indices.element_size()
    return where + -(-k // 8) + index + 4 * coded.table.numel()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", CASES)
def test_a_pickled_update_carries_the_same_bits_and_only_the_symbols(case, seed):
    coded = _encodings(seed)[case]
    blob = pickle.dumps(CodedUpdate(coded), protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(blob).coded
    assert torch.equal(back.positions, coded.positions) and back.bits == coded.bits and back.kept == coded.kept
    assert back.values.numpy().tobytes() == coded.values.numpy().tobytes()  # float32 bit patterns: -0.0 too
    assert _bits(back.dense()) == _bits(coded.dense())
    assert back.positions.dtype == coded.positions.dtype and back.meta.keys() == coded.meta.keys()
    symbols = _symbol_bytes(coded)
    assert symbols <= len(blob) <= symbols + PICKLE_OVERHEAD
    again = pickle.loads(pickle.dumps(CodedUpdate(back), protocol=pickle.HIGHEST_PROTOCOL)).coded
    assert torch.equal(again.positions, coded.positions) and again.values.numpy().tobytes() == coded.values.numpy().tobytes()


def test_a_residual_sends_its_accumulated_update_and_the_coded_update_once():
    acc = _update(4)
    coded = ternary.encode(acc, N // 10)
    held = Residual(acc, coded)
    blob = pickle.dumps((CodedUpdate(coded), held), protocol=pickle.HIGHEST_PROTOCOL)
    payload, back = pickle.loads(blob)
    assert back._coded is payload.coded  # one Coded for both, as on the device
    assert back == held  # float64 acc - sent, bit for bit
    assert len(blob) <= N * 4 + _symbol_bytes(coded) + 2 * PICKLE_OVERHEAD  # acc once (float32), the symbols once


def test_updates_that_send_every_element_share_one_read_only_positions_tensor():
    """FGC, STC and UVeQFed updates that send every element (and their rebuilt copies) hold one shared 0..n-1
    instead of a new 6.6 MB arange each; that is sound only because nothing writes a Coded's positions, which the
    aggregation (scatter_add, dense) here checks by leaving it intact."""
    encodings = [_encodings(seed)[case] for seed in (0, 1)
                 for case in ("fedhq every element", "stc every element", "uveqfed every sub-vector")]  # fmt: skip
    rebuilt = [pickle.loads(pickle.dumps(CodedUpdate(c), protocol=pickle.HIGHEST_PROTOCOL)).coded for c in encodings]
    shared = encodings[0].positions
    assert torch.equal(shared, torch.arange(N, dtype=torch.int32))
    for coded in encodings + rebuilt:
        assert coded.positions.data_ptr() == shared.data_ptr()
        total = torch.zeros(N, dtype=torch.float64)
        scatter_add(total, coded, 0.5)
        assert torch.equal(total, coded.values.to(torch.float64) * 0.5)
        coded.dense()
    assert torch.equal(shared, torch.arange(N, dtype=torch.int32))
