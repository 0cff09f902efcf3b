"""Atomic file writes: every result file is written to a temporary file in the same directory, then renamed.

The temporary file is created private (mode 0600); before the rename it gets the mode an ordinary ``open()``
would give a new file, 0666 less the process umask, so result files are as readable as the user's other files.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["atomic_write_bytes", "atomic_write_stream", "atomic_write_text", "atomic_write_json", "nan_to_none"]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader sees either the old file or the whole new one."""
    return atomic_write_stream(path, lambda fh: fh.write(data))


def atomic_write_stream(path: str | os.PathLike[str], write: Callable[[BinaryIO], Any]) -> Path:
    """Call ``write`` with a binary file open on a temporary file beside ``path``, then rename it to ``path``:
    a reader sees either the old file or the whole new one, and a large table is streamed, never held as bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), _new_file_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _new_file_mode() -> int:
    """0o666 less the process umask: the mode ``open(path, "w")`` gives a new file."""
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask: read from /proc (Linux) where it can be, as setting it to read it races with threads."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: reading the umask means setting it; put it back at once
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Atomically write ``obj`` as indented JSON (NaN written as null)."""
    return atomic_write_text(path, json.dumps(nan_to_none(obj), indent=2, sort_keys=False) + "\n")


def nan_to_none(obj: Any, *, infinite: bool = False) -> Any:
    """``obj`` with every float NaN in it, through nested dicts, lists and tuples (tuples become lists),
    replaced by None, so that ``json.dumps`` writes null; with ``infinite=True`` also +-inf (strict JSON has
    neither NaN nor Infinity)."""
    if isinstance(obj, float) and (obj != obj or (infinite and math.isinf(obj))):
        return None
    if isinstance(obj, dict):
        return {k: nan_to_none(v, infinite=infinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_none(v, infinite=infinite) for v in obj]
    return obj


_nan_to_none = nan_to_none  # the former private name
