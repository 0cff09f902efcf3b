"""Asynchronous FL on the run's clock: FedAsync (Xie et al. 2019) and FedBuff (Nguyen et al. 2022).

Both keep ``method.clients_per_round`` devices working at once (the concurrency C): whenever a device's job
ends, the server dispatches the current global model to another online, idle device. A job trained from the
model of version v_0 and aggregated at version v has staleness ``tau = v - v_0`` (in server updates).
They plan and train exactly as FedAvg (its CPU policy, its local work, its dense float32 update); only the
server's step differs, and each server step is one row of ``rounds.csv`` (:mod:`edgefl.engine.async_driver`).

Staleness functions s(tau) (Xie et al. 2019, Sec. 5.2), in ``staleness``:
``"constant"``: s = 1; ``"polynomial"``: s = (tau + 1)^(-a); ``"hinge"``: s = 1 if tau <= b, else
1 / (a (tau - b) + 1).

- FedAsync, on every arrival: ``w <- (1 - alpha_t) w + alpha_t w_i`` with ``alpha_t = alpha s(tau)`` and
  ``w_i = w_{v_0} + Delta_i`` the device's trained model (Xie et al. Algorithm 1, the "mix" step).
- FedBuff, once M updates are buffered: ``w <- w + eta_g (1/M) sum_i s(tau_i) Delta_i`` (Nguyen et al.
  Algorithm 1 with server learning rate eta_g; its staleness scaling 1/sqrt(1 + tau) is ``polynomial`` with
  a = 0.5, the default).

Under surrogate learning (``bound = "anycostfl"`` only) a server step with updates i moves the optimality gap as
``gap <- gap (1 - (nu/lambda) sum_i omega_i (1 - epsilon (1 - alpha_i^4 beta_i)))`` (clipped at 0), with the
staleness-discounted step ``omega_i = alpha s(tau_i)`` (FedAsync) or ``eta_g s(tau_i) / M`` (FedBuff): a
synchronous round of I fresh full updates with unit step is AnycostFL's Z_t with g_t = 1, and a stale update
counts s(tau) of a fresh one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from edgefl.methods.base import ClientUpdate, Needs
from edgefl.methods.fedavg import FedAvg, FedAvgSettings

if TYPE_CHECKING:
    from edgefl.learning.workload import State

__all__ = ["FedAsync", "FedAsyncSettings", "FedBuff", "FedBuffSettings", "staleness_weight", "AsyncMethod"]

Staleness = Literal["constant", "polynomial", "hinge"]


def staleness_weight(tau: np.ndarray | int, kind: Staleness, a: float, b: float) -> np.ndarray:
    """s(tau) of Xie et al. 2019 Sec. 5.2 for staleness ``tau`` >= 0 (server updates): constant 1, polynomial
    ``(tau + 1)^(-a)``, hinge ``1`` for ``tau <= b`` else ``1 / (a (tau - b) + 1)``. Shape of ``tau``."""
    t = np.asarray(tau, dtype=float)
    if kind == "constant":
        return np.ones_like(t)
    if kind == "polynomial":
        return (t + 1.0) ** (-a)
    return np.where(t <= b, 1.0, 1.0 / (a * (t - b) + 1.0))


class _AsyncSettings(FedAvgSettings):
    staleness: Staleness = "polynomial"
    a: float = Field(0.5, ge=0, le=100, allow_inf_nan=False)  # polynomial exponent / hinge slope
    b: float = Field(4.0, ge=0, le=1e9, allow_inf_nan=False)  # hinge: staleness tolerated at full weight


class FedAsyncSettings(_AsyncSettings):
    """``[method.fedasync]``: mixing weight ``alpha`` in (0, 1] and the staleness function (module docstring)."""

    alpha: float = Field(0.6, gt=0, le=1)


class FedBuffSettings(_AsyncSettings):
    """``[method.fedbuff]``: buffer size ``buffer_size`` M (updates per server step), server learning rate
    ``server_lr`` eta_g, and the staleness function (module docstring)."""

    buffer_size: int = Field(10, ge=1, le=10_000_000)
    server_lr: float = Field(1.0, gt=0, le=100, allow_inf_nan=False)


class AsyncMethod(FedAvg):
    """FedAvg's planning and local work with an asynchronous server step (:meth:`server_step`)."""

    needs = Needs(surrogate=True, asynchronous=True)
    takes_allocation = "none"  # jobs are dispatched one at a time (the load check says why)
    device_columns = ("staleness",)

    @property
    def buffer_size(self) -> int:
        """Updates per server step (1 for FedAsync)."""
        return 1

    def weights(self, tau: np.ndarray) -> np.ndarray:
        """Each update's step omega_i (module docstring), shape of ``tau``."""
        raise NotImplementedError

    def server_step(
        self, state: State, *, updates: Sequence[ClientUpdate], bases: Sequence[State], tau: np.ndarray
    ) -> State:
        """The next global state from ``updates`` (trained from ``bases``, the models they downloaded) with
        staleness ``tau`` (shape (m,))."""
        raise NotImplementedError

    def aggregate(self, state: State, *, updates: Sequence[ClientUpdate]) -> State:
        """Fresh updates (staleness 0) trained from ``state``."""
        return self.server_step(state, updates=updates, bases=[state] * len(updates), tau=np.zeros(len(updates)))


class FedAsync(AsyncMethod):
    """FedAsync: mix every arrival into the global model with weight alpha s(tau)."""

    name = "fedasync"
    Settings = FedAsyncSettings

    def weights(self, tau: np.ndarray) -> np.ndarray:
        st = self.settings
        return st.alpha * staleness_weight(tau, st.staleness, st.a, st.b)

    def server_step(self, state, *, updates, bases, tau):
        w = self.weights(np.asarray(tau))
        for u, base, a_t in zip(updates, bases, w.tolist()):  # one at a time, in arrival order
            delta = u.payload.update
            state = {k: (1.0 - a_t) * state[k] + a_t * (base[k] + delta[k]) for k in state}
        return state


class FedBuff(AsyncMethod):
    """FedBuff: average M buffered deltas, staleness-scaled, and step with the server learning rate."""

    name = "fedbuff"
    Settings = FedBuffSettings

    @property
    def buffer_size(self) -> int:
        return self.settings.buffer_size

    def weights(self, tau: np.ndarray) -> np.ndarray:
        st = self.settings
        return st.server_lr * staleness_weight(tau, st.staleness, st.a, st.b) / st.buffer_size

    def server_step(self, state, *, updates, bases, tau):
        if not updates:
            return state
        w = self.weights(np.asarray(tau)).tolist()
        return {k: state[k] + sum(wi * u.payload.update[k] for wi, u in zip(w, updates)) for k in state}
