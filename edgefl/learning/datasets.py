"""Datasets. Embedded (no files needed): scikit-learn's digits and FedProx's Synthetic(alpha, beta). From local
files, never downloaded: Fashion-MNIST and MNIST (IDX, :mod:`edgefl.learning.idx`) and CIFAR-10 (python batches,
:mod:`edgefl.learning.cifar`).

Where files are looked for (:func:`search_dirs`): the ``data_dir`` argument if given, and then only there; else the
folder named by the environment variable ``EDGEFL_DATA`` and, for Fashion-MNIST, after it the Debian package
``dataset-fashion-mnist``'s ``/usr/share/datasets/fashion-mnist``. Inside a data dir each dataset is looked for in its own subfolder first
(``fashion-mnist/``, ``mnist/``, ``cifar-10-batches-py/``, or torchvision's ``FashionMNIST/raw``, ``MNIST/raw``),
then in the data dir itself. The first folder holding any of a dataset's files must hold all of them.

Image datasets keep their official train/test split. Pixels are float32 scaled to [0, 1], shaped (n, C, H, W):
(n, 1, 28, 28) for (Fashion-)MNIST, (n, 3, 32, 32) for CIFAR-10; labels int64 in [0, 9]. With
``normalize=True`` each channel is standardised with the training set's mean and standard deviation, train and
test alike (values are then no longer in [0, 1]).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edgefl.errors import DataError
from edgefl.learning.cifar import CIFAR10_SUBDIR, CIFAR10_TEST_FILE, CIFAR10_TRAIN_FILES, read_cifar_batch
from edgefl.learning.idx import read_idx

__all__ = [
    "Dataset",
    "subset",
    "load_digits",
    "make_synthetic",
    "load_fashion_mnist",
    "load_mnist",
    "load_cifar10",
    "search_dirs",
    "DATA_DIR_ENV",
    "FASHION_MNIST_SYSTEM_DIR",
]

DATA_DIR_ENV = "EDGEFL_DATA"
"""Environment variable naming the data dir when no ``data_dir`` is passed (the CLI's ``--data-dir``)."""

FASHION_MNIST_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where the Debian package ``dataset-fashion-mnist`` installs the four original gzipped IDX files."""


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


def subset(ds: Dataset, *, max_train: int | None, max_test: int | None, rng: np.random.Generator) -> Dataset:
    """At most ``max_train`` training and ``max_test`` test samples (None: all), drawn uniformly without replacement
    and kept in their original order. Data that belongs to devices (``owner_train`` set, Synthetic) is returned
    whole; so is ``ds`` when both limits are None, and then ``rng`` is not drawn from."""
    if ds.owner_train is not None or (max_train is None and max_test is None):
        return ds
    tr = np.arange(ds.y_train.size)
    te = np.arange(ds.y_test.size)
    if max_train is not None and max_train < tr.size:
        tr = np.sort(rng.choice(tr.size, max_train, replace=False))
    if max_test is not None and max_test < te.size:
        te = np.sort(rng.choice(te.size, max_test, replace=False))
    return replace(ds, x_train=ds.x_train[tr], y_train=ds.y_train[tr], x_test=ds.x_test[te], y_test=ds.y_test[te])


def _stratified_split(y: np.ndarray, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(test_fraction * idx.size))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_digits(*, test_fraction: float, rng: np.random.Generator) -> Dataset:
    """scikit-learn's 8x8 handwritten digits (1,797 images, shape (1, 8, 8), 10 classes), pixels scaled to [0, 1].

    The held-out test set is a stratified ``test_fraction`` of each class.
    """
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    x = (bunch.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)  # images: conv models run on them too
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


# ---------------------------------------------------------------------------------------------- image datasets
_IDX_STEMS = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_FASHION_MNIST_HOWTO = (
    "install the Debian package dataset-fashion-mnist (`apt-get update && apt-get install dataset-fashion-mnist`; "
    f"its folder {FASHION_MNIST_SYSTEM_DIR} is searched when no data dir is passed), or put the four IDX files "
    f"of Fashion-MNIST (Xiao et al. 2017) in the data dir (--data-dir or ${DATA_DIR_ENV}); edgefl never downloads data"
)
_MNIST_HOWTO = (
    "put the four IDX files of the MNIST database (LeCun et al.) in the data dir (--data-dir or "
    f"${DATA_DIR_ENV}) or its mnist/ subfolder; a torchvision download's MNIST/raw folder also works; "
    "edgefl never downloads data"
)
_CIFAR10_HOWTO = (
    "get the CIFAR-10 python version (cifar-10-python.tar.gz, https://www.cs.toronto.edu/~kriz/cifar.html) and "
    f"unpack it into the data dir (--data-dir or ${DATA_DIR_ENV}); edgefl never downloads data"
)


def search_dirs(
    data_dir: str | os.PathLike[str] | None, subdirs: tuple[str, ...], *, system_dir: Path | None = None
) -> list[Path]:
    """The folders a loader searches, in order.

    Roots: ``data_dir`` if given (and then nothing else); otherwise ``$EDGEFL_DATA`` if set, then
    ``system_dir`` (a distribution package's folder) if given. Each root contributes ``root/<subdir>`` for each
    of ``subdirs``, then ``root`` itself.
    """
    if data_dir is not None:
        roots = [Path(data_dir)]
    else:
        env = os.environ.get(DATA_DIR_ENV, "")
        roots = ([Path(env)] if env else []) + ([system_dir] if system_dir is not None else [])
    return [p for root in roots for p in (*(root / sub for sub in subdirs), root)]


def _find_files(dirs: list[Path], names: dict[str, tuple[str, ...]], title: str, howto: str) -> dict[str, Path]:
    """First folder of ``dirs`` holding any of the files; it must hold all (key -> accepted file names).

    ``title`` names the dataset in errors; ``howto`` says how to get it.
    """
    for folder in dirs:
        found = {}
        for key, options in names.items():
            hit = next((folder / n for n in options if (folder / n).is_file()), None)
            if hit is not None:
                found[key] = hit
        if len(found) == len(names):
            return found
        if found:
            missing = [names[k][0] for k in names if k not in found]
            raise DataError(
                f"{title}: {folder} holds {sorted(p.name for p in found.values())} but not {missing}; {howto}"
            )
    wanted = ", ".join(n[0] if len(n) == 1 else f"{n[0]}[.gz]" for n in names.values())
    searched = ", ".join(str(d) for d in dirs) or f"nothing (no data_dir given and ${DATA_DIR_ENV} unset)"
    raise DataError(f"{title} not found: searched {searched} for {wanted}; {howto}")


def _idx_names() -> dict[str, tuple[str, ...]]:
    # the original names, plain or gzipped, and the "train-images.idx3-ubyte" spelling some mirrors use
    return {
        key: (stem, f"{stem}.gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz")
        for key, stem in _IDX_STEMS.items()
    }


def _read_idx_split(images: Path, labels: Path) -> tuple[np.ndarray, np.ndarray]:
    x, y = read_idx(images), read_idx(labels)
    if x.dtype != np.uint8 or x.shape[1:] != (28, 28):
        raise DataError(f"{images}: expected uint8 images of shape (n, 28, 28), found {x.dtype} {x.shape}")
    if y.dtype != np.uint8 or y.ndim != 1:
        raise DataError(f"{labels}: expected uint8 labels of shape (n,), found {y.dtype} {y.shape}")
    if y.size != x.shape[0]:
        raise DataError(f"{images} holds {x.shape[0]} images but {labels} holds {y.size} labels")
    if y.size and y.max() > 9:
        raise DataError(f"{labels}: labels must lie in [0, 9], found a {int(y.max())}")
    return x[:, None, :, :], y.astype(np.int64)


def _image_dataset(
    name: str, x_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray, y_te: np.ndarray, normalize: bool
) -> Dataset:
    """uint8 (n, C, H, W) -> float32 in [0, 1], optionally standardised per channel with training statistics."""
    xs = [np.multiply(x, np.float32(1 / 255), dtype=np.float32) for x in (x_tr, x_te)]
    if normalize:
        for c in range(xs[0].shape[1]):  # per channel, in place, float64 sums: no temporary copy of the set
            train_c = xs[0][:, c]
            mean = np.float32(train_c.mean(dtype=np.float64))
            for x in xs:
                x[:, c] -= mean
            var = np.einsum("nij,nij->", train_c, train_c, dtype=np.float64) / max(train_c.size, 1)
            std = np.float32(np.sqrt(var)) or np.float32(1)  # a constant channel stays centred, not divided by 0
            for x in xs:
                x[:, c] /= std
    return Dataset(name=name, x_train=xs[0], y_train=y_tr, x_test=xs[1], y_test=y_te, n_classes=10)


def _load_idx_dataset(name: str, title: str, dirs: list[Path], howto: str, normalize: bool) -> Dataset:
    f = _find_files(dirs, _idx_names(), title, howto)
    x_tr, y_tr = _read_idx_split(f["train_images"], f["train_labels"])
    x_te, y_te = _read_idx_split(f["test_images"], f["test_labels"])
    return _image_dataset(name, x_tr, y_tr, x_te, y_te, normalize)


def load_fashion_mnist(data_dir: str | os.PathLike[str] | None = None, *, normalize: bool = False) -> Dataset:
    """Fashion-MNIST (Xiao et al. 2017): 60,000 + 10,000 grey 28x28 images of 10 clothing classes, from IDX files.

    Looked for in ``data_dir`` (or ``$EDGEFL_DATA``, then the Debian package's
    ``/usr/share/datasets/fashion-mnist``), each root's ``fashion-mnist/`` subfolder first. x: float32
    (n, 1, 28, 28) in [0, 1] (standardised if ``normalize``); y: int64 (n,). Raises :class:`DataError` if the
    files are missing (saying how to get them) or corrupt.
    """
    dirs = search_dirs(data_dir, ("fashion-mnist", "FashionMNIST/raw"), system_dir=FASHION_MNIST_SYSTEM_DIR)
    return _load_idx_dataset("fashion_mnist", "Fashion-MNIST", dirs, _FASHION_MNIST_HOWTO, normalize)


def load_mnist(data_dir: str | os.PathLike[str] | None = None, *, normalize: bool = False) -> Dataset:
    """MNIST (LeCun et al. 1998): 60,000 + 10,000 grey 28x28 handwritten digits, from user-supplied IDX files.

    Looked for in ``data_dir`` (or ``$EDGEFL_DATA``), its ``mnist/`` subfolder first. Shapes and errors as
    :func:`load_fashion_mnist`. The IDX format cannot tell MNIST from Fashion-MNIST: keep each in its subfolder.
    """
    dirs = search_dirs(data_dir, ("mnist", "MNIST/raw"))
    return _load_idx_dataset("mnist", "MNIST", dirs, _MNIST_HOWTO, normalize)


def load_cifar10(data_dir: str | os.PathLike[str] | None = None, *, normalize: bool = False) -> Dataset:
    """CIFAR-10 (Krizhevsky 2009): 50,000 + 10,000 colour 32x32 images of 10 classes, from the python batches.

    Looked for in ``data_dir`` (or ``$EDGEFL_DATA``): ``cifar-10-batches-py/`` first, then the folder itself,
    which must hold ``data_batch_1`` .. ``data_batch_5`` and ``test_batch``; they are read with a restricted
    unpickler (:mod:`edgefl.learning.cifar`). x: float32 (n, 3, 32, 32) in [0, 1] (standardised per channel if
    ``normalize``); y: int64 (n,). Raises :class:`DataError` if files are missing, corrupt or carry any object
    other than the expected dict of bytes, lists and uint8 arrays.
    """
    names = {n: (n,) for n in (*CIFAR10_TRAIN_FILES, CIFAR10_TEST_FILE)}
    f = _find_files(search_dirs(data_dir, (CIFAR10_SUBDIR,)), names, "CIFAR-10", _CIFAR10_HOWTO)
    train = [read_cifar_batch(f[n]) for n in CIFAR10_TRAIN_FILES]
    x_te, y_te = read_cifar_batch(f[CIFAR10_TEST_FILE])
    x_tr = np.concatenate([x for x, _ in train])
    y_tr = np.concatenate([y for _, y in train])
    return _image_dataset("cifar10", x_tr, y_tr, x_te, y_te, normalize)
