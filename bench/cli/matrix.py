"""`matrix`: cells in parallel, resumable, with an aggregated report."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_INVALID,
    Sub,
)

if TYPE_CHECKING:
    pass


def add_matrix(sub: Sub) -> None:
    mx = sub.add_parser(
        "matrix", help="run a matrix of cells in parallel; resumable; aggregated report",
        description="Run every cell of MATRIX_FILE (scenarios x topologies x variants x seeds x "
                    "modes x brokers x MQTT versions, see scenarios/README.md) as one pytest item each, N at a "
                    "time through pytest-xdist. Cells land in results/<matrix-id>/cells/<cell>/; "
                    "a finished cell is never run again, so a killed matrix resumes where it "
                    "stopped (--fresh starts over). At the end: matrix.md, matrix.html (plots "
                    "inline) and matrix.json.\n\nexit codes: 0 every cell shows what it "
                    "expects (a defect: its checker FALSE), 1 some cell does not, 2 interrupted, "
                    "3 invalid matrix file or arguments, 5 -k or --lf selected no cell")
    mx.add_argument("matrix_file", type=Path, help="a *.matrix.toml file")
    mx.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="cells run at once (pytest-xdist workers; default 1)")
    mx.add_argument("--id", help="matrix id: the results folder name (default: the file's name)")
    mx.add_argument("--fresh", action="store_true", help="discard finished cells and start over")
    mx.add_argument("-k", dest="keyword", metavar="EXPR",
                    help="only cells whose id matches (pytest -k), e.g. 'gate and not live'")
    mx.add_argument("--lf", action="store_true", help="only the cells that failed last time")
    mx.add_argument("--junitxml", type=Path, metavar="PATH", help="also write JUnit XML")
    mx.add_argument("--tx", action="append", default=[], metavar="GATEWAY",
                    help="run cells on another machine: an execnet gateway, as pytest-xdist "
                         "takes it (repeatable; '3*ssh=…' is three workers there). The host "
                         "needs this project checked out and installed, and the gateway "
                         "starts in that checkout: e.g. ssh=me@hostb//python=/opt/a2a-bench/"
                         ".venv/bin/python//chdir=/opt/a2a-bench (docs/matrices-and-reports.md: "
                         "Matrices across machines). Each finished cell comes back into "
                         "this machine's results folder; -j is then ignored")
    mx.set_defaults(handler=_matrix)


def _matrix(args: argparse.Namespace) -> int:
    import pytest

    from bench.matrix import finished, load_matrix
    from bench.spec.distribution import SpecError
    try:
        matrix = load_matrix(args.matrix_file)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.jobs < 1:
        print("a2a-bench: -j must be >= 1", file=sys.stderr)
        return EXIT_INVALID
    out = Path("results") / (args.id or matrix.name)
    if args.fresh:
        shutil.rmtree(out / "cells", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    copy = out / f"{matrix.name}.matrix.toml"
    for old in out.glob("*.matrix.toml"):
        if old != copy:
            old.unlink()
    shutil.copyfile(args.matrix_file, copy)
    ini = out / "pytest.ini"
    # this matrix's own settings and cache (--lf), not the repo's; our lines replace the [n%]
    ini.write_text("[pytest]\nconsole_output_style = classic\n")
    # only pytest's own plugins, ours and (with workers) xdist: the others installed beside
    # it (hypothesis's, anyio's) are nothing to a matrix, and hypothesis's imported itself at
    # the session's end, after the last cell — in every process, on every run
    argv = [str(copy), "-c", str(ini), "--rootdir", str(out), "--disable-plugin-autoload",
            "-p", "bench.matrix.plugin", "--matrix-out", str(out), "--no-header", "-rfE"]
    if args.tx:
        # every host reads the matrix file and the scenarios at the same place in its own
        # checkout, runs into its own results folder and ships each cell back
        source = args.matrix_file
        if source.is_absolute() or ".." in source.parts or len(source.parts) < 2 \
                or not source.exists():
            print(f"a2a-bench: --tx: {args.matrix_file} must be a file in a folder of the "
                  "project, named relative to it (scenarios/x.matrix.toml): pytest-xdist "
                  "sends that folder, scenarios/ and topologies/ to every host",
                  file=sys.stderr)
            return EXIT_INVALID
        sent = sorted(d for d in {source.parts[0], "scenarios", "topologies"} if Path(d).is_dir())
        done = [c.id for c in matrix.cells if finished(out, c) is not None]
        # one token per option: xdist rewrites every argument that names an existing path
        # (the matrix file, absolute) relative to the folder it sends
        argv = [str(source.resolve()), "-o", "console_output_style=classic", "--rootdir=.",
                "--disable-plugin-autoload", "-p", "xdist.plugin", "-p", "bench.matrix.plugin",
                f"--matrix-out={out}", "--matrix-ship",
                f"--matrix-skip={','.join(done)}", "--no-header", "-rfE", "--dist=load",
                *(f"--tx={tx}" for tx in args.tx), *(f"--rsyncdir={d}" for d in sent)]
        if done:
            print(f"{len(done)} cells finished before: left out")
    elif args.jobs > 1:
        argv += ["-p", "xdist.plugin", "-n", str(args.jobs)]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.lf:
        argv += ["--lf"]
    if args.junitxml:
        argv += ["--junitxml", str(args.junitxml)]
    where = f"on {len(args.tx)} gateways" if args.tx else f"{args.jobs} at a time"
    print(f"a2a-bench matrix {args.matrix_file}: {len(matrix.cells)} cells in the file, "
          f"{where} -> {out}/")
    return int(pytest.main(argv))
