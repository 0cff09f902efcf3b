"""Dataset loaders: IDX (MNIST, Fashion-MNIST) and CIFAR-10 python batches, on small files written here in the
exact formats, plus the real Fashion-MNIST from the Debian package when it is installed."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgefl.errors import DataError
from edgefl.learning import datasets
from edgefl.learning.cifar import read_cifar_batch
from edgefl.learning.datasets import load_cifar10, load_fashion_mnist, load_mnist
from edgefl.learning.idx import read_idx

IDX_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D, np.float64: 0x0E}
STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


# ---------------------------------------------------------------------------------------------- writers
def idx_bytes(a: np.ndarray) -> bytes:
    """The IDX encoding (LeCun et al.): 00 00, type code, ndim, big-endian uint32 sizes, big-endian data."""
    header = bytes([0, 0, IDX_CODES[a.dtype.type], a.ndim]) + struct.pack(f">{a.ndim}I", *a.shape)
    return header + a.astype(a.dtype.newbyteorder(">")).tobytes()


def write_idx_set(folder: Path, *, n_train: int, n_test: int, gz: bool, seed: int = 0) -> dict[str, np.ndarray]:
    """The four (Fashion-)MNIST files with random content; returns the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = {
        STEMS[0]: rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        STEMS[1]: rng.integers(0, 10, n_train, dtype=np.uint8),
        STEMS[2]: rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        STEMS[3]: rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for stem, a in arrays.items():
        data = idx_bytes(a)
        (folder / (stem + ".gz" if gz else stem)).write_bytes(gzip.compress(data) if gz else data)
    return arrays


class Py2Pickler(pickle._Pickler):  # type: ignore[name-defined]  # the pure-Python pickler, to override opcodes
    """Writes what Python 2's cPickle (protocol 2) wrote for the CIFAR-10 batches: ``str`` as SHORT_BINSTRING /
    BINSTRING (loaded back as bytes) and numpy's ``_reconstruct`` under its old module ``numpy.core.multiarray``."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_py2_str(self, obj: bytes | str) -> None:
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + len(raw).to_bytes(4, "little") + raw)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str
    dispatch[str] = save_py2_str

    def save_global(self, obj: object, name: str | None = None) -> None:
        module = {"numpy._core.multiarray": "numpy.core.multiarray"}.get(obj.__module__, obj.__module__)
        self.write(pickle.GLOBAL + f"{module}\n{name or obj.__qualname__}\n".encode())
        self.memoize(obj)


def py2_pickle(obj: object) -> bytes:
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def cifar_batch(n: int, seed: int, label: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """A batch dict as in the CIFAR-10 python version: rows of 1024 R, 1024 G, 1024 B values, row-major."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)  # (image, channel, row, column)
    labels = rng.integers(0, 10, n)
    batch = {
        "batch_label": label,
        "labels": [int(v) for v in labels],
        "data": images.reshape(n, 3072),
        "filenames": [f"img_{seed}_{i}.png" for i in range(n)],
    }
    return batch, images, labels


def write_cifar(folder: Path, *, dump=py2_pickle, n: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    xs, ys = [], []
    for i in range(1, 6):
        batch, x, y = cifar_batch(n, i, f"training batch {i} of 5")
        (folder / f"data_batch_{i}").write_bytes(dump(batch))
        xs.append(x)
        ys.append(y)
    batch, x_te, y_te = cifar_batch(n, 99, "testing batch 1 of 1")
    (folder / "test_batch").write_bytes(dump(batch))
    return np.concatenate(xs), np.concatenate(ys), x_te, y_te


@pytest.fixture(autouse=True)
def _no_env_data_dir(monkeypatch):
    monkeypatch.delenv(datasets.DATA_DIR_ENV, raising=False)


# ---------------------------------------------------------------------------------------------- IDX
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype", list(IDX_CODES))
def test_read_idx_round_trips_every_element_type(tmp_path, dtype, gz):
    a = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    if dtype is np.uint8:
        a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 10
    data = idx_bytes(a)
    path = tmp_path / ("f.gz" if gz else "f")
    path.write_bytes(gzip.compress(data) if gz else data)
    b = read_idx(path)
    assert b.dtype == np.dtype(dtype) and b.dtype.isnative and np.array_equal(a, b)


def test_read_idx_recognises_gzip_by_content_not_name(tmp_path):
    a = np.arange(10, dtype=np.uint8)
    (tmp_path / "plain.gz").write_bytes(idx_bytes(a))  # a browser decompressed it but kept the name
    (tmp_path / "packed").write_bytes(gzip.compress(idx_bytes(a)))
    assert np.array_equal(read_idx(tmp_path / "plain.gz"), a)
    assert np.array_equal(read_idx(tmp_path / "packed"), a)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b"\x00\x01" + b[2:], "bad IDX magic number"),
        (lambda b: b[:2] + b"\x07" + b[3:], "bad IDX magic number"),
        (lambda b: b[:3] + b"\x00" + b[4:], "bad IDX magic number"),
        (lambda b: b[:3], "truncated magic number"),
        (lambda b: b[:9], "truncated header"),
        (lambda b: b[:-1], "wrong length"),
        (lambda b: b + b"\x00", "wrong length"),
        (lambda b: b"", "truncated magic number"),
        (lambda b: b[:4] + struct.pack(">III", 2**32 - 1, 2**32 - 1, 28) + b[16:], "over the"),
    ],
)
def test_corrupt_plain_idx_raises_data_error_naming_the_file(tmp_path, mutate, match):
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(mutate(idx_bytes(np.zeros((3, 28, 28), np.uint8))))
    with pytest.raises(DataError, match=match) as err:
        read_idx(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda z: z[:-12], "not a readable gzip-compressed IDX file"),  # stream cut short (EOFError)
        (lambda z: z[:-8] + bytes([z[-8] ^ 0xFF]) + z[-7:], "not a readable gzip-compressed IDX"),  # bad CRC-32
        (lambda z: z[:10] + b"\xff" * 16 + z[26:], "not a readable gzip-compressed IDX"),  # garbled deflate data
        (lambda z: z[:3] + b"\xff" + z[4:], "not a readable gzip-compressed IDX"),  # reserved flag bits set
    ],
)
def test_corrupt_gzip_raises_data_error(tmp_path, mutate, match):
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(mutate(gzip.compress(idx_bytes(np.arange(200, dtype=np.uint8) % 10))))
    with pytest.raises(DataError, match=match):
        read_idx(path)


