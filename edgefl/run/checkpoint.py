"""Checkpoints of a run between rounds, written so that a kill at any instant leaves a usable one.

Layout of ``<run>/checkpoint/``:

- ``meta.json``: the round reached, simulated clock [s], cumulative energy [J], device positions [m] and the
  radio's round, the jobs still in flight on the run's clock (late devices finishing; an asynchronous run's
  pending job ends and its server: buffer, live dispatches' job rows), the method's state, the surrogate's
  state, every ``rounds`` row so far, the list of
  device-row segment files and the name of the model file. Written last, atomically: it is the commit point.
- ``devices-<first>-<last>.npz``: the device rows of those rounds, one array per column (no pickle).
  Segments are never rewritten, so a checkpoint costs only the rounds since the previous one.
- ``model-<round>.pt``: the global model's tensors and the method's state (``Method.state_dict()``: nested
  dicts/lists of tensors and numbers, e.g. CC-FedAvg's stored updates) in torch mode, read back with
  ``weights_only=True`` (an asynchronous run adds its jobs' trained updates and the model versions they
  downloaded); surrogate runs keep the method's (JSON-able) state in ``meta.json``.

Random state: every random draw in a run comes from a stream keyed by (seed, consumer, round[, device])
(:mod:`edgefl.seeding`), so no generator carries state from one round to the next; the only state a stream
leaves behind is what it produced (device positions under mobility, the model), and that is saved.
Files that do not belong to the committed ``meta.json`` (a segment or model written just before a kill) are
ignored and cleaned up by the next save.

Consistency: a checkpoint is the state between two steps, so its clock stands at the end of its last round
(``clock.clock_s == sim_time_s``) and its radio at that round; :func:`save_checkpoint` refuses anything else (a
round's clock advance without that round's rows), and :func:`load_checkpoint` refuses, in one line, any
checkpoint a resume could not continue exactly: another scenario, another edgefl (version or code), a missing or
unreadable file, or parts that disagree.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.errors import SimulationError
from edgefl.io import atomic_write_bytes, atomic_write_text
from edgefl.engine.records import Records
from edgefl.scenario.loading import Scenario, scenario_to_toml
from edgefl.engine.run_state import RunState

if TYPE_CHECKING:
    from edgefl.learning.protocol import Learning

__all__ = ["save_checkpoint", "load_checkpoint", "checkpoint_round", "remove_checkpoint", "edgefl_build", "Restored",
           "META"]

META = "meta.json"
_FORMAT = 2  # 2: the edgefl that wrote it (version and code digest); clock and radio checked against the round


@dataclass(frozen=True, eq=False)
class Restored:
    """What a checkpoint holds: the run state, the records so far, and the method's and radio's memory."""

    state: RunState
    records: Records
    method_state: dict
    radio_state: dict
    clock_state: dict | None = None
    driver_state: dict | None = None  # the driver's memory (an asynchronous run's server), JSON part
    driver_tensors: dict | None = None  # and its tensors (trained updates, model versions of torch runs)


def _scenario_digest(scenario: Scenario) -> str:
    return hashlib.sha256(scenario_to_toml(scenario).encode("utf-8")).hexdigest()


@functools.cache
def edgefl_build() -> str:
    """The edgefl that runs: its version and a digest of its code (every ``.py`` and ``.toml`` file of the
    package), e.g. ``0.1.0+3f2a9c1d0b7e``; a checkpoint resumes only under the same one. (The version is read
    from the package's ``__init__.py`` text: this module stands below the package root, which it does not import.)"""
    import re

    root = Path(__file__).resolve().parents[1]  # edgefl/
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml") and p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    found = re.search(r'^__version__ = "([^"]+)"', (root / "__init__.py").read_text(encoding="utf-8"), re.M)
    return f"{found.group(1) if found else 'unknown'}+{digest.hexdigest()[:12]}"


def _at_boundary(rounds_done: int, sim_time_s: float, clock_s: float | None, radio_round: int) -> str | None:
    """Why a state whose last round ends at ``sim_time_s`` cannot go with a clock at ``clock_s`` and a radio at
    round ``radio_round`` (None when they agree: the parts stand between round ``rounds_done`` and the next)."""
    if clock_s is not None and clock_s != sim_time_s:
        return (f"its clock stands at {clock_s!r} s but round {rounds_done} ends at {sim_time_s!r} s "
                f"(the clock of a round whose rows it does not hold)")  # fmt: skip
    if radio_round != max(1, rounds_done):
        return f"its radio stands at round {radio_round}, not at round {max(1, rounds_done)}"
    return None


def checkpoint_round(checkpoint_dir: str | Path) -> int:
    """The last round saved in ``checkpoint_dir`` (0 if there is no checkpoint)."""
    path = Path(checkpoint_dir) / META
    if not path.is_file():
        return 0
    return int(_read_meta(path)["round"])


def remove_checkpoint(checkpoint_dir: str | Path) -> None:
    """Remove the checkpoint in ``checkpoint_dir`` (a finished run's): ``meta.json`` first (the commit point), then
    its segment and model files, then the folder if nothing else is left in it."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        return
    (checkpoint_dir / META).unlink(missing_ok=True)
    for path in checkpoint_dir.iterdir():
        temporary = path.name.startswith(".") and path.suffix == ".tmp"  # an atomic write cut short
        if path.is_file() and (path.suffix in (".pt", ".npz") or temporary):
            path.unlink(missing_ok=True)
    if not any(checkpoint_dir.iterdir()):
        checkpoint_dir.rmdir()


def save_checkpoint(
    checkpoint_dir: Path, scenario: Scenario, state: RunState, records: Records, saved_blocks: int, *,
    method_state: dict, radio_state: dict, learning: Learning, clock_state: dict | None = None,
    driver_state: tuple[dict, dict | None] | None = None,
) -> int:  # fmt: skip
    """Write ``state`` (after its last completed round) with ``records``, ``method_state`` (the method's
    ``state_dict()``) and ``radio_state``; return how many device blocks are now saved. ``learning``: the run's
    workload, which saves the model (:meth:`~edgefl.learning.protocol.Learning.saved_state`): tensors in a ``.pt``
    file when it trains, else numbers in ``meta.json``.
    ``driver_state``: the driver's memory (:meth:`edgefl.engine.driver.Driver.state_dict`: an asynchronous run's
    server), its JSON part in ``meta.json`` and its tensors (jobs' updates, model versions) in the ``.pt`` file."""
    clock_s = None if clock_state is None else float(clock_state["clock_s"])
    why = _at_boundary(state.rounds_done, state.sim_time_s, clock_s, int(radio_state["radio_round"]))
    if why is not None:  # a bug in the caller: the parts are part-way through the next round
        raise SimulationError(f"{checkpoint_dir}: not saving a checkpoint after round {state.rounds_done}: {why}")
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    old = _read_meta(checkpoint_dir / META) if (checkpoint_dir / META).is_file() else None
    segments = list(old["segments"]) if old else []
    if old is None or old["round"] > state.rounds_done:
        segments, saved_blocks = [], 0  # a fresh run (or a rewind) starts the segment list over
    new_blocks = records.device_blocks[saved_blocks:]
    if new_blocks:
        first, last = records.round_rows[saved_blocks]["round"], records.round_rows[-1]["round"]
        name = f"devices-{first:07d}-{last:07d}.npz"
        atomic_write_bytes(checkpoint_dir / name, _npz_bytes(new_blocks))
        segments.append(name)
    model_name = ""
    if learning.trains:
        import torch

        model_name = f"model-{state.rounds_done:07d}.pt"
        buf = io.BytesIO()
        model = learning.saved_state(state.model)
        saved = {"model": model, "method": method_state}
        if driver_state is not None:
            saved["async"] = driver_state[1]
        torch.save(saved, buf)  # tensors and plain data only
        atomic_write_bytes(checkpoint_dir / model_name, buf.getvalue())
    meta = {
        "format": _FORMAT,
        "edgefl": edgefl_build(),
        "scenario_sha256": _scenario_digest(scenario),
        "round": state.rounds_done,
        "sim_time_s": state.sim_time_s,
        "energy_cum_j": state.energy_cum_j,
        **radio_state,  # radio_round, positions_m
        "method": None if learning.trains else method_state,  # torch runs keep it in the .pt file
        "surrogate": None if learning.trains else learning.saved_state(state.model),
        "model": model_name,
        "clock": clock_state,
        "async": None if driver_state is None else driver_state[0],
        "segments": segments,
        "rounds": records.round_rows,
    }
    atomic_write_text(checkpoint_dir / META, json.dumps(meta, allow_nan=True))  # the commit point
    keep = {META, model_name, *segments}
    for stale in checkpoint_dir.iterdir():  # files of an older checkpoint or of a save cut short
        if stale.name not in keep and stale.suffix in (".pt", ".npz"):
            stale.unlink(missing_ok=True)
    return len(records.device_blocks)


def load_checkpoint(checkpoint_dir: Path, scenario: Scenario, *, like: Any, learning: Learning) -> Restored | None:
    """The checkpoint in ``checkpoint_dir`` of a run of ``scenario`` (None if there is none). ``like``: a fresh
    model state of that scenario, whose parameter names the saved model must have; ``learning``: the run's
    workload, which restores the model (:meth:`~edgefl.learning.protocol.Learning.state_from_saved`)."""
    path = checkpoint_dir / META
    if not path.is_file():
        return None
    meta = _read_meta(path)
    if meta.get("scenario_sha256") != _scenario_digest(scenario):
        raise SimulationError(
            f"{path}: the checkpoint belongs to a different scenario than {scenario.name!r}; "
            "resume with the run directory's own scenario.toml"
        )
    if meta.get("edgefl") != edgefl_build():
        raise SimulationError(
            f"{path}: written by edgefl {meta.get('edgefl')}, this is edgefl {edgefl_build()}: a resumed run "
            f"could differ from an uninterrupted one; start the run again"
        )  # fmt: skip
    clock = meta.get("clock")
    why = _at_boundary(int(meta["round"]), float(meta["sim_time_s"]), None if clock is None else clock["clock_s"],
                       int(meta["radio_round"]))  # fmt: skip
    if why is not None:
        raise SimulationError(f"{path}: the checkpoint after round {meta['round']} is inconsistent: {why}; "
                              "start the run again")  # fmt: skip
    missing = [name for name in [*meta["segments"], meta["model"]] if name and not (checkpoint_dir / name).is_file()]
    if missing:
        raise SimulationError(f"{path}: the checkpoint after round {meta['round']} lacks {', '.join(missing)}; "
                              "start the run again")  # fmt: skip
    blocks = [blk for name in meta["segments"] for blk in _load_segment(checkpoint_dir / name)]
    if len(blocks) != meta["round"] or len(meta["rounds"]) != meta["round"]:
        raise SimulationError(f"{path}: checkpoint is inconsistent ({len(blocks)} device blocks for round "
                              f"{meta['round']}); start the run again")  # fmt: skip
    if learning.trains:
        import torch

        try:
            saved = torch.load(checkpoint_dir / meta["model"], weights_only=True)  # tensors only, never code
            model, method_state, driver_tensors = saved["model"], saved["method"], saved.get("async")
            model = learning.state_from_saved(model)
        except Exception as exc:  # noqa: BLE001 - any unreadable model file is the same user-facing problem
            why = " ".join(str(exc).split())[:200]  # one line
            raise SimulationError(f"{checkpoint_dir / meta['model']}: cannot read the model ({why})") from None
        if set(model) != set(like):
            raise SimulationError(f"{checkpoint_dir / meta['model']}: parameters do not match the scenario's model")
    else:
        model, method_state, driver_tensors = learning.state_from_saved(meta["surrogate"]), meta["method"], None
    state = RunState(rounds_done=int(meta["round"]), sim_time_s=float(meta["sim_time_s"]),
                     energy_cum_j=float(meta["energy_cum_j"]), model=model)  # fmt: skip
    records = Records(round_rows=[dict(row) for row in meta["rounds"]], device_blocks=blocks)
    radio_state = {"radio_round": meta["radio_round"], "positions_m": meta["positions_m"]}
    return Restored(state=state, records=records, method_state=method_state, radio_state=radio_state,
                    clock_state=meta.get("clock"), driver_state=meta.get("async"), driver_tensors=driver_tensors)  # fmt: skip


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SimulationError(f"{path}: not a readable checkpoint ({' '.join(str(exc).split())})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise SimulationError(f"{path}: not an edgefl checkpoint")
    if meta["format"] != _FORMAT:
        raise SimulationError(f"{path}: a checkpoint of format {meta['format']} (this edgefl reads format {_FORMAT}): "
                              "written by another edgefl; start the run again")  # fmt: skip
    return meta


def _npz_bytes(blocks: list[dict[str, np.ndarray]]) -> bytes:
    """Rounds' device blocks as one .npz: column arrays concatenated, plus each round's row count."""
    arrays: dict[str, np.ndarray] = {"_rows": np.array([len(b["round"]) for b in blocks], dtype=np.int64)}
    for name in blocks[0]:
        col = np.concatenate([b[name] for b in blocks])
        arrays[name] = col.astype(str) if col.dtype == object else col  # text as fixed-width unicode, not pickle
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _load_segment(path: Path) -> list[dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {name: npz[name] for name in npz.files}
    except (OSError, ValueError) as exc:
        raise SimulationError(f"{path}: cannot read checkpoint segment ({' '.join(str(exc).split())})") from None
    counts = data.pop("_rows")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        block = {}
        for name, col in data.items():
            part = col[a:b]
            block[name] = part.astype(object) if part.dtype.kind == "U" else part
        out.append(block)
    return out

