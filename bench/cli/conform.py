"""`conform`: anyone's node judged against its protocol, rule by rule, as the protocol's
conform kit says (`ProtocolSpec.conform`); `grid`: A2A-over-MQTT implementations paired."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
    command_line,
    out_folder,
    unknown_run,
)
from bench.protocols import DEFAULT, Declaration, ProtocolSpec, conform_kits, protocols

if TYPE_CHECKING:
    from bench.grid import Impl


def _listed(words: list[str], last: str = "and") -> str:
    return ", ".join(words[:-1]) + f" {last} {words[-1]}" if len(words) > 1 else "".join(words)


def _declarations() -> dict[str, tuple[Declaration, list[str]]]:
    """Every declaration a kit offers, by name: the first kit's, and the protocols whose
    kits offer it."""
    out: dict[str, tuple[Declaration, list[str]]] = {}
    for spec, kit in conform_kits():
        for d in getattr(kit, "DECLARATIONS", ()):
            out.setdefault(d.name, (d, []))[1].append(spec.name)
    return out


def _levelled() -> list[str]:
    """The protocols whose kits group their rows by level (what --level filters)."""
    return [spec.name for spec, kit in conform_kits() if getattr(kit, "LEVELS", ())]


def _dest(declaration: str) -> str:
    return declaration.replace("-", "_")


def add_conform(sub: Sub) -> None:
    kits = conform_kits()
    brokers: dict[str, list[str]] = {}
    for spec, kit in kits:
        brokers.setdefault(kit.BROKER, []).append(spec.name)
    cf = sub.add_parser(
        "conform", help="judge anyone's node against its protocol, rule by rule",
        description="".join(f"{kit.HELP}\n\n" for _spec, kit in kits) +
                    "exit codes: 0 every row PASS (or not applicable: a part the node declares\n"
                    "it leaves out), 1 a MUST FAILs (or a SHOULD, with --strict), 2 no such\n"
                    "FAIL but some row UNKNOWN, 3 invalid arguments",
        epilog="besides the table, the run's folder holds compatibility.json (per row: level,\n"
               "status, evidence, the run and seed, the command that runs it again; schema:\n"
               "docs/schemas/compatibility.schema.json), junit.xml for CI (schema:\n"
               "docs/schemas/junit.xsd) and conform.html.\n\n"
               "example: " + "\n         ".join(line for _spec, kit in kits
                                                   for line in kit.EXAMPLES))
    cf.add_argument("cmd", metavar="CMD", nargs="?", default=None,
                    help="the node's command line (one argument; quote it)")
    cf.add_argument("--image", default=None, metavar="IMAGE",
                    help="instead of CMD: the node as a container of IMAGE, built beforehand "
                         "(docker build), its entrypoint speaking the node-process protocol "
                         "on stdin and stdout (docs/PROTOCOL.md); the runs use --mode docker")
    cf.add_argument("--protocol", "--profile", dest="profile",
                    choices=sorted(protocols()), default=DEFAULT,
                    help="the protocol: " + ", ".join(
                        f"{spec.title} (CMD as its {kit.ROLES[0]}s"
                        f"{', default' if spec.name == DEFAULT else ''})" for spec, kit in kits))
    cf.add_argument("--role", choices=sorted({r for p in protocols().values() for r in p.roles}),
                    default=None,
                    help="what CMD plays (the first the default) — " + "; ".join(
                        f"{spec.name}: every {' or every '.join(kit.ROLES)}"
                        for spec, kit in kits if len(kit.ROLES) > 1))
    cf.add_argument("--broker", choices=["amqtt", "mosquitto"], default=None,
                    help="the embedded broker to run on (default: " + "; ".join(
                        f"{broker} for {_listed(names)}" for broker, names in brokers.items())
                         + ")")
    cf.add_argument("--level", choices=["must", "should", "may"], default="may",
                    help=f"{', '.join(_levelled())}: the clauses down to this level (must: "
                         "MUST and MUST NOT only; default: every level)")
    for name, (d, owners) in _declarations().items():
        cf.add_argument(f"--{name}", dest=_dest(name), action="store_true",
                        help=f"{', '.join(owners)}: {d.help}")
    cf.add_argument("--strict", action="store_true",
                    help="a SHOULD that FAILs fails the run too (exit 1); without it a SHOULD "
                         "that fails is reported and only a MUST fails the run")
    cf.add_argument("--only", action="append", default=[], metavar="RUN",
                    help="only this run of the suite (repeatable): a row's replay, as "
                         "compatibility.json gives it")
    cf.add_argument("--impl-version", default=None, metavar="TEXT",
                    help="the implementation's version, for the report (e.g. "
                         "'a2a-over-mqtt 0.1.0')")
    cf.add_argument("--out", type=Path, default=None,
                    help="where the runs go (default: results/conform-<utc time>)")
    cf.add_argument("--json", action="store_true", help="print the rows as JSON")
    cf.set_defaults(handler=_conform)


def _broker_refusal(spec: ProtocolSpec, broker: str) -> str | None:
    """Why `broker` cannot carry the protocol (it speaks none of its MQTT versions), or
    None when it can."""
    from bench.spec.brokers import BEHAVIOURS
    from bench.spec.topology import MqttVersion
    from bench.substrates.live import EMBEDDED

    def speaks(name: str) -> list[str]:
        return [MqttVersion.V311, *([MqttVersion.V5] if BEHAVIOURS[name].v5 is not None
                                      else [])]
    if set(spec.mqtt_versions) & set(speaks(broker)):
        return None
    others = [b for b in EMBEDDED if set(spec.mqtt_versions) & set(speaks(b))]
    return (f"the profile speaks MQTT {_listed(list(spec.mqtt_versions), 'or')} and {broker} "
            f"{_listed(speaks(broker))} only; use --broker {' or --broker '.join(others)}")


def _conform(args: argparse.Namespace) -> int:
    from bench.certify import Meta, exit_code, fails, write
    from bench.conform import PROFILES, conform, render
    if (args.cmd is None) == (args.image is None):
        print("a2a-bench: conform: expected the node's command line (CMD) or --image IMAGE, "
              "one of the two", file=sys.stderr)
        return EXIT_INVALID
    argv = () if args.cmd is None else command_line(args.cmd, f"conform {args.cmd!r}")
    if argv is None:
        return EXIT_INVALID
    key = args.profile if args.role in (None, PROFILES[args.profile].role) \
        else f"{args.profile}/{args.role}"
    if key not in PROFILES:
        roles = sorted(p.role for p in PROFILES.values() if p.name == args.profile)
        print(f"a2a-bench: conform --protocol {args.profile} --role {args.role}: its CMD "
              f"plays {' or '.join(roles)}", file=sys.stderr)
        return EXIT_INVALID
    profile = PROFILES[key]
    broker = args.broker or profile.broker
    refusal = _broker_refusal(protocols()[args.profile], broker)
    if refusal is not None:
        print(f"a2a-bench: conform --profile {args.profile} --broker {broker}: {refusal}",
              file=sys.stderr)
        return EXIT_INVALID
    offered = _declarations()
    declares = frozenset(name for name in offered if getattr(args, _dest(name)))
    if (args.level != "may" and not profile.levels) \
            or declares - {d.name for d in profile.declarations}:
        owners = list(dict.fromkeys([*_levelled(), *(n for _d, ns in offered.values()
                                                     for n in ns)]))
        flags = [*(["--level"] if _levelled() else []), *(f"--{name}" for name in offered)]
        print(f"a2a-bench: conform: {_listed(flags)} are the {' and '.join(owners)} "
              f"profile's (--protocol {' or --protocol '.join(owners)})", file=sys.stderr)
        return EXIT_INVALID
    if unknown_run(args.only, [name for name, _s, _w in profile.suite], "conform"):
        return EXIT_INVALID
    if args.image:   # as `run --mode docker` refuses a topology's image it cannot start
        from bench.spec.scenario import SCENARIOS, load_scenario
        from bench.substrates import Choice, substrate
        first = load_scenario(SCENARIOS / f"{profile.suite[0][0]}.toml") \
            .with_node_image(profile.role, args.image)
        image_refusal = substrate("docker").refusal(first, Choice(broker=broker))
        if image_refusal is not None:
            print(f"a2a-bench: conform --image: {image_refusal}", file=sys.stderr)
            return EXIT_INVALID
    out = out_folder(args.out, "conform")
    if out is None:
        return EXIT_INVALID
    if not args.json:
        skipped = profile.skipped(declares)
        runs = sum(1 for name, _s, _w in profile.suite
                   if name not in skipped and (not args.only or name in args.only))
        shown = f"--image {args.image}" if args.image else shlex.join(argv)
        print(f"conform {shown}: {profile.setup}, on {broker}"
              f"{' (its containers: --mode docker)' if args.image else ''}; {runs} short "
              f"run{'s' if runs != 1 else ''} into {out}/")
    rows = conform(argv, out, broker, say=(lambda line: None) if args.json else print,
                   profile=key, declares=declares, only=tuple(args.only), image=args.image)
    levels = {"must": ("MUST", "MUST NOT"), "should": ("MUST", "MUST NOT", "SHOULD"),
              "may": ("MUST", "MUST NOT", "SHOULD", "MAY")}[args.level]
    rows = [r for r in rows if r.level is None or r.level in levels]
    meta = Meta(tuple(argv), args.profile, profile.role, broker, out,
                json.loads((out / "conform.json").read_text())["seeds"],
                args.impl_version, args.strict, args.level, args.image)
    written = write(rows, meta)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        print(render(rows))
        failing = [r for r in rows if fails(r, args.strict)]
        kept_back = [r for r in rows if r.status == "FAIL" and not fails(r, args.strict)]
        if kept_back:
            print(f"{len(kept_back)} SHOULD not kept: reported, not failing the run "
                  "(--strict fails it)")
        if failing:
            print(f"fails the run: {', '.join(r.rule.ids for r in failing)}")
        print(f"report: {', '.join(str(p) for p in written)}")
    # a part the node declares it leaves out is UNKNOWN in the table, as a run says it,
    # and no more a failure of the node than in a run
    return {1: EXIT_FALSE, 2: EXIT_UNKNOWN, 0: EXIT_OK}[exit_code(rows, args.strict)]


def add_grid(sub: Sub) -> None:
    gr = sub.add_parser(
        "grid", help="A2A over MQTT: conform per broker x responder x requester",
        description="Brokers x responders x requesters, each cell the conform suites of both\n"
                    "roles run once with that responder as every responder and that requester in\n"
                    "front (the reference for a side not given), judged per role as conform\n"
                    "judges (a violation counts against the side its counterexample is about).\n"
                    "A cell makes each run of both suites once; --only keeps some.\n\n"
                    "exit codes: 0 every cell's every clause PASS, 1 a MUST FAILs in some cell,\n"
                    "2 no such FAIL but some clause UNKNOWN, 3 invalid arguments",
        epilog="the folder holds grid.json (per cell: each role's counts, exit code, failed\n"
               "clauses, and its compatibility.json), grid.md and grid.html; each cell's folder\n"
               "its runs and, per role, compatibility.json, junit.xml and conform.html.\n\n"
               "example: a2a-bench grid --responder 'sdk=python examples/emqx-sdk/responder.py'"
               " \\\n"
               "             --requester 'sdk=python examples/emqx-sdk/requester.py' \\\n"
               "             --declare sdk=no-tokens --impl-version 'sdk=a2a-over-mqtt 0.1.0'\n"
               "         a2a-bench grid --responder 'mine=./my-agent' --only a2a_quickstart")
    gr.add_argument("--responder", action="append", default=[], metavar="NAME=CMD",
                    help="a responder besides the reference: its name in the grid, then its "
                         "command line (repeatable)")
    gr.add_argument("--requester", action="append", default=[], metavar="NAME=CMD",
                    help="a requester besides the reference (repeatable)")
    gr.add_argument("--broker", action="append", default=[], choices=["amqtt", "mosquitto"],
                    help="a broker to run every cell on (repeatable; default: every embedded "
                         "broker that speaks MQTT 5)")
    gr.add_argument("--no-reference", action="store_true",
                    help="leave the reference out of the sides given implementations")
    gr.add_argument("--declare", action="append", default=[], metavar="NAME=WHAT",
                    help="what the implementation NAME leaves out, as conform's flags say it: "
                         "core (no Extended clause), no-tokens (no bearer tokens), or both "
                         "(core,no-tokens); those clauses are then not applicable to it "
                         "(repeatable)")
    gr.add_argument("--impl-version", action="append", default=[], metavar="NAME=VERSION",
                    help="the version of implementation NAME, for its reports (repeatable)")
    gr.add_argument("--only", action="append", default=[], metavar="RUN",
                    help="only this run of the suites (repeatable)")
    gr.add_argument("--out", type=Path, default=None,
                    help="where the cells go (default: results/grid-<utc time>)")
    gr.add_argument("--json", action="store_true", help="print grid.json")
    gr.set_defaults(handler=_grid)


def _impls(given: list[str], flag: str, reference: bool) -> tuple[Impl, ...] | None:
    from bench.grid import REFERENCE, Impl
    impls = [Impl(REFERENCE)] if reference or not given else []
    for text in given:
        name, eq, cmd = text.partition("=")
        if not eq or not name or any(c in name for c in "/ ") or name == REFERENCE:
            print(f"a2a-bench: grid {flag} {text!r}: expected NAME=CMD, a name of its own "
                  f"(no '/' or space, not {REFERENCE!r}) then the command line",
                  file=sys.stderr)
            return None
        argv = command_line(cmd, f"grid {flag} {name}=…")
        if argv is None:
            return None
        if name in {i.name for i in impls}:
            print(f"a2a-bench: grid {flag} {name}=…: that name is given twice", file=sys.stderr)
            return None
        impls.append(Impl(name, argv))
    return tuple(impls)


def _declared(responders: tuple[Impl, ...], requesters: tuple[Impl, ...],
              declare: list[str], versions: list[str]
              ) -> tuple[tuple[Impl, ...], tuple[Impl, ...]] | None:
    """The implementations with what --declare and --impl-version say of each, by name."""
    from dataclasses import replace

    from bench.grid import DECLARATIONS
    names = {i.name for i in (*responders, *requesters) if i.command}
    said: dict[str, dict[str, Any]] = {}
    for flag, given in (("--declare", declare), ("--impl-version", versions)):
        for text in given:
            name, eq, what = text.partition("=")
            if not eq or name not in names:
                print(f"a2a-bench: grid {flag} {text!r}: expected NAME=…, NAME one of the "
                      f"implementations given ({', '.join(sorted(names)) or 'none'})",
                      file=sys.stderr)
                return None
            if flag == "--impl-version":
                said.setdefault(name, {})["version"] = what
                continue
            parts = {p.strip() for p in what.split(",")}
            if not parts <= set(DECLARATIONS):
                print(f"a2a-bench: grid --declare {text!r}: expected "
                      f"{' or '.join(DECLARATIONS)} (comma-separated), not "
                      f"{', '.join(sorted(parts - set(DECLARATIONS)))}", file=sys.stderr)
                return None
            said.setdefault(name, {}).setdefault("declares", frozenset())
            said[name]["declares"] |= parts
    return (tuple(replace(i, **said.get(i.name, {})) for i in responders),
            tuple(replace(i, **said.get(i.name, {})) for i in requesters))


def _grid(args: argparse.Namespace) -> int:
    from bench.grid import PROTOCOL, grid, mqtt5_brokers, render, suite, to_json
    responders = _impls(args.responder, "--responder", not args.no_reference)
    requesters = _impls(args.requester, "--requester", not args.no_reference)
    if responders is None or requesters is None:
        return EXIT_INVALID
    sides = _declared(responders, requesters, args.declare, args.impl_version)
    if sides is None:
        return EXIT_INVALID
    responders, requesters = sides
    brokers = tuple(dict.fromkeys(args.broker)) or mqtt5_brokers()
    for broker in brokers:
        refusal = _broker_refusal(protocols()[PROTOCOL], broker)
        if refusal is not None:
            print(f"a2a-bench: grid --broker {broker}: {refusal}", file=sys.stderr)
            return EXIT_INVALID
    if unknown_run(args.only, [name for name, _s, _w in suite()], "grid", suites=True):
        return EXIT_INVALID
    out = out_folder(args.out, "grid")
    if out is None:
        return EXIT_INVALID
    cells_n = len(brokers) * len(responders) * len(requesters)
    say = (lambda line: None) if args.json else print
    say(f"grid: {cells_n} cell{'s' if cells_n != 1 else ''} ({len(brokers)} broker x "
        f"{len(responders)} responder x {len(requesters)} requester), "
        f"{len(suite(tuple(args.only)))} runs each, into {out}/")
    cells = grid(brokers, responders, requesters, out, tuple(args.only), say)
    if args.json:
        print(json.dumps(to_json(cells), indent=2))
    else:
        print(render(cells))
        print(f"report: {out / 'grid.html'}, {out / 'grid.json'}")
    codes = {c.exit_code(role) for c in cells for role in ("responder", "requester")}
    return EXIT_FALSE if 1 in codes else EXIT_UNKNOWN if 2 in codes else EXIT_OK
