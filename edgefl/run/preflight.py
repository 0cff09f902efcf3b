"""The check before round 1: can any device ever finish a job under the round's rules?

A job must fit the round deadline ``T_max`` (``round.policy = "deadline"``), the device's per-round energy budget
``E_max`` (``fleet.budget``) and its online periods (``fleet.availability``: a diurnal window, or the longest
interval of a trace). Each device is tried at its best: the method plans it (its own planning seam,
:meth:`~edgefl.methods.base.Method.plan_round`, which picks the frequency and the payload) with the devices
selected in blocks (:data:`CHUNK`), its best uplink rate and its largest budget; the cost model
(:mod:`edgefl.fleet.costs`) gives the download. The best rate is the device's own when it transmits alone in the band (under ``"split"``: the whole
band), at its distance (static devices) or at the closest a moving device gets (``min_distance_m``), with
shadowing and fading at their median (a lucky fade can be faster; none is assumed).

No device able: :class:`PreflightError` in one line giving the fastest device's time or the cheapest device's
energy against the limit (the CLI exits 2 before anything is written). Fewer able than a round wants: a
warning, returned for ``summary.json``'s ``warnings``. Without a deadline, budget or limiting availability every
job finishes eventually and nothing is checked. The method's memory is restored after planning.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from edgefl.methods.base import JobTable, RoundContext, RoundPlan
from edgefl.errors import ScenarioError

if TYPE_CHECKING:
    from edgefl.scenario.sections import AvailabilityConfig
    from edgefl.engine.driver import Run

__all__ = ["PreflightError", "preflight", "best_rates_bps", "best_budgets_j", "CHUNK"]

CHUNK = 4096
"""Devices planned together in the check (at least the devices a round wants)."""


class PreflightError(ScenarioError):
    """No device can ever finish a job under the scenario's round rules."""


