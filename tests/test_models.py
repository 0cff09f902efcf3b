"""The model zoo (edgefl/learning/models/) and `edgefl models` (edgefl/cli/models.py): parameter counts from the
papers and by hand, width slicing, FLOPs by hand, seeded initialisation, errors, the CLI's JSON."""

from __future__ import annotations

import json
import math

import pytest
import torch
import typer
from torch import nn
from typer.testing import CliRunner

from edgefl.cli.models import register
from edgefl.learning.flops import measure_train_flops_per_sample
from edgefl.learning.models import MODEL_NAMES, MODELS, ModelError, build_model, init_parameters, model_info


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def conv(c_in: int, c_out: int, k: int) -> int:
    """Parameters of a k x k conv with bias."""
    return c_in * c_out * k * k + c_out


def fc(n_in: int, n_out: int) -> int:
    """Parameters of a linear layer with bias."""
    return n_in * n_out + n_out


# ----------------------------------------------------------------------------------- counts from the papers
def test_anycostfl_models_have_the_papers_exact_counts():
    # AnycostFL Sec. V-A (papers/README.md errata): FMNIST CNN 1,663,370 params = 53.23 Mb; VGG-9 3,491,530 = 111.7 Mb.
    # McMahan CNN on 1x28x28, "same" padding: 28 -pool-> 14 -pool-> 7, so the flatten is 64*7*7 = 3136.
    mcmahan = conv(1, 32, 5) + conv(32, 64, 5) + fc(64 * 7 * 7, 512) + fc(512, 10)
    assert mcmahan == 832 + 51_264 + 1_606_144 + 5_130 == 1_663_370
    # VGG-9 on 3x32x32, 3x3 convs with padding 1: 32 -pool-> 16 -pool-> 8 -pool-> 4, flatten 256*4*4 = 4096.
    vgg9 = (conv(3, 32, 3) + conv(32, 64, 3) + conv(64, 128, 3) + conv(128, 128, 3) + conv(128, 256, 3)
            + conv(256, 256, 3) + fc(256 * 4 * 4, 512) + fc(512, 512) + fc(512, 10))  # fmt: skip
    assert vgg9 == 896 + 18_496 + 73_856 + 147_584 + 295_168 + 590_080 + 2_097_664 + 262_656 + 5_130 == 3_491_530
    for name, count, megabits in (("cnn_mcmahan", 1_663_370, 53.23), ("vgg9", 3_491_530, 111.73)):
        assert n_params(build_model(name)) == count
        info = model_info(name)
        assert info["parameters"] == count and info["update_bits"] == 32 * count
        assert round(info["update_bits"] / 1e6, 2) == megabits


def test_other_models_counts_by_hand():
    expected = {
        # generic MLP, registry default: 64 features -> 64 -> 10
        "mlp": fc(64, 64) + fc(64, 10),  # 4,160 + 650 = 4,810
        # Luo: multinomial logistic regression on MNIST, 784 -> 10
        "logreg": fc(784, 10),  # 7,850
        # CC-FedAvg FMNIST MLP, 3 fc layers 784 -> 784 -> 50 -> 10
        "ccfedavg_mlp": fc(784, 784) + fc(784, 50) + fc(50, 10),  # 615,440 + 39,250 + 510 = 655,200
        # CC-FedAvg CIFAR-10 CNN, no padding: 32 -conv5-> 28 -pool-> 14 -conv5-> 10 -pool-> 5, flatten 16*5*5 = 400
        "ccfedavg_cnn": conv(3, 6, 5) + conv(6, 16, 5) + fc(400, 120) + fc(120, 84) + fc(84, 10),  # 62,006
        # LeNet-5 on 1x28x28: conv pad 2 keeps 28 -pool-> 14 -conv5-> 10 -pool-> 5, flatten 400
        "lenet5": conv(1, 6, 5) + conv(6, 16, 5) + fc(400, 120) + fc(120, 84) + fc(84, 10),  # 61,706
    }
    assert expected == {
        "mlp": 4_810, "logreg": 7_850, "ccfedavg_mlp": 655_200, "ccfedavg_cnn": 62_006, "lenet5": 61_706
    }  # fmt: skip
    # the paper-count models are checked above and in tests/test_heterofl_models.py
    assert set(expected) | {"cnn_mcmahan", "vgg9", "heterofl_conv", "preresnet18", "heterofl_mcmahan"} == set(MODEL_NAMES)
    for name, count in expected.items():
        assert n_params(build_model(name)) == count, name
    # the old 1-D spelling still works and builds the same model
    old = build_model("mlp", in_features=64, n_classes=10, hidden=(64, 32))
    assert n_params(old) == fc(64, 64) + fc(64, 32) + fc(32, 10)
    assert n_params(build_model("logreg", in_features=60, n_classes=10, hidden=(64,))) == fc(60, 10)  # hidden ignored


