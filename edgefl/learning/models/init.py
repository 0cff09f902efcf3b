"""Seeded re-initialisation of a model's parameters (PyTorch's default schemes, drawn from an explicit generator)."""

from __future__ import annotations

import math

import torch
from torch import nn

from edgefl.learning.models._checks import ModelError

__all__ = ["init_parameters"]

_NORMS = (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm)


def _kaiming_uniform(module: nn.Linear | nn.Conv2d, fan_in: int, generator: torch.Generator) -> None:
    # PyTorch's reset_parameters for Linear/ConvNd: weight ~ U(-b, b) with b = 1/sqrt(fan_in)
    # (kaiming_uniform with a = sqrt(5)); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
    if module.bias is not None:
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        nn.init.uniform_(module.bias, -bound, bound, generator=generator)


def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise every parameter like PyTorch's defaults, drawing only from ``generator``; returns ``model``.

    Linear and Conv1d/2d/3d: Kaiming-uniform weight (a = sqrt(5)) and uniform bias in +-1/sqrt(fan_in), in module
    order. BatchNorm/GroupNorm/LayerNorm: weight 1, bias 0, running statistics reset (no randomness). A module
    holding parameters of any other type raises :class:`ModelError`, so no tensor keeps an unseeded value.
    """
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                _kaiming_uniform(module, module.in_features, generator)
            elif isinstance(module, nn.modules.conv._ConvNd):
                fan_in = module.in_channels // module.groups * math.prod(module.kernel_size)
                _kaiming_uniform(module, fan_in, generator)
            elif isinstance(module, _NORMS):
                module.reset_parameters()
            elif any(True for _ in module.parameters(recurse=False)):
                raise ModelError(f"model layer {name!r} ({type(module).__name__}): init_parameters cannot seed it")
    return model
