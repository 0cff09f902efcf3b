"""The model registry: one entry per architecture a scenario can name, with its paper defaults.

Names are lowercase and stable (scenario files use them). Every entry builds from the same definition at any
width multiplier in (0, 1] (hidden layers keep ``ceil(width * units)``), so the methods that shrink width
(HeteroFL, AnycostFL) get a correctly sliced architecture.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn

from edgefl.learning.config import BITS_PER_PARAMETER

from edgefl.learning.models._checks import (
    ModelError,
    check_hidden,
    check_input_shape,
    check_n_classes,
    check_width,
)
from edgefl.learning.models.convnet import Conv, ConvNet
from edgefl.learning.models.dense import MLP, LogisticRegression
from edgefl.learning.models.heterofl import HeteroConv, HeteroMcMahan, PreResNet

__all__ = [
    "ModelEntry", "MODELS", "MODEL_NAMES", "build_model", "list_models", "model_info", "output_layer",
    "BITS_PER_PARAMETER",
]  # fmt: skip


#: ``(input_shape, n_classes, hidden, width) -> module``; ``hidden`` is the resolved tuple (empty when unused).
Factory = Callable[[tuple[int, ...], int, tuple[int, ...], float], nn.Module]


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """One registered architecture.

    ``input_shape`` and ``n_classes`` are the paper's defaults (``(C, H, W)`` for images, ``(features,)`` for
    vectors); ``hidden`` is the default hidden sizes for the models that take them (``takes_hidden``), else ``()``.
    ``head`` names the output layer's ``(weight, bias)`` parameters in the default architecture (rows = classes);
    :func:`output_layer` resolves them for other hidden sizes (the MLP's layer index depends on its depth).

    ``vectorise``: ``train.vectorise = "auto"`` trains FedAvg's fixed-step jobs of a round together
    (``torch.func.vmap``) on this model, because that was measured faster than one by one
    (``benchmarks/vectorised_training.py``: one round of 60 devices x 100 samples, one epoch of batch 32, one
    thread, median of 3 paired runs on the project's shared 2-core CPU under load, one-by-one / vectorised wall
    time; a second run in brackets): ``mlp`` (64 hidden units) 3.76x and ``logreg`` 2.73x, so True;
    ``ccfedavg_mlp`` 0.53x (0.41x), ``cnn_mcmahan`` 0.36x, ``vgg9`` 0.44x, ``ccfedavg_cnn`` 0.49x (0.37x) and
    ``lenet5`` 0.68x (0.43x) are slower vectorised on a CPU, so False. The batch-norm models (``heterofl_conv``,
    ``preresnet18``, ``heterofl_mcmahan``) cannot be vectorised.
    """

    name: str
    description: str
    input_shape: tuple[int, ...]
    n_classes: int
    factory: Factory
    hidden: tuple[int, ...] = ()
    takes_hidden: bool = False
    needs_image: bool = False
    head: tuple[str, str]
    vectorise: bool = False


def _mlp(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
    return MLP(in_features=math.prod(shape), hidden=hidden, n_classes=n_classes, width=width)


def _logreg(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
    del hidden, width  # no hidden layer: the width multiplier leaves it unchanged
    return LogisticRegression(in_features=math.prod(shape), n_classes=n_classes)


def _convnet(convs: tuple[Conv, ...], head: tuple[int, ...]) -> Factory:
    def build(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
        del hidden  # fixed architecture
        return ConvNet(input_shape=shape, convs=convs, hidden=head, n_classes=n_classes, width=width)

    return build


def _heterofl_conv(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
    return HeteroConv(input_shape=shape, hidden=hidden, n_classes=n_classes, width=width)


def _heterofl_mcmahan(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
    return HeteroMcMahan(input_shape=shape, hidden=hidden, n_classes=n_classes, width=width)


def _preresnet18(shape: tuple[int, ...], n_classes: int, hidden: tuple[int, ...], width: float) -> nn.Module:
    # HeteroFL's Table 2 network: blocks [1, 1, 1, 2] (papers/README.md errata)
    return PreResNet(input_shape=shape, hidden=hidden, n_classes=n_classes, blocks=(1, 1, 1, 2), width=width)


# McMahan et al. (AISTATS 2017) CNN = AnycostFL's FMNIST model: 5x5 convs, "same" padding, 2x2 max-pools.
_MCMAHAN = (Conv(channels=32, kernel=5, padding=2, pool=True), Conv(channels=64, kernel=5, padding=2, pool=True))
# VGG-9 of FedMA (Wang et al., ICLR 2020): 3x3 convs with padding 1, no batch norm.
_VGG9 = (
    Conv(channels=32, kernel=3, padding=1), Conv(channels=64, kernel=3, padding=1, pool=True),
    Conv(channels=128, kernel=3, padding=1), Conv(channels=128, kernel=3, padding=1, pool=True),
    Conv(channels=256, kernel=3, padding=1), Conv(channels=256, kernel=3, padding=1, pool=True),
)  # fmt: skip
# LeNet-5 layout (LeCun et al. 1998) with ReLU and max-pool; padding 2 on the first conv for 28x28 input.
_LENET5 = (Conv(channels=6, kernel=5, padding=2, pool=True), Conv(channels=16, kernel=5, pool=True))
# CC-FedAvg's CIFAR-10 CNN: Sec. VI-A says "two convolutional-pooling layers and three fully connected layers";
# the sizes are those of its official code (benjiachong/ccfedavg, models/Nets.py CNNCifar): LeNet-5's layout
# without padding. Its FMNIST MLP ("3 fully connected layers") is that code's MLP2 built with dim_hidden=50:
# 784 -> 784 -> 50 -> 10. The code's dropout is left out (no parameters; it would draw from torch's global RNG).
_CCFEDAVG_CNN = (Conv(channels=6, kernel=5, pool=True), Conv(channels=16, kernel=5, pool=True))

def _conv_entry(
    name: str, input_shape: tuple[int, ...], convs: tuple[Conv, ...], fcs: tuple[int, ...], description: str
) -> ModelEntry:
    """A :class:`ConvNet` of 10 classes: ``convs``, then hidden fully connected layers ``fcs``; its head is the
    classifier's last linear layer (``classifier.{2 len(fcs)}``: a linear layer and a ReLU per hidden layer)."""
    last = f"classifier.{2 * len(fcs)}"
    return ModelEntry(
        name=name, head=(f"{last}.weight", f"{last}.bias"), input_shape=input_shape, n_classes=10,
        factory=_convnet(convs, fcs), needs_image=True, description=description,
    )  # fmt: skip


_ENTRIES = (
    ModelEntry(
        name="mlp", head=("net.2.weight", "net.2.bias"),
        input_shape=(64,), n_classes=10, factory=_mlp, hidden=(64,), takes_hidden=True,
        description="ReLU MLP, hidden sizes from the scenario (default 64); edgefl's generic model",
        vectorise=True,
    ),
    ModelEntry(
        name="logreg", head=("linear.weight", "linear.bias"),
        input_shape=(1, 28, 28), n_classes=10, factory=_logreg,
        description="multinomial logistic regression on MNIST (Luo et al. INFOCOM'21 Sec. VI-A)",
        vectorise=True,
    ),
    _conv_entry(
        "cnn_mcmahan", (1, 28, 28), _MCMAHAN, (512,),
        "CNN conv5x5(32)-pool-conv5x5(64)-pool-fc512-fc10 (McMahan AISTATS'17; AnycostFL FMNIST)",
    ),
    _conv_entry(
        "vgg9", (3, 32, 32), _VGG9, (512, 512),
        "VGG-9 conv3x3 32,64-128,128-256,256-fc512-fc512-fc10 (FedMA; AnycostFL CIFAR-10)",
    ),
    ModelEntry(
        name="ccfedavg_mlp", head=("net.4.weight", "net.4.bias"),
        input_shape=(1, 28, 28), n_classes=10, factory=_mlp, hidden=(784, 50),
        description="MLP 784-784-50-10, 3 fc layers (CC-FedAvg Sec. VI-A FMNIST; sizes from its code)",
    ),
    _conv_entry(
        "ccfedavg_cnn", (3, 32, 32), _CCFEDAVG_CNN, (120, 84),
        "CNN conv5x5(6)-pool-conv5x5(16)-pool-fc120-fc84-fc10 (CC-FedAvg Sec. VI-A CIFAR-10)",
    ),
    _conv_entry(
        "lenet5", (1, 28, 28), _LENET5, (120, 84),
        "LeNet-5 conv5x5(6,pad 2)-pool-conv5x5(16)-pool-fc120-fc84-fc10, ReLU (Luo et al. Sec. VI-A)",
    ),
    ModelEntry(
        name="heterofl_conv", head=("classifier.weight", "classifier.bias"),
        input_shape=(1, 28, 28), n_classes=10, factory=_heterofl_conv, hidden=(64, 128, 256, 512),
        takes_hidden=True, needs_image=True,
        description="HeteroFL CNN conv3x3-Scaler-sBN-ReLU-pool x4 (64..512, GAP)-fc10 (Diao ICLR'21 Sec. 4, Table 1)",
    ),
    ModelEntry(
        name="preresnet18", head=("linear.weight", "linear.bias"),
        input_shape=(3, 32, 32), n_classes=10, factory=_preresnet18, hidden=(64, 128, 256, 512),
        takes_hidden=True, needs_image=True,
        description="PreResNet18 blocks [1,1,1,2], 64..512, Scaler+sBN (Diao ICLR'21 Sec. 4, Table 2, CIFAR-10)",
    ),
    ModelEntry(
        name="heterofl_mcmahan", head=("classifier.weight", "classifier.bias"),
        input_shape=(1, 28, 28), n_classes=10, factory=_heterofl_mcmahan, hidden=(32, 64, 512),
        takes_hidden=True, needs_image=True,
        description="McMahan CNN conv5x5(32)-conv5x5(64)-fc512 with HeteroFL's Scaler + static BN (AnycostFL baseline)",
    ),
)  # fmt: skip

#: Registered architectures by name (read-only).
MODELS = MappingProxyType({entry.name: entry for entry in _ENTRIES})
#: Registered names, in listing order.
MODEL_NAMES = tuple(MODELS)


def _entry(name: str) -> ModelEntry:
    try:
        return MODELS[name]
    except (KeyError, TypeError):
        raise ModelError(f"model.name={name!r}: must be one of {', '.join(MODEL_NAMES)}") from None


def _resolve(
    entry: ModelEntry, input_shape: Sequence[int] | None, n_classes: int | None, hidden: Sequence[int] | None
) -> tuple[tuple[int, ...], int, tuple[int, ...]]:
    shape = entry.input_shape if input_shape is None else check_input_shape(input_shape)
    if entry.needs_image and len(shape) != 3:
        raise ModelError(f"model.input_shape={shape!r}: {entry.name} is a CNN and needs (C, H, W)")
    classes = entry.n_classes if n_classes is None else check_n_classes(n_classes)
    if hidden is None:
        sizes = entry.hidden
    elif entry.takes_hidden:
        sizes = check_hidden(hidden)
    else:
        raise ModelError(
            f"model.hidden={hidden!r}: {entry.name} has a fixed architecture; leave hidden unset"
        )
    return shape, classes, sizes


def build_model(
    name: str,
    *,
    input_shape: Sequence[int] | None = None,
    n_classes: int | None = None,
    hidden: Sequence[int] | None = None,
    width: float = 1.0,
    in_features: int | None = None,
) -> nn.Module:
    """Construct a registered model (parameters are *not* initialised reproducibly: see ``init_parameters``).

    ``input_shape`` is one sample's shape, ``(C, H, W)`` or ``(features,)``; ``None`` takes the entry's default,
    as does ``n_classes=None``. ``hidden=None`` takes the entry's default hidden sizes (``mlp``: (64,)); only
    the entries with ``takes_hidden`` (``mlp``, ``heterofl_conv``, ``preresnet18`` (4 sizes), ``heterofl_mcmahan``
    (3)) accept other sizes,
    any other model raises :class:`ModelError` when ``hidden`` is given.
    ``width`` in (0, 1] keeps ``ceil(width * units)`` of every hidden layer (conv channels and hidden units).

    ``in_features=`` is the former 1-D spelling of ``input_shape=(in_features,)``; on that path ``hidden`` is
    ignored by the models that have no configurable hidden layers, as before. CNNs need ``input_shape``.
    """
    entry = _entry(name)
    if in_features is not None:
        if input_shape is not None and math.prod(input_shape) != in_features:
            raise ModelError(f"model.in_features={in_features!r}: disagrees with input_shape={tuple(input_shape)!r}")
        if input_shape is None:
            input_shape = (in_features,)
        if not entry.takes_hidden:
            hidden = None
    shape, classes, sizes = _resolve(entry, input_shape, n_classes, hidden)
    return entry.factory(shape, classes, sizes, check_width(width))


def output_layer(name: str, *, hidden: Sequence[int] | None = None) -> tuple[str, str]:
    """Names of the output layer's ``(weight, bias)`` (rows = classes) of model ``name`` with ``hidden`` sizes.

    The entry's ``head`` for its default hidden sizes; for other sizes the last ``nn.Linear`` of the model built
    on the meta device (no memory, no randomness), which is the output layer of every registered model.
    """
    entry = _entry(name)
    if hidden is None or tuple(hidden) == entry.hidden:
        return entry.head
    shape, classes, sizes = _resolve(entry, None, None, hidden)
    with torch.device("meta"):
        model = entry.factory(shape, classes, sizes, 1.0)
    last = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)][-1]
    return f"{last}.weight", f"{last}.bias"