# ------------------------------------------------------------------------------------------------- width
def test_width_keeps_ceil_of_hidden_layers_and_the_io_sizes():
    # width 0.5: conv 16, 32 channels, fc 256; the flatten is 32*7*7 = 1568
    half = build_model("cnn_mcmahan", width=0.5)
    assert n_params(half) == conv(1, 16, 5) + conv(16, 32, 5) + fc(32 * 7 * 7, 256) + fc(256, 10) == 417_482
    # width 0.3 needs ceil: 32*0.3 = 9.6 -> 10, 64*0.3 = 19.2 -> 20, 512*0.3 = 153.6 -> 154
    thin = build_model("cnn_mcmahan", width=0.3)
    assert n_params(thin) == conv(1, 10, 5) + conv(10, 20, 5) + fc(20 * 7 * 7, 154) + fc(154, 10) == 157_904
    shapes = {k: tuple(v.shape) for k, v in thin.state_dict().items()}
    assert shapes["features.0.weight"] == (10, 1, 5, 5)  # input channels unchanged
    assert shapes["classifier.0.weight"] == (154, 20 * 7 * 7)  # flatten scales with the last conv
    assert shapes["classifier.2.weight"] == (10, 154) and shapes["classifier.2.bias"] == (10,)  # classes unchanged
    x = torch.rand(4, 1, 28, 28)
    assert thin(x).shape == (4, 10) and torch.equal(thin(x), thin(x.flatten(1)))  # image or flat batch
    # VGG-9 at 1/4: 8,16,32,32,64,64 channels, fc 128,128; flatten 64*4*4
    quarter = (conv(3, 8, 3) + conv(8, 16, 3) + conv(16, 32, 3) + conv(32, 32, 3) + conv(32, 64, 3) + conv(64, 64, 3)
               + fc(64 * 16, 128) + fc(128, 128) + fc(128, 10))  # fmt: skip
    assert n_params(build_model("vgg9", width=0.25)) == quarter
    # an MLP's hidden sizes shrink, its input and output do not: 784 -> ceil(0.1*784)=79 -> 5 -> 10
    assert n_params(build_model("ccfedavg_mlp", width=0.1)) == fc(784, 79) + fc(79, 5) + fc(5, 10)
    assert n_params(build_model("logreg", width=0.1)) == fc(784, 10)  # nothing hidden to shrink


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_narrow_model_is_a_leading_slice_of_the_full_one(name):
    full = build_model(name).state_dict()
    narrow = build_model(name, width=0.3)
    assert list(narrow.state_dict()) == list(full)  # same parameter names at every width
    for key, tensor in narrow.state_dict().items():
        assert all(a <= b for a, b in zip(tensor.shape, full[key].shape)), key
    assert narrow(torch.rand(3, *MODELS[name].input_shape)).shape == (3, MODELS[name].n_classes)


