"""UVeQFed (Shlezinger et al., IEEE TSP 2021): subtractive-dithered A2 lattice quantisation after top-k, entropy
coded, under the baselines' budgets.

Reference values by hand: A2 (the hexagonal lattice) of minimum distance d has a basic cell of area
V = sqrt(3)/2 d^2 and normalised second moment G = 5 / (36 sqrt(3)) (Conway & Sloane, Table 2.3); with subtractive
dither the error is uniform over the cell, so E||e||^2 / L = G V^(2/L) = 5 d^2 / 72 at L = 2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgefl.methods.base import DeviceJob
from edgefl.compression import ops, vq
from edgefl.errors import ScenarioError
from edgefl.run.runner import Simulation, run_scenario
from edgefl.run.load import load_scenario

SE_BOUND = 3.0  # standard errors allowed between a sample mean and its expected value
G_A2 = 5 / (36 * math.sqrt(3))  # normalised second moment of A2
SMALL = ["method.name=uveqfed", "model.hidden=[16]", "rounds=1"]  # 1,210 parameters, 605 sub-vectors


def _cell_mse_per_dim(d: float) -> float:
    """G V^(2/L) at L = 2: G times the hexagon's area sqrt(3)/2 d^2 (= 5 d^2 / 72)."""
    return G_A2 * (math.sqrt(3) / 2 * d**2)