def test_gzip_with_truncated_idx_body_is_a_data_error(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 28, 28), np.uint8))[:-5]))
    with pytest.raises(DataError, match="truncated data"):
        read_idx(path)
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 28, 28), np.uint8)) + b"junk"))
    with pytest.raises(DataError, match="trailing bytes"):
        read_idx(path)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


_VALID_IDX = idx_bytes(np.arange(2 * 28 * 28, dtype=np.int64).astype(np.uint8).reshape(2, 28, 28))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gz=st.booleans(),
    cut=st.integers(0, len(_VALID_IDX) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
    tail=st.binary(max_size=8),
)
def test_fuzz_truncated_or_garbled_idx_raises_only_data_error(fuzz_dir, gz, cut, flips, tail):
    raw = gzip.compress(_VALID_IDX, mtime=0) if gz else _VALID_IDX
    blob = bytearray(raw[: cut * len(raw) // len(_VALID_IDX)])
    for pos, xor in flips:
        if blob:
            blob[pos % len(blob)] ^= xor
    path = fuzz_dir / "fuzz-idx"
    path.write_bytes(bytes(blob) + tail)
    try:
        a = read_idx(path)
    except DataError:
        return
    assert isinstance(a, np.ndarray)  # a garbled file can still be a valid IDX file (e.g. a flipped pixel)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=64))
def test_fuzz_arbitrary_bytes_give_an_array_or_a_data_error(fuzz_dir, blob):
    path = fuzz_dir / "fuzz-bytes"
    path.write_bytes(blob)
    try:
        assert isinstance(read_idx(path), np.ndarray)
    except DataError:
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 3), cut=st.floats(0.0, 0.999), gz=st.booleans())
def test_fuzz_truncated_file_in_a_data_dir_fails_the_loader_with_data_error(fuzz_dir, which, cut, gz):
    folder = fuzz_dir / f"mnist-{which}-{gz}"
    if not folder.exists():
        write_idx_set(folder, n_train=5, n_test=3, gz=gz)
    path = folder / (STEMS[which] + (".gz" if gz else ""))
    good = path.read_bytes()
    path.write_bytes(good[: int(cut * len(good))])
    try:
        with pytest.raises(DataError, match=STEMS[which]):
            load_mnist(folder)
    finally:
        path.write_bytes(good)


