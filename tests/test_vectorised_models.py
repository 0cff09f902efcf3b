"""Vectorised training (issue #26 point 3) for every registered model that allows it, against one-by-one training.

The reference is :func:`edgefl.learning.train.local_train` run once per device from that device's own start state.
Epoch training with unequal sample counts makes the devices of a group take different numbers of SGD steps and
different last-batch sizes, so the padding and the per-step masks of
:func:`~edgefl.learning.train.local_train_many` are exercised; the runs then check the grouping by width
(AnycostFL's submodels, HeteroFL's levels), the per-job work after training (compression), the executors and the
``train.vectorise`` setting.

Tolerance, UPDATE_RTOL: the two ways run the same batches and SGD rule; they differ only in the order of float32
sums (a batched matmul/convolution, a weighted sum instead of a mean), about ``eps = 2**-23 ~ 1.2e-7`` relative per
reduction of each step's gradient. Over S steps the error of the update grows about linearly in S (and is
amplified by the loss's curvature), so an update ``u = w_after - w_before`` is compared as
``max|u_vec - u_one| <= UPDATE_RTOL * max|u_one|`` with ``UPDATE_RTOL = 128 * eps * S_max`` (S_max = 8 steps
here: 1.2e-4; the factor 128 covers the reduction lengths, up to ~10^3 terms whose rounding errors add like a
random walk, ~32 eps, and a curvature amplification of 4). Observed: at most 1.5e-6 for every model and run here
but VGG-9, whose nine layers amplify rounding ~10x per step on random data (4e-3 after 6 steps); where the float32
one-by-one update is itself further from the same training in float64, the bound is NOISE_FACTOR = 4 times that
distance instead: vectorising may not move an update more than float32 rounding already does.
A wrong batch, a missed last batch or a step past a device's end moves the update by a sizeable fraction of
itself (each was checked to fail these tests by breaking the masks once).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from edgefl.errors import ScenarioError
from edgefl.training.executors import group_chunks
from edgefl.training.learner import training_groups
from edgefl.learning.config import LocalTrainConfig
from edgefl.learning.models import MODEL_NAMES, MODELS, build_model, init_parameters
from edgefl.learning.train import local_train, local_train_many, trains_together
from edgefl.learning.workload import torch_device
from edgefl.run.runner import Simulation, make_workload
from edgefl.run.load import load_scenario
from edgefl.seeding import Streams
from fleets import PAPER_QUICKSTART, SLOW_FLEET

EPS32 = float(torch.finfo(torch.float32).eps)
STEPS_MAX = 8
UPDATE_RTOL = 128 * EPS32 * STEPS_MAX  # ~1.2e-4 of the update's largest element (module docstring)
NOISE_FACTOR = 4.0  # x the float32 one-by-one run's own max distance from the same run in float64
LOSS_RTOL = 1e-4  # the recorded mean batch loss: a sum of S losses, each off by a few eps

SIZES = (7, 16, 23, 40)  # samples per device; batch 16 -> 1, 1, 2, 3 steps per epoch, last batches 7, 16, 7, 8
CFG = LocalTrainConfig(epochs=2, batch_size=16, lr=0.05, momentum=0.5, weight_decay=1e-3)  # 2..6 steps
VECTORISABLE = [n for n in MODEL_NAMES if trains_together(build_model(n), CFG)]
BATCH_NORM = [n for n in MODEL_NAMES if n not in VECTORISABLE]


def _close(vec: dict, one: dict, label: str, *, noise: float = 0.0) -> None:
    """``vec`` and ``one`` (updates by name) agree to UPDATE_RTOL of the update's largest element, or to
    NOISE_FACTOR x ``noise`` (the float32 reference's own distance from float64) where that is larger."""
    scale = max(float(v.abs().max()) for v in one.values())
    err = max(float((vec[k] - one[k]).abs().max()) for k in one)
    tol = max(UPDATE_RTOL * scale, NOISE_FACTOR * noise)
    assert scale > 0 and err <= tol, f"{label}: max error {err:.3g} > {tol:.3g} (update scale {scale:.3g})"


def test_the_registry_splits_into_vectorisable_models_and_batch_norm_ones():
    assert set(VECTORISABLE) == {"mlp", "logreg", "cnn_mcmahan", "vgg9", "ccfedavg_mlp", "ccfedavg_cnn", "lenet5"}
    assert set(BATCH_NORM) == {"heterofl_conv", "preresnet18", "heterofl_mcmahan"}
    assert all(not MODELS[n].vectorise for n in BATCH_NORM)  # the "auto" flag never names an excepted model


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.slow) if m == "vgg9" else m for m in VECTORISABLE])
def test_vectorised_epochs_with_unequal_devices_equal_one_by_one(name):  # VGG-9 (~5 s): the full tier
    _vectorised_equals_one_by_one(name, torch.device("cpu"))


