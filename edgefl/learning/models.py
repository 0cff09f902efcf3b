"""Model zoo for the walking skeleton: an MLP and multinomial logistic regression.

Every model takes a width multiplier in (0, 1]: hidden layers keep ``ceil(width * units)`` units, the input
and output layers keep their sizes. Parameters are initialised from an explicit ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = ["MLP", "LogisticRegression", "build_model", "init_parameters", "MODEL_NAMES"]


class MLP(nn.Module):
    """Fully connected ReLU network: in -> hidden... -> n_classes (logits)."""

    def __init__(self, *, in_features: int, hidden: Sequence[int], n_classes: int, width: float = 1.0) -> None:
        super().__init__()
        sizes = [in_features, *[math.ceil(width * h) for h in hidden], n_classes]
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: one linear layer on the flattened input (logits)."""

    def __init__(self, *, in_features: int, n_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))


MODEL_NAMES = ("mlp", "logreg")


def build_model(
    name: str, *, in_features: int, n_classes: int, hidden: Sequence[int] = (64,), width: float = 1.0
) -> nn.Module:
    """Construct a model by registry name (parameters are *not* initialised reproducibly: see init_parameters)."""
    if name == "mlp":
        return MLP(in_features=in_features, hidden=hidden, n_classes=n_classes, width=width)
    if name == "logreg":
        return LogisticRegression(in_features=in_features, n_classes=n_classes)
    raise ValueError(f"model.name={name!r}: must be one of {', '.join(MODEL_NAMES)}")


def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise every Linear layer like PyTorch's default (Kaiming-uniform weight, uniform bias), seeded."""
    init: dict[type, Callable[[nn.Module], None]] = {}

    def linear(m: nn.Linear) -> None:
        nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
        if m.bias is not None:
            bound = 1.0 / math.sqrt(m.in_features)
            nn.init.uniform_(m.bias, -bound, bound, generator=generator)

    init[nn.Linear] = linear
    with torch.no_grad():
        for module in model.modules():
            fn = init.get(type(module))
            if fn is not None:
                fn(module)
    return model
