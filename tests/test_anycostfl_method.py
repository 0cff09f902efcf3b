"""AnycostFL with real training: planned vs charged costs, the real encoded bits, and eq. (5) aggregation."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from edgefl.methods.anycostfl import SparseUpdate, all_in_one, all_in_one_coded, plain_average
from edgefl.run.runner import Simulation, run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART, SLOW_FLEET

RTOL = 1e-9  # floating-point slack on constraints that the plan makes tight


@pytest.fixture(scope="module")
def run():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [
        *SLOW_FLEET,  # budgets must bind: slow CPUs, not phones
        "method.name=anycostfl", "round.policy=deadline", "round.deadline_s=0.01", "fleet.budget.kind=uniform",
        "fleet.budget.low_j=0.001", "fleet.budget.high_j=0.004", "fleet.f_min_hz=1e7", "rounds=6",
        "model.hidden=[64, 32]",
    ])  # fmt: skip
    return sc, run_scenario(sc)


@pytest.mark.slow
def test_every_device_round_meets_t_max_and_e_max_in_charged_values(run):
    sc, res = run
    d = res.device_rounds
    t = d[d["trained"]]
    assert len(t) >= 0.5 * len(d), "scenario should let most devices train"
    assert (t["t_cmp_s"] + t["t_com_s"] <= (sc.round.deadline_s - sc.round.downlink_s) * (1 + RTOL)).all()
    assert (t["e_cmp_j"] + t["e_com_j"] <= t["e_max_j"] * (1 + RTOL)).all()
    assert t["arrived"].all()
    # the simulator charged the real encoded size, never more than planned, and the budget was used
    assert (t["bits"] <= t["bits_planned"]).all() and (t["bits"] % 8 == 0).all()
    assert (t["bits"] >= 0.5 * t["bits_planned"]).mean() > 0.9
    # planned compute is the measured FLOPs of the submodel that trained
    np.testing.assert_allclose(t["t_cmp_s"], t["t_cmp_planned_s"], rtol=1e-9)
    assert (t["alpha"] >= sc.method.anycostfl.alpha_min * (1 - 1e-12)).all() and (t["beta"] <= sc.method.anycostfl.beta_max + 1e-12).all()


@pytest.mark.slow
def test_compressed_shrunk_updates_still_learn(run):
    _, res = run
    acc = res.rounds["test_accuracy"].to_numpy()
    assert acc[-1] > acc[0] and acc[-1] > 0.15  # 10 classes: chance is 0.1


def test_all_in_one_aggregation_by_hand():
    w = {"a": torch.zeros(3, 2), "b": torch.zeros(3)}
    # client 1: submodel 2x2 / 2, client 2: 3x2 / 3; masks mark what each sent
    u1 = {"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([1.0, 1.0])}
    m1 = {"a": torch.tensor([[True, False], [True, True]]), "b": torch.tensor([True, False])}
    u2 = {"a": torch.tensor([[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]]), "b": torch.tensor([2.0, 2.0, 0.0])}
    m2 = {"a": torch.tensor([[True, True], [False, True], [False, False]]), "b": torch.tensor([True, True, False])}
    p = [0.25, 0.75]
    out = all_in_one(w, [u1, u2], [m1, m2], p)
    expect_a = torch.tensor([
        [(0.25 * 1 + 0.75 * 5) / 1.0, 6.0],  # both sent [0,0]; only client 2 sent [0,1]
        [3.0, (0.25 * 4 + 0.75 * 8) / 1.0],  # only client 1 sent [1,0]; both [1,1]
        [0.0, 0.0],  # nobody sent row 2: u~ = 0, the global value stays
    ])  # fmt: skip
    expect_b = torch.tensor([(0.25 * 1 + 0.75 * 2) / 1.0, 2.0, 0.0])
    torch.testing.assert_close(out["a"], expect_a)
    torch.testing.assert_close(out["b"], expect_b)


def test_all_in_one_from_the_symbols_equals_the_dense_form_bit_for_bit():
    """Clients of several widths (leading slices of every tensor, some along a trailing dimension), coded by FGC at
    several kept counts and levels (nothing kept, some kernels, everything), with weights that do not sum to 1:
    eq. (5) from the symbols equals eq. (5) over the dense updates and masks, element for element."""
    from edgefl.compression import fgc

    g = torch.Generator().manual_seed(4)
    state = {"conv": torch.randn(8, 4, 3, 3, generator=g), "bias": torch.randn(8, generator=g),
             "fc": torch.randn(10, 32, generator=g), "cube": torch.randn(4, 5, 6, generator=g)}  # fmt: skip
    coded, weights = [], []
    for i, (out_ch, in_ch, kept, levels) in enumerate(
        [(8, 4, 40, 7), (5, 3, 0, 3), (5, 3, 9, 255), (8, 4, 10**6, 1), (3, 2, 4, 15), (8, 4, 1, 2)]
    ):
        sub = {"conv": torch.randn(out_ch, in_ch, 3, 3, generator=g) * 10.0 ** (i - 3),
               "bias": torch.randn(out_ch, generator=g), "fc": torch.randn(10, 4 * out_ch, generator=g),
               # sliced along its rows, its columns and (whatever else) its last dimension: every way positions map
               "cube": torch.randn(4 - i % 2, 5 - 3 * (i % 3 == 1), 6 - 2 * (i >= 3), generator=g)}  # fmt: skip
        sub["fc"][0, :3] = 0.0
        n_k = fgc._layout(tuple(tuple(v.shape) for v in sub.values()), True).n_kernels
        coded.append(fgc.encode(sub, kept=min(kept, n_k), levels=levels, gen=torch.Generator().manual_seed(i)))
        weights.append(0.1 + 0.37 * i)
    dense = all_in_one(state, [c.dense() for c in coded], [c.sent() for c in coded], weights)
    sparse = all_in_one_coded(state, coded, weights)
    assert list(sparse) == list(dense)
    for name in state:
        assert torch.equal(sparse[name].view(torch.int32), dense[name].view(torch.int32)), name
    assert not torch.equal(sparse["conv"], state["conv"])  # the clients moved it


# ---------------------------------------------------------------------------------------------- ablations (Fig. 5a)
# digits + MLP(64, 32) (6,570 parameters, 210 kbit uncompressed): T_max = 30 ms and E_max ~ U[3, 8] mJ bind
# SLOW_FLEET: these bounds bind only on slow CPUs; a phone computes this MLP in well under a millisecond
ABLATION_BASE = [
    *SLOW_FLEET, "method.name=anycostfl", "round.policy=deadline", "round.deadline_s=0.03", "fleet.budget.kind=uniform",
    "fleet.budget.low_j=0.003", "fleet.budget.high_j=0.008", "fleet.f_min_hz=1e7", "rounds=2",
    "model.hidden=[64, 32]",
]  # fmt: skip


def test_method_aggregate_sorts_the_global_channels_and_weights_by_eq13():
    """``AnycostFL.aggregate`` by hand on MLP 64-3-10: the server sorts the hidden units by the L2 norm of their
    weights (Sec. III-B 1)) and fuses the updates with eq. (5) under eq. (13)'s weights. A full-width update
    (alpha = 1, beta = 1/4) and a width-2/3 one overlap on the first two sorted units, where the weights decide.
    Equal weights, or an unsorted global model, give other values."""
    sim = Simulation(load_scenario("quickstart", PAPER_QUICKSTART + [*ABLATION_BASE, "model.hidden=[3]"]))
    m = sim.method
    g = {  # unit norms 2 x 8 = 16, 1 x 8 = 8, 3 x 8 = 24: sorted order (2, 0, 1)
        "net.0.weight": torch.tensor([2.0, 1.0, 3.0])[:, None].expand(3, 64).clone(),
        "net.0.bias": torch.tensor([0.1, 0.2, 0.3]),
        "net.2.weight": torch.tensor([1.0, 2.0, 3.0])[None, :].expand(10, 3).clone(),
        "net.2.bias": torch.zeros(10),
    }
    assert {k: tuple(v.shape) for k, v in g.items()} == {k: tuple(v.shape) for k, v in sim.state.model.items()}
    full = {k: torch.ones_like(v) for k, v in g.items()}  # device 1: every element 1.0
    sub_shapes = {"net.0.weight": (2, 64), "net.0.bias": (2,), "net.2.weight": (10, 2), "net.2.bias": (10,)}
    sub = {k: torch.full(s, 3.0) for k, s in sub_shapes.items()}  # device 2: 2 of 3 units (alpha = 4/9), 3.0
    # eq. (13): d_i = 1 - alpha_i (2 - alpha_i) sqrt(beta_i): d_1 = 1 - 1 x 1 x 1/2 = 1/2,
    # d_2 = 1 - (4/9)(14/9) x 1 = 25/81; p_i = d_i^-2 / sum: (4, 6561/625) / (4 + 10.4976)
    q1, q2 = 4.0, (81 / 25) ** 2
    p1, p2 = q1 / (q1 + q2), q2 / (q1 + q2)
    both = p1 * 1.0 + p2 * 3.0  # p1 + p2 = 1; equal weights would give 2.0
    ups = [SimpleNamespace(device=i, payload=SparseUpdate(None, a, b, dense=u))  # every element sent
           for i, (u, a, b) in enumerate(zip((full, sub), (1.0, 4 / 9), (0.25, 1.0)))]  # fmt: skip
    out = m.aggregate(g, updates=ups)
    rows = torch.tensor([3.0 + both, 2.0 + both, 1.0 + 1.0])  # sorted units (2, 0, 1); unit 1 only device 1 has
    torch.testing.assert_close(out["net.0.weight"], rows[:, None].expand(3, 64), rtol=1e-6, atol=0)
    torch.testing.assert_close(out["net.0.bias"], torch.tensor([0.3 + both, 0.1 + both, 0.2 + 1.0]), rtol=1e-6, atol=0)
    cols = torch.tensor([3.0 + both, 1.0 + both, 2.0 + 1.0])  # the next layer's inputs follow the same order
    torch.testing.assert_close(out["net.2.weight"], cols[None, :].expand(10, 3), rtol=1e-6, atol=0)
    torch.testing.assert_close(out["net.2.bias"], torch.full((10,), both), rtol=1e-6, atol=0)
    assert abs(both - 2.0) > 0.2  # the weights are far from equal: 1.7448 against 2.0


def _ablation(name: str, *extra: str):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*ABLATION_BASE, f'method.anycostfl.ablation="{name}"', *extra])
    sim = Simulation(sc)
    for r in (1, 2):
        sim.step(r)
    d = sim.result().device_rounds
    return sc, sim, d, d[d["trained"]]


@pytest.mark.slow
def test_without_ems_the_full_model_trains_with_the_largest_beta_the_budgets_leave():
    # beta_max = 1 so that T_max or E_max, not the cap, sets beta
    sc, sim, d, t = _ablation("no_ems", "method.anycostfl.beta_max=1.0")
    s_bits = sim.workload.update_bits
    assert len(t) >= 8 and (t["alpha"] == 1.0).all() and (t["width"] == 1.0).all()
    np.testing.assert_allclose(t["beta"], t["bits_planned"] / s_bits, rtol=1e-12)
    assert (t["beta"] < 1).all() and (t["bits"] <= t["bits_planned"]).all()
    # the largest beta: at the planned frequency the time or the energy budget is tight (1 bit lost to flooring)
    t_max = sc.round.deadline_s - sc.round.downlink_s
    tight_t = np.isclose(t["t_cmp_planned_s"] + t["t_com_planned_s"], t_max, rtol=1e-4)
    tight_e = np.isclose(t["e_cmp_planned_j"] + t["e_com_planned_j"], t["e_max_j"], rtol=1e-4)
    assert (tight_t | tight_e).all()
    # with the paper's beta_max = 1/15 the cap holds
    _, _, _, capped = _ablation("no_ems")
    assert len(capped) >= 8 and (capped["beta"] <= 1 / 15 + 1e-12).all() and (capped["alpha"] == 1.0).all()


@pytest.mark.slow
def test_without_fgc_the_widest_uncompressed_submodel_that_fits_trains():
    sc, sim, d, t = _ablation("no_fgc")
    assert len(t) >= 8 and (t["beta"] == 1.0).all() and (t["width"] < 1).all()  # the budgets shrink every job
    # uncompressed float32 update of the submodel: h1 = ceil(64 w), h2 = ceil(32 w) hidden units of 64-h1-h2-10
    h1, h2 = np.ceil(64 * t["width"] - 1e-9), np.ceil(32 * t["width"] - 1e-9)
    dense = 32 * (64 * h1 + h1 + h1 * h2 + h2 + 10 * h2 + 10)
    np.testing.assert_array_equal(t["bits"], dense)
    np.testing.assert_array_equal(t["bits_planned"], dense)
    # the next wider grid width (64 widths from sqrt(alpha_min) = 0.5 to 1) breaks T_max or E_max, by eqs. (6)-(9)
    fl, wl = sim.fleet, sim.workload
    t_max = sc.round.deadline_s - sc.round.downlink_s
    for _, row in t.iterrows():
        dev, w = int(row["device"]), row["width"] + 0.5 / 63
        rate = row["bits_planned"] / row["t_com_planned_s"]
        u1, u2 = np.ceil(64 * w - 1e-9), np.ceil(32 * w - 1e-9)
        t_com = 32 * (64 * u1 + u1 + u1 * u2 + u2 + 10 * u2 + 10) / rate
        cycles = wl.flops_per_sample(w) * wl.samples_per_round(np.array([dev]))[0] / fl.flops_per_cycle[dev]
        f = max(cycles / (t_max - t_com), fl.f_min_hz[dev]) if t_max > t_com else np.inf
        energy = fl.energy_coeff[dev] * f**2 * cycles + fl.tx_power_w[dev] * t_com
        fits = f <= fl.f_max_hz[dev] and energy <= row["e_max_j"]
        assert not fits, (dev, row["width"])


def test_without_aio_updates_are_averaged_zero_padded_with_the_eq13_weights():
    w = {"a": torch.zeros(3, 2)}
    u1 = {"a": torch.tensor([[1.0, 2.0], [3.0, 4.0]])}  # a 2x2 submodel
    u2 = {"a": torch.tensor([[5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])}  # the full 3x2 model
    out = plain_average(w, [u1, u2], [0.25, 0.75])
    expect = torch.tensor([
        [0.25 * 1 + 0.75 * 5, 0.25 * 2 + 0.75 * 6],
        [0.25 * 3 + 0.75 * 7, 0.25 * 4 + 0.75 * 8],
        [0.75 * 9, 0.75 * 10],  # row 2: client 1 counts as a 0, not left out as in eq. (5)
    ])  # fmt: skip
    torch.testing.assert_close(out["a"], expect)
    # the method uses it: alpha = (1, 1/4), beta = (1/4, 1/4): d_i = 1 - alpha_i (2 - alpha_i) sqrt(beta_i)
    # = (1/2, 1 - 7/32) = (16/32, 25/32); eq. (13): p_i = d_i^-2 / sum_k d_k^-2 = (4, 1.6384) / 5.6384
    sim = Simulation(load_scenario("quickstart", PAPER_QUICKSTART + [*ABLATION_BASE, 'method.anycostfl.ablation="no_aio"']))
    m, g = sim.method, sim.state.model
    base = m._sorted(g)
    ups = [{k: torch.full_like(v, 1.0) for k, v in base.items()}, {k: torch.full_like(v, 3.0) for k, v in base.items()}]
    mk = [SimpleNamespace(device=i, payload=SparseUpdate(None, a, 0.25, dense=u))  # every element sent
          for i, (u, a) in enumerate(zip(ups, (1.0, 0.25)))]  # fmt: skip
    q1, q2 = (32 / 16) ** 2, (32 / 25) ** 2
    p1 = q1 / (q1 + q2)
    got = m.aggregate(g, updates=mk)
    for k in base:
        torch.testing.assert_close(got[k], base[k] + p1 * 1.0 + (1 - p1) * 3.0)
