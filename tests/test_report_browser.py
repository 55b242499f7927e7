"""The HTML reports in a real browser (issue 34, point 7): headless Chromium opens a run's
report.html and a matrix's matrix.html, and a probe script in the page reports what a reader
would meet — a plot that did not render, a PNG link that does not load, a script error, a
table or plot wider than the page, a verdict's note outside its row. Screenshots of both are
written beside them (under the test's tmp folder) for a person to look at.

Chromium comes from Debian (`.ci/run` installs it); without it these tests skip, saying so.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import EXIT_OK, main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install "
                                                          "chromium; .ci/run installs it)")]

#: Runs before the page's own content: every error the page raises, or any resource it fails
#: to load, is kept.
CATCH = """<script>window.__errors = [];
window.addEventListener('error', e => window.__errors.push(
  e.message || ('failed to load ' + (e.target && (e.target.src || e.target.href)))), true);
</script>"""

#: Runs once the page has loaded: what is wrong with it, as JSON in <pre id=probe>.
PROBE = """<script>
window.addEventListener('load', async () => {
  const out = {errors: window.__errors, plots: 0, empty_plots: [], wide: [], pngs: 0,
               broken_pngs: [], width: document.documentElement.clientWidth};
  const page = document.body.getBoundingClientRect();
  for (const svg of document.querySelectorAll('div.plot svg')) {
    out.plots += 1;
    const r = svg.getBoundingClientRect();
    if (r.width < 100 || r.height < 100 || svg.querySelectorAll('path').length === 0)
      out.empty_plots.push(svg.parentElement.querySelector('p').textContent.slice(0, 60));
  }
  for (const el of document.querySelectorAll('table, div.plot svg, pre, h1, h2, p')) {
    const r = el.getBoundingClientRect();
    if (r.right > out.width + 1 || r.left < page.left - 1)
      out.wide.push(el.tagName + ' ' + (el.textContent || '').slice(0, 40) + ' right=' + r.right);
  }
  const links = [...document.querySelectorAll('a[href$=".png"]')];
  out.pngs = links.length;
  await Promise.all(links.map(a => new Promise(done => {
    const img = new Image();
    img.onload = () => { if (!img.naturalWidth) out.broken_pngs.push(a.href); done(); };
    img.onerror = () => { out.broken_pngs.push(a.href); done(); };
    img.src = a.href;
  })));
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _browse(page: Path, width: int = 1280) -> dict[str, object]:
    """Open `page` (a copy with the probe in it) in headless Chromium; the probe's findings."""
    probe = page.with_name(f"probe-{page.name}")
    text = page.read_text()
    probe.write_text(text.replace("<head>", "<head>" + CATCH, 1).replace("</body>",
                                                                         PROBE + "</body>"))
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},2000", "--virtual-time-budget=10000", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom, re.S)
    assert found, f"the probe never ran in {page.name}: {dom[:300]!r}"
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={width},3000", f"--screenshot={page.with_suffix('.png')}",
         page.as_uri()], capture_output=True, timeout=120)
    result: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return result


def _clean(found: dict[str, object], plots: int) -> None:
    assert found["errors"] == [], found["errors"]
    assert found["plots"] == plots and found["empty_plots"] == [], found
    assert found["pngs"] == plots and found["broken_pngs"] == [], found
    assert found["wide"] == [], f"wider than the page: {found['wide']}"


def test_a_run_report_renders_in_a_browser(tmp_path: Path) -> None:
    """A run with streams and a fault: four plots render, each PNG link loads, nothing is
    wider than the page, and each verdict's note sits in its own row's cell."""
    out = tmp_path / "run"
    assert main(["run", "streaming_restart", "--mode", "sim", "--out", str(out)]) == EXIT_OK
    _clean(_browse(out / "report.html"), plots=4)
    page = (out / "report.html").read_text()
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
    noted = [r for r in rows if "nothing to judge" in r]
    assert noted and all(r.count("<td") == 5 for r in noted), noted[:1]
    timeline = page[page.index("Fault timeline"):]
    assert re.search(r"<td>\d+(\.\d+)? s</td>", timeline), "the fault timeline gives no time"
    assert (out / "report.png").stat().st_size > 10_000


def test_a_matrix_report_renders_in_a_browser(tmp_path: Path) -> None:
    """Three cells: the table heads its verdict columns with the checkers' names, the plots
    come before the coverage table (which is folded), and everything renders."""
    matrix = tmp_path / "small.matrix.toml"
    matrix.write_text('name = "small"\ndescription = "Three cells."\n\n[[group]]\n'
                      'name = "g"\nscenarios = ["quickstart"]\nvariants = ["reference"]\n'
                      'seeds = [1]\n\n[[group]]\nname = "d"\nscenarios = ["qos1_redelivery"]\n'
                      'variants = ["reference", "memory_dedup_60s"]\n')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    ran = subprocess.run([sys.executable, "-m", "bench", "matrix", str(matrix)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == EXIT_OK, ran.stdout[-2000:] + ran.stderr[-2000:]
    page_path = tmp_path / "results" / "small" / "matrix.html"
    _clean(_browse(page_path), plots=2)
    page = page_path.read_text()
    header = page[page.index("<table class='cells'>"):page.index("</tr>")]
    assert "duplicate_execution" in header and ">1<" not in header
    assert page.index("<h2>Plots</h2>") < page.index("<h2>Coverage</h2>")
    assert "<details><summary>every situation" in page
