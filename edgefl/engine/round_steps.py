"""Round mechanics both drivers share: the server's uniform selection, the jobs' downloads, the charge of what a
job really did (pro rata up to where it stopped) and the ``rounds`` row.

The synchronous driver (:mod:`edgefl.engine.sync_driver`) uses them once per round, the asynchronous driver
(:mod:`edgefl.engine.async_driver`) once per dispatch (downloads) or per server update (charges, row). They read only
the parts of a run named by :class:`Parts` (:class:`edgefl.engine.driver.Run` has them), so they stand below the drivers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from channel import fdma_bandwidth_hz
from edgefl.fleet.allocation import Allocation, allocate
from edgefl.fleet.costs import prorated_energy_j

if TYPE_CHECKING:
    from edgefl.methods.base import JobTable
    from edgefl.fleet.costs import CostModel
    from edgefl.learning.protocol import Assessment, Learning
    from edgefl.fleet.links import Radio
    from edgefl.engine.round_rules import RoundRules
    from edgefl.engine.clock import JobTimes

__all__ = [
    "Charges", "Parts", "allocation_step", "charge", "downloads", "equal_bandwidth_hz", "rounds_row", "select_devices",
]  # fmt: skip


class Parts(Protocol):
    """The parts of a run the mechanics read: its rules, its workload (model sizes), radio and cost model."""

    @property
    def rules(self) -> RoundRules: ...
    @property
    def workload(self) -> Learning: ...
    @property
    def radio(self) -> Radio: ...
    @property
    def costs(self) -> CostModel: ...


def select_devices(
    rng: np.random.Generator, n_devices: int, k: int, available: np.ndarray | None = None
) -> np.ndarray:
    """Uniform K-of-N sampling without replacement among the ``available`` devices (bool, shape (n,); None:
    all); returns sorted device ids, shape (min(k, available),). With every device available this is the
    same draw as sampling K of N."""
    if available is None or available.all():
        return np.sort(rng.choice(n_devices, size=k, replace=False))
    ids = np.flatnonzero(available)
    return np.sort(ids[rng.choice(ids.size, size=min(k, ids.size), replace=False)])


def downloads(run: Parts, jobs: JobTable, gain: np.ndarray) -> tuple[float | np.ndarray, np.ndarray]:
    """Each job's download time [s] and energy [J]: ``round.downlink_s`` and no energy, or, with
    ``[channel.downlink]``, its (sub)model's bits over its own downlink rate (:meth:`CostModel.download`; the
    jobs' devices share the downlink band). A job downloads the width it trains (``min(job width,
    model.width)``: a submodel for width-shrinking methods). ``gain``: every device's channel gain, shape (n,)."""
    rules, dev = run.rules, jobs.device
    if rules.downlink_rx_power_w is None:
        return rules.downlink_s, np.zeros(len(jobs))
    width = np.minimum(jobs.width, rules.width)
    sizes = {w: float(run.workload.update_bits_at(w)) for w in np.unique(width).tolist()}
    bits = np.array([sizes[w] for w in width.tolist()], dtype=float)
    rate = run.radio.downlink_rates_bps(gain[dev])  # only the jobs' devices receive: their rates alone
    return run.costs.download(dev, bits=bits, rate_bps=rate, rx_power_w=rules.downlink_rx_power_w)


NO_LINK = "no link this round: its SINR is below the link model's minimum"
"""Why a selected device sits a round out when its uplink or downlink rate is 0 (``"truncated_shannon"`` below its
SINR_min, in a deep fade or far from the antenna); never under Shannon's bound, whose rate is positive."""


def without_link(run: Parts, devices: np.ndarray, gain: np.ndarray, *, held: int = 0) -> np.ndarray:
    """Which of ``devices`` (ids, shape (m,)) have no link this round, a bool mask of shape (m,): an uplink rate
    of 0 on the sub-band they would share, or a downlink rate of 0 (with ``[channel.downlink]``). Such a device
    could never finish a job, so the drivers let it sit out (:data:`NO_LINK`) instead of planning it."""
    fleet, radio = run.fleet, run.radio
    dead = radio.rates_bps(gain[devices], fleet.tx_power_w[devices], held=held) <= 0
    if run.rules.downlink_rx_power_w is not None and devices.size:
        dead |= radio.downlink_rates_bps(gain[devices]) <= 0
    return dead


def allocation_step(
    run: Parts, selected: np.ndarray, gain: np.ndarray, *, t_budget_s: float | None, t_before_s: np.ndarray | float
) -> Allocation:
    """The round's allocation (``channel.allocation`` other than ``"equal"``, :func:`edgefl.fleet.allocation.allocate`)
    of the ``selected`` devices (ids, shape (m,)) on the whole uplink band, for the work of a full-width job of
    FedAvg's (its cycles and its uncompressed update): ``gain``, every device's channel gain, shape (n,);
    ``t_budget_s`` [s] the time a device has for compute and upload (None: no deadline, min_energy's weighted form
    with ``channel.allocation_weight``); ``t_before_s`` [s] each device's download (part of min_time's finish)."""
    rules, wl, costs = run.rules, run.workload, run.costs
    cycles = costs.cycles(selected, wl.flops_per_sample(rules.width) * wl.samples_per_round(selected))
    return allocate(
        rules.allocation, costs=costs, radio=run.radio.model, devices=selected, gain=gain[selected], cycles=cycles,
        bits=float(wl.update_bits), deadline_s=t_budget_s, weight=rules.allocation_weight,
        t_before_s=t_before_s,
    )  # fmt: skip


