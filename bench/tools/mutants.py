"""`python -m bench.tools.mutants`: how many small bugs in the seed node the verdicts catch.

The seed node: the seed protocol's machines (`bench/protocols/seed`) and what they share
with every host (`bench/core`).

A mutant is the protocol core with one small change, of the kind a person makes: a
comparison off by one (`<` for `<=`), a condition inverted or its `and` made `or`, a
count off by one or a duration or size off by a factor of ten, `True` for `False`, `+`
for `-`, or a command never issued (an `fx.add(...)` dropped: a timer not started, a
record not persisted, a message not sent).
Each mutant runs the default matrix in simulation, reference cells only (the seeded
defects are other nodes), from a copy of the package, so nothing here imports it; the
mutant is *killed* when some cell's verdict turns FALSE where the reference is TRUE or
UNKNOWN — the verdicts alone, not our unit tests, as a user pointing the bench at their
own node would see it. A survivor then gets an exploration budget (`a2a-bench explore`,
exit 1 = killed), and so does a mutant whose every history is byte-identical to the
unmutated run's: the matrix never took its path, random scenarios may.

Equivalence cannot be decided; a mutant that changed no history and that exploration
never caught is reported apart (equivalent, or on a path nothing reached); the kill
rate counts the rest. Results: JSON lines, one
per mutant, and a summary.

    python -m bench.tools.mutants --sample 40 --seed 1 --explore-minutes 1 --out DIR

Hand-written bugs are judged the same way: each a unified diff against the repository (as
`git diff` writes it), its first lines starting with `#` saying what bug it is. A bug found
to be no bug at all — equivalent, or behaviour the specification allows — keeps its patch
with a line `# equivalent: <the argument, in one sentence>`; uncaught, it is reported apart
with its argument and left out of the kill rate; caught, the argument is printed as wrong.
The held-out set of `tests/data/mutants/` is one command:

    python -m bench.tools.mutants --patches tests/data/mutants --out DIR
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.tools import Parser

REPO = Path(__file__).resolve().parents[2]
#: the seed protocol's node: what every host shares (bench/core) and its own machines
CORE = (REPO / "bench" / "core", REPO / "bench" / "protocols" / "seed")
#: Modules that only declare data (events, inputs, commands, vocabularies): a change there
#: is a schema change, not a bug in behaviour.
DECLARATIONS = {"__init__.py", "events.py", "inputs.py", "commands.py", "outcome.py",
                "vocabulary.py", "fields.py",
                # the seed package's parts that are no node code
                "explore.py", "conform.py"}
SWAPS: dict[type[ast.AST], type[ast.AST]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.And: ast.Or, ast.Or: ast.And,
    ast.Add: ast.Sub, ast.Sub: ast.Add}
#: A mutant that makes the matrix ten times slower than the core's ~30 s counts as caught
#: (it hangs or spins: a user would notice).
MUTANT_TIMEOUT_S = 300


@dataclass(frozen=True, slots=True)
class Site:
    """One place a mutation can be made: the n-th candidate node of its kind in a file."""

    file: str          # relative to the repository
    line: int
    kind: str          # swap | negate | constant | drop_command
    index: int         # among the file's sites, in walk order
    what: str
    col: int = 0       # with line, end_col, kind, what and operand: the site across edits
    end_col: int = 0
    operand: int = 0   # which comparison of a chained one
    text: str = ""     # its line, stripped: finds it again after edits move it


def _swap(op: ast.AST) -> str:
    return f"{type(op).__name__} -> {SWAPS[type(op)].__name__}"


def _candidates(tree: ast.AST) -> Iterator[tuple[ast.AST, int, str, str]]:
    """(node, which operand of it, kind, description). Operators are shared singletons in
    a parsed tree, so a swap names the expression that holds the operator (and, in a
    chained comparison, which one), never the operator object."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in SWAPS:
                    yield node, i, "swap", _swap(op)
        elif isinstance(node, (ast.BoolOp, ast.BinOp)) and type(node.op) in SWAPS:
            yield node, 0, "swap", _swap(node.op)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, 0, "negate", "not x -> x"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node, 0, "constant", f"{node.value} -> {not node.value}"
        elif isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1:
            yield node, 0, "constant", f"{node.value} -> {_nudged(node.value)}"
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "add" \
                and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "fx":
            yield node, 0, "drop_command", "fx.add(...) dropped"


