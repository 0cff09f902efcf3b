"""What names a run and the settings its summary and report show (:class:`RunInfo`): values the build step
resolves from the scenario once, so that the output layer (:mod:`edgefl.output.results`, :mod:`edgefl.output.report_header`)
reads them instead of the scenario."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RunInfo"]


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """What names a run and the settings its summary and report show, resolved from its scenario once by the build
    step (:func:`edgefl.run.runner.resolve_info`).

    ``name``, ``method``, ``seed``; ``rounds``: the rounds (server updates) the run asks for; ``asynchronous``: the
    method has server updates instead of rounds; ``n_devices``: N; ``clients_per_round``: K (the jobs in flight C
    of an asynchronous method); ``bandwidth_hz`` [Hz] and ``bandwidth_mode``: the uplink band and how it is shared;
    ``policy``, ``deadline_s`` [s], ``late``, ``over_select_fraction``: the round policy; ``cost_mode``:
    ``"physical"`` or ``"per_step"``; ``learning``: ``"torch"`` or ``"surrogate"``, with ``surrogate_bound``;
    ``model``, ``dataset``, ``partition``: what trains; ``target_accuracy``: the test accuracy to reach (None:
    none); ``flops_per_cycle_scale``: the fleet's laptop-scale factor; ``output_format``: ``"csv"`` or
    ``"parquet"`` for the device table; ``executor``, ``workers``, ``device``: where the training jobs ran
    (``train.executor``, its worker count, ``"cpu"``; ``"none"`` and 0 under surrogate learning); ``physics``: the
    scenario's physics, ``"paper"`` (the papers' idealised model, also for a scenario that names none) or
    ``"realistic"``. How the uplink is shared and scheduled (issue #36), each at its default unless the scenario
    says otherwise: ``access`` (``channel.access``, ``"fdma"``), ``selection`` (``selection.policy``,
    ``"random"``) with Chen et al.'s ``chen_rbs`` (R), ``chen_rb_hz`` [Hz] and ``chen_waterfall`` (m) under
    ``"chen"``, ``allocation`` (``channel.allocation``, ``"equal"``) with its ``allocation_weight``, and the packet
    errors' ``waterfall`` (m; None: no ``[channel.packet_errors]``) and ``retransmissions``.
    """

    name: str
    method: str
    seed: int
    rounds: int
    asynchronous: bool
    n_devices: int
    clients_per_round: int
    bandwidth_hz: float
    bandwidth_mode: str
    policy: str
    deadline_s: float
    late: str
    over_select_fraction: float
    cost_mode: str
    learning: str
    surrogate_bound: str
    model: str
    dataset: str
    partition: str
    target_accuracy: float | None
    flops_per_cycle_scale: float
    output_format: str
    executor: str = "inline"
    workers: int = 1
    device: str = "cpu"
    physics: str = "paper"
    access: str = "fdma"
    selection: str = "random"
    chen_rbs: int = 0
    chen_rb_hz: float = 0.0
    chen_waterfall: float = 0.0
    allocation: str = "equal"
    allocation_weight: float = 0.5
    waterfall: float | None = None
    retransmissions: int = 0
