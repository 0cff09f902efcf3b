"""Nested width slicing and HeteroFL aggregation (edgefl/learning/slicing.py): slice/scatter touch exactly the
submodel, a sliced submodel computes what the full model computes with the rest zeroed (flatten boundary
included), and aggregate_nested equals hand-computed per-element averages (HeteroFL eqs. (1)-(3))."""

from __future__ import annotations

import pytest
import torch

from edgefl.learning.models import MODEL_NAMES, MODELS, build_model, init_parameters
from edgefl.learning.models.registry import output_layer
from edgefl.learning.slicing import (
    Downloads,
    SlicingError,
    aggregate_nested,
    coverage_mask,
    scatter_update,
    slice_state,
    submodel_shapes,
)


SMALL = {"preresnet18": (8, 16, 32, 64), "heterofl_conv": (16, 32, 64, 128)}  # same layout, fewer channels: fast
INPUT = {"vgg9": (3, 16, 16)}  # 2x2 after the three pools: the flatten boundary still spans several positions


def _global(name: str, seed: int = 0, hidden: tuple[int, ...] | None = None) -> dict[str, torch.Tensor]:
    model = build_model(name, hidden=hidden, input_shape=INPUT.get(name))
    return init_parameters(model, torch.Generator().manual_seed(seed)).state_dict()


# --------------------------------------------------------------------------------------------- shapes
def test_submodel_shapes_are_the_built_models_and_cached():
    shapes = submodel_shapes("preresnet18", width=1 / 16)
    built = build_model("preresnet18", width=1 / 16).state_dict()
    assert dict(shapes) == {k: v.shape for k, v in built.items()}
    assert shapes["conv1.weight"] == (4, 3, 3, 3) and shapes["linear.weight"] == (10, 32)
    assert submodel_shapes("preresnet18", width=1 / 16) is shapes  # cached
    mcmahan = submodel_shapes("cnn_mcmahan", width=0.3)
    assert mcmahan["classifier.0.weight"] == (154, 20 * 7 * 7)  # the flatten boundary scales with the channels


