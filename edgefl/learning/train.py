"""The one local-training routine every method uses: mini-batch SGD on a device's data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from edgefl.learning.config import LocalTrainConfig
from edgefl.learning.losses import masked_cross_entropy

__all__ = ["LocalTrainConfig", "LocalTrainStats", "local_train", "local_train_many", "trains_together", "evaluate"]


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
    penalty: Callable[[nn.Module], torch.Tensor] | None = None,
) -> LocalTrainStats:
    """Train ``model`` in place on (x, y) with SGD; batch order drawn from ``generator``.

    ``class_mask`` (bool, shape (n_classes,)): HeteroFL's masked cross-entropy, the logits of classes outside
    the mask are set to 0 before the loss (:func:`edgefl.learning.losses.masked_cross_entropy`).
    ``penalty(model)``: a scalar term added to every batch's loss before the backward pass (a method's local
    regulariser, e.g. a proximal term); the recorded mean loss is the data loss alone, and the FLOPs charged are
    those of the data loss (a penalty's cost is not measured).
    """
    if x.shape[0] == 0:
        raise ValueError("local_train: the device has no training samples")
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    steps = samples = 0
    loss_sum = torch.zeros((), device=x.device)
    if class_mask is not None:
        class_mask = class_mask.to(x.device)
    for idx in _batches(x.shape[0], cfg, generator):
        opt.zero_grad(set_to_none=True)
        logits = model(x[idx])
        loss = F.cross_entropy(logits, y[idx]) if class_mask is None else masked_cross_entropy(logits, y[idx], class_mask)
        (loss if penalty is None else loss + penalty(model)).backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss_sum += loss.detach()
        steps += 1
        samples += int(idx.shape[0])
    return LocalTrainStats(steps=steps, samples=samples, mean_loss=float(loss_sum) / steps)


def trains_together(model: nn.Module, cfg: LocalTrainConfig) -> bool:
    """Whether :func:`local_train_many` can train several copies of ``model`` at once: a fixed number of SGD
    steps (``cfg.steps > 0``), no gradient clipping, and a model without buffers, batch norm or dropout (its
    forward pass is then a pure, row-by-row function of its parameters and input, so padded rows are inert)."""
    batch_coupled = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)
    stateful = any(isinstance(m, batch_coupled) for m in model.modules()) or any(True for _ in model.buffers())
    return cfg.steps > 0 and cfg.grad_clip == 0 and not stateful


def local_train_many(
    model: nn.Module,
    start: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    owned: list[torch.Tensor],
    cfg: LocalTrainConfig,
    generators: list[torch.Generator],
) -> tuple[dict[str, torch.Tensor], list[LocalTrainStats]]:
    """:func:`local_train` for D devices at once, vectorised over devices with ``torch.func.vmap``.

    Device d starts from ``start`` and trains on the rows ``owned[d]`` of (x, y) with the batches drawn from
    ``generators[d]`` exactly as :func:`local_train` draws them, and the same SGD rule (weight decay, then
    momentum, then ``p -= lr * buf``), so each device ends where its own :func:`local_train` run would, up
    to float rounding. Devices whose batch is smaller than the largest (fewer samples than ``batch_size``) are
    padded with weight-0 rows. Requires :func:`trains_together`. Returns the final parameters stacked on a
    leading device axis, shape (D, *param.shape), and each device's stats.
    """
    from torch.func import functional_call, grad_and_value, vmap

    if not trains_together(model, cfg):
        raise ValueError("local_train_many: needs cfg.steps > 0, no gradient clipping, no buffers, BN or dropout")
    if len(owned) != len(generators) or not owned:
        raise ValueError(f"local_train_many: {len(owned)} devices but {len(generators)} generators")
    if any(o.numel() == 0 for o in owned):
        raise ValueError("local_train_many: a device has no training samples")
    n_dev, steps = len(owned), cfg.steps
    sizes = [min(cfg.batch_size, int(o.numel())) for o in owned]
    width = max(sizes)
    index = torch.zeros(n_dev, steps, width, dtype=torch.long)
    weight = torch.zeros(n_dev, width)
    for d, (rows, gen) in enumerate(zip(owned, generators)):
        batches = torch.stack(list(_batches(int(rows.numel()), cfg, gen)))  # (steps, sizes[d]), local indices
        index[d, :, : sizes[d]] = rows[batches]
        weight[d, : sizes[d]] = 1.0 / sizes[d]
    model.train()

    def batch_loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor):
        logits = functional_call(model, params, (xb,))
        return (F.cross_entropy(logits, yb, reduction="none") * wb).sum()  # the mean over the real rows

    step_fn = vmap(grad_and_value(batch_loss))
    on = x.device
    weight = weight.to(on)
    params = {k: v.detach().to(on).unsqueeze(0).repeat(n_dev, *([1] * v.dim())) for k, v in start.items()}
    bufs: dict[str, torch.Tensor] = {}
    loss_sum = torch.zeros(n_dev, device=on)
    with torch.no_grad():
        for j in range(steps):
            idx = index[:, j]
            grads, loss = step_fn(params, x[idx], y[idx], weight)
            loss_sum += loss
            for k, p in params.items():
                g = grads[k] if cfg.weight_decay == 0 else grads[k] + cfg.weight_decay * p
                if cfg.momentum != 0:
                    g = bufs[k] = g.clone() if j == 0 else bufs[k].mul_(cfg.momentum).add_(g)
                p.sub_(cfg.lr * g)
    stats = [LocalTrainStats(steps=steps, samples=steps * b, mean_loss=float(loss_sum[d]) / steps) for d, b in enumerate(sizes)]
    return params, stats


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
