"""Plots and reports come from real runs: every plot is drawn from a simulated run's
history, in PNG and SVG, and the HTML report is one self-contained file."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.cli import EXIT_OK, main
from bench.report.readings import fault_windows, read_history


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


def test_a_fault_window_names_the_nodes_its_fault_names() -> None:
    """The legend said `faults[0] at 5 s — partition: 5.0–10.0 s`: partitioned, but whom?"""
    events = [{"kind": "fault_start", "tMs": 5000.0, "faultIndex": 0, "fault": "partition",
               "atMs": 5000.0, "params": {"nodes": ["exec-1", "exec-2"]}},
              {"kind": "fault_healed", "tMs": 10000.0, "faultIndex": 0}]
    assert [w[2] for w in fault_windows(events)] == ["partition on exec-1, exec-2"]


@pytest.mark.parametrize(("per_second", "upper"), [(12, "max"), (150, "p99")])
def test_latency_over_time_calls_its_upper_line_a_p99_only_where_windows_hold_one(
        per_second: int, upper: str) -> None:
    """A window of about ten requests has no p99 of its own: its 0.99 quantile is its
    largest latency, and the line says max (issue 50)."""
    import matplotlib.pyplot as plt

    from bench.report.plots import latency_over_time
    events = [{"kind": "request_settled", "tMs": 1000.0 * s + k, "outcome": "COMPLETED",
               "latencyMs": 10.0 + k} for s in range(10) for k in range(per_second)]
    fig = latency_over_time(events, "t")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    plt.close(fig)
    assert any(label.startswith(f"{upper} per ") for label in labels), labels
    assert not any(label.startswith("p99 per ") for label in labels) or upper == "p99"


def test_the_duplicates_plot_counts_what_it_leaves_out() -> None:
    from bench.report.plots import MAX_CELLS_SHOWN, _hidden_cells

    def cell(variant: str, dups: int) -> dict[str, object]:
        return {"cell": {"variant": variant}, "metrics": {"duplicates_delivered": dups,
                                                          "duplicates_executed": 0}}
    rest = [cell("memory_dedup_60s", 1)] * (70 - MAX_CELLS_SHOWN) + [cell("reference", 0)] * 30
    assert _hidden_cells(100, rest) == (f"({MAX_CELLS_SHOWN} of 100 cells; not shown: "
                                        f"{100 - MAX_CELLS_SHOWN}, 10 with duplicates, "
                                        "10 of seeded defects)")
    assert _hidden_cells(100, [cell("reference", 0)] * 40).endswith(
        "none with a duplicate or a seeded defect)")


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


# Pictures that mislead (issue 34, point 7): each test below failed before its fix.

def _history(*events: dict[str, object]) -> list[dict[str, object]]:
    return [{"seq": i + 1, "node": "bench", **e} for i, e in enumerate(events)]


def _spans(ax: object) -> list[tuple[float, float, str]]:
    from matplotlib.patches import Polygon, Rectangle
    out = []
    for p in ax.patches:   # type: ignore[attr-defined]
        if isinstance(p, Rectangle | Polygon):
            xs = [x for x, _ in p.get_xy()] if isinstance(p, Polygon) else [
                p.get_x(), p.get_x() + p.get_width()]
            out.append((round(min(xs), 3), round(max(xs), 3), p.get_label()))
    return out


STARTED_LATE = _history(
    {"kind": "workload_started", "tMs": 5000, "durationMs": 20000, "drainMs": 1000},
    {"kind": "fault_start", "tMs": 13000, "fault": "restart", "faultIndex": 0, "atMs": 8000,
     "durationMs": None, "params": {"node": "exec-1"}, "disrupts": True},
    {"kind": "node_crashed", "tMs": 13000, "node": "exec-1", "faultIndex": 0},
    {"kind": "node_started", "tMs": 15000, "node": "exec-1"},
    {"kind": "request_settled", "tMs": 10000, "outcome": "COMPLETED", "latencyMs": 120},
    {"kind": "request_settled", "tMs": 18000, "outcome": "COMPLETED", "latencyMs": 90})


def test_latency_over_time_counts_from_the_workload_start_as_fault_times_do() -> None:
    """A deployment that took 5 s to start: the restart scheduled at_s = 8 is shaded at
    8–10 s and says so; the axis says what it counts from (it used to start at the
    history's zero, and the shading sat at 13 s)."""
    from bench.report.plots import latency_over_time
    fig = latency_over_time(STARTED_LATE, "t")
    ax = fig.axes[0]
    fault = [s for s in _spans(ax) if s[2].startswith("faults[0]")]
    assert [(a, b) for a, b, _ in fault] == [(8.0, 10.0)], _spans(ax)
    assert fault[0][2] == "faults[0] at 8 s — restart (exec-1 down): 8.0–10.0 s", fault
    assert "workload started" in ax.get_xlabel()
    assert any(s[2].startswith("start-up (5.0 s") for s in _spans(ax))


def test_the_relay_plot_says_how_many_streams_it_shows_and_numbers_seqs_whole() -> None:
    from bench.report.plots import relay_timeline
    events = []
    for k in range(12):
        for seq in range(1, 4):
            events.append({"kind": "relay_frame", "tMs": 100 * seq + k, "stream": f"c{k}|a",
                           "streamSeq": seq, "taskId": f"t{k}"})
            events.append({"kind": "relay_delivered", "tMs": 100 * seq + k + 5,
                           "stream": f"c{k}|a", "streamSeq": seq})
    events.append({"kind": "flow_emitted", "tMs": 1, "stream": "local|a", "taskId": "t99"})
    fig = relay_timeline(_history(*events), "Relay streams")
    assert fig is not None
    ax = fig.axes[0]
    title = ax.get_title(loc="left")
    assert "8 of 12 relayed streams" in title and "1 more stayed" in title, title
    assert "13 task streams" in title
    fig.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_yticks()), ax.get_yticks()


