"""The keys a scenario takes at each place, and the nearest one to a key it does not take (``chanel`` ->
``channel``), for the one-line error of an unknown key. The scenario's model is handed in (``root``), so this module
stands below :mod:`edgefl.scenario.loading`, and so are keyed sub-tables whose names the model does not know
(``keyed``: ``{("method",): {name: settings model}}`` for the ``[method.<name>]`` tables of the method registry)."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from edgefl.scenario.sections import CHANNEL_UNITS, DOWNLINK_UNITS, FLEET_UNITS, ChannelConfig, DownlinkConfig, FleetConfig

__all__ = ["valid_keys", "nearest_key", "nearest_name"]


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside a field's type (``DownlinkConfig | None`` -> ``DownlinkConfig``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


Keyed = Mapping[tuple[str, ...], Mapping[str, type[BaseModel]]]
"""Keyed sub-tables by the path of the table that holds them: ``{("method",): {"fedavg": FedAvgSettings, ...}}``."""


def valid_keys(path: Sequence[str], root: type[BaseModel], keyed: Keyed | None = None) -> list[str]:
    """The keys the table at ``path`` of the model ``root`` takes (``()``: the top level; ``("fleet",)``:
    ``[fleet]``), engineer-unit aliases (``bandwidth_mhz``) and the ``keyed`` tables included; empty if ``path`` is
    not a table."""
    keyed = keyed or {}
    model: type[BaseModel] | None = root
    for i, part in enumerate(path):
        if model is None:
            return []
        tables = keyed.get(tuple(path[:i]), {})
        if part in tables:
            model = tables[part]
            continue
        field = model.model_fields.get(part)
        model = None if field is None else _model_in(field.annotation)
    if model is None:
        return []
    keys = list(model.model_fields) + list(keyed.get(tuple(path), {}))
    aliases = {FleetConfig: FLEET_UNITS, ChannelConfig: CHANNEL_UNITS, DownlinkConfig: DOWNLINK_UNITS}
    return keys + list(aliases.get(model, {}))


def nearest_key(path: Sequence[str], root: type[BaseModel], keyed: Keyed | None = None) -> str | None:
    """The valid key of the model ``root`` (with the ``keyed`` tables) closest to the last part of ``path``
    (difflib's ratio at least 0.6), or None."""
    *parent, key = path
    return nearest_name(key, valid_keys(parent, root, keyed))


def nearest_name(name: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` closest to ``name`` (difflib's ratio at least 0.6; ``distnce_m`` -> ``distance_m``),
    or None."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return close[0] if close else None
