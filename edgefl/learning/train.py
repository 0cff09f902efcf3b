"""The one local-training routine every method uses: mini-batch SGD on a device's data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    """Whether :func:`local_train_many` can train several copies of ``model`` at once: no gradient clipping (a
    norm per device) and a model without buffers, batch norm or dropout (its forward pass is then a pure,
    row-by-row function of its parameters and input, so padded rows are inert and a batch's statistics never
    mix devices). Fixed-step (``cfg.steps > 0``) and epoch training both qualify."""
    batch_coupled = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)
    stateful = any(isinstance(m, batch_coupled) for m in model.modules()) or any(True for _ in model.buffers())
    return cfg.grad_clip == 0 and not stateful


def local_train_many(
    model: nn.Module,
    start: dict[str, torch.Tensor] | Sequence[dict[str, torch.Tensor]],
    x: torch.Tensor,
    y: torch.Tensor,
    owned: list[torch.Tensor],
    cfg: LocalTrainConfig,
    generators: list[torch.Generator],
    *,
    class_masks: torch.Tensor | None = None,
) -> tuple[dict[str, torch.Tensor], list[LocalTrainStats]]:
    """:func:`local_train` for D devices at once, vectorised over devices with ``torch.func.vmap``.

    Device d starts from ``start`` (one state for every device, or a sequence of D states of ``model``'s shapes)
    and trains on the rows ``owned[d]`` of (x, y) with the batches drawn from ``generators[d]`` exactly as
    :func:`local_train` draws them (fixed steps or epochs), and the same SGD rule (weight decay, then momentum,
    then ``p -= lr * buf``), so each device ends where its own :func:`local_train` run would, up to float
    rounding. A batch smaller than the group's largest (a device with fewer samples than ``batch_size``, an
    epoch's last batch) is padded with weight-0 rows; a device with fewer SGD steps than the group's most
    (epochs over fewer samples) keeps its parameters and momentum unchanged in the steps after its last.
    ``class_masks`` (bool, shape (D, n_classes)): each device's masked cross-entropy (``local_train``'s
    ``class_mask``). Requires :func:`trains_together`. Returns the final parameters stacked on a leading device
    axis, shape (D, *param.shape), and each device's stats.
    """
    from torch.func import functional_call, grad_and_value, vmap

    if not trains_together(model, cfg):
        raise ValueError("local_train_many: needs no gradient clipping and a model without buffers, BN or dropout")
    if len(owned) != len(generators) or not owned:
        raise ValueError(f"local_train_many: {len(owned)} devices but {len(generators)} generators")
    if any(o.numel() == 0 for o in owned):
        raise ValueError("local_train_many: a device has no training samples")
    n_dev = len(owned)
    shared = isinstance(start, dict)
    if not shared and len(start) != n_dev:
        raise ValueError(f"local_train_many: {n_dev} devices but {len(start)} start states")
    plans = [list(_batches(int(rows.numel()), cfg, gen)) for rows, gen in zip(owned, generators)]
    n_steps = [len(p) for p in plans]
    steps, width = max(n_steps), max(int(b.numel()) for p in plans for b in p)
    index = torch.zeros(n_dev, steps, width, dtype=torch.long)
    weight = torch.zeros(n_dev, steps, width)
    for d, (rows, batches) in enumerate(zip(owned, plans)):
        for j, b in enumerate(batches):  # b: local indices of one batch
            index[d, j, : b.numel()] = rows[b]
            weight[d, j, : b.numel()] = 1.0 / b.numel()
    model.train()

    def batch_loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor):
        logits = functional_call(model, params, (xb,))
        return (F.cross_entropy(logits, yb, reduction="none") * wb).sum()  # the mean over the real rows

    def masked_loss(params, xb, yb, wb, mb):
        logits = functional_call(model, params, (xb,)).masked_fill(~mb, 0.0)  # masked_cross_entropy's rule
        return (F.cross_entropy(logits, yb, reduction="none") * wb).sum()

    step_fn = vmap(grad_and_value(batch_loss if class_masks is None else masked_loss))
    on = x.device
    weight = weight.to(on)
    if shared:
        params = {k: v.detach().to(on).unsqueeze(0).repeat(n_dev, *([1] * v.dim())) for k, v in start.items()}
    else:
        params = {k: torch.stack([s[k].detach() for s in start]).to(on) for k in start[0]}
    masks = () if class_masks is None else (class_masks.to(device=on, dtype=torch.bool),)
    last = torch.tensor(n_steps, device=on)  # device d runs steps 0 .. n_steps[d] - 1
    bufs: dict[str, torch.Tensor] = {}
    loss_sum = torch.zeros(n_dev, device=on)
    with torch.no_grad():
        for j in range(steps):
            idx = index[:, j]
            grads, loss = step_fn(params, x[idx], y[idx], weight[:, j], *masks)
            loss_sum += loss  # 0 for a device past its last step (all its rows weigh 0)
            done = None if j < min(n_steps) else (last <= j)  # devices past their last step: left unchanged
            for k, p in params.items():
                g = grads[k] if cfg.weight_decay == 0 else grads[k] + cfg.weight_decay * p
                if cfg.momentum != 0:
                    if j == 0:
                        g = bufs[k] = g.clone()
                    elif done is None:
                        g = bufs[k].mul_(cfg.momentum).add_(g)
                    else:
                        g = bufs[k] = torch.where(_rows(done, g), bufs[k], bufs[k] * cfg.momentum + g)
                if done is None:
                    p.sub_(cfg.lr * g)
                else:
                    p.copy_(torch.where(_rows(done, p), p, p - cfg.lr * g))
    stats = [
        LocalTrainStats(steps=n, samples=sum(int(b.numel()) for b in plan), mean_loss=float(loss_sum[d]) / n)
        for d, (n, plan) in enumerate(zip(n_steps, plans))
    ]  # fmt: skip
    return params, stats


def _rows(flags: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``flags`` (shape (D,)) shaped to broadcast over ``like``'s trailing axes, shape (D, 1, ..., 1)."""
    return flags.reshape(-1, *([1] * (like.dim() - 1)))


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
