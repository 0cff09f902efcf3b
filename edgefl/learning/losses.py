"""HeteroFL's masked cross-entropy (Diao et al., ICLR 2021, Sec. 4 "Masked Cross-Entropy Loss").

A client trains only the sub-task of the classes it holds: the logits of the classes absent from its labels are
replaced by 0 before the cross-entropy (HeteroFL's code: ``output.masked_fill(label_mask == 0, 0)``), so those
logits get no gradient; :func:`edgefl.learning.slicing.aggregate_nested` (``row_masks``) then leaves their output
rows out of that client's contribution.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from edgefl.learning.models._checks import ModelError, check_n_classes

__all__ = ["label_mask", "masked_cross_entropy"]


def label_mask(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Bool tensor of shape ``(n_classes,)``: True for every class that occurs in ``labels`` (integer class ids)."""
    classes = check_n_classes(n_classes)
    ids = torch.as_tensor(labels).reshape(-1).long()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= classes):
        raise ModelError(f"labels in [{int(ids.min())}, {int(ids.max())}]: must lie in [0, {classes - 1}]")
    mask = torch.zeros(classes, dtype=torch.bool)
    mask[ids] = True
    return mask


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, class_mask: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy over ``logits`` (shape ``(n, n_classes)``) whose absent-class entries are set to 0.

    ``class_mask``: bool, shape ``(n_classes,)``, True = class present at the client (see :func:`label_mask`).
    The loss is ``F.cross_entropy(logits.masked_fill(~class_mask, 0), targets)``; the zeroed logits still enter
    the softmax's normaliser as ``exp(0)``, exactly as in HeteroFL's code, but their gradient is 0.
    """
    mask = torch.as_tensor(class_mask, dtype=torch.bool, device=logits.device).reshape(-1)
    if logits.dim() != 2 or mask.numel() != logits.shape[1]:
        raise ModelError(
            f"class_mask of {mask.numel()} classes for logits of shape {tuple(logits.shape)}: need (n, {mask.numel()})"
        )
    return F.cross_entropy(logits.masked_fill(~mask, 0.0), targets, reduction=reduction)
