"""The payloads of the updates that reached the server (``output.payloads``): each arrived update's bytes, as the
method says the device sent them (:meth:`~edgefl.methods.base.Method.wire_bytes`), filed as
``round-R/device-D.bin`` (R the round, D the device).

With a folder (the run folder's ``payloads/``) every file is written atomically as its round aggregates, so an
interrupted run keeps the files of the rounds it played and a resumed one writes the same bytes again; without
one (a run from Python) the bytes are kept in :attr:`PayloadFiles.kept` for
:func:`edgefl.output.results.write_run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from edgefl.errors import SimulationError
from edgefl.io import atomic_write_bytes

if TYPE_CHECKING:
    from edgefl.methods.base import ClientUpdate, Method

__all__ = ["PayloadFiles", "payload_name"]


def payload_name(round_index: int, device: int) -> str:
    """The file of ``device``'s payload in round ``round_index``, relative to the payloads folder."""
    return f"round-{int(round_index)}/device-{int(device)}.bin"


class PayloadFiles:
    """Where the arrived updates' payloads go: ``directory`` (written at once) or :attr:`kept` (name -> bytes)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.kept: dict[str, bytes] = {}

    def arrived(self, round_index: int, method: Method, updates: Sequence[ClientUpdate]) -> None:
        """File the payload of each of ``updates``, the updates of ``round_index`` the server aggregates."""
        for update in updates:
            data = method.wire_bytes(update)
            if data is None:
                raise SimulationError(f"output.payloads: method {method.name!r} gives no bytes for device "
                                      f"{update.device}'s update in round {round_index}")  # fmt: skip
            name = payload_name(round_index, update.device)
            if self.directory is None:
                self.kept[name] = bytes(data)
            else:
                atomic_write_bytes(self.directory / name, data)
