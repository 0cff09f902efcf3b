"""The settings a run report's header lists, from the run's resolved settings (:class:`edgefl.output.run_info.RunInfo`):
what tells two runs apart.

Method, devices N, devices per round K (jobs in flight for an asynchronous method), uplink bandwidth, round
policy and deadline, cost mode, learning mode, model, data and seed, and the target accuracy when one is set.
Above them, one line names the physics the run was simulated with (:func:`physics_line`): the papers' idealised
model or the realistic one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.output.run_info import RunInfo

__all__ = ["PHYSICS_WORDS", "physics_line", "run_settings", "report_header"]

PHYSICS_WORDS = {
    "paper": "the papers' idealised model (Shannon rate, dynamic CPU power only, radiated transmit power only, "
             "no circuit or idle power)",
    "realistic": "realistic (truncated Shannon link, static + dynamic compute power, PA efficiency and circuit "
                 "power, downloads)",
}  # fmt: skip
"""The physics a scenario's ``physics`` names, in words (an unknown value is shown as it is)."""


def physics_line(physics: str | None) -> str:
    """The report header's line naming the physics: ``"Physics: "`` and :data:`PHYSICS_WORDS`'s words for
    ``physics`` (None or empty: ``"paper"``, the default)."""
    key = physics or "paper"
    return f"Physics: {PHYSICS_WORDS.get(key, key)}"


def _policy(info: RunInfo) -> str:
    """The round (server) policy in words."""
    if info.asynchronous:
        return "asynchronous: server updates as jobs arrive"
    if info.policy == "deadline":
        return f"deadline {info.deadline_s:g} s, late devices {info.late}"
    if info.policy == "over_select":
        return f"over_select (+{info.over_select_fraction:.0%}), late devices {info.late}"
    return "wait_all"


def _trainer(info: RunInfo) -> str:
    if info.executor == "none":
        return "none (surrogate learning)"
    workers = "in this process" if info.executor == "inline" else f"{info.workers} workers"
    return f"{info.executor}, {workers}, {info.device}"


def run_settings(info: RunInfo) -> list[tuple[str, str]]:
    """The header's rows, ``(label, value)`` with values in engineer units (MHz, s)."""
    asynchronous, torch = info.asynchronous, info.learning == "torch"
    share = "per device" if info.bandwidth_mode == "fixed" else "shared by a round's devices"
    rows = [
        ("method", info.method),
        ("devices (N)", f"{info.n_devices:,}"),
        ("jobs in flight (C)" if asynchronous else "devices per round (K)", f"{info.clients_per_round:,}"),
        ("uplink bandwidth", f"{info.bandwidth_hz / 1e6:g} MHz {share}"),
        ("server policy" if asynchronous else "round policy", _policy(info)),
        ("cost mode", info.cost_mode),
        ("learning", info.learning if torch else f"surrogate ({info.surrogate_bound} bound)"),
        ("model", info.model if torch else "none (surrogate workload sizes)"),
        ("data", f"{info.dataset}, {info.partition} partition" if torch else "none"),
        ("training jobs", _trainer(info)),
        ("seed", str(info.seed)),
    ]
    if info.target_accuracy is not None:
        rows.append(("target accuracy", f"{info.target_accuracy:.2%}"))
    return rows


def report_header(info: RunInfo) -> dict[str, Any]:
    """The keyword arguments :func:`edgefl.output.report.write_report` takes from a run's settings: ``settings``,
    ``target_accuracy`` and ``physics`` (the line :func:`physics_line` writes)."""
    return {"settings": run_settings(info), "target_accuracy": info.target_accuracy,
            "physics": physics_line(info.physics)}  # fmt: skip
