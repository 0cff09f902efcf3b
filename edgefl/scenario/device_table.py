"""A user's device table (``[fleet] devices = "fleet.csv"``, CSV or Parquet, or a pandas DataFrame from Python):
one row per device, any subset of the per-device quantities as columns.

Columns (SI or the engineer units the scenario takes; converted once, here). A column that sets a scenario
quantity has the allowed range of that ``[fleet]`` or ``[fleet.step_costs]`` field (its
:class:`~edgefl.scenario.limits.Limit` in :mod:`edgefl.scenario.sections`), so a value is allowed in a table exactly when it is
allowed as a scenario key, and an error gives the range in the column's unit (``f_max_ghz`` in GHz,
``tx_power_dbm`` in dBm):

- ``f_min_hz``/``f_min_ghz``, ``f_max_hz``/``f_max_ghz``: CPU frequency range [Hz];
- ``energy_coeff``: eps [J/(cycle Hz^2)]; with ``f_max`` in the same row, the CPU power eps f_max^3 is held to
  the scenario's ceiling too;
- ``flops_per_cycle``: FLOPs per cycle (multiplied by ``fleet.flops_per_cycle_scale`` as the scenario's own
  value is);
- ``tx_power_w`` [W] / ``tx_power_dbm`` [dBm]: the uplink transmit power;
- ``step_time_s``, ``comm_time_s`` [s] and ``step_energy_j``, ``comm_energy_j`` [J]: Luo et al.'s per-step
  costs, only with ``fleet.step_costs.kind`` other than ``"none"``;
- position: ``x_m`` and ``y_m`` [-1e5, 1e5] m, or ``distance_m`` [1, 1e5] m from the base station (the
  device keeps the direction of its drawn position); 100 km is beyond any cell. A row may give all three (a run
  folder's ``fleet.csv`` does): its ``distance_m`` must then agree with hypot(x_m, y_m) within
  :data:`DISTANCE_AGREE_M`, and ``x_m, y_m`` place the device;
- ``n_samples`` (integer in [1, 1e9]) or ``data_share`` (0, 1] of the training set: the device's local data size;
- ``profile``: a device catalogue name (:mod:`edgefl.scenario.catalogue`); its values fill the columns not given;
- the number of rows is ``fleet.n_devices`` (a ``fleet.n_devices`` given beside a table must equal it);
- ``device``: the device's index 0..N-1 in the results (any order; default: the row order);
- ``e_max_j`` [J]: a per-round energy budget (the range of ``fleet.budget.value_j``), read only by ``edgefl
  optimize anycost --devices`` (a run draws its budgets from ``fleet.budget``);
- ``gain_db`` [dB]: the uplink's power gain (path loss and shadowing included, so at most 0 dB) in place of a
  position, and ``cycles``: the CPU cycles of the device's computation in one round, in place of its data and the
  model; both read only by ``edgefl optimize allocation --devices`` (a run computes gains from positions and
  cycles from the model's FLOPs).

An empty cell means "not given" for that device. What a row does not give is drawn as the scenario says, from
the same streams as without a table; the profile a row names replaces draws and the scenario's own keys;
explicit cells replace all (the order of precedence is :mod:`edgefl.fleet.build`'s). Line
numbers in errors count as a text editor does: line 1 is the CSV header, the first device is line 2. A Parquet
file or a DataFrame has no lines: errors name its row, the first device being row 1.
"""

from __future__ import annotations

import csv
import hashlib
import math
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.scenario.catalogue import catalogue, profile
from edgefl.scenario.sections import (
    FLEET_UNITS, MAX_CPU_POWER_W, POWER_FIELDS, BudgetConfig, DownlinkConfig, FleetConfig, StepCostsConfig,
)
from edgefl.errors import ScenarioError
from edgefl.scenario.limits import Limit, limits_of, user_range

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DeviceTable", "read_device_table", "device_table_from_frame", "frame_table", "hold_frame_table", "table_of", "checked_fleet_section", "COLUMNS"]


@dataclass(frozen=True)
class _Column:
    """A numeric column: the SI quantity it sets, its allowed range (a :class:`~edgefl.scenario.limits.Limit` on the SI
    value; for a scenario quantity the scenario field's own) and the conversion from the column's unit to SI."""

    si: str
    limit: Limit
    convert: Any = float


