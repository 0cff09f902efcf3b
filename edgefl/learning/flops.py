"""Training FLOPs per sample, measured once per architecture with ``torch.utils.flop_counter``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["measure_train_flops_per_sample", "measure_forward_flops_per_sample"]


def _count(model: nn.Module, input_shape: tuple[int, ...], n_classes: int, batch: int, backward: bool) -> float:
    x = torch.zeros((batch, *input_shape))
    y = torch.arange(batch) % n_classes
    with FlopCounterMode(display=False) as counter:
        out = model(x)
        if backward:
            F.cross_entropy(out, y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / batch


def measure_train_flops_per_sample(
    make_model: Callable[[], nn.Module], input_shape: tuple[int, ...], n_classes: int, batch: int = 8
) -> float:
    """FLOPs of one forward + backward pass per training sample (matmul/conv counted as 2 FLOPs per MAC).

    The optimizer step and element-wise ops are not counted, as in the papers' FLOP tables.
    """
    return _count(make_model(), input_shape, n_classes, batch, backward=True)


def measure_forward_flops_per_sample(
    make_model: Callable[[], nn.Module], input_shape: tuple[int, ...], n_classes: int, batch: int = 8
) -> float:
    """FLOPs of one forward pass per sample."""
    return _count(make_model(), input_shape, n_classes, batch, backward=False)