def _nudged(value: int) -> int:
    """A small count off by one; a size or a duration off by a factor of ten (a unit slip)."""
    return value + 1 if value <= 16 else value // 10


def sites() -> list[Site]:
    out = []
    for path in sorted(p for folder in CORE for p in folder.glob("*.py")):
        if path.name in DECLARATIONS:
            continue
        source = path.read_text()
        lines = source.splitlines()
        rel = str(path.relative_to(REPO))
        for i, (node, operand, kind, what) in enumerate(_candidates(ast.parse(source))):
            line = getattr(node, "lineno", 0)
            out.append(Site(rel, line, kind, i, what, getattr(node, "col_offset", 0),
                            getattr(node, "end_col_offset", 0), operand,
                            lines[line - 1].strip() if line else ""))
    return out


def find_again(every: list[Site], record: dict[str, Any]) -> Site | None:
    """The site an earlier record names, after edits: by what it changes and the text of
    its line (an edit above it moves its line number; an AST walk's index moves with any
    edit of the file), the same line preferred where the text repeats. A record without
    the text (older files) must still be on its line."""
    def same(s: Site) -> bool:
        return (s.file, s.kind, s.what, s.col, s.end_col, s.operand) == (
            record["file"], record["kind"], record["what"], record.get("col", s.col),
            record.get("end_col", s.end_col), record.get("operand", s.operand))
    text = record.get("text")
    found = [s for s in every if same(s) and (s.text == text if text else s.line == record["line"])]
    if len(found) > 1:
        found = [s for s in found if s.line == record["line"]]
    return found[0] if len(found) == 1 else None


class _Mutate(ast.NodeTransformer):
    def __init__(self, target: ast.AST, operand: int, kind: str) -> None:
        self.target, self.operand, self.kind = target, operand, kind

    def visit(self, node: ast.AST) -> Any:
        if node is self.target:
            if isinstance(node, ast.Compare):
                node.ops[self.operand] = SWAPS[type(node.ops[self.operand])]()  # type: ignore[call-overload]
                return node
            if isinstance(node, (ast.BoolOp, ast.BinOp)):
                node.op = SWAPS[type(node.op)]()  # type: ignore[assignment]
                return node
            if self.kind == "negate":
                return node.operand  # type: ignore[attr-defined]
            if self.kind == "constant":
                value = node.value  # type: ignore[attr-defined]
                return ast.Constant(not value if type(value) is bool else _nudged(value))
            if self.kind == "drop_command":
                return ast.Expr(ast.Constant(None))
        return self.generic_visit(node)


def mutated_source(site: Site) -> str:
    tree = ast.parse((REPO / site.file).read_text())
    target, operand, kind, _ = list(_candidates(tree))[site.index]
    return ast.unparse(ast.fix_missing_locations(_Mutate(target, operand, kind).visit(tree)))


def _copy(into: Path, source: Path = REPO) -> None:
    """The package and its scenario folders, as a mutant's private tree."""
    if into.exists():
        shutil.rmtree(into)
    for name in ("bench", "scenarios", "topologies"):
        shutil.copytree(source / name, into / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "results"))