def equal_bandwidth_hz(run: Parts, n_sharing: int) -> float:
    """The uplink sub-band [Hz] of a device under ``"equal"``: the band as ``channel.bandwidth_mode`` says, shared by
    ``n_sharing`` devices (>= 1) under ``"split"``."""
    model = run.radio.model
    return fdma_bandwidth_hz(model.bandwidth_mode, max(int(n_sharing), 1), model.band_hz)


@dataclass(frozen=True, eq=False)
class Charges:
    """What each job is charged [J], shape (m,) each: computing, uploading, downloading; ``total_j`` the sum over
    the jobs (downloads only under the downlink model; idle waits when charged). ``e_static_j``: the static part
    of ``e_cmp_j`` (the device's static power over the compute time done; 0 in the papers' model); ``e_idle_j``:
    waiting for a TDMA slot at the static power under ``round.charge_idle`` (None: nothing charged)."""

    e_cmp_j: np.ndarray
    e_com_j: np.ndarray
    e_down_j: np.ndarray
    total_j: float
    e_static_j: np.ndarray
    e_idle_j: np.ndarray | None = None


def charge(
    run: Parts, times: JobTimes, *, dev: np.ndarray, e_cmp_j: np.ndarray, e_com_j: np.ndarray, e_down_j: np.ndarray
) -> Charges:
    """The planned energies [J] of the jobs of ``times`` (a round's :class:`~edgefl.engine.clock.RoundOutcome`) charged up
    to where each stopped: a job cancelled at the cut-off or lost offline pays each phase pro rata of the time it
    spent in it (:func:`edgefl.fleet.costs.prorated_energy_j`); every job, kept or not, counts in the total.
    Under TDMA with ``round.charge_idle`` the time each job waited for the channel is charged at its static
    power (:meth:`edgefl.fleet.costs.CostModel.idle_energy_j`; 0 in the papers' model)."""
    e_cmp = prorated_energy_j(e_cmp_j, times.t_cmp_s, times.cmp_done_s)
    e_com = prorated_energy_j(e_com_j, times.t_com_s, times.com_done_s)
    e_down = prorated_energy_j(e_down_j, times.t_dl_s, times.dl_done_s)
    total = float(np.sum(e_cmp) + np.sum(e_com))
    if run.rules.downlink_rx_power_w is not None:
        total += float(np.sum(e_down))
    e_idle = None
    if run.rules.charge_idle and times.wait_done_s is not None:
        e_idle = run.costs.idle_energy_j(dev, times.wait_done_s)
        total += float(np.sum(e_idle))
    return Charges(e_cmp, e_com, e_down, total, run.costs.static_energy_j(dev, times.cmp_done_s), e_idle)


def rounds_row(
    *,
    run: Parts,
    r: int,
    start_s: float,
    end_s: float,
    energy_before_j: float,
    charges: Charges,
    selected: int,
    arrived: int,
    dropped: int,
    bits_up: float,
    seen: Assessment,
    skipped: int,
    learning_gain: float,
    available: int,
    wall0: float,
    **extra: float,
) -> dict[str, float]:
    """The ``rounds`` row of round (server update) ``r``: its end time [s], its duration since the previous one
    [s] (a wait for an online device included), its energy and the run's so far [J], the jobs ``selected``
    (dispatched), ``arrived`` (aggregated) and ``dropped``, the uplink bits, the assessment ``seen``, the
    devices ``skipped`` (sat out), the ``learning_gain``, the devices wanted and ``available`` (online and idle
    at the selection), the wall time since ``wall0`` (:func:`time.perf_counter`) [s]; then ``extra`` columns and,
    when the run records it, the global training loss."""
    row: dict[str, float] = {
        "round": r,
        "sim_time_s": end_s,
        "round_time_s": end_s - start_s,
        "energy_j": charges.total_j,
        "energy_cum_j": energy_before_j + charges.total_j,
        "selected": selected,
        "arrived": arrived,
        "dropped": dropped,
        "bits_up": bits_up,
        "test_accuracy": seen.test_accuracy,
        "test_loss": seen.test_loss,
        "train_loss": seen.train_loss,
        "wall_time_s": time.perf_counter() - wall0,
        "skipped": skipped,
        "learning_gain": learning_gain,
        "wanted": run.rules.n_select,  # fewer are selected when fewer are online and idle
        "available": available,
        **extra,
    }
    if run.rules.global_loss:
        row["global_train_loss"] = seen.global_train_loss
    return row

