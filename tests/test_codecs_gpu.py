"""The five codecs on a CUDA GPU (needs one; skipped elsewhere): an update that lives on the GPU is coded there
(the sent values stay on the GPU), the size it charges is the byte oracle's exactly, the oracle's decode gives the
values it sent bit for bit, and the same seed gives the same output twice. UVeQFed's server draws the dither again
from the seed on the CPU, so a GPU-coded update must have used the CPU's dither; the oracle's decode checks that
too. The same checks on the CPU are test_fgc, test_ternary and test_vq."""

from __future__ import annotations

import pytest
import torch

from edgefl.compression import fgc, ternary, vq
from trained import random_update, trained_cnn_update


def _gpu() -> torch.device:
    """The GPU as a run sets it up (deterministic algorithms, no TF32); skips where torch sees none."""
    from edgefl.learning.workload import torch_device

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here: the codecs' CPU path is checked by test_fgc, test_ternary and test_vq")
    return torch_device("cuda")


def _on(update: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in update.items()}


def _same(a, b) -> None:
    """Positions and values equal bit for bit (-0.0 included), compared on the CPU."""
    assert torch.equal(a.positions.long().cpu(), b.positions.long().cpu())
    assert torch.equal(a.values.cpu().view(torch.int32), b.values.cpu().view(torch.int32))


def _oracle(coded, to_bytes, from_bytes, device) -> None:
    assert coded.values.device.type == device.type  # coded where the update lives
    payload = to_bytes(coded)
    assert coded.bits == 8 * len(payload)
    back = from_bytes(payload, coded.names)
    _same(coded, back)
    assert back.kept == coded.kept and back.shapes == coded.shapes


def _gen(device: torch.device, seed: int = 7) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


UPDATES = {"random": (0, 1.0), "tiny": (1, 1e-30), "huge": (2, 1e30), "zero": (3, 0.0)}


