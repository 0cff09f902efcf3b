"""An asynchronous run's report (FedBuff, FedAsync) speaks of server updates and late jobs: no visible text of its
figures or tables says "round" or "straggler"; a synchronous run's report keeps its rounds and stragglers."""

from __future__ import annotations

import re

import pytest

from edgefl.output import report
from edgefl.output.report_header import run_settings
from edgefl.output.results import write_run
from edgefl.run.runner import resolve_info, run_scenario
from edgefl.run.load import load_scenario

ASYNC = [  # FedBuff on the surrogate with fixed per-step costs: a few server updates in well under a second
    "learning=surrogate", "checkpoint_every=0", "fleet.n_devices=6", "method.clients_per_round=3",
    "fleet.step_costs.kind=normal", "fleet.step_costs.std_ratio=0", "train.local_steps=5", "rounds=6",
    "method.name=fedbuff", "method.fedbuff.buffer_size=2",
]  # fmt: skip
SYNC = [s for s in ASYNC if not s.startswith("method.")] + ["method.clients_per_round=3"]


def visible_texts(fig) -> list[str]:
    """What a reader sees of a figure: title, axis titles, legend names, annotations, hover texts."""
    layout = fig.layout
    texts = [layout.title.text or "", layout.xaxis.title.text or "", layout.yaxis.title.text or ""]
    texts += [a.text or "" for a in layout.annotations]
    for trace in fig.data:
        texts.append(trace.name or "")
        hover = getattr(trace, "hovertext", None)
        texts += list(hover) if isinstance(hover, (list, tuple)) else [hover or ""]
    return texts


def intro_html(page: str) -> str:
    """The page's header and tables: everything before the first figure (plotly.js follows)."""
    return page.split('<section class="figure">', 1)[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("words")
    out = {}
    for name, sets in (("async", ASYNC), ("sync", SYNC)):
        result = run_scenario(load_scenario("quickstart", sets))
        out[name] = (result, write_run(result, work / name))
    return out


@pytest.mark.slow
def test_async_report_says_server_update_and_late_job(runs):
    result, run_dir = runs["async"]
    assert "staleness" in result.device_rounds.columns  # the result tells the run was asynchronous
    figures = report.build_figures(result.rounds, result.device_rounds)
    texts = [t for fig in figures.values() for t in visible_texts(fig)]
    words = " ".join(texts)
    assert "late job" in words and "server update" in words
    assert not [t for t in texts if re.search(r"round|straggler", t, re.IGNORECASE)], texts
    intro = intro_html(run_dir.joinpath("report.html").read_text())
    assert "<th>server updates</th><td>6</td>" in intro
    assert "jobs in flight (C)" in intro and "<th>server policy</th><td>asynchronous: server updates" in intro
    assert not re.search(r"straggler|round", intro.split("</style>", 1)[1], re.IGNORECASE)


@pytest.mark.slow
def test_sync_report_keeps_rounds_and_stragglers(runs):
    result, run_dir = runs["sync"]
    figures = report.build_figures(result.rounds, result.device_rounds)
    words = " ".join(t for fig in figures.values() for t in visible_texts(fig))
    assert "straggler" in words and "Device timeline, round" in words and "server update" not in words
    intro = intro_html(run_dir.joinpath("report.html").read_text())
    assert "<th>rounds</th><td>6</td>" in intro and "devices per round (K)" in intro


def test_header_names_the_asynchronous_policy():
    settings = dict(run_settings(resolve_info(load_scenario("quickstart", ASYNC))))
    assert settings["server policy"] == "asynchronous: server updates as jobs arrive"
    assert settings["jobs in flight (C)"] == "3" and settings["learning"] == "surrogate (anycostfl bound)"


UPLINK_ROWS = ("uplink access", "selection", "allocation", "packet errors")


def test_header_and_summary_of_a_default_run_show_no_uplink_rows():
    """Access, selection, allocation and packet errors at their defaults: no new header row, no new summary key."""
    from edgefl.output.results import summarize

    info = resolve_info(load_scenario("quickstart", []))
    settings = dict(run_settings(info))
    assert not set(UPLINK_ROWS) & set(settings)
    assert settings["uplink bandwidth"] == "1 MHz per device"
    summary = summarize(info, run_scenario(load_scenario("quickstart", ["rounds=1", "checkpoint_every=0"])).rounds)
    assert not {"access", "selection", "allocation", "packet_errors"} & set(summary)


def test_header_and_summary_show_the_uplink_settings_given():
    """TDMA, FedCS and packet errors; then Chen et al.'s RBs (m shared with the packet errors) and an allocation:
    each shown as set, in words and numbers the scenario gave."""
    from edgefl.output.results import summarize

    tdma = ["channel.access=tdma", "round.policy=deadline", "round.deadline_s=100", "selection.policy=fedcs",
            "channel.packet_errors.waterfall=0.5", "channel.packet_errors.retransmissions=2"]  # fmt: skip
    info = resolve_info(load_scenario("quickstart", tdma))
    rows = dict(run_settings(info))
    assert rows["uplink access"] == "TDMA: one upload at a time on the whole band"
    assert rows["uplink bandwidth"] == "1 MHz taken by one upload at a time"
    assert rows["selection"].startswith("FedCS")
    assert rows["packet errors"] == "Chen et al.'s q, waterfall m = 0.5, up to 2 retransmissions"
    assert "allocation" not in rows
    summary = summarize(info, run_scenario(load_scenario("quickstart", [*tdma, "rounds=1", "checkpoint_every=0",
                                                                         "learning=surrogate"])).rounds)  # fmt: skip
    assert summary["access"] == "tdma" and summary["selection"] == "fedcs" and "allocation" not in summary
    assert summary["packet_errors"] == {"waterfall": 0.5, "retransmissions": 2}

    chen = ["selection.policy=chen", "channel.link_model=shannon", "selection.chen.resource_blocks=4",
            "selection.chen.rb_bandwidth_mhz=0.18", "channel.packet_errors.waterfall=2"]  # fmt: skip
    rows = dict(run_settings(resolve_info(load_scenario("quickstart", chen))))
    assert rows["selection"] == "Chen et al.: devices, RBs and powers; 4 RBs of 0.18 MHz, waterfall m = 2"
    assert rows["packet errors"] == "Chen et al.'s q, waterfall m = 2, no retransmission"
    assert "uplink access" not in rows

    alloc = ["channel.allocation=min_energy", "channel.bandwidth_mode=split", "channel.link_model=shannon",
             "physics=paper", "channel.allocation_weight=0.25"]  # fmt: skip
    info = resolve_info(load_scenario("quickstart", alloc))
    assert dict(run_settings(info))["allocation"].endswith("(Yang et al.), time weight 0.25")
    assert uplink_summary_of(info) == {"allocation": "min_energy"}


def uplink_summary_of(info):
    from edgefl.output.report_header import uplink_summary

    return uplink_summary(info)
