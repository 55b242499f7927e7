"""`python -m bench.tools.explore_table`: how fast `a2a-bench explore` finds each seeded
defect. From nothing: the draft that first failed, the seconds it took, the checkers that
turned FALSE and the scenario's size before and after shrinking, measured, not written by
hand. Runs `a2a-bench explore --variant V --seed S --runs N -j J` once per seeded defect
(each in its own process, as a user would) and prints the Markdown table of docs/findings/explore-runs.md; the
reference row says what the same budget finds on the reference node (nothing, we hope).

    python -m bench.tools.explore_table --runs 400 -j 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.tools import Parser
from bench.variants import VARIANTS


def explore(variant: str, seed: int, runs: int, jobs: int, out: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "explore", "--variant", variant, "--seed", str(seed),
         "--runs", str(runs), "-j", str(jobs), "--out", str(out), "--json"],
        capture_output=True, text=True)
    report = out / "explore.json"
    if proc.returncode not in (0, 1) or not report.exists():
        raise SystemExit(f"explore_table: explore --variant {variant} exited {proc.returncode}: "
                         f"{proc.stderr.strip()[-400:]}")
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def _size(s: dict[str, Any] | None) -> str:
    return "-" if s is None else f"{s['faults']}/{s['nodes']}/{s['duration_s']:g} s"


def row(variant: str, r: dict[str, Any]) -> str:
    f = r["found"]
    if f is None:
        return f"| `{variant}` | not in {r['scenarios']} | - | - | - |"
    return (f"| `{variant}` | {f['run']} | {f['after_s']} | {', '.join(f['failing'])} | "
            f"{_size(f['drawn_size'])} → {_size(f['shrunk_size'])} |")


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m bench.tools.explore_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=400, help="drafts per defect (default 400)")
    p.add_argument("--seed", type=int, default=1, help="explore's seed (default 1)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="scenarios at once (default 2)")
    p.add_argument("--variant", action="append", default=[],
                   help="only these variants (repeatable; default: every one)")
    args = p.parse_args(argv)
    names = args.variant or list(VARIANTS)
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        print(f"explore_table: --variant {unknown[0]!r} is not one of {sorted(VARIANTS)}",
              file=sys.stderr)
        return 3
    print("| seeded defect | found at draft | after (s) | checkers FALSE | "
          "shrunk (faults/nodes/duration) |")
    print("|---|---|---|---|---|")
    rates = []
    with tempfile.TemporaryDirectory(prefix="explore-table-") as tmp:
        for name in names:
            r = explore(name, args.seed, args.runs, args.jobs, Path(tmp) / name)
            if r["found"] is None and r.get("per_minute"):
                rates.append(r["per_minute"])
            print(row(name, r), flush=True)
    if rates:
        print(f"\nscenarios a minute where nothing was found: {min(rates):g}–{max(rates):g} "
              f"(-j {args.jobs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
