"""Nested width-sliced submodels and their aggregation (HeteroFL, Diao et al. ICLR 2021, Sec. 3.1, eqs. (1)-(3)).

A rate-``r`` submodel keeps the first ``ceil(r * units)`` channels/units of every hidden layer (the registry
builds it with ``width=r``). Every registered model keeps the same parameter names at every width and each narrow
tensor is the *leading slice* of the full one (``W_g[:d_m, :k_m]`` in HeteroFL's notation), including the
flatten boundary between conv and fc layers (flatten is channel-major, so the first ``ceil(r*C)*H*W`` inputs of the
first fc layer belong to the first ``ceil(r*C)`` channels). So a submodel is described completely by the shapes of
its tensors, and everything here is a plain function over ``dict[str, torch.Tensor]`` states:

- :func:`submodel_shapes` — the tensor shapes of one submodel (cached, built on the meta device);
- :func:`slice_state` — the submodel's tensors cut from the global state; :class:`Downloads` — one such cut per
  width of a round's global state, shared by every job of that width;
- :func:`scatter_update` / :func:`coverage_mask` — a submodel's tensors written back into a full-size state,
  and which elements of the full state a submodel holds;
- :func:`aggregate_nested` — the per-element average over the covering clients, eqs. (1)-(3).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import torch

from edgefl.errors import EdgeflError

__all__ = [
    "SlicingError", "State", "Shapes", "Downloads", "submodel_shapes", "slice_state", "scatter_update",
    "coverage_mask", "aggregate_nested",
]  # fmt: skip

#: A model state: parameter (and buffer) name -> tensor, as ``module.state_dict()``.
State = Mapping[str, torch.Tensor]
#: A submodel's tensor shapes by name (same names as the global state).
Shapes = Mapping[str, torch.Size]


class SlicingError(EdgeflError, ValueError):
    """A submodel does not fit the global state (missing name, larger shape) or aggregation inputs disagree."""


@functools.lru_cache(maxsize=256)
def _shapes_cached(
    name: str, input_shape: tuple[int, ...] | None, n_classes: int | None, width: float, hidden: tuple[int, ...] | None
) -> Mapping[str, torch.Size]:
    from types import MappingProxyType

    from edgefl.learning.models import build_model

    with torch.device("meta"):  # shapes only: no memory, no draw from any RNG
        model = build_model(name, input_shape=input_shape, n_classes=n_classes, hidden=hidden, width=width)
    return MappingProxyType({key: tensor.shape for key, tensor in model.state_dict().items()})


def submodel_shapes(
    name: str,
    *,
    input_shape: Sequence[int] | None = None,
    n_classes: int | None = None,
    width: float,
    hidden: Sequence[int] | None = None,
) -> Shapes:
    """Shapes of every tensor of registered model ``name`` at width rate ``width`` in (0, 1] (read-only, cached).

    ``width=1`` gives the global model's shapes. Arguments as :func:`edgefl.learning.models.build_model`.
    """
    return _shapes_cached(
        name,
        None if input_shape is None else tuple(input_shape),
        n_classes,
        float(width),
        None if hidden is None else tuple(hidden),
    )


def _region(key: str, full: torch.Size, shape: torch.Size) -> tuple[slice, ...]:
    """The leading-slice index of ``shape`` inside a tensor of shape ``full``."""
    if len(shape) != len(full) or any(s > f for s, f in zip(shape, full)):
        raise SlicingError(f"submodel tensor {key!r} of shape {tuple(shape)} does not fit global shape {tuple(full)}")
    return tuple(slice(0, s) for s in shape)


def _check_names(global_state: State, shapes: Shapes) -> None:
    missing = [k for k in shapes if k not in global_state]
    if missing:
        raise SlicingError(f"submodel tensors {missing[:3]!r} are not in the global state")


def slice_state(global_state: State, shapes: Shapes) -> dict[str, torch.Tensor]:
    """The submodel's tensors: ``W_g[:d_m, :k_m, ...]`` for every name in ``shapes`` (HeteroFL Algorithm 1).

    Returns detached contiguous copies (changing them does not change ``global_state``).
    """
    _check_names(global_state, shapes)
    return {
        key: global_state[key].detach()[_region(key, global_state[key].shape, shape)].clone()
        for key, shape in shapes.items()
    }


class Downloads:
    """The submodels a round's jobs download, cut once per width: :meth:`of` gives every job of one width the same
    :func:`slice_state` of one global state, as the full model is shared by every job that downloads it whole.
    Nothing writes a job's start (training loads it into a module of its own), so sharing it changes no number;
    it saves a copy per job in the run's process and, under a process pool, a shared-memory segment per job's
    tensor (jobs of one width in one part then cross as one). A new global state (by identity) starts afresh."""

    def __init__(self) -> None:
        self._source: State | None = None
        self._cut: dict[float, dict[str, torch.Tensor]] = {}

    def of(self, global_state: State, width: float, shapes: Shapes) -> dict[str, torch.Tensor]:
        """:func:`slice_state` of ``global_state`` to ``shapes`` (the submodel of ``width``), cut on the first call
        for this state and width. Holds the last state given until the next one replaces it."""
        if self._source is not global_state:
            self._source, self._cut = global_state, {}
        key = float(width)
        if key not in self._cut:
            self._cut[key] = slice_state(global_state, shapes)
        return self._cut[key]


def scatter_update(
    global_like: State, sub_update: State, shapes: Shapes | None = None
) -> dict[str, torch.Tensor]:
    """A copy of ``global_like`` with each submodel tensor of ``sub_update`` written into its leading slice.

    ``global_like`` is the full-size template: the global state (gives the global model with the client's values
    where the client has them) or zeros (gives a zero-padded update). ``shapes``, when given, must equal the
    shapes of ``sub_update`` (a check that the update is the submodel it claims to be). Names absent from
    ``sub_update`` keep ``global_like``'s tensor.
    """
    if shapes is not None:
        wrong = [k for k in shapes if k not in sub_update or sub_update[k].shape != shapes[k]]
        if wrong or set(sub_update) - set(shapes):
            bad = wrong or sorted(set(sub_update) - set(shapes))
            raise SlicingError(f"sub_update tensors {bad[:3]!r} do not match the submodel shapes")
    _check_names(global_like, sub_update)
    out = {key: tensor.detach().clone() for key, tensor in global_like.items()}
    for key, tensor in sub_update.items():
        out[key][_region(key, out[key].shape, tensor.shape)] = tensor.detach().to(out[key].dtype)
    return out


def coverage_mask(global_state: State, shapes: Shapes) -> dict[str, torch.Tensor]:
    """Boolean tensors shaped like ``global_state``: True at the elements the submodel ``shapes`` holds."""
    _check_names(global_state, shapes)
    masks = {}
    for key, tensor in global_state.items():
        mask = torch.zeros(tensor.shape, dtype=torch.bool)
        if key in shapes:
            mask[_region(key, tensor.shape, shapes[key])] = True
        masks[key] = mask
    return masks


def aggregate_nested(
    global_state: State,
    updates: Sequence[State],
    shapes: Sequence[Shapes],
    *,
    weights: Sequence[float] | None = None,
    row_masks: Sequence[torch.Tensor | None] | None = None,
    head: Sequence[str] = (),
) -> dict[str, torch.Tensor]:
    """New global state: every element averaged over exactly the clients whose submodel holds it, HeteroFL eqs.
    (1)-(3).

    ``updates[i]`` is client i's trained submodel *parameters* (its state after local training, shapes
    ``shapes[i]``), as HeteroFL averages local models. Per element e of a float tensor::

        W_g[e] = sum_{i covers e} w_i * W_i[e] / sum_{i covers e} w_i

    with ``w_i = 1`` when ``weights`` is None (HeteroFL's count average: eq. (1) divides level p's part by the
    ``m - m_{p+1:P}`` clients holding it). Since every covering client started from ``W_g[e]``, this equals
    ``W_g[e] + average of the covering clients' updates (W_i - W_g)[e]``. An element no client covers (or whose
    covering weights sum to 0) keeps its global value; non-float tensors (e.g. counters) keep the global value.

    ``row_masks[i]`` (optional; bool, shape ``(n_classes,)``, True = class present at client i) implements
    HeteroFL's masked cross-entropy rule: for the output layer tensors named in ``head`` (weight rows and bias
    entries, indexed by class along dim 0) client i contributes only the rows of its present classes. ``None``
    for a client means all rows.
    """
    n = len(updates)
    if len(shapes) != n:
        raise SlicingError(f"shapes has {len(shapes)} entries for {n} updates: give one per update")
    if weights is not None:
        if len(weights) != n:
            raise SlicingError(f"weights has {len(weights)} entries for {n} updates: give one per update")
        if any(not float(w) >= 0.0 for w in weights):  # also rejects NaN
            raise SlicingError(f"weights={list(weights)!r}: must be >= 0")
    if row_masks is not None:
        if len(row_masks) != n:
            raise SlicingError(f"row_masks has {len(row_masks)} entries for {n} updates: give one per update")
        if not head and any(m is not None for m in row_masks):
            raise SlicingError("row_masks given without head: name the output layer's (weight, bias)")
        missing = [h for h in head if h not in global_state]
        if missing:
            raise SlicingError(f"head {missing!r}: not in the global state")
    for i, (update, shape) in enumerate(zip(updates, shapes)):
        wrong = [k for k in shape if k not in update or update[k].shape != shape[k]]
        if wrong:
            raise SlicingError(f"updates[{i}] tensors {wrong[:3]!r} do not match shapes[{i}]")
        _check_names(global_state, shape)

    out: dict[str, torch.Tensor] = {}
    for key, g in global_state.items():
        g = g.detach()
        if not torch.is_floating_point(g):
            out[key] = g.clone()
            continue
        total = torch.zeros(g.shape, dtype=torch.float64)
        count = torch.zeros(g.shape, dtype=torch.float64)
        for i, (update, shape) in enumerate(zip(updates, shapes)):
            if key not in shape:
                continue
            region = _region(key, g.shape, shape[key])
            w = 1.0 if weights is None else float(weights[i])
            value = update[key].detach().to(torch.float64)
            mask = None if row_masks is None or key not in head else row_masks[i]
            if mask is None:
                total[region] += w * value
                count[region] += w
                continue
            rows = torch.as_tensor(mask, dtype=torch.bool).reshape(-1)
            if rows.numel() != g.shape[0]:
                raise SlicingError(f"row_masks[{i}] has {rows.numel()} entries; {key!r} has {g.shape[0]} rows")
            keep = w * rows[: shape[key][0]].to(torch.float64).reshape(-1, *([1] * (len(shape[key]) - 1)))
            total[region] += keep * value
            count[region] += keep.expand(tuple(shape[key]))
        covered = count > 0
        new = g.clone()
        new[covered] = (total[covered] / count[covered]).to(g.dtype)
        out[key] = new
    return out
