"""Elastic model shrinking (AnycostFL Sec. III-B): channel sorting keeps the function; the alpha-submodel."""

from __future__ import annotations

import math

import pytest
import torch

from edgefl.learning.models import build_model, init_parameters
from edgefl.learning.shrinking import ShrinkingError, channel_groups, shrink, sort_channels

SMALL = {
    "mlp": dict(input_shape=(12,), n_classes=5, hidden=(9, 7)),
    "cnn_mcmahan": dict(input_shape=(1, 28, 28), n_classes=10),
    "lenet5": dict(input_shape=(1, 28, 28), n_classes=10),
    "heterofl_conv": dict(input_shape=(1, 16, 16), n_classes=10, hidden=(6, 8, 5)),
}


def _model(name: str, seed: int = 0) -> torch.nn.Module:
    model = build_model(name, width=1.0, **SMALL[name])
    init_parameters(model, torch.Generator().manual_seed(seed))
    with torch.no_grad():  # biases / BN affine away from their defaults, so a wrong permutation shows
        for key, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(key))))
    return model


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("train", [False, True])
def test_channel_sorting_preserves_outputs(name: str, train: bool) -> None:
    model = _model(name)
    groups = channel_groups(model)
    assert groups, "every model here has hidden layers"
    x = torch.randn(6, *SMALL[name]["input_shape"], generator=torch.Generator().manual_seed(1))
    model.train(train)
    before = model(x)
    sorted_state = sort_channels(model.state_dict(), groups)
    assert any(not torch.equal(sorted_state[k], v) for k, v in model.state_dict().items())
    model.load_state_dict(sorted_state)
    torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)
    for group in groups:  # norms now descending
        norms = sorted_state[group.weight].reshape(sorted_state[group.weight].shape[0], -1).norm(dim=1)
        assert torch.all(norms[:-1] >= norms[1:])


def test_flatten_boundary_moves_blocks() -> None:
    groups = channel_groups(_model("cnn_mcmahan"))
    last_conv = [g for g in groups if g.weight.startswith("features")][-1]
    assert last_conv.inputs == (("classifier.0.weight", 7 * 7),)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.25, 0.1])
def test_shrink_keeps_ceil_sqrt_alpha_channels_of_largest_norm(alpha: float) -> None:
    kw = SMALL["heterofl_conv"]
    model = _model("heterofl_conv")
    sub, shapes = shrink(model.state_dict(), "heterofl_conv", alpha, **kw)
    width = math.sqrt(alpha)
    assert shapes["features.0.weight"][0] == math.ceil(width * 6)
    submodel = build_model("heterofl_conv", width=width, **kw)
    submodel.load_state_dict(sub)  # the shapes are those of the registry's sqrt(alpha) model
    norms = model.state_dict()["features.0.weight"].reshape(6, -1).norm(dim=1)
    kept = sub["features.0.weight"].reshape(shapes["features.0.weight"][0], -1).norm(dim=1)
    torch.testing.assert_close(kept, torch.sort(norms, descending=True).values[: kept.numel()])


def test_unsupported_models_and_alpha() -> None:
    model = build_model("preresnet18", input_shape=(3, 8, 8), n_classes=10, hidden=(4, 4, 4, 4), width=1.0)
    with pytest.raises(ShrinkingError, match="PreResNet"):
        channel_groups(model)
    with pytest.raises(ShrinkingError, match="alpha=0"):
        shrink({}, "mlp", 0.0)
