"""Atomic file writes: every result file is written to a temporary file in the same directory, then renamed."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "nan_to_none"]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader sees either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


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