# ------------------------------------------------------------------------------------------------- FLOPs
def test_measured_flops_match_a_hand_count():
    # flop_counter: matmul/conv = 2 FLOPs per MAC; forward, weight gradient, and input gradient for every layer
    # but the first (the input needs no gradient). Pooling, ReLU, bias and loss are not counted.
    # logreg 784 -> 10: forward 2*784*10 + weight grad 2*784*10
    assert model_info("logreg")["train_flops_per_sample"] == 4 * 784 * 10 == 31_360
    # LeNet-5: MACs per layer = out_C * out_H * out_W * in_C * k * k (conv), in * out (fc)
    conv1 = 6 * 28 * 28 * 1 * 25  # 117,600 MACs: forward + weight grad
    conv2 = 16 * 10 * 10 * 6 * 25  # 240,000 MACs: forward + weight grad + input grad
    fcs = 400 * 120 + 120 * 84 + 84 * 10  # 58,920 MACs, x3
    hand = 2 * (2 * conv1 + 3 * conv2 + 3 * fcs)
    assert hand == 2_263_920
    assert measure_train_flops_per_sample(lambda: build_model("lenet5"), (1, 28, 28), 10) == hand
    assert model_info("lenet5")["train_flops_per_sample"] == hand
    # McMahan CNN ("same" padding keeps 28x28, then 14x14 after the first pool)
    conv1 = 32 * 28 * 28 * 1 * 25  # 627,200 MACs
    conv2 = 64 * 14 * 14 * 32 * 25  # 10,035,200 MACs
    fcs = 3136 * 512 + 512 * 10  # 1,610,752 MACs
    assert model_info("cnn_mcmahan")["train_flops_per_sample"] == 2 * (2 * conv1 + 3 * conv2 + 3 * fcs) == 72_384_512


# -------------------------------------------------------------------------------------------------- init
def test_init_is_seeded_deterministic_and_leaves_the_global_rng_alone():
    def weights(seed: int) -> torch.Tensor:
        model = init_parameters(build_model("lenet5", width=0.5), torch.Generator().manual_seed(seed))
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    a, b, c = weights(3), weights(3), weights(4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # PyTorch's default bounds: conv1 fan_in = 1*5*5, so every weight and bias lies in +-1/5
    m = init_parameters(build_model("lenet5"), torch.Generator().manual_seed(0))
    assert m.features[0].weight.abs().max() <= 0.2 and m.features[0].bias.abs().max() <= 0.2
    bn = nn.BatchNorm2d(4)
    with torch.no_grad():
        bn.weight.fill_(3.0)
    init_parameters(nn.Sequential(nn.Conv2d(1, 4, 3), bn), torch.Generator().manual_seed(0))
    assert torch.equal(bn.weight, torch.ones(4)) and torch.equal(bn.running_var, torch.ones(4))
    with pytest.raises(ModelError, match=r"layer '0' \(Embedding\)"):
        init_parameters(nn.Sequential(nn.Embedding(5, 2)), torch.Generator().manual_seed(0))
    # building a model uses torch's global RNG (nn defaults); init_parameters does not touch it
    state = torch.get_rng_state()
    init_parameters(m, torch.Generator().manual_seed(1))
    assert torch.equal(state, torch.get_rng_state())


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "resnet"}, r"model.name='resnet': must be one of mlp, logreg, cnn_mcmahan"),
        ({"name": "vgg9", "width": 0.0}, r"model.width=0.0: must be in \(0, 1\]"),
        ({"name": "vgg9", "width": 1.5}, r"model.width=1.5: must be in \(0, 1\]"),
        ({"name": "mlp", "width": float("nan")}, r"model.width=nan"),
        ({"name": "lenet5", "input_shape": (784,)}, r"model.input_shape=\(784,\): lenet5 is a CNN and needs \(C, H"),
        ({"name": "lenet5", "in_features": 784}, r"lenet5 is a CNN"),
        ({"name": "vgg9", "input_shape": (3, 4, 4)}, r"model.input_shape=\(3, 4, 4\): too small"),
        ({"name": "vgg9", "hidden": (64,)}, r"model.hidden=\(64,\): vgg9 has a fixed architecture"),
        ({"name": "mlp", "hidden": (0,)}, r"model.hidden=\(0,\): must be a list of positive integers"),
        ({"name": "mlp", "n_classes": 1}, r"model.n_classes=1: must be an integer >= 2"),
        ({"name": "mlp", "input_shape": (1, 28)}, r"model.input_shape=\(1, 28\): must be"),
        ({"name": "mlp", "input_shape": (784,), "in_features": 64}, r"model.in_features=64: disagrees"),
    ],
)
def test_bad_input_names_field_value_and_range(kwargs, match):
    with pytest.raises(ModelError, match=match):
        build_model(**kwargs)


