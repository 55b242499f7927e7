"""Self-contained HTML reports — one file, the plots inline as SVG, no network — for a run
and for a matrix. The Markdown report (report.md) says the same in text."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from bench.checks import as_expected
from bench.substrates import substrate

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f5f5f5}
.true{color:#1a7f37;font-weight:600}.false{color:#cf222e;font-weight:700}.unknown{color:#9a6700;
font-weight:600}.off{background:#fff0f0}code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
.plot{margin:1em 0}.plot svg{max-width:100%;height:auto}.muted{color:#777}
details{margin:.3em 0}summary{cursor:pointer}
table.cells td{white-space:nowrap}
table.grid td{min-width:7em}td.g-ok{background:#e9f7ec}td.g-pinned{background:#f1eafa}
td.g-false{background:#ffe3e3}td.g-unknown{background:#fff6dc}td.g-refused,td.g-skip{background:#f3f3f3;color:#666}th.vertical{vertical-align:bottom;padding:4px 2px}th.vertical span{writing-mode:vertical-rl;
transform:rotate(180deg);white-space:nowrap;font-weight:500}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def inline_svg(path: Path) -> str:
    svg = path.read_text()
    svg = re.sub(r"^<\?xml[^>]*>\s*", "", svg)
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)


def page(title: str, body: list[str]) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def _plots(plots: dict[str, dict[str, Path]], captions: dict[str, str], home: Path) -> list[str]:
    out = []
    for name, paths in plots.items():
        href = paths["png"].relative_to(home)
        out.append(f"<div class='plot'><p class='muted'>{_e(captions.get(name, name))} — "
                   f"<a href='{_e(href)}'>PNG</a></p>{inline_svg(paths['svg'])}</div>")
    return out


RUN_CAPTIONS = {
    "latency_cdf": "How long completed requests took, all of them",
    "latency_over_time": "Latency of each request when it settled, with p50/p99 per window; "
                         "fault windows shaded",
    "relay": "Relay streams: seq over time; frames made on the executor, pushed to tabs, and "
             "explicit gaps (black bars)",
    "messages": "Messages published per node and type",
}


def _fault_timeline(faults: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[str]:
    """Each fault of the run on the workload's clock, as the scenario scheduled it and as it
    acted (a node's down time, a broker's outage), with its parameters and the history line
    that journaled it."""
    from bench.report.readings import acted, fault_windows, workload_origin_ms
    origin = workload_origin_ms(events)
    journaled = {int(e["faultIndex"]): e for e in events if e["kind"] == "fault_start"}
    spans = acted(fault_windows(events), origin)
    rows = ["<h2>Fault timeline</h2><p class='muted'>Times in seconds since the workload "
            f"started ({origin / 1000:.1f} s into the history, once every node was up), the "
            "clock a scenario's <code>at_s</code> counts on.</p><table><tr><th>#</th>"
            "<th>fault</th><th>parameters</th><th>scheduled at</th><th>acted</th><th>fired</th>"
            "<th>journaled at seq</th></tr>"]
    for f in faults:
        start = journaled.get(int(f["index"]), {})
        params = ", ".join(f"{k}={v}" for k, v in sorted((start.get("params") or {}).items())
                           if v is not None)
        at = start.get("atMs")
        rows.append(f"<tr><td>{f['index']}</td><td>{_e(f['kind'])}</td><td>{_e(params)}</td>"
                    f"<td>{'–' if at is None else f'{at / 1000:g} s'}</td>"
                    f"<td>{'<br>'.join(_e(a) for a in spans.get(int(f['index']), [])) or '–'}"
                    f"</td><td>{f['fired']}</td><td>{f['seq']}</td></tr>")
    return [*rows, "</table>"]


def run_html(run_dir: Path, plots: dict[str, dict[str, Path]],
             events: list[dict[str, Any]]) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    verdicts = json.loads((run_dir / "verdicts.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    title = f"{summary['scenario']} — {summary['variant']} (seed {summary['seed']})"
    body = [f"<h1>{_e(title)}</h1>",
            f"<p>topology <code>{_e(summary['topology'])}</code>, mode <code>{_e(summary['mode'])}"
            f"</code>{', broker ' + _e(summary['broker']) if substrate(summary['mode']).wall_clock else ''}; "
            f"{summary['events']} events over {summary['simulated_s']:.1f} s "
            f"({summary['wall_s']:.2f} s wall). Exit code {summary.get('exit_code')}.</p>",
            f"<p>Replay: <code>{_e(summary['replay'])}</code></p>",
            "<h2>Verdicts</h2><table><tr><th>checker</th><th>verdict</th><th>expected</th>"
            "<th>why (a verdict that judged nothing says so)</th><th>counts</th></tr>"]
    for v in verdicts["verdicts"]:
        want = summary["expect"].get(v["name"], "true")
        counts = ", ".join(f"{k} {n}" for k, n in v["counts"].items() if n)
        off = "" if as_expected(v["value"], want) else " class='off'"
        note = v["note"].splitlines()[0] if v.get("note") else ""
        body.append(f"<tr{off}><td>{_e(v['name'])}</td><td class='{v['value']}'>"
                    f"{v['value'].upper()}</td><td>{want}</td><td>{_e(note)}</td>"
                    f"<td class='muted'>{_e(counts)}</td></tr>")
    body.append("</table>")
    for v in verdicts["verdicts"]:
        if v["counterexamples"]:
            body.append(f"<details open><summary><b>{_e(v['name'])}</b>: "
                        f"{len(v['counterexamples'])} counterexample(s) shown of "
                        f"{v['counts'].get('violations', '?')}</summary><ul>")
            body += [f"<li><code>{_e(c.get('rule', ''))}</code> seq "
                     f"{_e(', '.join(map(str, c['seq'])))}: {_e(c['why'])}</li>"
                     for c in v["counterexamples"]]
            body.append("</ul></details>")
    lat = metrics["latency_ms"]
    rows = [("requests", metrics["requests"]),
            ("outcomes", ", ".join(f"{k} {n}" for k, n in metrics["outcomes"].items())),
            ("latency p50 / p90 / p99 / max (ms)", " / ".join(
                "–" if lat[q] is None else f"{lat[q]:.1f}" for q in ("p50", "p90", "p99", "max"))),
            ("messages per task", "–" if metrics["messages_per_task"] is None
             else f"{metrics['messages_per_task']:.2f}"),
            ("duplicates delivered / executed",
             f"{metrics['duplicates_delivered']} / {metrics['duplicates_executed']}"),
            ("inbound drops", ", ".join(f"{k} {n}" for k, n in metrics["inbound_drops"].items())
             or "none")]
    if metrics.get("relay"):
        r = metrics["relay"]
        rows.append(("relay frames / deliveries / gaps", f"{r['frames']} / {r['deliveries']} / "
                                                         f"{r['gaps']}"))
    if metrics.get("gates"):
        g = metrics["gates"]
        rt = g["round_trip_ms"]
        rows.append(("gates opened / resumed / rehydrated",
                     f"{g['opened']} / {g['resumed']} / {g['rehydrated']}"))
        rows.append(("gate round trip without think time p50 / p99 (ms)",
                     f"{rt['p50']} / {rt['p99']}"))
    body.append("<h2>Metrics</h2><table>" + "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>")
    if verdicts.get("faults"):
        body += _fault_timeline(verdicts["faults"], events)
    body.append("<h2>Plots</h2>")
    body += _plots(plots, RUN_CAPTIONS, run_dir)
    return page(title, body)


def write_run_report(run_dir: Path) -> Path:
    """Plots (PNG + SVG under plots/) and report.html for one run folder."""
    from bench.report.plots import run_plots
    from bench.report.readings import read_history
    events = read_history(run_dir)
    plots = run_plots(run_dir, events)
    path = run_dir / "report.html"
    path.write_text(run_html(run_dir, plots, events))
    md = run_dir / "report.md"
    if md.exists() and "## Plots" not in md.read_text():
        with md.open("a") as fh:
            fh.write("\n## Plots\n\n" + "\n".join(f"![{name}](plots/{p['png'].name})"
                                                for name, p in plots.items()) + "\n")
    return path