_FLEET = limits_of(FleetConfig)
_STEP = limits_of(StepCostsConfig)
# quantities a table has and a scenario has not: a position, a data size, the optimizer's budget
_COORD = Limit(-1e5, 1e5, "m", "a position within 100 km of the base station (the largest cell)")
_DISTANCE = Limit(1.0, 1e5, "m", "from 1 m to 100 km (LTE's extended-range cells, the largest) from the base station")
_ANY_DISTANCE = Limit(0.0, math.inf, "m", "a distance")
_SAMPLES = Limit(1.0, 1e9, "samples", "at least one sample, at most 1e9 (above any dataset a device holds)")
_SHARE = Limit(0.0, 1.0, "of the training set", "a share of the training set", low_open=True)
_GAIN_DB = Limit(-250.0, 0.0, "dB", "a passive channel's power gain: at most 0 dB, and above -250 dB (the 3GPP macro "
                 "path loss at 100 km, 203 dB, with 40 dB of shadowing to spare)")  # fmt: skip
_CYCLES = Limit(0.0, 1e18, "cycles", "more than 0, at most 1e18 (a year of a 30 GHz CPU)", low_open=True)

#: column -> what it sets; the scenario's quantities take the range of the ``[fleet]`` field they set, so a value
#: is allowed in a table exactly when the scenario allows it as a key (``f_max_ghz`` checked in GHz, ...)
COLUMNS: dict[str, _Column] = {
    **{name: _Column(name, _FLEET[name]) for name in ("f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle",
                                                      "tx_power_w")},
    **{alias: _Column(si, _FLEET[si], fn) for alias, (si, fn) in FLEET_UNITS.items()},
    **{name: _Column(name, _FLEET[name]) for name in POWER_FIELDS},
    "rx_power_w": _Column("rx_power_w", limits_of(DownlinkConfig)["rx_power_w"]),
    **{name: _Column(name, _STEP[name]) for name in ("step_time_s", "comm_time_s", "step_energy_j", "comm_energy_j")},
    "x_m": _Column("x_m", _COORD),
    "y_m": _Column("y_m", _COORD),
    "distance_m": _Column("distance_m", _DISTANCE),
    "n_samples": _Column("n_samples", _SAMPLES),
    "e_max_j": _Column("e_max_j", limits_of(BudgetConfig)["value_j"]),
    "data_share": _Column("data_share", _SHARE),
    "gain_db": _Column("gain_db", _GAIN_DB),
    "cycles": _Column("cycles", _CYCLES),
}  # fmt: skip

_TEXT_COLUMNS = ("profile", "device")
STEP_COST_FIELDS = ("step_time_s", "comm_time_s", "step_energy_j", "comm_energy_j")
DISTANCE_AGREE_M = 1e-3
"""How far [m] a row's ``distance_m`` may be from hypot(x_m, y_m) when it gives all three (1 mm: rounding)."""


@dataclass(frozen=True, eq=False)
class DeviceTable:
    """A validated device table: per SI quantity an array of shape (n,) with NaN where a row gives nothing,
    the profile name per row ('' for none), and where each row came from (for messages). Two tables are equal
    when their content is (:meth:`digest`)."""

    where: str
    n_devices: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    profiles: tuple[str, ...] = ()
    row_labels: tuple[str, ...] = ()

    def given(self, name: str) -> np.ndarray:
        """Bool shape (n,): rows that give quantity ``name``."""
        col = self.values.get(name)
        return np.zeros(self.n_devices, dtype=bool) if col is None else ~np.isnan(col)

    def digest(self) -> str:
        """A hex digest of the whole content (every field, each array's dtype, shape and bytes)."""
        h = hashlib.sha256(repr((self.where, self.n_devices, self.profiles, self.row_labels)).encode())
        for name in sorted(self.values):
            col = np.ascontiguousarray(self.values[name])
            h.update(repr((name, col.dtype.str, col.shape)).encode())
            h.update(col.tobytes())
        return h.hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceTable):
            return NotImplemented
        return self is other or self.digest() == other.digest()

    __hash__ = None  # type: ignore[assignment]  # equal by content, and mutable arrays inside


