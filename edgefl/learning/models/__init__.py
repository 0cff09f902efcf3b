"""Model zoo: the architectures of the four papers and a generic MLP, built by name from one registry.

==============  ===========  ==========  ==========================================================
name            input        parameters  source
==============  ===========  ==========  ==========================================================
mlp             (64,)            4,810   edgefl's generic ReLU MLP (hidden from the scenario, 64)
logreg          (1, 28, 28)      7,850   Luo et al. (INFOCOM 2021) Sec. VI-A, multinomial logistic
cnn_mcmahan     (1, 28, 28)  1,663,370   McMahan et al. (AISTATS 2017); AnycostFL Sec. V-A FMNIST
vgg9            (3, 32, 32)  3,491,530   FedMA (ICLR 2020); AnycostFL Sec. V-A CIFAR-10
ccfedavg_mlp    (1, 28, 28)    655,200   CC-FedAvg Sec. VI-A FMNIST (3 fc layers, code's MLP2)
ccfedavg_cnn    (3, 32, 32)     62,006   CC-FedAvg Sec. VI-A CIFAR-10 (code's CNNCifar)
lenet5          (1, 28, 28)     61,706   Luo et al. Sec. VI-A (LeNet-5, ReLU + max-pool)
heterofl_conv   (1, 28, 28)  1,556,874   HeteroFL (ICLR 2021) Sec. 4, Table 1 MNIST CNN (Scaler + static BN)
preresnet18     (3, 32, 32)  9,622,090   HeteroFL Sec. 4, Table 2 CIFAR-10 PreResNet18, blocks [1, 1, 1, 2]
heterofl_mcmahan (1, 28, 28) 1,663,562   cnn_mcmahan with HeteroFL's Scaler + static BN (AnycostFL's baseline)
==============  ===========  ==========  ==========================================================

Every model takes a width multiplier in (0, 1]: hidden layers (conv channels, hidden units) keep
``ceil(width * units)``, the input and output layers keep their sizes. Parameters are initialised from an explicit
``torch.Generator`` with :func:`init_parameters`. ``edgefl models`` lists the registry with FLOPs per sample.
"""

from edgefl.learning.models._checks import ModelError
from edgefl.learning.models.convnet import Conv, ConvNet
from edgefl.learning.models.dense import MLP, LogisticRegression
from edgefl.learning.models.heterofl import HeteroConv, HeteroMcMahan, PreResNet, Scaler
from edgefl.learning.models.init import init_parameters
from edgefl.learning.models.registry import (
    BITS_PER_PARAMETER,
    MODEL_NAMES,
    MODELS,
    ModelEntry,
    build_model,
    list_models,
    model_info,
    output_layer,
)

__all__ = [
    "MLP", "LogisticRegression", "Conv", "ConvNet", "HeteroConv", "HeteroMcMahan", "PreResNet", "Scaler", "ModelEntry",
    "ModelError",
    "MODELS", "MODEL_NAMES", "BITS_PER_PARAMETER", "build_model", "init_parameters", "list_models", "model_info",
    "output_layer",
]  # fmt: skip
