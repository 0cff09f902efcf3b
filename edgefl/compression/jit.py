"""Compiled kernels for the codecs' per-element loops (numba, compiled on first use and cached on disk).

The codecs' budget searches, bit writers and readers make many passes over an update of millions of elements;
in numpy each pass is a temporary array, and a search or a bit stream is tens of them. A kernel here does such
work in one loop. Every kernel computes what the numpy code it replaces computes, with the same float operations
in the same order (IEEE double, no fast-math), so payloads stay bit-identical; its tests compare the two.

``kernel`` is numba's ``njit`` with the cache on (the compiled code is written beside the source, or under
``NUMBA_CACHE_DIR``), so a process pays the compilation once per machine, not once per run.
"""

from __future__ import annotations

import numba

__all__ = ["kernel"]


def kernel(function):
    """``function`` compiled in nopython mode, cached, without fast-math (bit-identical float results)."""
    return numba.njit(cache=True, nogil=True, fastmath=False)(function)
