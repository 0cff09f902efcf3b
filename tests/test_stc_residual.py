"""STC's error-feedback residual held as the two float32 states it is the difference of (:class:`Residual`): the
float64 residual it gives, and the next job's accumulated update it adds up without float64 arrays, are the ones
the float64 arithmetic gives, bit for bit."""

from __future__ import annotations

import numpy as np
import torch

from edgefl.methods.stc import STC, Residual
from edgefl.compression.stc import TernarySizer


def _wide_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 values of every magnitude: random bit patterns (subnormals, zeros of both signs, infinities, NaN)
    mixed with values of nearby exponents (where additions round)."""
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 8, n)).astype(np.float32)
    out = np.where(rng.random(n) < 0.5, bits, near)
    out[:4] = [0.0, -0.0, np.float32(1e-45), -np.float32(1e-45)]
    return out


def test_float32_sum_is_the_float64_sum_rounded_to_float32():
    """The fact :meth:`Residual.added_to` rests on (53 >= 2 * 24 + 2 bits): for any two float32 values."""
    rng = np.random.default_rng(0)
    a, b = _wide_floats(rng, 1 << 20), _wide_floats(rng, 1 << 20)
    with np.errstate(all="ignore"):
        direct = np.add(a, b, dtype=np.float32)
        twice = np.add(a, b, dtype=np.float64).astype(np.float32)
    nan = np.isnan(direct)
    assert np.array_equal(nan, np.isnan(twice))
    assert np.array_equal(direct.view(np.uint32)[~nan], twice.view(np.uint32)[~nan])


def _states(rng: np.random.Generator, scale: float = 1.0) -> dict[str, torch.Tensor]:
    return {
        "a.weight": torch.from_numpy((rng.standard_normal((40, 30)) * scale).astype(np.float32)),
        "a.bias": torch.from_numpy((rng.standard_normal(40) * scale * 1e-3).astype(np.float32)),
    }


def _float64_residual(acc, sent):
    return {n: torch.from_numpy(np.subtract(acc[n].numpy(), sent[n].numpy(), dtype=np.float64)) for n in acc}


def _float64_accumulate(update, residual):
    return {n: torch.from_numpy(np.add(update[n].numpy(), residual[n].numpy(), dtype=np.float64).astype(np.float32))
            for n in update}  # fmt: skip


def _bits_equal(a, b) -> bool:
    return a.keys() == b.keys() and all(
        a[n].dtype == b[n].dtype and np.array_equal(a[n].numpy().view(np.uint8), b[n].numpy().view(np.uint8))
        for n in a
    )


def test_residual_and_the_next_accumulated_update_are_the_float64_ones():
    rng = np.random.default_rng(1)
    n = 40 * 30 + 40
    for k in (0, 1, 7, n // 3, n - 1, n):
        acc = _states(rng)
        acc["a.weight"][0, :3] = torch.tensor([-0.0, 0.0, -0.0])  # signed zeros kept and not kept
        sent = TernarySizer(acc).encode(k).update
        res = Residual(acc, sent)
        plain = _float64_residual(acc, sent)
        assert _bits_equal(dict(res), plain) and res == plain
        for scale in (1.0, 1e-6, 1e6):
            update = _states(rng, scale)
            update["a.weight"][0, :2] = torch.tensor([-0.0, -0.0])
            assert _bits_equal(STC.accumulate(update, res), _float64_accumulate(update, plain)), (k, scale)


def test_a_residual_whose_mu_is_zero_adds_its_signed_zeros_as_float64_does():
    acc = {"w": torch.tensor([-0.0, -0.0, 0.0, 1e-45, 3.0], dtype=torch.float32)}
    sent = {"w": torch.tensor([-0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float32)}  # -0.0: a kept negative, mu = 0
    update = {"w": torch.tensor([-0.0, -0.0, -0.0, -1e-45, -3.0], dtype=torch.float32)}
    res = Residual(acc, sent)
    want = _float64_accumulate(update, _float64_residual(acc, sent))
    assert _bits_equal(STC.accumulate(update, res), want)
    assert not _bits_equal(want, {"w": update["w"] + acc["w"]})  # the -0.0 sent is why sent elements go by float64


def test_ternary_in_place_is_quantize_ternary():
    from edgefl.compression import quantize
    from edgefl.compression.stc import _ternary_of_copy

    rng = np.random.default_rng(2)
    for n in (0, 1, 5, 1000, 100_003):
        values = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
        values[: min(n, 2)] = -0.0
        want_negative, want_mu = quantize.ternary(values)
        negative, mu = _ternary_of_copy(values.copy())
        assert np.array_equal(negative, want_negative) and np.float32(mu).tobytes() == np.float32(want_mu).tobytes()


def test_keeping_every_element_gives_quantize_ternarys_update_and_payload():
    """encode(n) takes the magnitudes into the update's own array and writes the update there: the same mu,
    payload and tensors as quantize.ternary and _encoded_tensors of every element give."""
    from edgefl.compression import coding, quantize
    from edgefl.compression.container import write_header
    from edgefl.compression.stc import _encoded_tensors, _pack, decode_ternary

    rng = np.random.default_rng(3)
    for scale in (1.0, 1e-30, 1e30):
        acc = _states(rng, scale)
        acc["a.weight"][0, :3] = torch.tensor([-0.0, 0.0, -0.0])
        sizer = TernarySizer(acc)
        coded = sizer.encode(sizer.n)
        negative, mu = quantize.ternary(sizer.flat)
        update, sent = _encoded_tensors(sizer.flat, None, negative, mu, sizer.names, sizer.shapes)
        assert _bits_equal(coded.update, update) and _bits_equal(coded.sent, sent)
        head = coding.BitWriter()
        write_header(head, 0xB7, 1, sizer.shapes, sizer.n, None)
        assert coded.payload == _pack(head, sizer.n, 0, None, mu, negative)
        decoded, decoded_sent = decode_ternary(coded.payload, sizer.names)
        assert _bits_equal(decoded, update) and _bits_equal(decoded_sent, sent)


def test_an_encoding_that_consumes_the_sizer_is_the_same_and_leaves_the_input_alone():
    """encode(k, consume=True) writes the update over the sizer's flat copy: the same payload and tensors as a
    plain encode, the caller's update untouched, and the sizer refuses any later call."""
    import pytest

    from edgefl.compression.container import CodecError

    rng = np.random.default_rng(4)
    acc = _states(rng)
    acc["a.weight"][0, :3] = torch.tensor([-0.0, 0.0, -0.0])
    before = {k: v.clone() for k, v in acc.items()}
    n = TernarySizer(acc).n
    for k in (0, 1, 9, n // 3, 2 * n // 3, n - 1, n):
        want = TernarySizer(acc).encode(k)
        sizer = TernarySizer(acc)
        sizer.bits(k)
        got = sizer.encode(k, consume=True)
        assert got.payload == want.payload, k
        assert _bits_equal(got.update, want.update) and _bits_equal(got.sent, want.sent), k
        assert _bits_equal(acc, before)
        with pytest.raises(CodecError):
            sizer.bits(k)
