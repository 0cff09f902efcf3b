"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import typer


@pytest.fixture()
def command_app() -> Callable[[Callable[[typer.Typer, typer.Typer], None]], typer.Typer]:
    """Build a fresh ``edgefl``-like Typer app with ``optimize`` and ``estimate`` groups from a command
    module's ``register(optimize_app, estimate_app)``, so a command module is tested on its own."""

    def build(register: Callable[[typer.Typer, typer.Typer], None]) -> typer.Typer:
        root = typer.Typer()
        optimize_app = typer.Typer()
        estimate_app = typer.Typer()
        root.add_typer(optimize_app, name="optimize")
        root.add_typer(estimate_app, name="estimate")
        register(optimize_app, estimate_app)
        for group in (optimize_app, estimate_app):
            if not group.registered_commands:  # Typer cannot build an empty group

                @group.command("placeholder")
                def _placeholder() -> None:
                    pass

        return root

    return build
