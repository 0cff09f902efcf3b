"""Recording a run: each round's ``rounds`` row and ``device_rounds`` block, and the tables built from them.

A round's device block is one array per column (jobs, then the selected devices that sat out, sorted by device
id): the columns every method fills (:data:`DEVICE_COLUMNS`), the timeline and planned costs,
then the method's own columns (``Method.device_columns``).

The timeline columns are absolute simulated times [s] on the run's clock: ``t_start_s`` (compute start) and
``t_arrive_s`` (upload end, empty for a job that never arrived), then ``t_down_s`` (download start: the job's
dispatch) and ``t_end_s`` (the device is free again: its arrival, or where it stopped). ``t_cmp_s`` and ``t_com_s`` are the time spent computing and uploading
(less than planned for a job cancelled at the cut-off or lost offline, whose ``reason`` says so; more than planned
for an upload sent again after packet errors, ``reason = "packet error"`` when every attempt was lost).

After ``e_down_j`` and before the method's own columns come the device's identity and the parts of its energy:
``profile`` (its catalogue profile key, '' for a device drawn from ranges without one), ``e_static_j`` (the
static, idle-power part of the compute energy, already included in ``e_cmp_j``) and ``e_idle_j`` (energy spent
waiting idle inside the round) [J]; then the job's uplink ``bandwidth_hz`` [Hz] and ``tx_power_w`` [W], as the round's
allocation set them (``channel.allocation``; under ``"equal"`` the band's share and the device's own power).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from collections.abc import Mapping

    from edgefl.learning.protocol import RoundWork
    from edgefl.engine.clock import JobTimes

__all__ = ["DEVICE_COLUMNS", "ROUND_COLUMNS", "Records", "RoundRecord", "device_block"]

ROUND_COLUMNS = (
    "round", "sim_time_s", "round_time_s", "energy_j", "energy_cum_j", "selected", "arrived", "dropped",
    "bits_up", "test_accuracy", "test_loss", "train_loss", "wall_time_s",
)  # fmt: skip
"""The first columns of the ``rounds`` table, in order (further columns follow them)."""
DEVICE_COLUMNS = (
    "round", "device", "selected", "trained", "feasible", "reason", "arrived", "distance_m", "rate_bps",
    "cpu_hz", "width", "alpha", "beta", "local_steps", "t_cmp_s", "t_com_s", "e_cmp_j", "e_com_j",
    "bits_planned", "bits", "t_max_s", "e_max_j",
)  # fmt: skip
"""The first columns of the ``device_rounds`` table, in order (the method's own columns follow them)."""


@dataclass(frozen=True, eq=False)
class RoundRecord:
    """One round as recorded: its ``rounds`` row (numbers by column, :func:`edgefl.engine.round_steps.rounds_row`) and its
    ``device_rounds`` block (columns, shape (rows,) each)."""

    row: dict[str, float]
    block: dict[str, np.ndarray]


@dataclass(eq=False)
class Records:
    """Every completed round's row and device block, in round order (append-only)."""

    round_rows: list[dict[str, float]] = field(default_factory=list)
    device_blocks: list[dict[str, np.ndarray]] = field(default_factory=list)

    def append(self, record: RoundRecord) -> None:
        self.round_rows.append(record.row)
        self.device_blocks.append(record.block)

    def tables(self, *, release: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The ``rounds`` and ``device_rounds`` tables. ``release`` (the run is over) lets the device table reuse
        the blocks' memory; the records cannot be used afterwards."""
        return _frame(self.round_rows, ROUND_COLUMNS), _device_frame(self.device_blocks, release=release)


def _budget(e_max_j: np.ndarray) -> np.ndarray:
    """E_max as recorded: empty (NaN) when the scenario sets no budget."""
    return np.where(np.isfinite(e_max_j), e_max_j, math.nan)


def _or_nan(values: np.ndarray | None, m: int) -> np.ndarray:
    """``values`` as floats, shape (m,), or m NaNs when None."""
    return np.full(m, math.nan) if values is None else np.asarray(values, dtype=float)


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(columns))
    extra = [c for c in df.columns if c not in columns]
    return df[list(columns) + extra]


def _device_frame(blocks: list[dict[str, np.ndarray]], *, release: bool = False) -> pd.DataFrame:
    """All rounds' device blocks as one table.

    The float columns are copied once into one preallocated 2-D array that becomes the frame's single float
    block (no second copy when pandas consolidates); other columns are inserted beside it. With ``release``
    each block's float columns are dropped as soon as they are copied, so peak memory stays near one copy of
    the table (10^6 rows at 10^4 devices x 100 rounds).
    """
    if not blocks:
        return pd.DataFrame(columns=list(DEVICE_COLUMNS))
    names = list(blocks[0])
    floats = [k for k in names if blocks[0][k].dtype == np.float64]
    rows = sum(len(b["device"]) for b in blocks)
    data = np.empty((len(floats), rows))
    for j, name in enumerate(floats):
        at = 0
        for b in blocks:
            col = b.pop(name) if release else b[name]
            data[j, at : at + col.size] = col
            at += col.size
    frame = pd.DataFrame(data.T, columns=floats, copy=False)
    for pos, name in enumerate(names):
        if name not in floats:
            frame.insert(pos, name, np.concatenate([b[name] for b in blocks]))
    return frame


def device_block(
    *,
    r: int,
    jobs: Mapping[str, np.ndarray],
    skipped_device: np.ndarray,
    skipped_reason: np.ndarray,
    times: JobTimes,
    work: RoundWork,
    distance_m: np.ndarray,
    rate_bps: np.ndarray,
    e_max_j: np.ndarray,
    t_max_s: float | None,
    e_cmp_j: np.ndarray,
    e_com_j: np.ndarray,
    e_down_j: np.ndarray,
    extra: dict[str, np.ndarray],
    profiles: np.ndarray | None = None,
    e_static_j: np.ndarray | None = None,
    e_idle_j: np.ndarray | None = None,
    bandwidth_hz: np.ndarray | None = None,
    tx_power_w: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Round (server update) ``r``'s device rows as columns (jobs, then skipped devices), sorted by device id.

    ``jobs``: the jobs' planned columns by name (:meth:`edgefl.methods.base.JobTable.columns`: ``device`` (ints),
    ``cpu_hz``, ``width``, ``alpha``, ``beta``, ``bits_planned`` and the planned costs), shape (m,) each; ``times``:
    what happened to them on the clock; ``work``: what they did; ``skipped_device`` and ``skipped_reason``: the
    selected devices that sat out and why, shape (s,). Per row (jobs, then the devices that sat out; shape (m +
    s,)): ``distance_m`` [m] and the energy budget ``e_max_j`` [J] (inf: none); per job (shape (m,)): the uplink
    ``rate_bps`` [bit/s] and the energies charged ``e_cmp_j``, ``e_com_j``, ``e_down_j`` [J]; ``t_max_s``: the round
    deadline [s] (None: none). ``extra``: the method's own columns, one value per job (skipped devices get NaN).
    ``profiles``: the fleet's catalogue profile keys, shape (n_devices,), indexed by device id ('' for none; None:
    no device has one). ``e_static_j`` (the static part of ``e_cmp_j``) and ``e_idle_j`` (idle waiting) [J], per job
    (shape (m,)): None records zeros; skipped devices get 0. ``bandwidth_hz`` [Hz] and ``tx_power_w`` [W], per job
    (shape (m,)): its uplink sub-band and transmit power (the round's allocation); None and skipped devices: NaN."""
    skip = skipped_device
    flops, bits, steps, losses = work.flops, work.bits, work.steps, work.losses
    m, s = jobs["device"].size, skip.size
    nan_s, zero_s = np.full(s, math.nan), np.zeros(s)
    dev = np.concatenate([jobs["device"], skip])
    status = times.status
    reason = np.where(np.isin(status, ("cancelled", "offline", "packet error")), status, "")
    cols: dict[str, np.ndarray] = {
        "round": np.full(m + s, r, dtype=np.int64),
        "device": dev,
        "selected": np.ones(m + s, dtype=bool),
        "trained": np.concatenate([flops > 0, np.zeros(s, dtype=bool)]),  # an estimating job computes nothing
        "feasible": np.arange(m + s) < m,
        "reason": np.concatenate([reason.astype(object), skipped_reason.astype(object)]),
        "arrived": np.concatenate([times.kept_mask, np.zeros(s, dtype=bool)]),
        "distance_m": distance_m,
        "rate_bps": np.concatenate([rate_bps, nan_s]),
        "cpu_hz": np.concatenate([jobs["cpu_hz"], nan_s]),
        "width": np.concatenate([jobs["width"], nan_s]),
        "alpha": np.concatenate([jobs["alpha"], nan_s]),
        "beta": np.concatenate([jobs["beta"], nan_s]),
        "local_steps": np.concatenate([steps, np.zeros(s, dtype=np.int64)]),
        "t_cmp_s": np.concatenate([times.cmp_done_s, zero_s]),
        "t_com_s": np.concatenate([times.com_done_s, zero_s]),
        "e_cmp_j": np.concatenate([e_cmp_j, zero_s]),
        "e_com_j": np.concatenate([e_com_j, zero_s]),
        "bits_planned": np.concatenate([jobs["bits_planned"], nan_s]),
        "bits": np.concatenate([bits, zero_s]),
        "t_max_s": np.full(m + s, math.nan if t_max_s is None else t_max_s),
        "e_max_j": _budget(e_max_j),
        "t_start_s": np.concatenate([times.t_start_s, nan_s]),
        "t_arrive_s": np.concatenate([times.t_arrive_s, nan_s]),
        "flops": np.concatenate([flops, zero_s]),
        "train_loss": np.concatenate([losses, nan_s]),
        "t_cmp_planned_s": np.concatenate([jobs["t_cmp_planned_s"], nan_s]),
        "t_com_planned_s": np.concatenate([jobs["t_com_planned_s"], nan_s]),
        "e_cmp_planned_j": np.concatenate([jobs["e_cmp_planned_j"], nan_s]),
        "e_com_planned_j": np.concatenate([jobs["e_com_planned_j"], nan_s]),
        "t_down_s": np.concatenate([times.t_down_s, nan_s]),
        "t_end_s": np.concatenate([times.t_end_s, nan_s]),
        "e_down_j": np.concatenate([e_down_j, zero_s]),
        "profile": np.full(m + s, "", dtype=object) if profiles is None else np.asarray(profiles, dtype=object)[dev],
        "e_static_j": np.concatenate([np.zeros(m) if e_static_j is None else np.asarray(e_static_j, float), zero_s]),
        "e_idle_j": np.concatenate([np.zeros(m) if e_idle_j is None else np.asarray(e_idle_j, float), zero_s]),
        "bandwidth_hz": np.concatenate([_or_nan(bandwidth_hz, m), nan_s]),
        "tx_power_w": np.concatenate([_or_nan(tx_power_w, m), nan_s]),
    }
    for name, values in extra.items():  # numbers as floats (NaN when skipped), anything else as text ("")
        col = np.asarray(values)
        if col.dtype.kind in "biuf":
            cols[name] = np.concatenate([col.astype(float), nan_s])
        else:
            cols[name] = np.concatenate([col.astype(object), np.full(s, "", dtype=object)])
    order = np.argsort(dev, kind="stable")
    return {name: col[order] for name, col in cols.items()}
