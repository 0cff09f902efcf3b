"""Surrogate learning (``learning = "surrogate"``): the loss follows a paper's convergence bound, no torch.

For system studies with 10^4+ devices. Radio, fleet, optimizers, deadlines and energy run as usual; only
the model is replaced. The workload exposes what planners read from :class:`edgefl.learning.workload.Workload`
(``n_samples``, ``train_config``, ``flops_per_sample``, ``samples_per_round``, ``update_bits``) from its
surrogate config, and :meth:`SurrogateWorkload.bound_step` moves the loss by one round.

Bounds (constants in the scenario, see :class:`edgefl.scenario.loading.SurrogateConfig`):

- AnycostFL Theorem 2, per-round form eq. (45) with the ratio nu/lambda of eq. (18):
  ``gap_{t+1} = Z_t gap_t``, ``Z_t = 1 - (nu/lambda) (1 - epsilon (1 - g_t))``, where the global learning gain
  ``g_t = sum_i alpha_i^4 beta_i / I`` (Definition 3) runs over the I selected devices and a device whose
  update does not arrive adds 0. A full, uncompressed update (FedAvg) has alpha = beta = 1.
- Luo et al. bound (15): ``gap_R <= (A0 + B0 (1 + (N-K)/(K(N-1))) E^2) / (E R)``. With K and E fixed this is
  ``1 / sum_r q_r`` with ``q_r = E / (A0 + B0 (...) E^2)`` per round; the surrogate accumulates ``q_r`` with
  each round's arrived K and mean local steps E, so the bound holds exactly when K and E do not change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgefl.learning.data_sizes import DataSizes
from edgefl.learning.config import BITS_PER_PARAMETER, local_train_config, samples_per_round
from edgefl.learning.protocol import RoundWork
from edgefl.seeding import Streams

if TYPE_CHECKING:
    from edgefl.scenario.sections import SurrogateConfig, TrainConfig

__all__ = ["SurrogateState", "SurrogateWorkload", "anycost_contraction", "learning_gain", "luo_round_progress"]


@dataclass(frozen=True)
class SurrogateState:
    """The surrogate's "model": optimality gap F(w_t) - F* [loss units] and Luo's accumulated progress."""

    gap: float
    progress: float = 0.0


def learning_gain(alpha: np.ndarray, beta: np.ndarray, n_selected: int) -> float:
    """Global learning gain g_t = sum_i alpha_i^4 beta_i / I (AnycostFL Definition 3) over the I selected devices,
    summed over the arrived updates (shape (k,) each; NaN = full model / uncompressed = 1); NaN if I = 0."""
    if not n_selected:
        return float("nan")
    alpha = np.nan_to_num(np.asarray(alpha, dtype=float), nan=1.0)
    beta = np.nan_to_num(np.asarray(beta, dtype=float), nan=1.0)
    return float(np.sum(alpha**4 * beta) / n_selected)


def anycost_contraction(gain: float, nu_over_lambda: float, epsilon: float) -> float:
    """Z_t = 1 - (nu/lambda) (1 - epsilon (1 - g_t)), AnycostFL eq. (45) with eq. (18)'s nu/lambda."""
    return 1.0 - nu_over_lambda * (1.0 - epsilon * (1.0 - gain))


def luo_round_progress(k: int, e: float, n: int, a0: float, b0: float) -> float:
    """One round's share q = E / (A0 + B0 (1 + (N-K)/(K(N-1))) E^2) of Luo bound (15); 0 if K = 0 or E = 0."""
    if k <= 0 or e <= 0:
        return 0.0
    spread = 1.0 + ((n - k) / (k * (n - 1)) if n > 1 else 0.0)
    return e / (a0 + b0 * spread * e * e)


