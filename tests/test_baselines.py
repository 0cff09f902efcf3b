"""AnycostFL's compression baselines under the same budgets (STC, QSGD, FedHQ, UVeQFed; AnycostFL Sec. V-B):
charged costs meet T_max and E_max, the knob is the largest whose real encoded size fits, STC's error feedback is
exact, FedHQ weights are n_i / (1 + q_i) with q_i the measured relative error, the QSGD quantiser is unbiased,
and an STC run resumes bit-identically."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from edgefl.methods.base import DeviceJob
from edgefl.methods.base import ClientUpdate
from edgefl.methods.fedhq import QuantizedUpdate, fedhq_weights, relative_error, smallest_full_payload_bits
from edgefl.methods.qsgd import LEVELS
from edgefl.compression import fgc, ops, ternary
from edgefl.compression.coded import Coded
from edgefl.output.results import WALL_CLOCK_COLUMNS
from edgefl.run.runner import RunInterrupted, Simulation, run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART, SLOW_FLEET

RTOL = 1e-9  # floating-point slack on constraints that the plan makes tight
# digits + MLP(64, 32): the full model computes in 12-19 ms at the planned f; T_max = 20 ms and E_max ~ U[2, 6] mJ
# leave 8-70 kbit of upload, so the time or the energy budget binds every trained device
# SLOW_FLEET: these bounds bind only on slow CPUs; a phone computes this MLP in well under a millisecond
BINDING = [
    *SLOW_FLEET, "round.policy=deadline", "round.deadline_s=0.02", "fleet.budget.kind=uniform",
    "fleet.budget.low_j=0.002", "fleet.budget.high_j=0.006", "fleet.f_min_hz=1e7", "rounds=4", "model.hidden=[64, 32]",
]  # fmt: skip
SMALL = ["model.hidden=[16]", "rounds=1"]  # 1,210 parameters: cheap brute-force searches over the knob


@pytest.fixture(scope="module", params=["stc", "qsgd", "fedhq", "uveqfed"])
def run(request):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [f"method.name={request.param}", *BINDING])
    return sc, run_scenario(sc)


@pytest.mark.slow
def test_every_device_round_meets_t_max_and_e_max_in_charged_values(run):
    sc, res = run
    d = res.device_rounds
    t = d[d["trained"]]
    assert len(t) >= 0.5 * len(d[d["selected"]])
    t_max = sc.round.deadline_s - sc.round.downlink_s
    assert (t["t_cmp_s"] + t["t_com_s"] <= t_max * (1 + RTOL)).all()
    assert (t["e_cmp_j"] + t["e_com_j"] <= t["e_max_j"] * (1 + RTOL)).all()
    assert t["arrived"].all()
    assert (t["bits"] <= t["bits_planned"]).all() and (t["bits"] % 8 == 0).all()
    np.testing.assert_allclose(t["t_cmp_s"], t["t_cmp_planned_s"], rtol=1e-9)  # the full model, as planned
    # the budgets bind: at the planned frequency, the time or the energy constraint is tight (up to the bit
    # the planned budget lost by flooring: 1e-4 relative)
    tight_t = np.isclose(t["t_cmp_planned_s"] + t["t_com_planned_s"], t_max, rtol=1e-4)
    tight_e = np.isclose(t["e_cmp_planned_j"] + t["e_com_planned_j"], t["e_max_j"], rtol=1e-4)
    assert (tight_t | tight_e).all()
    skipped = d[d["selected"] & ~d["trained"]]
    assert (skipped["reason"].str.len() > 0).all()


def _one_update(method: str, budget_bits: float):
    """A planned job of device 0 in round 1 with ``budget_bits``, the method's update, and the raw trained update."""
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [f"method.name={method}", *SMALL])
    sim = Simulation(sc)
    job = DeviceJob(device=0, cpu_hz=1e9, bits_planned=budget_bits)
    m = sim.method
    upd = m.client_update(m.train_job(job, state=sim.state.model, round_index=1), trainer=sim.workload)
    raw = sim.workload.train(0, sim.state.model, round_index=1).update  # same batches stream: the same update
    return sim, upd, raw


def _largest(sizes: list[int], budget: float) -> int:
    return max(x for x, s in sizes if s <= budget)


def test_stc_sparsity_is_the_largest_that_fits():
    budget = 1500.0
    _, upd, raw = _one_update("stc", budget)
    n = sum(v.numel() for v in raw.values())
    sizes = [(k, ternary.encode(raw, k).bits) for k in range(n + 1)]  # no residual yet in round 1
    best = _largest(sizes, budget)
    assert best < 400  # so the fit's tolerance, max(1, 0.5% of k), is one element: the largest exactly
    assert 0 < best < n and upd.payload.kept == best and upd.bits == dict(sizes)[best]


