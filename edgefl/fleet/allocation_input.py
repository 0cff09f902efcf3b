"""A device table (:mod:`edgefl.scenario.device_table`) as the input of the radio-resource allocators
(:mod:`optimizers.alloc_min_time`, :mod:`optimizers.alloc_min_energy`), for ``edgefl optimize allocation``.

Each device needs its CPU frequency range ``f_min_hz, f_max_hz`` [Hz], ``energy_coeff`` eps [J/(cycle Hz^2)],
maximum transmit power ``tx_power_w`` [W] (a cell of its row, or the catalogue profile its ``profile`` cell names),
its computation in one round ``cycles`` and its uplink power gain: ``gain_db`` [dB] (path loss and shadowing
included), else from its position (``distance_m``, or ``x_m`` and ``y_m``) by the path loss.

Two physics (:class:`AllocationPhysics`):

- Yang et al.'s own model (the default): the Shannon rate ``b log2(1 + g p / (N0 b))``, compute energy
  ``eps c f^2``, radiated upload energy ``p t``, thermal noise N0, and their path loss ``128.1 + 37.6 log10(d /
  km)`` with no shadowing for a device given by its position (notes on Yang et al., §4 and §9 [CODE]);
- a scenario's (:func:`scenario_physics`): its noise (with its interference over thermal), its path-loss model and
  the power parts of its fleet (static power, the radio's circuit power, PA efficiency), charged by the cost model
  (:mod:`edgefl.fleet.costs`), and its link model (the truncated Shannon link is planned exactly:
  :mod:`optimizers.alloc_min_time_truncated`). What the allocators cannot plan exactly is refused in one line:
  downloads, per-step costs and a position under random shadowing or fading (give ``gain_db``). ``min_energy``
  plans the power parts and the truncated link too (:mod:`optimizers.alloc_min_energy_realistic`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from channel import pathloss_3gpp_macro_db
from edgefl.errors import ScenarioError
from edgefl.fleet.devices import Fleet
from edgefl.scenario.catalogue import catalogue
from edgefl.scenario.device_table import STEP_COST_FIELDS, DeviceTable, read_device_table

if TYPE_CHECKING:
    from edgefl.scenario.loading import Scenario

__all__ = ["AllocationDevices", "AllocationPhysics", "allocation_devices", "scenario_physics", "yang_physics",
           "REQUIRED"]  # fmt: skip

REQUIRED = ("device", "f_min_hz", "f_max_hz", "energy_coeff", "tx_power_w", "cycles")
"""The columns (or profile fields) every device needs, besides ``gain_db`` or a position."""
_POWER_COLUMNS = ("static_power_w", "tx_circuit_power_w", "pa_efficiency", "rx_power_w")


@dataclass(frozen=True)
class AllocationPhysics:
    """What the allocation plans with: noise PSD ``n0_w_per_hz`` [W/Hz]; the path loss [dB] of a distance [m]
    (``pathloss_db``) with the closest distance ``floor_m`` [m]; ``random_gain`` (the scenario's shadowing or
    fading: a position alone does not give the round's gain); the scenario whose fleet's power parts apply (None:
    Yang et al.'s model) and ``where`` (how to name it in messages); ``link_model``: the uplink's rate
    (``"shannon"`` or the scenario's ``"truncated_shannon"``)."""

    n0_w_per_hz: float
    pathloss_db: Callable[[np.ndarray], np.ndarray]
    floor_m: float = 1.0
    random_gain: str | None = None
    scenario: Scenario | None = None
    where: str = "Yang et al.'s model"
    link_model: str = "shannon"


def yang_physics(n0_w_per_hz: float) -> AllocationPhysics:
    """Yang et al.'s model: thermal noise ``n0_w_per_hz`` [W/Hz], path loss 128.1 + 37.6 log10(d/km), no
    shadowing or fading, no power parts."""
    return AllocationPhysics(n0_w_per_hz=n0_w_per_hz, pathloss_db=pathloss_3gpp_macro_db)


def scenario_physics(sc: Scenario, where: str) -> AllocationPhysics:
    """A scenario's physics for the allocation, or :class:`ScenarioError` in one line naming the key the
    allocators cannot plan exactly under."""
    from edgefl.fleet.links import radio_model

    ch = sc.channel
    if ch.downlink is not None or sc.round.downlink_s:
        raise ScenarioError(f"--scenario {where}: the scenario's rounds download the model first "
                            "([channel.downlink] or round.downlink_s), which the allocators do not plan; leave "
                            "both out to plan compute and upload")  # fmt: skip
    if sc.fleet.step_costs.kind != "none":
        raise ScenarioError(f"--scenario {where}: fleet.step_costs.kind={sc.fleet.step_costs.kind!r}: per-step "
                            "costs have no CPU frequency or rate to allocate; use 'none'")  # fmt: skip
    model = radio_model(ch)
    random_gain = None
    if ch.shadowing_db > 0 or ch.rayleigh:
        random_gain = "channel.shadowing_db" if ch.shadowing_db > 0 else "channel.rayleigh"
    return AllocationPhysics(n0_w_per_hz=model.noise_psd_w_per_hz, pathloss_db=model.pathloss_db,
                             floor_m=max(ch.min_distance_m, 1.0), random_gain=random_gain, scenario=sc,
                             where=f"the scenario {where}", link_model=ch.link_model)  # fmt: skip


@dataclass(frozen=True)
class AllocationDevices:
    """The allocators' per-device input, shape (n,), in device order (0..n-1): ``cycles`` of one round, linear
    uplink ``gain``, and ``fleet`` (frequency range, eps, maximum transmit power ``tx_power_w`` and, under a
    scenario's physics, its power parts); ``lines``: each device's line (CSV) or row (Parquet) in the table."""

    cycles: np.ndarray
    gain: np.ndarray
    fleet: Fleet
    lines: list[int]


def _line(label: str) -> int:
    m = re.match(r"(?:line|row) (\d+)", label)
    return int(m.group(1)) if m else 0


def allocation_devices(path: str, physics: AllocationPhysics) -> AllocationDevices:
    """The allocators' devices from the device table at ``path``, under ``physics``; every problem raises
    :class:`ScenarioError` in one line naming the table, the line and the column."""
    table = read_device_table(path)
    n = table.n_devices
    where = f"device table {table.where}"
    if "device" not in _header(path, table):
        raise ScenarioError(f"{where}: missing column device (each row's device index 0..{n - 1}); the allocation "
                            f"needs the columns {', '.join(REQUIRED)} and gain_db or a position")  # fmt: skip
    steps = [c for c in STEP_COST_FIELDS if c in table.values]
    if steps:
        raise ScenarioError(f"{where}: column(s) {', '.join(steps)}: per-step costs have no CPU frequency or rate "
                            "to allocate; give cycles, f_min_hz, f_max_hz, energy_coeff and tx_power_w")  # fmt: skip
    parts = [c for c in _POWER_COLUMNS if c in table.values]
    if parts and physics.scenario is None:
        raise ScenarioError(f"{where}: column(s) {', '.join(parts)}: Yang et al.'s model (the default) has no "
                            "static, circuit or receive power; give --scenario FILE to plan with them")  # fmt: skip
    profiles = catalogue()

    def column(name: str, profile_field: str | None) -> np.ndarray:
        out = table.values.get(name, np.full(n, np.nan)).copy()
        for i in np.flatnonzero(np.isnan(out)):
            p = table.profiles[i]
            if profile_field is None or not p:
                give = f"a {name} column" + ("" if profile_field is None else " or a profile")
                raise ScenarioError(f"{where} {table.row_labels[i]}: no {name}; give {give} (the allocation needs "
                                    f"{', '.join(REQUIRED)} and gain_db or a position)")  # fmt: skip
            out[i] = getattr(profiles[p], profile_field)
        return out

    cycles = column("cycles", None)
    for name in ("f_min_hz", "f_max_hz", "energy_coeff", "tx_power_w"):
        column(name, name)  # each device gives it, in a cell or by its profile
    gain = _gains(table, physics, where)
    fleet = _fleet(table, physics)
    return AllocationDevices(cycles=cycles, gain=gain, fleet=fleet, lines=[_line(s) for s in table.row_labels])


def _header(path: str, table: DeviceTable) -> set[str]:
    """The column names of the table's file (the validated table keeps quantities, not the ``device`` column)."""
    if path.lower().endswith(".csv"):
        import csv

        with open(path, newline="", encoding="utf-8-sig") as handle:
            for row in csv.reader(handle):
                if any(cell.strip() for cell in row):
                    return {cell.strip() for cell in row}
        return set()
    import pandas as pd

    return {str(c) for c in pd.read_parquet(path).columns}


def _gains(table: DeviceTable, physics: AllocationPhysics, where: str) -> np.ndarray:
    """Linear uplink gain per device: ``10^(gain_db/10)``, else the path loss of its position."""
    n = table.n_devices
    gain_db = table.values.get("gain_db", np.full(n, np.nan)).copy()
    missing = np.isnan(gain_db)
    if missing.any():
        d = np.full(n, np.nan)
        if "distance_m" in table.values:
            d = table.values["distance_m"].copy()
        if "x_m" in table.values:
            xy = table.given("x_m") & table.given("y_m")
            d[xy] = np.hypot(table.values["x_m"][xy], table.values["y_m"][xy])
        no_position = np.flatnonzero(missing & np.isnan(d))
        if no_position.size:
            i = int(no_position[0])
            raise ScenarioError(f"{where} {table.row_labels[i]}: no gain_db and no position; give gain_db [dB] "
                                "(uplink power gain, path loss and shadowing included) or distance_m, or x_m and "
                                "y_m")  # fmt: skip
        if physics.random_gain is not None:
            i = int(np.flatnonzero(missing)[0])
            raise ScenarioError(f"{where} {table.row_labels[i]}: a position under {physics.random_gain} of "
                                f"{physics.where} gives a random gain each round; give gain_db [dB], the gain of "
                                "the round to plan")  # fmt: skip
        loss = physics.pathloss_db(np.maximum(d[missing], physics.floor_m))
        gain_db[missing] = -np.asarray(loss, dtype=float)
    return 10.0 ** (gain_db / 10.0)


def _fleet(table: DeviceTable, physics: AllocationPhysics) -> Fleet:
    """The table's devices as a :class:`Fleet` (cells, then the row's profile; under a scenario's physics its
    power parts as a run of that scenario with this table would have them)."""
    from edgefl.fleet.build import build_fleet
    from edgefl.scenario.sections import FleetConfig
    from edgefl.seeding import Streams

    n = table.n_devices
    sc = physics.scenario
    if sc is None:
        cfg, seed, realistic = FleetConfig(n_devices=n), 0, False
    else:
        cfg = sc.fleet.model_copy(update={"n_devices": n, "devices": None})
        seed, realistic = sc.seed, sc.physics == "realistic"
    return build_fleet(cfg, np.ones(n), Streams(seed), table, realistic=realistic).fleet