# ---------------------------------------------------------------------------------------------- (Fashion-)MNIST
@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_reads_idx_files_into_scaled_nchw_float32(tmp_path, gz):
    arrays = write_idx_set(tmp_path / "mnist", n_train=12, n_test=5, gz=gz)
    d = load_mnist(tmp_path)
    assert d.name == "mnist" and d.n_classes == 10 and d.input_shape == (1, 28, 28)
    assert d.x_train.shape == (12, 1, 28, 28) and d.x_test.shape == (5, 1, 28, 28)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    np.testing.assert_allclose(d.x_train[:, 0], arrays[STEMS[0]] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(d.x_test[:, 0], arrays[STEMS[2]] / 255.0, rtol=1e-6)
    assert np.array_equal(d.y_train, arrays[STEMS[1]]) and np.array_equal(d.y_test, arrays[STEMS[3]])
    assert 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0


def test_normalize_standardises_each_channel_with_training_statistics(tmp_path):
    write_idx_set(tmp_path, n_train=30, n_test=7, gz=False)
    raw, d = load_mnist(tmp_path), load_mnist(tmp_path, normalize=True)
    mean, std = raw.x_train.mean(dtype=np.float64), raw.x_train.std(dtype=np.float64)
    assert abs(d.x_train.mean()) < 1e-5 and abs(d.x_train.std() - 1.0) < 1e-5
    np.testing.assert_allclose(d.x_test, (raw.x_test - mean) / std, atol=1e-5)  # test set uses train stats


def test_search_order_argument_then_env_then_debian_dir_and_subfolder_first(tmp_path, monkeypatch):
    a = write_idx_set(tmp_path / "arg" / "fashion-mnist", n_train=3, n_test=2, gz=True, seed=1)
    write_idx_set(tmp_path / "arg", n_train=4, n_test=2, gz=False, seed=2)  # the data dir itself: searched later
    e = write_idx_set(tmp_path / "env", n_train=5, n_test=2, gz=False, seed=3)
    s = write_idx_set(tmp_path / "debian", n_train=6, n_test=2, gz=True, seed=4)
    monkeypatch.setattr(datasets, "FASHION_MNIST_SYSTEM_DIR", tmp_path / "debian")
    assert np.array_equal(load_fashion_mnist().y_train, s[STEMS[1]])  # no argument, no env: the Debian folder
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path / "empty"))
    assert np.array_equal(load_fashion_mnist().y_train, s[STEMS[1]])  # env without it: still the Debian folder
    monkeypatch.setenv(datasets.DATA_DIR_ENV, str(tmp_path / "env"))
    assert np.array_equal(load_fashion_mnist().y_train, e[STEMS[1]])
    d = load_fashion_mnist(tmp_path / "arg")
    assert d.name == "fashion_mnist" and np.array_equal(d.y_train, a[STEMS[1]])
    assert datasets.search_dirs(tmp_path, ("mnist",)) == [tmp_path / "mnist", tmp_path]


def test_torchvision_and_dotted_file_names_are_found(tmp_path):
    t = write_idx_set(tmp_path / "MNIST" / "raw", n_train=3, n_test=2, gz=False, seed=5)
    assert np.array_equal(load_mnist(tmp_path).y_train, t[STEMS[1]])
    k = tmp_path / "kaggle"
    write_idx_set(k, n_train=4, n_test=2, gz=False, seed=6)
    for stem in STEMS:  # "train-images.idx3-ubyte", as some mirrors name them
        (k / stem).rename(k / stem.replace("-idx", ".idx"))
    assert load_mnist(k).x_train.shape == (4, 1, 28, 28)


