"""``edgefl run``'s shorthand options for scenario keys: ``--target`` (``train.target_accuracy``),
``--threads`` (``train.threads``) and ``--strict`` (``fleet.devices_strict``). They become ``--set`` overrides, so the run directory's scenario.toml records
them and ``--resume`` continues with the same values."""

from __future__ import annotations

import math

from edgefl.cli._common import fail

__all__ = ["run_option_overrides", "resume_without_options"]

MAX_THREADS = 1024
"""Largest ``--threads`` (as ``train.threads`` allows)."""


def run_option_overrides(*, target: float | None, threads: int | None, strict: bool = False) -> list[str]:
    """The ``--set`` overrides of the options given; a value out of range fails naming the option as written."""
    overrides = []
    if target is not None:
        if not (math.isfinite(target) and 0 < target <= 1):
            raise fail(f"--target {target!r}: must be a test accuracy in (0, 1], e.g. 0.8 for 80%")
        overrides.append(f"train.target_accuracy={target!r}")
    if threads is not None:
        if not 1 <= threads <= MAX_THREADS:
            raise fail(f"--threads {threads}: must be in [1, {MAX_THREADS}] (torch threads of the run)")
        overrides.append(f"train.threads={threads}")
    if strict:
        overrides.append("fleet.devices_strict=true")
    return overrides


def resume_without_options(*, target: float | None, threads: int | None, strict: bool = False) -> None:
    """``--resume`` continues a run with its own scenario: ``--target``, ``--threads`` and ``--strict`` fail
    there."""
    options = (("--target", target), ("--threads", threads), ("--strict", strict or None))
    given = [name for name, value in options if value is not None]
    if given:
        raise fail(f"--resume RUN_DIR continues that run as it was: give no {' or '.join(given)} "
                   "(the run directory's scenario.toml holds train.target_accuracy, train.threads and "
                   "fleet.devices_strict)")  # fmt: skip
