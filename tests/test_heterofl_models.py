"""HeteroFL's models (edgefl/learning/models/heterofl.py), masked cross-entropy (edgefl/learning/losses.py) and
static batch norm (edgefl/learning/batchnorm.py): parameter counts against HeteroFL's Tables 1/2 and 7/8, the
Scaler, seeded init, the masked loss by hand, and sBN statistics against numpy and PyTorch's momentum=None."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from edgefl.learning.batchnorm import accumulate_bn_statistics, with_static_bn
from edgefl.learning.losses import label_mask, masked_cross_entropy
from edgefl.learning.models import MODELS, ModelError, build_model, init_parameters
from edgefl.learning.models.heterofl import PreResNet, Scaler

LEVELS = {"a": 1.0, "b": 1 / 2, "c": 1 / 4, "d": 1 / 8, "e": 1 / 16}  # HeteroFL Sec. 4, r = 0.5


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def paper(n: int) -> str:
    """A count at the rounding of HeteroFL's Tables 7/8 (one decimal, M or K), half up, in integer arithmetic."""
    if n >= 1_000_000:
        tenths = (n + 50_000) // 100_000
        return f"{tenths // 10}.{tenths % 10} M"
    tenths = (n + 50) // 100
    return f"{tenths // 10}.{tenths % 10} K"


def conv(c_in: int, c_out: int, k: int, bias: bool = True) -> int:
    return c_in * c_out * k * k + (c_out if bias else 0)


def bn(c: int) -> int:
    return 2 * c  # affine weight and bias; static BN has no running buffers


# -------------------------------------------------------------------------------------- counts (Tables 1, 2)
def test_heterofl_conv_counts_match_tables_1_and_7():
    # Table 7 (Table 1 rounds the same values to whole K): a 1.6 M, b 391.4 K, c 98.9 K, d 25.3 K, e 6.6 K.
    table = {"a": "1.6 M", "b": "391.4 K", "c": "98.9 K", "d": "25.3 K", "e": "6.6 K"}
    counts = {level: n_params(build_model("heterofl_conv", width=r)) for level, r in LEVELS.items()}
    assert {level: paper(n) for level, n in counts.items()} == table
    # by hand at level a: conv3x3 with bias 1->64->128->256->512, BN affine on each, GAP, fc 512->10
    hand = (conv(1, 64, 3) + conv(64, 128, 3) + conv(128, 256, 3) + conv(256, 512, 3)
            + bn(64) + bn(128) + bn(256) + bn(512) + 512 * 10 + 10)  # fmt: skip
    assert counts["a"] == hand == 1_556_874
    assert counts == {"a": 1_556_874, "b": 391_370, "c": 98_922, "d": 25_274, "e": 6_594}
    # BN's affine parameters are needed to match: without them b..e would read 390.4, 98.4, 25.0, 6.5 K
    no_affine = {lv: counts[lv] - bn(sum(math.ceil(h * LEVELS[lv]) for h in (64, 128, 256, 512))) for lv in LEVELS}
    assert [paper(no_affine[lv]) for lv in "bcde"] == ["390.4 K", "98.4 K", "25.0 K", "6.5 K"]


