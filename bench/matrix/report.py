"""A matrix's aggregated table, plots and reports: `results/<matrix-id>/matrix.{json,md,html}`
and `plots/`, rebuilt from the finished cells' records whenever the matrix ends."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.matrix import Matrix, cell_dir, cell_protocols, collect

SHORT = {"true": "T", "false": "F", "unknown": "?"}


def _checkers(records: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in records:
        for name in r["verdicts"]:
            if name not in names:
                names.append(name)
    return names


def protocol_of(r: dict[str, Any]) -> str:
    """The protocol a cell's nodes spoke: recorded, or (a record from before) the one whose
    checkers its verdicts are; "" where neither says."""
    from bench.checks import protocol_judged
    return str(r.get("protocol") or protocol_judged(r["verdicts"]) or "")


def by_protocol(records: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The records grouped by the protocol they spoke, in the order each first appears: a
    cell is shown only its own protocol's checkers (and the generic ones), never another's
    as if it had judged nothing."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(protocol_of(r), []).append(r)
    return list(groups.items())


def _title(protocol: str) -> str:
    from bench.checks import protocol_titles
    return protocol_titles().get(protocol, protocol or "protocol not recorded")


def _group_checkers(protocol: str, records: list[dict[str, Any]]) -> list[str]:
    from bench.checks import checkers_for
    return list(checkers_for(protocol)) if protocol else _checkers(records)


def table_md(matrix: Matrix, records: list[dict[str, Any]]) -> str:
    passed = sum(r["passed"] for r in records)
    out = [f"# matrix {matrix.name}", "", matrix.description, "",
           f"{len(records)} of {len(matrix.cells)} cells finished; {passed} as expected, "
           f"{len(records) - passed} not."]
    groups = by_protocol(records)
    for protocol, rs in groups:
        checkers = _group_checkers(protocol, rs)
        out += ["", *([f"## {_title(protocol)}", ""] if len(groups) > 1 else []),
                "Verdict letters, in order: "
                + ", ".join(f"{i + 1} {c}" for i, c in enumerate(checkers))
                + " (T true, F false, ? unknown; **bold**: not what the cell expects; a "
                  "cell its broker refused shows `refused`).", "",
                "| cell | as expected | verdicts | requests | p50 / p99 ms | "
                "dup delivered / executed | wall s |",
                "|---|---|---|---|---|---|---|"]
        for r in rs:
            c, m = r["cell"], r["metrics"]
            letters = "refused" if "refused" in r else "".join(
                f"**{SHORT[r['verdicts'][k]]}**" if k in r["wrong"]
                else SHORT[r["verdicts"].get(k, "unknown")] for k in checkers)
            lat = m["latency_ms"]
            p = "–" if lat["p50"] is None else f"{lat['p50']:.0f} / {lat['p99']:.0f}"
            out.append(f"| [{c['id']}](cells/{c['id']}/report.md) | "
                       f"{'yes' if r['passed'] else 'NO'} | `{letters}` | {m['requests']} | {p} "
                       f"| {m['duplicates_delivered']} / {m['duplicates_executed']} | "
                       f"{r['wall_s']:.1f} |")
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
    from bench.report.readings import latencies, read_history
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


def _place_of(c: dict[str, Any]) -> str:
    from bench.substrates import substrate
    return " ".join([c["mode"], *substrate(c["mode"]).cell_name(c["broker"], c["nodes"])])


def broker_grid(matrix: Matrix, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Scenario (and variant, and MQTT version) by broker, when the matrix's cells run on
    more than one broker: each square the cell's outcome — as expected, FALSE where the
    scenario pins that broker's verdict FALSE (`[expect.<broker>]`: a known defect), FALSE
    or UNKNOWN where nothing expected it, refused by the broker at the start (its line), or
    left out (a version the broker does not speak). None: one broker only."""
    cells = [(r["cell"], r) for r in records] + [
        (c.to_json(), {"skipped": why}) for c, why in matrix.skipped]
    if len({c["broker"] for c, _ in cells}) < 2:
        return None
    places: list[str] = []
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for c, r in cells:
        place = _place_of(c)
        if place not in places:
            places.append(place)
        row = " · ".join([c["scenario"], *([c["variant"]] if c["variant"] != "reference"
                                           else []), *([f"MQTT {c['mqtt']}"] if c.get("mqtt")
                                                       else [])])
        rows.setdefault(row, {})[place] = _square(c, r)
    from bench.substrates import substrate

    def order(place: str) -> tuple[str, int]:   # each substrate's brokers in its own order
        mode, broker = (place.split() + [""])[:2]
        known = substrate(mode).brokers()
        return mode, known.index(broker) if broker in known else len(known)
    return {"places": sorted(places, key=order), "rows": rows}


