"""The one local-training routine every method uses: mini-batch SGD on a device's data."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from edgefl.learning.config import LocalTrainConfig
from edgefl.learning.losses import masked_cross_entropy

__all__ = ["LocalTrainConfig", "LocalTrainStats", "local_train", "evaluate"]


@dataclass(frozen=True, kw_only=True)
class LocalTrainStats:
    """What a local training run did: SGD steps, samples processed (for FLOP charging), mean batch loss."""

    steps: int
    samples: int
    mean_loss: float


def _batches(n: int, cfg: LocalTrainConfig, generator: torch.Generator):
    bs = min(cfg.batch_size, n)
    if cfg.steps > 0:
        done = 0
        while True:
            perm = torch.randperm(n, generator=generator)
            for start in range(0, n - bs + 1, bs):  # full batches only in step mode
                yield perm[start : start + bs]
                done += 1
                if done == cfg.steps:
                    return
    else:
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=generator)
            for start in range(0, n, bs):
                yield perm[start : start + bs]


def local_train(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: LocalTrainConfig,
    generator: torch.Generator,
    *,
    class_mask: torch.Tensor | None = None,
) -> LocalTrainStats:
    """Train ``model`` in place on (x, y) with SGD; batch order drawn from ``generator``.

    ``class_mask`` (bool, shape (n_classes,)): HeteroFL's masked cross-entropy, the logits of classes outside
    the mask are set to 0 before the loss (:func:`edgefl.learning.losses.masked_cross_entropy`).
    """
    if x.shape[0] == 0:
        raise ValueError("local_train: the device has no training samples")
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    steps = samples = 0
    loss_sum = torch.zeros(())
    for idx in _batches(x.shape[0], cfg, generator):
        opt.zero_grad(set_to_none=True)
        logits = model(x[idx])
        loss = F.cross_entropy(logits, y[idx]) if class_mask is None else masked_cross_entropy(logits, y[idx], class_mask)
        loss.backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss_sum += loss.detach()
        steps += 1
        samples += int(idx.shape[0])
    return LocalTrainStats(steps=steps, samples=samples, mean_loss=float(loss_sum) / steps)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 4096) -> tuple[float, float]:
    """(accuracy in [0, 1], mean cross-entropy loss) of ``model`` on (x, y)."""
    model.eval()
    correct = 0
    loss = 0.0
    for start in range(0, x.shape[0], batch_size):
        logits = model(x[start : start + batch_size])
        yb = y[start : start + batch_size]
        loss += float(F.cross_entropy(logits, yb, reduction="sum"))
        correct += int((logits.argmax(1) == yb).sum())
    return correct / x.shape[0], loss / x.shape[0]