def test_heterofl_mcmahan_is_the_mcmahan_cnn_plus_bn_and_scalers():
    # McMahan CNN by hand: conv5x5 1->32, conv5x5 32->64, fc 64*7*7 -> 512, fc 512 -> 10 = 1,663,370 (AnycostFL);
    # HeteroFL's version adds BN affine weights on the two convs (2 x 96) and no parameter for the Scalers
    mcmahan = conv(1, 32, 5) + conv(32, 64, 5) + 64 * 49 * 512 + 512 + 512 * 10 + 10
    assert mcmahan == 1_663_370 == n_params(build_model("cnn_mcmahan"))
    assert n_params(build_model("heterofl_mcmahan")) == mcmahan + bn(32) + bn(64) == 1_663_562
    # width 1/2 keeps ceil(c / 2) of each hidden size: 16, 32, 256 units
    half = conv(1, 16, 5) + conv(16, 32, 5) + 32 * 49 * 256 + 256 + 256 * 10 + 10 + bn(16) + bn(32)
    assert n_params(build_model("heterofl_mcmahan", width=0.5)) == half
    # hidden sets the global model: (16, 32, 256) at width 1 is the width-1/2 model, parameter for parameter
    a = dict(build_model("heterofl_mcmahan", hidden=(16, 32, 256)).named_parameters())
    b = dict(build_model("heterofl_mcmahan", width=0.5).named_parameters())
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
    rates = {m.rate for m in build_model("heterofl_mcmahan", width=1 / 8).modules() if isinstance(m, Scaler)}
    assert rates == {1 / 8}
    with pytest.raises(ModelError, match=r"model.hidden=\(8, 16\): heterofl_mcmahan needs 3 sizes"):
        build_model("heterofl_mcmahan", hidden=(8, 16))


def test_preresnet18_counts_match_tables_2_and_8():
    # Table 8: a 9.6 M, b 2.4 M, c 603.8 K, d 151.8 K, e 38.4 K (blocks [1, 1, 1, 2], hidden 64..512, 3x32x32)
    table = {"a": "9.6 M", "b": "2.4 M", "c": "603.8 K", "d": "151.8 K", "e": "38.4 K"}
    counts = {level: n_params(build_model("preresnet18", width=r)) for level, r in LEVELS.items()}
    assert {level: paper(n) for level, n in counts.items()} == table
    assert counts == {"a": 9_622_090, "b": 2_408_746, "c": 603_802, "d": 151_762, "e": 38_350}

    def block(c_in: int, c_out: int) -> int:  # pre-activation block, bias-free convs, 1x1 shortcut on change
        short = conv(c_in, c_out, 1, bias=False) if c_in != c_out else 0
        return bn(c_in) + conv(c_in, c_out, 3, False) + bn(c_out) + conv(c_out, c_out, 3, False) + short

    hand = (conv(3, 64, 3, False) + block(64, 64) + block(64, 128) + block(128, 256) + block(256, 512)
            + block(512, 512) + bn(512) + 512 * 10 + 10)  # fmt: skip
    assert counts["a"] == hand
    # blocks (2, 2, 2, 2) is the usual PreResNet18 (11.2 M), not the paper's network
    usual = PreResNet(input_shape=(3, 32, 32), n_classes=10, blocks=(2, 2, 2, 2))
    assert paper(n_params(usual)) == "11.2 M"


def test_registry_entries_hidden_sizes_and_input_checks():
    conv_entry, resnet = MODELS["heterofl_conv"], MODELS["preresnet18"]
    assert (conv_entry.input_shape, conv_entry.n_classes) == ((1, 28, 28), 10)
    assert (resnet.input_shape, resnet.n_classes, resnet.hidden) == ((3, 32, 32), 10, (64, 128, 256, 512))
    assert conv_entry.head == ("classifier.weight", "classifier.bias")
    assert resnet.head == ("linear.weight", "linear.bias")
    # (`edgefl models --json` lists both: tests/test_models.py checks the CLI lists every registered name)
    # hidden sizes are configurable; PreResNet needs one per stage
    assert n_params(build_model("heterofl_conv", hidden=(8,))) == conv(1, 8, 3) + bn(8) + 8 * 10 + 10
    with pytest.raises(ModelError, match=r"model.hidden=\(8, 16\): preresnet needs one hidden size per stage"):
        build_model("preresnet18", hidden=(8, 16))
    with pytest.raises(ModelError, match=r"model.input_shape=\(3, 4, 4\): too small"):
        build_model("preresnet18", input_shape=(3, 4, 4))
    for name in ("heterofl_conv", "preresnet18"):
        model = build_model(name, width=0.25)
        x = torch.rand(2, *MODELS[name].input_shape)
        assert model(x).shape == (2, 10) and torch.allclose(model(x), model(x.flatten(1)))