def _square(c: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    if "skipped" in r:
        return {"mark": "skip", "text": "not run", "why": r["skipped"]}
    if "refused" in r:
        return {"mark": "refused", "text": "refused", "why": r["refused"], "id": c["id"]}
    falses = [k for k, v in r["verdicts"].items() if v == "false"]
    wrong = dict(r["wrong"])
    if any(r["verdicts"].get(k) == "false" for k in wrong):
        mark = "false"
    elif wrong:
        mark = "unknown"
    else:
        mark = "pinned" if falses else "ok"
    unknown = [k for k in wrong if r["verdicts"].get(k) != "false"]
    text = "; ".join([*(f"{k} FALSE" for k in falses),
                      *(f"{k} {str(r['verdicts'].get(k)).upper()}" for k in unknown)]) \
        or "as expected"
    return {"mark": mark, "text": text, "id": c["id"],
            "why": "; ".join(f"{k} {v} (expected {r['expect'].get(k)})" for k, v in wrong.items())}


GRID_LEGEND = ("green: every verdict as the scenario expects on that broker; lilac: FALSE "
               "where the scenario pins it FALSE on that broker (a known defect, "
               "`[expect.<broker>]`); red: a FALSE nobody expected; amber: a verdict "
               "nothing expected (UNKNOWN); grey: refused by the broker at the start (its "
               "line), or not run (a version it does not speak). Each square links to the "
               "cell's report.")


def _grid_md(grid: dict[str, Any]) -> list[str]:
    out = ["## Brokers", "", GRID_LEGEND, "",
           "| scenario | " + " | ".join(grid["places"]) + " |",
           "|---" * (len(grid["places"]) + 1) + "|"]
    for row, squares in grid["rows"].items():
        parts = []
        for p in grid["places"]:
            sq = squares.get(p)
            if sq is None:
                parts.append("")
            elif "id" in sq:
                page = "" if sq["mark"] == "refused" else "report.md"
                parts.append(f"[{sq['text']}](cells/{sq['id']}/{page})")
            else:
                parts.append(sq["text"])
        out.append(f"| {row} | " + " | ".join(parts) + " |")
    reasons = [(row, p, sq["why"]) for row, squares in grid["rows"].items()
               for p, sq in squares.items() if sq["mark"] in ("refused", "skip")]
    if reasons:
        out += ["", *(f"- {row} on {p}: {why}" for row, p, why in reasons)]
    return out + [""]


def _grid_html(out: Path, grid: dict[str, Any]) -> list[str]:
    from bench.report.html import _e
    body = ["<h2>Brokers</h2>", f"<p class='muted'>{_e(GRID_LEGEND)}</p>",
            "<table class='grid'><tr><th>scenario</th>"
            + "".join(f"<th>{_e(p)}</th>" for p in grid["places"]) + "</tr>"]
    notes: list[str] = []     # why a square is grey, below the table, numbered
    for row, squares in grid["rows"].items():
        tds = []
        for p in grid["places"]:
            sq = squares.get(p)
            if sq is None:
                tds.append("<td></td>")
                continue
            text = _e(sq["text"])
            if "id" in sq:
                folder = out / "cells" / sq["id"]
                report = "report.html" if (folder / "report.html").exists() else \
                    "report.md" if (folder / "report.md").exists() else "history.jsonl"
                text = f"<a href='cells/{_e(sq['id'])}/{report}'>{text}</a>"
            if sq["mark"] in ("refused", "skip"):
                notes.append(f"{row} on {p}: {sq['why']}")
                text += f" <sup>{len(notes)}</sup>"
            tds.append(f"<td class='g-{sq['mark']}' title='{_e(sq.get('why', ''))}'>{text}</td>")
        body.append(f"<tr><td>{_e(row)}</td>{''.join(tds)}</tr>")
    body.append("</table>")
    if notes:
        body.append("<ol class='muted' style='font-size:12px'>"
                    + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ol>")
    return body


#: one plot of the report: what draws it, with what, into which folder, under which name
Job = tuple[str, tuple[Any, ...], Path, str]


def _draw(job: Job, formats: tuple[str, ...] = ("png", "svg")) -> dict[str, Path]:
    """One plot of the report, drawn and saved in `formats`."""
    from bench.report.plots import duplicates, save, topology_comparison, verdict_grid
    kind, args, folder, name = job
    draw = {"verdicts": verdict_grid, "duplicates": duplicates,
            "topologies": topology_comparison}[kind]
    return save(draw(*args), folder, name, formats)


def _draw_one_format(task: tuple[Job, str]) -> dict[str, Path]:
    job, fmt = task
    return _draw(job, (fmt,))


def _draw_all(jobs: list[Job], workers: int,
              early: EarlyGrids | None = None) -> list[dict[str, Path]]:
    """Every plot: one after another, or each of its formats in a process of its own,
    `workers` at a time. Matplotlib's saving was most of the report's time, after the last
    cell, when a second worker had nothing left to do; a large matrix's verdict grid alone
    (some 300 rows of text) takes seconds per format. The processes come from a fork server
    that imported the plots first (the matrix's controller runs pytest-xdist's threads:
    forking it could copy a held lock). A plot `early` began drawing while cells still ran,
    from the records the report has too, is taken from there."""
    ready = {i: d for i, job in enumerate(jobs)
             if early is not None and (d := early.drawn(job)) is not None}
    rest = [job for i, job in enumerate(jobs) if i not in ready]
    if workers <= 1 or not rest:
        drawn_rest = [_draw(j) for j in rest]
    else:
        tasks = [(job, fmt) for job in rest for fmt in ("png", "svg")]
        with plot_server().Pool(min(workers, len(tasks))) as pool:
            drawn = pool.map(_draw_one_format, tasks, chunksize=1)
        drawn_rest = [drawn[2 * i] | drawn[2 * i + 1] for i in range(len(rest))]
    got = iter(drawn_rest)
    if early is not None:
        early.close()
    return [ready[i].get() if i in ready else next(got) for i in range(len(jobs))]


class _Drawing:
    """A plot's two formats being drawn in the early pool."""

    def __init__(self, pool: Any, job: Job) -> None:
        self.job = job
        self.formats = [pool.apply_async(_draw_one_format, ((job, fmt),))
                        for fmt in ("png", "svg")]

    def get(self) -> dict[str, Path]:
        drawn: dict[str, Path] = {}
        for f in self.formats:
            drawn |= f.get()
        return drawn


class EarlyGrids:
    """A matrix of several protocols on several workers: each protocol's verdict grid begun
    as soon as its last cell is finished, while the other protocols' cells still run (the
    seed protocol's grid, some 200 rows of text, was seconds of the report after the last
    cell, when one worker had nothing left to do). The report takes a grid from here only
    where it would draw the very same records; the last protocol's is the report's."""

    def __init__(self, out: Path, matrix: Matrix) -> None:
        self.out, self.matrix = out, matrix
        self._left: dict[str, set[str]] | None = None   # protocol -> its unfinished cells
        self._pool: Any = None
        self.begun: list[str] = []                      # the protocols whose grid was begun
        self.started: dict[str, _Drawing] = {}         # plot name -> its drawing

    def _protocols(self) -> dict[str, set[str]]:
        """Each protocol's cells; none where a scenario cannot be read: nothing is drawn
        early."""
        cells: dict[str, set[str]] = {}
        for cell_id, protocol in cell_protocols(self.matrix).items():
            cells.setdefault(protocol, set()).add(cell_id)
        return cells

    def finished(self, cell_id: str) -> None:
        """A cell is finished (its record written): a protocol's grid begun if that was
        its last cell and others are still to run."""
        if self._left is None:
            self._left = self._protocols()
        for ids in self._left.values():
            ids.discard(cell_id)
        if len(self._left) < 2 or all(not ids for ids in self._left.values()):
            return
        for protocol, ids in self._left.items():
            if ids or protocol in self.begun:
                continue
            self.begun.append(protocol)
            records = [r for r in collect(self.out, self.matrix) if protocol_of(r) == protocol]
            if self._pool is None:
                self._pool = plot_server().Pool(2)
            job = _verdict_job(self.out, self.matrix, protocol, records)
            self.started[job[3]] = _Drawing(self._pool, job)

    def drawn(self, job: Job) -> _Drawing | None:
        """The early drawing of `job`, if one was begun of the same plot and records."""
        d = self.started.get(job[3])
        return d if d is not None and d.job == job else None

    def close(self) -> None:
        """No more plots begun (those begun are still collected by `get`)."""
        if self._pool is not None:
            self._pool.close()


def plot_server() -> Any:
    """The fork server the report's plots are drawn from, started now if it is not yet: a
    matrix on several workers starts it as its cells begin, so that its imports
    (matplotlib's a second of them) are done by the time the last cell is."""
    import multiprocessing
    from multiprocessing import forkserver
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.report.plots", "bench.matrix.report"])
    forkserver.ensure_running()
    return context


def _verdict_jobs(out: Path, matrix: Matrix,
                  records: list[dict[str, Any]]) -> list[tuple[Job, str]]:
    """The verdict grid: one, or one per protocol where the matrix has several (each its
    own checkers as columns, no column of another protocol's greyed out — and each a plot
    of its own to draw beside the others), the largest first."""
    caption = ("Every cell's verdicts: a seeded defect's row has its checker lilac (FALSE, as "
               "expected); red is a FALSE nobody expected, and a black frame any verdict the "
               "cell did not expect")
    groups = by_protocol(records)
    if len(groups) == 1:
        return [(("verdicts", (records, f"matrix {matrix.name}"), out / "plots", "verdicts"),
                 caption)]
    return [(_verdict_job(out, matrix, protocol, rs), f"{_title(protocol)}. {caption}")
            for protocol, rs in sorted(groups, key=lambda g: -len(g[1]))]


def _verdict_job(out: Path, matrix: Matrix, protocol: str, records: list[dict[str, Any]]) -> Job:
    """One protocol's verdict grid, in a matrix of several."""
    return ("verdicts", (records, f"matrix {matrix.name} — {_title(protocol)}"), out / "plots",
            f"verdicts_{protocol.replace('-', '_')}")


def write_matrix_report(out: Path, matrix: Matrix, workers: int = 1,
                        early: EarlyGrids | None = None) -> dict[str, Path]:
    """The matrix's report from its finished cells; its plots drawn `workers` at a time (a
    grid `early` began while cells ran taken from there)."""
    from bench.report.html import _e, _plots, page
    records = collect(out, matrix)
    (out / "matrix.json").write_text(json.dumps(
        {"name": matrix.name, "cells": len(matrix.cells), "finished": len(records),
         "as_expected": sum(r["passed"] for r in records), "coverage": coverage(records),
         "latency": latency_groups(records), "records": records,
         "skipped": [{"cell": c.to_json(), "why": why} for c, why in matrix.skipped]},
        indent=2))
    grid = broker_grid(matrix, records)
    md = table_md(matrix, records) + "\n" + (
        "\n".join(_grid_md(grid)) + "\n" if grid is not None else "") + latency_md(
        records) + "\n" + coverage_md(records)
    plots: dict[str, dict[str, Path]] = {}
    captions = {}
    if records:
        jobs: list[Job] = []
        for job, caption in _verdict_jobs(out, matrix, records):
            jobs.append(job)
            captions[job[3]] = caption
        jobs.append(("duplicates", (records, f"Duplicates per cell — {matrix.name}"),
                     out / "plots", "duplicates"))
        captions["duplicates"] = ("Per cell: duplicates that reached a node, and duplicates "
                                  "that ran a task again (a seeded defect's red bar is a bug found)")
        for i, (label, series) in enumerate(_topology_series(out, records)):
            name = f"topologies_{i + 1}"
            jobs.append(("topologies", (series, f"Topologies — {label}"), out / "plots", name))
            captions[name] = f"One workload ({label}) on several topologies"
        for (_kind, _args, _folder, name), paths in zip(jobs, _draw_all(jobs, workers, early),
                                                        strict=True):
            plots[name] = paths
    md += "\n" + "\n".join(f"![{n}](plots/{p['png'].name})" for n, p in plots.items()) + "\n"
    (out / "matrix.md").write_text(md)
    body = [f"<h1>matrix {_e(matrix.name)}</h1><p>{_e(matrix.description)}</p>",
            f"<p>{len(records)} of {len(matrix.cells)} cells finished; "
            f"{sum(r['passed'] for r in records)} as expected.</p>",
            *(_grid_html(out, grid) if grid is not None else [])]
    groups = by_protocol(records)
    for protocol, rs in groups:
        checkers = _group_checkers(protocol, rs)
        if len(groups) > 1:
            body.append(f"<h2>{_e(_title(protocol))}: {len(rs)} cells</h2>")
        body.append("<table class='cells'><tr><th>cell</th><th>as expected</th>"
                    + "".join(f"<th class='vertical'><span>{_e(c)}</span></th>"
                              for c in checkers)
                    + "<th>requests</th><th>p50 / p99 ms</th><th>dup delivered / executed</th>"
                      "<th>wall s</th></tr>")
        for r in rs:
            c, m = r["cell"], r["metrics"]
            lat = m["latency_ms"]
            cells = (f"<td colspan='{len(checkers)}' class='muted'>refused: "
                     f"{_e(r['refused'])}</td>") if "refused" in r else "".join(
                f"<td class='{r['verdicts'].get(k, 'unknown')}"
                f"{' off' if k in r['wrong'] else ''}'>"
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
        body.append("</table>")
    body.append("<p class='muted'>T true, F false, ? unknown; a red cell is a verdict the "
                "cell did not expect. Each protocol's cells are shown its own checkers "
                "only.</p>")
    body += _latency_html(records)
    body += ["<h2>Plots</h2>", *_plots(plots, captions, out)]
    body += _coverage_html(records)
    (out / "matrix.html").write_text(page(f"matrix {matrix.name}", body))
    return {"md": out / "matrix.md", "html": out / "matrix.html", "json": out / "matrix.json"}


def _cell(c: dict[str, Any]) -> Any:
    from bench.matrix import Cell
    return Cell(c["group"], c["scenario"], c["variant"], c["topology"], c["seed"], c["mode"],
                c["broker"], c.get("nodes", "inproc"), c.get("path", ""), c.get("mqtt", ""))
