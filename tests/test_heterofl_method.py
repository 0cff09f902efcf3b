"""HeteroFL as a method in the simulator: level assignment, charged FLOPs and bits of each submodel, nested
aggregation in a real round, masked output rows, static BN at evaluation. Expected values are computed here."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from edgefl.methods import RoundContext
from edgefl.methods.heterofl import HeteroFL
from edgefl.errors import ScenarioError
from edgefl.learning.config import scheduled_lr
from edgefl.run.runner import Simulation, make_workload, run_scenario
from edgefl.run.load import load_scenario
from fleets import PAPER_QUICKSTART
from edgefl.seeding import Streams

BASE = ["method.name=heterofl", "fleet.n_devices=12", "method.clients_per_round=6", "rounds=3",
        "train.local_epochs=1", "train.batch_size=16"]  # fmt: skip


def _sc(*extra: str):
    return load_scenario("quickstart", PAPER_QUICKSTART + BASE + list(extra))


@pytest.mark.slow
def test_each_level_charges_its_own_submodel_bits_and_flops():
    sc = _sc('method.heterofl.levels=["a","c","e"]', "method.heterofl.assignment=dynamic")
    d = run_scenario(sc).device_rounds
    # MLP 64-h-10 at width w keeps h' = ceil(w * 64) hidden units: params = 64 h' + h' + 10 h' + 10
    for w, h in ((1.0, 64), (0.25, 16), (0.0625, 4)):
        rows = d[d["width"] == w]
        assert len(rows) > 0, f"level width {w} never drawn"
        params = 64 * h + h + 10 * h + 10
        assert (rows["bits"] == 32 * params).all()
        assert (rows["bits_planned"] == 32 * params).all()
    small = d[d["width"] == 0.0625]["flops"].mean()
    large = d[d["width"] == 1.0]["flops"].mean()
    assert small < large / 8  # measured FLOPs of the submodel that trained, not of the global model


@pytest.mark.slow
def test_fix_assignment_keeps_a_device_at_one_level():
    sc = _sc('method.heterofl.levels=["a","e"]', "method.heterofl.assignment=fix", "rounds=6")
    d = run_scenario(sc).device_rounds
    assert (d.groupby("device")["width"].nunique() == 1).all()


def test_dynamic_assignment_follows_proportions():
    sc = _sc('method.heterofl.levels=["a","e"]', "method.heterofl.proportions=[1.0, 3.0]",
             "method.heterofl.assignment=dynamic", "fleet.n_devices=40", "method.clients_per_round=40", "model.name=logreg", "rounds=1")  # fmt: skip
    sim = Simulation(sc)
    picks = []
    for r in range(1, 401):  # plans only: levels drawn per round and device
        ctx = RoundContext(round_index=r, selected=np.arange(40), costs=sim.costs, rate_bps=np.full(40, 1e7),
                           e_max_j=np.full(40, np.inf), t_budget_s=None, rng=np.random.default_rng(0))  # fmt: skip
        picks.append(sim.method.plan_round(ctx).jobs.width)
    share_e = float(np.mean(np.concatenate(picks) == 0.0625))
    se = math.sqrt(0.75 * 0.25 / (400 * 40))
    assert abs(share_e - 0.75) < 3 * se


def test_capability_picks_the_largest_level_that_fits():
    sc = _sc('method.heterofl.levels=["a","b","c","d","e"]', "method.heterofl.assignment=capability",
             "round.policy=deadline", "round.deadline_s=0.02", "fleet.budget.kind=uniform",
             "fleet.budget.low_j=0.0005", "fleet.budget.high_j=0.02", "fleet.f_max_hz=[2e8, 2e9]")  # fmt: skip
    sim = Simulation(sc)
    fleet, wl = sim.fleet, sim.workload
    dist, gain = sim.radio.round_state(1)
    dev = np.arange(12)
    mask = np.ones(12, dtype=bool)
    rate = sim.radio.rates_bps(gain, fleet.tx_power_w, mask)
    e_max = np.geomspace(1e-5, 0.05, 12)  # the poorest device can afford no level
    ctx = RoundContext(round_index=1, selected=dev, costs=sim.costs, rate_bps=rate, e_max_j=e_max, t_budget_s=0.02,
                       rng=np.random.default_rng(0))  # fmt: skip
    plan = sim.method.plan_round(ctx)
    chosen = dict(zip(plan.jobs.device.tolist(), plan.jobs.width.tolist()))
    widths_seen = set()
    for i in dev:
        best = None
        for w in (1.0, 0.5, 0.25, 0.125, 0.0625):  # largest first, by hand
            c = wl.flops_per_sample(w) * wl.samples_per_round(i) / fleet.flops_per_cycle[i]
            t_com = wl.update_bits_at(w) / rate[i]
            slack = 0.02 - t_com
            if slack <= 0 or c / slack > fleet.f_max_hz[i]:
                continue
            f = max(c / slack, fleet.f_min_hz[i])
            e = fleet.energy_coeff[i] * f**2 * c + fleet.tx_power_w[i] * t_com
            if e <= e_max[i]:
                best = w
                break
        assert chosen.get(int(i)) == best, f"device {i}"
        widths_seen.add(best)
    assert len(widths_seen - {None}) >= 3 and None in widths_seen, f"want several levels and a skip: {widths_seen}"
    assert set(plan.skipped_device.tolist()) == {int(i) for i in dev if int(i) not in chosen}


@pytest.mark.slow
def test_round_updates_exactly_the_covered_elements_and_masked_rows():
    # one client at level e on 2-class shards with masked loss: only its submodel changes, and of the output
    # layer only the rows of its two classes
    sc = _sc('method.heterofl.levels=["e"]', "method.heterofl.assignment=dynamic", "method.clients_per_round=1",
             "data.partition=shards",
             "data.classes_per_device=2", "rounds=1")  # fmt: skip
    sim = Simulation(sc)
    before = {k: v.clone() for k, v in sim.state.model.items()}
    sim.step(1)
    dev = int(sim.records.device_blocks[0]["device"][0])
    classes = torch.unique(sim.workload.device_labels(dev))
    assert classes.numel() == 2
    after = sim.state.model
    h = math.ceil(0.0625 * 64)  # 4 hidden units
    for name, w0 in before.items():
        changed = (after[name] != w0)
        covered = torch.zeros_like(w0, dtype=torch.bool)
        if name == "net.0.weight":
            covered[:h, :] = True
        elif name == "net.0.bias":
            covered[:h] = True
        elif name == "net.2.weight":
            covered[classes, :h] = True
        elif name == "net.2.bias":
            covered[classes] = True
        assert not changed[~covered].any(), f"{name}: an element outside the submodel/mask changed"
        assert changed[covered].float().mean() > 0.5, f"{name}: the covered elements should move"


@pytest.mark.slow
def test_heterofl_conv_with_static_bn_trains_on_digits():
    sc = _sc("model.name=heterofl_conv", "model.hidden=[8,16,32,64]", 'method.heterofl.levels=["a","b"]',
             "method.heterofl.assignment=dynamic",
             "rounds=4", "train.lr=0.05", "train.momentum=0.9", "train.grad_clip=1.0")  # fmt: skip
    res = run_scenario(sc)
    acc = res.rounds["test_accuracy"].to_numpy()
    assert acc[-1] > 0.3  # 10 classes: chance is 0.1
    assert np.isfinite(res.rounds["test_loss"]).all()


def test_static_bn_uses_the_clients_data_only():
    sc = _sc("model.name=heterofl_conv", "model.hidden=[8,16,32,64]", "rounds=1")
    sim = Simulation(sc)
    a = sim.workload.evaluate(sim.state.model)
    b = sim.workload.evaluate(sim.state.model, bn_clients=3)  # fewer clients queried: other statistics
    assert a != b
    full = sim.workload.evaluate(sim.state.model, bn_clients=12)
    assert full == a  # 0 means all 12 clients


@pytest.mark.slow
def test_defaults_are_heterofl_not_fedavg():
    """Without settings every level a..e is in play and each device gets the largest its budgets allow: a
    deadline that fits only some levels spreads the devices over several widths (a single width is FedAvg)."""
    settings = Simulation(_sc()).method.settings
    assert settings.levels == ("a", "b", "c", "d", "e") and settings.assignment == "capability"
    sc = _sc("round.policy=deadline", "round.deadline_s=0.02", "fleet.budget.kind=uniform",
             "fleet.budget.low_j=0.0005", "fleet.budget.high_j=0.02", "fleet.f_max_hz=[2e8, 2e9]", "rounds=2")  # fmt: skip
    d = run_scenario(sc).device_rounds
    assert d.loc[d["trained"], "width"].nunique() >= 2


def test_masked_loss_default_follows_the_partition():
    assert Simulation(_sc("data.partition=shards")).method.masked
    assert not Simulation(_sc("data.partition=iid")).method.masked
    assert Simulation(_sc("data.partition=iid", "method.heterofl.masked_loss=true")).method.masked
    assert isinstance(Simulation(_sc()).method, HeteroFL)


@pytest.mark.parametrize("bad, match", [('method.heterofl.levels=["f"]', "levels"),
                                        ('method.heterofl.proportions=[1.0, 2.0]', "proportions")])  # fmt: skip
def test_bad_settings_name_the_field(bad, match):
    from edgefl.errors import ScenarioError

    with pytest.raises(ScenarioError, match=match):
        _sc(bad)


# ---------------------------------------------------------------------------------------------- step decay
STEP = ["train.lr_schedule=step", "train.lr_milestones=[2, 4]", "train.lr_factor=0.5", "train.lr=0.2"]


def test_step_learning_rate_per_round_by_hand():
    """HeteroFL Table 6's decay: x lr_factor after each milestone round. Milestones [2, 4], factor 0.5,
    eta_0 = 0.2: rounds 1-2 at 0.2, rounds 3-4 at 0.1, rounds 5-6 at 0.05 (MultiStepLR stepped per round)."""
    train = _sc(*STEP).train
    by_hand = [0.2, 0.2, 0.1, 0.1, 0.05, 0.05]
    np.testing.assert_allclose([scheduled_lr(train, train.lr, r) for r in range(1, 7)], by_hand, rtol=1e-15)


def test_step_learning_rate_reaches_the_trainer():
    """Round 3 under the schedule trains exactly as a constant-lr run at 0.1 on the same batches; round 2 as 0.2."""
    base = ["model.name=logreg", "train.local_steps=3"]
    wl = make_workload(sc := _sc(*base, *STEP), Streams(sc.seed))
    w0 = wl.initial_state()
    for round_index, lr in ((3, 0.1), (2, 0.2)):
        const = _sc(*base, f"train.lr={lr}")
        ref = make_workload(const, Streams(const.seed)).train(2, w0, round_index=round_index).update
        got = wl.train(2, w0, round_index=round_index).update
        for k in ref:
            torch.testing.assert_close(got[k], ref[k], rtol=0, atol=0)


def test_heterofl_fmnist_preset_uses_the_papers_recipe():
    """HeteroFL Table 6, MNIST column, non-IID: E = 5 local epochs, B = 10, lr 0.01, 400 rounds, x0.1 at 200."""
    t = load_scenario("heterofl_fmnist").train
    assert (t.local_epochs, t.batch_size, t.lr) == (5, 10, 0.01)
    assert (t.lr_schedule, t.lr_milestones, t.lr_factor) == ("step", (200,), 0.1)
    assert load_scenario("heterofl_fmnist").rounds == 400


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["train.lr_schedule=step"], "lr_schedule='step' needs lr_milestones"),
        (["train.lr_schedule=step", "train.lr_milestones=[4, 2]"], r"lr_milestones=\[4, 2\]: must be strictly"),
        (["train.lr_milestones=[4]"], r"lr_milestones=\[4\]: only used by lr_schedule='step'"),
        (["train.lr_factor=1.5"], r"lr_factor=1\.5: Input should be less than or equal to 1"),
    ],
)
def test_step_schedule_errors_name_the_field(extra, match):
    with pytest.raises(ScenarioError, match=match):
        _sc(*extra)


def test_jobs_of_one_level_share_their_download_and_train_as_from_their_own_copy():
    """A round's jobs of one width download one shared submodel (Method.sliced); training never writes it, so each
    job's update is bit for bit the one it gets from a private copy, whichever job ran before it."""
    from edgefl.learning.slicing import slice_state
    from edgefl.methods.base import JobTable

    sim = Simulation(_sc("method.heterofl.assignment=dynamic"))
    m, state = sim.method, sim.state.model
    table = JobTable.build(np.arange(4), cpu_hz=1e9, width=np.array([0.5, 0.5, 0.25, 0.5]))
    jobs = [m.train_job(table[i], state=state, round_index=1) for i in range(4)]
    assert jobs[0].start is jobs[1].start is jobs[3].start and jobs[2].start is not jobs[0].start
    own = slice_state(state, m.workload.submodel_shapes(0.5))
    shared = [m.client_update(job, trainer=sim.workload).payload.params for job in jobs]
    assert all(torch.equal(jobs[0].start[k], v) for k, v in own.items())  # nothing wrote the shared copy
    for i in (0, 1, 3):
        alone = m.client_update(dataclasses.replace(jobs[i], start=dict(own)), trainer=sim.workload).payload.params
        assert all(torch.equal(shared[i][k], v) for k, v in alone.items()), i
