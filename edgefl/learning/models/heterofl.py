"""HeteroFL's models (Diao et al., ICLR 2021, Sec. 3.3 and 4, Table 6): the Scaler, the MNIST CNN and PreResNet18,
and the McMahan CNN of AnycostFL's FMNIST study with HeteroFL's Scaler and static BN.

The networks use static batch norm (HeteroFL Sec. 3.2): ``BatchNorm2d(track_running_stats=False)``, so training
and a plain ``eval()`` normalise with the batch's own statistics and no running estimates travel with a model;
:func:`edgefl.learning.batchnorm.with_static_bn` builds an evaluation copy from statistics queried from clients.
BN keeps its affine weight and bias (they are parameters, sliced and aggregated like any other).

A model built at width multiplier ``width`` = HeteroFL's rate ``r`` keeps ``ceil(r * channels)`` of every hidden
layer (input channels and classes keep their sizes) and its Scalers divide by ``r`` in training, so
``build_model(name, width=r)`` is the rate-``r`` submodel. Parameter names do not depend on the width, and every
tensor of the narrow model is the leading (prefix) slice of the full one's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from edgefl.learning.models._checks import ModelError, scaled
from edgefl.learning.models._layers import ImageInput

__all__ = ["Scaler", "HeteroConv", "HeteroMcMahan", "PreActBlock", "PreResNet"]


class Scaler(nn.Module):
    """Divide activations by the rate ``r`` in training mode; identity in eval mode (HeteroFL Sec. 3.3, eq. (4)).

    Like inverted dropout: a rate-``r`` submodel's pre-activations are scaled by ``1/r`` while it trains, so the
    aggregated full model can be used for inference unscaled. No parameters.
    """

    def __init__(self, rate: float) -> None:
        super().__init__()
        if not 0.0 < float(rate) <= 1.0:
            raise ModelError(f"model.width={rate!r}: the Scaler rate must be in (0, 1]")
        self.rate = float(rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.rate if self.training else x

    def extra_repr(self) -> str:
        return f"rate={self.rate:g}"


def _static_bn(channels: int) -> nn.BatchNorm2d:
    """Static batch norm (HeteroFL Sec. 3.2): affine, no running statistics (``momentum=None`` as in HeteroFL's
    code, which only matters once :func:`edgefl.learning.batchnorm.with_static_bn` turns tracking on)."""
    return nn.BatchNorm2d(channels, momentum=None, track_running_stats=False)


class HeteroConv(ImageInput):
    """HeteroFL's CNN (Sec. 4, Table 6; MNIST, hidden [64, 128, 256, 512]).

    For every hidden size h: conv3x3(pad 1) -> Scaler -> static BN -> ReLU -> 2x2 max-pool, except that the last
    block ends in global average pooling instead of the pool; then a linear layer to the classes
    (``classifier.weight``, ``classifier.bias``). At ``width=1`` on 1x28x28 it has 1,556,874 parameters (Table 1:
    1.6 M). Raises :class:`ModelError` when the input is too small for the pools.
    """

    def __init__(
        self, *, input_shape: Sequence[int], hidden: Sequence[int], n_classes: int, width: float = 1.0
    ) -> None:
        super().__init__(input_shape)
        if len(hidden) < 1:
            raise ModelError(f"model.hidden={tuple(hidden)!r}: heterofl_conv needs at least one hidden size")
        channels, height, width_px = self.input_shape
        layers: list[nn.Module] = []
        for i, h in enumerate(hidden):
            out = scaled(h, width)
            layers += [nn.Conv2d(channels, out, 3, padding=1), Scaler(width), _static_bn(out), nn.ReLU()]
            if i < len(hidden) - 1:
                layers.append(nn.MaxPool2d(2))
                height, width_px = height // 2, width_px // 2
                if height < 1 or width_px < 1:
                    raise ModelError(f"model.input_shape={self.input_shape!r}: too small for {len(hidden)} blocks")
            channels = out
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(self._image(x)))


class HeteroMcMahan(ImageInput):
    """The McMahan et al. (AISTATS 2017) CNN of AnycostFL's FMNIST study with HeteroFL's Scaler and static BN.

    ``hidden = (c1, c2, units)``, default (32, 64, 512): conv5x5(c1, pad 2) -> Scaler -> static BN -> ReLU ->
    2x2 max-pool -> conv5x5(c2, pad 2) -> Scaler -> static BN -> ReLU -> 2x2 max-pool -> flatten ->
    linear(units) (``fc``) -> Scaler -> ReLU -> linear to the classes (``classifier``). HeteroFL puts the Scaler
    after every hidden layer and BN after the convolutions (Sec. 3.2-3.3); the hidden linear layer has no BN, as
    HeteroFL's own models have none there. At the default sizes on 1x28x28 it has 1,663,562 parameters: the
    McMahan CNN's 1,663,370 plus 2 x (32 + 64) BN weights and biases. ``hidden`` sets the global model, so a
    study whose devices cannot train the full McMahan CNN within its deadline can make HeteroFL's level a the
    widest model they can train (level a = width 1 of ``hidden``).
    """

    def __init__(
        self, *, input_shape: Sequence[int], hidden: Sequence[int], n_classes: int, width: float = 1.0
    ) -> None:
        super().__init__(input_shape)
        if len(hidden) != 3:
            raise ModelError(
                f"model.hidden={tuple(hidden)!r}: heterofl_mcmahan needs 3 sizes (conv1, conv2, linear units)"
            )
        channels, height, width_px = self.input_shape
        if height < 4 or width_px < 4:
            raise ModelError(f"model.input_shape={self.input_shape!r}: too small for two 2x2 max-pools")
        c1, c2, units = (scaled(h, width) for h in hidden)
        self.features = nn.Sequential(
            nn.Conv2d(channels, c1, 5, padding=2), Scaler(width), _static_bn(c1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, padding=2), Scaler(width), _static_bn(c2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
        )  # fmt: skip
        self.fc = nn.Linear(c2 * (height // 4) * (width_px // 4), units)
        self.fc_scaler = Scaler(width)
        self.classifier = nn.Linear(units, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(F.relu(self.fc_scaler(self.fc(self.features(self._image(x))))))


class PreActBlock(nn.Module):
    """Pre-activation residual block (He et al. 2016) with HeteroFL's Scalers and static BN.

    ``out = conv2(relu(bn2(scaler(conv1(a))))) + shortcut``, ``a = relu(bn1(scaler(x)))``; the shortcut is
    ``x`` itself, or a 1x1 conv of ``a`` with the block's stride when the shape changes. Convs have no bias.
    """

    def __init__(self, in_planes: int, planes: int, *, stride: int, rate: float) -> None:
        super().__init__()
        self.scaler = Scaler(rate)
        self.bn1 = _static_bn(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = _static_bn(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.shortcut = (
            nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False) if stride != 1 or in_planes != planes else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.relu(self.bn1(self.scaler(x)))
        skip = x if self.shortcut is None else self.shortcut(a)
        out = self.conv1(a)
        out = self.conv2(F.relu(self.bn2(self.scaler(out))))
        return out + skip


class PreResNet(ImageInput):
    """Pre-activation ResNet (HeteroFL Sec. 4, Table 6; CIFAR-10 "PreResNet18").

    conv3x3(C -> h0, no bias) -> stages of :class:`PreActBlock` (``blocks[i]`` blocks of ``hidden[i]`` channels,
    stride 1 for the first stage and 2 after) -> Scaler -> static BN -> ReLU -> global average pool -> linear
    (``linear.weight``, ``linear.bias``). ``blocks=(1, 1, 1, 2)`` is the network of HeteroFL's Table 2 (9,622,090
    parameters at ``width=1`` on 3x32x32: 9.6 M); ``(2, 2, 2, 2)`` is the usual PreResNet18.
    """

    def __init__(
        self,
        *,
        input_shape: Sequence[int],
        hidden: Sequence[int] = (64, 128, 256, 512),
        n_classes: int,
        blocks: Sequence[int] = (1, 1, 1, 2),
        width: float = 1.0,
    ) -> None:
        super().__init__(input_shape)
        if len(hidden) != len(blocks) or len(hidden) < 1:
            raise ModelError(
                f"model.hidden={tuple(hidden)!r}: preresnet needs one hidden size per stage ({len(blocks)} stages)"
            )
        if any(int(b) < 1 for b in blocks):
            raise ModelError(f"model.blocks={tuple(blocks)!r}: every stage needs at least one block")
        sizes = [scaled(h, width) for h in hidden]
        spatial = min(self.input_shape[1:]) // 2 ** (len(hidden) - 1)
        if spatial < 1:
            raise ModelError(f"model.input_shape={self.input_shape!r}: too small for {len(hidden)} stages")
        self.conv1 = nn.Conv2d(self.input_shape[0], sizes[0], 3, padding=1, bias=False)
        stages: list[nn.Module] = []
        in_planes = sizes[0]
        for i, (planes, n) in enumerate(zip(sizes, blocks)):
            layer: list[nn.Module] = []
            for j in range(int(n)):
                stride = 2 if i > 0 and j == 0 else 1
                layer.append(PreActBlock(in_planes, planes, stride=stride, rate=width))
                in_planes = planes
            stages.append(nn.Sequential(*layer))
        self.layers = nn.Sequential(*stages)
        self.scaler = Scaler(width)
        self.bn = _static_bn(in_planes)
        self.linear = nn.Linear(in_planes, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(self.conv1(self._image(x)))
        out = F.relu(self.bn(self.scaler(out)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))
