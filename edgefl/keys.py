"""The keys a scenario takes at each place, and the nearest one to a key it does not take (``chanel`` ->
``channel``), for the one-line error of an unknown key."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Sequence

from pydantic import BaseModel

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


def valid_keys(path: Sequence[str]) -> list[str]:
    """The keys the table at ``path`` takes (``()``: the top level; ``("fleet",)``: ``[fleet]``), engineer-unit
    aliases (``bandwidth_mhz``) and method tables included; empty if ``path`` is not a table."""
    from edgefl.config import _CHANNEL_UNITS, _DOWNLINK_UNITS, _FLEET_UNITS, ChannelConfig, DownlinkConfig, FleetConfig
    from edgefl.scenario import MethodConfig, Scenario, _registry

    model: type[BaseModel] | None = Scenario
    for part in path:
        if model is None:
            return []
        if model is MethodConfig and part in _registry():
            model = _registry()[part].Settings
            continue
        field = model.model_fields.get(part)
        model = None if field is None else _model_in(field.annotation)
    if model is None:
        return []
    keys = list(model.model_fields)
    if model is MethodConfig:
        keys += list(_registry())
    aliases = {FleetConfig: _FLEET_UNITS, ChannelConfig: _CHANNEL_UNITS, DownlinkConfig: _DOWNLINK_UNITS}
    return keys + list(aliases.get(model, {}))


def nearest_key(path: Sequence[str]) -> str | None:
    """The valid key closest to the last part of ``path`` (difflib's ratio at least 0.6), or None."""
    *parent, key = path
    close = difflib.get_close_matches(key, valid_keys(parent), n=1, cutoff=0.6)
    return close[0] if close else None
