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
from typing import TYPE_CHECKING

import numpy as np

from edgefl.scenario.catalogue import catalogue
from edgefl.scenario.physics import REALISTIC_PROFILE
from edgefl.scenario.sections import FLEET_FIELDS, POWER_FIELDS
from edgefl.errors import ScenarioError
from edgefl.scenario.device_table import DeviceTable, check_cpu_power
from edgefl.fleet.devices import Fleet, draw_columns, draw_per_device

if TYPE_CHECKING:
    from edgefl.scenario.sections import FleetConfig
    from edgefl.seeding import Streams

__all__ = ["FleetBuild", "build_fleet", "device_profiles", "placed_positions"]


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

    @property
    def profiles(self) -> list[str]:
        """Each device's catalogue profile ('' for none), as the fleet holds them."""
        return [str(p) for p in self.fleet.profiles]


def build_fleet(
    cfg: FleetConfig, n_samples: np.ndarray, streams: Streams, table: DeviceTable | None, *,
    realistic: bool = False, downlink_rx_w: float | None = None,
) -> FleetBuild:  # fmt: skip
    """The fleet of a scenario's ``[fleet]`` section and its device ``table`` (None: none): draws (streams
    ``fleet`` and ``step_costs``), then the profiles' values (a profile the mix drew: only the quantities the
    scenario does not set itself, :meth:`~edgefl.scenario.sections.FleetConfig.explicit_fields`; a profile the
    table names: all), then the table's explicit cells.

    ``realistic`` (``physics = "realistic"``): the power parts come from each device's profile
    (:data:`edgefl.scenario.physics.REALISTIC_PROFILE`'s for a device without one) unless the scenario sets them,
    and a profile's energy coefficient is its dynamic part, (P - P_static) / f^3. ``downlink_rx_w``: the receive
    power ``[channel.downlink]`` sets itself for every device (None: not set)."""
    cols = draw_columns(cfg, streams.numpy("fleet"), streams.numpy("step_costs"))
    names = device_profiles(cfg, table, streams)
    profiles = catalogue()
    from_mix = [fld for fld in FLEET_FIELDS if fld not in cfg.explicit_fields()]
    in_table = table.profiles if table is not None else ("",) * len(names)
    for i, name in enumerate(names):
        if name:
            p = profiles[name]
            for fld in FLEET_FIELDS if in_table[i] else from_mix:
                cols[fld][i] = getattr(p, fld)
            if realistic and (in_table[i] or "energy_coeff" in from_mix):
                cols["energy_coeff"][i] = p.dynamic_energy_coeff
    if cfg.profiles and len(from_mix) < len(FLEET_FIELDS):
        # an explicit f_max below a mix profile's f_min lowers that f_min (an explicit f_min raises f_max)
        if "f_min_hz" in from_mix:
            cols["f_min_hz"] = np.minimum(cols["f_min_hz"], cols["f_max_hz"])
        cols["f_max_hz"] = np.maximum(cols["f_min_hz"], cols["f_max_hz"])
    parts = _power_parts(cfg, names, in_table, streams, table, realistic=realistic, downlink_rx_w=downlink_rx_w)
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
    fleet = Fleet(n_samples=np.asarray(n_samples, dtype=np.int64), profiles=np.array(names, dtype=object),
                  **scaled, **parts)
    return FleetBuild(fleet=fleet, columns={**cols, **{k: v for k, v in parts.items() if v is not None}})


def _power_parts(
    cfg: FleetConfig, names: list[str], in_table, streams: Streams, table: DeviceTable | None, *,
    realistic: bool, downlink_rx_w: float | None,
) -> dict[str, np.ndarray | None]:  # fmt: skip
    """Each device's static power, circuit power, PA efficiency and receive power (None where the papers' model
    holds: no part set by the scenario, a profile under the realistic physics or the table). Precedence: the
    table's cells, the scenario's own keys, the device's profile (realistic), the default profile (realistic),
    the scenario's defaults. A range is drawn from the ``power`` stream, only when the scenario gives one."""
    n = len(names)
    explicit = cfg.explicit_power_fields()
    table_cols = set(table.values) if table is not None else set()
    fields = (*POWER_FIELDS, "rx_power_w")
    if not realistic and not explicit and not (table_cols & set(fields)):
        return dict.fromkeys(fields)  # the papers' model: the cost model's formulas are the papers' own
    rng = streams.numpy("power")
    out = {fld: draw_per_device(getattr(cfg, fld), n, rng) for fld in POWER_FIELDS}
    out["rx_power_w"] = np.full(n, 0.0 if downlink_rx_w is None else float(downlink_rx_w))
    if realistic:
        profiles = catalogue()
        for i, name in enumerate(names):
            p = profiles[name or REALISTIC_PROFILE]
            for fld in POWER_FIELDS:
                if fld not in explicit or (name and in_table[i]):
                    out[fld][i] = getattr(p, fld)
            if downlink_rx_w is None or (name and in_table[i]):
                out["rx_power_w"][i] = p.rx_power_w
    if table is not None:
        for fld in fields:
            if fld in table.values:
                given = table.given(fld)
                out[fld][given] = table.values[fld][given]
    if not realistic and "rx_power_w" not in table_cols:
        out["rx_power_w"] = None  # every device downloads with [channel.downlink]'s receive power
    return out


def placed_positions(table: DeviceTable | None, drawn_m: np.ndarray) -> np.ndarray:
    """Initial positions [m], shape (n, 2): the device ``table``'s ``x_m, y_m``, or (a row without them) its
    ``distance_m`` along the drawn position's direction, else the drawn position."""
    if table is None:
        return drawn_m
    out = np.array(drawn_m, dtype=float, copy=True)
    xy = table.given("x_m") & table.given("y_m")
    if xy.any():
        out[xy, 0] = table.values["x_m"][xy]
        out[xy, 1] = table.values["y_m"][xy]
    if "distance_m" in table.values:
        rows = table.given("distance_m") & ~xy
        norm = np.hypot(out[rows, 0], out[rows, 1])
        out[rows] = out[rows] / norm[:, None] * table.values["distance_m"][rows, None]
    return out