@pytest.mark.parametrize("name", VECTORISABLE)
def test_vectorised_epochs_on_the_gpu_equal_one_by_one(name):
    """The same comparison with the models and data on a CUDA GPU (``train.device = "cuda"``), the float64
    reference on the GPU too (needs a CUDA GPU)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    _vectorised_equals_one_by_one(name, torch_device("cuda"))  # edgefl's GPU settings: deterministic, no TF32


def _vectorised_equals_one_by_one(name: str, on: torch.device) -> None:
    entry = MODELS[name]
    model = init_parameters(build_model(name), torch.Generator().manual_seed(0)).to(on)
    gen = torch.Generator().manual_seed(1)
    n = sum(SIZES)
    x = torch.randn(n, *entry.input_shape, generator=gen).to(on)
    y = torch.randint(0, entry.n_classes, (n,), generator=gen).to(on)
    bounds = np.cumsum((0, *SIZES))
    owned = [torch.arange(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    base = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
    starts = [{k: (v + 0.01 * torch.randn(v.shape, generator=gen)).to(on) for k, v in base.items()} for _ in SIZES]
    final, stats = local_train_many(model, starts, x, y, owned, CFG, [torch.Generator().manual_seed(d) for d in range(4)])
    assert max(s.steps for s in stats) <= STEPS_MAX
    assert len({s.steps for s in stats}) > 1  # devices of the group take different numbers of steps
    double = build_model(name).double().to(on)
    for d, rows in enumerate(owned):
        one, trained = _one_by_one(model, starts[d], x[rows], y[rows], d)
        assert (stats[d].steps, stats[d].samples) == (one.steps, one.samples)
        assert stats[d].mean_loss == pytest.approx(one.mean_loss, rel=LOSS_RTOL)
        _, exact = _one_by_one(double, starts[d], x[rows].double(), y[rows], d)
        noise = max(float((trained[k] - exact[k]).abs().max()) for k in trained)
        _close({k: final[k][d] - starts[d][k] for k in trained}, trained, f"{name} device {d}", noise=noise)


def _one_by_one(model, start, x, y, d):
    """:func:`local_train` of ``model`` (float32 or float64) from ``start`` on (x, y) with device ``d``'s batches:
    its stats and its update, in ``model``'s dtype."""
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(start[k])
    stats = local_train(model, x, y, CFG, torch.Generator().manual_seed(d))
    return stats, {k: p.detach() - start[k].to(p.dtype) for k, p in model.named_parameters()}


@pytest.mark.parametrize("name", BATCH_NORM)
def test_batch_norm_models_are_excepted_even_when_forced_on(name):
    assert not trains_together(build_model(name), CFG)  # batch statistics would mix a device's padded rows in
    with pytest.raises(ValueError, match="no gradient clipping and a model without buffers"):
        local_train_many(build_model(name), {}, torch.zeros(2, 1), torch.zeros(2), [torch.arange(1)], CFG, [None])


def test_a_batch_norm_model_forced_on_trains_one_by_one():
    sc = load_scenario("quickstart", PAPER_QUICKSTART + [
        "fleet.n_devices=4", "method.clients_per_round=2", "model.name=heterofl_mcmahan", "data.dataset=fmnist", "data.max_train_samples=200",
        "data.max_test_samples=50", "train.vectorise=on",
    ])  # fmt: skip
    wl = make_workload(sc, Streams(sc.seed))
    assert not wl.vectorises(auto=False) and not wl.vectorises(0.5, auto=True)
    assert wl.train_many(np.array([0, 1]), wl.initial_state(), round_index=1) is None


def test_dropout_and_clipping_are_excepted():
    with_dropout = nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    assert not trains_together(with_dropout, CFG)  # a mask per row from torch's global stream
    assert not trains_together(build_model("mlp"), LocalTrainConfig(grad_clip=1.0))  # a norm per device


def _sim(preset: str, sets: list[str], mode: str) -> Simulation:
    return Simulation(load_scenario(preset, [*PAPER_QUICKSTART, *sets, f"train.vectorise={mode}"]))


def _spy(sim: Simulation) -> list[list[float]]:
    """Record the widths of every group ``sim``'s method trains together."""
    seen: list[list[float]] = []
    real = sim.method.client_updates

    def spy(jobs, *, trainer):
        seen.append(sorted({j.job.width for j in jobs}))
        return real(jobs, trainer=trainer)

    sim.method.client_updates = spy
    return seen


BUDGET = ["round.policy=deadline", "round.deadline_s=2.0", "fleet.budget.kind=uniform", "fleet.budget.low_j=0.002",
          "fleet.budget.high_j=0.02", "checkpoint_every=0", "fleet.n_devices=10", "method.clients_per_round=10",
          "rounds=2", "model.hidden=[32]"]  # fmt: skip
TIGHT = [*SLOW_FLEET, "round.policy=deadline", "round.deadline_s=0.03", "fleet.budget.kind=uniform",
         "fleet.budget.low_j=0.003", "fleet.budget.high_j=0.008", "fleet.f_min_hz=1e7", "rounds=2",
         "model.hidden=[64, 32]", "method.clients_per_round=20", "checkpoint_every=0"]  # fmt: skip
