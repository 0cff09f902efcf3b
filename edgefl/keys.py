"""The keys a scenario takes at each place, and the nearest one to a key it does not take (``chanel`` ->
``channel``), for the one-line error of an unknown key. The scenario's model is handed in (``root``), so this module
stands below :mod:`edgefl.scenario`; a model with keyed sub-tables (``[method.<name>]``) lists them with a
``tables()`` classmethod (name -> settings model)."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Sequence

from pydantic import BaseModel

from edgefl.config import CHANNEL_UNITS, DOWNLINK_UNITS, FLEET_UNITS, ChannelConfig, DownlinkConfig, FleetConfig

__all__ = ["valid_keys", "nearest_key"]


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside a field's type (``DownlinkConfig | None`` -> ``DownlinkConfig``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _tables(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The keyed sub-tables of ``model`` (its ``tables()`` classmethod), or none."""
    tables = getattr(model, "tables", None)
    return tables() if callable(tables) else {}


def valid_keys(path: Sequence[str], root: type[BaseModel]) -> list[str]:
    """The keys the table at ``path`` of the model ``root`` takes (``()``: the top level; ``("fleet",)``:
    ``[fleet]``), engineer-unit aliases (``bandwidth_mhz``) and keyed tables included; empty if ``path`` is not
    a table."""
    model: type[BaseModel] | None = root
    for part in path:
        if model is None:
            return []
        if part in _tables(model):
            model = _tables(model)[part]
            continue
        field = model.model_fields.get(part)
        model = None if field is None else _model_in(field.annotation)
    if model is None:
        return []
    keys = list(model.model_fields) + list(_tables(model))
    aliases = {FleetConfig: FLEET_UNITS, ChannelConfig: CHANNEL_UNITS, DownlinkConfig: DOWNLINK_UNITS}
    return keys + list(aliases.get(model, {}))


def nearest_key(path: Sequence[str], root: type[BaseModel]) -> str | None:
    """The valid key of the model ``root`` closest to the last part of ``path`` (difflib's ratio at least 0.6),
    or None."""
    *parent, key = path
    close = difflib.get_close_matches(key, valid_keys(parent, root), n=1, cutoff=0.6)
    return close[0] if close else None
