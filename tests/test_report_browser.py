"""The HTML pages open in a real browser: headless Chromium renders every figure of a run's report.html and of
the `edgefl plot` overlay with data (traces present, trace elements drawn, a non-empty plot area), and the
checker (tests/browser.py) does report figures that are empty, hidden or never drawn.

Needs Debian's `chromium` (`make test` installs it where apt works); skipped with a message otherwise.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import plotly.graph_objects as go
import pytest

from browser import SKIP_MESSAGE, chromium_path, problems, render_checks
from edgefl.output import comparison as overlay
from edgefl.output import report
from edgefl.output.results import write_run
from edgefl.run.runner import run_scenario
from edgefl.run.load import load_scenario

pytestmark = pytest.mark.skipif(chromium_path() is None, reason=SKIP_MESSAGE)

TARGET = 0.3  # quickstart's test accuracy crosses it within its first 3 rounds (about 22%, 35%, 53%)


def div_ids(keys) -> list[str]:
    """The figure div ids figures_page gives ``keys``."""
    return [f"edgefl-{key.replace('_', '-')}" for key in keys]


def overlay_page(run_dir: Path, work: Path) -> Path:
    """The overlay of the run and a copy of it relabelled seed 99 (two curves per figure)."""
    other = work / "other"
    shutil.copytree(run_dir, other)
    summary = json.loads((other / "summary.json").read_text(encoding="utf-8"))
    (other / "summary.json").write_text(json.dumps({**summary, "seed": 99}), encoding="utf-8")
    return overlay.write_overlay([run_dir, other], work / "overlay.html")


def bad_figures_page(work: Path) -> Path:
    """Figures the checker must call bad, next to one good figure."""
    page = report.figures_page(
        "figures that must fail",
        {
            "good": go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9])),
            "no_data": go.Figure(),  # no trace at all
            "empty_trace": go.Figure(go.Scatter(x=[], y=[])),  # a trace without points
            "hidden": go.Figure(go.Scatter(x=[1, 2], y=[3, 4])),  # drawn into a hidden div: nothing visible
        },
    )
    page = page.replace('<div id="edgefl-hidden"', '<div style="display:none"><div id="edgefl-hidden"', 1)
    page = page.replace("</section>\n</body>", "</div></section>\n</body>", 1)
    (work / "bad.html").write_text(page, encoding="utf-8")
    return work / "bad.html"


def no_plotly_page(work: Path) -> Path:
    """A figure whose page lacks plotly.js: nothing ever draws."""
    page = go.Figure(go.Scatter(x=[1, 2], y=[3, 4])).to_html(include_plotlyjs=False, div_id="edgefl-x")
    (work / "no-plotly.html").write_text(page, encoding="utf-8")
    return work / "no-plotly.html"


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """A real 3-round quickstart run (written with its report), and what Chromium found on each page:
    ``{"run": RunResult, "report" | "overlay" | "bad" | "no_plotly": render_check result}``."""
    work = tmp_path_factory.mktemp("browser")
    result = run_scenario(load_scenario("quickstart", ["rounds=3", f"train.target_accuracy={TARGET}"]))
    run_dir = write_run(result, work / "quickstart")
    pages = {
        "report": run_dir / "report.html",
        "overlay": overlay_page(run_dir, work),
        "bad": bad_figures_page(work),
        "no_plotly": no_plotly_page(work),
    }
    found = render_checks(list(pages.values()), work / "checks")  # one browser per page, all at once
    return {"run": result, **dict(zip(pages, found))}


@pytest.mark.slow
def test_run_report_renders_every_figure(checked):
    page, result = checked["report"], checked["run"]
    assert problems(page, div_ids(report.FIGURE_KEYS)) == [], json.dumps(page, indent=1)
    figures = report.build_figures(result.rounds, result.device_rounds, target_accuracy=TARGET)
    for key, div_id in zip(report.FIGURE_KEYS, div_ids(report.FIGURE_KEYS)):
        fig = page["figures"][div_id]
        assert fig["traces"] == len(figures[key].data) >= 1, (div_id, fig)
        assert fig["drawn_traces"] == fig["traces"], (div_id, fig)  # every trace of the report has points
        assert min(fig["plot_area"]) > 0, (div_id, fig)
    # a line and one marker per evaluated round (quickstart evaluates every round), and the target's crossing
    reached = result.summary["rounds_to_target"] is not None
    assert reached  # the case draws a crossing
    assert page["figures"]["edgefl-accuracy-vs-round"]["marks"] == 1 + 3 + 1


@pytest.mark.slow
def test_run_report_header_shows_the_settings_and_the_target(checked):
    page, result = checked["report"], checked["run"]
    settings, summary = page["tables"][:2]
    for row in ("method\tfedavg", "devices (N)\t20", "devices per round (K)\t5", "uplink bandwidth\t1 MHz per device",
                "round policy\twait_all", "cost mode\tphysical", "learning\ttorch", "data\tdigits, iid partition",
                "seed\t0", "target accuracy\t30.00%"):  # fmt: skip
        assert row in settings.splitlines(), (row, settings)
    s = result.summary
    assert (f"target 30.00%\treached at round {s['rounds_to_target']}: {s['time_to_target_s']:.4g} s, "
            f"{s['energy_to_target_j']:.4g} J") in summary.splitlines(), summary  # fmt: skip


@pytest.mark.slow
def test_overlay_page_renders_every_figure(checked):
    page = checked["overlay"]
    assert problems(page, div_ids(overlay.FIGURE_KEYS)) == [], json.dumps(page, indent=1)
    assert set(page["figures"]) == set(div_ids(overlay.FIGURE_KEYS))
    for fig in page["figures"].values():
        assert fig["traces"] == fig["drawn_traces"] == 2 + 1, fig  # one curve per run, and the target's crossings
        assert fig["marks"] == 2 * (1 + 3) + 2, fig  # each: a line and 3 markers; the crossing of each run
        assert min(fig["plot_area"]) > 0, fig


@pytest.mark.slow
def test_checker_reports_empty_and_undrawn_figures(checked):
    assert problems(checked["bad"], ["edgefl-good", "edgefl-missing"]) == [
        "edgefl-missing: no such figure on the page (found ['edgefl-empty-trace', 'edgefl-good', "
        "'edgefl-hidden', 'edgefl-no-data'])",
        "edgefl-no-data: no traces",
        "edgefl-no-data: no trace element drawn",
        "edgefl-empty-trace: no trace element drawn",
        "edgefl-hidden: no trace element drawn",
        "edgefl-hidden: empty plot area 0 x 0 px",
    ]


@pytest.mark.slow
def test_checker_reports_a_page_plotly_never_drew(checked):
    assert problems(checked["no_plotly"]) == [
        "JavaScript error: Uncaught ReferenceError: Plotly is not defined",
        "edgefl-x: not rendered by plotly",
    ]


def test_skip_message_says_how_to_install():
    assert SKIP_MESSAGE.startswith("chromium not found: `apt-get install -y chromium`")