def list_models() -> list[ModelEntry]:
    """Every registered architecture, in listing order."""
    return list(MODELS.values())


def model_info(
    name: str,
    *,
    input_shape: Sequence[int] | None = None,
    n_classes: int | None = None,
    hidden: Sequence[int] | None = None,
    width: float = 1.0,
) -> dict:
    """Size and cost of one architecture at one width.

    Returns ``name, description, input_shape (list), n_classes, hidden (list), width, parameters,
    update_bits`` (32 bits per parameter, uncompressed) and ``train_flops_per_sample`` (forward + backward,
    measured by :func:`edgefl.learning.flops.measure_train_flops_per_sample`, matmul/conv MAC = 2 FLOPs).
    """
    from edgefl.learning.flops import measure_train_flops_per_sample

    entry = _entry(name)
    shape, classes, sizes = _resolve(entry, input_shape, n_classes, hidden)
    w = check_width(width)
    model = entry.factory(shape, classes, sizes, w)
    parameters = sum(p.numel() for p in model.parameters())
    flops = measure_train_flops_per_sample(lambda: model, shape, classes, batch=2)
    return {
        "name": entry.name,
        "description": entry.description,
        "input_shape": list(shape),
        "n_classes": classes,
        "hidden": list(sizes),
        "width": w,
        "parameters": parameters,
        "update_bits": BITS_PER_PARAMETER * parameters,
        "train_flops_per_sample": flops,
    }