def _size(sim, raw, kept: int, levels: int) -> int:
    """Exact 0xA7 size of ``raw`` (element-wise), the rounding's uniforms from a fresh generator in the state the
    method's job stream had (device 0, round 1)."""
    gen = ops.job_generator(sim.workload.streams.numpy("quantization", 1, 0))
    return fgc.encode(raw, kept=kept, levels=levels, gen=gen, kernel_wise=False).bits


def test_qsgd_sparsity_is_the_largest_that_fits():
    """k fits and lies within the codec's tolerance (max(1, k / 200)) of the first k that does not."""
    budget = 1500.0
    sim, upd, raw = _one_update("qsgd", budget)
    n = sum(v.numel() for v in raw.values())
    sizes = [_size(sim, raw, k, LEVELS) for k in range(n + 1)]
    first_bad = next(k for k, s in enumerate(sizes) if s > budget)
    k = upd.payload.kept
    assert 0 < k < n and upd.bits == sizes[k] <= budget
    assert k >= first_bad - max(1, int(fgc.K_TOLERANCE * k))


def test_fedhq_levels_are_the_largest_that_fit():
    """Every element at an L that fits where L + 1 does not."""
    budget = 4 * 1210.0
    sim, upd, raw = _one_update("fedhq", budget)
    n = sum(v.numel() for v in raw.values())
    levels = upd.payload.levels
    assert 1 < levels < fgc.MAX_LEVELS and upd.bits == _size(sim, raw, n, levels) <= budget
    assert _size(sim, raw, n, levels + 1) > budget


def test_fedhq_floor_is_the_codecs_smallest_full_payload():
    """The planning floor is the real size of every element at L = 1 for an incompressible update: at least the
    sign bit and one level bit per parameter (Shannon: fair coins code to >= 1 bit each), at most that plus the
    header, mask, range and a Huffman table of up to 256 symbols (a fixed cost: 1% of 2 bits per parameter on
    a 1.66M-parameter layer, under 1 bit per parameter on the 1,210-parameter MLP). The real trained update at
    L = 1 fits it, so a job planned with the floor sends all its elements."""
    big = 1_663_370  # AnycostFL's FMNIST CNN
    assert 2 * big * (1 - 0.002) <= smallest_full_payload_bits({"w": (big,)}) <= 2 * big * 1.01
    sim, _, raw = _one_update("fedhq", 0.0)
    n = sum(v.numel() for v in raw.values())
    floor = sim.method.min_payload_bits()
    assert 2 * n * (1 - 0.03) <= floor <= 3 * n  # 3% slack below: the fair-coin sample's entropy is random
    assert _size(sim, raw, n, 1) <= floor
    _, upd, _ = _one_update("fedhq", floor)
    assert upd.payload.levels >= 1 and n < upd.bits <= floor


@pytest.mark.slow
def test_fedhq_no_arrived_update_is_header_only():
    """Under binding budgets (1.25-6.5 bits per parameter planned), every trained FedHQ device sends every
    element (more than 1 bit per parameter: the sign bits alone are n); devices whose budget is below the
    codec's floor sit out with a reason instead of training and sending a header. With the old 1-bit floor
    one of these 17 jobs sent 0.06 bits per parameter."""
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["method.name=fedhq", *BINDING])
    sim = Simulation(sc)
    n = sim.workload.update_bits // 32
    floor = sim.method.min_payload_bits()
    d = run_scenario(sc).device_rounds
    t = d[d["trained"] & d["arrived"]]
    assert len(t) >= 10 and (t["bits"] > n).all() and (t["bits_planned"] >= floor).all()
    low = d[d["selected"] & ~d["trained"]]
    assert low["reason"].str.contains("below the smallest useful payload").any()


def test_stc_error_feedback_residual_plus_sent_is_the_accumulated_update():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["method.name=stc", *SMALL])
    sim = Simulation(sc)
    m = sim.method
    job = DeviceJob(device=0, cpu_hz=1e9, bits_planned=3000.0)
    for r in (1, 2):  # round 2 starts from the round-1 residual
        raw = sim.workload.train(0, sim.state.model, round_index=r).update
        acc = m.accumulate(raw, m.residual.get(0))  # update + previous residual, before the method updates it
        upd = m.client_update(m.train_job(job, state=sim.state.model, round_index=r), trainer=sim.workload)
        m.remember([upd])  # the device keeps what it did not send
        res = m.residual[0]
        sent = upd.payload.coded.dense()
        for name in acc:
            total = res[name] + sent[name].to(torch.float64)
            assert torch.equal(total, acc[name].to(torch.float64)), name
        assert any(bool((res[n] != 0).any()) for n in res)  # something was held back