METHOD_RUNS = {
    "anycostfl": [*BUDGET, "method.name=anycostfl"],  # full width, then fine-grained compression per job
    "anycostfl_widths": [*TIGHT, "method.name=anycostfl", "method.anycostfl.ablation=no_fgc"],  # submodels
    "heterofl": [*BUDGET, "method.name=heterofl", "method.heterofl.levels=['a','b','c']",
                 "method.heterofl.assignment=fix", "method.heterofl.masked_loss=true"],  # levels, masked loss
    "fednova": [*BUDGET, "method.name=fednova"],  # step counts tau_i
    "stc": [*BUDGET, "method.name=stc"],  # compression with error feedback (device memory)
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("case", list(METHOD_RUNS))
def test_methods_train_in_groups_of_one_width_then_finish_per_job_and_match_one_by_one(case):
    """A run forced on groups its jobs by (sub)model shape, trains each group together, then does each job's
    own work (compression, memory), and ends at the one-by-one run's model within tolerance."""
    sets = METHOD_RUNS[case]
    on, off = _sim("quickstart", sets, "on"), _sim("quickstart", sets, "off")
    seen, never = _spy(on), _spy(off)
    init = {k: v.clone() for k, v in off.state.model.items()}
    for r in (1, 2):
        a, b = on.step(r), off.step(r)
        assert a["arrived"] == b["arrived"]
    assert seen and all(len(w) == 1 for w in seen)  # a group is one width
    assert not never  # "off": every job alone
    if case in ("anycostfl_widths", "heterofl"):
        assert any(w[0] < 1 for w in seen)  # submodels trained together
    moved = {k: on.state.model[k] - v for k, v in init.items()}
    _close(moved, {k: off.state.model[k] - v for k, v in init.items()}, case)  # the global model's 2-round change


def test_auto_vectorises_only_fedavg_fixed_steps_on_models_measured_faster():
    def wl(sets):
        sc = load_scenario("quickstart", PAPER_QUICKSTART + ["fleet.n_devices=4", "method.clients_per_round=2", *sets])
        return make_workload(sc, Streams(sc.seed))

    steps = wl(["train.local_steps=3"])
    assert steps.vectorises(auto=True) == MODELS["mlp"].vectorise
    assert not steps.vectorises(auto=False)  # another method's training: only under "on"
    assert not wl([]).vectorises(auto=True)  # epochs: only under "on"
    assert wl(["train.vectorise=on"]).vectorises(auto=False)
    assert not wl(["train.vectorise=off", "train.local_steps=3"]).vectorises(auto=True)
    cnn = wl(["train.local_steps=3", "model.name=lenet5", "data.dataset=fmnist", "data.max_train_samples=200",
              "data.max_test_samples=50"])  # fmt: skip
    assert cnn.vectorises(auto=True) == MODELS["lenet5"].vectorise


def test_vectorise_setting_fails_in_one_line_naming_the_field():
    with pytest.raises(ScenarioError, match=r"train\.vectorise") as info:
        load_scenario("quickstart", PAPER_QUICKSTART + ["train.vectorise=sometimes"])
    assert "\n" not in str(info.value)


def test_groups_are_whole_on_every_worker_count():
    groups = [[0, 2, 4], [1], [3, 5, 6, 7]]
    for workers in (1, 2, 3, 8):
        parts = group_chunks(groups, workers)
        assert sorted(i for p in parts for i in p) == list(range(8)) and len(parts) <= workers
        for g in groups:
            assert any(set(g) <= set(p) for p in parts)  # never cut
    assert group_chunks([[0], [1], [2]], 2) == [[0, 1], [2]]  # singletons: the contiguous chunks of before


def test_a_subclass_that_replaces_client_update_trains_one_by_one():
    """A method's local_training/finish_update describe its client_update only where it defines them at or below
    the class that defines client_update (a custom FedAvg with its own client_update is not vectorised)."""
    from edgefl.methods import FedAvg
    from edgefl.methods.base import vectorisable

    class Custom(FedAvg):
        name = "custom_test"

        def client_update(self, job, *, trainer):
            return super().client_update(job, trainer=trainer)

    sim = _sim("quickstart", ["fleet.n_devices=6", "method.clients_per_round=4", "train.local_steps=2"], "on")
    assert vectorisable(sim.method)
    custom = Custom(settings=sim.method.settings, setup=sim.method.setup)
    assert not vectorisable(custom)
    jobs = [custom.train_job(j, state=sim.state.model, round_index=1) for j in _jobs(4)]
    assert training_groups(custom, sim.workload, jobs) == [[0], [1], [2], [3]]
    assert training_groups(sim.method, sim.workload, jobs) == [[0, 1, 2, 3]]


def _jobs(n: int):
    from edgefl.methods.base import JobTable

    return JobTable.build(np.arange(n), cpu_hz=1e9)
