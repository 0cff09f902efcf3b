"""Datasets that ship with the package (no download): scikit-learn's digits and FedProx's Synthetic(alpha, beta)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "load_digits", "make_synthetic"]


@dataclass(frozen=True, kw_only=True)
class Dataset:
    """A classification dataset split into train and test arrays.

    ``x_*`` float32, shape (n, *input_shape); ``y_*`` int64, shape (n,). ``owner_train`` is set when the data
    is inherently per device (Synthetic): shape (n_train,), the device that owns each training sample.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    owner_train: np.ndarray | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def _stratified_split(y: np.ndarray, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(test_fraction * idx.size))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_digits(*, test_fraction: float, rng: np.random.Generator) -> Dataset:
    """scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes), pixels scaled from [0, 16] to [0, 1].

    The held-out test set is a stratified ``test_fraction`` of each class.
    """
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    x = (bunch.data.astype(np.float32) / 16.0).reshape(-1, 64)
    y = bunch.target.astype(np.int64)
    tr, te = _stratified_split(y, test_fraction, rng)
    return Dataset(name="digits", x_train=x[tr], y_train=y[tr], x_test=x[te], y_test=y[te], n_classes=10)


def make_synthetic(
    *,
    n_devices: int,
    alpha: float,
    beta: float,
    samples_mean: int,
    test_fraction: float,
    rng: np.random.Generator,
    dim: int = 60,
    n_classes: int = 10,
) -> Dataset:
    """FedProx's Synthetic(alpha, beta) (Li et al. 2020, Sec. 5.1): one local model and input law per device.

    Device k: u_k ~ N(0, alpha), B_k ~ N(0, beta); W_k, b_k ~ N(u_k, 1) elementwise; v_k ~ N(B_k, 1)
    elementwise; x ~ N(v_k, Sigma) with Sigma = diag(j^-1.2); y = argmax(softmax(W_k x + b_k)).
    Local sizes follow a power law (lognormal, mean ~``samples_mean``); ``test_fraction`` of each device's
    samples form the common test set.
    """
    sizes = np.maximum(rng.lognormal(mean=np.log(samples_mean) - 0.5, sigma=1.0, size=n_devices), 2 / test_fraction)
    sizes = sizes.astype(np.int64)
    std = np.arange(1, dim + 1, dtype=float) ** (-1.2 / 2)  # sqrt of Sigma_jj = j^-1.2
    xs_tr, ys_tr, own_tr, xs_te, ys_te = [], [], [], [], []
    for k in range(n_devices):
        u_k = rng.normal(0.0, np.sqrt(alpha))
        b_k = rng.normal(0.0, np.sqrt(beta))
        w = rng.normal(u_k, 1.0, size=(n_classes, dim))
        bias = rng.normal(u_k, 1.0, size=n_classes)
        v = rng.normal(b_k, 1.0, size=dim)
        x = v + std * rng.standard_normal((sizes[k], dim))
        y = np.argmax(x @ w.T + bias, axis=1)
        n_test = max(1, int(round(test_fraction * sizes[k])))
        xs_te.append(x[:n_test]); ys_te.append(y[:n_test])
        xs_tr.append(x[n_test:]); ys_tr.append(y[n_test:])
        own_tr.append(np.full(sizes[k] - n_test, k))
    return Dataset(
        name="synthetic",
        x_train=np.concatenate(xs_tr).astype(np.float32),
        y_train=np.concatenate(ys_tr).astype(np.int64),
        x_test=np.concatenate(xs_te).astype(np.float32),
        y_test=np.concatenate(ys_te).astype(np.int64),
        n_classes=n_classes,
        owner_train=np.concatenate(own_tr).astype(np.int64),
    )