def _fail(where: str, label: str, column: str, raw: Any, why: str) -> ScenarioError:
    return ScenarioError(f"device table {where} {label}, column {column}: {raw!r} {why}")


def _blank(raw: Any) -> bool:
    """Whether a cell gives nothing: empty text, None or NaN."""
    return raw is None or (isinstance(raw, str) and not raw.strip()) or (isinstance(raw, float) and math.isnan(raw))


def _check_header(where: str, names: list[str]) -> None:
    """Raise :class:`ScenarioError` for unknown columns, two columns of one quantity and incomplete or clashing
    ways of giving a position or a data size."""
    unknown = [h for h in names if h not in COLUMNS and h not in _TEXT_COLUMNS]
    if unknown:
        raise ScenarioError(f"device table {where}: unknown column(s) {_unknown_columns(unknown)}; columns are "
                            f"{', '.join([*COLUMNS, *_TEXT_COLUMNS])}")  # fmt: skip
    seen: dict[str, str] = {}
    for h in names:
        si = COLUMNS[h].si if h in COLUMNS else h
        if si in seen:
            raise ScenarioError(f"device table {where}: columns {seen[si]!r} and {h!r} give the same quantity; "
                                "keep one")  # fmt: skip
        seen[si] = h
    if ("x_m" in seen) != ("y_m" in seen):
        raise ScenarioError(f"device table {where}: a position needs both x_m and y_m columns")
    if "n_samples" in seen and "data_share" in seen:
        raise ScenarioError(f"device table {where}: give n_samples or data_share, not both")


def _unknown_columns(unknown: list[str]) -> str:
    """The unknown column names, each with the nearest valid one (``'distnce_m' (did you mean 'distance_m'?)``)."""
    from edgefl.scenario.did_you_mean import nearest_name

    out = []
    for name in unknown:
        near = nearest_name(name, [*COLUMNS, *_TEXT_COLUMNS])
        out.append(f"{name!r}" + (f" (did you mean {near!r}?)" if near else ""))
    return ", ".join(out)


def _numeric_column(
    where: str, h: str, j: int, rows: list[list[Any]], labels: list[str], free: np.ndarray | None = None
) -> np.ndarray:
    """Column ``j`` (named ``h``, one of :data:`COLUMNS`) in SI units, NaN where blank; raises
    :class:`ScenarioError` for a cell that is not a number or is out of range (on the rows ``free`` marks, any
    finite value >= 0: a ``distance_m`` beside the ``x_m, y_m`` that place the device)."""
    column = COLUMNS[h]
    col = np.full(len(rows), np.nan)
    for i, row in enumerate(rows):
        limit = _ANY_DISTANCE if free is not None and free[i] else column.limit
        raw = row[j] if j < len(row) else ""
        if _blank(raw):
            continue
        try:
            v = float(raw)
        except (TypeError, ValueError):
            raise _fail(where, labels[i], h, raw, "is not a number") from None
        try:
            si_value = column.convert(v)
        except OverflowError:
            si_value = math.inf
        if not limit.admits(si_value):
            allowed = f"{user_range(h, limit)}: {limit.ground}"
            raise _fail(where, labels[i], h, raw, f"is outside the allowed range {allowed}")
        if h == "n_samples" and v != int(v):
            raise _fail(where, labels[i], h, raw, "must be a whole number of samples")
        col[i] = si_value
    return col


def _profile_column(where: str, h: str, j: int, rows: list[list[Any]], labels: list[str]) -> list[str]:
    """The catalogue profile named in column ``j`` of each row ("" where blank); raises :class:`ScenarioError`
    for a name not in the device catalogue."""
    profiles = [""] * len(rows)
    for i, row in enumerate(rows):
        raw = row[j] if j < len(row) else ""
        name = "" if _blank(raw) else str(raw).strip()
        if name and name not in catalogue():
            known = ", ".join(catalogue())
            raise _fail(where, labels[i], h, name, f"is not in the device catalogue; one of {known}")
        profiles[i] = name
    return profiles


