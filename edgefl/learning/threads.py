"""Thread counts, set for one block and restored after it: torch's intra-op threads (:func:`torch_threads`) and,
for a whole run (:func:`run_threads`), the thread pools of the BLAS and OpenMP libraries numpy, scipy and
scikit-learn loaded as well.

The simulator's models are small: one run trains fastest on one thread, and several runs side by side
(processes of a sweep or a design loop) only contend when each spreads over every core. On a machine busy with
other work, threads that wait for a core they do not get (torch's, or OpenBLAS's spinning ones) make a run many
times slower than on one thread. A fixed count per run also keeps results the same wherever the run executes.
torch is imported only when the block starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["torch_threads", "run_threads"]


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


_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables a BLAS or OpenMP library reads when it loads."""


@contextmanager
def run_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch threads and at most ``n`` threads in every BLAS and OpenMP pool, as
    ``OMP_NUM_THREADS=n`` would but set from inside the process, then restore them all: what ``edgefl run
    --threads`` uses. Pools already loaded (numpy's OpenBLAS) are limited with threadpoolctl, which scikit-learn
    installs; libraries loaded inside the block (scipy's, scikit-learn's) read the environment variables
    :data:`_POOL_VARIABLES`, set to ``n`` for the block."""
    from threadpoolctl import threadpool_limits

    saved = {name: os.environ.get(name) for name in _POOL_VARIABLES}
    os.environ.update({name: str(n) for name in _POOL_VARIABLES})
    try:
        with torch_threads(n), threadpool_limits(limits=n):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
