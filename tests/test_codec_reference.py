"""The codecs' fast paths give the payloads of straightforward references written out here: bit-identical bytes on
fixed seeded updates for QSGD / FedHQ (element-wise top-k + levels) and AnycostFL's budgeted codec, and the same A2
lattice points and decoded symbols as the plain formulations (Huffman code lengths against a
heap merge: tests/test_compression.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import MAX_LEVELS, coding, compress, decode_with_mask, encode_fixed, lattice, sparsify
from edgefl.compression.search import TopkQuantSizer, largest_fitting
from edgefl.compression.uveqfed import _zigzag

SHAPES = {"conv1.weight": (6, 1, 5, 5), "conv1.bias": (6,), "conv2.weight": (8, 6, 3, 3), "fc.weight": (40, 72),
          "fc.bias": (40,)}  # fmt: skip


def _update(seed: int) -> dict[str, torch.Tensor]:
    """A seeded update with the ties a trained one can have: exact zeros and repeated magnitudes of both signs."""
    g = torch.Generator().manual_seed(seed)
    out = {k: torch.randn(s, generator=g) * torch.rand(s, generator=g) for k, s in SHAPES.items()}
    out["fc.weight"][:3] = 0.0
    out["fc.weight"][3, :10] = 0.25
    out["fc.weight"][4, :10] = -0.25
    return out


def _n() -> int:
    return sum(math.prod(s) for s in SHAPES.values())


# --- a bit-string writer, written out independently ----------------------------------


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


@pytest.mark.parametrize("seed", [0, 3])
def test_topk_quant_sizer_equals_the_fixed_encoder_in_any_order_of_calls(seed: int) -> None:
    """The sizer (lazy ranking, kept values held across levels) gives the bytes of ``encode_fixed`` (a full ranking
    and a fresh plan every call) for any sequence of (k, L), as QSGD's search over k and FedHQ's over L make them."""
    update, n = _update(seed), _n()
    sizer = TopkQuantSizer(update, np.random.default_rng(seed))
    for k, levels in [(n, 1), (n, 7), (n, 4095), (n, 2), (0, 1), (5, 7), (n // 2, 7), (n // 2, 3), (n, 3), (n - 1, 7)]:
        ref = encode_fixed(update, kept_kernels=k, levels=levels, rng=np.random.default_rng(seed), kernel_wise=False,
                           score="l2")  # fmt: skip
        assert sizer.encode(k, levels).payload == ref.payload
        assert sizer.bits(k, levels) == ref.bits
    budget = TopkQuantSizer(update, np.random.default_rng(seed)).bits(n, 5)
    levels = largest_fitting(lambda L: sizer.bits(n, L), 1, MAX_LEVELS, budget)
    ref_sizes = {L: encode_fixed(update, kept_kernels=n, levels=L, rng=np.random.default_rng(seed),
                                 kernel_wise=False, score="l2").bits for L in (levels, levels + 1)}  # fmt: skip
    assert ref_sizes[levels] <= budget < ref_sizes[levels + 1]


def test_compress_payloads_decode_to_the_update_and_stay_within_budget() -> None:
    """AnycostFL's codec over several budgets: the bytes decode (multi-block Huffman streams, the decoder's
    windows read from packed bytes) to exactly the update and mask it hands over, and the size is the bytes'."""
    update = _update(2)
    for fraction in (0.05, 0.2, 0.6):
        budget = fraction * 32 * _n()
        packed = compress(update, budget_bits=budget, rng=np.random.default_rng(5))
        assert packed.bits == 8 * len(packed.payload) <= budget
        out, sent = decode_with_mask(packed.payload, list(update))
        for name in update:
            assert torch.equal(out[name], packed.update[name]) and torch.equal(sent[name], packed.sent[name])


def test_huffman_decoder_reads_every_code_length_across_blocks() -> None:
    """Fibonacci counts over 17 symbols (the deepest Huffman tree: codes of 1 to 16 bits, the limit) shuffled over
    512-symbol blocks (about 9 of them): every code length at many bit offsets decodes back."""
    fib = [1, 1]
    while len(fib) < 17:
        fib.append(fib[-1] + fib[-2])
    symbols = np.random.default_rng(11).permutation(np.repeat(np.arange(17), fib))
    w = coding.BitWriter()
    coding.huffman_encode(w, symbols, 17)
    lengths = coding.huffman_lengths(np.bincount(symbols, minlength=17))
    assert lengths.max() == coding.MAX_CODE_BITS and lengths.min() == 1
    assert np.array_equal(coding.huffman_decode(coding.BitReader(w.to_bytes()), symbols.size), symbols)


def _reference_a2_nearest(x: np.ndarray, d: float) -> tuple[np.ndarray, np.ndarray]:
    """The closer of the two cosets' rounded points, each stacked as (m, 2) points (Conway & Sloane ch. 20)."""
    h = d * math.sqrt(3.0)
    p0 = np.stack([np.round(x[:, 0] / d) * d, np.round(x[:, 1] / h) * h], axis=-1)
    p1 = np.stack([(np.round(x[:, 0] / d - 0.5) + 0.5) * d, (np.round(x[:, 1] / h - 0.5) + 0.5) * h], axis=-1)
    p = np.where((((x - p0) ** 2).sum(axis=1) <= ((x - p1) ** 2).sum(axis=1))[:, None], p0, p1)
    b = np.round(p[:, 1] / (h / 2.0)).astype(np.int64)
    return np.round(p[:, 0] / d - 0.5 * b).astype(np.int64), b


def test_a2_nearest_equals_the_stacked_formulation_on_cell_borders() -> None:
    rng = np.random.default_rng(13)
    for d in (1e-3, 0.37, 1.0):
        x = rng.standard_normal((5000, 2)) * 3 * d
        x[:500] = np.round(x[:500] / d * 2) * d / 2  # half-lattice points: ties between the cosets
        a, b = lattice.a2_nearest(x, d)
        ra, rb = _reference_a2_nearest(x, d)
        assert np.array_equal(a, ra) and np.array_equal(b, rb)
    v = np.array([-3, -2, -1, 0, 1, 2, 3, -(2**40)])
    assert _zigzag(v).tolist() == np.where(v >= 0, 2 * v, -2 * v - 1).tolist()


def test_kernel_layouts_are_shared_and_read_only() -> None:
    layout = sparsify.kernel_layout(list(SHAPES.values()))
    assert sparsify.kernel_layout([list(s) for s in SHAPES.values()]) is layout
    assert layout.n_kernels == 6 + 6 + 8 * 6 + 40 * 72 + 40
    with pytest.raises(ValueError, match="read-only"):
        layout.size[0] = 2