# ------------------------------------------------------------------------------------------------ Scaler
def test_scaler_divides_by_the_rate_in_training_only():
    scaler = Scaler(0.25)
    x = torch.tensor([1.0, -2.0, 4.0])
    assert torch.equal(scaler.train()(x), x / 0.25)
    assert torch.equal(scaler.eval()(x), x)
    assert list(scaler.parameters()) == [] and list(scaler.buffers()) == []
    with pytest.raises(ModelError, match=r"model.width=0.0: the Scaler rate must be in \(0, 1\]"):
        Scaler(0.0)
    # a built submodel's Scalers carry its width
    rates = {m.rate for m in build_model("preresnet18", width=1 / 8).modules() if isinstance(m, Scaler)}
    assert rates == {1 / 8}


def test_static_bn_layers_track_nothing_and_init_covers_the_new_models():
    for name in ("heterofl_conv", "preresnet18"):
        model = build_model(name, width=1 / 8)
        norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
        assert norms and all(not m.track_running_stats and m.affine for m in norms)
        assert list(model.buffers()) == []  # nothing but parameters in a state

        def weights(seed: int, name: str = name) -> torch.Tensor:
            m = init_parameters(build_model(name, width=1 / 8), torch.Generator().manual_seed(seed))
            return torch.cat([p.detach().flatten() for p in m.parameters()])

        assert torch.equal(weights(1), weights(1)) and not torch.equal(weights(1), weights(2))
        with torch.no_grad():
            for m in norms:
                m.weight.fill_(3.0)
                m.bias.fill_(1.0)
        init_parameters(model, torch.Generator().manual_seed(0))
        assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in norms)
        assert all(torch.equal(m.bias, torch.zeros_like(m.bias)) for m in norms)


# ------------------------------------------------------------------------------------------- masked loss
def test_label_mask_and_masked_cross_entropy_by_hand():
    labels = torch.tensor([3, 1, 3, 1])
    mask = label_mask(labels, 5)
    assert mask.tolist() == [False, True, False, True, False]
    logits = torch.tensor([[2.0, 0.5, -1.0, 1.5, 3.0], [0.1, 2.0, 0.3, -0.4, 5.0],
                           [1.0, 1.0, 1.0, 1.0, 1.0], [-2.0, 0.0, 4.0, 0.2, 0.0]], requires_grad=True)  # fmt: skip
    loss = masked_cross_entropy(logits, labels, mask)
    # by hand: absent logits become 0, so each contributes exp(0) = 1 to the normaliser (3 absent classes)
    z = logits.detach().numpy()
    hand = np.mean([-z[i, y] + np.log(np.exp(z[i, 1]) + np.exp(z[i, 3]) + 3.0) for i, y in enumerate([3, 1, 3, 1])])
    assert loss.item() == pytest.approx(hand, rel=1e-6)
    zeroed = logits.detach().clone()
    zeroed[:, ~mask] = 0.0
    assert loss.item() == pytest.approx(F.cross_entropy(zeroed, labels).item(), rel=1e-6)
    loss.backward()
    assert torch.all(logits.grad[:, ~mask] == 0) and torch.all(logits.grad[:, mask] != 0)
    with pytest.raises(ModelError, match=r"labels in \[1, 7\]: must lie in \[0, 4\]"):
        label_mask(torch.tensor([1, 7]), 5)
    with pytest.raises(ModelError, match=r"class_mask of 3 classes for logits of shape \(4, 5\)"):
        masked_cross_entropy(logits, labels, torch.ones(3, dtype=torch.bool))


