"""Per-device local data sizes a device table sets (its ``n_samples`` or ``data_share`` cells), as plain arrays
the learning workloads apply to their drawn partition or drawn sizes. The run's build step makes them from the table
(:func:`edgefl.run.runner.draw_devices`); the workloads never read the table themselves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgefl.errors import ScenarioError

__all__ = ["DataSizes"]


@dataclass(frozen=True)
class DataSizes:
    """A table's data sizes: ``n_samples`` [samples] and ``share`` [fraction of the training set], each shape
    (n,) with NaN where a row gives nothing (None: no such column); ``where`` names the table in messages."""

    where: str
    n_samples: np.ndarray | None = None
    share: np.ndarray | None = None

    def sizes(self, drawn: np.ndarray, n_train: int) -> np.ndarray:
        """Local data sizes, shape (n,): the table's ``n_samples`` or ``share`` x ``n_train`` (at least 1 sample)
        where given, else ``drawn``."""
        sizes = np.asarray(drawn, dtype=np.int64).copy()
        if self.n_samples is not None:
            rows = ~np.isnan(self.n_samples)
            sizes[rows] = self.n_samples[rows].astype(np.int64)
        if self.share is not None:
            rows = ~np.isnan(self.share)
            sizes[rows] = np.maximum(1, np.floor(self.share[rows] * n_train)).astype(np.int64)
        return sizes

    def resize(self, parts: list[np.ndarray], n_train: int) -> list[np.ndarray]:
        """The drawn partition if the table sets no data sizes or the sizes it sets are the drawn ones; else the
        same samples (drawn partition first, in order, then the samples no device drew) split into the table's
        sizes."""
        drawn = np.array([p.size for p in parts], dtype=np.int64)
        sizes = self.sizes(drawn, n_train)
        if np.array_equal(sizes, drawn):
            return parts
        if int(sizes.sum()) > n_train:
            raise ScenarioError(f"device table {self.where}: the devices hold {int(sizes.sum())} samples in all, "
                                f"more than the {n_train} training samples of the dataset")  # fmt: skip
        used = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        rest = np.setdiff1d(np.arange(n_train), used)
        pool = np.concatenate([used, rest])
        bounds = np.cumsum(sizes)[:-1]
        return [np.sort(p) for p in np.split(pool[: int(sizes.sum())], bounds)]