def _device_column(where: str, h: str, j: int, rows: list[list[Any]], labels: list[str]) -> list[int | None]:
    """The device index 0..n-1 in column ``j`` of each row; raises :class:`ScenarioError` for a cell that is
    not one (repeats are checked by the caller)."""
    n = len(rows)
    device_ids: list[int | None] = [None] * n
    for i, row in enumerate(rows):
        raw = row[j] if j < len(row) else ""
        try:
            v = float(raw)
            ok = v == int(v) and 0 <= v < n
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise _fail(where, labels[i], h, raw, f"must be a device index 0..{n - 1} (one per row)")
        device_ids[i] = int(v)
    return device_ids


def _parse(where: str, header: list[str], rows: list[list[Any]], labels: list[str]) -> DeviceTable:
    """Validate raw cells (strings or numbers) into a :class:`DeviceTable`."""
    names = [str(h).strip() for h in header]
    _check_header(where, names)
    if not rows:
        raise ScenarioError(f"device table {where}: no device rows after the header")
    n = len(rows)
    values: dict[str, np.ndarray] = {}
    profiles = [""] * n
    device_ids: list[int | None] = [None] * n
    with_xy = "distance_m" in names and "x_m" in names  # a distance beside x, y (a run's fleet.csv)
    for j, h in enumerate(names):
        if with_xy and h == "distance_m":
            continue  # read once x, y are
        if h in COLUMNS:
            values[COLUMNS[h].si] = _numeric_column(where, h, j, rows, labels)
        elif h == "profile":
            profiles = _profile_column(where, h, j, rows, labels)
        else:  # device
            device_ids = _device_column(where, h, j, rows, labels)
    if with_xy:  # the distance's range holds on the rows it places, the others check it against x, y
        xy = ~np.isnan(values["x_m"]) & ~np.isnan(values["y_m"])
        values["distance_m"] = _numeric_column(where, "distance_m", names.index("distance_m"), rows, labels, xy)
        _check_positions(where, values, labels)
    if "device" in names:
        ids = [d for d in device_ids if d is not None]
        if len(set(ids)) != n:
            dup = next(d for d in ids if ids.count(d) > 1)
            i = device_ids.index(dup, device_ids.index(dup) + 1)
            raise _fail(where, labels[i], "device", dup, "repeats an earlier row's device index")
        order = np.argsort(np.asarray(device_ids))  # row of device 0, 1, ...
        values = {k: v[order] for k, v in values.items()}
        profiles = [profiles[i] for i in order]
        labels = [labels[i] for i in order]
    if "data_share" in values and np.nansum(values["data_share"]) > 1.0 + 1e-9:
        raise ScenarioError(f"device table {where}: data_share sums to {np.nansum(values['data_share']):g}; "
                            "the shares of the training set must sum to at most 1")  # fmt: skip
    for i in range(n):
        lo, hi = values.get("f_min_hz", np.full(n, np.nan))[i], values.get("f_max_hz", np.full(n, np.nan))[i]
        if lo > hi:
            raise ScenarioError(f"device table {where} {labels[i]}: f_min ({lo / 1e9:g} GHz) exceeds f_max "
                                f"({hi / 1e9:g} GHz); need f_min <= f_max")  # fmt: skip
        check_cpu_power(where, labels[i], values.get("energy_coeff", np.full(n, np.nan))[i], hi)
    return DeviceTable(where=where, n_devices=n, values=values, profiles=tuple(profiles), row_labels=tuple(labels))


def _check_positions(where: str, values: dict[str, np.ndarray], labels: list[str]) -> None:
    """A table with ``x_m, y_m`` and ``distance_m``: raise :class:`ScenarioError` for a row whose distance is not
    hypot(x, y) (within :data:`DISTANCE_AGREE_M`). Such a row's coordinates place the device
    (:func:`edgefl.fleet.build.placed_positions`), so a table read back places it exactly where it was."""
    xy = ~np.isnan(values["x_m"]) & ~np.isnan(values["y_m"])
    d = values["distance_m"]
    both = xy & ~np.isnan(d)
    off = np.abs(np.hypot(values["x_m"], values["y_m"]) - d) > DISTANCE_AGREE_M
    bad = np.flatnonzero(both & off)
    if bad.size:
        i = int(bad[0])
        raise ScenarioError(f"device table {where} {labels[i]}: distance_m {d[i]:g} m is not the distance of "
                            f"x_m, y_m ({values['x_m'][i]:g}, {values['y_m'][i]:g}) m, "
                            f"{math.hypot(values['x_m'][i], values['y_m'][i]):g} m; give one position, or make "
                            f"them agree within {DISTANCE_AGREE_M:g} m")  # fmt: skip


