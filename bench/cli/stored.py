"""Stored runs: listed (`runs`), side by side (`compare`), drawn (`report`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    Sub,
)

if TYPE_CHECKING:
    pass


def add_compare(sub: Sub) -> None:
    cmp_ = sub.add_parser("compare", help="show runs side by side (verdicts, counts, latency)",
                          description="Print the verdicts, message counts and latency quantiles "
                                      "of two or more run folders side by side, e.g. one "
                                      "scenario in sim and live, on amqtt and Mosquitto, or on "
                                      "several topologies. One matrix folder: its cells that ran "
                                      "one scenario on several topologies, substrates or "
                                      "brokers, side by side. Two or more matrix folders: cell "
                                      "by cell.")
    cmp_.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                      help="run folders (results/<run-id>/), or matrix folders")
    cmp_.add_argument("--json", action="store_true",
                      help="print the comparison as JSON, not the table")
    cmp_.set_defaults(handler=_compare)


def add_runs(sub: Sub) -> None:
    runs = sub.add_parser(
        "runs", help="the run folders under results/, newest first, and how each was judged",
        description="List the run folders under DIR (default results/), newest first: when, "
                    "scenario, variant, substrate and broker, the verdicts and the exit code; "
                    "an interrupted run says so. --keep N removes all but the newest N runs "
                    "(matrix and explore folders are never touched).")
    runs.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                      help="the folder holding the run folders (default: results/)")
    runs.add_argument("--keep", type=int, metavar="N", help="remove all but the newest N runs")
    runs.add_argument("--json", action="store_true",
                      help="print the list as JSON, one object per run")
    runs.set_defaults(handler=_runs)


def add_report(sub: Sub) -> None:
    rp = sub.add_parser("report", help="(re)draw plots and report.html for a run folder",
                        description="Draw the plots (PNG and SVG under plots/) and a "
                                    "self-contained report.html for RUN_DIR; for a matrix "
                                    "folder, its matrix.html and plots.")
    rp.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                    help="a run folder (results/<run-id>/) or a matrix folder")
    rp.set_defaults(handler=_report)


def _compare(args: argparse.Namespace) -> int:
    from bench.report.compare import (
        fidelity,
        is_matrix,
        load,
        matrix_groups,
        render,
        render_matrices,
        rows,
    )
    from bench.report.fidelity import render as fidelity_report
    dirs: list[Path] = args.run_dirs
    twice = next((d for i, d in enumerate(dirs)
                  if any(d.resolve() == e.resolve() for e in dirs[:i])), None)
    if twice is not None:      # it would be shown beside itself, as if two runs agreed
        print(f"a2a-bench: compare: {twice} is given twice", file=sys.stderr)
        return EXIT_INVALID
    try:
        if all(is_matrix(d) for d in dirs):
            if len(dirs) > 1:
                print(render_matrices(dirs))
                return EXIT_OK
            groups = matrix_groups(dirs[0])
            if not groups:
                print(f"{dirs[0]}: no scenario ran in more than one topology, substrate or broker")
            for title, runs in groups:
                if args.json:
                    print(json.dumps({"group": title, "rows": rows(runs),
                                      "fidelity": fidelity(runs)}))
                else:
                    print(f"== {title}\n{render(runs)}\n")
            if not args.json and (report := fidelity_report(dirs[0])) is not None:
                print(report)
            return EXIT_OK
        if len(dirs) < 2:
            print("a2a-bench: compare needs two or more run folders, or matrix folders",
                  file=sys.stderr)
            return EXIT_INVALID
        runs = [load(d) for d in dirs]
    except ValueError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps({"rows": rows(runs), "fidelity": fidelity(runs)}))
    else:
        print(render(runs))
    return EXIT_OK


def _runs(args: argparse.Namespace) -> int:
    from bench.report.runs import find_runs, prune, render
    if args.keep is not None and args.keep < 0:
        print(f"a2a-bench: --keep={args.keep} must be >= 0", file=sys.stderr)
        return EXIT_INVALID
    if not args.results.is_dir() and (args.results != Path("results") or args.results.exists()):
        # a folder named wrong would read as a folder with no runs in it
        print(f"a2a-bench: runs --results={args.results}: "
              f"{'not a folder' if args.results.exists() else 'no such folder'}",
              file=sys.stderr)
        return EXIT_INVALID
    found = find_runs(args.results)
    if args.keep is not None:
        gone = prune(found, args.keep)
        print(f"removed {len(gone)} run folder(s) under {args.results}, kept the newest "
              f"{min(args.keep, len(found))}", file=sys.stderr)
        found = found[:args.keep]
    print(json.dumps([r.to_json() for r in found], indent=2) if args.json else render(found))
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    if (args.run_dir / "matrix.json").exists():
        from bench.matrix import load_matrix
        from bench.matrix.report import write_matrix_report
        sources = sorted(args.run_dir.glob("*.matrix.toml"))
        if not sources:
            print(f"a2a-bench: {args.run_dir}: no *.matrix.toml copy in the matrix folder",
                  file=sys.stderr)
            return EXIT_INVALID
        paths = write_matrix_report(args.run_dir, load_matrix(sources[0]))
        print(f"{paths['md']}\n{paths['html']}")
        return EXIT_OK
    if not (args.run_dir / "history.jsonl").exists():
        print(f"a2a-bench: {args.run_dir}: not a run folder (no history.jsonl) nor a matrix "
              "folder (no matrix.json)", file=sys.stderr)
        return EXIT_INVALID
    from bench.report.html import write_run_report
    if not (args.run_dir / "summary.json").exists():   # a killed run: judge what it recorded
        from bench.run import rejudge
        try:
            rejudge(args.run_dir)
        except (ValueError, OSError) as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            return EXIT_INVALID
    print(write_run_report(args.run_dir))
    return EXIT_OK