def _decode_error(update: dict[str, torch.Tensor], seed: int, step: float) -> tuple[np.ndarray, float]:
    """Per-sub-vector error of encoding every sub-vector (the values the server adds, which the payload decodes to:
    tests/test_vq.py), shape (m, 2), and the lattice's minimum distance the payload carries."""
    n = sum(v.numel() for v in update.values())
    coded = vq.encode(update, (n + 1) // 2, step=step, seed=seed)
    assert coded.positions.numel() == n
    x = np.concatenate([v.reshape(-1).numpy() for v in update.values()]).astype(np.float64)
    y = coded.dense()
    y = np.concatenate([y[k].reshape(-1).numpy() for k in update]).astype(np.float64)
    return (y - x).reshape(-1, 2), coded.meta["d"]


def test_a2_nearest_point_beats_every_neighbour():
    d = 0.37
    x = torch.from_numpy(np.random.default_rng(0).normal(scale=4.0, size=(5000, 2)))
    a, b = ops.a2_nearest(x[:, 0], x[:, 1], d)
    best = ((x - torch.stack(ops.a2_points(a, b, d), 1)) ** 2).sum(1)
    for da in (-1, 0, 1):
        for db in (-1, 0, 1):
            other = ((x - torch.stack(ops.a2_points(a + da, b + db, d), 1)) ** 2).sum(1)
            assert bool((best <= other + 1e-12).all()), (da, db)


def test_decode_error_matches_the_a2_second_moment():
    """E||e||^2 / 2 over 100,000 sub-vectors of a heavy-tailed update equals G V within 3 standard errors; the
    error never leaves the hexagon (circumradius d / sqrt(3))."""
    g = torch.Generator().manual_seed(1)
    u = {"w": torch.randn(200_000, generator=g) * torch.rand(200_000, generator=g) ** 2}
    step = 0.8
    err, d = _decode_error(u, seed=7, step=step)
    rms = math.sqrt(float(np.mean(u["w"].numpy().astype(np.float64) ** 2)))
    assert d == pytest.approx(step * rms, rel=1e-6)  # E1's scale: step times the update's RMS (float32)
    per_dim = (err**2).sum(axis=1) / 2
    expected = _cell_mse_per_dim(d)
    se = per_dim.std(ddof=1) / math.sqrt(per_dim.size)
    assert abs(per_dim.mean() - expected) <= SE_BOUND * se, (per_dim.mean(), expected, se)
    assert np.sqrt((err**2).sum(axis=1)).max() <= d / math.sqrt(3) * (1 + 1e-5)


def test_decode_error_is_independent_of_the_input():
    """A constant update (every sub-vector (c, c), where a quantiser without dither makes the same error every
    time) decodes with zero-mean error of the cell's second moment; on a random update the error does not
    correlate with the input. Each within 3 standard errors."""
    c, m = 0.3, 50_000
    err, d = _decode_error({"w": torch.full((2 * m,), c)}, seed=3, step=1.0)
    assert d == pytest.approx(c, rel=1e-6)
    for axis in (0, 1):
        se = err[:, axis].std(ddof=1) / math.sqrt(m)
        assert abs(err[:, axis].mean()) <= SE_BOUND * se, (axis, err[:, axis].mean(), se)
    per_dim = (err**2).sum(axis=1) / 2
    se = per_dim.std(ddof=1) / math.sqrt(m)
    assert abs(per_dim.mean() - _cell_mse_per_dim(d)) <= SE_BOUND * se

    x = torch.randn(2 * m, generator=torch.Generator().manual_seed(4))
    err, _ = _decode_error({"w": x}, seed=5, step=1.0)
    prod = err.reshape(-1) * x.numpy().astype(np.float64)
    assert abs(prod.mean()) <= SE_BOUND * prod.std(ddof=1) / math.sqrt(prod.size)  # E[e x] = 0


def _sizes(sim, raw, round_index: int, device: int) -> np.ndarray:
    seed, step = sim.method.dither_seed(round_index, device), sim.method.settings.step
    m = (sum(v.numel() for v in raw.values()) + 1) // 2
    return np.array([vq.encode(raw, k, step=step, seed=seed).bits for k in range(m + 1)])


@pytest.fixture(scope="module")
def small():
    sim = Simulation(load_scenario("quickstart", SMALL))
    raw = sim.workload.train(0, sim.state.model, round_index=1).update  # the update client_update trains
    return sim, raw, _sizes(sim, raw, 1, 0)


def _update(sim, job):
    """The method's update of ``job`` in round 1 from the initial model (its device side on the run's trainer)."""
    m = sim.method
    return m.client_update(m.train_job(job, state=sim.state.model, round_index=1), trainer=sim.workload)


@pytest.mark.parametrize("budget", [600.0, 1200.0, 2000.0, 3000.0])  # every sub-vector: 3,704 bits
def test_encoded_size_fits_the_budget_and_k_is_the_largest_that_does(small, budget):
    sim, raw, sizes = small
    upd = _update(sim, DeviceJob(device=0, cpu_hz=1e9, bits_planned=budget))
    k = upd.payload.kept
    step = max(1, int(vq.TOLERANCE * k))  # the fit's stated tolerance (1 below 400 sub-vectors)
    assert upd.bits <= budget and upd.bits % 8 == 0 and upd.bits == sizes[k]
    assert 0 < k < sizes.size - 1 and (sizes[k + 1 : k + step + 1] > budget).any()  # some k' <= k + step does not
    assert k >= np.flatnonzero(sizes <= budget).max() - step  # no larger k fits beyond the tolerance
    assert upd.bits == 8 * len(sim.method.wire_bytes(upd))


def test_a_budget_above_the_full_payload_keeps_every_sub_vector(small):
    sim, _, sizes = small
    upd = _update(sim, DeviceJob(device=0, cpu_hz=1e9, bits_planned=9000.0))
    assert upd.payload.kept == sizes.size - 1 == 605 and upd.bits == sizes[-1] <= 9000


def test_decoding_with_the_shared_seed_gives_what_the_server_applies(small):
    sim, raw, _ = small
    upd = _update(sim, DeviceJob(device=0, cpu_hz=1e9, bits_planned=4000.0))
    names, payload, coded = list(raw), sim.method.wire_bytes(upd), upd.payload.coded
    decoded = vq.from_bytes(payload, names, seed=sim.method.dither_seed(1, 0))
    assert torch.equal(decoded.positions, coded.positions) and torch.equal(decoded.values, coded.values)
    assert decoded.positions.numel() == 2 * upd.payload.kept  # no odd tail: 1,210 elements
    wrong = vq.from_bytes(payload, names, seed=sim.method.dither_seed(2, 0)).dense()
    sent, applied = coded.sent(), coded.dense()
    err = sum(float(((applied[n] - raw[n])[sent[n]] ** 2).sum()) for n in names)
    err_wrong = sum(float(((wrong[n] - raw[n])[sent[n]] ** 2).sum()) for n in names)
    assert err_wrong > 1.5 * err  # another round's dither: the error of two independent cells, not one


@pytest.mark.slow
def test_quickstart_under_a_deadline_and_a_budget_charges_what_it_planned():
    sets = ["method.name=uveqfed", "round.policy=deadline", "round.deadline_s=2.0", "fleet.budget.kind=uniform",
            "fleet.budget.low_j=0.002", "fleet.budget.high_j=0.02", "rounds=2", "checkpoint_every=0",
            "fleet.n_devices=12", "method.clients_per_round=6", "model.hidden=[16]"]  # fmt: skip
    d = run_scenario(load_scenario("quickstart", sets)).device_rounds
    jobs = d[d["feasible"]]
    assert len(jobs) > 0 and (jobs["bits"] > 0).all()
    np.testing.assert_allclose(jobs["t_cmp_s"], jobs["t_cmp_planned_s"], rtol=1e-9, atol=0)
    np.testing.assert_allclose(jobs["e_cmp_j"], jobs["e_cmp_planned_j"], rtol=1e-9, atol=0)
    for charged, planned in (("t_com_s", "t_com_planned_s"), ("e_com_j", "e_com_planned_j"), ("bits", "bits_planned")):
        assert (jobs[charged] <= jobs[planned] * (1 + 1e-12)).all(), charged


def test_step_must_be_positive():
    with pytest.raises(ScenarioError, match=r"method.uveqfed.step") as info:
        load_scenario("quickstart", [*SMALL, "method.uveqfed.step=0"])
    assert "\n" not in str(info.value)
