"""When each device is online: ``[fleet.availability]`` as per-device schedules of online periods.

A schedule is a sorted list of disjoint online intervals ``[on, off)`` [s] per device on the run's clock (t = 0 is
the run's start), generated lazily, in chunks, as the clock advances. Each chunk is a pure function of
(seed, device, chunk index) (:mod:`edgefl.seeding`), so a resumed run regenerates the same schedule.

- ``always``: no schedule (every device online; :func:`make_availability` returns None).
- ``markov``: a two-state Markov process per device: online periods ~ Exp(mean ``online_mean_s``), offline
  periods ~ Exp(mean ``offline_mean_s``) [s]. A device starts online with the stationary probability
  ``p = on / (on + off)`` (and, exponential periods being memoryless, its first period is a full draw), so its
  long-run online fraction is ``p``. Streams: ``availability_means`` (per-device means drawn from [low, high]),
  ``availability_start`` (initial state, first offline period), ``availability`` per (device, chunk).
- ``diurnal``: one charging window per day per device, FedScale-style: the window starts ``window_start_h``
  hours after midnight and lasts ``window_length_h`` hours (each a number or [low, high] drawn per device from
  the ``availability_window`` stream); it may run past midnight.
- ``trace``: a CSV file with a header ``device,online_s,offline_s`` and one online interval per row; a device
  without rows is never online.
"""

from __future__ import annotations

import bisect
import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgefl.errors import ScenarioError

if TYPE_CHECKING:
    from edgefl.scenario.sections import AvailabilityConfig
    from edgefl.seeding import Streams

__all__ = ["Availability", "make_availability", "read_trace", "MARKOV_CHUNK", "DAY_S"]

MARKOV_CHUNK = 64
"""Online periods drawn per device per chunk under ``markov``."""
DAY_S = 86_400.0
_DIURNAL_CHUNK_DAYS = 16


class Availability:
    """Per-device online intervals [s]. Subclasses fill a device's list a chunk at a time (:meth:`_extend`)."""

    def __init__(self, n_devices: int) -> None:
        self.n_devices = n_devices
        self._on: list[list[float]] = [[] for _ in range(n_devices)]
        self._off: list[list[float]] = [[] for _ in range(n_devices)]
        self._horizon = np.zeros(n_devices)  # the schedule is complete on [0, horizon)
        self._chunks = np.zeros(n_devices, dtype=np.int64)

    def _extend(self, dev: int) -> bool:
        """Append the device's next chunk of intervals and move its horizon; False if there is no more."""
        raise NotImplementedError

    def _cover(self, dev: int, t_s: float) -> None:
        while self._horizon[dev] <= t_s and self._extend(dev):
            pass

    def _first_ending_after(self, dev: int, t_s: float) -> int:
        """Index of the first interval of ``dev`` that ends after ``t_s`` (len if none)."""
        self._cover(dev, t_s)
        return bisect.bisect_right(self._off[dev], t_s)

    def online_at(self, devices: np.ndarray, t_s: float) -> np.ndarray:
        """Whether each of ``devices`` is online at ``t_s`` [s], bool shape (m,)."""
        out = np.zeros(len(devices), dtype=bool)
        for j, dev in enumerate(np.asarray(devices).tolist()):
            k = self._first_ending_after(dev, t_s)
            out[j] = k < len(self._on[dev]) and self._on[dev][k] <= t_s
        return out

    def next_offline_s(self, dev: int, t_s: float) -> float:
        """When ``dev``, online at ``t_s`` [s], goes offline [s] (inf: never)."""
        k = self._first_ending_after(dev, t_s)
        return self._off[dev][k] if k < len(self._off[dev]) else math.inf

    def periods(self, dev: int, t_s: float) -> Iterator[tuple[float, float]]:
        """The online intervals ``(on, off)`` [s] of ``dev`` from the one holding ``t_s`` (or the next) on."""
        k = self._first_ending_after(dev, t_s)
        while True:
            if k >= len(self._on[dev]) and not self._extend(dev):
                return
            if k < len(self._on[dev]):
                yield self._on[dev][k], self._off[dev][k]
                k += 1

    def offline_periods(self, dev: int, t1_s: float) -> list[tuple[float, float]]:
        """The offline intervals ``(start, end)`` [s] of ``dev`` within [0, t1], in order (the gaps between its
        online intervals, clipped to [0, t1])."""
        out, t = [], 0.0
        for on, off in self.periods(dev, 0.0):
            if on >= t1_s:
                break
            if on > t:
                out.append((t, on))
            t = off
        if t < t1_s:
            out.append((t, t1_s))
        return out

    def online_fraction(self, dev: int, t0_s: float, t1_s: float) -> float:
        """Fraction of [t0, t1] [s] that ``dev`` is online by its schedule."""
        self._cover(dev, t1_s)
        total = 0.0
        for on, off in zip(self._on[dev], self._off[dev]):
            total += max(0.0, min(off, t1_s) - max(on, t0_s))
        return total / (t1_s - t0_s)


def _per_device(value: float | tuple[float, float], n: int, rng: np.random.Generator) -> np.ndarray:
    """A number for every device, or a uniform draw per device from ``[low, high]``, shape (n,)."""
    if isinstance(value, tuple):
        return rng.uniform(value[0], value[1], size=n)
    return np.full(n, float(value))