def _cell(i: int, variant: str = "reference", dup: int = 0) -> dict[str, object]:
    return {"cell": {"scenario": f"s{i}", "variant": variant, "seed": 1, "mode": "sim",
                     "broker": "sim", "nodes": "inproc"},
            "metrics": {"duplicates_delivered": dup, "duplicates_executed": 0}}


def test_the_duplicates_plot_shows_every_cell_and_its_legend_clear_of_the_axis_label() -> None:
    """Seven cells, one a seeded defect with no duplicates: seven rows (it showed one), and
    the legend no longer sits on the x axis' label."""
    from bench.report.plots import duplicates
    fig = duplicates([_cell(i) for i in range(6)] + [_cell(6, "memory_dedup_60s")], "d")
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == 7
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert not legend.overlaps(ax.xaxis.label.get_window_extent())


def test_an_empty_latency_cdf_claims_no_log_scale() -> None:
    from bench.report.plots import latency_cdf
    ax = latency_cdf([("interrupted", [])], "t").axes[0]
    assert "log" not in ax.get_xlabel() and ax.get_xscale() == "linear"


def test_latency_over_time_draws_no_quantile_of_a_thin_window_and_no_response_off_scale() -> None:
    """Newcomer, 2026-12-04: the p50/p99 lines ended on a window of one request, ramped
    across windows with none, and the requests with no response sat at a made-up latency
    on the latency axis."""
    import math

    from bench.report.plots import MIN_PER_BIN, latency_over_time
    events = [{"kind": "workload_started", "tMs": 0, "durationMs": 30000, "drainMs": 0}]
    events += [{"kind": "request_settled", "tMs": 500 + 100 * k, "outcome": "COMPLETED",
                "latencyMs": 100 + k} for k in range(30)]                    # 0.5–3.4 s
    events += [{"kind": "request_settled", "tMs": 20_000, "outcome": "COMPLETED",
                "latencyMs": 900}]                                           # alone at 20 s
    events += [{"kind": "request_settled", "tMs": 25_000, "outcome": "UNDELIVERABLE"}]
    ax = latency_over_time(_history(*events), "t").axes[0]
    for line in ax.get_lines():
        drawn = [(x, y) for x, y in zip(*line.get_data(), strict=True) if not math.isnan(y)]
        assert drawn and max(x for x, _ in drawn) < 5, (line.get_label(), drawn)
        assert f"{MIN_PER_BIN}+ requests" in str(line.get_label())
    none = next(c for c in ax.collections if "no response" in str(c.get_label()))
    assert none.get_transform() != ax.transData   # along the top, not at a latency


def test_the_relay_plot_marks_gaps_in_a_colour_no_stream_has() -> None:
    from matplotlib.colors import to_hex

    from bench.report.plots import PALETTE, relay_timeline
    events = [{"kind": "relay_frame", "tMs": 10 * s, "stream": "c|a", "streamSeq": s,
               "taskId": "t"} for s in (1, 2, 5)]
    events.append({"kind": "relay_gap", "tMs": 60, "stream": "c|a", "fromSeq": 3, "toSeq": 4})
    fig = relay_timeline(_history(*events), "Relay streams")
    assert fig is not None
    ax = fig.axes[0]
    gaps = [c for c in ax.collections if c.get_linewidth()[0] == 3]
    assert gaps and all(to_hex(c.get_color()[0]) not in PALETTE for c in gaps)
    assert "black bars: explicit gaps" in ax.get_title(loc="left")
