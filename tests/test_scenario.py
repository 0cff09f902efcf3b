"""Scenario loading: presets, overrides, unit conversion at load, and one-line errors for bad input."""

from __future__ import annotations

import math
import tomllib

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgefl.scenario.catalogue import catalogue
from edgefl.errors import ScenarioError
from edgefl.scenario.loading import Scenario, scenario_to_toml
from edgefl.run.load import load_scenario, scenario_from_dict
from scenarios import list_presets


def test_quickstart_preset_loads_with_si_units():
    sc = load_scenario("quickstart")
    assert sc.fleet.n_devices == 20 and sc.method.name == "fedavg"
    # 20 dBm -> 0.1 W; 1 MHz -> 1e6 Hz; -114 dBm/MHz -> 10^(-14.4) W per 1e6 Hz
    assert sc.fleet.tx_power_w == pytest.approx(0.1, rel=1e-12)
    assert sc.channel.bandwidth_hz == pytest.approx(1e6, rel=1e-12)
    assert sc.channel.noise_psd_w_per_hz == pytest.approx(10 ** (-14.4) / 1e6, rel=1e-12)
    # catalogue phones: the preset sets no CPU key, so every device's CPU comes from its profile
    assert set(sc.fleet.profiles) <= set(catalogue()) and sc.fleet.profiles
    assert not {"f_min_hz", "f_max_hz", "energy_coeff", "flops_per_cycle"} & sc.fleet.model_fields_set


def test_every_preset_is_valid():
    for name in list_presets():
        assert isinstance(load_scenario(name), Scenario)


def test_overrides_dotted_keys_and_seed():
    sc = load_scenario("quickstart", ["rounds=5", "channel.bandwidth_hz=2e6", "method.fedavg.cpu_policy=min_energy"], seed=7)
    assert (sc.rounds, sc.channel.bandwidth_hz, sc.method.settings_of().cpu_policy, sc.seed) == (5, 2e6, "min_energy", 7)


def test_resolved_toml_round_trips():
    sc = load_scenario("quickstart")
    again = scenario_from_dict(tomllib.loads(scenario_to_toml(sc)))
    assert again == sc


@pytest.mark.parametrize(
    "override, field, fragment",
    [
        ("channel.bandwidth_hz=0", "channel.bandwidth_hz", "outside [1000, 2.16e+09] Hz"),
        ("channel.cell_radius_m=5", "cell_radius_m", "min_distance_m"),
        ("method.clients_per_round=21", "clients_per_round", "n_devices"),
        ("fleet.budget.kind='uniform'", None, None),  # valid
        ("fleet.budget.low_j=-1", "fleet.budget.low_j", "outside (0, 3.6e+08] J"),
        ("rounds='ten'", "rounds", "integer"),
        ("colour=3", "colour", "unknown key"),
        ("round.policy='deadline'", "deadline_s", "deadline_s > 0"),
        ("train.lr=-0.1", "train.lr", "greater than 0"),
        ("fleet.f_max_hz=[2e9, 1e9]", "f_max_hz", "low > high"),
    ],
)
def test_bad_values_name_field_value_and_range(override, field, fragment):
    if field is None:
        load_scenario("quickstart", [override])
        return
    with pytest.raises(ScenarioError, match=field) as info:
        load_scenario("quickstart", [override])
    msg = str(info.value)
    assert fragment in msg and "\n" not in msg


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ScenarioError, match="quickstart"):
        load_scenario("no_such_preset")


def test_bad_override_syntax():
    with pytest.raises(ScenarioError, match="KEY=VALUE"):
        load_scenario("quickstart", ["rounds"])


# ----------------------------------------------------------------------------------------- fuzzing
_keys = st.sampled_from(
    ["name", "seed", "rounds", "learning", "data", "model", "train", "method", "round", "fleet", "channel",
     "bandwidth_hz", "n_devices", "policy", "deadline_s", "kind", "hidden", "f_max_ghz", "tx_power_dbm", "x"]
)  # fmt: skip
_scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.sampled_from(["fedavg", "iid", "deadline", "uniform", "digits", "mlp", "redraw", "split"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12,
)
_documents = st.dictionaries(_keys, _values, max_size=8)


@pytest.mark.slow  # 2-3 s: the quick tier keeps this file's other checks
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_documents)
def test_random_documents_raise_only_scenario_error(doc, tmp_path_factory):
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):  # not representable as TOML (e.g. NaN in some tomli_w versions)
        return
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_text(text)
    try:
        sc = load_scenario(path)
    except ScenarioError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(sc, Scenario) and math.isfinite(sc.channel.bandwidth_hz)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_random_text_raises_only_scenario_error(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "t.toml"
    path.write_text(text)
    try:
        load_scenario(path)
    except ScenarioError:
        pass


def test_method_names_and_tables_come_from_the_registry():
    """A method registered at run time is a valid ``method.name`` and its table is checked by its own settings."""
    from pydantic import Field

    from edgefl.methods import METHODS, register_method
    from edgefl.methods.fedavg import FedAvg, FedAvgSettings

    class _Settings(FedAvgSettings):
        knob: float = Field(0.5, gt=0, le=1)

    class _Probe(FedAvg):
        name = "probe_method"
        Settings = _Settings

    with pytest.raises(ScenarioError, match=r"method.name='probe_method': not implemented"):
        load_scenario("quickstart", ["method.name=probe_method"])
    register_method(_Probe)
    try:
        sc = load_scenario("quickstart", ["method.name=probe_method", "method.probe_method.knob=0.25"])
        assert sc.method.settings_of().knob == 0.25 and sc.method.settings_of("fedavg").cpu_policy == "max"
        with pytest.raises(ScenarioError, match=r"method.probe_method.knob=2: Input should be less than or equal to 1"):
            load_scenario("quickstart", ["method.name=probe_method", "method.probe_method.knob=2"])
    finally:
        del METHODS["probe_method"]


@pytest.mark.parametrize(
    "override, new_key",
    [("method.alpha_min=0.3", "method.anycostfl.alpha_min"), ("method.beta_max=0.1", "method.anycostfl.beta_max"),
     ("method.cpu_policy='min_energy'", "method.fedavg.cpu_policy")],
)  # fmt: skip
def test_a_moved_method_key_names_its_new_place(override, new_key):
    data = tomllib.loads(scenario_to_toml(load_scenario("quickstart")))
    del data["method"]["fedavg"]
    path, value = override.split("=")
    data["method"][path.split(".")[1]] = tomllib.loads(f"v = {value}")["v"]
    with pytest.raises(ScenarioError, match=rf"{path}=.*moved: set {new_key} instead") as info:
        scenario_from_dict(data)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("method", ["anycostfl", "stc", "qsgd", "fedhq", "uveqfed"])
def test_a_method_refuses_a_cost_mode_it_cannot_plan_in(method):
    sets = [f"method.name={method}", "round.policy=deadline", "round.deadline_s=5", "fleet.budget.kind=fixed",
            "fleet.step_costs.kind=normal"]  # fmt: skip
    with pytest.raises(ScenarioError, match=rf"method.name='{method}' with fleet.step_costs.kind='normal': {method} "
                                            r"plans only under the physical cost model") as info:  # fmt: skip
        load_scenario("quickstart", sets)
    assert "\n" not in str(info.value)
