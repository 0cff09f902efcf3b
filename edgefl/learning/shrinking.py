"""Elastic model shrinking (AnycostFL Sec. III-B): server-side channel sorting and the alpha-submodel.

1. :func:`sort_channels` — every hidden layer's output channels are reordered by the L2 norm of their weights
   (descending), and every tensor that carries that layer's channels is permuted the same way: the layer's bias,
   the batch-norm weight/bias (and running statistics) that follow it, and the next layer's *input* channels
   (for a conv -> fc flatten boundary, channel-major blocks of ``H*W`` inputs). The network computes the same
   function (permutation invariance).
2. :func:`shrink` — the submodel of shrinking factor alpha keeps the first ``ceil(sqrt(alpha) * units)`` channels
   of every hidden layer (the paper's "reduce each hidden layer by sqrt(alpha)"), cut with HeteroFL's
   :func:`edgefl.learning.slicing.slice_state` from the sorted state.

The layer structure (:func:`channel_groups`) is derived from the module order of the sequential models
(:class:`ConvNet`, :class:`MLP`, :class:`HeteroConv`; :class:`LogisticRegression` has no hidden layer).
:class:`PreResNet` is **not** supported: its residual additions couple the channels of all blocks of a stage, which
would have to be sorted jointly; it raises :class:`ShrinkingError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from edgefl.errors import EdgeflError
from edgefl.learning.slicing import Shapes, State, slice_state, submodel_shapes

__all__ = ["ShrinkingError", "ChannelGroup", "channel_groups", "channel_order", "sort_channels", "shrink_width",
           "shrink"]  # fmt: skip


class ShrinkingError(EdgeflError, ValueError):
    """A model's channel structure is not supported, or alpha is out of range."""


@dataclass(frozen=True)
class ChannelGroup:
    """The tensors that carry one hidden layer's channels.

    ``weight``: the layer's weight (its dim 0 = output channels, ranked by L2 norm). ``outputs``: names whose dim 0
    is indexed by these channels (weight, bias, following BN). ``inputs``: ``(name, block)`` of the next layer's
    weight, whose dim 1 holds ``block`` consecutive inputs per channel (``H*W`` after a flatten, else 1).
    """

    weight: str
    outputs: tuple[str, ...]
    inputs: tuple[tuple[str, int], ...]


def _supported(model: nn.Module) -> None:
    from edgefl.learning.models import MLP, ConvNet, HeteroConv, LogisticRegression

    if not isinstance(model, (ConvNet, MLP, HeteroConv, LogisticRegression)):
        raise ShrinkingError(
            f"channel sorting supports ConvNet, MLP, HeteroConv and LogisticRegression models, not "
            f"{type(model).__name__} (residual connections couple the channels of several layers)"
        )


def channel_groups(model: nn.Module) -> list[ChannelGroup]:
    """The hidden layers of ``model`` and the tensors carrying their channels, in forward order."""
    _supported(model)
    layers: list[tuple[str, nn.Module]] = [
        (name, m) for name, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d))
    ]
    groups = []
    for i, (name, module) in enumerate(layers):
        if isinstance(module, nn.BatchNorm2d):
            continue
        nxt = [(n, m) for n, m in layers[i + 1 :] if not isinstance(m, nn.BatchNorm2d)]
        if not nxt:
            break  # the output layer: classes are not permuted
        channels = module.weight.shape[0]
        outputs = [f"{name}.weight"] + ([f"{name}.bias"] if module.bias is not None else [])
        for bn_name, bn in layers[i + 1 :]:
            if not isinstance(bn, nn.BatchNorm2d):
                break
            if bn.num_features != channels:
                raise ShrinkingError(f"batch norm {bn_name!r} has {bn.num_features} features, expected {channels}")
            outputs += [f"{bn_name}.{p}" for p in ("weight", "bias", "running_mean", "running_var")]
        next_name, next_module = nxt[0]
        fan_in = next_module.weight.shape[1]
        if fan_in % channels:
            raise ShrinkingError(f"{next_name!r} has {fan_in} inputs, not a multiple of {name!r}'s {channels} channels")
        groups.append(ChannelGroup(f"{name}.weight", tuple(outputs), ((f"{next_name}.weight", fan_in // channels),)))
    return groups


def channel_order(weight: torch.Tensor) -> torch.Tensor:
    """Output channels by descending L2 norm of ``weight[c]`` (ties by index)."""
    norms = weight.detach().reshape(weight.shape[0], -1).double().norm(dim=1)
    return torch.argsort(-norms, stable=True)


def sort_channels(state: State, groups: Sequence[ChannelGroup]) -> dict[str, torch.Tensor]:
    """A copy of ``state`` with every group's channels sorted by L2 norm, descending (AnycostFL Sec. III-B 1)).

    Names of a group that ``state`` lacks (e.g. BN running statistics of static BN) are skipped.
    """
    out = {k: v.detach().clone() for k, v in state.items()}
    for group in groups:
        perm = channel_order(out[group.weight])
        for name in group.outputs:
            if name in out and out[name].dim() >= 1:
                out[name] = out[name][perm].contiguous()
        for name, block in group.inputs:
            w = out[name]
            idx = (perm[:, None] * block + torch.arange(block)[None, :]).reshape(-1)
            out[name] = w[:, idx].contiguous()
    return out


def shrink_width(alpha: float) -> float:
    """Width multiplier of shrinking factor alpha in (0, 1]: ``sqrt(alpha)`` (AnycostFL Sec. III-B 2))."""
    if not 0.0 < float(alpha) <= 1.0:
        raise ShrinkingError(f"alpha={alpha!r}: the shrinking factor must be in (0, 1]")
    return math.sqrt(float(alpha))


def shrink(
    state: State,
    model_name: str,
    alpha: float,
    *,
    input_shape: Sequence[int] | None = None,
    n_classes: int | None = None,
    hidden: Sequence[int] | None = None,
    groups: Sequence[ChannelGroup] | None = None,
) -> tuple[dict[str, torch.Tensor], Shapes]:
    """The alpha-submodel of registered model ``model_name`` from global ``state``: channels sorted, then the
    first ``ceil(sqrt(alpha) * units)`` of every hidden layer kept. Returns ``(sub_state, shapes)``.

    ``groups`` defaults to :func:`channel_groups` of the full model (built on the meta device); pass
    ``groups=()`` for a state that is already sorted.
    """
    width = shrink_width(alpha)
    if groups is None:
        from edgefl.learning.models import build_model

        with torch.device("meta"):
            full = build_model(model_name, input_shape=input_shape, n_classes=n_classes, hidden=hidden, width=1.0)
        groups = channel_groups(full)
    shapes = submodel_shapes(model_name, input_shape=input_shape, n_classes=n_classes, width=width, hidden=hidden)
    return slice_state(sort_channels(state, groups), shapes), shapes
