"""A short real run (real torch training, real SimPy events): every time and energy adds up by hand.

Model: multinomial logistic regression on digits (64 inputs, 10 classes). Training FLOPs per sample by hand:
forward addmm 2*64*10 + backward weight-gradient mm 2*64*10 (the input needs no gradient; bias gradient and
the loss are element-wise and not counted) = 4*64*10 = 2560. Update = 64*10 + 10 = 650 float32 = 20,800 bits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgefl.scenario.catalogue import catalogue
from edgefl.output.results import write_run
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART, SLOW_FLEET

REL = 1e-12  # float round-off only
FLOPS_PER_SAMPLE = 4 * 64 * 10
UPDATE_BITS = (64 * 10 + 10) * 32
# The design's first columns, in order (docs/outputs.md), written out here and not read from the constants that
# order the tables (ROUND_COLUMNS, DEVICE_COLUMNS): a change of the code's order fails test_columns_follow_design.
ROUNDS_CSV = ("round", "sim_time_s", "round_time_s", "energy_j", "energy_cum_j", "selected", "arrived", "dropped",
              "bits_up", "test_accuracy", "test_loss", "train_loss", "wall_time_s")  # fmt: skip
DEVICE_ROUNDS_CSV = ("round", "device", "selected", "trained", "feasible", "reason", "arrived", "distance_m",
                     "rate_bps", "cpu_hz", "width", "alpha", "beta", "local_steps", "t_cmp_s", "t_com_s", "e_cmp_j",
                     "e_com_j", "bits_planned", "bits", "t_max_s", "e_max_j")  # fmt: skip

pytestmark = pytest.mark.slow  # the module's fixture is a whole run


def hand_rate_bps(d_m: np.ndarray, b_hz: float = 1e6, p_w: float = 0.1) -> np.ndarray:
    pl_db = 128.1 + 37.6 * np.log10(d_m / 1000.0)
    g = 10 ** (-pl_db / 10)  # dB -> linear
    n0 = 10 ** ((-114 - 30) / 10) / 1e6  # dBm/MHz -> W/Hz
    return b_hz * np.log2(1 + g * p_w / (n0 * b_hz))


@pytest.fixture(scope="module")
def result():
    sc = load_scenario(
        "quickstart",
        PAPER_QUICKSTART + ["rounds=4", "model.name='logreg'", "fleet.n_devices=6", "method.clients_per_round=3",
         "train.local_epochs=2", "train.eval_every=2", "round.downlink_s=0.5"],
    )  # fmt: skip
    return run_scenario(sc)


def test_columns_follow_design(result, tmp_path):
    """The tables and the files written from them start with the design's columns, in its order."""
    assert tuple(result.rounds.columns[: len(ROUNDS_CSV)]) == ROUNDS_CSV
    assert tuple(result.device_rounds.columns[: len(DEVICE_ROUNDS_CSV)]) == DEVICE_ROUNDS_CSV
    out = write_run(result, tmp_path / "run", report=False)
    for name, first in (("rounds.csv", ROUNDS_CSV), ("device_rounds.csv", DEVICE_ROUNDS_CSV)):
        header = (out / name).read_text().splitlines()[0].split(",")
        assert tuple(header[: len(first)]) == first, name


def test_device_costs_match_hand_formulas(result):
    dr = result.device_rounds
    sc = result.scenario
    n_local = 1437 // 6  # 1437 training digits dealt to 6 devices: sizes 239 or 240
    samples = dr["flops"] / FLOPS_PER_SAMPLE / sc.train.local_epochs
    assert set(samples.round().astype(int)) <= {n_local, n_local + 1}
    # each device is a catalogue phone of the preset's mix: FedAvg's cpu_policy = "max" runs it at its f_max, and
    # t_cmp = cycles / f with cycles = FLOPs / its FLOPs per cycle, e_cmp = eps f^2 cycles with its eps
    phones = [catalogue()[name] for name in sc.fleet.profiles]
    fpc = dr["flops"] / (dr["t_cmp_s"] * dr["cpu_hz"])
    cycles = dr["flops"] / fpc
    eps = dr["e_cmp_j"] / (dr["cpu_hz"] ** 2 * cycles)
    for f, c, e in zip(dr["cpu_hz"], fpc, eps):
        assert any(math.isclose(f, p.f_max_hz, rel_tol=REL) and math.isclose(c, p.flops_per_cycle, rel_tol=1e-9)
                   and math.isclose(e, p.energy_coeff, rel_tol=1e-9) for p in phones), (f, c, e)  # fmt: skip
    np.testing.assert_allclose(dr["rate_bps"], hand_rate_bps(dr["distance_m"].to_numpy()), rtol=1e-9)
    assert (dr["bits"] == UPDATE_BITS).all()
    np.testing.assert_allclose(dr["t_com_s"], UPDATE_BITS / dr["rate_bps"], rtol=REL)
    np.testing.assert_allclose(dr["e_com_j"], 0.1 * dr["t_com_s"], rtol=1e-9)
    # planned equals charged for FedAvg: it plans with the same measured FLOPs and full-size update
    np.testing.assert_allclose(dr["t_cmp_planned_s"], dr["t_cmp_s"], rtol=REL)
    np.testing.assert_allclose(dr["bits_planned"], dr["bits"], rtol=0)


