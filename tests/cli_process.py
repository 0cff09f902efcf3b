"""The command line as a user runs it: ``python -m edgefl`` in a real subprocess of this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys


def edgefl(*args: str, cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m edgefl ARGS`` in ``cwd`` (default: the current folder) and return it finished, with its
    stdout and stderr as text; a run longer than 300 s raises ``subprocess.TimeoutExpired``."""
    return subprocess.run([sys.executable, "-m", "edgefl", *args], capture_output=True, text=True, cwd=cwd, timeout=300)