def test_missing_fashion_mnist_names_paths_searched_and_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "FASHION_MNIST_SYSTEM_DIR", tmp_path / "no-package")
    with pytest.raises(DataError) as err:
        load_fashion_mnist()
    msg = str(err.value)
    assert msg.startswith("Fashion-MNIST not found: searched")
    assert str(tmp_path / "no-package") in msg and "train-images-idx3-ubyte[.gz]" in msg
    assert "apt-get update" in msg and "apt-get install dataset-fashion-mnist" in msg
    with pytest.raises(DataError, match="never downloads") as err:
        load_fashion_mnist(tmp_path / "mine")
    assert str(tmp_path / "mine" / "fashion-mnist") in str(err.value) and str(tmp_path / "mine") in str(err.value)


def test_missing_mnist_and_cifar_say_where_they_looked(tmp_path):
    with pytest.raises(DataError, match=r"^MNIST not found: searched nothing \(no data_dir given and \$EDGEFL_DATA"):
        load_mnist()
    with pytest.raises(DataError, match="^MNIST not found") as err:
        load_mnist(tmp_path)
    assert str(tmp_path / "mnist") in str(err.value) and "MNIST database" in str(err.value)
    with pytest.raises(DataError, match="^CIFAR-10 not found") as err:
        load_cifar10(tmp_path)
    assert str(tmp_path / "cifar-10-batches-py") in str(err.value) and "data_batch_1" in str(err.value)
    assert "cifar-10-python.tar.gz" in str(err.value)


def test_incomplete_folder_names_the_missing_files(tmp_path):
    write_idx_set(tmp_path, n_train=3, n_test=2, gz=True)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"but not \['t10k-labels-idx1-ubyte'\]"):
        load_mnist(tmp_path)


@pytest.mark.parametrize(
    ("stem", "array", "match"),
    [
        (STEMS[1], np.zeros(3, np.int32), "expected uint8 labels"),
        (STEMS[1], np.zeros((3, 1), np.uint8), "expected uint8 labels"),
        (STEMS[1], np.zeros(4, np.uint8), "holds 3 images but"),
        (STEMS[1], np.array([0, 10, 1], np.uint8), r"labels must lie in \[0, 9\]"),
        (STEMS[0], np.zeros((3, 27, 28), np.uint8), r"shape \(n, 28, 28\)"),
        (STEMS[0], np.zeros((3, 28, 28), np.float32), "expected uint8 images"),
    ],
)
def test_well_formed_idx_with_the_wrong_content_is_rejected(tmp_path, stem, array, match):
    write_idx_set(tmp_path, n_train=3, n_test=2, gz=False)
    (tmp_path / stem).write_bytes(idx_bytes(array))
    with pytest.raises(DataError, match=match):
        load_mnist(tmp_path)


@pytest.mark.skipif(
    not all((datasets.FASHION_MNIST_SYSTEM_DIR / f"{s}.gz").is_file() for s in STEMS),
    reason="real Fashion-MNIST not installed: `apt-get update && apt-get install dataset-fashion-mnist` "
    "puts it in /usr/share/datasets/fashion-mnist",
)
def test_real_fashion_mnist_from_the_debian_package():
    d = load_fashion_mnist()
    # Xiao et al. 2017: 60,000 training and 10,000 test images, 28x28, 10 balanced classes
    assert d.x_train.shape == (60000, 1, 28, 28) and d.x_test.shape == (10000, 1, 28, 28)
    assert np.array_equal(np.bincount(d.y_train), [6000] * 10) and np.array_equal(np.bincount(d.y_test), [1000] * 10)
    # the per-pixel mean / std used everywhere to normalise Fashion-MNIST: 0.2860 / 0.3530
    assert abs(d.x_train.mean() - 0.2860) < 5e-4 and abs(d.x_train.std() - 0.3530) < 5e-4