# ------------------------------------------------------------------------------------- slice / scatter
@pytest.mark.parametrize("name", ["cnn_mcmahan", "vgg9", "mlp", "heterofl_conv", "preresnet18"])
def test_slice_then_scatter_touches_exactly_the_submodel(name):
    state = _global(name, hidden=SMALL.get(name))
    shapes = submodel_shapes(name, width=0.3, hidden=SMALL.get(name), input_shape=INPUT.get(name))
    sub = slice_state(state, shapes)
    assert {k: v.shape for k, v in sub.items()} == dict(shapes)
    assert all(torch.equal(sub[k], state[k][tuple(slice(0, s) for s in v.shape)]) for k, v in sub.items())
    changed = scatter_update(state, {k: v + 1.0 for k, v in sub.items()}, shapes)
    masks = coverage_mask(state, shapes)
    for key in state:
        diff = changed[key] != state[key]
        assert torch.equal(diff, masks[key]), key  # changed exactly where the submodel lives
    assert all(torch.equal(v, state[k]) for k, v in scatter_update(state, sub, shapes).items())  # identity round trip
    sub[next(iter(sub))] += 5.0
    assert all(torch.equal(v, _global(name, hidden=SMALL.get(name))[k]) for k, v in state.items())  # copies


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_a_sliced_submodel_computes_the_full_model_with_the_rest_zeroed(name):
    # The leading channels of every layer (and the first ceil(r*C)*H*W flatten inputs) form the submodel: zero
    # every element outside it and the full model (eval: Scalers off, BN on batch statistics) gives the same logits.
    width, hidden = 0.3, SMALL.get(name)
    state = _global(name, seed=1, hidden=hidden)
    shape = INPUT.get(name, MODELS[name].input_shape)
    shapes = submodel_shapes(name, width=width, hidden=hidden, input_shape=shape)
    sub = build_model(name, width=width, hidden=hidden, input_shape=shape)
    sub.load_state_dict(slice_state(state, shapes))
    masks = coverage_mask(state, shapes)
    full = build_model(name, hidden=hidden, input_shape=shape)
    full.load_state_dict({k: v * masks[k] for k, v in state.items()})
    x = torch.rand(5, *shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert torch.allclose(sub.eval()(x), full.eval()(x), atol=1e-5, rtol=1e-4), name


def test_downloads_cut_each_width_once_per_global_state():
    state = _global("cnn_mcmahan")
    half, quarter = (submodel_shapes("cnn_mcmahan", width=w) for w in (0.5, 0.25))
    cut = Downloads()
    a = cut.of(state, 0.5, half)
    assert cut.of(state, 0.5, half) is a  # one copy for every job of the width
    assert all(torch.equal(a[k], v) for k, v in slice_state(state, half).items())
    b = cut.of(state, 0.25, quarter)
    assert b is not a and {k: v.shape for k, v in b.items()} == dict(quarter)
    nxt = {k: v + 1.0 for k, v in state.items()}  # the next round's state: cut afresh from it
    c = cut.of(nxt, 0.5, half)
    assert c is not a and all(torch.equal(c[k], v) for k, v in slice_state(nxt, half).items())
    assert all(torch.equal(a[k], v) for k, v in slice_state(state, half).items())  # the old cut is left as it was


def test_slicing_errors():
    state = _global("mlp")
    with pytest.raises(SlicingError, match=r"submodel tensors \['nope'\] are not in the global state"):
        slice_state(state, {"nope": torch.Size([1])})
    with pytest.raises(SlicingError, match=r"'net.0.weight' of shape \(65, 64\) does not fit global shape \(64, 64\)"):
        slice_state(state, {"net.0.weight": torch.Size([65, 64])})
    with pytest.raises(SlicingError, match=r"sub_update tensors \['net.0.bias'\] do not match"):
        scatter_update(state, {"net.0.bias": torch.zeros(3)}, {"net.0.bias": torch.Size([4])})


# ---------------------------------------------------------------------------------------- aggregation
LEVEL_SHAPES = [  # three levels of a toy 4x4 weight and 4-bias layer: full, half, quarter
    {"w": torch.Size([4, 4]), "b": torch.Size([4])},
    {"w": torch.Size([2, 2]), "b": torch.Size([2])},
    {"w": torch.Size([1, 1]), "b": torch.Size([1])},
]


def _const(shapes: dict, value: float) -> dict[str, torch.Tensor]:
    return {k: torch.full(tuple(s), value) for k, s in shapes.items()}


def test_aggregation_of_three_levels_equals_the_hand_computed_averages():
    glob = {"w": torch.full((4, 4), 10.0), "b": torch.full((4,), 10.0)}
    # clients: level a with 1, level b with 2, level c with 3 and another level c with 6
    updates = [_const(LEVEL_SHAPES[0], 1.0), _const(LEVEL_SHAPES[1], 2.0), _const(LEVEL_SHAPES[2], 3.0),
               _const(LEVEL_SHAPES[2], 6.0)]  # fmt: skip
    shapes = [LEVEL_SHAPES[0], LEVEL_SHAPES[1], LEVEL_SHAPES[2], LEVEL_SHAPES[2]]
    new = aggregate_nested(glob, updates, shapes)
    # eq. (1): [0,0] is in every submodel: (1+2+3+6)/4 = 3; the rest of the 2x2 block: (1+2)/2 = 1.5;
    # eq. (2): the rest of the 4x4 only in level a: 1
    w = torch.full((4, 4), 1.0)
    w[:2, :2] = 1.5
    w[0, 0] = 3.0
    assert torch.equal(new["w"], w)
    assert torch.equal(new["b"], torch.tensor([3.0, 1.5, 1.0, 1.0]))
    # without the level-a client, the elements no update covers keep their global value (10)
    new = aggregate_nested(glob, updates[1:], shapes[1:])
    w = torch.full((4, 4), 10.0)
    w[:2, :2] = 2.0
    w[0, 0] = (2 + 3 + 6) / 3
    assert torch.allclose(new["w"], w) and torch.allclose(new["b"], torch.tensor([11 / 3, 2.0, 10.0, 10.0]))
    assert torch.equal(aggregate_nested(glob, [], [])["w"], glob["w"])  # nothing arrived: unchanged
    # weights: element value = sum w_i x_i / sum w_i over the covering clients
    new = aggregate_nested(glob, updates[:3], shapes[:3], weights=[1.0, 3.0, 0.0])
    assert new["w"][0, 0] == pytest.approx((1 + 6) / 4) and new["w"][1, 1] == pytest.approx((1 + 6) / 4)
    assert new["w"][3, 3] == 1.0


def test_averaging_parameters_equals_global_plus_average_update_on_a_real_model():
    name, hidden = "heterofl_conv", SMALL["heterofl_conv"]
    glob = _global(name, hidden=hidden)
    g = torch.Generator().manual_seed(3)
    widths = [1.0, 0.5, 0.25, 0.25]
    shapes = [submodel_shapes(name, width=w, hidden=hidden) for w in widths]
    deltas = [{k: torch.randn(s, generator=g) for k, s in sh.items()} for sh in shapes]
    params = [{k: slice_state(glob, sh)[k] + d[k] for k in sh} for sh, d in zip(shapes, deltas)]
    new = aggregate_nested(glob, params, shapes)
    # reference: zero-padded deltas and coverage counts, element by element
    zeros = {k: torch.zeros_like(v) for k, v in glob.items()}
    total = {k: torch.zeros_like(v) for k, v in glob.items()}
    count = {k: torch.zeros_like(v) for k, v in glob.items()}
    for sh, d in zip(shapes, deltas):
        padded, cover = scatter_update(zeros, d, sh), coverage_mask(glob, sh)  # zero-padded delta
        for k in glob:
            total[k] += padded[k]
            count[k] += cover[k]
    for k in glob:
        expected = glob[k] + total[k] / count[k].clamp_min(1)
        assert torch.allclose(new[k], expected, atol=1e-5), k


def test_row_masks_leave_absent_classes_rows_out_of_a_clients_contribution():
    name = "heterofl_conv"
    head = output_layer(name)
    assert head == ("classifier.weight", "classifier.bias")
    hidden = SMALL[name]  # 16, 32, 64, 128 channels: the head is 10 x 128, a half model's 10 x 64
    glob = _global(name, hidden=hidden)
    shapes = [submodel_shapes(name, width=w, hidden=hidden) for w in (1.0, 0.5)]
    updates = [_const(shapes[0], 1.0), _const(shapes[1], 3.0)]
    present = [torch.zeros(10, dtype=torch.bool), torch.zeros(10, dtype=torch.bool)]
    present[0][[0, 1]] = True  # client 0 holds classes 0, 1
    present[1][[1, 2]] = True  # client 1 holds classes 1, 2
    new = aggregate_nested(glob, updates, shapes, row_masks=present, head=head)
    w, b = new["classifier.weight"], new["classifier.bias"]
    assert torch.all(w[0] == 1.0) and b[0] == 1.0  # class 0: client 0 only
    assert torch.all(w[1, :64] == 2.0) and torch.all(w[1, 64:] == 1.0) and b[1] == 2.0  # both (b has 64 cols)
    assert torch.all(w[2, :64] == 3.0) and torch.equal(w[2, 64:], glob["classifier.weight"][2, 64:])
    assert b[2] == 3.0
    assert torch.equal(w[3:], glob["classifier.weight"][3:]) and torch.equal(b[3:], glob["classifier.bias"][3:])
    # every other tensor is averaged as usual: the first conv's leading 8 channels from both clients
    assert torch.all(new["features.0.weight"][:8] == 2.0) and torch.all(new["features.0.weight"][8:] == 1.0)
    # None = all rows for that client
    new = aggregate_nested(glob, updates, shapes, row_masks=[None, present[1]], head=head)
    assert torch.all(new["classifier.weight"][5] == 1.0)
    assert output_layer("mlp", hidden=(8, 8)) == ("net.4.weight", "net.4.bias")
    assert all(output_layer(n) == MODELS[n].head for n in MODEL_NAMES)


def test_aggregation_errors():
    glob = {"w": torch.zeros(4, 4), "b": torch.zeros(4)}
    one = [_const(LEVEL_SHAPES[1], 1.0)]
    with pytest.raises(SlicingError, match="shapes has 2 entries for 1 updates"):
        aggregate_nested(glob, one, LEVEL_SHAPES[:2])
    with pytest.raises(SlicingError, match=r"weights=\[-1.0\]: must be >= 0"):
        aggregate_nested(glob, one, LEVEL_SHAPES[1:2], weights=[-1.0])
    with pytest.raises(SlicingError, match="row_masks given without head"):
        aggregate_nested(glob, one, LEVEL_SHAPES[1:2], row_masks=[torch.ones(4, dtype=torch.bool)])
    with pytest.raises(SlicingError, match=r"updates\[0\] tensors \['w', 'b'\] do not match shapes\[0\]"):
        aggregate_nested(glob, one, LEVEL_SHAPES[0:1])
    with pytest.raises(SlicingError, match=r"row_masks\[0\] has 3 entries; 'w' has 4 rows"):
        aggregate_nested(glob, one, LEVEL_SHAPES[1:2], row_masks=[torch.ones(3, dtype=torch.bool)], head=("w", "b"))
