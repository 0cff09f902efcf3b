"""The base of every scenario section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    """Unknown keys rejected, frozen, defaults validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