def test_fedhq_weights_by_hand():
    # equal data, q = 0.25 and 1.0: 1/(1+q) = 0.8 and 0.5, so p = 0.8/1.3 and 0.5/1.3
    np.testing.assert_allclose(fedhq_weights([50, 50], [0.25, 1.0]), [0.8 / 1.3, 0.5 / 1.3], rtol=1e-12)
    # n = 100 and 300, q = 0 and 3: n/(1+q) = 100 and 75, so p = 4/7 and 3/7 (the coarse device, with 3x the
    # data, still gets less than half: neither term alone decides)
    np.testing.assert_allclose(fedhq_weights([100, 300], [0.0, 3.0]), [4 / 7, 3 / 7], rtol=1e-12)
    # u = (3, 4), Q(u) = (4, 4): ||Q(u) - u||^2 / ||u||^2 = 1 / 25
    assert relative_error(np.array([4.0, 4.0]), np.array([3.0, 4.0])) == pytest.approx(0.04, rel=1e-12)
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0


def test_fedhq_sends_its_measured_error_and_the_server_weights_by_it():
    budget = 4 * 1210.0
    sim, upd, raw = _one_update("fedhq", budget)
    u = torch.cat([v.reshape(-1).double() for v in raw.values()])
    qu = torch.cat([upd.payload.update[k].reshape(-1).double() for k in raw])
    q = float(((qu - u) ** 2).sum() / (u**2).sum())
    assert 0 < q and upd.payload.rel_error == pytest.approx(q, rel=1e-6)  # float32 payload vs float64 sums
    # two hand-made payloads on a one-tensor state: w = 1 + p1 * 2 + p2 * (-1), p = (10/1.5, 30/4) normalised
    g = {"w": torch.ones(2, dtype=torch.float64)}

    def made(n, q, value):
        coded = Coded(positions=torch.arange(2), values=torch.full((2,), value), names=("w",), shapes=((2,),),
                      bits=8, kept=2, codec=fgc.CODEC)  # fmt: skip
        payload = QuantizedUpdate(coded, 3, q)
        return ClientUpdate(device=0, payload=payload, weight=n, bits=8.0, flops=0.0, steps=1, train_loss=0.0)

    skipped = ClientUpdate(device=2, payload=QuantizedUpdate({"w": torch.zeros(2)}, 0, None), weight=99.0, bits=8.0,
                            flops=0.0, steps=1, train_loss=0.0)
    out = sim.method.aggregate(g, updates=[made(10.0, 0.5, 2.0), made(30.0, 3.0, -1.0), skipped])
    a, b = 10 / 1.5, 30 / 4
    expected = 1 + (a * 2.0 + b * -1.0) / (a + b)
    np.testing.assert_allclose(out["w"].numpy(), [expected, expected], rtol=1e-7)  # float32 payload values


def test_qsgd_quantiser_is_unbiased():
    g = torch.Generator().manual_seed(3)
    u = {"w": torch.randn(40, generator=g)}
    draws = 4000
    gen = torch.Generator().manual_seed(11)
    out = np.stack([fgc.encode(u, kept=40, levels=LEVELS, gen=gen, kernel_wise=False).values.numpy()
                    for _ in range(draws)]).astype(np.float64)  # fmt: skip
    x = u["w"].numpy().astype(np.float64)
    se = out.std(axis=0, ddof=1) / np.sqrt(draws)
    err = out.mean(axis=0) - x
    on_grid = se == 0  # the smallest and largest magnitudes are quantisation points: no noise
    assert np.all(np.abs(err[on_grid]) <= 1e-6)
    total_se = out.sum(axis=1).std(ddof=1) / np.sqrt(draws)
    assert abs(out.sum(axis=1).mean() - x.sum()) <= 3 * total_se  # the whole update, 3 standard errors
    # every element within 4.5 SE (40 tests: looser than 3), plus the float32 rounding of the decoded points
    assert (np.abs(err[~on_grid]) <= 4.5 * se[~on_grid] + 1e-6 * np.abs(x[~on_grid])).all()


def _csv(df: pd.DataFrame) -> str:
    return df.drop(columns=[c for c in WALL_CLOCK_COLUMNS if c in df.columns]).to_csv(index=False)


@pytest.mark.slow
def test_stc_resume_is_identical(tmp_path):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["method.name=stc", *BINDING, "rounds=5", "checkpoint_every=2"])
    full = run_scenario(sc)
    trained = full.device_rounds.groupby("device")["trained"].sum()
    assert (trained >= 2).any()  # some device carries a residual across the interruption

    def stop(row: dict) -> None:
        if row["round"] == 3:
            raise KeyboardInterrupt

    ckpt = tmp_path / "checkpoint"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, checkpoint_dir=ckpt, progress=stop)
    resumed = run_scenario(sc, checkpoint_dir=ckpt, resume=True)
    assert _csv(resumed.rounds) == _csv(full.rounds)
    assert _csv(resumed.device_rounds) == _csv(full.device_rounds)