def run_matrix(tree: Path, jobs: int) -> dict[str, Any]:
    """The default matrix's reference cells from `tree`; per cell its verdicts and a
    digest of its history."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench", "matrix", str(tree / "scenarios/default.matrix.toml"),
             "-j", str(jobs), "--id", "m", "--fresh", "-k", "reference"],
            cwd=tree, env=env, capture_output=True, text=True, timeout=MUTANT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"timeout": True, "wall_s": time.perf_counter() - t0, "cells": {}}
    cells = {}
    for cell_json in sorted((tree / "results/m/cells").glob("*/cell.json")):
        record = json.loads(cell_json.read_text())
        history = cell_json.parent / "history.jsonl"
        cells[record["cell"]["id"]] = {
            "verdicts": record["verdicts"], "expect": record["expect"],
            "digest": hashlib.sha1(history.read_bytes()).hexdigest() if history.exists() else None}
    return {"timeout": False, "rc": proc.returncode, "wall_s": time.perf_counter() - t0,
            "cells": cells, "tail": proc.stdout[-600:] + proc.stderr[-600:]}


def caught(result: dict[str, Any], base: dict[str, Any] | None = None) -> list[str]:
    """Cells where a verdict turned FALSE that the reference does not give there: one its
    scenario does not expect FALSE, or, where it expects either (a pooled retry may run
    twice), one the unmutated run (`base`) did not give FALSE."""
    def was_false(cid: str, name: str) -> bool:
        return base is None or base["cells"].get(cid, {}).get("verdicts", {}).get(name) == "false"
    return sorted(f"{cid}: {name}" for cid, cell in result["cells"].items()
                  for name, value in cell["verdicts"].items()
                  if value == "false" and cell["expect"].get(name) != "false"
                  and not (cell["expect"].get(name) == "either" and was_false(cid, name)))


def explore(tree: Path, minutes: float, jobs: int, seed: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    out = tree / "explore"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "explore", "--minutes", str(minutes), "-j", str(jobs),
         "--seed", str(seed), "--out", str(out), "--json"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=minutes * 60 + 900)
    found = None
    if proc.returncode == 1 and (out / "explore.json").exists():
        report = json.loads((out / "explore.json").read_text())
        if report.get("found"):
            f = report["found"]
            found = f"{', '.join(f['failing'])} after {f['after_s']} s (run {f['run']})"
    return {"rc": proc.returncode, "found": found}


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m bench.tools.mutants", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sample", type=int, default=40, help="mutants to run (default 40)")
    p.add_argument("--seed", type=int, default=1, help="which mutants are drawn (default 1)")
    p.add_argument("--explore-minutes", type=float, default=0.0,
                   help="exploration budget per survivor (default 0: none)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="cells at once (default 2)")
    p.add_argument("--out", type=Path, default=Path("results/mutants"), help="results folder")
    p.add_argument("--list", action="store_true", help="print every mutation site and exit")
    p.add_argument("--again", type=Path, metavar="JSONL",
                   help="run the mutants of an earlier mutants.jsonl again instead of drawing")
    p.add_argument("--status", action="append", default=[],
                   help="with --again: only mutants that had this status (repeatable)")
    p.add_argument("--patch", type=Path, action="append", default=[], metavar="FILE",
                   help="a hand-written bug, a unified diff against the repository, instead "
                        "of drawn mutants (repeatable)")
    p.add_argument("--patches", type=Path, metavar="DIR",
                   help="every *.patch in DIR, as --patch each")
    args = p.parse_args(argv)
    patches = [*args.patch, *(sorted(args.patches.glob("*.patch")) if args.patches else [])]
    if patches:
        return run_patches(patches, args)
    every = sites()
    if args.list:
        for s in every:
            print(f"{s.file}:{s.line} {s.kind} {s.what}")
        print(f"{len(every)} sites", file=sys.stderr)
        return 0
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.again:
        earlier = [json.loads(line) for line in args.again.read_text().splitlines()]
        wanted = [r for r in earlier if not args.status or r["status"] in args.status]
        chosen = []
        for r in wanted:
            site = find_again(every, r)
            if site is None:
                print(f"skipped: {r['file']}:{r['line']} {r['what']} is no longer a "
                      "mutation site (the source moved on)", flush=True)
            else:
                chosen.append(site)
    else:
        chosen = random.Random(args.seed).sample(every, min(args.sample, len(every)))
    print(f"{len(every)} mutation sites in the seed's node; running {len(chosen)} (seed {args.seed})",
          flush=True)
    base_tree = args.out / "tree-base"   # the source as it is now: later edits do not leak in
    _copy(base_tree)
    base = run_matrix(base_tree, args.jobs)
    assert not caught(base), f"the unmutated core fails the matrix: {caught(base)[:3]}"
    if not base["cells"]:
        raise SystemExit(f"the unmutated matrix ran no cell: {base.get('tail', '')}")
    digests = {cid: cell["digest"] for cid, cell in base["cells"].items()}
    print(f"baseline: {len(digests)} reference cells in {base['wall_s']:.0f} s", flush=True)
    if args.explore_minutes > 0:   # an exploration that fails the core itself kills nothing
        clean = explore(base_tree, args.explore_minutes, args.jobs, args.seed)["found"]
        if clean:
            raise SystemExit(f"exploring the unmutated core already fails: {clean}")
        print(f"baseline: {args.explore_minutes} min of exploring finds nothing", flush=True)
    log = (args.out / "mutants.jsonl").open("w")
    tree = args.out / "tree"
    for n, site in enumerate(chosen, 1):
        _copy(tree, base_tree)
        (tree / site.file).write_text(mutated_source(site))
        result = run_matrix(tree, args.jobs)
        hits = caught(result, base)
        changed = sorted(cid for cid, cell in result["cells"].items()
                         if cell["digest"] != digests.get(cid))
        if result["timeout"]:
            status = "killed_by_timeout"
        elif len(result["cells"]) < len(digests):
            status = "broke_the_run"      # cells missing: the mutant does not even run
        elif hits:
            status = "killed_by_matrix"
        elif not changed:
            status = "no_history_changed"
        else:
            status = "survived_matrix"
        found = None
        if status in ("survived_matrix", "no_history_changed") and args.explore_minutes > 0:
            # the matrix never took the mutated path, or took it and judged nothing wrong:
            # random scenarios may take it
            found = explore(tree, args.explore_minutes, args.jobs, args.seed)["found"]
            status = ("killed_by_explore" if found else
                      "survived" if status == "survived_matrix" else "never_caught_unchanged")
        record = {**asdict(site), "status": status, "caught": hits[:5],
                  "changed_cells": len(changed), "explore": found,
                  "wall_s": round(result["wall_s"], 1)}
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(f"[{n}/{len(chosen)}] {status:20} {site.file}:{site.line} {site.what}"
              + (f" — {hits[0]}" if hits else ""), flush=True)
    log.close()
    return summarize(args.out / "mutants.jsonl")


#: The line of a hand-written bug that argues it is none (equivalent, or allowed)
EQUIVALENT = "# equivalent:"


def describe(patch: Path) -> str:
    """What a hand-written bug is: its leading `#` lines (its argument apart)."""
    lines = [line[1:].strip() for line in patch.read_text().splitlines()
             if line.startswith("#") and not line.startswith(EQUIVALENT)]
    return " ".join(lines) or patch.stem


def argued(patch: Path) -> str | None:
    """Why a hand-written bug is argued to be none (its `# equivalent:` line), or None."""
    return next((line[len(EQUIVALENT):].strip() for line in patch.read_text().splitlines()
                 if line.startswith(EQUIVALENT)), None)


def apply_patch(tree: Path, patch: Path) -> str | None:
    """Apply `patch` to the private tree; why it does not apply, or None."""
    done = subprocess.run(["patch", "-p1", "--forward", "--batch", "-d", str(tree),
                           "-i", str(patch.resolve())], capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stdout + done.stderr).strip()[-300:]


def run_patches(patches: list[Path], args: argparse.Namespace) -> int:
    """Each hand-written bug through the default matrix's reference cells (and, if it
    survives, an exploration budget): killed or survived, as for drawn mutants."""
    missing = [p for p in patches if not p.is_file()]
    if missing:
        print(f"mutants: no such patch {missing[0]}", file=sys.stderr)
        return 3
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    base_tree = args.out / "tree-base"
    _copy(base_tree)
    base = run_matrix(base_tree, args.jobs)
    assert not caught(base), f"the unpatched core fails the matrix: {caught(base)[:3]}"
    digests = {cid: cell["digest"] for cid, cell in base["cells"].items()}
    print(f"baseline: {len(digests)} reference cells in {base['wall_s']:.0f} s; "
          f"{len(patches)} hand-written bugs", flush=True)
    log = (args.out / "mutants.jsonl").open("w")
    tree = args.out / "tree"
    for n, patch in enumerate(patches, 1):
        _copy(tree, base_tree)
        refused = apply_patch(tree, patch)
        record: dict[str, Any] = {"file": patch.name, "line": 0, "what": describe(patch),
                                  "kind": "patch", "equivalent": argued(patch)}
        if refused is not None:
            record |= {"status": "does_not_apply", "why": refused}
        else:
            result = run_matrix(tree, args.jobs)
            hits = caught(result, base)
            changed = sorted(cid for cid, cell in result["cells"].items()
                             if cell["digest"] != digests.get(cid))
            status = ("killed_by_timeout" if result["timeout"] else
                      "broke_the_run" if len(result["cells"]) < len(digests) else
                      "killed_by_matrix" if hits else
                      "no_history_changed" if not changed else "survived_matrix")
            found = None
            if status in ("survived_matrix", "no_history_changed") and args.explore_minutes > 0 \
                    and not record["equivalent"]:
                found = explore(tree, args.explore_minutes, args.jobs, args.seed)["found"]
                status = ("killed_by_explore" if found else
                          "survived" if status == "survived_matrix" else "never_caught_unchanged")
            if record["equivalent"] and not status.startswith("killed"):
                status = "argued_equivalent"
            record |= {"status": status, "caught": hits[:5], "changed_cells": len(changed),
                       "explore": found, "wall_s": round(result["wall_s"], 1)}
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(f"[{n}/{len(patches)}] {record['status']:20} {patch.name}"
              + (f" — {record['caught'][0]}" if record.get("caught") else ""), flush=True)
    log.close()
    return summarize(args.out / "mutants.jsonl")


def summarize(path: Path) -> int:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    by: dict[str, int] = {}
    for r in records:
        by[r["status"]] = by.get(r["status"], 0) + 1
    killed = sum(n for s, n in by.items() if s.startswith("killed"))
    judged = killed + by.get("survived_matrix", 0) + by.get("survived", 0)
    unchanged = by.get("no_history_changed", 0) + by.get("never_caught_unchanged", 0)
    print("\n" + ", ".join(f"{s} {n}" for s, n in sorted(by.items())))
    if judged:
        matrix = by.get("killed_by_matrix", 0) + by.get("killed_by_timeout", 0)
        print(f"kill rate: {killed}/{judged} = {killed / judged:.0%} of the mutants that changed "
              f"a history or were caught (matrix alone: {matrix}/{judged} = "
              f"{matrix / judged:.0%}); {unchanged} changed no history and were never caught "
              "(equivalent, or on a path nothing reached)")
    for r in records:
        if r["status"] in ("survived", "survived_matrix", "no_history_changed",
                           "never_caught_unchanged"):
            print(f"  {r['status']}: {r['file']}:{r['line']} {r['what']}")
    for r in records:
        if r["status"] == "argued_equivalent":
            print(f"  argued equivalent, left out: {r['file']}: {r['equivalent']}")
        elif r.get("equivalent") and r["status"].startswith("killed"):
            print(f"  argued equivalent but caught (the argument is wrong): {r['file']}: "
                  f"{r['caught'][0] if r.get('caught') else r['status']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