def check_cpu_power(where: str, label: str, eps: float, f_max_hz: float) -> None:
    """Raise :class:`ScenarioError` if a device's CPU power at f_max, P = eps f_max^3 [W] (AnycostFL eq. (7) per
    second), exceeds the ceiling the scenario puts on ``energy_coeff`` with ``f_max_hz`` (NaN: not known)."""
    power_w = eps * f_max_hz**3
    if power_w > MAX_CPU_POWER_W:
        raise ScenarioError(f"device table {where} {label}: energy_coeff {eps:g} at f_max {f_max_hz / 1e9:g} GHz "
                            f"is a CPU power eps f_max^3 = {power_w:.3g} W, above {MAX_CPU_POWER_W:g} W, more than "
                            "any device's processor draws")  # fmt: skip


def _read_csv(path: Path) -> DeviceTable:
    where = repr(str(path))
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            lines = list(enumerate(csv.reader(handle), start=1))
    except OSError as exc:
        raise ScenarioError(f"device table {where}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ScenarioError(f"device table {where}: not a UTF-8 CSV file: {exc}") from None
    lines = [(k, row) for k, row in lines if any(cell.strip() for cell in row)]  # blank lines: no device
    if not lines:
        raise ScenarioError(f"device table {where}: empty file; expected a header line, e.g. device,distance_m,profile")
    (_, header), body = lines[0], lines[1:]
    labels = [f"line {k} (line 1 is the header)" for k, _ in body]
    return _parse(where, header, [row for _, row in body], labels)


def _rows_of_frame(frame: pd.DataFrame) -> tuple[list[str], list[list[Any]]]:
    return [str(c) for c in frame.columns], frame.astype(object).where(frame.notna(), None).values.tolist()


def _read_parquet(path: Path) -> DeviceTable:
    import pandas as pd

    where = repr(str(path))
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, ImportError) as exc:
        raise ScenarioError(f"device table {where}: {_not_parquet(path) or f'cannot read as Parquet: {exc}'}") from None
    header, rows = _rows_of_frame(frame)
    return _parse(where, header, rows, [f"row {i + 1} (row 1 is the first device)" for i in range(len(rows))])


