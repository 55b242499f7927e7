"""`explore`: random scenarios in simulation until a verdict fails, then shrink it."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
    out_folder,
)

if TYPE_CHECKING:
    pass


def add_explore(sub: Sub) -> None:
    xp = sub.add_parser(
        "explore", help="random scenarios in simulation until a verdict fails, then shrink it",
        description="Draw random scenarios (a topology family, a workload mix, 0-3 faults from\n"
                    "the whole catalogue, security faults included), run them in simulation N\n"
                    "at a time and judge each one, until a verdict is FALSE that the scenario\n"
                    "does not expect, or the budget is spent. The failing scenario is then\n"
                    "shrunk (fewer faults, nodes, seconds, requests, workload keys) while the\n"
                    "same checker still fails, and written as OUT/minimal.toml and\n"
                    "OUT/minimal-topology.toml, with the command that replays it. The same\n"
                    "--seed draws the same scenarios in the same order. OUT/explore.json holds\n"
                    "every run's verdicts and the situations each reached.\n\n"
                    "exit codes: 1 a failure was found, 0 none within the budget, 2 interrupted,\n"
                    "3 invalid arguments",
        epilog="example:\n  a2a-bench explore --variant memory_dedup_60s --minutes 5 -j 2 "
               "--out results/explore\n  a2a-bench run results/explore/minimal.toml --mode sim "
               "--variant memory_dedup_60s")
    xp.add_argument("--variant", default="reference",
                    help="reference node or a seeded defect (see `a2a-bench list`)")
    xp.add_argument("--seed", type=int, default=1, help="seed of the draws (default 1)")
    budget = xp.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=int, metavar="N", help="stop after N scenarios")
    budget.add_argument("--minutes", type=float, metavar="M",
                        help="stop after M minutes (default 5 when --runs is not given)")
    xp.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="scenarios run at once, one process each (default 1)")
    xp.add_argument("--out", type=Path,
                    help="folder for explore.json, failing runs and minimal.toml "
                         "(default results/explore-<variant>-s<seed>-<utc>)")
    xp.add_argument("--keep-going", action="store_true",
                    help="spend the whole budget; shrink only the first failure")
    xp.add_argument("--tx", action="append", default=[], metavar="GATEWAY",
                    help="run scenarios on another machine, one at a time per gateway: an "
                         "execnet gateway as for `matrix --tx` (repeatable, '3*ssh=…'); "
                         "the host needs this project installed where the gateway starts. "
                         "A failing run comes back into OUT; -j is then the gateway count")
    xp.add_argument("--json", action="store_true", help="print explore.json's summary as JSON")
    xp.set_defaults(handler=_explore)


def _explore(args: argparse.Namespace) -> int:
    from bench.explore import explore, write_report
    from bench.variants import variant

    try:
        variant(args.variant)
    except KeyError as exc:
        print(f"a2a-bench: {exc.args[0]}", file=sys.stderr)
        return EXIT_INVALID
    for flag, value in (("-j", args.jobs), ("--runs", args.runs), ("--minutes", args.minutes)):
        if value is not None and value <= 0:
            print(f"a2a-bench: {flag}={value} must be > 0", file=sys.stderr)
            return EXIT_INVALID
    minutes = args.minutes if args.minutes is not None or args.runs is not None else 5.0
    out = out_folder(args.out, f"explore-{args.variant}-s{args.seed}")
    if out is None:
        return EXIT_INVALID
    budget = f"{args.runs} scenarios" if args.runs else f"{minutes:g} minutes"
    say = (lambda line: None) if args.json else (lambda line: print("  " + line, flush=True))
    if args.tx:
        from bench.explore.hosts import gateways
        args.jobs = len(gateways(args.tx))
    if not args.json:
        where = f"on {args.jobs} gateways" if args.tx else f"{args.jobs} at a time"
        print(f"a2a-bench explore: variant {args.variant}, seed {args.seed}, {budget}, "
              f"{where} -> {out}/", flush=True)
    try:
        e = explore(variant=args.variant, seed=args.seed, runs=args.runs, minutes=minutes,
                    jobs=args.jobs, out=out, keep_going=args.keep_going, say=say,
                    tx=args.tx or None)
    except KeyboardInterrupt:
        print(f"a2a-bench: explore interrupted; the failing runs so far are in {out}/runs",
              file=sys.stderr)
        return EXIT_UNKNOWN
    report, summary = write_report(e, out, variant=args.variant, seed=args.seed, jobs=args.jobs)
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    else:
        print(f"explored {summary['scenarios']} scenarios in {summary['elapsed_s']} s "
              f"({summary['per_minute']}/min); report {report}")
        missed = [name for name, n in summary["situations"].items() if not n]
        print(f"situations reached: {len(summary['situations']) - len(missed)} of "
              f"{len(summary['situations'])}" + (f" (never: {', '.join(missed)})" if missed else ""))
        if e.found is None:
            print("no verdict failed")
        else:
            f = summary["found"]
            print(f"FAILED: {', '.join(e.found.failing)} in run {e.found.index} after "
                  f"{f['after_s']} s ({e.found.folder})")
            print(f"shrunk from {f['drawn_size']}\n        to   {f['shrunk_size']}")
            print(f"minimal: {e.minimal} and {out / 'minimal-topology.toml'}")
            print(f"replay:  a2a-bench run {e.minimal} --mode sim --variant {args.variant}")
    return EXIT_FALSE if e.found is not None else EXIT_OK
