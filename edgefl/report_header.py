"""The settings a run report's header lists, read from the run's scenario: what tells two runs apart.

Method, devices N, devices per round K (jobs in flight for an asynchronous method), uplink bandwidth, round
policy and deadline, cost mode, learning mode, model, data and seed, and the target accuracy when one is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgefl.scenario import Scenario

__all__ = ["is_asynchronous", "run_settings", "report_header"]


def is_asynchronous(scenario: Scenario) -> bool:
    """Whether the scenario's method has server updates instead of rounds (FedAsync, FedBuff)."""
    from edgefl.algorithms import METHODS

    return METHODS[scenario.method.name].needs.asynchronous


def run_settings(scenario: Scenario) -> list[tuple[str, str]]:
    """The header's rows, ``(label, value)`` with values in engineer units (MHz, s)."""
    from edgefl.scenario import cost_mode

    asynchronous = is_asynchronous(scenario)
    ch, rd, data = scenario.channel, scenario.round, scenario.data
    share = "per device" if ch.bandwidth_mode == "fixed" else "shared by a round's devices"
    band = f"{ch.bandwidth_hz / 1e6:g} MHz {share}"
    if asynchronous:
        policy = "asynchronous: server updates as jobs arrive"
    elif rd.policy == "deadline":
        policy = f"deadline {rd.deadline_s:g} s, late devices {rd.late}"
    elif rd.policy == "over_select":
        policy = f"over_select (+{rd.over_select_fraction:.0%}), late devices {rd.late}"
    else:
        policy = "wait_all"
    learning = scenario.learning if scenario.learning == "torch" else f"surrogate ({scenario.surrogate.bound} bound)"
    rows = [
        ("method", scenario.method.name),
        ("devices (N)", f"{scenario.fleet.n_devices:,}"),
        ("jobs in flight (C)" if asynchronous else "devices per round (K)", f"{scenario.method.clients_per_round:,}"),
        ("uplink bandwidth", band),
        ("server policy" if asynchronous else "round policy", policy),
        ("cost mode", cost_mode(scenario.fleet)),
        ("learning", learning),
        ("model", scenario.model.name if scenario.learning == "torch" else "none (surrogate workload sizes)"),
        ("data", f"{data.dataset}, {data.partition} partition" if scenario.learning == "torch" else "none"),
        ("seed", str(scenario.seed)),
    ]
    if scenario.train.target_accuracy is not None:
        rows.append(("target accuracy", f"{scenario.train.target_accuracy:.2%}"))
    return rows


def report_header(scenario: Scenario) -> dict[str, Any]:
    """The keyword arguments :func:`edgefl.report.write_report` takes from a scenario: ``settings`` and
    ``target_accuracy``."""
    return {"settings": run_settings(scenario), "target_accuracy": scenario.train.target_accuracy}
