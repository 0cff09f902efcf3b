"""CLI command ``edgefl models``: the model registry with parameter counts, update sizes and training FLOPs.

    edgefl models [--width 1.0] [--json]

Each registered architecture at its paper's default input shape and classes, shrunk to ``--width`` (hidden
layers keep ``ceil(width * units)``). ``--json`` prints a JSON list with one object per model (``name,
description, input_shape, n_classes, width, parameters, update_megabits, train_flops_per_sample,
level_parameters`` (parameters at HeteroFL's levels a..e = widths 1, 1/2, 1/4, 1/8, 1/16); megabits
= 32 bits per parameter / 1e6); otherwise an aligned table. A bad ``--width`` prints one ``error: ...`` line
on stderr and exits with code 2.
"""

from __future__ import annotations

import json
import math
from typing import Annotated

import typer

from edgefl.cli._common import fail

__all__ = ["register", "records"]

_COLUMNS = ("name", "input", "classes", "parameters", "update [Mb]", "train FLOPs/sample", "description")


def records(width: float = 1.0) -> list[dict]:
    """One JSON-ready dict per registered model at width multiplier ``width``."""
    import math as _math

    from edgefl.learning.models import list_models, model_info
    from edgefl.learning.slicing import submodel_shapes
    from edgefl.methods.heterofl import LEVEL_WIDTHS

    out = []
    for entry in list_models():
        info = model_info(entry.name, width=width)
        levels = {  # HeteroFL's complexity levels a..e: parameters of the width-r submodel (meta device, cheap)
            level: sum(_math.prod(s) for s in submodel_shapes(entry.name, width=r).values())
            for level, r in LEVEL_WIDTHS.items()
        }
        out.append(
            {
                "name": info["name"],
                "description": info["description"],
                "input_shape": info["input_shape"],
                "n_classes": info["n_classes"],
                "width": info["width"],
                "parameters": info["parameters"],
                "update_megabits": info["update_bits"] / 1e6,
                "train_flops_per_sample": info["train_flops_per_sample"],
                "level_parameters": levels,
            }
        )
    return out


def _table(rows: list[dict]) -> str:
    cells = [
        (
            r["name"],
            "x".join(map(str, r["input_shape"])),
            str(r["n_classes"]),
            f"{r['parameters']:,}",
            f"{r['update_megabits']:.2f}",
            f"{r['train_flops_per_sample']:.4g}",
            r["description"],
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [_COLUMNS, *cells]) for i in range(len(_COLUMNS))]
    left = {0, 1, len(_COLUMNS) - 1}  # text columns left-aligned, numbers right-aligned

    def line(row: tuple[str, ...]) -> str:
        parts = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(parts).rstrip()

    return "\n".join([line(_COLUMNS), *(line(c) for c in cells)])


def register(app: typer.Typer) -> None:
    """Add the top-level command ``models`` to ``app``."""

    @app.command("models")
    def models(
        width: Annotated[
            float, typer.Option("--width", help="Width multiplier in (0, 1]: hidden layers keep ceil(width * units).")
        ] = 1.0,
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list, one object per model.")] = False,
    ) -> None:
        """List the model zoo: parameters, 32-bit update size and measured training FLOPs per sample."""
        from edgefl.learning.models import ModelError

        if not (math.isfinite(width) and 0.0 < width <= 1.0):
            raise fail(f"--width={width!r}: must be in (0, 1]")
        try:
            rows = records(width)
        except ModelError as exc:
            raise fail(str(exc)) from None
        if as_json:
            typer.echo(json.dumps(rows))
        else:
            typer.echo(f"models at width {width:g} (update = 32 bits per parameter; FLOPs = forward + backward)")
            typer.echo(_table(rows))
