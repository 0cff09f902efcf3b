"""The device table's file of a run directory: ``device_rounds.csv`` or ``device_rounds.parquet``, as the
``[output]`` section (:class:`edgefl.scenario.sections.OutputConfig`) chooses.

``format = "csv"`` (default) writes the device table as text any tool reads; ``"parquet"`` writes it as a
compressed column file (pyarrow), which at 10^6 device rows is several times smaller and faster to write and
read. ``rounds.csv`` and ``summary.json`` are small and stay as they are. :func:`read_device_rounds` reads
whichever a run directory holds, so every reader of a run (resume, ``edgefl plot``, sweeps, examples) takes both.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from edgefl.errors import EdgeflError
from edgefl.io import atomic_write_stream

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEVICE_ROUNDS_FILES", "device_rounds_path", "write_device_rounds", "read_device_rounds"]

DEVICE_ROUNDS_FILES = {"csv": "device_rounds.csv", "parquet": "device_rounds.parquet"}
"""The device table's file name in a run directory, by ``output.format``."""


def device_rounds_path(run_dir: str | Path, fmt: str) -> Path:
    """Where a run directory keeps its device table in format ``fmt`` (``"csv"`` or ``"parquet"``)."""
    return Path(run_dir) / DEVICE_ROUNDS_FILES[fmt]


def write_device_rounds(run_dir: str | Path, device_rounds: pd.DataFrame, fmt: str) -> Path:
    """Write the device table into ``run_dir`` atomically, streamed (no copy of the whole file in memory), and
    remove the table a previous write left in the other format; return the path written."""
    path = device_rounds_path(run_dir, fmt)
    if fmt == "parquet":
        atomic_write_stream(path, lambda fh: device_rounds.to_parquet(fh, engine="pyarrow", index=False))
    else:

        def write_csv(fh) -> None:
            text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=False)
            device_rounds.to_csv(text, index=False, chunksize=100_000)
            text.flush()
            text.detach()  # leave the binary file open for the atomic writer's fsync

        atomic_write_stream(path, write_csv)
    for other, name in DEVICE_ROUNDS_FILES.items():
        if other != fmt:
            (Path(run_dir) / name).unlink(missing_ok=True)
    return path


def read_device_rounds(run_dir: str | Path) -> pd.DataFrame:
    """The device table of a run directory, from ``device_rounds.parquet`` or ``device_rounds.csv``.

    Raises :class:`EdgeflError` naming the directory when it holds neither."""
    import pandas as pd

    run_dir = Path(run_dir)
    parquet, csv = (device_rounds_path(run_dir, f) for f in ("parquet", "csv"))
    if parquet.is_file():
        return pd.read_parquet(parquet, engine="pyarrow")
    if csv.is_file():
        return pd.read_csv(csv)
    names = " or ".join(DEVICE_ROUNDS_FILES.values())
    raise EdgeflError(f"run directory {str(run_dir)!r}: no {names}; expected a run directory written by `edgefl run`")
