"""CC-FedAvg: Zhang et al., "CC-FedAvg: Computationally Customized Federated Averaging", and its Strategies.

A selected client trains (FedAvg's local training, with probability p_i or on its schedule) or skips and
contributes an estimate that costs no training computation (Sec. III-B):

- Strategy 1: nothing; the server aggregates the clients that trained (the device's row says why it sat out);
- Strategy 2: its last local model x^i_{last,K}, i.e. the update x^i_{last,K} - x_t;
- Strategy 3 (CC-FedAvg, Algorithm 1 line 15): its last computed update Delta^i, however old (the official
  code refreshes it only when the client trains; see papers/README.md errata);
- "c" (CC-FedAvg(c), eq. (4)): Strategy 3 while the paper's round counter t < tau, Strategy 2 once t >= tau.
  Algorithm 1 counts t = 0..T-1 and edgefl's ``round_index`` counts 1..T, so t = round_index - 1: Strategy 2
  starts at ``round_index == tau + 1``.

A client with no history yet trains (Strategies 2, 3, c). Where the history lives (``backup``):
``client`` (Algorithm 1) uploads the estimate (full update bits, no compute); ``server`` (Algorithm 2)
sends a 1-bit skip signal and the server substitutes the history it kept from the client's last *received*
update; ``mixed`` (Algorithm 3) does one or the other per device. Aggregation is FedAvg's data-size
weighted mean over every kept contribution (the paper's 1/|S_t| mean when data sizes are equal).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from edgefl.methods.base import (
    ClientUpdate, DenseUpdate, JobTable, LocalTraining, RoundContext, RoundPlan, TrainJob,
)  # fmt: skip
from edgefl.methods.ccfedavg_schedule import ProbabilityMethod, SkipPlanner, TrainingProbabilitySettings
from edgefl.methods.fedavg import FedAvg

if TYPE_CHECKING:
    from edgefl.methods.base import MethodSetup
    from edgefl.learning.protocol import Training
    from edgefl.learning.workload import State, TrainResult

__all__ = ["CCFedAvg", "CCFedAvgSettings", "SkipSignal", "SKIP_SIGNAL_BITS"]

SKIP_SIGNAL_BITS = 1.0
"""Upload of a skipping client whose history the server keeps (Algorithm 2 line 16) [bits]."""


@dataclass(frozen=True)
class SkipSignal:
    """Payload of a skipping client whose history the server keeps: nothing but the signal itself."""


class CCFedAvgSettings(TrainingProbabilitySettings):
    """``[method.ccfedavg]``: CC-FedAvg (Zhang et al.) and its Strategies; p_i settings as its baselines'.

    - ``strategy``: what a skipping client contributes (Sec. III-B): 1 = nothing (left out of aggregation),
      2 = its last local model, 3 = its last computed update however old (CC-FedAvg, Algorithm 1),
      ``"c"`` = CC-FedAvg(c), eq. (4): Strategy 3 while t < ``tau``, Strategy 2 once t >= ``tau``.
    - ``tau``: the threshold of CC-FedAvg(c), eq. (4), in the paper's 0-based round counter t (Algorithm 1
      counts t = 0..T-1; the paper uses tau = 100). With edgefl's 1-based ``round_index`` = t + 1, rounds
      1..tau use Strategy 3 and rounds tau+1.. use Strategy 2; tau = 0 means Strategy 2 throughout.
    - ``backup``: where the history lives: ``"client"`` (Algorithm 1: the estimate is uploaded, full update
      bits), ``"server"`` (Algorithm 2: a 1-bit skip signal, the server keeps every client's history) or
      ``"mixed"`` (Algorithm 3: a seeded ``server_backup_fraction`` of the devices back up on the server).
    - ``schedule``: ``"adhoc"`` (train with probability p_i each time selected) or ``"round_robin"`` (train
      once, then skip 1/p_i - 1 participations), from :mod:`optimizers.ccfedavg`.
    """

    strategy: Literal[1, 2, 3, "c"] = 3
    tau: int = Field(100, ge=0, le=10_000_000)
    backup: Literal["client", "server", "mixed"] = "client"
    server_backup_fraction: float = Field(0.5, ge=0, le=1)
    schedule: Literal["adhoc", "round_robin"] = "adhoc"


def backup_on_server(settings: CCFedAvgSettings, setup: MethodSetup) -> np.ndarray:
    """Which devices leave their history on the server, shape (n_devices,) bool: none (``backup = "client"``,
    Algorithm 1), all (``"server"``, Algorithm 2), or a seeded share ``server_backup_fraction`` (``"mixed"``,
    Algorithm 3; stream ``ccfedavg_backup``)."""
    n = setup.n_devices
    on_server = np.full(n, settings.backup == "server")
    if settings.backup == "mixed":
        m = int(round(settings.server_backup_fraction * n))
        on_server[setup.streams.numpy("ccfedavg_backup").permutation(n)[:m]] = True
    return on_server


class CCFedAvg(ProbabilityMethod):
    """CC-FedAvg and Strategies 1/2/3/c with client, server or mixed backup (``[method.ccfedavg]``)."""

    name = "ccfedavg"
    plans_to_t_max = FedAvg.__dict__["plans_to_t_max"]  # FedAvg's plan; only whether there is a deadline counts
    Settings = CCFedAvgSettings

    def __init__(self, *, settings=None, setup) -> None:
        super().__init__(settings=settings, setup=setup)
        self.strategy, self.tau = self.settings.strategy, self.settings.tau
        self.planner = SkipPlanner(self.settings, setup)
        self.server_backup = backup_on_server(self.settings, setup)
        # history per device id: "update" = last computed Delta^i, "model" = last local model x^i_K
        self.client_store: dict[int, dict[str, State]] = {}
        self.server_store: dict[int, dict[str, State]] = {}
        self._round = 0

    # ------------------------------------------------------------------ what a skipping client needs
    def _estimate_kind(self, round_index: int) -> str:
        """"update" (Strategy 3) or "model" (Strategy 2) for a skip in 1-based round ``round_index``.

        CC-FedAvg(c), eq. (4): Strategy 3 while t < tau with the paper's t = round_index - 1 (Algorithm 1).
        """
        t = round_index - 1
        if self.strategy == 3 or (self.strategy == "c" and t < self.tau):
            return "update"
        return "model"

    def _stored_keys(self) -> tuple[str, ...]:
        return {3: ("update",), 2: ("model",), "c": ("update", "model")}.get(self.strategy, ())

    def _has_history(self, device: int) -> bool:
        store = self.server_store if self.server_backup[device] else self.client_store
        return device in store

    def _history(self, start: State, update: State) -> dict[str, State] | None:
        """What a device (or the server for it) keeps of a job that trained from ``start`` and built ``update``:
        the update (Strategy 3), the local model (Strategy 2) or both (CC-FedAvg(c)); None for strategy 1."""
        keys = self._stored_keys()
        if not keys:
            return None
        entry = {}
        if "update" in keys:
            entry["update"] = {k: v.detach().clone() for k, v in update.items()}
        if "model" in keys:
            entry["model"] = {k: start[k] + update[k] for k in update}
        return entry

    def _estimate(self, entry: dict[str, State], global_state: State, round_index: int) -> State:
        """The skipping client's contribution as an update relative to x_t = ``global_state``."""
        if self._estimate_kind(round_index) == "update":
            return entry["update"]  # Strategy 3: Delta^i_t = Delta^i_{last}
        return {k: entry["model"][k] - global_state[k] for k in entry["model"]}  # Strategy 2: x^i_{last,K} - x_t

    # ------------------------------------------------------------------ protocol
    def plan_round(self, ctx: RoundContext) -> RoundPlan:
        self._round = ctx.round_index
        sel = ctx.selected
        train = self.planner.decide(sel, ctx.round_index, deadline=ctx.t_budget_s is not None)
        if self.strategy == 1:
            base = super().plan_round(dataclasses.replace(ctx, selected=sel[train]))
            p = self.planner.p[sel[~train]]
            return base.with_skipped(sel[~train], [f"skip (strategy 1, p_i={pi:.4g})" for pi in p])
        no_history = np.array([not self._has_history(int(d)) for d in sel], dtype=bool)
        train = train | no_history  # a client that never trained (or whose history never arrived) trains
        base = super().plan_round(dataclasses.replace(ctx, selected=sel[train]))
        est = sel[~train]
        bits = np.where(self.server_backup[est], SKIP_SIGNAL_BITS, float(self.workload.update_bits))
        t_com, e_com = ctx.costs.upload(est, bits=bits, rate_bps=ctx.rate_bps[est])
        ok = e_com <= ctx.e_max_j[est]
        est_jobs = JobTable.build(
            est[ok], cpu_hz=ctx.fleet.f_max_hz[est[ok]], width=self.setup.width, local_steps=0,
            bits_planned=bits[ok], t_cmp_planned_s=0.0, t_com_planned_s=t_com[ok], e_cmp_planned_j=0.0,
            e_com_planned_j=e_com[ok],
        )  # fmt: skip
        reasons = [f"energy: upload of estimate needs {e:.4g} J > E_max {b:.4g} J"
                   for e, b in zip(e_com[~ok], ctx.e_max_j[est][~ok])]  # fmt: skip
        return dataclasses.replace(base, jobs=JobTable.concat(base.jobs, est_jobs)).with_skipped(est[~ok], reasons)

    def device_memory(self, device: int) -> dict[str, State] | None:
        """A client-backup device's history (None for a server-backup device: the server holds it)."""
        return self.client_store.get(device)

    def remember(self, updates: Sequence[ClientUpdate]) -> None:
        """Keep the histories the client-backup devices built (:meth:`client_update`)."""
        for u in updates:
            if u.memory is not None:
                self.client_store[u.device] = u.memory

    def local_training(self, job: TrainJob, *, trainer: Training) -> LocalTraining | None:
        """A device that trains this round (``local_steps > 0``): FedAvg's training of its download; None for one
        that estimates its update instead. Trained together only under ``train.vectorise = "on"``."""
        return LocalTraining(start=job.start, width=job.job.width) if job.job.local_steps > 0 else None

    def finish_update(self, job: TrainJob, res: TrainResult, *, trainer: Training) -> ClientUpdate:
        """FedAvg's dense update, with the device's history when it keeps its own (client backup)."""
        upd = super().finish_update(job, res, trainer=trainer)
        if not self.server_backup[job.device]:  # the device keeps its own history
            upd = dataclasses.replace(upd, memory=self._history(job.start, upd.payload.update))
        return upd

    def wire_bytes(self, update: ClientUpdate) -> bytes | None:
        """A skip signal's one bit (1, padded with zeros to a byte); a dense update's float32 bytes."""
        if isinstance(update.payload, SkipSignal):
            return b"\x80"
        return super().wire_bytes(update)

    def client_update(self, job: TrainJob, *, trainer: Training) -> ClientUpdate:
        d = job.device
        weight = float(trainer.n_samples[d])
        if job.job.local_steps > 0:  # local training (Algorithm 1 lines 8-12)
            return self.trained_update(job, trainer=trainer)
        if self.server_backup[d]:  # Algorithm 2 line 16: a skip signal; the server estimates in aggregate()
            payload: SkipSignal | DenseUpdate = SkipSignal()
            bits = SKIP_SIGNAL_BITS
        else:  # Algorithm 1 line 15: the client estimates and uploads the full update
            payload = DenseUpdate(self._estimate(job.memory, job.start, job.round_index))
            bits = float(trainer.update_bits)
        return ClientUpdate(device=d, payload=payload, weight=weight, bits=bits, flops=0.0, steps=0,
                            train_loss=math.nan)  # fmt: skip

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        resolved = []
        for u in updates:
            if self.server_backup[u.device]:
                if isinstance(u.payload, SkipSignal):  # Algorithm 2 line 21: the server estimates
                    est = self._estimate(self.server_store[u.device], state, self._round)
                    u = dataclasses.replace(u, payload=DenseUpdate(est))
                else:  # a trained update reached the server: it becomes the device's history
                    entry = self._history(state, u.payload.update)
                    if entry is not None:
                        self.server_store[u.device] = entry
            resolved.append(u)
        # sum in device order, not arrival order: a 1-bit skip signal arrives earlier than an uploaded estimate,
        # and the same contributions must give the same model bit for bit whichever backup is used
        resolved.sort(key=lambda u: u.device)
        return super().aggregate(state, updates=resolved)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        def pack(store: dict) -> dict:
            return {str(d): {k: dict(s) for k, s in e.items()} for d, e in store.items()}

        return {"planner": self.planner.state_dict(), "client": pack(self.client_store),
                "server": pack(self.server_store)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.planner.load_state_dict(state["planner"])
        self.client_store = {int(d): {k: dict(s) for k, s in e.items()} for d, e in state["client"].items()}
        self.server_store = {int(d): {k: dict(s) for k, s in e.items()} for d, e in state["server"].items()}
