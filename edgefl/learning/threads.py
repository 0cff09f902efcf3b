"""Torch's intra-op thread count, set for one block and restored after it.

The simulator's models are small: one run trains fastest on one thread, and several runs side by side
(processes of a sweep or a design loop) only contend when each spreads over every core. A fixed count per
run also keeps results the same wherever the run executes. torch is imported only when the block starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, then restore the previous setting."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
