"""The settings a run report's header lists, from the run's resolved settings (:class:`edgefl.output.run_info.RunInfo`):
what tells two runs apart.

Method, devices N, devices per round K (jobs in flight for an asynchronous method), uplink bandwidth, round
policy and deadline, cost mode, learning mode, model, data and seed, and the target accuracy when one is set.
How the uplink is shared and scheduled (issue #36) is shown only where it departs from the defaults, so a default
run's header is as it always was: TDMA access, a selection policy other than random (FedCS, Chen et al. with its
RBs), an allocation other than equal, and packet errors (:func:`uplink_settings`).
Above them, one line names the physics the run was simulated with (:func:`physics_line`): the papers' idealised
model or the realistic one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.output.run_info import RunInfo

__all__ = ["PHYSICS_WORDS", "physics_line", "run_settings", "report_header", "uplink_settings", "uplink_summary"]

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


_ALLOCATION_WORDS = {
    "min_time": "min_time: the bandwidth split at which the round's devices finish together (Shi et al.)",
    "min_energy": "min_energy: bandwidth, power and CPU frequency of least energy (Yang et al.)",
}  # fmt: skip


def uplink_settings(info: RunInfo) -> list[tuple[str, str]]:
    """The header's rows on how the uplink is shared and scheduled, each only where it is not the default."""
    rows = []
    if info.access == "tdma":
        rows.append(("uplink access", "TDMA: one upload at a time on the whole band"))
    if info.selection == "fedcs":
        rows.append(("selection", "FedCS: the most devices whose uploads, one after another, meet the deadline"))
    elif info.selection == "chen":
        rows.append(("selection", f"Chen et al.: devices, RBs and powers; {info.chen_rbs} RBs of "
                                  f"{info.chen_rb_hz / 1e6:g} MHz, waterfall m = {info.chen_waterfall:g}"))  # fmt: skip
    if info.allocation != "equal":
        words = _ALLOCATION_WORDS.get(info.allocation, info.allocation)
        if info.allocation == "min_energy" and info.policy != "deadline":
            words += f", time weight {info.allocation_weight:g}"
        rows.append(("allocation", words))
    if info.waterfall is not None:
        n = info.retransmissions
        again = "no retransmission" if n == 0 else f"up to {n} retransmission{'s' if n > 1 else ''}"
        rows.append(("packet errors", f"Chen et al.'s q, waterfall m = {info.waterfall:g}, {again}"))
    return rows


def uplink_summary(info: RunInfo) -> dict[str, Any]:
    """summary.json's keys on how the uplink is shared and scheduled, each only where it is not the default (so a
    default run's summary keeps its keys): ``access``, ``selection``, ``allocation``, ``packet_errors``."""
    out: dict[str, Any] = {}
    if info.access != "fdma":
        out["access"] = info.access
    if info.selection != "random":
        out["selection"] = info.selection
    if info.allocation != "equal":
        out["allocation"] = info.allocation
    if info.waterfall is not None:
        out["packet_errors"] = {"waterfall": info.waterfall, "retransmissions": info.retransmissions}
    return out


def run_settings(info: RunInfo) -> list[tuple[str, str]]:
    """The header's rows, ``(label, value)`` with values in engineer units (MHz, s)."""
    asynchronous, torch = info.asynchronous, info.learning == "torch"
    share = "per device" if info.bandwidth_mode == "fixed" else "shared by a round's devices"
    if info.access == "tdma":
        share = "taken by one upload at a time"
    rows = [
        ("method", info.method),
        ("devices (N)", f"{info.n_devices:,}"),
        ("jobs in flight (C)" if asynchronous else "devices per round (K)", f"{info.clients_per_round:,}"),
        ("uplink bandwidth", f"{info.bandwidth_hz / 1e6:g} MHz {share}"),
        *uplink_settings(info),
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