# ---------------------------------------------------------------------------------------------- CIFAR-10
@pytest.mark.parametrize("layout", ["subfolder", "flat"])
def test_load_cifar10_from_python2_style_batches(tmp_path, layout):
    folder = tmp_path / "cifar-10-batches-py" if layout == "subfolder" else tmp_path
    x_tr, y_tr, x_te, y_te = write_cifar(folder)
    assert (folder / "data_batch_1").read_bytes()[:2] == b"\x80\x02"  # protocol 2, as the real files
    d = load_cifar10(tmp_path)
    assert d.name == "cifar10" and d.input_shape == (3, 32, 32) and d.x_train.dtype == np.float32
    assert d.x_train.shape == (20, 3, 32, 32) and d.x_test.shape == (4, 3, 32, 32)
    # row layout: 1024 red, 1024 green, 1024 blue, each 32x32 row-major -> (channel, row, column)
    np.testing.assert_allclose(d.x_train, x_tr / 255.0, rtol=1e-6)
    np.testing.assert_allclose(d.x_test, x_te / 255.0, rtol=1e-6)
    assert np.array_equal(d.y_train, y_tr) and np.array_equal(d.y_test, y_te) and d.y_train.dtype == np.int64


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_batches_repickled_by_python3_also_load(tmp_path, protocol):
    x_tr, _, _, _ = write_cifar(tmp_path, dump=lambda b: pickle.dumps(b, protocol=protocol))
    np.testing.assert_allclose(load_cifar10(tmp_path).x_train, x_tr / 255.0, rtol=1e-6)


class _RunsACommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_os_system_and_never_calls_it(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder)
    evil = {b"data": _RunsACommand(marker), b"labels": [0]}
    (folder / "test_batch").write_bytes(pickle.dumps(evil, protocol=2))
    assert pickle.dumps(evil, protocol=2).count(b"system") == 1  # the pickle really names os.system
    with pytest.raises(DataError, match=r"refusing to load global (posix|nt|os)\.system") as err:
        load_cifar10(tmp_path)
    assert str(folder / "test_batch") in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        b"cbuiltins\neval\n(V__import__('os').system('true')\ntR.",
        pickle.dumps(exec, protocol=4),  # STACK_GLOBAL opcode
        b"c__builtin__\nopen\n.",
        b"csubprocess\nPopen\n.",
        b"(S'true'\nios\nsystem\n.",  # INST opcode
    ],
)
def test_restricted_unpickler_refuses_any_other_global(tmp_path, payload):
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    with pytest.raises(DataError, match="refusing to load global"):
        read_cifar_batch(path)


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ([1, 2, 3], "pickled dict, found list"),
        ({b"data": np.zeros((2, 3072), np.uint8)}, r"lacks key\(s\) \['labels'\]"),
        ({b"data": np.zeros((2, 3072), np.float64), b"labels": [0, 1]}, "must be a uint8 array"),
        ({b"data": np.zeros((2, 3071), np.uint8), b"labels": [0, 1]}, r"shape \(n, 3072\)"),
        ({b"data": b"not an array", b"labels": [0, 1]}, "found bytes"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1, 2]}, "2 images but 3 labels"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, r"labels must lie in \[0, 9\]"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [b"cat", b"dog"]}, "list of ints"),
        ({b"data": np.array([[None] * 3072] * 2, dtype=object), b"labels": [0, 1]}, "refusing object dtype"),
    ],
)
def test_cifar_batch_with_unexpected_content_is_rejected(tmp_path, obj, match):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps(obj, protocol=2))
    with pytest.raises(DataError, match=match):
        read_cifar_batch(path)


def test_length_field_beyond_the_file_is_refused_before_unpickling(tmp_path):
    """A BYTEARRAY8 claiming 2**62 bytes: plain pickle.loads would try to allocate it (MemoryError, and CPython
    3.11 then reports a bytearray freed with exported buffers); the opcode pre-scan refuses it first."""
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x05\x96" + (2**62).to_bytes(8, "little") + b"ab.")
    with pytest.raises(DataError, match="not a readable CIFAR-10 python batch .*bytearray8"):
        read_cifar_batch(path)


_VALID_BATCH = py2_pickle(cifar_batch(2, 0, "training batch 1 of 5")[0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cut=st.integers(0, len(_VALID_BATCH)),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
)
def test_fuzz_truncated_or_garbled_cifar_batch_raises_only_data_error(fuzz_dir, cut, flips):
    blob = bytearray(_VALID_BATCH[:cut])
    for pos, xor in flips:
        if blob:
            blob[pos % len(blob)] ^= xor
    path = fuzz_dir / "fuzz-batch"
    path.write_bytes(bytes(blob))
    try:
        x, y = read_cifar_batch(path)
    except DataError:
        return
    assert x.dtype == np.uint8 and x.shape[1:] == (3, 32, 32) and y.shape == (x.shape[0],)
