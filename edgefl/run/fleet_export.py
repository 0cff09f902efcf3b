"""A scenario's fleet as a device table and back: :func:`fleet_frame` writes the fleet a scenario would draw
(``edgefl fleet SCENARIO --out fleet.csv``), :func:`with_devices` runs a scenario on a pandas DataFrame in the
device-table format. Running a scenario with its own exported table gives identical tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.scenario.device_table import frame_table

if TYPE_CHECKING:
    import pandas as pd

    from edgefl.scenario.loading import Scenario

__all__ = ["fleet_frame", "with_devices"]


def fleet_frame(scenario: Scenario) -> pd.DataFrame:
    """The fleet ``scenario`` would draw (seed applied), one row per device, as a device table: running the
    scenario with this table as ``fleet.devices`` gives the same results.

    Columns: ``device``, ``profile`` (when any device has one), the per-device quantities, the initial position
    ``x_m, y_m`` and ``distance_m`` from the base station [m] (the device table's own ``distance_m`` where it gives
    one, else hypot(x_m, y_m)), and ``n_samples``."""
    import pandas as pd

    from edgefl.run.runner import draw_devices

    devices = draw_devices(scenario)
    built, positions, workload = devices.fleet, devices.radio.positions_m, devices.workload
    data: dict[str, Any] = {"device": np.arange(built.fleet.n_devices)}
    if any(built.profiles):
        data["profile"] = built.profiles
    data.update(built.columns)
    data["x_m"], data["y_m"] = positions[:, 0], positions[:, 1]
    distance_m = np.hypot(positions[:, 0], positions[:, 1])
    table = devices.table
    if table is not None and "distance_m" in table.values:
        given = table.given("distance_m")
        distance_m[given] = table.values["distance_m"][given]
    data["distance_m"] = distance_m
    data["n_samples"] = np.asarray(workload.n_samples, dtype=np.int64)
    return pd.DataFrame(data)


def with_devices(scenario: Scenario, frame: pd.DataFrame) -> Scenario:
    """``scenario`` with ``frame`` (a pandas DataFrame in the device-table format) as its device table; the
    frame is checked here like a file (errors name its row). The returned scenario's ``[fleet]`` section holds the
    table, named ``dataframe:<digest>`` (pickled, the scenario takes it to worker processes; its TOML names it
    only, so save the frame with ``DataFrame.to_csv`` to run it elsewhere)."""
    from edgefl.run.load import scenario_from_dict

    data = scenario.model_dump(mode="json", exclude_none=True)
    data["fleet"].pop("n_devices", None)
    name, table = frame_table(frame)  # `table` is alive while validation finds it by `name`, then the section holds it
    data["fleet"]["devices"] = name
    return scenario_from_dict(data)
