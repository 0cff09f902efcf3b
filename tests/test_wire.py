"""Encoded updates cross process boundaries as their payloads (:func:`edgefl.compression.container.on_wire`).

An executor's worker hands the driver each job's result by pickle; a compressed update then carries its payload
(hundreds of kB) instead of the dense float32 update (6.6 MB for the FMNIST CNN), and the driver decodes it. For
the tables to stay the same under every executor, each codec's public decoder must give back exactly what its
encoder handed over: the same float32 bits (signed zeros and all) and the same mask. Each case here encodes a
random update with exact zeros of both signs, pickles it, and compares bit patterns; and checks that what travels
is the payload, not the tensors (the pickle is smaller than one dense tensor of the update).
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from edgefl.methods.budgeted import CodedUpdate
from edgefl.methods.stc import Residual
from edgefl.compression import codec, ternary
from edgefl.compression.codec import TopkQuantSizer, compress, encode_fixed
from edgefl.compression.container import DECODERS, CodecError, Wire, WireTensors, on_wire

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
    sizer = TopkQuantSizer(update, np.random.default_rng(seed))
    return {
        "anycostfl compress": (compress(update, budget_bits=0.3 * 32 * N, rng=np.random.default_rng(seed)), ()),
        "anycostfl fixed": (encode_fixed(update, kept_kernels=40, levels=5, rng=np.random.default_rng(seed)), ()),
        "qsgd/fedhq top-k": (sizer.encode(N // 3, 7), ()),
        "fedhq every element": (sizer.encode(N, 31), ()),
        "empty": (encode_fixed(update, kept_kernels=0, levels=1, rng=np.random.default_rng(seed)), ()),
    }  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", ["anycostfl compress", "anycostfl fixed", "qsgd/fedhq top-k", "fedhq every element",
                                  "empty"])  # fmt: skip
def test_a_pickled_update_decodes_to_the_encoders_bits_and_carries_only_the_payload(case, seed):
    encoded, args = _encodings(seed)[case]
    wired = on_wire(encoded, *args)
    blob = pickle.dumps(wired, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(blob)
    assert isinstance(back.update, WireTensors) and back.update.wire is back.sent.wire  # decoded once for both
    assert list(back.update) == list(encoded.update)
    assert _bits(back.update) == _bits(encoded.update)  # float32 bit patterns: -0.0 is not +0.0 here
    assert _bits(back.sent) == _bits(encoded.sent)
    assert back.payload == encoded.payload
    assert len(blob) < len(encoded.payload) + 2048  # the payload and names, never a dense tensor:
    assert max(v.numel() for v in encoded.update.values()) * 4 > 2048  # the largest alone would break that bound


def test_a_residual_sends_its_accumulated_update_and_the_coded_update_once():
    acc = _update(4)
    coded = ternary.encode(acc, N // 10)
    held = Residual(acc, coded)
    blob = pickle.dumps((CodedUpdate(coded), held), protocol=pickle.HIGHEST_PROTOCOL)
    payload, back = pickle.loads(blob)
    assert back._coded is payload.coded  # one Coded for both, as on the device
    assert back == held  # float64 acc - sent, bit for bit
    coded_bytes = coded.positions.numel() * 4 + coded.values.numel() * 4
    assert len(blob) < N * 4 + coded_bytes + 4096  # acc once (float32) and the sent elements once


def test_the_decoders_table_names_each_containers_magic():
    assert DECODERS[codec._MAGIC] == ("edgefl.compression.codec", "decode_with_mask")


def test_on_wire_twice_is_the_same_object_and_an_unknown_payload_fails_in_one_line():
    encoded = on_wire(encode_fixed(_update(5), kept_kernels=10, levels=3, rng=np.random.default_rng(5)))
    assert on_wire(encoded) is encoded
    with pytest.raises(CodecError, match="no decoder for a payload starting with") as info:
        Wire(b"\x01\x02", ["a"]).decoded()
    assert "\n" not in str(info.value)
