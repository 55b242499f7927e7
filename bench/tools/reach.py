"""The branches of the judged code the shipped matrices run (coverage.py). What the shipped
matrices execute of the code their verdicts judge — the reference implementations (the seed
protocol's node core, the A2A-over-MQTT profile's responder and requester), the simulated
broker and the fault code — measured with coverage.py's branch coverage over the matrices'
simulated cells alone, no unit test. A bug in a branch no scenario runs cannot fail a
verdict: this says where those branches are.

    python -m bench.tools.reach                        # the shipped matrices (default, reach)
    python -m bench.tools.reach scenarios/default.matrix.toml --workers 2 --out results/reach

It prints a table per module (statements and branches reached; the lines
`tests/data/unreached.toml` allows to stay unreached, each with its reason, left out and
counted apart), writes coverage.py's HTML report into OUT/html/ and OUT/reach.json (per
module its figures and the lines and branch arcs no cell reached: what `--compare` reads),
and exits 0. `--compare BASE.json` exits 1 when this run leaves a line unreached that BASE
reached or did not have (a new branch no scenario executes), naming each, except the lines
`tests/data/unreached.toml` lists."""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import multiprocessing
import os
import re
import sys
import time
import tomllib
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.tools import Parser

ROOT = Path(__file__).resolve().parents[2]
#: what the verdicts judge, as coverage.py's `source` (packages and modules, dotted)
MEASURED = ("bench.core", "bench.protocols.seed", "bench.protocols.a2a_mqtt",
            "bench.substrates.sim.broker", "bench.faults")
#: of those, files that hold no behaviour a scenario could run (the profile's clause table:
#: text for the docs and conform), or that are not what the verdicts judge (the profile's
#: checkers and what a deployment asks of it)
OMITTED = (*(f"bench/protocols/a2a_mqtt/{m}.py" for m in ("clauses", "deploy", "settings",
                                                         "__init__", "explore", "conform")),
           "bench/protocols/a2a_mqtt/rules/*",
           *(f"bench/protocols/seed/{m}.py" for m in ("__init__", "explore", "conform")),
           "bench/protocols/seed/rules/*")
#: what no input can reach by construction, left out of the figures as coverage.py's own
#: exclusions: a match's last arm that only proves the others exhaustive (mypy checks it)
EXCLUDED = (r"case _:\n\s*assert_never\(", r"assert_never\(")
#: lines allowed to stay unreached, each with its reason (a table per module: `"line text" =
#: "reason"`)
EXCEPTIONS = ROOT / "tests" / "data" / "unreached.toml"
#: the key that allows a whole module to stay unreached (one the simulation never runs)
WHOLE = "*"
#: the main branch's unreached lines (per module, their text): what CI compares a change with
BASELINE = ROOT / "tests" / "data" / "reach-baseline.json"
#: the shipped matrices whose simulated cells reach the judged code: the default one (the
#: fast lane's), and reach.matrix.toml, the cells it takes to go further (CI runs both)
SHIPPED = (ROOT / "scenarios" / "default.matrix.toml", ROOT / "scenarios" / "reach.matrix.toml")
#: the modes whose cells run here: the simulation (live and docker cells are skipped)
MODES = ("sim",)


def _coverage(data: str, suffix: bool = False) -> Any:
    """coverage.py as reach measures: branches, of MEASURED less OMITTED, EXCLUDED left out."""
    import coverage
    cov = coverage.Coverage(data_file=data, data_suffix=suffix, branch=True,
                            source=list(MEASURED), omit=[str(ROOT / o) for o in OMITTED])
    for pattern in EXCLUDED:
        cov.exclude(pattern)
    return cov


def _batch(cells: list[dict[str, Any]], out: str, data: str) -> tuple[int, int]:
    """Run `cells` (a matrix Cell's fields each: a Cell itself would import the bench as it
    is unpickled, before coverage starts) under coverage in this process, saving its data
    file under `data`: (cells run, cells whose run raised)."""
    cov = _coverage(data, suffix=True)
    failed = 0
    cov.start()     # before the bench is imported (a fresh process): its import lines count
    try:
        from bench.matrix import Cell, run_cell
        for raw in cells:
            try:
                run_cell(Path(out), Cell(**raw))
            except Exception as exc:   # noqa: BLE001 - one cell's failure costs its own lines only
                failed += 1
                print(f"reach: cell {raw.get('scenario')} raised {exc!r}", file=sys.stderr)
    finally:
        cov.stop()
        cov.save()
    return len(cells), failed