class SurrogateWorkload:
    """Sizes and loss dynamics of a run whose learning is replaced by a convergence bound
    (the :class:`~edgefl.learning.protocol.Learning` protocol: the round's work is what was planned), built from
    its own configs: ``config`` the bound's constants, ``width`` the global model's width, ``n_devices`` N and
    ``train_config`` the local SGD settings (from the ``train`` config)."""

    trains = False

    def __init__(
        self, *, config: SurrogateConfig, train: TrainConfig, width: float, n_devices: int, streams: Streams,
        data_sizes: DataSizes | None = None,
    ) -> None:  # fmt: skip
        """``data_sizes``: a device table's ``n_samples`` / ``data_share``, which replace the drawn sizes."""
        self.config = config
        self.width = width
        self.n_devices = n = n_devices
        cfg = config
        if isinstance(cfg.samples_per_device, tuple):
            lo, hi = cfg.samples_per_device
            drawn = streams.numpy("surrogate_samples").uniform(lo, hi, size=n)
        else:
            drawn = np.full(n, cfg.samples_per_device)
        self.n_samples = np.maximum(1, np.round(drawn)).astype(np.int64)  # shape (n,)
        if data_sizes is not None:  # a device table's n_samples / data_share
            self.n_samples = data_sizes.sizes(self.n_samples, int(self.n_samples.sum()))
        self.train_config = local_train_config(train)

    def flops_per_sample(self, width: float | np.ndarray | None = None) -> float | np.ndarray:
        """Training FLOPs per sample of a width-``width`` submodel: full model x width^2 (conv/fc layers)."""
        width = self.width if width is None else width
        return self.config.train_flops_per_sample * np.square(width)

    def samples_per_round(self, device: int | np.ndarray) -> np.ndarray:
        """Samples one local run processes on each device (epochs x local size, or steps x batch)."""
        return samples_per_round(self.train_config, self.n_samples[device])

    @property
    def update_bits(self) -> int:
        """Size of the full uncompressed float32 update [bits]."""
        return BITS_PER_PARAMETER * self.config.model_parameters

    def update_bits_at(self, width: float) -> int:
        """Size of an uncompressed float32 width-``width`` submodel [bits]: the full update x width^2."""
        return int(round(self.update_bits * width * width))

    def initial_state(self) -> SurrogateState:
        cfg = self.config
        return SurrogateState(gap=max(cfg.initial_loss - cfg.loss_floor, 0.0))

    def saved_state(self, state: SurrogateState) -> dict:
        """The state as JSON-able numbers: ``gap`` and ``progress``."""
        return {"gap": state.gap, "progress": state.progress}

    def state_from_saved(self, saved: dict) -> SurrogateState:
        return SurrogateState(gap=float(saved["gap"]), progress=float(saved["progress"]))

    def loss(self, state: SurrogateState) -> float:
        """Global training loss F(w_t) = loss_floor + gap."""
        return self.config.loss_floor + state.gap

    # ------------------------------------------------------------------ the steps of edgefl.training.learner.BoundLearner
    def planned_work(self, jobs: Any) -> RoundWork:
        """The planned work of each job: FLOPs of its width-w submodel, its planned bits (the full update when
        the method planned none) and its planned steps; nothing trains."""
        dev = jobs.device
        flops = self.flops_per_sample(jobs.width) * self.samples_per_round(dev)
        bits = np.where(np.isnan(jobs.bits_planned), float(self.update_bits), jobs.bits_planned)
        return RoundWork(flops=flops, bits=bits, steps=jobs.local_steps, losses=np.full(len(jobs), math.nan),
                         updates=[None] * len(jobs))  # fmt: skip

    def async_step(
        self, state: SurrogateState, *, omega: np.ndarray, alpha: np.ndarray, beta: np.ndarray
    ) -> SurrogateState:
        """An asynchronous server step (:mod:`edgefl.methods.asynchronous`): ``gap <- gap (1 - (nu/lambda)
        sum_i omega_i (1 - epsilon (1 - alpha_i^4 beta_i)))``, clipped at 0, with each update's
        staleness-discounted step ``omega_i`` (shape (m,) each; NaN alpha/beta = full/uncompressed = 1)."""
        cfg = self.config
        if cfg.bound != "anycostfl":
            raise ValueError("asynchronous methods under surrogate learning need surrogate.bound = 'anycostfl'")
        a = np.nan_to_num(np.asarray(alpha, dtype=float), nan=1.0)
        b = np.nan_to_num(np.asarray(beta, dtype=float), nan=1.0)
        drop = cfg.nu_over_lambda * float(np.sum(np.asarray(omega, dtype=float) * (1.0 - cfg.epsilon * (1.0 - a**4 * b))))
        return SurrogateState(gap=state.gap * max(0.0, 1.0 - drop), progress=state.progress)

    def bound_step(
        self,
        state: SurrogateState,
        *,
        n_selected: int,
        alpha: np.ndarray,
        beta: np.ndarray,
        local_steps: np.ndarray,
    ) -> SurrogateState:
        """The state after a round whose arrived updates had these knobs (shape (k,) each; NaN = full/none)."""
        cfg = self.config
        if cfg.bound == "anycostfl":
            gain = learning_gain(alpha, beta, n_selected) if n_selected else 0.0  # nobody selected: no progress
            return SurrogateState(gap=state.gap * anycost_contraction(gain, cfg.nu_over_lambda, cfg.epsilon))
        k = int(alpha.size)
        e = float(np.mean(local_steps)) if k else 0.0
        progress = state.progress + luo_round_progress(k, e, self.n_devices, cfg.a0, cfg.b0)
        initial = self.initial_state().gap
        gap = min(initial, 1.0 / progress) if progress > 0 else initial
        return SurrogateState(gap=gap, progress=progress)