@pytest.mark.parametrize("case", sorted(UPDATES))
@pytest.mark.parametrize("kernel_wise", [True, False])
def test_fgc_on_the_gpu_charges_the_oracle_bits_and_decodes_bit_for_bit(case, kernel_wise):
    device = _gpu()
    update = _on(random_update(*UPDATES[case]), device)
    n_k = fgc._layout(tuple(tuple(v.shape) for v in update.values()), kernel_wise).n_kernels
    for levels in (1, 16, 255):
        for k in sorted({0, 1, n_k // 2, n_k}):
            coded = fgc.encode(update, kept=k, levels=levels, gen=_gen(device), kernel_wise=kernel_wise)
            _oracle(coded, fgc.to_bytes, fgc.from_bytes, device)
            _same(coded, fgc.encode(update, kept=k, levels=levels, gen=_gen(device), kernel_wise=kernel_wise))
    coded = fgc.fit(update, 600, _gen(device), kernel_wise=kernel_wise)
    assert coded.bits <= 600
    _oracle(coded, fgc.to_bytes, fgc.from_bytes, device)
    _oracle(fgc.fit_levels(update, 1500, _gen(device)), fgc.to_bytes, fgc.from_bytes, device)


@pytest.mark.parametrize("case", sorted(UPDATES))
def test_stc_on_the_gpu_charges_the_oracle_bits_and_keeps_the_cpu_positions(case):
    device = _gpu()
    update = random_update(*UPDATES[case])
    n = sum(v.numel() for v in update.values())
    for k in (0, 1, n // 2, n):
        coded = ternary.encode(_on(update, device), k)
        _oracle(coded, ternary.to_bytes, ternary.from_bytes, device)
        assert torch.equal(coded.positions.long().cpu(), ternary.encode(update, k).positions.long())  # exact top-k
    coded = ternary.fit(_on(update, device), 400)
    assert coded.bits <= 400
    _oracle(coded, ternary.to_bytes, ternary.from_bytes, device)


@pytest.mark.parametrize("case", sorted(UPDATES))
@pytest.mark.parametrize("step", [1.0, 0.05])
def test_uveqfed_on_the_gpu_charges_the_oracle_bits_and_the_server_dither_matches(case, step):
    device = _gpu()
    update = _on(random_update(*UPDATES[case]), device)
    m = (sum(v.numel() for v in update.values()) + 1) // 2
    decode = lambda payload, names: vq.from_bytes(payload, names, seed=11)  # noqa: E731 (the server's side)
    for k in (0, 1, m // 2, m):
        coded = vq.encode(update, k, step=step, seed=11)
        _oracle(coded, vq.to_bytes, decode, device)
        _same(coded, vq.encode(update, k, step=step, seed=11))
    coded = vq.fit(update, 700, step=step, seed=11)
    assert coded.bits <= 700
    _oracle(coded, vq.to_bytes, decode, device)


def test_a_real_trained_update_on_the_gpu_round_trips_through_every_oracle():
    device = _gpu()
    update = _on(trained_cnn_update(), device)
    n = sum(v.numel() for v in update.values())
    budget = 0.01 * 32 * n
    for coded in (fgc.fit(update, budget, _gen(device)),
                  fgc.fit(update, budget, _gen(device), levels_grid=(7,), kernel_wise=False)):  # fmt: skip
        assert coded.bits <= budget
        _oracle(coded, fgc.to_bytes, fgc.from_bytes, device)
    coded = ternary.fit(update, budget)
    assert coded.bits <= budget
    _oracle(coded, ternary.to_bytes, ternary.from_bytes, device)
    coded = vq.fit(update, budget, step=1.0, seed=5)
    assert 0 < coded.kept and coded.bits <= budget
    _oracle(coded, vq.to_bytes, lambda p, names: vq.from_bytes(p, names, seed=5), device)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["anycostfl", "stc", "qsgd", "fedhq", "uveqfed"])
def test_a_compressing_run_on_the_gpu_gives_the_same_tables_twice(method):
    """Each job's rounding and dither come from its own seed on its own device: ``anycostfl_fmnist`` (60 devices x
    10 images, 2 rounds) twice on the GPU, the same tables bit for bit (the updates coded on the GPU, STC's on the
    CPU beside its error feedback)."""
    from edgefl.run.load import load_scenario
    from edgefl.run.runner import run_scenario

    _gpu()
    sets = ["rounds=2", "checkpoint_every=0", "data.max_train_samples=600", f"method.name={method}",
            "train.device=cuda"]  # fmt: skip
    first, again = (run_scenario(load_scenario("anycostfl_fmnist", sets)) for _ in range(2))
    assert first.rounds.drop(columns="wall_time_s").equals(again.rounds.drop(columns="wall_time_s"))
    assert first.device_rounds.equals(again.device_rounds)
    assert (first.device_rounds["bits"] > 0).any()


@pytest.mark.slow
def test_a_gpu_training_hands_the_codecs_its_update_on_the_gpu_and_the_same_update_on_the_cpu():
    """``Workload.train`` and ``train_many`` on the GPU: ``on_device`` is the update on the GPU (what the codecs
    read) and ``update`` its CPU copy, equal bit for bit (float32 differences are exact on either device)."""
    from edgefl.run.load import load_scenario
    from edgefl.run.runner import prepare

    _gpu()
    sim = prepare(load_scenario("anycostfl_fmnist", ["rounds=1", "checkpoint_every=0", "data.max_train_samples=600",
                                                     "train.device=cuda"]))  # fmt: skip
    state = sim.workload.initial_state()
    one = sim.workload.train(0, state, round_index=1)
    many = sim.workload.train_many([1, 2], state, round_index=1)
    for res in [one, *(many or [])]:
        for name, t in res.on_device.items():
            assert t.device.type == "cuda" and res.update[name].device.type == "cpu"
            assert torch.equal(t.cpu().view(torch.int32), res.update[name].view(torch.int32))
    assert many is not None and len(many) == 2  # on a GPU the CNN's jobs train together
