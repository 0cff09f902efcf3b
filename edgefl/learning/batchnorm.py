"""Static batch normalisation (HeteroFL, Diao et al. ICLR 2021, Sec. 3.2).

During local training BN tracks no running statistics (``track_running_stats=False``: every batch is normalised
with its own statistics, and no statistics travel with an update). Before evaluation the server queries clients
in turn and accumulates the global model's BN statistics from their data — never from a central copy of the
training set; which clients, and how many, is the caller's choice (HeteroFL's code queries all of them):

    stats = accumulate_bn_statistics(global_model, (client_batches(c) for c in queried_clients))
    eval_model = with_static_bn(global_model, stats)   # a copy in eval mode, BN uses the accumulated statistics

The statistics pass runs the model in training mode (as HeteroFL's code): each BN layer normalises with the batch
statistics while its *input* is recorded, so deeper layers see the activations of training.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Literal

import torch
from torch import nn

from edgefl.learning.models._checks import ModelError

__all__ = ["accumulate_bn_statistics", "with_static_bn"]

_BN = nn.modules.batchnorm._BatchNorm


class _Accumulator:
    """Per-channel sums of one BN layer's inputs (float64)."""

    def __init__(self) -> None:
        self.sum: torch.Tensor | None = None
        self.sumsq: torch.Tensor | None = None
        self.count = 0
        self.batch_means: torch.Tensor | None = None  # sum over batches of the batch mean
        self.batch_vars: torch.Tensor | None = None  # sum over batches of the unbiased batch variance
        self.batches = 0

    def __call__(self, module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        x = args[0].detach().to(torch.float64)
        dims = [d for d in range(x.dim()) if d != 1]  # every dim but the channels
        n = x.numel() // x.shape[1]
        s, sq = x.sum(dims), (x * x).sum(dims)
        mean = s / n
        var = (sq - n * mean * mean) / max(n - 1, 1)
        if self.sum is None:
            self.sum, self.sumsq = torch.zeros_like(s), torch.zeros_like(s)
            self.batch_means, self.batch_vars = torch.zeros_like(s), torch.zeros_like(s)
        self.sum += s
        self.sumsq += sq
        self.count += n
        self.batch_means += mean
        self.batch_vars += var
        self.batches += 1


def _inputs(batch: object) -> torch.Tensor:
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0]  # an (x, y) batch: the labels are not needed
    raise ModelError(f"client batch of type {type(batch).__name__}: must be a tensor x or an (x, y) pair")


def accumulate_bn_statistics(
    model: nn.Module,
    clients: Iterable[Iterable[object]],
    *,
    pooling: Literal["union", "per_batch"] = "union",
) -> dict[str, dict[str, torch.Tensor]]:
    """BN statistics of ``model`` accumulated over the data of the queried clients (HeteroFL Sec. 3.2, sBN).

    ``clients`` yields, client after client, an iterable of that client's batches (a tensor ``x`` of inputs or an
    ``(x, y)`` pair). ``model`` is not modified (a copy runs, in training mode, without gradients). Returns, for
    every BN layer by module name, ``running_mean`` and ``running_var`` (shape ``(C,)``, float32) and
    ``num_batches_tracked`` (the number of batches seen, as PyTorch counts them).

    ``pooling="union"`` (default): the mean and the unbiased variance over every element of the union of the
    clients' data (per channel, over batch and spatial positions), independent of how the data is batched.
    ``pooling="per_batch"``: what HeteroFL's code gets from ``BatchNorm(momentum=None)``, PyTorch's cumulative
    average: the equal-weight mean over batches of the batch means and of the unbiased batch variances (equal to
    the union mean for equal-size batches; it misses the spread between batch means in the variance).
    """
    if pooling not in ("union", "per_batch"):
        raise ModelError(f"pooling={pooling!r}: must be 'union' or 'per_batch'")
    work = copy.deepcopy(model).train()
    accumulators: dict[str, _Accumulator] = {}
    handles = []
    for name, module in work.named_modules():
        if isinstance(module, _BN):
            accumulators[name] = _Accumulator()
            handles.append(module.register_forward_pre_hook(accumulators[name]))
    if not accumulators:
        raise ModelError(f"model {type(model).__name__} has no batch-norm layer: nothing to accumulate")
    try:
        with torch.no_grad():
            for client in clients:
                for batch in client:
                    work(_inputs(batch))
    finally:
        for handle in handles:
            handle.remove()
    stats: dict[str, dict[str, torch.Tensor]] = {}
    for name, acc in accumulators.items():
        if acc.sum is None:
            raise ModelError("no client batch reached the model: query at least one client with data")
        if pooling == "union":
            mean = acc.sum / acc.count
            var = (acc.sumsq - acc.count * mean * mean) / max(acc.count - 1, 1)
        else:
            mean, var = acc.batch_means / acc.batches, acc.batch_vars / acc.batches
        stats[name] = {
            "running_mean": mean.to(torch.float32),
            "running_var": var.clamp_min(0.0).to(torch.float32),
            "num_batches_tracked": torch.tensor(acc.batches, dtype=torch.long),
        }
    return stats


def with_static_bn(model: nn.Module, stats: dict[str, dict[str, torch.Tensor]]) -> nn.Module:
    """A copy of ``model`` in eval mode whose BN layers normalise with ``stats`` (from
    :func:`accumulate_bn_statistics`): each BN layer gets ``track_running_stats=True`` and those buffers.

    ``model`` is not modified. Every BN layer of ``model`` must have an entry in ``stats``.
    """
    out = copy.deepcopy(model)
    for name, module in out.named_modules():
        if not isinstance(module, _BN):
            continue
        if name not in stats:
            raise ModelError(f"no statistics for batch-norm layer {name!r}: accumulate them on this model")
        entry = stats[name]
        if entry["running_mean"].shape != (module.num_features,):
            raise ModelError(
                f"statistics of {name!r} have shape {tuple(entry['running_mean'].shape)}; "
                f"the layer has {module.num_features} channels"
            )
        module.track_running_stats = True
        module.momentum = None
        ref = module.weight if module.weight is not None else entry["running_mean"]
        module.running_mean = entry["running_mean"].detach().clone().to(ref.dtype)
        module.running_var = entry["running_var"].detach().clone().to(ref.dtype)
        module.num_batches_tracked = entry["num_batches_tracked"].detach().clone()
    return out.eval()