def test_cnn_rejects_a_batch_of_the_wrong_shape():
    with pytest.raises(ModelError, match=r"batch shape \(2, 1, 32, 32\): expected \(n, 1, 28, 28\) or \(n, 784\)"):
        build_model("cnn_mcmahan")(torch.zeros(2, 1, 32, 32))


# ---------------------------------------------------------------------------------------------------- CLI
@pytest.fixture()
def app() -> typer.Typer:
    root = typer.Typer()

    @root.callback()
    def _group() -> None:  # keeps `models` a sub-command, as in the real app
        pass

    register(root)
    return root


def test_cli_json_lists_every_model_with_the_papers_counts(app):
    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert list(rows) == list(MODEL_NAMES)
    assert rows["cnn_mcmahan"]["parameters"] == 1_663_370 and rows["vgg9"]["parameters"] == 3_491_530
    assert math.isclose(rows["cnn_mcmahan"]["update_megabits"], 53.22784)
    assert rows["lenet5"]["train_flops_per_sample"] == 2_263_920
    assert rows["vgg9"]["input_shape"] == [3, 32, 32] and rows["vgg9"]["n_classes"] == 10
    assert set(rows["mlp"]) == {"name", "description", "input_shape", "n_classes", "width", "parameters",
                                "update_megabits", "train_flops_per_sample", "level_parameters"}  # fmt: skip
    # HeteroFL Tables 1 and 2 at the paper's rounding: levels a..e of the conv model (1x28x28) and PreResNet18
    paper = {"heterofl_conv": ("1.6M", "391K", "99K", "25K", "7K"), "preresnet18": ("9.6M", "2.4M", "604K", "152K", "38K")}
    for name, printed in paper.items():
        counts = rows[name]["level_parameters"]
        assert list(counts) == ["a", "b", "c", "d", "e"]
        for count, text in zip(counts.values(), printed):
            scale = 1e6 if text.endswith("M") else 1e3
            digits = len(text[:-1].split(".")[1]) if "." in text else 0
            assert round(count / scale, digits) == float(text[:-1]), (name, count, text)
    assert rows["heterofl_conv"]["input_shape"] == [1, 28, 28] and rows["preresnet18"]["input_shape"] == [3, 32, 32]


def test_cli_table_at_a_width_and_bad_width(app):
    result = CliRunner().invoke(app, ["models", "--width", "0.5"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("models at width 0.5") and lines[1].split()[:2] == ["name", "input"]
    assert any(line.split()[:4] == ["cnn_mcmahan", "1x28x28", "10", "417,482"] for line in lines)
    for bad in ("0", "1.5", "nan", "-1"):
        result = CliRunner().invoke(app, ["models", "--width", bad])
        assert result.exit_code == 2
        assert result.stderr == f"error: --width={float(bad)!r}: must be in (0, 1]\n"


def test_scenario_model_names_are_the_registry():
    """scenario.py lists model names without importing torch; the list must stay equal to the registry."""
    from typing import get_args

    from edgefl.learning.models import MODEL_NAMES
    from edgefl.scenario.sections import ModelName

    assert get_args(ModelName) == MODEL_NAMES


def test_scenario_hidden_size_models_are_the_registry():
    """scenario.py also lists, without torch, which models take ``hidden`` sizes; the registry's flags decide."""
    from edgefl.learning.models import list_models
    from edgefl.scenario.sections import _TAKES_HIDDEN

    assert set(_TAKES_HIDDEN) == {entry.name for entry in list_models() if entry.takes_hidden}
