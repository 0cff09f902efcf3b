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
