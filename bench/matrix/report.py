"""A matrix's aggregated table, plots and reports: `results/<matrix-id>/matrix.{json,md,html}`
and `plots/`, rebuilt from the finished cells' records whenever the matrix ends."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.matrix import Matrix, cell_dir, collect

SHORT = {"true": "T", "false": "F", "unknown": "?"}


def _checkers(records: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in records:
        for name in r["verdicts"]:
            if name not in names:
                names.append(name)
    return names


def table_md(matrix: Matrix, records: list[dict[str, Any]]) -> str:
    checkers = _checkers(records)
    passed = sum(r["passed"] for r in records)
    out = [f"# matrix {matrix.name}", "", matrix.description, "",
           f"{len(records)} of {len(matrix.cells)} cells finished; {passed} as expected, "
           f"{len(records) - passed} not.", "",
           "Verdict letters, in order: " + ", ".join(f"{i + 1} {c}" for i, c in enumerate(checkers))
           + " (T true, F false, ? unknown; **bold**: not what the cell expects).", "",
           "| cell | as expected | verdicts | requests | p50 / p99 ms | dup delivered / executed | wall s |",
           "|---|---|---|---|---|---|---|"]
    for r in records:
        c, m = r["cell"], r["metrics"]
        letters = "".join(f"**{SHORT[r['verdicts'][k]]}**" if k in r["wrong"]
                          else SHORT[r["verdicts"].get(k, "unknown")] for k in checkers)
        lat = m["latency_ms"]
        p = "–" if lat["p50"] is None else f"{lat['p50']:.0f} / {lat['p99']:.0f}"
        out.append(f"| [{c['id']}](cells/{c['id']}/report.md) | {'yes' if r['passed'] else 'NO'} | "
                   f"`{letters}` | {m['requests']} | {p} | {m['duplicates_delivered']} / "
                   f"{m['duplicates_executed']} | {r['wall_s']:.1f} |")
    missing = [c.id for c in matrix.cells if c.id not in {r["cell"]["id"] for r in records}]
    if missing:
        out += ["", f"Not finished: {', '.join(missing)}"]
    return "\n".join(out) + "\n"


def latency_groups(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Latency per scenario, variant and place (sim, live on a broker, ...): the cells'
    histograms merged, so a scenario run at several seeds or on several topologies gets
    one p50 / p99 over all its completed requests (±9 %: the histograms' buckets), not a
    p50 per cell. A cell recorded without its histogram is left out and counted."""
    from bench.metrics import QUANTILES, Histogram
    from bench.substrates import substrate
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        c = r["cell"]
        where = " ".join([c["mode"], *substrate(c["mode"]).cell_name(c["broker"], c["nodes"])])
        groups[(c["scenario"], c["variant"], where)].append(r)
    out = []
    for (scenario, variant, where), rs in sorted(groups.items()):
        have = [r for r in rs if r["metrics"].get("latency_histogram")]
        h = Histogram.merged([Histogram.from_json(r["metrics"]["latency_histogram"])
                              for r in have])
        out.append({"scenario": scenario, "variant": variant, "where": where,
                    "cells": len(rs), "without_histogram": len(rs) - len(have),
                    "completed": h.total,
                    **{f"p{round(q * 100)}": None if not h.total else round(h.quantile(q), 1)
                       for q in QUANTILES},
                    "max": h.max_value if h.total else None})
    return out