def test_timeline_adds_up(result):
    dr, rounds = result.device_rounds, result.rounds
    # absolute times: a round starts where the previous one ended, with the downlink first
    round_start = dr["round"].map(dict(zip(rounds["round"], rounds["sim_time_s"] - rounds["round_time_s"])))
    np.testing.assert_allclose(dr["t_down_s"], round_start, rtol=1e-12)
    np.testing.assert_allclose(dr["t_start_s"], round_start + 0.5, rtol=1e-12)
    np.testing.assert_allclose(dr["t_arrive_s"], round_start + 0.5 + dr["t_cmp_s"] + dr["t_com_s"], rtol=1e-12)
    np.testing.assert_array_equal(dr["t_end_s"], dr["t_arrive_s"])
    per_round = (dr["t_arrive_s"] - round_start).groupby(dr["round"]).max()  # wait_all: the straggler ends it
    np.testing.assert_allclose(rounds["round_time_s"], per_round.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(rounds["sim_time_s"], np.cumsum(rounds["round_time_s"]), rtol=1e-12)


def test_energy_adds_up_per_device_and_round(result):
    dr, rounds = result.device_rounds, result.rounds
    per_round = (dr["e_cmp_j"] + dr["e_com_j"]).groupby(dr["round"]).sum()
    np.testing.assert_allclose(rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(rounds["energy_cum_j"], np.cumsum(rounds["energy_j"]), rtol=1e-12)
    assert (rounds["bits_up"] == 3 * UPDATE_BITS).all()
    assert (rounds["selected"] == 3).all() and (rounds["arrived"] == 3).all()


def test_evaluation_schedule(result):
    acc = result.rounds["test_accuracy"]
    assert acc.isna().tolist() == [True, False, True, False]
    assert 0.0 <= acc.iloc[-1] <= 1.0


def test_same_seed_same_rounds_csv(tmp_path):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["rounds=3", "round.policy='deadline'", "round.deadline_s=0.03"])
    texts = []
    for i in range(2):
        res = run_scenario(sc)
        res.rounds["wall_time_s"] = 0.0
        out = write_run(res, tmp_path / f"r{i}", report=False)
        texts.append(((out / "rounds.csv").read_text(), (out / "device_rounds.csv").read_text()))
    assert texts[0] == texts[1]
    other = run_scenario(sc.model_copy(update={"seed": 1}))
    assert not np.array_equal(other.device_rounds["distance_m"], res.device_rounds["distance_m"])


def test_deadline_drops_and_still_charges(tmp_path):
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["rounds=2", "round.policy='deadline'", "round.deadline_s=0.02"])
    res = run_scenario(sc)
    dr = res.device_rounds
    late = dr[dr["trained"] & ~dr["arrived"]]
    assert len(late) > 0, "the deadline should drop someone in this set-up"
    start = dr["round"].map(dict(zip(res.rounds["round"], res.rounds["sim_time_s"] - res.rounds["round_time_s"])))
    arrive = dr["t_arrive_s"] - start  # from the round start
    assert (arrive[late.index] > 0.02).all() and (arrive[dr["arrived"]] <= 0.02).all()
    np.testing.assert_allclose(res.rounds["round_time_s"], 0.02, rtol=1e-12)
    per_round = (dr["e_cmp_j"] + dr["e_com_j"]).groupby(dr["round"]).sum()
    np.testing.assert_allclose(res.rounds["energy_j"], per_round.to_numpy(), rtol=1e-12)
    assert (res.rounds["dropped"] == res.rounds["selected"] - res.rounds["arrived"]).all()


def test_energy_budget_makes_devices_sit_out():
    # a 5 mJ budget binds only on slow, power-hungry CPUs; a phone runs the 5k-parameter MLP on far less
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [*SLOW_FLEET, "rounds=2", "fleet.budget.kind='fixed'",
                                      "fleet.budget.value_j=0.005"])  # fmt: skip
    res = run_scenario(sc)
    dr = res.device_rounds
    out = dr[~dr["feasible"]]
    assert len(out) > 0 and out["reason"].str.startswith("energy").all()
    ran = dr[dr["trained"]]
    assert ((ran["e_cmp_j"] + ran["e_com_j"]) <= 0.005 * (1 + 1e-12)).all()
    assert not math.isnan(res.rounds["test_accuracy"].iloc[-1])


def test_over_select_keeps_first_k_and_charges_all():
    # K = 3 with 30% over-selection: ceil(3 * 1.3) = 4 devices start, the first 3 arrivals count
    sc = load_scenario("quickstart", PAPER_QUICKSTART + ["rounds=2", "round.policy='over_select'", "method.clients_per_round=3"])
    res = run_scenario(sc)
    dr, rounds = res.device_rounds, res.rounds
    assert (rounds["selected"] == 4).all() and (rounds["arrived"] == 3).all() and (rounds["dropped"] == 1).all()
    for r, g in dr.groupby("round"):
        kept = g[g["arrived"]]["t_arrive_s"]
        late = g[~g["arrived"]]["t_arrive_s"]
        assert late.min() >= kept.max()  # the dropped one is the last to arrive
        assert rounds.set_index("round").loc[r, "sim_time_s"] == pytest.approx(kept.max(), rel=1e-12)  # absolute


def test_synthetic_logreg_runs_and_learns():
    sc = load_scenario(
        "quickstart",
        PAPER_QUICKSTART + ["data.dataset='synthetic'", "model.name='logreg'", "rounds=8", "train.lr=0.05", "train.eval_every=1"],
    )
    res = run_scenario(sc)
    acc = res.rounds["test_accuracy"]
    assert acc.iloc[-1] > acc.iloc[0]
