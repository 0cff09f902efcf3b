"""One configurable convolutional network that every CNN of the zoo is an instance of.

``ConvNet`` = [conv -> ReLU (-> 2x2 max-pool)] x len(convs) -> flatten -> [linear -> ReLU] x len(hidden) ->
linear to the classes. At width multiplier ``width`` every conv keeps ``ceil(width * channels)`` output channels
and every hidden linear layer ``ceil(width * units)`` units; the input channels and the classes keep their sizes,
and the flatten boundary scales with the last conv's channels (``ceil(width * C_last) * H_last * W_last``). The
parameter names do not depend on the width, so HeteroFL/AnycostFL sub-models slice the same definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from edgefl.learning.models._checks import ModelError, scaled
from edgefl.learning.models._layers import ImageInput, linear_stack

__all__ = ["Conv", "ConvNet"]


@dataclass(frozen=True, kw_only=True)
class Conv:
    """One convolution of a :class:`ConvNet`: ``kernel`` x ``kernel``, stride 1, zero ``padding``, followed by ReLU
    and, when ``pool``, a 2x2 max-pool with stride 2."""

    channels: int
    kernel: int
    padding: int = 0
    pool: bool = False


class ConvNet(ImageInput):
    """Conv-ReLU(-pool) blocks, then a ReLU MLP head; takes ``(n, C, H, W)`` or flat ``(n, C*H*W)`` batches.

    Raises :class:`ModelError` when the input is too small for the layers (a spatial size would drop below 1).
    """

    def __init__(
        self,
        *,
        input_shape: tuple[int, ...],
        convs: Sequence[Conv],
        hidden: Sequence[int],
        n_classes: int,
        width: float = 1.0,
    ) -> None:
        super().__init__(input_shape)
        channels, height, width_px = self.input_shape
        features: list[nn.Module] = []
        for conv in convs:
            out = scaled(conv.channels, width)
            features += [nn.Conv2d(channels, out, conv.kernel, padding=conv.padding), nn.ReLU()]
            height = height + 2 * conv.padding - conv.kernel + 1
            width_px = width_px + 2 * conv.padding - conv.kernel + 1
            if conv.pool:
                features.append(nn.MaxPool2d(2))
                height, width_px = height // 2, width_px // 2
            if height < 1 or width_px < 1:
                raise ModelError(f"model.input_shape={self.input_shape!r}: too small for this CNN's conv/pool layers")
            channels = out
        self.features = nn.Sequential(*features)
        self.classifier = linear_stack([channels * height * width_px, *[scaled(h, width) for h in hidden], n_classes])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(self._image(x)).flatten(1))