def best_rates_bps(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(uplink rate [bit/s], channel gain [linear]) of every device at its best, shape (n,) each: alone in the band,
    at its own distance (static) or at the closest allowed (moving), median shadowing and fading."""
    from channel import distances_m

    floor_m = run.radio.floor_m
    d = np.maximum(distances_m(run.radio.positions_m), floor_m)
    if run.radio.moving:
        d = np.full_like(d, floor_m)
    gain = 10.0 ** (-run.radio.model.pathloss_db(d) / 10.0)  # dB -> linear: a loss of L dB is a gain of 10^(-L/10)
    alone = replace(run.radio.model, bandwidth_mode="fixed")  # band_hz to each: alone in the band under "split"
    return alone.rates_bps(gain, run.fleet.tx_power_w), gain


def best_budgets_j(run: Run) -> np.ndarray:
    """The largest per-round energy budget E_max [J] each device can draw, shape (n,) (inf without budgets)."""
    b, n = run.rules.budget, run.fleet.n_devices
    if b.kind == "none":
        return np.full(n, np.inf)
    if b.kind == "uniform":
        return np.full(n, b.high_j)
    return np.full(n, b.value_j[1] if isinstance(b.value_j, tuple) else b.value_j)


def _online_limit_s(cfg: AvailabilityConfig, n: int) -> np.ndarray:
    """The longest time [s] each of ``n`` devices can stay online under ``cfg``, shape (n,): inf unless a diurnal
    window (the longest the range allows) or a trace limits it."""
    from edgefl.fleet.availability import read_trace

    if cfg.kind == "diurnal":
        hours = cfg.window_length_h[1] if isinstance(cfg.window_length_h, tuple) else cfg.window_length_h
        return np.full(n, np.inf if hours >= 24 else hours * 3600.0)
    if cfg.kind == "trace":
        intervals = read_trace(cfg.trace_path, n)
        return np.array([max((off - on for on, off in rows), default=0.0) for rows in intervals])
    return np.full(n, np.inf)


def _download_s(run: Run, gain: np.ndarray) -> np.ndarray:
    """Each device's download time [s] at its best, shape (n,): ``round.downlink_s``, or the full model over its
    own downlink alone in the band (cost model's :meth:`~edgefl.fleet.costs.CostModel.download`)."""
    rules, n = run.rules, run.fleet.n_devices
    if rules.downlink_rx_power_w is None:  # no downlink model
        return np.full(n, rules.downlink_s)
    alone = replace(run.radio.downlink, bandwidth_mode="fixed")
    rate = alone.rates_bps(gain, run.radio.bs_power_w)
    bits = float(run.workload.update_bits_at(rules.width))
    return run.costs.download(np.arange(n), bits=bits, rate_bps=rate, rx_power_w=rules.downlink_rx_power_w)[0]


def preflight(run: Run, *, availability: AvailabilityConfig) -> list[str]:
    """Check that some device of ``run`` can finish a job (see the module) while ``availability`` (the fleet's
    ``[fleet.availability]`` section) keeps it online; return the warnings, raise :class:`PreflightError` when
    none can. Devices are planned in blocks of ``max(devices a round wants, CHUNK)`` in id order, stopping once
    enough are able, so a large fleet that can run is not planned whole."""
    n = run.fleet.n_devices
    t_max = run.t_max_s
    online_s = _online_limit_s(availability, n)
    budgeted = run.rules.budget.kind != "none"
    if t_max is None and not budgeted and not np.any(np.isfinite(online_s)):
        return []
    rate, gain = best_rates_bps(run)
    e_max = best_budgets_j(run)
    down_s = _download_s(run, gain)
    ctx = RoundContext(
        round_index=1, selected=np.arange(0), rate_bps=rate, e_max_j=e_max,
        t_budget_s=None if t_max is None else t_max - float(np.min(down_s)), costs=run.costs,
        rng=run.streams.lazy_numpy("preflight"),
    )  # fmt: skip
    chunk, plans, able = max(run.n_select, CHUNK), [], 0
    memory = run.method.state_dict()
    try:
        for start in range(0, n, chunk):
            plan = run.method.plan_round(replace(ctx, selected=np.arange(start, min(n, start + chunk))))
            plans.append(plan)
            able += int(np.count_nonzero(_able(plan.jobs, down_s, t_max, e_max, online_s)[0]))
            if able >= run.n_select:
                return []
    finally:
        run.method.load_state_dict(memory)
    limits = _limits_text(run, t_max, availability.kind, online_s)
    if able == 0:
        plan = RoundPlan(JobTable.concat(*(p.jobs for p in plans)), np.concatenate([p.skipped_device for p in plans]),
                         np.concatenate([p.skipped_reason for p in plans]))  # fmt: skip
        _, t_job, e_job = _able(plan.jobs, down_s, t_max, e_max, online_s)
        raise PreflightError(f"no device can ever finish a job under {limits}, even at its best: "
                             f"{_closest_miss(run, plan, t_job, e_job, e_max, online_s)}")  # fmt: skip
    return [f"only {able} of {n} devices can finish a job under {limits}, even at their best; a round wants "
            f"{run.n_select}, so rounds keep fewer updates"]  # fmt: skip


def _able(jobs: JobTable, down_s, t_max, e_max, online_s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whether each planned job fits every limit, its time [s] with the download, its energy [J]), shape (m,)."""
    dev = jobs.device
    t_job = down_s[dev] + jobs.t_cmp_planned_s + jobs.t_com_planned_s
    e_job = jobs.e_cmp_planned_j + jobs.e_com_planned_j
    fits = (e_job <= e_max[dev]) & (t_job <= online_s[dev])
    if t_max is not None:
        fits &= t_job <= t_max
    return fits, t_job, e_job


def _limits_text(run: Run, t_max: float | None, availability: str, online_s: np.ndarray) -> str:
    """The limits that bind, as the scenario's keys: the deadline, the budget, the ``availability`` kind."""
    parts = []
    if t_max is not None:
        parts.append(f"round.deadline_s={t_max:g} s")
    if run.rules.budget.kind != "none":
        parts.append(f"fleet.budget ({run.rules.budget.kind})")
    if np.any(np.isfinite(online_s)):
        parts.append(f"fleet.availability ({availability})")
    return " and ".join(parts)


def _closest_miss(run, plan, t_job, e_job, e_max, online_s) -> str:
    """How far off the best devices are: the fastest job's time against the deadline, the cheapest job's energy
    against its budget, the longest online period against the job's time (those that limit the run)."""
    jobs, t_max = plan.jobs, run.t_max_s
    if len(jobs) == 0:
        reasons = "; ".join(str(r) for r in sorted(set(plan.skipped_reason.tolist()))[:1])
        return f"{run.method.name} plans no device ({reasons}); {_full_job(run, e_max, t_max)}"
    dev, parts = jobs.device, []
    if t_max is not None:
        i = int(np.argmin(t_job))
        rel = ">" if t_job[i] > t_max else "<="
        parts.append(f"the fastest (device {dev[i]}, f_max {run.fleet.f_max_hz[dev[i]] / 1e9:g} GHz) needs "
                     f"{t_job[i]:.4g} s {rel} round.deadline_s={t_max:g} s")  # fmt: skip
    if run.rules.budget.kind != "none":
        i = int(np.argmin(e_job - e_max[dev]))
        rel = ">" if e_job[i] > e_max[dev[i]] else "<="
        parts.append(f"the cheapest (device {dev[i]}) needs {e_job[i]:.4g} J {rel} its largest budget "
                     f"{e_max[dev[i]]:.4g} J")  # fmt: skip
    if np.any(np.isfinite(online_s)):
        i = int(np.argmin(t_job - online_s[dev]))
        parts.append(f"device {dev[i]} needs {t_job[i]:.4g} s online, its longest online period is "
                     f"{online_s[dev[i]]:.4g} s")  # fmt: skip
    return "; ".join(parts)


def _full_job(run: Run, e_max: np.ndarray, t_max: float | None) -> str:
    """The full model's job at f_max (fastest) or at the least-energy frequency (cheapest; f_min in the papers'
    model) and the best rate, from the cost model: the
    figure to set against the limit when the method plans no device at all."""
    from edgefl.learning.config import steps_per_round

    wl, costs, fleet, n = run.workload, run.costs, run.fleet, run.fleet.n_devices
    dev = np.arange(n)
    steps = steps_per_round(wl.train_config, wl.n_samples[dev])
    cycles = costs.cycles(dev, wl.flops_per_sample(run.rules.width) * wl.samples_per_round(dev))
    rate, gain = best_rates_bps(run)
    t_com, e_com = costs.upload(dev, bits=float(wl.update_bits), rate_bps=rate)
    down_s = _download_s(run, gain)
    if t_max is not None:
        t = down_s + costs.compute(dev, cycles=cycles, steps=steps, f_hz=fleet.f_max_hz)[0] + t_com
        i = int(np.argmin(t))
        return f"with the full model and update the fastest (device {i}) needs {t[i]:.4g} s at f_max"
    e = costs.compute(dev, cycles=cycles, steps=steps, f_hz=costs.energy_optimal_hz(dev))[1] + e_com
    i = int(np.argmin(e - e_max))
    at = "its least-energy frequency" if fleet.has_power_parts else "f_min"  # f_min without a static power
    return (f"with the full model and update the cheapest (device {i}) needs {e[i]:.4g} J at {at} "
            f"(budget {e_max[i]:.4g} J)")  # fmt: skip
