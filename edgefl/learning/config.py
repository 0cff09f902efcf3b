"""Local-training settings shared by the torch trainer and the surrogate (no torch import here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "BITS_PER_PARAMETER", "LocalTrainConfig", "local_train_config", "scheduled_lr", "samples_per_round",
    "steps_per_round",
]

BITS_PER_PARAMETER = 32
"""Bits of one parameter in an uncompressed update (float32), as in AnycostFL Sec. V-A's update sizes."""


@dataclass(frozen=True, kw_only=True)
class LocalTrainConfig:
    """SGD settings. ``steps > 0`` runs exactly that many mini-batch steps, else ``epochs`` passes."""

    epochs: int = 1
    steps: int = 0
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_clip: float = 0.0


def local_train_config(train) -> LocalTrainConfig:
    """The trainer's settings from a scenario's ``train`` section (:class:`edgefl.scenario.loading.TrainConfig`)."""
    same = {name: getattr(train, name) for name in ("batch_size", "lr", "momentum", "weight_decay", "grad_clip")}
    return LocalTrainConfig(epochs=train.local_epochs, steps=train.local_steps, **same)


def scheduled_lr(train, lr: float, round_index: int) -> float:
    """Learning rate eta_r of 1-based round ``round_index`` from the base rate ``lr`` = eta_0 (``train.lr_schedule``).

    - ``"constant"``: eta_0;
    - ``"inverse_round"``: eta_r = eta_0 / r, Luo et al.'s Algorithm 1 (eta_0 / (1 + (r - 1)));
    - ``"step"``: eta_0 * ``lr_factor`` ** #{m in ``lr_milestones`` : m < r}, HeteroFL Table 6's decay (x0.1 at
      milestones counted in rounds), i.e. PyTorch ``MultiStepLR`` stepped once after each round: with milestones [100],
      rounds 1-100 use eta_0 and rounds 101.. use 0.1 eta_0.
    """
    if train.lr_schedule == "inverse_round":
        return lr / round_index
    if train.lr_schedule == "step":
        return lr * float(train.lr_factor) ** sum(1 for m in train.lr_milestones if m < round_index)
    return lr


def samples_per_round(cfg: LocalTrainConfig, n_samples: np.ndarray) -> np.ndarray:
    """Samples one local run processes per device: ``steps * min(batch, n)``, or ``epochs * n``; shape of n."""
    n = np.asarray(n_samples)
    if cfg.steps > 0:
        return np.asarray(cfg.steps * np.minimum(cfg.batch_size, n))
    return np.asarray(cfg.epochs * n)


def steps_per_round(cfg: LocalTrainConfig, n_samples: np.ndarray) -> np.ndarray:
    """SGD steps of one local run per device: ``steps``, or ``epochs * ceil(n / batch)``; shape of n."""
    n = np.asarray(n_samples)
    if cfg.steps > 0:
        return np.full(n.shape, cfg.steps)
    return cfg.epochs * -(-n // cfg.batch_size)
