"""Keeping the run report small whatever the fleet: device-level figures are sampled or aggregated above a size,
and each says so in its title.

- the device timeline of one round shows at most :data:`TIMELINE_DEVICES` of the round's devices, spread evenly
  over the order in which their uploads arrived (the first and the last arrival, the straggler, always in);
- the per-device energy shows one bar per device up to :data:`ENERGY_DEVICES` devices; above, the devices sorted
  by their total energy are cut into :data:`ENERGY_GROUPS` groups of (nearly) equal size and each bar is a
  group's mean per device;
- an accuracy curve shows at most :data:`CURVE_POINTS` evaluations, every k-th one, the last and the target's
  crossing always in.

With these caps a report stays about 4 MB (plotly.js itself, inlined, is 3.6 MB) at 10^6 devices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

__all__ = [
    "TIMELINE_DEVICES", "ENERGY_DEVICES", "ENERGY_GROUPS", "CURVE_POINTS", "sample_timeline", "group_energy",
    "thin_curve",
]  # fmt: skip

TIMELINE_DEVICES = 60
"""Most devices drawn in the one-round device timeline."""
ENERGY_DEVICES = 300
"""Most devices drawn one bar each in the per-device energy figure."""
ENERGY_GROUPS = 100
"""Groups of devices (by total energy) the per-device energy figure shows above :data:`ENERGY_DEVICES`."""
CURVE_POINTS = 2000
"""Most evaluations drawn on one accuracy curve."""


def sample_timeline(rows: pd.DataFrame, keep: Iterable[int] = ()) -> tuple[pd.DataFrame, str]:
    """At most :data:`TIMELINE_DEVICES` of one round's device rows (columns of ``edgefl.output.report._phase_times``:
    ``_device``, ``_arrive`` [s]), evenly spread over the arrival order (devices that never arrived last) and
    always including the devices in ``keep``; sorted by device id. Returns the rows and a note for the title
    (``""`` when every row is kept)."""
    n = len(rows)
    if n <= TIMELINE_DEVICES:
        return rows, ""
    order = rows.assign(_never=rows["_arrive"].isna()).sort_values(["_never", "_arrive", "_device"], kind="stable")
    picks = set(np.unique(np.linspace(0, n - 1, TIMELINE_DEVICES - len(set(keep))).round().astype(int)).tolist())
    chosen = order.iloc[sorted(picks)]
    extra = rows[rows["_device"].isin(list(keep)) & ~rows.index.isin(chosen.index)]
    out = pd.concat([chosen, extra]).sort_values("_device", kind="stable").reset_index(drop=True)
    return out, f"{len(out)} of {n:,} devices shown, spread over the arrival order"


def group_energy(
    sums: pd.DataFrame, counts: pd.Series, round_word: str = "round"
) -> tuple[list[str], pd.DataFrame, list[str], str]:
    """The per-device energy bars: ``sums`` has one row per device (index: device id) with ``compute`` and
    ``upload`` [J]; ``counts`` how many rounds (called ``round_word``) each device trained in. Returns the bar
    labels, a frame of the bars' ``compute`` and ``upload`` [J], a hover line per bar, and a note for the title
    (``""`` when each bar is one device)."""
    if len(sums) <= ENERGY_DEVICES:
        labels = [f"device {int(d)}" for d in sums.index]
        hover = [f"trained in {int(n)} {round_word}(s)" for n in counts]
        return labels, sums[["compute", "upload"]], hover, ""
    total = (sums["compute"] + sums["upload"]).to_numpy()
    order = np.argsort(total, kind="stable")
    groups = np.array_split(order, ENERGY_GROUPS)
    means = pd.DataFrame(
        [[float(sums["compute"].iloc[g].mean()), float(sums["upload"].iloc[g].mean())] for g in groups],
        columns=["compute", "upload"],
    )
    n = len(sums)
    labels, hover = [], []
    at = 0
    for g in groups:
        lo, hi = at / n, (at + len(g)) / n
        at += len(g)
        labels.append(f"{lo:.0%}-{hi:.0%}")
        hover.append(f"{len(g):,} devices, total {total[g].min():.4g} to {total[g].max():.4g} J each; "
                     f"trained in {float(counts.iloc[g].mean()):.3g} {round_word}s on average")  # fmt: skip
    note = (f"{n:,} devices sorted by energy in {ENERGY_GROUPS} groups of equal size; "
            "each bar is the group's mean per device")  # fmt: skip
    return labels, means, hover, note


def thin_curve(evaluated: pd.DataFrame, keep_rounds: Iterable[int] = ()) -> tuple[pd.DataFrame, str]:
    """At most about :data:`CURVE_POINTS` rows of an accuracy curve (sorted by round): every k-th one, the last
    and the rows of ``keep_rounds``. Returns the rows and a note for the title (``""`` when all are kept)."""
    n = len(evaluated)
    if n <= CURVE_POINTS:
        return evaluated, ""
    step = math.ceil(n / CURVE_POINTS)
    mask = (np.arange(n) % step == 0) | (np.arange(n) == n - 1) | evaluated["round"].isin(list(keep_rounds)).to_numpy()
    return evaluated[mask].reset_index(drop=True), f"every {step}th of {n:,} evaluations shown"
