"""Shared fixtures, and one thread per test process.

``make test`` runs two test processes on a machine that may have only two cores. Left to their defaults, torch
and the BLAS libraries in each would spread over every core, so four or more threads would take turns on two
and small runs would wait on each other's barriers, many times slower than alone (docs/performance.md, "The test
suite"). The thread pools are therefore limited to one before any of them loads (subprocesses the tests start
inherit the variables); a test that wants more sets its own count (``train.threads``, ``torch_threads``)."""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from collections.abc import Callable  # noqa: E402

import pytest  # noqa: E402
import typer  # noqa: E402


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
