"""Plots and reports come from real runs: every plot is drawn from a simulated run's
history, in PNG and SVG, and the HTML report is one self-contained file."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.cli import EXIT_OK, main
from bench.report.plots import fault_windows, read_history


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src",) or (k == "href" and v and v.startswith("http")):
                self.external.append(f"{tag} {k}={v}")


def test_a_run_draws_every_plot_and_a_self_contained_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["run", "streaming", "--mode", "sim", "--out", str(out)]) == EXIT_OK
    for name in ("latency_cdf", "latency_over_time", "relay", "messages"):
        for ext in ("png", "svg"):
            assert (out / "plots" / f"{name}.{ext}").stat().st_size > 1000, (name, ext)
    page = (out / "report.html").read_text()
    tags = _Tags()
    tags.feed(page)
    assert tags.tags.count("svg") == 4 and not tags.external, tags.external
    summary = json.loads((out / "summary.json").read_text())
    assert summary["replay"] in page.replace("&#x27;", "'").replace("&quot;", '"')
    assert "relay_integrity" in page and "Fault timeline" in page
    assert "![relay](plots/relay.png)" in (out / "report.md").read_text()


def test_fault_windows_come_from_the_nemesis_journal(tmp_path: Path) -> None:
    """A restart is shaded for its node's down time (crash to start), not from the fault's
    start to the end of the run."""
    out = tmp_path / "run"
    assert main(["run", "restart", "--mode", "sim", "--no-plots", "--out", str(out)]) == EXIT_OK
    assert not (out / "plots").exists() and not (out / "report.html").exists()
    events = read_history(out)
    windows = fault_windows(events)
    crash = next(e for e in events if e["kind"] == "node_crashed")
    boot = next(e for e in events if e["kind"] == "node_started" and e["seq"] > crash["seq"])
    assert [(w[2], w[3]) for w in windows] == [("restart (exec-1 down)", 0)]
    assert (windows[0][0], windows[0][1]) == (crash["tMs"], boot["tMs"])
    assert main(["report", str(out)]) == EXIT_OK      # drawn afterwards, on request
    assert (out / "report.html").exists() and (out / "plots" / "latency_over_time.svg").exists()


def test_report_refuses_a_folder_that_is_no_run(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path)]) == 3


def test_the_status_line_counts_requests_and_names_faults_as_they_act(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    monkeypatch.setenv("COLUMNS", "200")    # the line is cut to the terminal's width
    monkeypatch.setattr("bench.report.progress.REDRAW_S", 0.0)   # every tick draws

    from bench.history import Line
    from bench.report.progress import Status
    out = io.StringIO()
    status = Status(out, "run")
    status.observe(Line(0, 400.0, "bench", "workload_started",
                        {"durationMs": 10_000.0, "drainMs": 35_000.0}))
    lines = [Line(1, 100.0, "orch", "request_sent", {}),
             Line(2, 900.0, "bench", "fault_start", {"fault": "partition", "faultIndex": 0,
                                                     "params": {"node": "exec-2"}}),
             Line(3, 950.0, "orch", "request_settled", {"outcome": "COMPLETED"}),
             Line(4, 2000.0, "bench", "fault_healed", {"fault": "partition", "faultIndex": 0})]
    for line in lines[:3]:
        status.observe(line)
    status.tick(1000.0, 45_000.0)
    assert "faults acting: partition[0]" in out.getvalue().rsplit("\r", 1)[-1]
    status.observe(lines[3])
    status.close()
    text = out.getvalue()
    # on the workload's clock (it started at 0.4 s of the history), as fault times are
    assert "0.5 s  fault partition[0] starts on exec-2\n" in text
    assert "1.6 s  fault partition[0] healed\n" in text
    # and the progress line drawn under it never tells an earlier time than it (it once
    # said 14.4 s under "15.0 s fault latency[0] healed")
    assert text.split("healed\n", 1)[1].startswith("\r\033[K  run    1.6 / 10.0 s")
    assert "run    1.0 / 10.0 s" in text and "requests 1 sent, 1 settled (1 completed)" in text
    status.tick(12_000.0, 45_000.0)
    assert "run 10.0 s, draining  2.0 / at most 35.0 s" in out.getvalue().rsplit("\r", 1)[-1]
    assert text.endswith("\r\033[K")
