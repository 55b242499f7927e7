"""Same seed, same bytes: every shipped scenario's sim hashes against
`tests/data/golden-sim.json`. The hashes are of what each writes in simulation (its
history, verdicts and metrics).

A change that must not alter behaviour (a refactor, a faster simulator) leaves every hash
as it was; one that means to (a fix in the node, the simulator or a checker) rewrites the
file with `--write`, and the diff of that file shows which scenarios it touched.

    python -m bench.tools.golden            # compare; exit 1 and name what differs
    python -m bench.tools.golden --write    # record the current hashes
    python -m bench.tools.golden -j 2 restart partition   # some scenarios, two at a time
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.spec.scenario import REPO, SCENARIOS
from bench.tools import Parser

GOLDEN = REPO / "tests" / "data" / "golden-sim.json"
#: What a sim run writes that depends only on the scenario and the code (summary.json holds
#: wall times; report.md quotes them).
HASHED = ("history.jsonl", "verdicts.json", "metrics.json")


def shipped() -> list[Path]:
    return sorted(p for p in SCENARIOS.glob("*.toml") if not p.name.endswith(".matrix.toml"))


def hashes_of(out_dir: Path) -> dict[str, str]:
    """The sha256 (first 16 hex digits) of each file of HASHED in a run folder."""
    return {name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest()[:16]
            for name in HASHED}


def recorded() -> dict[str, dict[str, str]]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def differences(stem: str, got: dict[str, str], golden: dict[str, dict[str, str]]) -> list[str]:
    """What differs between a run's hashes and the recorded ones, one line each."""
    want = golden.get(stem)
    if want is None:
        return [f"{stem}: no recorded hashes (python -m bench.tools.golden --write)"]
    return [f"{stem}: {name} {want.get(name)} -> {got[name]}" for name in HASHED
            if want.get(name) != got[name]]


def run_one(path: Path) -> tuple[str, dict[str, str]]:
    from bench.run import run_scenario
    from bench.spec.scenario import load_scenario
    from bench.variants import REFERENCE
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        run_scenario(load_scenario(path), REFERENCE, Path(tmp), mode="sim")
        return path.stem, hashes_of(Path(tmp))


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m bench.tools.golden", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="scenario names (default: every shipped one)")
    ap.add_argument("--write", action="store_true", help="record the hashes instead")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="scenarios run at once")
    args = ap.parse_args(argv)
    paths = [p for p in shipped() if not args.names or p.stem in args.names]
    unknown = set(args.names) - {p.stem for p in paths}
    if unknown:
        print(f"golden: no shipped scenario called {sorted(unknown)}", file=sys.stderr)
        return 3
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        got = dict(pool.map(run_one, paths))
    golden = recorded()
    if args.write:
        GOLDEN.write_text(json.dumps(golden | got, indent=1, sort_keys=True) + "\n")
        print(f"golden: recorded {len(got)} scenarios in {GOLDEN.relative_to(REPO)}")
        return 0
    wrong = [line for stem, h in sorted(got.items()) for line in differences(stem, h, golden)]
    for line in wrong:
        print(line)
    print(f"golden: {len(got) - len({w.split(':')[0] for w in wrong})} of {len(got)} "
          "scenarios give the recorded bytes")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
