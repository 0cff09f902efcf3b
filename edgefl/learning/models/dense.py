"""Fully connected models: a ReLU MLP and multinomial logistic regression.

Both flatten their input, so they take ``(n, features)`` as well as ``(n, C, H, W)`` batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from edgefl.learning.models._checks import scaled
from edgefl.learning.models._layers import linear_stack

__all__ = ["MLP", "LogisticRegression"]


class MLP(nn.Module):
    """Fully connected ReLU network: in -> hidden... -> n_classes (logits).

    At width multiplier ``width`` every hidden layer keeps ``ceil(width * units)`` units; the input and output
    layers keep their sizes. Parameter names do not depend on the width (``net.0.weight``, ``net.2.weight``, ...),
    so a narrow model's tensors are leading slices of the full model's.
    """

    def __init__(self, *, in_features: int, hidden: Sequence[int], n_classes: int, width: float = 1.0) -> None:
        super().__init__()
        self.net = linear_stack([in_features, *[scaled(h, width) for h in hidden], n_classes])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: one linear layer on the flattened input (logits; softmax in the loss).

    The convex model of Luo et al. (INFOCOM 2021), Sec. VI-A 2), Setups 1 and 3.
    """

    def __init__(self, *, in_features: int, n_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))
