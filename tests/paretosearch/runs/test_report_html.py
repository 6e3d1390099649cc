"""`paretosearch report RUN`: a self-contained HTML page, checked as text and in a real headless
Chromium (Debian's `chromium`, installed by `.ci/run`; skipped where it is absent)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from paretosearch.cli import main
from paretosearch.runs.report_html import FRONT_TRACE
from paretosearch.service.api import PolicySearch, SearchConfig, SearchSettings

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (small) three-objective search, with a configuration chosen."""
    path = tmp_path_factory.mktemp("run")
    settings = SearchSettings(budget=24, pop_size=8, n_offsprings=8, seed=4)
    search = PolicySearch(config=SearchConfig(settings=settings, jobs=150), store=path)
    search.SetPreference("jct:avg", "pred_err:avg", "wait:p99")
    search.run()
    search.SetConfig(1)
    return path


def test_report_is_one_self_contained_file(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    page = out.read_text()
    # nothing loaded from elsewhere: Plotly's bundle is inside
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", page)
    assert "Plotly.newPlot" in page
    front = json.loads((run / "front.json").read_text())["front"]
    commands = json.loads(re.search(r"var COMMANDS = (\[.*?\]);", page).group(1))
    assert commands[2] == (f"paretosearch select {run} --index 2\n"
                           f"paretosearch export {run} --index 2 --format kueue")
    assert len(commands) == len(front)
    hovers = [h for found in re.findall(r'"hovertext":(\[.*?\])', page)
              for h in json.loads(found)]
    for i, e in enumerate(front):  # each configuration's hover names its parameters
        head = "<br>".join([f"<b>#{i}</b>", *(f"{k} = {v:.4g}" for k, v in e["params"].items())])
        assert any(h.startswith(head + "<br>mean job completion time") for h in hovers)
    assert "1 (chosen)" in page and "srsf" in page and "Parameters not searched" in page


class _Marks(HTMLParser):
    """Counts the SVG marks inside the trace group whose class names ``trace<uid>``."""

    def __init__(self, uid: str) -> None:
        super().__init__()
        self.uid, self.depth, self.marks = f"trace{uid}", 0, 0
        self.command = ""
        self._in_command = False
        self.errors: list[str] | None = None
        self.labels: list[list[float | str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if self.depth:
            self.depth += tag != "path"  # <path> is written without a closing tag
            self.marks += tag == "path" and "point" in (a.get("class") or "").split()
        elif tag == "g" and self.uid in (a.get("class") or "").split():
            self.depth = 1
        self._in_command = a.get("id") == "command"
        if tag == "body" and a.get("data-errors") is not None:
            self.errors = json.loads(a["data-errors"] or "[]")
            self.labels = json.loads(a.get("data-labels") or "[]")

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag != "path":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self._in_command:
            self.command += data


_PROBE_HEAD = """<script>window.__errors = [];
window.addEventListener('error', function (e) { __errors.push(String(e.message)); });
var __ce = console.error;
console.error = function () {
  __errors.push([].join.call(arguments, ' ')); __ce.apply(console, arguments);
};
</script>"""
_PROBE_TAIL = """<script>setTimeout(function () {
  document.getElementById('front').emit('plotly_click', {points: [{customdata: 2}]});
  document.body.setAttribute('data-errors', JSON.stringify(__errors));
  var labels = document.querySelectorAll('#front text.annotation-text');
  document.body.setAttribute('data-labels', JSON.stringify(Array.prototype.map.call(
    labels, function (t) { var r = t.getBoundingClientRect();
                           return [r.left, r.top, r.right, r.bottom, t.textContent]; })));
}, 1500);</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)")
def test_report_in_headless_chromium(run: Path, tmp_path: Path) -> None:
    page = (tmp_path / "page.html")
    main(["report", str(run), "--out", str(page)])
    text = page.read_text()
    # the same page, with a probe that records errors and clicks front point #2
    probed = tmp_path / "probed.html"
    probed.write_text(text.replace("<head>", "<head>" + _PROBE_HEAD, 1)
                      .replace("</body>", _PROBE_TAIL + "</body>", 1))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=10000"]
    done = subprocess.run([CHROMIUM, *flags, "--dump-dom", probed.as_uri()], text=True,
                          capture_output=True, timeout=120, check=True)
    assert "Uncaught" not in done.stderr
    marks = _Marks(FRONT_TRACE)
    marks.feed(done.stdout)
    assert marks.errors == []  # the page loaded and ran with no console errors
    front = json.loads((run / "front.json").read_text())["front"]
    assert marks.marks == len(front) > 1  # one mark per front member
    # the baselines' and the chosen configuration's names, drawn in the browser: in every
    # pair panel, and no two overlapping
    names = [b[4] for b in marks.labels]
    baselines = json.loads((run / "front.json").read_text())["baselines"]
    assert sorted(set(names)) == sorted([*baselines, "chosen (#1)"])
    assert len(names) == 3 * (len(baselines) + 1)  # three pairs of objectives
    for k, a in enumerate(marks.labels):
        for b in marks.labels[k + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    assert marks.command.strip() == f"paretosearch select {run} --index 2\n" \
                                    f"paretosearch export {run} --index 2 --format kueue"
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *flags, "--window-size=1300,2000", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
