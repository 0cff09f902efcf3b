"""Reader for the CIFAR-10 "python version" batch files, through a restricted unpickler.

Format (Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", 2009; the dataset page's
"Dataset layout"): each of ``data_batch_1`` .. ``data_batch_5`` (10,000 training images each) and ``test_batch``
(10,000 test images) is a pickled dict (Python 2 ``cPickle``, protocol 2) with ``data`` -- a uint8 array of
shape (n, 3072), each row a 32x32 image as 1024 red, then 1024 green, then 1024 blue values in row-major order --
and ``labels`` -- a list of n ints in [0, 9]; also ``batch_label`` (a string) and ``filenames`` (n strings).

A pickle can call any importable function while it loads, so these files are never given to ``pickle.load``:
:class:`RestrictedUnpickler` resolves only the few names a numpy array's pickle needs (``_reconstruct``,
``ndarray``, ``dtype``, protocol-5 ``_frombuffer`` and protocol-2 ``_codecs.encode`` of latin-1 text), each to a
checked wrapper; any other global (``os.system``, ``builtins.eval``, ...) raises :class:`DataError` before it is
called. Before that, the opcode stream is parsed without being run (:func:`pickletools.genops`), so a length field
larger than the file is refused instead of reaching the C unpickler, which would try to allocate it. The loaded
object must then be a dict holding a (n, 3072) uint8 ``data`` array and n labels in [0, 9].
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
from pathlib import Path
from typing import Any

import numpy as np

from edgefl.errors import DataError

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core.multiarray import _reconstruct as _np_reconstruct

__all__ = ["RestrictedUnpickler", "read_cifar_batch", "CIFAR10_TRAIN_FILES", "CIFAR10_TEST_FILE", "CIFAR10_SUBDIR"]

CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_FILE = "test_batch"
CIFAR10_SUBDIR = "cifar-10-batches-py"
"""The folder the official ``cifar-10-python.tar.gz`` unpacks to."""

_PIXELS = 3 * 32 * 32
_N_CLASSES = 10


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numpy's ``_reconstruct`` (first half of an ndarray's pickle), for plain empty ndarrays only."""
    if subtype is not np.ndarray or tuple(shape) != (0,):
        raise DataError(f"refusing array reconstruction of {subtype!r} with shape {shape!r}: expected ndarray, (0,)")
    return _np_reconstruct(np.ndarray, (0,), _dtype(dtype))


def _dtype(*args: Any) -> np.dtype:
    """``numpy.dtype(...)`` that refuses object dtypes (their elements would be arbitrary Python objects)."""
    dt = np.dtype(*args)
    if dt.hasobject:
        raise DataError(f"refusing object dtype {dt!r} in a pickled array")
    return dt


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
    """Protocol-5 array pickles (numpy's ``_frombuffer``): bytes -> array of ``shape``."""
    return np.frombuffer(buf, dtype=_dtype(dtype)).reshape(shape, order=order).copy()


def _latin1_encode(text: Any, encoding: Any = "latin1") -> bytes:
    """Protocol-2 pickles written by Python 3 store ``bytes`` as ``_codecs.encode(str, 'latin1')``."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise DataError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r}): only latin1 text is allowed")
    return text.encode("latin1")


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _dtype,
    ("_codecs", "encode"): _latin1_encode,
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals a pickled dict of numpy arrays needs (see module doc).

    Every global a pickle names -- through GLOBAL, STACK_GLOBAL, INST or the copyreg extension opcodes -- goes
    through :meth:`find_class`; persistent ids are refused by :class:`pickle.Unpickler` itself.
    """

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            allowed = ", ".join(f"{m}.{n}" for m, n in _ALLOWED_GLOBALS)
            raise DataError(
                f"refusing to load global {module}.{name}: a CIFAR-10 batch holds only a dict of bytes, lists and "
                f"numpy arrays (allowed globals: {allowed})"
            ) from None


def read_cifar_batch(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10 python batch: images uint8, shape (n, 3, 32, 32) [channel, row, column], labels int64 (n,).

    Raises :class:`DataError` naming the file if it is missing, is not a pickle, names any global outside the
    allow-list, or does not hold the expected dict.
    """
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read CIFAR-10 batch ({type(exc).__name__}: {exc})") from None
    try:
        for _ in pickletools.genops(io.BytesIO(blob)):  # parse only: every counted length must fit in the file
            pass
        obj = RestrictedUnpickler(io.BytesIO(blob), encoding="bytes").load()
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
    except Exception as exc:  # any malformed pickle: truncated, bad opcode, bad array state, ...
        raise DataError(f"{path}: not a readable CIFAR-10 python batch ({type(exc).__name__}: {exc})") from None
    return _check_batch(obj, path)


def _check_batch(obj: Any, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(obj, dict):
        raise DataError(f"{path}: a CIFAR-10 batch is a pickled dict, found {type(obj).__name__}")
    batch = {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}
    missing = [k for k in ("data", "labels") if k not in batch]
    if missing:
        raise DataError(f"{path}: CIFAR-10 batch lacks key(s) {missing}; found {sorted(map(str, batch))}")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _PIXELS:
        got = f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise DataError(f"{path}: 'data' must be a uint8 array of shape (n, {_PIXELS}), found {got}")
    labels = batch["labels"]
    if not isinstance(labels, (list, tuple, np.ndarray)) or not all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in labels
    ):
        raise DataError(f"{path}: 'labels' must be a list of ints, found {type(labels).__name__}")
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if y.size != data.shape[0]:
        raise DataError(f"{path}: {data.shape[0]} images but {y.size} labels")
    if y.size and (y.min() < 0 or y.max() >= _N_CLASSES):
        raise DataError(f"{path}: labels must lie in [0, {_N_CLASSES - 1}], found [{y.min()}, {y.max()}]")
    return data.reshape(-1, 3, 32, 32), y