class MarkovAvailability(Availability):
    """Exponential online and offline periods (module docstring)."""

    def __init__(self, n_devices: int, streams: Streams, online_mean_s, offline_mean_s) -> None:
        super().__init__(n_devices)
        rng = streams.numpy("availability_means")
        self.online_mean_s = _per_device(online_mean_s, n_devices, rng)
        self.offline_mean_s = _per_device(offline_mean_s, n_devices, rng)
        self.streams = streams
        p_on = self.online_mean_s / (self.online_mean_s + self.offline_mean_s)
        start = streams.numpy("availability_start")
        starts_online = start.random(n_devices) < p_on
        first_off = start.exponential(1.0, n_devices) * self.offline_mean_s
        self._next_on = np.where(starts_online, 0.0, first_off)  # start of the next online period to draw

    def _extend(self, dev: int) -> bool:
        rng = self.streams.numpy("availability", dev, int(self._chunks[dev]))
        on_s = rng.exponential(self.online_mean_s[dev], MARKOV_CHUNK).tolist()
        off_s = rng.exponential(self.offline_mean_s[dev], MARKOV_CHUNK).tolist()
        t = float(self._next_on[dev])
        for a, b in zip(on_s, off_s):
            self._on[dev].append(t)
            t = t + a
            self._off[dev].append(t)
            t = t + b
        self._next_on[dev] = t
        self._horizon[dev] = t
        self._chunks[dev] += 1
        return True


class DiurnalAvailability(Availability):
    """A daily window per device (module docstring)."""

    def __init__(self, n_devices: int, streams: Streams, window_start_h, window_length_h) -> None:
        super().__init__(n_devices)
        rng = streams.numpy("availability_window")
        self.start_s = _per_device(window_start_h, n_devices, rng) * 3600.0  # h -> s
        self.length_s = _per_device(window_length_h, n_devices, rng) * 3600.0

    def _extend(self, dev: int) -> bool:
        first = int(self._chunks[dev]) * _DIURNAL_CHUNK_DAYS - (1 if self._chunks[dev] == 0 else 0)
        last = (int(self._chunks[dev]) + 1) * _DIURNAL_CHUNK_DAYS
        for day in range(first, last):
            on = day * DAY_S + float(self.start_s[dev])
            off = on + float(self.length_s[dev])
            if off > 0.0:  # yesterday's window may reach into day 0
                self._on[dev].append(max(on, 0.0))
                self._off[dev].append(off)
        self._horizon[dev] = last * DAY_S  # windows of later days start after this
        self._chunks[dev] += 1
        return True


class TraceAvailability(Availability):
    """Online intervals read from a CSV file (:func:`read_trace`)."""

    def __init__(self, n_devices: int, intervals: list[list[tuple[float, float]]]) -> None:
        super().__init__(n_devices)
        for dev, rows in enumerate(intervals):
            self._on[dev] = [a for a, _ in rows]
            self._off[dev] = [b for _, b in rows]
        self._horizon[:] = math.inf

    def _extend(self, dev: int) -> bool:
        return False


def read_trace(path: str | Path, n_devices: int) -> list[list[tuple[float, float]]]:
    """Per device, its sorted online intervals ``(online_s, offline_s)`` [s] from the CSV at ``path`` (header
    ``device,online_s,offline_s``). A bad row raises :class:`ScenarioError` naming the file and line: a device
    outside [0, n_devices), a time that is not a finite number >= 0, ``offline_s <= online_s``, or an interval
    overlapping another of the same device."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"fleet.availability.trace_path={str(path)!r}: cannot read the trace ({exc})") from None
    rows = csv.reader(text.splitlines())
    header = next(rows, None)
    if header is None or [h.strip() for h in header] != ["device", "online_s", "offline_s"]:
        raise ScenarioError(f"{path}:1: the header must be device,online_s,offline_s")
    out: list[list[tuple[float, float]]] = [[] for _ in range(n_devices)]
    for line, row in enumerate(rows, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 3:
            raise ScenarioError(f"{path}:{line}: expected 3 fields device,online_s,offline_s, got {len(row)}")
        try:
            dev, on, off = int(row[0]), float(row[1]), float(row[2])
        except ValueError:
            text = ",".join(row)
            raise ScenarioError(f"{path}:{line}: {text!r}: device must be an integer, times numbers [s]") from None
        if not 0 <= dev < n_devices:
            raise ScenarioError(f"{path}:{line}: device={dev}: must be in [0, {n_devices - 1}] (fleet.n_devices)")
        if not (math.isfinite(on) and math.isfinite(off) and on >= 0):
            raise ScenarioError(f"{path}:{line}: online_s={on}, offline_s={off}: must be finite, online_s >= 0 [s]")
        if off <= on:
            raise ScenarioError(
                f"{path}:{line}: offline_s={off} <= online_s={on}: an interval must have offline_s > online_s"
            )
        out[dev].append((on, off))
    for dev, intervals in enumerate(out):
        intervals.sort()
        for (a0, b0), (a1, _b1) in zip(intervals, intervals[1:]):
            if a1 < b0:
                raise ScenarioError(f"{path}: device {dev}: intervals [{a0}, {b0}) and [{a1}, ...) overlap")
    return out


def make_availability(cfg: AvailabilityConfig, n_devices: int, streams: Streams) -> Availability | None:
    """The schedule ``[fleet.availability]`` describes (None for ``always``)."""
    if cfg.kind == "always":
        return None
    if cfg.kind == "markov":
        return MarkovAvailability(n_devices, streams, cfg.online_mean_s, cfg.offline_mean_s)
    if cfg.kind == "diurnal":
        return DiurnalAvailability(n_devices, streams, cfg.window_start_h, cfg.window_length_h)
    return TraceAvailability(n_devices, read_trace(cfg.trace_path, n_devices))
