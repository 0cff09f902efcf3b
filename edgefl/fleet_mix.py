"""A run's fleet from its sources, in order of precedence, the more specific first: the user's device table
(explicit cells, then the profile its ``profile`` column names for that device), the scenario's own keys the user
set (``fleet.f_max_ghz = 1.5`` in the scenario file or with ``--set``: every device takes that value or draws from
that range), the profiles the ``fleet.profiles`` mix draws, and the scenario's draws from its defaults. A key left
at its default never overrides a profile.

Draws always happen, from the same streams as a fleet without profiles or table, so a table that gives nothing
changes nothing. The profile of each device in a mix is drawn from its own ``profiles`` stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.catalogue import FLEET_FIELDS, catalogue, profile
from edgefl.errors import ScenarioError
from edgefl.fleet_table import (
    FRAME_PREFIX, STEP_COST_FIELDS, DeviceTable, check_cpu_power, read_device_table, register_frame, table_of,
)
from edgefl.system import Fleet, draw_columns

if TYPE_CHECKING:
    import pandas as pd

    from edgefl.config import FleetConfig
    from edgefl.scenario import Scenario
    from edgefl.seeding import Streams

__all__ = ["FleetBuild", "build_fleet", "checked_fleet_data", "explicit_fields", "without_profile_defaults",
           "device_profiles", "placed_positions", "resized_partition", "table_sample_sizes", "fleet_frame", "with_devices"]  # fmt: skip


def checked_fleet_data(data: Any) -> Any:
    """The ``[fleet]`` dict with ``n_devices`` set to its device table's rows (read and checked here, at load; a
    ``n_devices`` given beside a table must equal them) and its profile names checked against the catalogue;
    raises :class:`ScenarioError` naming the key."""
    if not isinstance(data, dict):
        return data
    devices = data.get("devices")
    if devices is not None:
        if not isinstance(devices, str):
            raise ScenarioError(f"fleet.devices={devices!r}: must be the path of a .csv or .parquet file")
        table = read_device_table(devices)
        if not devices.startswith(FRAME_PREFIX):
            devices = str(Path(devices).expanduser().resolve())  # the resolved scenario names it from anywhere
        given = data.get("n_devices")
        if given is not None and given != table.n_devices:
            raise ScenarioError(f"fleet.n_devices={given!r} but the device table {table.where} has "
                                f"{table.n_devices} device rows; give n_devices = {table.n_devices} or leave it "
                                "out (the table's rows are the fleet)")  # fmt: skip
        data = {**data, "n_devices": table.n_devices, "devices": devices}  # the table's rows are the fleet
        if "e_max_j" in table.values:
            raise ScenarioError(f"device table {table.where}: column e_max_j is read only by `edgefl optimize "
                                "anycost`; a run draws energy budgets from fleet.budget")  # fmt: skip
        step_given = [c for c in STEP_COST_FIELDS if c in table.values]
        costs = data.get("step_costs")
        kind = costs.get("kind", "none") if isinstance(costs, dict) else "none"
        if step_given and kind == "none":
            raise ScenarioError(f"device table {table.where}: column(s) {', '.join(step_given)} need "
                                "fleet.step_costs.kind = 'normal' or 'lognormal' (costs given per step)")  # fmt: skip
    mix = data.get("profiles")
    if isinstance(mix, dict):
        for name in mix:
            profile(name, where=f"fleet.profiles.{name}")
    return data


def device_profiles(cfg: FleetConfig, table: DeviceTable | None, streams: Streams) -> list[str]:
    """Each device's catalogue profile ('' for none): the table's ``profile`` cell, else a draw from the
    ``fleet.profiles`` mix (weights normalised to probabilities) on the ``profiles`` stream."""
    n = cfg.n_devices
    names = [""] * n
    if cfg.profiles:
        keys = list(cfg.profiles)
        weights = np.array([cfg.profiles[k] for k in keys], dtype=float)
        picks = streams.numpy("profiles").choice(len(keys), size=n, p=weights / weights.sum())
        names = [keys[i] for i in picks]
    if table is not None:
        names = [t or d for t, d in zip(table.profiles, names)]
    return names


@dataclass(frozen=True)
class FleetBuild:
    """The fleet and what went into it: ``columns`` (each per-device quantity before
    ``flops_per_cycle_scale``) and ``profiles`` (each device's catalogue profile, '' for none)."""

    fleet: Fleet
    columns: dict[str, np.ndarray]
    profiles: list[str]


def explicit_fields(cfg: FleetConfig) -> set[str]:
    """The profile quantities (:data:`~edgefl.catalogue.FLEET_FIELDS`) the scenario sets itself, in its file or
    with ``--set``, in SI or engineer units: these keep the scenario's value on a device whose profile the
    ``fleet.profiles`` mix drew."""
    return set(FLEET_FIELDS) & cfg.model_fields_set


def without_profile_defaults(cfg: FleetConfig, dumped: Any) -> Any:
    """``cfg`` as dumped (the resolved scenario), less the profile quantities it left at their defaults when a
    profile mix sets them: loading the dump again gives the same :func:`explicit_fields`, hence the same fleet."""
    if not isinstance(dumped, dict) or not cfg.profiles:
        return dumped
    unset = set(FLEET_FIELDS) - explicit_fields(cfg)
    return {k: v for k, v in dumped.items() if k not in unset}


def build_fleet(cfg: FleetConfig, n_samples: np.ndarray, streams: Streams) -> FleetBuild:
    """The fleet of a scenario's ``[fleet]`` section: draws (streams ``fleet`` and ``step_costs``), then the
    profiles' values (a profile the mix drew: only the quantities the scenario does not set itself,
    :func:`explicit_fields`; a profile the table names: all), then the device table's explicit cells."""
    cols = draw_columns(cfg, streams.numpy("fleet"), streams.numpy("step_costs"))
    table = table_of(cfg)
    names = device_profiles(cfg, table, streams)
    profiles = catalogue()
    from_mix = [fld for fld in FLEET_FIELDS if fld not in explicit_fields(cfg)]
    in_table = table.profiles if table is not None else ("",) * len(names)
    for i, name in enumerate(names):
        if name:
            p = profiles[name]
            for fld in FLEET_FIELDS if in_table[i] else from_mix:
                cols[fld][i] = getattr(p, fld)
    if cfg.profiles and len(from_mix) < len(FLEET_FIELDS):
        # an explicit f_max below a mix profile's f_min lowers that f_min (an explicit f_min raises f_max)
        if "f_min_hz" in from_mix:
            cols["f_min_hz"] = np.minimum(cols["f_min_hz"], cols["f_max_hz"])
        cols["f_max_hz"] = np.maximum(cols["f_min_hz"], cols["f_max_hz"])
    if table is not None:
        for fld, col in table.values.items():
            if fld in cols:
                given = ~np.isnan(col)
                cols[fld][given] = col[given]
        explicit_min = table.given("f_min_hz")
        low = cols["f_min_hz"] > cols["f_max_hz"]
        cols["f_min_hz"] = np.where(low & ~explicit_min, cols["f_max_hz"], cols["f_min_hz"])
        bad = np.flatnonzero(cols["f_min_hz"] > cols["f_max_hz"])
        if bad.size:
            i = int(bad[0])
            raise ScenarioError(f"device table {table.where} {table.row_labels[i]}: f_min_hz "
                                f"{cols['f_min_hz'][i] / 1e9:g} GHz exceeds this device's f_max "
                                f"{cols['f_max_hz'][i] / 1e9:g} GHz (from its profile or the scenario)")  # fmt: skip
        for i in np.flatnonzero(table.given("energy_coeff") | table.given("f_max_hz")):
            check_cpu_power(table.where, table.row_labels[i], cols["energy_coeff"][i], cols["f_max_hz"][i])
    scaled = {**cols, "flops_per_cycle": cols["flops_per_cycle"] * cfg.flops_per_cycle_scale}
    fleet = Fleet(n_samples=np.asarray(n_samples, dtype=np.int64), **scaled)
    return FleetBuild(fleet=fleet, columns=cols, profiles=names)


def placed_positions(cfg: FleetConfig, drawn_m: np.ndarray) -> np.ndarray:
    """Initial positions [m], shape (n, 2): the table's ``x_m, y_m``, or its ``distance_m`` along the drawn
    position's direction, else the drawn position."""
    table = table_of(cfg)
    if table is None:
        return drawn_m
    out = np.array(drawn_m, dtype=float, copy=True)
    if "x_m" in table.values:
        rows = table.given("x_m") & table.given("y_m")
        out[rows, 0] = table.values["x_m"][rows]
        out[rows, 1] = table.values["y_m"][rows]
    if "distance_m" in table.values:
        rows = table.given("distance_m")
        norm = np.hypot(out[rows, 0], out[rows, 1])
        out[rows] = out[rows] / norm[:, None] * table.values["distance_m"][rows, None]
    return out


def table_sample_sizes(cfg: FleetConfig, drawn: np.ndarray, n_train: int) -> np.ndarray:
    """Local data sizes, shape (n,): the table's ``n_samples`` or ``data_share`` x ``n_train`` (at least 1 sample)
    where given, else ``drawn``."""
    sizes = np.asarray(drawn, dtype=np.int64).copy()
    table = table_of(cfg)
    if table is None:
        return sizes
    if "n_samples" in table.values:
        rows = table.given("n_samples")
        sizes[rows] = table.values["n_samples"][rows].astype(np.int64)
    if "data_share" in table.values:
        rows = table.given("data_share")
        sizes[rows] = np.maximum(1, np.floor(table.values["data_share"][rows] * n_train)).astype(np.int64)
    return sizes


def resized_partition(cfg: FleetConfig, parts: list[np.ndarray], n_train: int) -> list[np.ndarray]:
    """The drawn partition if the table sets no data sizes or the sizes it sets are the drawn ones; else the
    same samples (drawn partition first, in order, then the samples no device drew) split into the table's
    sizes."""
    drawn = np.array([p.size for p in parts], dtype=np.int64)
    sizes = table_sample_sizes(cfg, drawn, n_train)
    if np.array_equal(sizes, drawn):
        return parts
    table = table_of(cfg)
    if int(sizes.sum()) > n_train:
        raise ScenarioError(f"device table {table.where}: the devices hold {int(sizes.sum())} samples in all, more "
                            f"than the {n_train} training samples of the dataset")  # fmt: skip
    used = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    rest = np.setdiff1d(np.arange(n_train), used)
    pool = np.concatenate([used, rest])
    bounds = np.cumsum(sizes)[:-1]
    return [np.sort(p) for p in np.split(pool[: int(sizes.sum())], bounds)]


def fleet_frame(scenario: Scenario) -> pd.DataFrame:
    """The fleet ``scenario`` would draw (seed applied), one row per device, as a device table: running the
    scenario with this table as ``fleet.devices`` gives the same results."""
    import pandas as pd

    from edgefl.radio import Radio
    from edgefl.runner import _workload
    from edgefl.seeding import Streams

    streams = Streams(scenario.seed)
    workload = _workload(scenario, streams)
    built = build_fleet(scenario.fleet, workload.n_samples, streams)
    radio = Radio(scenario.channel, scenario.fleet.n_devices, streams)
    positions = placed_positions(scenario.fleet, radio.positions_m)
    data: dict[str, Any] = {"device": np.arange(built.fleet.n_devices)}
    if any(built.profiles):
        data["profile"] = built.profiles
    data.update(built.columns)
    data["x_m"], data["y_m"] = positions[:, 0], positions[:, 1]
    data["n_samples"] = np.asarray(workload.n_samples, dtype=np.int64)
    return pd.DataFrame(data)


def with_devices(scenario: Scenario, frame: pd.DataFrame) -> Scenario:
    """``scenario`` with ``frame`` (a pandas DataFrame in the device-table format) as its device table; the
    frame is checked here like a file (errors name its row). It lives in this process only."""
    from edgefl.scenario import scenario_from_dict

    data = scenario.model_dump(mode="json", exclude_none=True)
    data["fleet"].pop("n_devices", None)
    data["fleet"]["devices"] = register_frame(frame)
    return scenario_from_dict(data)