def _not_parquet(path: Path) -> str | None:
    """Why ``path`` (named ``.parquet``) is not Parquet when it is text, a CSV table most likely (None if it
    is not text): a Parquet file starts with the bytes ``PAR1``."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    if head.startswith(b"PAR1") or b"\x00" in head:
        return None
    text = head.decode("utf-8-sig", errors="ignore")  # a character cut at the end of the 4 KiB is dropped
    if not text.strip() or not all(c.isprintable() or c in "\r\n\t" for c in text):
        return None
    looks = "CSV" if "," in text.strip().splitlines()[0] else "text"
    return (f"not a Parquet file (it does not start with PAR1): it holds {looks} text; a CSV table must be named "
            f"{path.with_suffix('.csv').name!r} (or write it as Parquet, e.g. pandas' DataFrame.to_parquet)")


def position_gaps(table: DeviceTable) -> str | None:
    """Which rows of ``table`` leave the position empty while others give one (``distance_m``, or ``x_m`` and
    ``y_m``), in one line naming them (the first ten); None when every row gives one, or none does. Such a row's
    device is placed at a drawn position: a warning, or an error under ``fleet.devices_strict``."""
    names = [c for c in ("distance_m", "x_m", "y_m") if c in table.values]
    if not names:
        return None
    given = table.given("distance_m") | (table.given("x_m") & table.given("y_m"))
    if given.all() or not given.any():
        return None
    missing = np.flatnonzero(~given).tolist()
    labels = [table.row_labels[i] if i < len(table.row_labels) else f"row {i + 1}" for i in missing]
    kind = labels[0].split()[0]  # "line" (a CSV file) or "row"
    numbers = [label.split()[1] for label in labels]
    note = labels[0][labels[0].find("("):] if "(" in labels[0] else ""
    shown = ", ".join(numbers[:10]) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
    column = " or ".join(c for c in ("distance_m", "x_m/y_m") if c.split("/")[0] in names)
    many = len(numbers) > 1
    return (f"device table {table.where}: {kind}{'s' if many else ''} {shown} {note}".rstrip()
            + f" give{'' if many else 's'} no {column} while {int(given.sum())} other rows do")  # fmt: skip


def device_table_from_frame(frame: pd.DataFrame, where: str = "DataFrame") -> DeviceTable:
    """A validated table from a pandas DataFrame (errors name the row, the first device being row 1)."""
    header, rows = _rows_of_frame(frame)
    return _parse(where, header, rows, [f"row {i + 1} (row 1 is the first device)" for i in range(len(rows))])


_CACHE: dict[tuple[str, int, int], DeviceTable] = {}
FRAME_PREFIX = "dataframe:"
# A DataFrame's table is held by the [fleet] sections that name it (FleetConfig.hold_table, set when a scenario is
# validated: hold_frame_table); this mapping only finds a live one by its name, weakly, so that a scenario dumped
# and validated again in this process names the same table. It keeps no table alive: once the last section
# holding a table is gone, so is the table, and its entry here.
_LIVE_FRAMES: weakref.WeakValueDictionary[str, DeviceTable] = weakref.WeakValueDictionary()


def frame_table(frame: pd.DataFrame) -> tuple[str, DeviceTable]:
    """A DataFrame's validated table and the ``fleet.devices`` value naming it, ``dataframe:<digest>`` (the
    digest of its content: equal frames, one name and one table). The caller keeps the table alive while it
    validates a scenario naming it; the validated ``[fleet]`` section then holds it."""
    table = device_table_from_frame(frame)
    name = f"{FRAME_PREFIX}{table.digest()[:16]}"
    return name, _LIVE_FRAMES.setdefault(name, table)


def hold_frame_table(cfg: FleetConfig) -> None:
    """Let a validated ``[fleet]`` section that names a DataFrame's table hold it (it then lives, and is pickled
    to worker processes, with the section)."""
    if cfg.devices is not None and cfg.devices.startswith(FRAME_PREFIX) and cfg.held_table is None:
        cfg.hold_table(read_device_table(cfg.devices))


def read_device_table(source: str) -> DeviceTable:
    """The device table ``source``: a ``.csv`` or ``.parquet`` path, or the name of a DataFrame's table
    (:func:`frame_table`) that a scenario of this process holds."""
    if source.startswith(FRAME_PREFIX):
        table = _LIVE_FRAMES.get(source)
        if table is None:
            raise ScenarioError(f"fleet.devices={source!r}: a DataFrame that no scenario of this process holds "
                                "(given in another process, or its scenario is gone); save it with "
                                "DataFrame.to_csv and give the file's path")  # fmt: skip
        return table
    path = Path(source)
    if not path.is_file():
        raise ScenarioError(f"fleet.devices={source!r}: no such file (a relative path is read from the scenario "
                            "file's folder)")  # fmt: skip
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            _CACHE[key] = _read_csv(path)
        elif suffix in (".parquet", ".pq"):
            _CACHE[key] = _read_parquet(path)
        else:
            raise ScenarioError(f"fleet.devices={source!r}: must end in .csv or .parquet")
    return _CACHE[key]


def table_of(cfg: FleetConfig) -> DeviceTable | None:
    """The scenario's device table, or None: the DataFrame's table the section holds, or the file it names."""
    if cfg.devices is None:
        return None
    held = cfg.held_table
    return held if held is not None else read_device_table(cfg.devices)


def checked_fleet_section(data: Any) -> Any:
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
        only = [c for c in ("gain_db", "cycles") if c in table.values]
        if only:
            raise ScenarioError(f"device table {table.where}: column(s) {', '.join(only)} are read only by `edgefl "
                                "optimize allocation`; a run computes each device's gain from its position and its "
                                "cycles from the model")  # fmt: skip
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
