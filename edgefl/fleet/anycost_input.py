"""A device table (:mod:`edgefl.scenario.device_table`) as the AnycostFL optimizer's input: each device's data size,
energy coefficient, frequency range and transmit power from its cells or its catalogue profile, and its uplink
rate from its distance with the channel model (AnycostFL Sec. V-A defaults: 3GPP macro path loss
128.1 + 37.6 log10(d/km) dB, 1 MHz per device, -114 dBm/MHz, no fading), AnycostFL eq. (8).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from edgefl.scenario.catalogue import catalogue
from edgefl.errors import ScenarioError
from edgefl.scenario.device_table import COLUMNS, read_device_table
from optimizers.anycost_model import AnycostDevices

__all__ = ["anycost_devices", "is_device_table"]


def is_device_table(path: Path, anycost_columns: tuple[str, ...]) -> bool:
    """Whether ``path`` is a device table rather than the optimizer's own CSV (Parquet always is; a CSV is when
    its header has a device-table column and none of ``anycost_columns`` that a device table does not have)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return True
    try:
        with path.open(encoding="utf-8-sig") as handle:
            header = {c.strip().lower() for c in handle.readline().split(",")}
    except (OSError, UnicodeDecodeError):
        return False
    own = {c.lower() for c in anycost_columns} - set(COLUMNS)  # samples, eps, rate_bps, p_tx_w
    return not (header & own) and any(c in header for c in (*COLUMNS, "profile"))


def _line(label: str) -> int:
    m = re.match(r"(?:line|row) (\d+)", label)
    return int(m.group(1)) if m else 0


def anycost_devices(path: Path, *, e_max_j: float | None) -> tuple[AnycostDevices, list[int]]:
    """The optimizer's devices from a device table, and each device's line (CSV) or row (Parquet) number."""
    from channel import RadioModel

    table = read_device_table(str(path))
    n = table.n_devices
    prof = catalogue()

    def column(name: str, profile_field: str | None) -> np.ndarray:
        out = table.values.get(name, np.full(n, np.nan)).copy()
        for i in np.flatnonzero(np.isnan(out)):
            p = table.profiles[i]
            if profile_field is None or not p:
                what = "an e_max_j column or --e-max-j" if name == "e_max_j" else f"a {name} column or a profile"
                raise ScenarioError(f"device table {table.where} {table.row_labels[i]}: no {name}; give {what}")
            out[i] = getattr(prof[p], profile_field)
        return out

    if "e_max_j" not in table.values and e_max_j is not None:
        if not (e_max_j > 0 and np.isfinite(e_max_j)):
            raise ScenarioError(f"--e-max-j={e_max_j}: must be a finite energy > 0 [J]")
        e_max = np.full(n, float(e_max_j))
    else:
        e_max = column("e_max_j", None)
    if "distance_m" in table.values:
        d_m = column("distance_m", None)
    elif "x_m" in table.values:
        d_m = np.hypot(column("x_m", None), column("y_m", None))
    else:
        raise ScenarioError(f"device table {table.where}: the optimizer needs each device's position "
                            "(distance_m, or x_m and y_m) to compute its uplink rate")  # fmt: skip
    p_tx = column("tx_power_w", "tx_power_w")
    radio = RadioModel()  # AnycostFL Sec. V-A: 3GPP macro, 1 MHz per device, -114 dBm/MHz, no fading
    gain = radio.gain_linear(np.maximum(d_m, 1.0), np.random.default_rng(0))  # no fading: the rng is not drawn
    devices = AnycostDevices(
        samples=column("n_samples", None), eps=column("energy_coeff", "energy_coeff"),
        f_min_hz=column("f_min_hz", "f_min_hz"), f_max_hz=column("f_max_hz", "f_max_hz"), e_max_j=e_max,
        rate_bps=radio.rates_bps(gain, p_tx), p_tx_w=p_tx,
    )  # fmt: skip
    return devices, [_line(label) for label in table.row_labels]
