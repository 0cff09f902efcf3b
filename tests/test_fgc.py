"""0xA7 v2 (AnycostFL's FGC, QSGD, FedHQ: :mod:`edgefl.compression.fgc`) against its oracle and by hand.

- The charged size equals the oracle writer's bits (``8 * len(to_bytes(c))``) and the oracle reader gives back
  the same positions and float32 values bit for bit, at every setting's edges and on edge updates.
- One payload's size and values worked out by hand from ``docs/wire_formats.md``.
- The rounding is unbiased (mean of many draws within 5 standard errors of the input).
- The budget searches: the size fits, and k is within the stated tolerance of the first k that does not fit
  (a brute scan of every k); FedHQ's L fits and L + 1 does not.
- A setting sized from a larger one's histogram (the budget search's nested probes) equals the setting built whole.
- A real trained update (the paper's CNN, a few steps on Fashion-MNIST).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.compression import fgc, wire

SHAPES = {"conv": (4, 3, 3, 3), "w": (10, 7), "b": (5,)}


def _update(seed: int, scale: float = 1.0, shapes=SHAPES) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {k: torch.randn(s, generator=g) * scale for k, s in shapes.items()}
    out["w"][0, :3] = 0.0  # exact zeros and a tie of both signs, as a trained update has
    out["w"][1, :2] = torch.tensor([0.5, -0.5]) * scale
    return out


def _gen(seed: int = 7) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _kernels(update, kernel_wise: bool) -> int:
    return fgc._layout(tuple(tuple(v.shape) for v in update.values()), kernel_wise).n_kernels


def _assert_oracle(c) -> None:
    payload = fgc.to_bytes(c)
    assert 8 * len(payload) == c.bits
    d = fgc.from_bytes(payload, c.names)
    assert torch.equal(d.positions.long(), c.positions.long())
    assert torch.equal(d.values.view(torch.int32), c.values.view(torch.int32))  # bit-exact, -0.0 included
    assert (d.kept, d.shapes, d.bits) == (c.kept, c.shapes, c.bits)


@pytest.mark.parametrize("kernel_wise", [True, False])
@pytest.mark.parametrize("levels", [1, 2, 3, 15, 16, 255, 256, 4095])
def test_sizes_equal_the_oracle_and_it_reads_back_every_setting_edge(kernel_wise, levels):
    update = _update(1)
    n_k = _kernels(update, kernel_wise)
    for k in sorted({0, 1, 2, n_k // 2, n_k // 2 + 1, n_k - 1, n_k}):  # nothing, one, both mask modes, everything
        _assert_oracle(fgc.encode(update, kept=k, levels=levels, gen=_gen(), kernel_wise=kernel_wise))


@pytest.mark.parametrize("case", ["zeros", "tiny", "huge", "one_element", "constant", "one_tensor_conv"])
def test_edge_updates_round_trip(case):
    update = {
        "zeros": {k: torch.zeros(s) for k, s in SHAPES.items()},
        "tiny": _update(2, 1e-30),
        "huge": _update(3, 1e30),
        "one_element": {"x": torch.tensor([-2.5])},
        "constant": {k: torch.full(s, -0.25) for k, s in SHAPES.items()},
        "one_tensor_conv": {"c": torch.randn(2, 2, 1, 3, generator=_gen(4))},
    }[case]
    for kernel_wise in (True, False):
        n_k = _kernels(update, kernel_wise)
        for k in sorted({0, 1, n_k}):
            for levels in (1, 7, 4095):
                c = fgc.encode(update, kept=k, levels=levels, gen=_gen(), kernel_wise=kernel_wise)
                _assert_oracle(c)
                assert torch.isfinite(c.values).all()
        for budget in (400, 2000, 10**6):  # the searches on the same edge updates
            try:
                c = fgc.fit(update, budget, _gen(), kernel_wise=kernel_wise)
                assert c.bits <= budget
                _assert_oracle(c)
                c = fgc.fit_levels(update, budget, _gen())
                assert c.bits <= budget
                _assert_oracle(c)
            except fgc.BudgetError:
                assert budget < 2000  # only the smallest budgets may be below a header or every element at L = 1


def test_one_payload_by_hand():
    # w = [-3, -1, 0.5, 2], element-wise, k = 2, L = 1: elements 0 and 3 kept, lo = 2, hi = 3, so x = |v| - 2 is 1
    # and 0 and the levels are 1 and 0 whatever the draw. Fields (docs/wire_formats.md): header 8 + 4 + 1 + 8 +
    # (4 + 32) + 32 = 89; mode 1; Rice gaps [0, 2] at b = 0: 6 + (0 + 2) + 2 = 10; u_min, u_max, L, j: 84;
    # 2 sign bits; j = 8, one symbol 1 + 0 * 2 = 1 used once: 32 + 32 + 32 = 96. 282 bits -> 36 bytes.
    c = fgc.encode({"w": torch.tensor([-3.0, -1.0, 0.5, 2.0])}, kept=2, levels=1, gen=_gen(), kernel_wise=False)
    assert c.bits == 8 * math.ceil(282 / 8) == 288
    assert c.positions.tolist() == [0, 3] and c.values.tolist() == [-3.0, 2.0]
    _assert_oracle(c)


def test_kernel_wise_keeps_whole_kernels_by_rms():
    # conv kernels of 4: RMS 1.0 and 0.5; the linear weights are single kernels 0.9 and 0.1
    update = {"conv": torch.tensor([1.0, -1.0, 1.0, -1.0, 0.5, 0.5, -0.5, 0.5]).reshape(2, 1, 2, 2),
              "w": torch.tensor([[0.9, -0.1]])}  # fmt: skip
    c = fgc.encode(update, kept=2, levels=4095, gen=_gen())
    assert c.positions.tolist() == [0, 1, 2, 3, 8]
    c = fgc.encode(update, kept=3, levels=4095, gen=_gen())
    assert c.positions.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_rounding_is_unbiased():
    update = {"w": torch.tensor([0.0, 0.1, 0.37, -0.52, 0.75, -0.999, 1.0])}
    draws = 4000
    total = torch.zeros(7, dtype=torch.float64)
    for seed in range(draws):
        c = fgc.encode(update, kept=7, levels=3, gen=_gen(seed), kernel_wise=False)
        total += c.values.to(torch.float64)
    width = 1.0 / 3  # lo = 0, hi = 1, L = 3: a value moves by at most one width, so its std is at most width / 2
    assert torch.allclose(total / draws, update["w"].to(torch.float64), atol=5 * width / 2 / math.sqrt(draws))


def _sizes(update, levels, kernel_wise):
    return [fgc.encode(update, kept=k, levels=levels, gen=_gen(), kernel_wise=kernel_wise).bits
            for k in range(_kernels(update, kernel_wise) + 1)]  # fmt: skip


@pytest.mark.slow  # 20-27 s each against every k's exact size: the fast tier's longest
@pytest.mark.parametrize("kernel_wise,grid", [(True, fgc.LEVEL_GRID), (False, (7,))])
def test_fit_is_within_the_tolerance_of_the_first_k_that_does_not_fit(kernel_wise, grid):
    update = _update(5, shapes={"conv": (8, 4, 3, 3), "w": (40, 12), "b": (12,)})
    for budget in (400, 900, 2000, 4000, 8000, 30000):
        c = fgc.fit(update, budget, _gen(), levels_grid=grid, kernel_wise=kernel_wise)
        assert c.bits <= budget
        _assert_oracle(c)
        sizes = _sizes(update, c.meta["levels"], kernel_wise)
        assert sizes[c.kept] == c.bits
        failing = [k for k, s in enumerate(sizes) if s > budget]
        if failing:
            assert c.kept >= failing[0] - max(1, int(fgc.K_TOLERANCE * c.kept))
        else:
            assert c.kept == len(sizes) - 1


@pytest.mark.parametrize("kernel_wise", [True, False])
def test_a_setting_sized_from_a_larger_one_equals_the_setting_built_whole(kernel_wise):
    """Element-wise, the dropped elements hold the kept range's low end, so every setting is built whole."""
    update = _update(8, shapes={"conv": (8, 4, 3, 3), "w": (40, 12), "b": (12,)})
    n_k = _kernels(update, kernel_wise)
    u = fgc._Update(update, _gen(), kernel_wise)
    u.setting(n_k // 2, 127)  # whole: the smaller k below are sized from its histogram where they can be
    nested = 0
    for k in range(n_k // 2 - 1, 0, -1):
        s = u.setting(k, 127)
        nested += s.cut is not None
        c, whole = u.coded(s), fgc.encode(update, kept=k, levels=127, gen=_gen(), kernel_wise=kernel_wise)
        assert c.bits == whole.bits
        assert torch.equal(c.positions, whole.positions)
        assert torch.equal(c.values.view(torch.int32), whole.values.view(torch.int32))
        _assert_oracle(c)
    assert nested > n_k // 4 if kernel_wise else nested == 0  # the difference path is the one tested


def test_fit_levels_keeps_every_element_at_an_l_that_fits_where_the_next_does_not():
    update = _update(6, shapes={"conv": (8, 4, 3, 3), "w": (40, 12)})
    n = sum(v.numel() for v in update.values())
    for budget in (2100, 2600, 3500, 5000, 100000):
        c = fgc.fit_levels(update, budget, _gen())
        levels = c.meta["levels"]
        assert c.kept == n and c.bits <= budget
        size = lambda L: fgc.encode(update, kept=n, levels=L, gen=_gen(), kernel_wise=False).bits  # noqa: E731
        assert size(levels) == c.bits
        assert levels == fgc.MAX_LEVELS or size(levels + 1) > budget


def test_budget_below_the_header_is_refused_in_one_line():
    update = _update(1)
    with pytest.raises(fgc.BudgetError, match=r"budget_bits=100: below the \d+-bit header"):
        fgc.fit(update, 100, _gen())
    with pytest.raises(fgc.BudgetError, match=r"budget_bits=500: every element at L = 1 takes \d+ bits"):
        fgc.fit_levels(update, 500, _gen())
    with pytest.raises(fgc.FGCError, match=r"levels=0: must be in \[1, 4095\]"):
        fgc.encode(update, kept=1, levels=0, gen=_gen())


def test_another_codec_payload_is_refused():
    payload = bytearray(fgc.to_bytes(fgc.encode(_update(1), kept=3, levels=3, gen=_gen())))
    payload[0] = 0xB7
    with pytest.raises(wire.WireError, match="magic 0xb7"):
        fgc.from_bytes(bytes(payload), list(SHAPES))


@pytest.fixture(scope="module")
def trained_update() -> dict[str, torch.Tensor]:
    """The paper's CNN after 5 SGD steps (batch 10, lr 0.05) on Fashion-MNIST: its update."""
    from edgefl.learning.datasets import load_fashion_mnist
    from edgefl.learning.models import build_model

    try:
        ds = load_fashion_mnist()
    except Exception as e:  # noqa: BLE001 - the data set is a system package; say why the test cannot run
        pytest.skip(f"Fashion-MNIST not found: {e}")
    torch.manual_seed(0)
    model = build_model("cnn_mcmahan")
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.as_tensor(ds.x_train[:50]), torch.as_tensor(ds.y_train[:50]).long()
    for i in range(0, 50, 10):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i : i + 10]), y[i : i + 10]).backward()
        opt.step()
    return {k: v.detach() - start[k] for k, v in model.state_dict().items()}


def test_a_real_trained_update_round_trips(trained_update):
    n_k = _kernels(trained_update, True)
    for k, levels in ((n_k // 100, 3), (n_k // 200, 255)):
        _assert_oracle(fgc.encode(trained_update, kept=k, levels=levels, gen=_gen()))
    c = fgc.fit(trained_update, 150_000, _gen())
    assert c.bits <= 150_000
    _assert_oracle(c)
    c = fgc.fit(trained_update, 150_000, _gen(), levels_grid=(7,), kernel_wise=False)
    assert c.bits <= 150_000
    _assert_oracle(c)
