"""Paired timing on a shared, noisy machine: two measurements taken alternately, their medians and the median of
their paired ratios (the benchmarks' one way to compare two configurations in one process run)."""

from __future__ import annotations

from collections.abc import Callable


def alternate(
    first: Callable[[], dict], second: Callable[[], dict], repeats: int
) -> tuple[dict, dict, list[float], list[tuple[dict, dict]]]:
    """Call ``first`` and ``second`` alternately ``repeats`` times (each returns a dict with ``wall_s`` [s]).
    Returns the median run of each (by ``wall_s``), the sorted paired ratios second/first, and the pairs."""
    pairs = [(first(), second()) for _ in range(repeats)]
    med = lambda runs: sorted(runs, key=lambda m: m["wall_s"])[len(runs) // 2]  # noqa: E731
    ratios = sorted(b["wall_s"] / a["wall_s"] for a, b in pairs)
    return med([a for a, _ in pairs]), med([b for _, b in pairs]), ratios, pairs


def median(values: list[float]) -> float:
    """The middle of sorted ``values`` (the upper middle for an even count)."""
    return values[len(values) // 2]
