"""Building blocks shared by the model zoo (private to the package)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from edgefl.learning.models._checks import ModelError

__all__ = ["ImageInput", "linear_stack"]


class ImageInput(nn.Module):
    """Base of the CNNs: takes ``(n, C, H, W)`` or a flat ``(n, C*H*W)`` batch and checks it against ``input_shape``.

    Raises :class:`ModelError` when ``input_shape`` is not (C, H, W); :meth:`_image` raises it for a batch of
    another shape. No parameters.
    """

    def __init__(self, input_shape: Sequence[int]) -> None:
        super().__init__()
        if len(input_shape) != 3:
            raise ModelError(f"model.input_shape={tuple(input_shape)!r}: a CNN needs (C, H, W)")
        self.input_shape = tuple(int(d) for d in input_shape)
        self._flat = math.prod(self.input_shape)

    def _image(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as an ``(n, C, H, W)`` batch: a flat batch is reshaped, an image batch passes unchanged."""
        if x.dim() == 2 and x.shape[1] == self._flat:
            return x.reshape(x.shape[0], *self.input_shape)
        if tuple(x.shape[1:]) != self.input_shape:
            raise ModelError(
                f"input batch shape {tuple(x.shape)}: expected (n, {', '.join(map(str, self.input_shape))}) "
                f"or (n, {self._flat})"
            )
        return x


def linear_stack(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers ``sizes[0] -> sizes[1] -> ... -> sizes[-1]`` with a ReLU between two of them (none after the
    last): ``Linear`` at even indices, ``ReLU`` at odd ones, so parameters are named ``0.weight``, ``2.weight``, ..."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