def latency_md(records: list[dict[str, Any]]) -> str:
    rows = latency_groups(records)
    out = ["## Latency per scenario", "",
           "Each scenario's completed requests over all its cells (seeds, topologies), from "
           "the cells' merged histograms: ±9 %.", "",
           "| scenario | variant | where | cells | completed | p50 ms | p90 ms | p99 ms | max ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for g in rows:
        def ms(v: float | None) -> str:
            return "–" if v is None else f"{v:.0f}"
        out.append(f"| {g['scenario']} | {g['variant']} | {g['where']} | {g['cells']}"
                   + (f" ({g['without_histogram']} without a histogram)"
                      if g["without_histogram"] else "")
                   + f" | {g['completed']} | {ms(g['p50'])} | {ms(g['p90'])} | {ms(g['p99'])} "
                     f"| {ms(g['max'])} |")
    return "\n".join(out) + "\n"


def _latency_html(records: list[dict[str, Any]]) -> list[str]:
    from bench.report.html import _e
    rows = ["<h2>Latency per scenario</h2><p>Each scenario's completed requests over all its "
            "cells (seeds, topologies), from the cells' merged histograms (±9 %).</p>"
            "<table><tr><th>scenario</th><th>variant</th><th>where</th><th>cells</th>"
            "<th>completed</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th></tr>"]
    for g in latency_groups(records):
        cells = [g["p50"], g["p90"], g["p99"], g["max"]]
        rows.append(f"<tr><td>{_e(g['scenario'])}</td><td>{_e(g['variant'])}</td>"
                    f"<td>{_e(g['where'])}</td><td>{g['cells']}</td><td>{g['completed']}</td>"
                    + "".join(f"<td>{'–' if v is None else f'{v:.0f}'}</td>" for v in cells)
                    + "</tr>")
    return [*rows, "</table>"]


def coverage(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Situation -> the cells that reached it, for every catalogued situation (an empty
    list: none did). A cell recorded before situations were counted reached nothing known."""
    from bench.checks.coverage import SITUATIONS
    return {s.name: [r["cell"]["id"] for r in records if r.get("situations", {}).get(s.name)]
            for s in SITUATIONS}


def coverage_md(records: list[dict[str, Any]]) -> str:
    from bench.checks.coverage import SITUATIONS
    table = coverage(records)
    never = [name for name, cells in table.items() if not cells]
    out = ["## Coverage", "",
           f"{len(table) - len(never)} of {len(table)} situations reached"
           + (f"; never: {', '.join(never)}" if never else "") + ". A situation is a protocol "
           "path recognised from a cell's history (`bench/checks/coverage.py`); a verdict "
           "says nothing about a path no cell took.", "",
           "| situation | cells | e.g. |", "|---|---|---|"]
    for s in SITUATIONS:
        cells = table[s.name]
        shown = ", ".join(f"[{c}](cells/{c}/report.md)" for c in cells[:2])
        out.append(f"| {s.name} — {s.description} | {len(cells) if cells else '**0**'} | "
                   f"{shown}{' …' if len(cells) > 2 else ''} |")
    return "\n".join(out) + "\n"


def _coverage_html(records: list[dict[str, Any]]) -> list[str]:
    from bench.checks.coverage import SITUATIONS
    from bench.report.html import _e
    table = coverage(records)
    never = sum(not cells for cells in table.values())
    missed = [s.name for s in SITUATIONS if not table[s.name]]
    rows = [f"<h2>Coverage</h2><p>{len(table) - never} of {len(table)} situations reached "
            "(protocol paths recognised from each cell's history)"
            + (f"; never reached: {_e(', '.join(missed))}" if 0 < len(missed) <= 8 else
               f"; {len(missed)} never reached (below)" if missed else "") + ".</p>"
            "<details><summary>every situation, with the cells that reached it</summary>"
            "<table><tr><th>situation</th><th>cells</th><th>e.g.</th></tr>"]
    for s in SITUATIONS:
        cells = table[s.name]
        shown = ", ".join(f"<a href='cells/{_e(c)}/report.md'>{_e(c)}</a>" for c in cells[:2])
        rows.append(f"<tr{'' if cells else ' class=off'}><td title='{_e(s.description)}'>"
                    f"{_e(s.name)}</td><td>{len(cells)}</td><td>{shown}"
                    f"{' …' if len(cells) > 2 else ''}</td></tr>")
    return [*rows, "</table></details>"]


def _topology_series(out: Path, records: list[dict[str, Any]]) -> list[tuple[str, list[tuple[str, list[float], float | None]]]]:
    """Groups of cells that differ only by topology: the same workload on several."""
    from bench.report.plots import latencies, read_history
    groups: dict[tuple[str, str, int, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        c = r["cell"]
        groups[(c["scenario"], c["variant"], c["seed"], c["mode"], c["broker"])].append(r)
    found = []
    for key, rs in sorted(groups.items()):
        if len({r["cell"]["topology"] for r in rs}) < 2:
            continue
        series = []
        seen: set[str] = set()
        for r in rs:
            if r["topology"] in seen:   # the same topology reached through two groups
                continue
            seen.add(r["topology"])
            events = read_history(out / "cells" / r["cell"]["id"])
            series.append((r["topology"], [v for _, v in latencies(events)],
                           r["metrics"]["messages_per_task"]))
        found.append((f"{key[0]} · {key[1]} · seed {key[2]} · {key[3]}", series))
    return found


def write_matrix_report(out: Path, matrix: Matrix) -> dict[str, Path]:
    from bench.report.html import _e, _plots, page
    from bench.report.plots import duplicates, save, topology_comparison, verdict_grid
    records = collect(out, matrix)
    (out / "matrix.json").write_text(json.dumps(
        {"name": matrix.name, "cells": len(matrix.cells), "finished": len(records),
         "as_expected": sum(r["passed"] for r in records), "coverage": coverage(records),
         "latency": latency_groups(records), "records": records}, indent=2))
    md = table_md(matrix, records) + "\n" + latency_md(records) + "\n" + coverage_md(records)
    plots: dict[str, dict[str, Path]] = {}
    captions = {}
    if records:
        plots["verdicts"] = save(verdict_grid(records, f"matrix {matrix.name}"), out / "plots",
                                 "verdicts")
        captions["verdicts"] = ("Every cell's verdicts: a seeded defect's row has its checker "
                                "lilac (FALSE, as expected); red is a FALSE nobody expected, "
                                "and a black frame any verdict the cell did not expect")
        plots["duplicates"] = save(duplicates(records, f"Duplicates per cell — {matrix.name}"),
                                   out / "plots", "duplicates")
        captions["duplicates"] = ("Per cell: duplicates that reached a node, and duplicates "
                                  "that ran a task again (a seeded defect's red bar is a bug found)")
        for i, (label, series) in enumerate(_topology_series(out, records)):
            name = f"topologies_{i + 1}"
            plots[name] = save(topology_comparison(series, f"Topologies — {label}"),
                               out / "plots", name)
            captions[name] = f"One workload ({label}) on several topologies"
    md += "\n" + "\n".join(f"![{n}](plots/{p['png'].name})" for n, p in plots.items()) + "\n"
    (out / "matrix.md").write_text(md)
    checkers = _checkers(records)
    body = [f"<h1>matrix {_e(matrix.name)}</h1><p>{_e(matrix.description)}</p>",
            f"<p>{len(records)} of {len(matrix.cells)} cells finished; "
            f"{sum(r['passed'] for r in records)} as expected.</p>",
            "<table class='cells'><tr><th>cell</th><th>as expected</th>"
            + "".join(f"<th class='vertical'><span>{_e(c)}</span></th>" for c in checkers)
            + "<th>requests</th><th>p50 / p99 ms</th><th>dup delivered / executed</th>"
              "<th>wall s</th></tr>"]
    for r in records:
        c, m = r["cell"], r["metrics"]
        lat = m["latency_ms"]
        cells = "".join(
            f"<td class='{r['verdicts'].get(k, 'unknown')}{' off' if k in r['wrong'] else ''}'>"
            f"{SHORT[r['verdicts'].get(k, 'unknown')]}</td>" for k in checkers)
        p = "–" if lat["p50"] is None else f"{lat['p50']:.0f} / {lat['p99']:.0f}"
        link = cell_dir(out, _cell(c)).relative_to(out)
        report = "report.html" if (out / link / "report.html").exists() else "report.md"
        body.append(
            f"<tr{'' if r['passed'] else ' class=off'}><td><a href='{_e(link)}/{report}'>"
            f"{_e(c['id'])}</a></td><td>{'yes' if r['passed'] else '<b>NO</b>'}</td>{cells}"
            f"<td>{m['requests']}</td><td>{p}</td>"
            f"<td>{m['duplicates_delivered']} / {m['duplicates_executed']}</td>"
            f"<td>{r['wall_s']:.1f}</td></tr>")
    body.append("</table><p class='muted'>T true, F false, ? unknown; a red cell is a verdict "
                "the cell did not expect.</p>")
    body += _latency_html(records)
    body += ["<h2>Plots</h2>", *_plots(plots, captions, out)]
    body += _coverage_html(records)
    (out / "matrix.html").write_text(page(f"matrix {matrix.name}", body))
    return {"md": out / "matrix.md", "html": out / "matrix.html", "json": out / "matrix.json"}


def _cell(c: dict[str, Any]) -> Any:
    from bench.matrix import Cell
    return Cell(c["group"], c["scenario"], c["variant"], c["topology"], c["seed"], c["mode"],
                c["broker"], c.get("nodes", "inproc"), c.get("path", ""), c.get("mqtt", ""))
