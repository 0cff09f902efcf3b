"""Reader for the IDX file format of MNIST and Fashion-MNIST (plain or gzip-compressed).

Format (LeCun et al., "THE MNIST DATABASE of handwritten digits", file-format section; Xiao et al. 2017,
Fashion-MNIST, same format): two zero bytes; one byte naming the element type (0x08 unsigned byte,
0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64); one byte ``ndim``; ``ndim``
big-endian uint32 sizes; then the elements, big-endian, in C order, and nothing after them.

Every way a file can be wrong (missing, unreadable, bad gzip stream or CRC, bad magic number, truncated header or
body, trailing bytes, a size over :data:`MAX_IDX_BYTES`) raises :class:`edgefl.errors.DataError` naming the file.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from edgefl.errors import DataError

__all__ = ["read_idx", "IDX_DTYPES", "MAX_IDX_BYTES"]

IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
"""IDX element-type code (third magic byte) -> big-endian numpy dtype."""

MAX_IDX_BYTES = 1 << 32
"""Largest element payload accepted [bytes] (4 GiB; Fashion-MNIST's training images are 47 MB): a header that
claims more is treated as corrupt instead of allocating memory for it."""

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_BYTES = 1 << 22


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read one IDX file into a native-endian array of the shape its header gives.

    Gzip is recognised by its content (magic ``1f 8b``), not by the file name, so a ``.gz`` file a browser
    already decompressed still loads. Raises :class:`DataError` on any malformed input.
    """
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            if compressed:
                with gzip.GzipFile(fileobj=raw, mode="rb") as fh:
                    return _read_stream(fh, path, file_bytes=None)
            return _read_stream(raw, path, file_bytes=os.fstat(raw.fileno()).st_size)
    except DataError:
        raise
    except FileNotFoundError:
        raise DataError(f"{path}: IDX file not found") from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        kind = "gzip-compressed " if path.name.endswith(".gz") else ""
        raise DataError(f"{path}: not a readable {kind}IDX file ({type(exc).__name__}: {exc})") from None


def _read_stream(fh: BinaryIO, path: Path, *, file_bytes: int | None) -> np.ndarray:
    head = _read_exact(fh, 4, path, "magic number")
    if head[0] != 0 or head[1] != 0 or head[2] not in IDX_DTYPES or head[3] == 0:
        codes = ", ".join(f"0x{c:02X}" for c in IDX_DTYPES)
        raise DataError(
            f"{path}: bad IDX magic number {head.hex()}: expected 00 00, a type code in ({codes}) "
            f"and ndim >= 1 (is this an IDX file?)"
        )
    dtype, ndim = IDX_DTYPES[head[2]], head[3]
    shape = struct.unpack(f">{ndim}I", _read_exact(fh, 4 * ndim, path, f"header ({ndim} dimension sizes)"))
    n_bytes = dtype.itemsize * int(np.prod(shape, dtype=object))
    if n_bytes > MAX_IDX_BYTES:
        raise DataError(f"{path}: header claims shape {shape} = {n_bytes} bytes, over the {MAX_IDX_BYTES}-byte limit")
    header_bytes = 4 + 4 * ndim
    if file_bytes is not None and file_bytes - header_bytes != n_bytes:
        raise DataError(
            f"{path}: wrong length: header says shape {shape} ({n_bytes} bytes of data) but the file has "
            f"{file_bytes - header_bytes} bytes after its {header_bytes}-byte header (truncated or corrupt)"
        )
    body = _read_exact(fh, n_bytes, path, f"data for shape {shape}")
    if fh.read(1):  # for gzip this read also checks the stream's CRC-32 and length trailer
        raise DataError(f"{path}: trailing bytes after the {n_bytes} data bytes of shape {shape} (corrupt file)")
    native = dtype.newbyteorder("=")
    return np.frombuffer(body, dtype=dtype).reshape(shape).astype(native)  # a writable, native-endian copy


def _read_exact(fh: BinaryIO, n: int, path: Path, what: str) -> bytes:
    """Read exactly ``n`` bytes in bounded chunks (a corrupt header cannot make us allocate its claimed size)."""
    chunks, got = [], 0
    while got < n:
        chunk = fh.read(min(_CHUNK_BYTES, n - got))
        if not chunk:
            raise DataError(f"{path}: truncated {what}: expected {n} bytes, got {got}")
        chunks.append(chunk)
        got += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
