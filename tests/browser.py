"""Render an HTML page in headless Chromium and report, per plotly figure, what was drawn (no Python dependency).

:func:`render_check` copies the page, adds two small scripts (one at the top of ``<head>`` that records
JavaScript errors, one before ``</body>`` that waits until every ``.plotly-graph-div`` has been drawn and then
measures it), runs ``chromium --headless --dump-dom`` on the copy and parses the JSON the second script wrote
into ``<pre id="edgefl-check">``; :func:`render_checks` does several pages with one browser each, concurrently.
Per figure (keyed by the div id):

- ``rendered``: plotly drew the div (it has the ``js-plotly-plot`` class and a full layout);
- ``traces``: ``gd.data.length``; ``traces_with_points``: traces plotly found at least one point in;
- ``drawn_traces``: ``g.trace`` groups in the SVG holding at least one visible mark (a ``path`` with a
  non-empty box: a line, a marker or a bar); ``marks``: the number of such paths;
- ``plot_area``: ``[width, height]`` in CSS px of the plot area (the ``.nsewdrag`` rectangle).

and, for the page, ``tables``: the text of each ``<table>`` as the browser lays it out (cells tab-separated,
rows on their own lines).

:func:`problems` turns that into readable complaints; a page passes when it has none.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from collections.abc import Sequence
from typing import Any

__all__ = ["SKIP_MESSAGE", "chromium_path", "chromium_command", "problems", "render_check", "render_checks"]

SKIP_MESSAGE = "chromium not found: `apt-get install -y chromium` (make test installs it where apt works)"

_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
    "--mute-audio", "--window-size=1200,900",
)  # fmt: skip

_HEAD_SCRIPT = """<script>
window.__edgeflErrors = [];
window.addEventListener('error', function (e) { window.__edgeflErrors.push(String(e.message)); });
</script>
"""

_CHECK_SCRIPT = """<script>
(function () {
  function visible(el) {
    var d = el.getAttribute('d');
    if (!d || d === 'M0,0Z') { return false; }
    var box = el.getBBox();
    return box.width > 0 || box.height > 0;
  }
  function measure(gd) {
    var r = {rendered: gd.classList.contains('js-plotly-plot') && !!gd._fullLayout,
             traces: Array.isArray(gd.data) ? gd.data.length : 0, traces_with_points: 0,
             drawn_traces: 0, marks: 0, plot_area: [0, 0]};
    (gd._fullData || []).forEach(function (t) { if (t.visible === true && t._length > 0) { r.traces_with_points++; } });
    gd.querySelectorAll('g.trace').forEach(function (g) {
      var n = Array.prototype.filter.call(g.querySelectorAll('path'), visible).length;
      r.marks += n;
      if (n > 0) { r.drawn_traces++; }
    });
    var drag = gd.querySelector('.nsewdrag');
    if (drag) { var b = drag.getBoundingClientRect(); r.plot_area = [b.width, b.height]; }
    return r;
  }
  function done() {
    var out = {errors: window.__edgeflErrors || [], figures: {}};
    document.querySelectorAll('.plotly-graph-div').forEach(function (gd) { out.figures[gd.id] = measure(gd); });
    out.tables = Array.prototype.map.call(document.querySelectorAll('table'), function (t) { return t.innerText; });
    var pre = document.createElement('pre');
    pre.id = 'edgefl-check';
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  var tries = 0;
  function poll() {  // virtual time: these timeouts cost no real time
    var divs = document.querySelectorAll('.plotly-graph-div');
    var ready = Array.prototype.every.call(divs, function (gd) { return !!gd._fullLayout; });
    if ((ready && divs.length > 0) || ++tries > 50) { setTimeout(done, 300); } else { setTimeout(poll, 100); }
  }
  window.addEventListener('load', function () { setTimeout(poll, 100); });
})();
</script>
"""

_RESULT = re.compile(r'<pre id="edgefl-check">(.*?)</pre>', re.DOTALL)


def chromium_path() -> str | None:
    """The Chromium executable (``chromium`` on PATH, or /usr/bin/chromium), or ``None``."""
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def chromium_command(page: Path, profile_dir: Path, *extra: str) -> list[str]:
    """The headless Chromium command line for ``page`` with a throw-away profile in ``profile_dir``."""
    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError(SKIP_MESSAGE)
    return [exe, *_FLAGS, f"--user-data-dir={profile_dir}", *extra, page.resolve().as_uri()]


def render_check(page: Path, work_dir: Path, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """Render ``page`` (an HTML file; it is not modified) in headless Chromium and return
    ``{"errors": [JavaScript error messages], "figures": {div id: measurements}}`` (see the module docstring).

    Raises ``AssertionError`` with Chromium's stderr when the browser fails or the check never reported.
    """
    return render_checks([page], work_dir, timeout_s=timeout_s)[0]


def render_checks(pages: Sequence[Path], work_dir: Path, *, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """:func:`render_check` of several pages, one Chromium each, all running at the same time."""
    procs = []
    for i, page in enumerate(pages):
        page_dir = work_dir / f"page{i}"
        copy = _instrument(Path(page), page_dir)
        cmd = chromium_command(copy, page_dir / "profile", "--virtual-time-budget=10000", "--dump-dom")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for page, proc in zip(pages, procs):
            stdout, stderr = proc.communicate(timeout=timeout_s)
            match = _RESULT.search(stdout)
            assert match, (
                f"chromium did not report on {page} (exit code {proc.returncode}); stderr tail:\n{stderr[-2000:]}"
            )
            results.append(json.loads(html.unescape(match.group(1))))
    finally:
        for proc in procs:  # only on a timeout or a failed page: stop the browsers this call started
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return results


def _instrument(page: Path, work_dir: Path) -> Path:
    """A copy of ``page`` in ``work_dir`` with the error recorder and the check script added."""
    text = page.read_text(encoding="utf-8")
    head, body = text.find("<head>"), text.rfind("</body>")
    assert head >= 0 and body >= 0, f"{page}: no <head> or </body>; not an HTML page"
    head += len("<head>")
    work_dir.mkdir(parents=True, exist_ok=True)
    copy = work_dir / f"check-{page.name}"
    copy.write_text(text[:head] + "\n" + _HEAD_SCRIPT + text[head:body] + _CHECK_SCRIPT + text[body:], encoding="utf-8")
    return copy


def problems(result: dict[str, Any], expected_ids: list[str] | None = None) -> list[str]:
    """Everything wrong with a :func:`render_check` result, one line each (an empty list means the page is fine).

    A figure is wrong when it was not drawn, has no trace, draws no trace element, leaves a trace that has
    points undrawn, or has an empty plot area; the page is wrong on a JavaScript error or when a figure of
    ``expected_ids`` is missing.
    """
    out = [f"JavaScript error: {message}" for message in result["errors"]]
    figures = result["figures"]
    for div_id in expected_ids or []:
        if div_id not in figures:
            out.append(f"{div_id}: no such figure on the page (found {sorted(figures)})")
    for div_id, fig in figures.items():
        if not fig["rendered"]:
            out.append(f"{div_id}: not rendered by plotly")
            continue
        if fig["traces"] == 0:
            out.append(f"{div_id}: no traces")
        if fig["drawn_traces"] == 0:
            out.append(f"{div_id}: no trace element drawn")
        elif fig["drawn_traces"] < fig["traces_with_points"]:
            out.append(f"{div_id}: {fig['traces_with_points']} traces have points but only {fig['drawn_traces']} drawn")
        width, height = fig["plot_area"]
        if not (width > 0 and height > 0):
            out.append(f"{div_id}: empty plot area {width} x {height} px")
    return out
