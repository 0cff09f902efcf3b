"""A real trained update for the codec tests: McMahan's CNN (``anycostfl_fmnist``'s model, 1,663,370 parameters)
after a few SGD steps on real Fashion-MNIST images, less the weights before (cached per process)."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=1)
def trained_cnn_update(steps: int = 4, batch: int = 25) -> dict[str, torch.Tensor]:
    """The update of ``steps`` SGD steps (lr 0.05, batches of ``batch`` of the first training images) from the
    seeded initial weights; skips the test where Fashion-MNIST is not installed."""
    import pytest

    from edgefl.learning.datasets import DataError, load_fashion_mnist
    from edgefl.learning.models import build_model

    try:
        data = load_fashion_mnist()
    except DataError as err:
        pytest.skip(f"Fashion-MNIST not found: {err}")
    torch.manual_seed(0)
    model = build_model("cnn_mcmahan", input_shape=(1, 28, 28), n_classes=10)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.as_tensor(data.x_train[: steps * batch]), torch.as_tensor(data.y_train[: steps * batch])
    for i in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[i * batch : (i + 1) * batch]), y[i * batch : (i + 1) * batch])
        loss.backward()
        opt.step()
    return {k: (v.detach() - before[k]) for k, v in model.state_dict().items()}


def random_update(seed: int, scale: float = 1.0, zeros: int = 5) -> dict[str, torch.Tensor]:
    """A small update of several shapes (a conv weight of ndim 4; 194 elements in all) with ``zeros`` exact zeros
    and repeated magnitudes of both signs, times ``scale``."""
    g = torch.Generator().manual_seed(seed)
    update = {"conv": torch.randn(4, 3, 3, 3, generator=g), "bias": torch.randn(4, generator=g),
              "fc": torch.randn(7, 11, generator=g), "odd": torch.randn(5, generator=g)}  # fmt: skip
    update["fc"][0, :zeros] = 0.0
    update["fc"][1, :4] = torch.tensor([0.5, -0.5, 0.5, -0.5])
    return {k: (v * scale).to(torch.float32) for k, v in update.items()}