def measure(matrices: Path | list[Path], out: Path, workers: int,
            say: Any = print) -> dict[str, Any]:
    """Every simulated cell of `matrices` (a cell in two of them runs once) run under
    coverage, in `workers` processes; the combined figures per module."""
    from bench.matrix import load_matrix
    files = [matrices] if isinstance(matrices, Path) else matrices
    every = {c.id: c for f in files for c in load_matrix(f).cells}
    cells = [c for c in every.values() if c.mode in MODES]
    name = " + ".join(f.name for f in files)
    out.mkdir(parents=True, exist_ok=True)
    data = str(out / ".coverage")
    for stale in out.glob(".coverage*"):
        stale.unlink()
    raw = [dataclasses.asdict(c) for c in cells]
    share = [raw[i::workers] for i in range(workers)]
    say(f"reach: {len(cells)} simulated cells of {name} ({len(every) - len(cells)} "
        f"of other modes skipped) in {workers} worker(s), under coverage.py (branch)")
    t0 = time.perf_counter()
    # fresh interpreters ("spawn"): a forked one would hold the bench imported already
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_batch, share, [str(out / "cells")] * workers, [data] * workers))
    wall = time.perf_counter() - t0
    cov = _coverage(data)
    cov.combine([str(p) for p in out.glob(".coverage.*")])
    cov.save()
    cov.html_report(directory=str(out / "html"), title=f"a2a-bench reach: {name}")
    report = _figures(cov)
    report |= {"matrix": name, "cells": sum(n for n, _f in done),
               "cells_failed": sum(f for _n, f in done), "wall_s": round(wall, 1),
               "measured": list(MEASURED)}
    (out / "reach.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _figures(cov: Any) -> dict[str, Any]:
    """Per module (its path under the repository): statements and branches, how many were
    reached, and what was not (lines; branch arcs as [from, to], to < 0 an exit). The lines
    EXCEPTIONS allows to stay unreached (each with its reason) are left out of the figures
    and counted apart (`excluded`); `raw_*` are the figures with them in."""
    data = cov.get_data()
    allowed = exceptions()
    modules: dict[str, Any] = {}
    for path in sorted(data.measured_files()):
        rel = str(Path(path).resolve().relative_to(ROOT))
        analysis = cov._analyze(path)     # coverage.py's own per-file analysis
        numbers = analysis.numbers
        missing_arcs = analysis.missing_branch_arcs()
        text = Path(path).read_text().splitlines()
        out = excused(text, {*analysis.missing, *missing_arcs}, allowed.get(rel, {}))
        stats = {n: st for n, st in analysis.branch_stats().items() if n not in out}
        statements = set(analysis.statements) - out
        branches = sum(total for total, _taken in stats.values())
        modules[rel] = {
            "statements": len(statements), "missed": len(set(analysis.missing) - out),
            "branches": branches,
            "branches_missed": branches - sum(taken for _total, taken in stats.values()),
            "excluded": len(out & set(analysis.statements)),
            "raw_statements": numbers.n_statements, "raw_missed": numbers.n_missing,
            "raw_branches": numbers.n_branches, "raw_branches_missed": numbers.n_missing_branches,
            "missing_lines": sorted(analysis.missing),
            "missing_arcs": sorted([a, b] for a, bs in missing_arcs.items() for b in bs),
            # each unreached line (or the line a branch not taken leaves) by its text: what
            # a comparison with another commit matches, whatever lines moved between them
            "unreached": sorted({text[n - 1].strip() for n in (
                *analysis.missing, *missing_arcs)} - {""}),
        }
    # every measured module, also one no cell imported (all of it unreached)
    for rel in _sources():
        modules.setdefault(rel, {"statements": None, "missed": None, "branches": None,
                                 "branches_missed": None, "excluded": 0,
                                 "missing_lines": [], "missing_arcs": [], "unreached": [],
                                 "never_imported": True})
    return {"modules": modules, "total": _total(modules.values())}


#: a line's trailing comment (what is left is its code: an `if ...:  # why` opens a block)
_CODE = re.compile(r"\s+#[^\"']*$")


def excused(text: list[str], unreached: set[int], listed: dict[str, str]) -> set[int]:
    """The lines (numbers) of a module, its source `text`, that the exceptions `listed` for
    it leave out: every line if it is listed whole ("*"); else each unreached line whose
    text is listed (a line of the same text that ran needs no excuse) and, where that line
    opens a block (an `if`, an `except`, a `case`), the block under it."""
    if WHOLE in listed:
        return set(range(1, len(text) + 1))
    out = set()
    for n in sorted(unreached):
        line = text[n - 1]
        if line.strip() not in listed:
            continue
        out.add(n)
        if _CODE.sub("", line).rstrip().endswith(":"):
            indent = len(line) - len(line.lstrip())
            for m in range(n + 1, len(text) + 1):
                body = text[m - 1]
                if body.strip() and len(body) - len(body.lstrip()) <= indent:
                    break
                out.add(m)
    return out


def _sources() -> list[str]:
    out = []
    for dotted in MEASURED:
        base = ROOT / Path(*dotted.split("."))
        files = [base.with_suffix(".py")] if base.with_suffix(".py").exists() \
            else sorted(base.rglob("*.py"))
        out += [str(f.relative_to(ROOT)) for f in files
                if not any(fnmatch.fnmatch(str(f.relative_to(ROOT)), o) for o in OMITTED)]
    return out


def _total(modules: Iterable[dict[str, Any]]) -> dict[str, Any]:
    known = [m for m in modules if m["statements"] is not None]

    def total(key: str) -> int:
        return sum(m[key] for m in known)
    s, sm, b, bm = (total(k) for k in ("statements", "missed", "branches", "branches_missed"))
    rb, rbm = total("raw_branches"), total("raw_branches_missed")
    return {"statements": s, "missed": sm, "branches": b, "branches_missed": bm,
            "statement_pct": _pct(s - sm, s), "branch_pct": _pct(b - bm, b),
            "excluded": sum(m["excluded"] for m in known),
            "raw_branches": rb, "raw_branches_missed": rbm, "raw_branch_pct": _pct(rb - rbm, rb)}


def _pct(n: int, of: int) -> float:
    return round(100.0 * n / of, 1) if of else 100.0


def render(report: dict[str, Any]) -> str:
    """The table: per module, statements and branches reached by the matrix's cells."""
    rows = [("module", "stmts", "reached", "branches", "reached", "excluded")]
    for rel, m in report["modules"].items():
        if m["statements"] is None:
            rows.append((rel, "-", "never imported", "-", "", ""))
            continue
        rows.append((rel, str(m["statements"]),
                     f"{_pct(m['statements'] - m['missed'], m['statements'])} %",
                     str(m["branches"]),
                     f"{_pct(m['branches'] - m['branches_missed'], m['branches'])} %",
                     str(m["excluded"] or "")))
    t = report["total"]
    rows.append(("total", str(t["statements"]), f"{t['statement_pct']} %", str(t["branches"]),
                 f"{t['branch_pct']} %", str(t["excluded"])))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    table = "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                      for r in rows)
    return (f"{table}\n(excluded: lines {EXCEPTIONS.relative_to(ROOT)} allows to stay "
            f"unreached, each with its reason, left out of the figures; with them in, "
            f"branches {t['raw_branch_pct']} %)")


def exceptions(path: Path = EXCEPTIONS) -> dict[str, dict[str, str]]:
    """Per module (its path), the lines (their text, stripped) allowed to stay unreached,
    each with why (tests/data/unreached.toml: a table per module, `"line text" = "why"`)."""
    if not path.exists():
        return {}
    raw = tomllib.loads(path.read_text())
    return {file: {str(k): str(v) for k, v in lines.items()} for file, lines in raw.items()}


def new_unreached(report: dict[str, Any], base: dict[str, Any],
                  allowed: dict[str, dict[str, str]]) -> list[str]:
    """The lines this report leaves unreached that `base` did not (by their text, so lines
    that only moved match): a branch added, or a scenario lost, that no cell executes —
    less the allowed ones. Each as `path: line text` with its line number."""
    out = []
    for rel, m in report["modules"].items():
        before = base["modules"].get(rel, {})
        if WHOLE in allowed.get(rel, {}):
            continue
        if m.get("never_imported") and not before.get("never_imported", False):
            out.append(f"{rel}: no cell imports it")
            continue
        fresh = set(m["unreached"]) - set(before.get("unreached", ()))
        if not fresh:
            continue
        text = (ROOT / rel).read_text().splitlines()
        numbers = set(m["missing_lines"]) | {a for a, _b in m["missing_arcs"]}
        left_out = excused(text, numbers, allowed.get(rel, {}))
        for n in sorted(numbers - left_out):
            if text[n - 1].strip() in fresh:
                out.append(f"{rel}:{n}: `{text[n - 1].strip()}`")
    return out


def baseline(report: dict[str, Any]) -> dict[str, Any]:
    """What a later run is compared with: per module its unreached lines' text, and whether
    no cell imported it."""
    return {"matrix": report["matrix"], "total": report["total"],
            "modules": {rel: {"unreached": m["unreached"],
                              **({"never_imported": True} if m.get("never_imported") else {})}
                        for rel, m in report["modules"].items()}}


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m bench.tools.reach", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("matrix", nargs="*", type=Path, default=list(SHIPPED),
                    help="the matrices whose simulated cells run (default: the shipped "
                         "ones, " + ", ".join(p.name for p in SHIPPED) + ")")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "reach")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--compare", type=Path, default=None, metavar="BASE.json",
                    help="exit 1 naming each line unreached here that BASE reached or lacked "
                         f"(the main branch's: {BASELINE.relative_to(ROOT)})")
    ap.add_argument("--write-baseline", action="store_true",
                    help=f"write this run's unreached lines to {BASELINE.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    for path in args.matrix:
        if not path.exists():
            print(f"reach: {path}: no such matrix file", file=sys.stderr)
            return 3
    report = measure(args.matrix, args.out, max(1, args.workers))
    print(render(report))
    print(f"{report['cells']} cells ({report['cells_failed']} raised) in {report['wall_s']} s; "
          f"report: {args.out / 'html' / 'index.html'}, {args.out / 'reach.json'}")
    if args.write_baseline:
        BASELINE.write_text(json.dumps(baseline(report), indent=1, sort_keys=True) + "\n")
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    if args.compare is not None:
        fresh = new_unreached(report, json.loads(args.compare.read_text()), exceptions())
        for line in fresh:
            print(f"reach: {line} is run by no cell of the matrix: a scenario that runs it, "
                  f"or its line in {EXCEPTIONS.relative_to(ROOT)} saying why not",
                  file=sys.stderr)
        return 1 if fresh else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
