"""``output.payloads``: every arrived update's bytes in ``payloads/round-R/device-D.bin``, one file per arrived
device-round and none for the others, each 8 * len(file) == its row's ``bits`` (docs/wire_formats.md), each
decoding with its codec's own decoder to the update the server aggregated, element for element; and a diverging
device stops the run with one line naming the device and the round (:class:`edgefl.errors.DivergedError`)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from edgefl.errors import DivergedError, ScenarioError
from edgefl.learning.workload import check_finite
from edgefl.methods.base import ClientUpdate, DenseUpdate, dense_bytes
from edgefl.output.results import write_run
from edgefl.run.load import load_scenario
from edgefl.run.runner import RunInterrupted, prepare, run_scenario
from cli_process import edgefl

BASE = ["rounds=2", "checkpoint_every=0", "output.payloads=true"]
DEADLINE = ["round.policy=deadline", "round.deadline_s=2.0", "fleet.budget.kind=uniform", "fleet.budget.low_j=0.002",
            "fleet.budget.high_j=0.02"]  # fmt: skip
CASES = {
    "fedavg": ["method.name=fedavg"],
    # more devices selected than kept: the late ones are cancelled, so some rows do not arrive
    "fedavg-over_select": ["method.name=fedavg", "round.policy=over_select", "round.over_select_fraction=0.6"],
    "anycostfl": ["physics=paper", "method.name=anycostfl", *DEADLINE],  # budgets set for the papers' physics
    "stc": ["method.name=stc"],
    "qsgd": ["method.name=qsgd"],
    "fedhq": ["method.name=fedhq"],
    "uveqfed": ["method.name=uveqfed"],
}


def _recorded(sim) -> list[tuple[int, list[ClientUpdate]]]:
    """Wrap the method's aggregation so that each round's updates, as the server aggregates them, are kept."""
    seen: list[tuple[int, list[ClientUpdate]]] = []
    method, aggregate = sim.method, sim.method.aggregate

    def recording(state, *, updates):
        seen.append((len(seen) + 1, list(updates)))
        return aggregate(state, updates=updates)

    method.aggregate = recording
    return seen


def _decoded(data: bytes, names: list[str], like: dict[str, torch.Tensor], method, r: int, d: int, coded: bool):
    """The update a payload file holds, read with its codec's oracle decoder (chosen by its first byte, the format's
    magic), or as little-endian float32 for a method without a codec."""
    from edgefl.compression import fgc, ternary, vq

    if not coded:
        flat = np.frombuffer(data, dtype="<f4")
        assert flat.size == sum(t.numel() for t in like.values())
        out, at = {}, 0
        for name in names:
            n = like[name].numel()
            out[name] = torch.from_numpy(flat[at : at + n].copy()).reshape(like[name].shape)
            at += n
        return out
    magic = data[0]
    if magic == fgc.MAGIC:
        return fgc.from_bytes(data, names).dense()
    if magic == ternary.MAGIC:
        return ternary.from_bytes(data, names).dense()
    assert magic == vq.MAGIC, f"unknown container {magic:#x}"
    return vq.from_bytes(data, names, seed=method.dither_seed(r, d)).dense()


def _check_run(folder: Path, device_rounds, seen, method) -> int:
    """The files agree with the rows and with what the server aggregated; returns how many were checked."""
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    arrived = device_rounds[device_rounds["arrived"].astype(bool)]
    assert files == {f"round-{r}/device-{d}.bin" for r, d in zip(arrived["round"], arrived["device"])}
    bits = {(int(r), int(d)): float(b) for r, d, b in zip(arrived["round"], arrived["device"], arrived["bits"])}
    checked = 0
    for r, updates in seen:
        assert sorted(u.device for u in updates) == sorted(d for (rr, d) in bits if rr == r)
        for u in updates:
            data = (folder / f"round-{r}" / f"device-{u.device}.bin").read_bytes()
            assert 8 * len(data) == bits[(r, u.device)] == u.bits  # the padding rule: bits is the whole bytes
            coded = getattr(u.payload, "coded", None) is not None  # the codec's symbols, else a dense update
            aggregated = u.payload.update
            names = list(aggregated)
            got = _decoded(data, names, aggregated, method, r, u.device, coded)
            assert list(got) == names
            for name in names:
                want = aggregated[name].detach().cpu().to(torch.float32)
                assert got[name].shape == want.shape, name
                same = torch.equal(got[name].view(torch.int32), want.view(torch.int32))  # bit for bit
                assert same, f"round {r} device {u.device} {name}"
            checked += 1
    return checked


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_payload_files_match_bits_and_the_aggregated_updates(tmp_path, case):
    sc = load_scenario("quickstart", BASE + CASES[case])
    sim = prepare(sc, tmp_path / "payloads")
    seen = _recorded(sim)
    result = run_scenario(sc, simulation=sim)
    assert result.payloads == {}  # written as the rounds went, not kept
    dr = result.device_rounds
    assert _check_run(tmp_path / "payloads", dr, seen, sim.method) == int(dr["arrived"].astype(bool).sum()) > 0
    if case == "fedavg-over_select":
        assert (~dr["arrived"].astype(bool)).any()  # the case checks that those leave no file


@pytest.mark.slow
def test_a_run_from_python_keeps_the_payloads_for_write_run(tmp_path):
    sc = load_scenario("quickstart", BASE + CASES["stc"])
    sim = prepare(sc)
    seen = _recorded(sim)
    result = run_scenario(sc, simulation=sim)
    assert result.payloads
    write_run(result, tmp_path, report=False)
    assert _check_run(tmp_path / "payloads", result.device_rounds, seen, sim.method) == len(result.payloads)


@pytest.mark.slow
def test_a_resumed_run_writes_the_same_files(tmp_path):
    sets = ["rounds=4", "checkpoint_every=1", "output.payloads=true", "method.name=qsgd"]
    sc = load_scenario("quickstart", sets)
    run_scenario(sc, simulation=prepare(sc, tmp_path / "full"))

    def stop_at_2(row):
        if row["round"] == 2:
            raise KeyboardInterrupt

    ckpt = tmp_path / "checkpoint"
    with pytest.raises(RunInterrupted):
        run_scenario(sc, simulation=prepare(sc, tmp_path / "cut"), checkpoint_dir=ckpt, progress=stop_at_2)
    assert {p.parent.name for p in (tmp_path / "cut").rglob("*.bin")} == {"round-1", "round-2"}
    run_scenario(sc, simulation=prepare(sc, tmp_path / "cut"), checkpoint_dir=ckpt, resume=True)

    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.bin")}

    full = files(tmp_path / "full")
    assert len(full) == 4 * 5 and files(tmp_path / "cut") == full


@pytest.mark.parametrize("sets", [["method.name=fedasync"], ["learning=surrogate"]], ids=["async", "surrogate"])
def test_payloads_are_refused_where_no_row_matches_a_payload(sets):
    sc = load_scenario("quickstart", ["output.payloads=true", *sets])
    with pytest.raises(ScenarioError, match="output.payloads"):
        prepare(sc)


def test_dense_bytes_are_little_endian_float32_in_the_mapping_order():
    update = {"b": torch.tensor([1.5, -2.0]), "a": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    data = dense_bytes(update)
    assert len(data) == 4 * 8
    assert np.array_equal(np.frombuffer(data, dtype="<f4"), np.array([1.5, -2.0, 0, 1, 2, 3, 4, 5], dtype="<f4"))
    u = ClientUpdate(device=0, payload=DenseUpdate(update), weight=1.0, bits=256.0, flops=0.0, steps=1, train_loss=0.0)
    from edgefl.methods.fedavg import FedAvg

    assert FedAvg.wire_bytes(None, u) == data  # the default needs nothing of the method


def test_a_non_finite_update_raises_naming_device_and_round():
    fine = {"w": torch.ones(3), "b": torch.zeros(2)}
    assert check_finite(fine, 4, 7) is fine
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(DivergedError, match=r"device 4's update in round 7 holds a NaN or an infinity") as info:
            check_finite({"w": torch.ones(3), "b": torch.tensor([0.0, bad])}, 4, 7)
        again = pickle.loads(pickle.dumps(info.value))  # a worker process hands it back as itself
        assert type(again) is DivergedError and (again.device, again.round_index) == (4, 7)


@pytest.mark.slow
def test_a_diverging_run_stops_with_one_line(tmp_path):
    out = edgefl("run", "quickstart", "--set", "rounds=3", "--set", "train.lr=1e30", "--quiet", "--out",
                 str(tmp_path / "run"))  # fmt: skip
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert re.fullmatch(r"error: device \d+'s update in round 1 holds a NaN or an infinity: .*", lines[0]), lines
