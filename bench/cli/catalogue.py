"""What the bench holds (`list`, `describe`) and whether input files are right (`validate`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    Sub,
    clip,
)

if TYPE_CHECKING:
    pass


def add_list(sub: Sub) -> None:
    p = sub.add_parser("list", help="show scenarios, topologies, protocols, faults, checkers and "
                       "variants",
                       description="One line for each shipped scenario, topology and matrix, "
                                   "each fault kind, checker and seeded defect (variant); "
                                   "`a2a-bench describe NAME` prints the whole of one. Takes "
                                   "no arguments.")
    p.set_defaults(handler=lambda args: _list())


def add_describe(sub: Sub) -> None:
    desc = sub.add_parser(
        "describe", help="everything about one scenario, topology, matrix, fault, checker or "
                         "variant",
        description="Print the whole of one thing `list` shows a line of: a scenario (its "
                    "topology, workload, faults and what it expects, per broker too), a "
                    "topology, a matrix, a fault kind, a checker with its rules, a variant.")
    desc.add_argument("name", help="a name from `a2a-bench list`, or a .toml file")
    desc.set_defaults(handler=lambda args: _describe(args.name))


def add_validate(sub: Sub) -> None:
    val = sub.add_parser(
        "validate", help="check scenario, topology and matrix files without running them",
        description="Load each FILE as a run would (a scenario with its topology) and say "
                    "what it holds; a wrong file gets one line naming the file, the key and "
                    "what was expected.\n\nexit codes: 0 every file is valid, 3 some file is not")
    val.add_argument("files", nargs="+", type=Path, metavar="FILE",
                     help="scenario, topology or matrix files (.toml)")
    val.set_defaults(handler=lambda args: _validate(args.files))


def _list() -> int:
    from bench.checks import checkers
    from bench.faults import CATALOGUE
    from bench.spec.scenario import SCENARIOS, TOPOLOGIES
    from bench.variants import VARIANTS

    def first_line(path: Path) -> str:
        import tomllib
        try:
            d = tomllib.loads(path.read_text()).get("description", "")
        except tomllib.TOMLDecodeError:
            return "(invalid TOML)"
        text = " ".join(str(d).split())
        sentence = text.split(". ")[0]
        return clip(sentence if len(sentence) < len(text) else text, 110)

    def files(heading: str, named: list[tuple[str, Path]]) -> None:
        print(heading)
        width = max([26, *(len(n) for n, _p in named)])   # the longest name keeps rows aligned
        for name, p in named:
            print(f"  {name:<{width}} {first_line(p)}")

    print("(`a2a-bench describe NAME` shows the whole of any of these)")
    files("scenarios (scenarios/):", [(p.stem, p) for p in sorted(SCENARIOS.glob("*.toml"))
                                      if not p.name.endswith(".matrix.toml")])
    files("matrices (scenarios/*.matrix.toml, run with `a2a-bench matrix FILE`):",
          [(p.name.removesuffix(".matrix.toml"), p)
           for p in sorted(SCENARIOS.glob("*.matrix.toml"))])
    files("topologies (topologies/):", [(p.stem, p) for p in sorted(TOPOLOGIES.glob("*.toml"))])
    from bench.protocols import protocols
    print("protocols (a topology's `protocol = ...`; packages of bench/protocols/):")
    for spec in protocols().values():
        versions = " or ".join(v.value for v in spec.mqtt_versions)
        roles = ", ".join(spec.roles) or "orchestrator, executor"
        print(f"  {spec.name:<26} {spec.title}: MQTT {versions}; roles {roles}"
              + (f"; settings in [{spec.section}]" if spec.section else ""))
    print("faults:")
    for k in CATALOGUE.values():
        print(f"  {k.name:<26} {k.summary}")
        for name, prm in k.params.items():
            req = "required" if prm.required else f"default {prm.default!r}"
            print(f"      {name} ({prm.kind}, {req}): {prm.help}")
    print("checkers:")
    for name, checker in checkers().items():
        print(f"  {name:<26} {clip(' '.join(checker.summary.split()), 110)}")
        for r in checker.rules:
            print(f"      {r.id}: {clip(r.definition, 96)}")
    print("variants (--variant):")
    width = max(26, *(len(v) for v in VARIANTS))    # the longest name keeps its row aligned
    for v in VARIANTS.values():
        caught = "" if v.name == "reference" else f"  [caught by {v.caught_by} in {v.scenario}]"
        print(f"  {v.name:<{width}} {clip(v.summary, 90)}{caught}")
    return EXIT_OK


def _describe(name: str) -> int:
    from bench.spec.describe import describe
    from bench.spec.distribution import SpecError
    try:
        text = describe(name)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if text is None:
        import difflib

        from bench.spec.describe import names
        close = difflib.get_close_matches(name, names(), n=3)
        print(f"a2a-bench: nothing is called {name!r}"
              + (f"; did you mean {' or '.join(map(repr, close))}?" if close else
                 " (see `a2a-bench list`)"), file=sys.stderr)
        return EXIT_INVALID
    print(text)
    return EXIT_OK


def _validate(files: list[Path]) -> int:
    from bench.checks import judging
    from bench.spec.describe import validate
    from bench.spec.distribution import SpecError
    worst = EXIT_OK
    for path in files:
        try:
            print(f"ok   {validate(path, judging())}")
        except SpecError as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            worst = EXIT_INVALID
    return worst