# -------------------------------------------------------------------------------------------- static BN
def _clients(seed: int) -> list[list[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    sizes = [[5, 3], [7], [2, 6, 4]]  # three clients, batches of unequal size
    return [[torch.randn(n, 3, 4, 4, generator=g) * (c + 1) + c for n in client] for c, client in enumerate(sizes)]


def test_static_bn_statistics_equal_the_union_of_the_clients_data():
    model = nn.Sequential(nn.BatchNorm2d(3, track_running_stats=False))
    clients = _clients(0)
    stats = accumulate_bn_statistics(model, (iter(c) for c in clients))  # clients queried in turn, once
    union = torch.cat([x for c in clients for x in c]).numpy().astype(np.float64)  # numpy reference only
    values = union.transpose(1, 0, 2, 3).reshape(3, -1)
    assert np.allclose(stats["0"]["running_mean"].numpy(), values.mean(1), atol=1e-6)
    assert np.allclose(stats["0"]["running_var"].numpy(), values.var(1, ddof=1), atol=1e-5)
    assert int(stats["0"]["num_batches_tracked"]) == 6
    # querying only some clients gives the statistics of their data alone (no central copy is ever read)
    some = accumulate_bn_statistics(model, [clients[0], clients[2]])
    part = torch.cat([*clients[0], *clients[2]]).double().transpose(0, 1).reshape(3, -1)
    assert torch.allclose(some["0"]["running_mean"].double(), part.mean(1), atol=1e-6)
    # the eval copy normalises with the accumulated statistics; the model itself is untouched
    evaluated = with_static_bn(model, stats)
    x = torch.randn(1, 3, 4, 4)
    mean, var = stats["0"]["running_mean"].view(1, 3, 1, 1), stats["0"]["running_var"].view(1, 3, 1, 1)
    assert not evaluated.training and torch.allclose(evaluated(x), (x - mean) / torch.sqrt(var + 1e-5), atol=1e-5)
    assert model.training and model[0].running_mean is None and not model[0].track_running_stats


def test_per_batch_pooling_is_pytorchs_momentum_none_average_on_a_real_model():
    # HeteroFL's code accumulates with BatchNorm(momentum=None) in training mode: compare with PyTorch doing it.
    model = init_parameters(build_model("heterofl_conv", input_shape=(3, 4, 4), hidden=(4, 6)),
                            torch.Generator().manual_seed(0))  # fmt: skip
    clients = _clients(1)
    ours = accumulate_bn_statistics(model, clients, pooling="per_batch")
    tracked = with_static_bn(model, {k: {"running_mean": torch.zeros(v["running_mean"].shape),
                                         "running_var": torch.ones(v["running_var"].shape),
                                         "num_batches_tracked": torch.tensor(0)} for k, v in ours.items()})  # fmt: skip
    tracked.train()
    with torch.no_grad():
        for client in clients:
            for x in client:
                tracked(x)
    for name, module in tracked.named_modules():
        if isinstance(module, nn.BatchNorm2d):
            assert torch.allclose(ours[name]["running_mean"], module.running_mean, atol=1e-5), name
            assert torch.allclose(ours[name]["running_var"], module.running_var, atol=1e-5), name
            assert ours[name]["num_batches_tracked"] == module.num_batches_tracked == 6
    # union pooling differs from it with unequal batches (the variance also counts the spread between batches)
    union = accumulate_bn_statistics(model, clients)
    assert not torch.allclose(union["features.2"]["running_var"], ours["features.2"]["running_var"], atol=1e-4)
    evaluated = with_static_bn(model, union)
    assert evaluated(torch.rand(1, 3, 4, 4)).shape == (1, 10)  # a batch of one works in eval


def test_static_bn_errors():
    model = build_model("heterofl_conv", width=1 / 16)
    with pytest.raises(ModelError, match="no client batch reached the model"):
        accumulate_bn_statistics(model, [[], []])
    with pytest.raises(ModelError, match="has no batch-norm layer"):
        accumulate_bn_statistics(build_model("lenet5"), [[torch.rand(2, 1, 28, 28)]])
    with pytest.raises(ModelError, match=r"client batch of type str"):
        accumulate_bn_statistics(model, [["x"]])
    with pytest.raises(ModelError, match=r"no statistics for batch-norm layer 'features.2'"):
        with_static_bn(model, {})
