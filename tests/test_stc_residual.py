"""STC's error-feedback residual held as the accumulated update and what was sent from it (:class:`Residual`): the
float64 residual it gives (residual + sent == accumulated), and the next job's accumulated update it adds up
without float64 arrays, are the ones the float64 arithmetic gives, bit for bit."""

from __future__ import annotations

import numpy as np
import torch

from edgefl.compression import ternary
from edgefl.compression.coded import Coded
from edgefl.methods.stc import STC, Residual


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
        coded = ternary.encode(acc, k)
        sent = coded.dense()
        res = Residual(acc, coded)
        plain = _float64_residual(acc, sent)
        assert _bits_equal(dict(res), plain) and res == plain
        for name in acc:  # residual + sent == accumulated, element for element
            assert torch.equal((res[name] + sent[name].double()).float(), acc[name])
            assert torch.equal(res[name] + sent[name].double(), acc[name].double())
        for scale in (1.0, 1e-6, 1e6):
            update = _states(rng, scale)
            update["a.weight"][0, :2] = torch.tensor([-0.0, -0.0])
            assert _bits_equal(STC.accumulate(update, res), _float64_accumulate(update, plain)), (k, scale)


def test_a_residual_whose_mu_is_zero_adds_its_signed_zeros_as_float64_does():
    acc = {"w": torch.tensor([-0.0, -0.0, 0.0, 1e-45, 3.0], dtype=torch.float32)}
    sent = {"w": torch.tensor([-0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float32)}  # -0.0: a kept negative, mu = 0
    update = {"w": torch.tensor([-0.0, -0.0, -0.0, -1e-45, -3.0], dtype=torch.float32)}
    coded = Coded(positions=torch.tensor([0], dtype=torch.int32), values=torch.tensor([-0.0]), names=("w",),
                  shapes=((5,),), bits=0, kept=1, codec=ternary.CODEC)  # fmt: skip
    res = Residual(acc, coded)
    want = _float64_accumulate(update, _float64_residual(acc, sent))
    assert _bits_equal(STC.accumulate(update, res), want)
    assert not _bits_equal(want, {"w": update["w"] + acc["w"]})  # the -0.0 sent is why sent elements go by float64
